"""Candidate serving pairs and pricing (optimizer.pairs) against the full model.

Small synthetic scenarios are built twice: with every eligible pair (the full model),
and from candidates with the rest priced in (max_full_pairs=0 forces that path). The
priced LP must reach the full model's LP relaxation exactly, every bound it states must
be below it, and the plans it leads to must be feasible for the full model and never
better than the full optimum.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from helpers import solved_lp
from dcplace.models import load_scenario
from dcplace.models.files import default_scenario_path
from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.model import candidates
from dcplace.optimizer.solvers import pairs
from dcplace.optimizer.solvers.pairs import PlacementPricer, in_model_mask, lifted_capacity_duals, price_pairs, solve_priced_lp
from dcplace.optimizer.solving.pipeline import solve_to_folder


@pytest.fixture
def few_candidates(monkeypatch):
    """Start each (region, class) from 2 sites so that pricing has work to do."""
    monkeypatch.setattr(candidates, "CHEAPEST", 1)
    monkeypatch.setattr(candidates, "NEAREST", 1)
    monkeypatch.setattr(candidates, "CLEARED", 0)


def _scenario(seed: int):
    return synthetic_scenario(seed, n_sites=12, n_regions=60, n_jobs=1, box_deg=(25.0, 45.0))


CLOCKS = ("day", "interruptible job", "carbon cap")


def _clocked(seed: int, variant: str = "day"):
    """The 24-hour clock, routed by the day, with the shipped daily profiles (docs/clock.md): plain, with one
    interruptible job (backfill columns in the hourly rows), or under a carbon cap that binds (busy_serves_load
    rows: the dispatch is a variable)."""
    base = synthetic_scenario(seed, n_sites=12, n_regions=60, n_jobs=2, box_deg=(25.0, 45.0))
    update = {"profiles": load_scenario(default_scenario_path()).profiles, "clock": base.clock.model_copy(update={"hours": 24})}
    if variant == "interruptible job":
        job = base.jobs[1]
        update["jobs"] = (base.jobs[0], job.model_copy(update={"interruptible": True, "gpu_hours_per_day": 0.3 * 24 * job.gpus_h100_equiv,
                                                               "min_fabric_tier": 0, "eligible_chips": ()}))
    elif variant == "carbon cap":  # seed 1's LP emits more than 70,000 t a year without a cap
        update["policies"] = base.policies.model_copy(update={"carbon_cap_t_per_year": 70_000.0})
    return base.model_copy(update=update)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_priced_lp_reaches_the_full_lp_relaxation(seed, few_candidates):
    full = build_index(_scenario(seed))
    assert len(full.serve) == full.eligible_pairs()
    z_full = solved_lp(build_model(full)).getInfo().objective_function_value

    ix = build_index(_scenario(seed), max_full_pairs=0)
    assert 0 < len(ix.serve) < ix.eligible_pairs()
    lm, priced = solve_priced_lp(ix, build_model, time.perf_counter() + 120, threads=1, bound_tolerance=0.0)
    assert priced.converged and priced.pairs_in_model < priced.pairs_eligible and priced.rounds >= 2
    assert priced.objective == pytest.approx(z_full, rel=1e-7)
    assert priced.full_lp_bound <= z_full * (1 + 1e-9)
    # the model handed on is the one the LP values belong to
    assert len(priced.x) == lm.n_cols
    assert float(lm.objective() @ priced.x) == pytest.approx(priced.objective, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_first_round_bound_is_below_the_full_lp_and_lifted_duals_stay_optimal(seed, few_candidates):
    z_full = solved_lp(build_model(build_index(_scenario(seed)))).getInfo().objective_function_value
    ix = build_index(_scenario(seed), max_full_pairs=0)
    lm = build_model(ix)
    h = solved_lp(lm)
    solution = h.getSolution()
    x, row_dual = np.asarray(solution.col_value), np.asarray(solution.row_dual)
    lifted = lifted_capacity_duals(ix, lm, x, row_dual, np.asarray(solution.col_dual))
    assert np.any(lifted < row_dual - 1e-9), "some unused capacity row should be lifted"

    # the lifted duals are still optimal: reduced costs c - A'y keep their signs at x, and the rows they moved are tight
    start, index, value = lm.matrix()
    reduced = lm.objective() - np.array([value[start[j]:start[j + 1]] @ lifted[index[start[j]:start[j + 1]]] for j in range(lm.n_cols)])
    lower, upper = lm.bounds()
    scale = 1e-6 * np.maximum(1.0, np.abs(lm.objective()))
    at_lower, at_upper = x <= lower + 1e-9, x >= upper - 1e-9
    assert np.all(reduced[at_lower & ~at_upper] >= -scale[at_lower & ~at_upper])
    assert np.all(reduced[at_upper & ~at_lower] <= scale[at_upper & ~at_lower])
    inside = ~at_lower & ~at_upper
    assert np.all(np.abs(reduced[inside]) <= scale[inside])
    moved = np.flatnonzero(lifted != row_dual)
    assert np.allclose(lm.row_activity(x)[moved], 0.0, atol=1e-6)

    z = h.getInfo().objective_function_value
    priced = price_pairs(ix, lm, lifted, z, in_model_mask(ix))
    assert priced.n_added > 0
    assert priced.lagrangian_bound <= z_full * (1 + 1e-9) and z_full <= z * (1 + 1e-9)


@pytest.mark.parametrize("variant", CLOCKS)
def test_priced_clock_lp_reaches_the_full_clock_lp(variant, few_candidates):
    """With the clock on, a share enters an hourly_serving row per kept hour (and busy_serves_load under a carbon cap,
    busy_energy_split for its energy): pricing with those rows' duals reaches the full model's LP, and the bound of
    its first round, on lifted duals that stay optimal, is below it."""
    full = build_index(_clocked(1, variant))
    assert len(full.serve) == full.eligible_pairs() and full.clock.on and len(full.clock.hours) == 24
    assert bool(full.clock.busy) == (variant == "carbon cap") and bool(full.clock.backfill) == (variant == "interruptible job")
    z_full = solved_lp(build_model(full)).getInfo().objective_function_value

    ix = build_index(_clocked(1, variant), max_full_pairs=0)
    assert 0 < len(ix.serve) < ix.eligible_pairs()
    lm = build_model(ix)
    # the entries pricing gives a share column are the builders' own, row for row (a priced-in pair gets these)
    serving, demand_rows, links = pairs.ServingRows(ix, lm), lm.families["demand_met"].rows(), lm.families["share_needs_open"].rows()
    start, index, value = lm.matrix()
    for (r, w, s), j in zip(ix.serve, range(lm.blocks["share"].start, lm.blocks["share"].stop)):
        built = dict(zip(index[start[j]:start[j + 1]].tolist(), value[start[j]:start[j + 1]].tolist()))
        priced_entries = dict([(demand_rows[r, w], 1.0), (links[r, w, s], 1.0)] + serving.entries(r, w, s))
        assert built.keys() == priced_entries.keys()
        assert np.allclose([built[i] for i in built], [priced_entries[i] for i in built], rtol=1e-12)
    h = solved_lp(lm)
    solution = h.getSolution()
    x, row_dual, z = np.asarray(solution.col_value), np.asarray(solution.row_dual), h.getInfo().objective_function_value
    lifted = lifted_capacity_duals(ix, lm, x, row_dual, np.asarray(solution.col_dual))
    assert np.any(lifted < row_dual - 1e-9), "some unused hourly row should be lifted"
    assert np.allclose(lm.row_activity(x)[np.flatnonzero(lifted != row_dual)], 0.0, atol=1e-6)
    first = price_pairs(ix, lm, lifted, z, in_model_mask(ix))
    assert first.n_added > 0 and first.lagrangian_bound <= z_full * (1 + 1e-9) < z

    lm, priced = solve_priced_lp(ix, build_model, time.perf_counter() + 120, threads=1, bound_tolerance=0.0)
    assert priced.converged and priced.pairs_in_model < priced.pairs_eligible and priced.rounds >= 2
    assert priced.objective == pytest.approx(z_full, rel=1e-7)
    assert priced.full_lp_bound <= z_full * (1 + 1e-9) and priced.bound_kind == pairs.FULL_LP
    assert float(lm.objective() @ priced.x) == pytest.approx(priced.objective, rel=1e-9)


def test_clock_candidate_plan_is_checked_and_no_capacity_cost_bound_is_stated(tmp_path, few_candidates):
    """The clock's capacity rows are hourly: pricing every demand at its peak would overstate the capacity-cost
    bound, so none is stated; the plan of the candidate path passes the independent checker (hourly rows
    included) and costs no less than the full model's optimum."""
    assert pairs.capacity_cost_bound(build_index(_clocked(2))) is None
    z_full = solved_lp(build_model(build_index(_clocked(2)))).getInfo().objective_function_value
    options = dict(mip_gap=0.005, time_limit_s=120)
    exact = solve(_clocked(2), SolveOptions(**options))
    plan, report = solve_to_folder(_clocked(2), tmp_path / "priced", SolveOptions(**options, max_full_pairs=0))
    assert report.ok, report.violations
    assert plan.solve.pairs["pairs_in_model"] < plan.solve.pairs["pairs_eligible"]
    assert plan.solve.pairs["bound_kind"] in (pairs.FULL_LP, pairs.LAGRANGIAN) and plan.solve.pairs["bound_kind"] in plan.solve.termination
    assert plan.objective_usd_per_year >= exact.solve.best_bound_usd_per_year * (1 - 1e-9)  # a subset of the columns
    assert plan.solve.best_bound_usd_per_year <= z_full * (1 + 1e-9)  # a bound of the full model's LP


def test_no_lagrangian_bound_is_stated_when_shares_enter_rows_pricing_does_not_price(few_candidates):
    """N-1's failover rows hold share columns too, and pricing's reduced costs leave their duals out: its
    Lagrangian bound would not be a bound, so none is stated (the capacity-cost bound, whose other rows' duals are
    0, still holds: below the LP of the N-1 model built whole, which is itself below that model's optimum)."""
    base = _scenario(1)
    scenario = base.model_copy(update={"policies": base.policies.model_copy(update={"survive_site_loss": {"chat": 1.0}})})
    ix = build_index(scenario, max_full_pairs=0)
    lm, priced = solve_priced_lp(ix, build_model, time.perf_counter() + 120, threads=1, bound_tolerance=0.0)
    assert pairs.ServingRows(ix, lm).unpriced and priced.x is not None
    assert not priced.converged and priced.bound_kind == pairs.CAPACITY_COST
    z_full = solved_lp(build_model(build_index(scenario))).getInfo().objective_function_value
    assert priced.full_lp_bound == pytest.approx(pairs.capacity_cost_bound(ix)) and priced.full_lp_bound <= z_full
    assert not pairs.ServingRows(build_index(base, max_full_pairs=0), build_model(build_index(base, max_full_pairs=0))).unpriced


@pytest.mark.parametrize("seed", [1, 2])
def test_candidate_path_plan_is_feasible_and_honest_about_its_gap(tmp_path, seed, few_candidates):
    exact = solve(_scenario(seed), SolveOptions(mip_gap=0.0, time_limit_s=120))
    assert exact.solve.status == "optimal" and not exact.solve.pairs

    plan, report = solve_to_folder(_scenario(seed), tmp_path / "priced", SolveOptions(mip_gap=0.0, time_limit_s=120, max_full_pairs=0))
    assert report.ok, report.violations  # the independent checker, on the full scenario's inputs
    record = plan.solve.pairs
    assert record["pairs_in_model"] < record["pairs_eligible"]
    # pricing converged (the full LP), or stopped within its tolerance of a Lagrangian bound of it
    assert record["bound_kind"] == (pairs.FULL_LP if record["converged"] else pairs.LAGRANGIAN)
    z_full = solved_lp(build_model(build_index(_scenario(seed)))).getInfo().objective_function_value
    assert z_full * (1 - pairs.BOUND_TOLERANCE) - 1e-6 <= record["full_lp_bound_usd_per_year"] <= z_full * (1 + 1e-9)
    optimum = exact.objective_usd_per_year
    assert plan.objective_usd_per_year >= optimum * (1 - 1e-9)  # a subset of the columns cannot beat the full model
    bound = plan.solve.best_bound_usd_per_year
    # pricing's bound of the full model, or higher where the search went on over the full model (solve._continue_on_full)
    assert bound >= record["full_lp_bound_usd_per_year"] * (1 - 1e-9) and bound <= optimum * (1 + 1e-9)
    if "then searched on the full model" not in plan.solve.termination:
        assert bound == pytest.approx(record["full_lp_bound_usd_per_year"])
    assert plan.solve.gap == pytest.approx((plan.objective_usd_per_year - bound) / plan.objective_usd_per_year, abs=1e-12)
    assert (plan.solve.status == "optimal") == (plan.solve.gap <= 1e-12)
    assert record["bound_kind"] in plan.solve.termination


@pytest.fixture
def worst_placements(monkeypatch):
    """Start each training job from its single dearest placement, so that pricing must find the good ones."""

    def worst(ix):
        unit = candidates.placement_unit_cost(ix)
        return {max((p for p in ix.place_all if p[0] == j), key=lambda p: unit[p[1:]]) for j in ix.jobs}

    monkeypatch.setattr(pairs, "candidate_placements", worst)


def _jobs_scenario(seed: int):
    return synthetic_scenario(seed, n_sites=12, n_regions=60, n_jobs=3, box_deg=(25.0, 45.0))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_priced_placements_reach_the_full_lp_relaxation(seed, few_candidates, worst_placements):
    full = build_index(_jobs_scenario(seed))
    assert not full.training_restricted()
    z_full = solved_lp(build_model(full)).getInfo().objective_function_value

    ix = build_index(_jobs_scenario(seed), max_full_pairs=0)
    assert not ix.training_restricted()  # solve_priced_lp restricts the placements, not the index
    ix.restrict_training(pairs.candidate_placements(ix))
    assert len(ix.place) == len(ix.jobs) < len(ix.place_all) and len(ix.trn_racks) < len(ix.trn_racks_all)
    # the first restricted LP: its placement-priced bound is below the full LP, and pricing has work to do
    lm = build_model(ix)
    h = solved_lp(lm)
    solution = h.getSolution()
    x, z = np.asarray(solution.col_value), h.getInfo().objective_function_value
    lifted = lifted_capacity_duals(ix, lm, x, np.asarray(solution.row_dual), np.asarray(solution.col_dual))
    placements = PlacementPricer(ix, build_model).price(lm, lifted, z)
    pairs_bound = price_pairs(ix, lm, lifted, z, in_model_mask(ix)).lagrangian_bound
    assert placements.added and placements.bound_term < 0
    assert pairs_bound + placements.bound_term <= z_full * (1 + 1e-9) < z

    lm, priced = solve_priced_lp(ix, build_model, time.perf_counter() + 120, threads=1, bound_tolerance=0.0)
    assert priced.converged and priced.placements_in_model < priced.placements_eligible
    assert priced.objective == pytest.approx(z_full, rel=1e-7)
    assert priced.full_lp_bound <= z_full * (1 + 1e-9)
    assert priced.full_lp_bound == pytest.approx(z_full, rel=1e-7)
    assert len(priced.x) == lm.n_cols and lm.blocks["place"].keys == ix.place
    assert float(lm.objective() @ priced.x) == pytest.approx(priced.objective, rel=1e-9)


def test_candidate_placements_keep_every_option_at_the_cheapest_sites():
    ix = build_index(_jobs_scenario(4), max_full_pairs=0)
    ix.restrict_training(candidates.candidate_placements(ix))
    assert ix.training_restricted()
    unit = candidates.placement_unit_cost(ix)
    for j in ix.jobs:
        options = [p for p in ix.place_all if p[0] == j]
        kept = {p[1] for p in ix.place if p[0] == j}
        assert len(kept) == min(candidates.TRAINING_SITES, len({p[1] for p in options}))
        # every kept site is at least as cheap (its best option) as every site left out
        best = {s: min(unit[p[1:]] for p in options if p[1] == s) for s in {p[1] for p in options}}
        assert max(best[s] for s in kept) <= min((best[s] for s in best if s not in kept), default=float("inf"))
        assert {p for p in options if p[1] in kept} <= set(ix.place)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_capacity_cost_bound_is_below_the_full_lp(seed):
    """The bound stated when no LP finishes: below the full model's LP relaxation, and not vacuous."""
    full = build_index(_jobs_scenario(seed))
    z_full = solved_lp(build_model(full)).getInfo().objective_function_value
    ix = build_index(_jobs_scenario(seed), max_full_pairs=0)
    ix.restrict_training(candidates.candidate_placements(ix))
    bound = pairs.capacity_cost_bound(ix)
    assert bound == pytest.approx(pairs.capacity_cost_bound(full), rel=1e-12)  # the candidates do not change it
    assert 0.5 * z_full < bound <= z_full * (1 + 1e-9)


def test_no_capacity_cost_bound_is_stated_with_cloud_regions_and_pricing_stays_below_the_full_lp(few_candidates):
    """capacity_cost_bound's duals leave rented shares (no cost of their own in demand_met) with
    negative reduced cost: with a cloud region it is not stated (None), and the bound the
    candidate path states is still below the full model's LP."""
    from dcplace.models.records import CloudRegion

    base = _jobs_scenario(1)
    site = base.sites[0]
    cloud = CloudRegion(id="cheap-cloud", name="Cheap cloud", lat=site.lat, lon=site.lon, country=site.country,
                        chip=base.catalog.chips[0].id, usd_per_gpu_hour_on_demand=0.001, usd_per_gpu_hour_reserved=0.001)
    scenario = base.model_copy(update={"cloud_regions": (cloud,)})
    full = build_index(scenario)
    assert full.clock.rent_serve and pairs.capacity_cost_bound(full) is None
    z_full = solved_lp(build_model(full)).getInfo().objective_function_value
    ix = build_index(scenario, max_full_pairs=0)
    lm, priced = solve_priced_lp(ix, build_model, time.perf_counter() + 120, threads=1)
    assert priced.full_lp_bound is not None and priced.full_lp_bound <= z_full * (1 + 1e-9)
    assert priced.bound_kind != pairs.CAPACITY_COST


def test_candidate_placements_that_cannot_hold_the_jobs_give_way_to_every_placement(monkeypatch, few_candidates):
    """A restriction's infeasibility says nothing of the full model: when the candidate
    placements leave a job nowhere to run, pricing goes on with every placement and the LP
    reaches the full model's."""
    scenario = _jobs_scenario(2)
    full = build_index(scenario)
    z_full = solved_lp(build_model(full)).getInfo().objective_function_value
    site = full.place_all[0][1]
    monkeypatch.setattr(pairs, "candidate_placements", lambda ix: {p for p in ix.place_all if p[1] == site and p[0] == ix.place_all[0][0]})
    ix = build_index(scenario, max_full_pairs=0)
    assert len(ix.jobs) == 3
    lm, priced = solve_priced_lp(ix, build_model, time.perf_counter() + 120, threads=1, bound_tolerance=0.0)
    assert priced.x is not None and not ix.training_restricted()
    assert priced.objective == pytest.approx(z_full, rel=1e-7) and priced.full_lp_bound <= z_full * (1 + 1e-9)
    plan = solve(scenario, SolveOptions(max_full_pairs=0, time_limit_s=60, mip_gap=0.02))
    assert plan.solve.status in ("optimal", "feasible") and len(plan.jobs) == 3


@pytest.mark.parametrize("full_bound, kind", [(5.0e9, pairs.LAGRANGIAN), (None, pairs.NO_BOUND)])
def test_a_candidate_solve_without_a_plan_states_the_full_models_bound(full_bound, kind):
    """solve.against_full_bound with no plan: the record carries pricing's bound of the full
    model (or none), never the candidate MIP's own (HiGHS's 0 before its root, seen at 2,000 x
    10,000); an infeasible verdict is passed on untouched."""
    from dcplace.optimizer.solvers.backends import RunResult
    from dcplace.optimizer.solving.solve import against_full_bound

    priced = pairs.PricedLP(x=None, objective=None, full_lp_bound=full_bound, converged=False, rounds=3,
                            pairs_in_model=10, pairs_eligible=100, seconds=5.0, build_s=1.0, bound_kind=kind)
    none = RunResult(solver="highs", solver_version="1", status="no_solution", termination="time limit", best_bound_usd_per_year=0.0)
    stated = against_full_bound(none, priced, 0.005)
    assert stated.status == "no_solution" and stated.best_bound_usd_per_year == full_bound and stated.gap is None
    assert (kind in stated.termination) == (full_bound is not None)
    infeasible = RunResult(solver="highs", solver_version="1", status="infeasible", termination="infeasible")
    assert against_full_bound(infeasible, priced, 0.005).best_bound_usd_per_year is None

