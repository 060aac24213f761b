"""N-1 held to one plan's sites (optimizer/solving/failover_sites.py, docs/resilience.md).

The world is test_resilience's line of towns: six sites half a degree apart, seven towns
whose failover budget reaches their neighbours only, so that each loss re-routes regionally.
What is checked against an exact reference, not against a figure this code produced:

* held to the full N-1 optimum's own open sites, the held model's optimum is that optimum (it
  is a restriction of the full model that keeps the optimum feasible);
* held to more sites it can only cost more, and every plan it returns re-routes every loss
  (the re-route LP of the full index) and meets every row of the full lazy model;
* the lazy loop started from an insecure plan runs the held search once, and still ends at
  the full model's optimum.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from helpers import make_scenario, region, site
from dcplace.models import load_scenario
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.solvers.backends import run_backend
from dcplace.optimizer.solving import failover as fo
from dcplace.optimizer.model.failover import reroute_keys
from dcplace.optimizer.solving.failover import open_sites
from dcplace.optimizer.solving.failover_sites import close_idle, held_index, held_model, reroute_count, secure_on_sites
from dcplace.optimizer.solving.precheck import checked_index

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)
N1_FAMILIES = ("failover_reserve", "failover_capacity", "failover_aggregate")


@pytest.fixture(scope="module")
def line_of_towns(tmp_path_factory):
    sites = [site(f"s{i}", 0, i * 0.5, power_price_usd_per_mwh=100 + 10 * (i % 3)) for i in range(6)]
    regions = [region(f"t{i}", 0, i * 0.4 + 0.1, chat=800 * (1 + i % 3), budget=6) for i in range(7)]
    path = make_scenario(tmp_path_factory.mktemp("line"), sites=sites, regions=regions,
                         policies={"survive_site_loss": ["chat"], "failover_rtt_ms": {"chat": 12}})
    return load_scenario(path)


def full_optimum(scenario):
    """(ix, model, columns, cost) of the full N-1 model: every loss's re-routing from the start."""
    ix = checked_index(scenario)
    ix.failover_lost = sorted({(s, r, w) for r, w, s in ix.serve if w in ix.failover})
    lm = build_model(ix)
    result, x = run_backend(lm, ix, OPTIONS)
    assert result.status == "optimal"
    return ix, lm, x, result.objective_usd_per_year


def solve_held(model, index, start):
    return run_backend(model, index, OPTIONS, incumbent=start)


def test_held_to_the_optimum_sites_the_held_model_finds_the_optimum(line_of_towns):
    _, full_lm, x, best = full_optimum(line_of_towns)
    ix = checked_index(line_of_towns)
    lm = build_model(ix)
    sites = open_sites(x, full_lm)
    plan, record = secure_on_sites(ix, lm, sites, None, build_model, solve_held, time.perf_counter() + 60)
    assert record["secure"] is True and record["sites"] == len(sites)
    assert float(lm.objective() @ plan) == pytest.approx(best, rel=1e-9)
    assert not fo.broken(fo.check_losses(ix, fo.state_from_columns(plan, lm, ix)))
    assert lm.is_feasible(plan)


def test_held_to_every_site_costs_no_less_and_stays_secure(line_of_towns):
    _, _, _, best = full_optimum(line_of_towns)
    ix = checked_index(line_of_towns)
    lm = build_model(ix)
    every = sorted(ix.sites)
    plan, record = secure_on_sites(ix, lm, every, None, build_model, solve_held, time.perf_counter() + 60)
    assert record["secure"] is True
    cost = float(lm.objective() @ plan)
    assert cost >= best - 1e-6
    assert lm.is_feasible(plan)
    assert not fo.broken(fo.check_losses(ix, fo.state_from_columns(plan, lm, ix)))
    held = held_index(ix, every)
    model = held_model(held, build_model, every)
    # every site held open: what the held model pays for opens is every site's fixed cost,
    # and close_idle gives back those of the sites its plan left without racks
    kept = {s for s in every if plan[lm.col("open", s)] > 0.5}
    assert len(kept) <= len(every)
    assert model.blocks["open"].lower.min() == 1.0


def test_held_index_re_routes_every_loss_of_its_sites_to_its_sites_only(line_of_towns):
    ix = checked_index(line_of_towns)
    sites = ["s1", "s2", "s4"]
    held = held_index(ix, sites)
    columns = [s.id for s in ix.scenario.sites]
    for w, mask in held.failover.items():
        assert not mask[:, [j for j, s in enumerate(columns) if s not in sites]].any()
        assert (mask <= ix.failover[w]).all()
    by_sw = ix.serve_by_sw
    assert set(held.failover_lost) == {(f, r, "chat") for f in sites for r in by_sw.get((f, "chat"), [])}
    assert ix.failover_lost != held.failover_lost and all(held.failover[w] is not ix.failover[w] for w in ix.failover)
    model = held_model(held, build_model, sites)
    assert reroute_count(held) == len(reroute_keys(held)) == len(model.blocks["reroute"].keys) > 0
    opened = model.blocks["open"]
    assert {s: opened.upper[opened.pos[s]] for s in columns} == {s: float(s in sites) for s in columns}


def test_a_held_model_too_large_is_not_built(line_of_towns, monkeypatch):
    ix = checked_index(line_of_towns)
    lm = build_model(ix)
    monkeypatch.setattr("dcplace.optimizer.solving.failover_sites.HELD_MAX_REROUTES", 3)
    built = []
    plan, record = secure_on_sites(ix, lm, sorted(ix.sites), None, lambda held: built.append(held) or build_model(held),
                                   solve_held, time.perf_counter() + 60)
    assert plan is None and not built and "over 3" in record["skipped"]


def test_close_idle_closes_an_open_site_without_racks(tmp_path):
    """Two towns and a third site as near but with power at nine times the price: the optimum
    leaves it closed; opened with a zone and nothing in it, close_idle gives back exactly its
    fixed costs."""
    path = make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 0.5), site("dear", 0, 0.25, power_price_usd_per_mwh=900)],
                         regions=[region("x", 0, 0.1, chat=1600, budget=6), region("y", 0, 0.4, chat=800, budget=6)],
                         policies={"survive_site_loss": ["chat"], "failover_rtt_ms": {"chat": 12}})
    scenario = load_scenario(path)
    _, full_lm, x, _ = full_optimum(scenario)
    ix = checked_index(scenario)
    lm = build_model(ix)
    losses = fo.check_losses(ix, fo.state_from_columns(x, full_lm, ix))
    plan = fo.transfer(x, full_lm, lm, ix, losses)
    idle = "dear"
    assert plan[lm.col("open", idle)] == 0.0
    padded = plan.copy()
    padded[lm.col("open", idle)] = 1.0
    padded[lm.col("zone", (idle, ix.zones_by_site[idle][0]))] = 1.0
    assert lm.is_feasible(padded) and lm.objective() @ padded > lm.objective() @ plan
    closed = close_idle(padded, lm, ix)
    assert closed[lm.col("open", idle)] == 0.0
    assert float(lm.objective() @ closed) == pytest.approx(float(lm.objective() @ plan), rel=1e-12)
    assert lm.is_feasible(closed)


def test_the_lazy_loop_from_an_insecure_plan_searches_its_sites_once_and_ends_at_the_optimum(line_of_towns):
    """Today's plan (no N-1 rows) breaks losses: the loop holds the search to its sites once,
    then goes on to the full model's optimum."""
    _, _, _, best = full_optimum(line_of_towns)
    ix = checked_index(line_of_towns)
    plain = build_model(ix, without=N1_FAMILIES)
    result, x_plain = run_backend(plain, ix, OPTIONS)
    lm = build_model(ix)
    x = fo.transfer(x_plain, plain, lm, ix, {})
    assert fo.broken(fo.check_losses(ix, fo.state_from_columns(x, lm, ix)))
    deadline = time.perf_counter() + 120

    def solve_again(model, start, final=False, keep_s=0.0):
        return run_backend(model, ix, replace(OPTIONS, time_limit_s=max(deadline - keep_s - time.perf_counter(), 1.0)), incumbent=start)

    calls = []

    def on_sites(model, sites, start):
        calls.append(sites)
        return secure_on_sites(ix, model, sites, start, build_model, solve_held, deadline)

    lm, result, x, record = fo.secure(ix, lm, result, x, build_model, solve_again, deadline, 1, 0.0, on_sites)
    # the insecure plan's sites, and those the greedy repair (the held search's start) opened
    assert len(calls) == 1 and set(calls[0]) > set(open_sites(fo.transfer(x_plain, plain, lm, ix, {}), lm))
    assert record["held_sites"]["secure"] is True
    assert record["secure"] is True
    assert not fo.broken(fo.check_losses(ix, fo.state_from_columns(x, lm, ix)))
    assert result.objective_usd_per_year == pytest.approx(best, rel=1e-9)
    assert float(lm.objective() @ x) == pytest.approx(best, rel=1e-9)
    assert np.isfinite(result.best_bound_usd_per_year)


def test_a_caller_that_takes_any_plan_gets_the_rounded_lp_and_its_bound():
    """The N-1 loop's first round (good_enough_usd = inf): the warm start's rounded plan, unimproved and without a
    search, with the LP relaxation's optimum as its bound, which is no more than the MIP's optimum."""
    import math

    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.optimizer.model.index import build_index

    ix = build_index(synthetic_scenario(3, 20, 120, 1, box_deg=(25.0, 45.0)))
    lm = build_model(ix)
    assert lm.n_cols >= 5_000  # the warm start runs (backends.WARM_START_MIN_COLUMNS)
    quick, x = run_backend(lm, ix, replace(OPTIONS, mip_gap=1e-4), good_enough_usd=math.inf)
    assert quick.termination == "the caller takes the warm start's plan; search skipped"
    assert "polished" not in quick.warm_start and "chosen again" not in quick.warm_start
    assert lm.is_feasible(x) and quick.objective_usd_per_year == pytest.approx(float(lm.objective() @ x))
    full, _ = run_backend(lm, ix, replace(OPTIONS, mip_gap=1e-4))
    assert quick.best_bound_usd_per_year <= full.objective_usd_per_year * (1 + 1e-9)
    assert quick.objective_usd_per_year >= full.objective_usd_per_year * (1 - 1e-4) - 1e-6
