"""Optima derived by hand or by brute force on tiny scenarios."""

from __future__ import annotations

import itertools
import math
import random

import networkx as nx
import pytest

from helpers import TINY_CATALOG, job, make_scenario, region, site
from dcplace.models import load_scenario
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.solving.pipeline import solve_to_folder

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=60)
HOURS = 8760


def air_inference_rack_usd(price_usd_per_mwh: float, colo: float = 100, pue: float = 1.5) -> float:
    """One 4 kW, 16-GPU 'server-air' rack serving chat (load factor 0.5), by hand."""
    chips = 16 * 2000 / 5
    energy_mwh = 4 * pue * HOURS * 0.5 / 1000
    return chips + energy_mwh * price_usd_per_mwh + 4 * colo * 12


def dense_training_rack_usd(price_usd_per_mwh: float, colo: float = 100) -> float:
    """One 60 kW, 48-GPU 'trainer-dense' rack in liquid (PUE 1.1) on 'ib', by hand."""
    chips = 48 * 10000 / 5
    cooling = 60 * 1000 / 10
    energy_mwh = 60 * 1.1 * HOURS * 1.0 / 1000
    fabric = 48 * 1000 / 5
    return chips + cooling + energy_mwh * price_usd_per_mwh + 60 * colo * 12 + fabric


def test_cheaper_reachable_site_wins(tmp_path):
    path = make_scenario(
        tmp_path,
        sites=[site("dear", 0, 0, power_price_usd_per_mwh=100), site("cheap", 0, 1, power_price_usd_per_mwh=50)],
        regions=[region("town", 0, 0.5, chat=800, budget=50)],
    )
    plan = solve(load_scenario(path), EXACT)
    opened = {s.id for s in plan.sites if s.open}
    assert opened == {"cheap"}
    assert plan.objective_usd_per_year == pytest.approx(1000 + air_inference_rack_usd(50), rel=1e-9)
    [line] = [ln for s in plan.sites for ln in s.racks]
    assert (line.config, line.cooling, line.racks) == ("server-air", "air", 1)


def test_training_job_goes_to_cheapest_power(tmp_path):
    prices = {"a": 100, "b": 40, "c": 70}
    path = make_scenario(
        tmp_path,
        sites=[site(s, 10, i, power_price_usd_per_mwh=p) for i, (s, p) in enumerate(prices.items())],
        regions=[region("nobody", 0, 0, chat=0)],
        jobs=[job("pretrain", 48)],
    )
    plan = solve(load_scenario(path), EXACT)
    [placement] = plan.jobs
    assert placement.site == "b"
    expected = 1000 + 5000 + dense_training_rack_usd(40)  # site + liquid zone + one rack
    assert plan.objective_usd_per_year == pytest.approx(expected, rel=1e-9)


def test_dense_rack_only_where_liquid_zone_is_built(tmp_path):
    path = make_scenario(
        tmp_path,
        sites=[
            site("aironly", 0, 0, power_price_usd_per_mwh=10, cooling_allowed="air"),
            site("liquid", 0, 1, power_price_usd_per_mwh=100),
        ],
        regions=[region("nobody", 0, 0, chat=0)],
        jobs=[job("pretrain", 96)],
    )
    plan = solve(load_scenario(path), EXACT)
    by_id = {s.id: s for s in plan.sites}
    assert not by_id["aironly"].open
    assert by_id["liquid"].zones == ["liquid"]
    [line] = by_id["liquid"].racks
    assert (line.config, line.cooling, line.racks) == ("trainer-dense", "liquid", 2)


def test_tighter_latency_budget_moves_inference_closer(tmp_path):
    sites = [site("near", 0, 0.1, power_price_usd_per_mwh=200), site("far", 0, 5, power_price_usd_per_mwh=50)]
    # far is 5 degrees of longitude at the equator: 556 km, 5.56 ms round trip at 200 km/ms
    loose = solve(load_scenario(make_scenario(tmp_path / "loose", sites, [region("town", 0, 0, budget=10)])), EXACT)
    tight = solve(load_scenario(make_scenario(tmp_path / "tight", sites, [region("town", 0, 0, budget=3)])), EXACT)
    assert [a.site for a in loose.assignments] == ["far"]
    assert [a.site for a in tight.assignments] == ["near"]
    assert tight.objective_usd_per_year > loose.objective_usd_per_year
    assert tight.assignments[0].rtt_ms == pytest.approx(2 * 0.1 * 2 * math.pi * 6371.0088 / 360 / 200, rel=1e-9)


def test_redundancy_splits_demand(tmp_path):
    path = make_scenario(
        tmp_path,
        sites=[site("a", 0, 0), site("b", 0, 1), site("c", 0, 2, power_price_usd_per_mwh=500)],
        regions=[region("town", 0, 0.5, chat=1600)],
        policies={"max_share_per_site": 0.5},
    )
    plan = solve(load_scenario(path), EXACT)
    shares = sorted((a.site, round(a.share, 9)) for a in plan.assignments)
    assert shares == [("a", 0.5), ("b", 0.5)]


def test_policies_forced_forbidden_and_carbon(tmp_path):
    sites = [
        site("dirty", 0, 0, power_price_usd_per_mwh=40, grid_carbon_g_per_kwh=800),
        site("clean", 0, 1, power_price_usd_per_mwh=90, grid_carbon_g_per_kwh=20),
        site("spare", 0, 2),
    ]
    base = dict(regions=[region("nobody", 0, 0, chat=0)], jobs=[job("pretrain", 48)])
    free = solve(load_scenario(make_scenario(tmp_path / "free", sites, **base)), EXACT)
    assert free.jobs[0].site == "dirty"
    # one dense rack at 'dirty' emits 60 kW x 1.1 x 8760 h x 0.8 t/MWh = 462.5 t/yr
    capped = solve(load_scenario(make_scenario(tmp_path / "cap", sites, **base, policies={"carbon_cap_t_per_year": 100})), EXACT)
    assert capped.jobs[0].site == "clean"
    banned = solve(load_scenario(make_scenario(tmp_path / "ban", sites, **base, policies={"forbidden_sites": ["dirty"]})), EXACT)
    assert banned.jobs[0].site == "clean"
    forced = solve(load_scenario(make_scenario(tmp_path / "force", sites, **base, policies={"forced_sites": ["spare"]})), EXACT)
    assert {s.id for s in forced.sites if s.open} == {"dirty", "spare"}
    assert forced.objective_usd_per_year == pytest.approx(free.objective_usd_per_year + 1000, rel=1e-9)


def _brute_force(sites, regions, rtt_budget_ms):
    """Least cost by enumerating rack counts per site; feasibility of serving is a max flow."""
    cap = 800.0  # tok/s per server-air rack at utilization 1
    best = math.inf
    ranges = [range(0, s["floor_racks"] + 1) for s in sites]
    for counts in itertools.product(*ranges):
        g = nx.DiGraph()
        for r in regions:
            g.add_edge("src", r["id"], capacity=r["demand_chat_tok_s"])
            for s in sites:
                km = 2 * math.pi * 6371.0088 / 360 * math.hypot(r["lat"] - s["lat"], r["lon"] - s["lon"])
                if 2 * km / 200 <= rtt_budget_ms:
                    g.add_edge(r["id"], s["id"], capacity=math.inf)
        for s, n in zip(sites, counts):
            g.add_edge(s["id"], "sink", capacity=n * cap)
        need = sum(r["demand_chat_tok_s"] for r in regions)
        if nx.maximum_flow_value(g, "src", "sink") < need - 1e-6:
            continue
        cost = sum(s["fixed_cost_usd_per_year"] + n * air_inference_rack_usd(s["power_price_usd_per_mwh"]) for s, n in zip(sites, counts) if n)
        best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force(tmp_path, seed):
    """Random 3-site x 3-region instances on one meridian segment: sites on the equator so
    that distances are exact arcs and the brute force needs no haversine."""
    rng = random.Random(seed)
    sites = [
        site(f"s{i}", 0, i * 2.0, power_price_usd_per_mwh=rng.choice([30, 60, 90, 150]), floor_racks=rng.randint(1, 3),
             fixed_cost_usd_per_year=rng.choice([0, 5000, 20000]), cooling_allowed="air")
        for i in range(3)
    ]
    regions = [region(f"r{i}", 0, rng.uniform(0, 4), chat=rng.choice([300, 800, 1200])) for i in range(3)]
    budget = 3.0
    for r in regions:
        r["rtt_budget_chat_ms"] = budget
    catalog_without_trainer = {
        **TINY_CATALOG,
        "throughput": [{"chip": "server", "workload": "chat", "tok_s_per_gpu": 50}],
    }
    path = make_scenario(tmp_path, sites, regions, catalog=catalog_without_trainer)
    expected = _brute_force(sites, regions, budget)
    if math.isinf(expected):
        pytest.skip("instance drawn infeasible")
    plan = solve(load_scenario(path), EXACT)
    assert plan.objective_usd_per_year == pytest.approx(expected, rel=1e-9)


def test_every_tiny_plan_passes_the_checker(tmp_path):
    path = make_scenario(
        tmp_path / "in",
        sites=[site("a", 0, 0), site("b", 0, 1, power_price_usd_per_mwh=30)],
        regions=[region("town", 0, 0.5, chat=2000), region("city", 0, 1.2, chat=900)],
        jobs=[job("pretrain", 96), job("tune", 20)],
    )
    plan, report = solve_to_folder(path, tmp_path / "plan", EXACT)
    assert report.ok, report.violations
    assert check_plan_folder(tmp_path / "plan").ok
    assert plan.solve.status == "optimal"


def test_dominated_fabric_is_dropped_without_changing_the_optimum(tmp_path):
    """A fabric no better than another in tier, efficiency and size, and dearer, is pruned;
    the optimum equals the one found with it available."""
    from dcplace.optimizer.model.index import build_index, undominated_fabrics

    dearer = {"id": "ib-dear", "name": "Dear IB", "tier": 2, "cost_usd_per_gpu": 1500, "life_years": 5,
              "training_efficiency": 1.0, "max_cluster_gpus": 1000}
    catalog = {**TINY_CATALOG, "fabrics": TINY_CATALOG["fabrics"] + [dearer]}
    args = dict(sites=[site("a", 0, 0)], regions=[region("nobody", 0, 0, chat=0)], jobs=[job("pretrain", 48)])
    with_dear = load_scenario(make_scenario(tmp_path / "two", catalog=catalog, **args))
    assert undominated_fabrics(build_index(with_dear).fabrics, 0.0) == {"ib"}
    alone = load_scenario(make_scenario(tmp_path / "one", **args))
    assert solve(with_dear, EXACT).objective_usd_per_year == pytest.approx(solve(alone, EXACT).objective_usd_per_year, rel=1e-12)


def _three_sites_two_jobs(tmp_path):
    """Three sites, three towns, two training jobs: a model the warm start rounds with a gap."""
    return load_scenario(make_scenario(
        tmp_path,
        sites=[site("a", 0, 0), site("b", 0, 1, power_price_usd_per_mwh=30), site("c", 0, 2, fixed_cost_usd_per_year=50)],
        regions=[region("town", 0, 0.5, chat=2000), region("city", 0, 1.2, chat=900), region("ville", 0, 2.1, chat=450)],
        jobs=[job("pretrain", 96), job("tune", 20)],
    ))


def test_warm_start_does_not_change_the_optimum(tmp_path, monkeypatch):
    from dcplace.optimizer.solvers import backends

    monkeypatch.setattr(backends, "WARM_START_MIN_COLUMNS", 0)  # this model is small enough to skip it otherwise
    scenario = _three_sites_two_jobs(tmp_path)
    warm = solve(scenario, EXACT)
    cold = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=60, warm_start=False))
    assert warm.solve.warm_start.startswith("rounded LP relaxation") and warm.solve.warm_start.endswith("held back")
    assert cold.solve.warm_start == "off"
    assert warm.objective_usd_per_year == pytest.approx(cold.objective_usd_per_year, rel=1e-12)


def test_a_small_model_is_searched_without_the_warm_start(tmp_path):
    """Below backends.WARM_START_MIN_COLUMNS the warm start costs more than the search it
    precedes (issue 20's OR-Library overhead); the plan record says it was skipped and why."""
    from dcplace.optimizer.solvers.backends import WARM_START_MIN_COLUMNS

    scenario = load_scenario(make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 1)],
                                           regions=[region("town", 0, 0.5, chat=2000)], jobs=[job("pretrain", 48)]))
    plan = solve(scenario, EXACT)
    assert plan.solve.model["columns"] < WARM_START_MIN_COLUMNS
    assert plan.solve.warm_start.startswith("skipped: a small model") and plan.solve.status == "optimal"


def test_a_start_that_breaks_a_row_is_completed_by_an_lp_over_its_integers(tmp_path):
    """The rounding sets the integer columns and only roughly the continuous ones; the start is
    then completed (integers kept, continuous columns re-chosen by the LP), as HiGHS did with
    an offered start, instead of being lost."""
    import time

    import numpy as np

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.solvers.highs_model import to_highs
    from dcplace.optimizer.solvers.warmstart import complete_start
    from dcplace.optimizer.solving.precheck import checked_index

    path = make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 1, power_price_usd_per_mwh=30)],
                         regions=[region("town", 0, 0.5, chat=2000), region("city", 0, 1.2, chat=900)], jobs=[job("pretrain", 48)])
    ix = checked_index(load_scenario(path))
    lm = build_model(ix)
    h = to_highs(lm)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    x = np.array(h.getSolution().col_value)
    assert lm.is_feasible(x)
    broken = x.copy()
    share = lm.blocks["share"]
    broken[share.start:share.stop] *= 0.5  # every region half served: demand_met breaks
    assert not lm.is_feasible(broken)
    completed = complete_start(to_highs(lm), lm, broken, time.perf_counter() + 60)
    assert completed is not None and lm.is_feasible(completed)
    integer = lm.integer_columns()
    assert np.array_equal(completed[integer], np.round(x[integer]))
    assert lm.objective() @ completed == pytest.approx(lm.objective() @ x, rel=1e-9)
    # integers that cannot carry the load leave nothing to complete
    racks = lm.blocks["racks_inf"]
    starved = x.copy()
    starved[racks.start:racks.stop] = 0
    assert complete_start(to_highs(lm), lm, starved, time.perf_counter() + 60) is None


def test_pair_costs_are_a_transport_input(tmp_path):
    """A per-pair serving cost can outweigh the cheaper site; it lands in 'transport'."""
    from helpers import write_csv

    path = make_scenario(
        tmp_path / "in",
        sites=[site("dear", 0, 0, power_price_usd_per_mwh=100), site("cheap", 0, 1, power_price_usd_per_mwh=50)],
        regions=[region("town", 0, 0.5, chat=800, budget=50)],
    )
    write_csv(tmp_path / "in" / "pair_costs.csv", [
        {"region": "town", "site": "cheap", "workload": "chat", "usd_per_year": 5000},
        {"region": "town", "site": "dear", "workload": "chat", "usd_per_year": 1000},
    ])
    path.write_text(path.read_text() + "pair_costs: pair_costs.csv\n")
    plan, report = solve_to_folder(path, tmp_path / "plan", EXACT)
    assert report.ok, report.violations
    assert [a.site for a in plan.assignments] == ["dear"]
    assert plan.cost_breakdown_usd_per_year["transport"] == pytest.approx(1000)
    # dear: 1000 + rack at 100 USD/MWh + 1000 transport < cheap: 1000 + rack at 50 + 5000
    assert plan.objective_usd_per_year == pytest.approx(1000 + air_inference_rack_usd(100) + 1000, rel=1e-9)


@pytest.mark.parametrize("price, expected", [(10, {("chat", "air"), ("reason", "liquid")}),
                                              (100, {("chat", "liquid"), ("reason", "liquid")})])
def test_the_rounded_start_builds_a_second_zone_only_where_it_pays(tmp_path, price, expected):
    """warmstart._inference_racks, by hand: reasoning runs only on 'trainer-dense' racks
    (60 kW: liquid); chat's 'server-air' rack (4 kW) in liquid pays $400/yr more cooling
    capex ($1,000/kW over 10 years) and saves 4 kW x (1.5 - 1.1) x 8,760 h x 0.5 load of
    energy: $70.08/yr at $10/MWh (air is cheaper, and the air zone is free: both zones), and
    $700.80/yr at $100/MWh (liquid is cheaper: one liquid zone serves both)."""
    import copy

    from dcplace.optimizer.model.index import build_index
    from dcplace.optimizer.solvers.warmstart import _inference_racks

    catalog = copy.deepcopy(TINY_CATALOG)
    catalog["workloads"].append({"id": "reason", "name": "Reasoning", "load_factor": 0.5})
    catalog["throughput"].append({"chip": "trainer", "workload": "reason", "tok_s_per_gpu": 100})
    catalog["throughput"] = [t for t in catalog["throughput"] if (t["chip"], t["workload"]) != ("trainer", "chat")]
    path = make_scenario(tmp_path, sites=[site("hub", 0, 0, power_price_usd_per_mwh=price)],
                         regions=[region("town", 0, 0.1, demand_reason_tok_s=4800, rtt_budget_reason_ms=50)], catalog=catalog)
    ix = build_index(load_scenario(path))
    racks = _inference_racks(ix, "hub", {"chat": 800.0, "reason": 4800.0}, set())
    assert {(w, c) for (_, _, c, w) in racks} == expected
    assert sorted(racks.values()) == [1, 1]  # 800 / (16 x 50) and 4,800 / (48 x 100)


def test_the_lean_rounding_takes_the_least_power_in_any_zone(tmp_path):
    """warmstart._inference_racks with `lean` (a site whose power the rounding broke): chat's
    'server-air' rack (4 kW of IT) draws 6 kW of facility power in air (PUE 1.5) and 4.4 kW in
    liquid (1.1), so 4 racks take 17.6 kW there, not 24 kW, though liquid's zone costs
    $5,000/yr and air's nothing. Dollars are not kW: counting the zones' fixed costs, the lean
    rounding chose the zone of least fixed cost (air) and broke the site again. The
    cost-led rounding keeps to air here (energy at $10/MWh saves less than the zone costs)."""
    from dcplace.optimizer.model.index import build_index
    from dcplace.optimizer.solvers.warmstart import _inference_racks

    path = make_scenario(tmp_path, sites=[site("hub", 0, 0, power_price_usd_per_mwh=10)],
                         regions=[region("town", 0, 0.1, chat=3200)])
    ix = build_index(load_scenario(path))
    lean = _inference_racks(ix, "hub", {"chat": 3200.0}, set(), lean=True)
    assert lean == {("hub", "server-air", "liquid", "chat"): 4}
    assert sum(n * ix.inf_econ[key].facility_kw for key, n in lean.items()) == pytest.approx(4 * 4 * 1.1)
    by_cost = _inference_racks(ix, "hub", {"chat": 3200.0}, set())
    assert by_cost == {("hub", "server-air", "air", "chat"): 4}


def test_the_rounded_start_takes_racks_away_where_rounding_up_breaks_a_floor(tmp_path):
    """One rack (800 tok/s) of floor at 'small', a hundred at 'big', 1,200 tok/s of demand.
    An LP point with 900 tok/s at 'small' rounds up to two racks there, over its floor, at
    the least power too; the rounding then takes one away, and the LP that completes the
    start moves the 100 tok/s it no longer serves to 'big', whose one rounded-up rack (for
    300 tok/s) has room: a plan of one rack at each site."""
    import copy
    import time

    import numpy as np

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.model.index import build_index
    from dcplace.optimizer.solvers.highs_model import to_highs
    from dcplace.optimizer.solvers.warmstart import complete_start, round_lp, round_within_limits, rounded_lp_start

    catalog = copy.deepcopy(TINY_CATALOG)
    catalog["throughput"] = [t for t in catalog["throughput"] if t["chip"] == "server"]
    path = make_scenario(tmp_path, sites=[site("small", 0, 0, floor_racks=1), site("big", 0, 0.2)],
                         regions=[region("town", 0, 0.1, chat=1200)], catalog=catalog)
    ix = build_index(load_scenario(path))
    lm = build_model(ix)
    x = np.zeros(lm.n_cols)
    x[lm.col("share", ("town", "chat", "small"))], x[lm.col("share", ("town", "chat", "big"))] = 0.75, 0.25
    broken: set[str] = set()
    assert round_lp(x, lm, ix, broken=broken) is None and broken == {"small"}
    rounded = round_within_limits(x, lm, ix)
    start = x.copy()
    start[list(rounded)] = list(rounded.values())
    assert not lm.is_feasible(start)  # 'small' serves more than its one rack
    done = complete_start(to_highs(lm), lm, start, time.perf_counter() + 60)
    assert done is not None and lm.is_feasible(done)
    racks = lm.blocks["racks_inf"]
    per_site = {s: sum(done[racks.start + i] for i, key in enumerate(racks.keys) if key[0] == s) for s in ("small", "big")}
    assert per_site == {"small": pytest.approx(1.0), "big": pytest.approx(1.0)}
    assert done[lm.col("share", ("town", "chat", "small"))] <= 800 / 1200 + 1e-9
    # rounded_lp_start completes the trimmed start itself, before any polish starts from it
    how, plan = rounded_lp_start(to_highs(lm), lm, ix, 60.0, relaxation=(x, float(lm.objective() @ x)))
    assert plan is not None and lm.is_feasible(plan), how
    assert lm.objective() @ plan == pytest.approx(lm.objective() @ done)


@pytest.mark.parametrize("mip_gap, polished", [(0.0, True), (0.5, False)])
def test_the_polish_runs_only_when_the_rounded_start_is_outside_the_gap(tmp_path, monkeypatch, mip_gap, polished):
    """rounded_lp_start on eight sites of which the LP keeps one (a quarter or fewer: the polish
    may run): at gap 0 the rounded start is above the LP bound and the restricted MIP polishes
    it; at a 50 % gap the start is already within it and the polish is skipped."""
    import numpy as np

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.model.index import build_index
    from dcplace.optimizer.solvers import warmstart
    from dcplace.optimizer.solvers.highs_model import to_highs

    path = make_scenario(tmp_path, sites=[site(f"s{i}", 0, 0.01 * i, power_price_usd_per_mwh=50 + i) for i in range(8)],
                         regions=[region("town", 0, 0.1, chat=1200)])
    ix = build_index(load_scenario(path))
    lm = build_model(ix)
    calls = []
    restricted_mip = warmstart._restricted_mip
    monkeypatch.setattr(warmstart, "_restricted_mip", lambda *args: calls.append(args) or restricted_mip(*args))
    how, plan = warmstart.rounded_lp_start(to_highs(lm), lm, ix, 30.0, mip_gap=mip_gap)
    assert plan is not None and lm.is_feasible(plan), how
    assert bool(calls) == polished, how
    lp_bound = warmstart.solve_relaxation(to_highs(lm), lm.integer_columns(), [])[1]
    assert float(lm.objective() @ plan) >= lp_bound * (1 - 1e-9)
    assert polished or float(lm.objective() @ plan) <= lp_bound * (1 + mip_gap)



def _two_sites_for_racks(tmp_path, chat_tok_s: float = 1600):
    """'cheap' and 'dear' (power at $50 and $100/MWh), one town with `chat_tok_s` of chat (1,600:
    two 800 tok/s 'server-air' racks' worth); the one chip that serves it is 'server'."""
    import copy

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.model.index import build_index

    catalog = copy.deepcopy(TINY_CATALOG)
    catalog["throughput"] = [t for t in catalog["throughput"] if t["chip"] == "server"]
    path = make_scenario(tmp_path, sites=[site("cheap", 0, 0, power_price_usd_per_mwh=50), site("dear", 0, 0.2)],
                         regions=[region("town", 0, 0.1, chat=chat_tok_s)], catalog=catalog)
    ix = build_index(load_scenario(path))
    return ix, build_model(ix)


def _racks_per_site(lm, plan) -> dict[str, int]:
    racks = lm.blocks["racks_inf"]
    return {s: round(sum(plan[racks.start + i] for i, key in enumerate(racks.keys) if key[0] == s)) for s in ("cheap", "dear")}


def test_the_rack_neighbourhood_fills_whole_racks_across_open_sites(tmp_path):
    """1,600 tok/s of chat (two 800 tok/s racks' worth) split 0.3 / 0.7 between two open sites
    rounds up to one rack at 'cheap' and two at 'dear': three racks. Step 6 (_rack_rens) keeps
    both sites and their zones; the LP over them sends the whole load to 'cheap' (2.0 racks), and
    the MIP between floor and ceiling buys two racks there and none at 'dear', which it then closes.
    That is the optimum over the start's sites and zones (each free to close), found here by brute
    force over every rack count 0-3 at each site, a site with none closed (each completed by the LP
    over its integers). The HiGHS instance is handed back with the
    model's bounds and integrality as they were."""
    import itertools
    import time

    import numpy as np

    from dcplace.optimizer.solvers.highs_model import to_highs
    from dcplace.optimizer.solvers.warmstart import _rack_rens, complete_start, round_within_limits

    ix, lm = _two_sites_for_racks(tmp_path)
    share = {s: lm.col("share", ("town", "chat", s)) for s in ("cheap", "dear")}
    x = np.zeros(lm.n_cols)
    x[share["cheap"]], x[share["dear"]] = 0.3, 0.7
    rounded = round_within_limits(x, lm, ix)
    x[list(rounded)] = list(rounded.values())
    deadline = time.perf_counter() + 60
    start = complete_start(to_highs(lm), lm, x, deadline)
    assert start is not None and _racks_per_site(lm, start) == {"cheap": 1, "dear": 2}
    h = to_highs(lm)
    before = h.getLp()
    model_before = (list(before.col_lower_), list(before.col_upper_), list(before.integrality_), list(before.row_lower_),
                    list(before.row_upper_))
    better = _rack_rens(h, lm, start, deadline, deadline, -math.inf)
    after = h.getLp()
    assert (list(after.col_lower_), list(after.col_upper_), list(after.integrality_), list(after.row_lower_),
            list(after.row_upper_)) == model_before
    assert better is not None and lm.is_feasible(better)
    assert _racks_per_site(lm, better) == {"cheap": 2, "dear": 0}
    assert better[share["cheap"]] == pytest.approx(1.0)
    # brute force over the start's sites and zones: every count of the one rack option at each site
    racks = lm.blocks["racks_inf"]
    options = {s: [racks.start + i for i, key in enumerate(racks.keys) if key[0] == s and start[racks.start + i] > 0] for s in share}
    assert all(len(cols) == 1 for cols in options.values())
    costs = []
    zones = lm.blocks["zone"]
    for n_cheap, n_dear in itertools.product(range(4), repeat=2):
        trial = start.copy()
        trial[options["cheap"][0]], trial[options["dear"][0]] = n_cheap, n_dear
        for s, n in (("cheap", n_cheap), ("dear", n_dear)):
            if n == 0:  # a kept site left without racks may close, with its zones
                trial[lm.col("open", s)] = 0.0
                trial[[zones.start + i for i, key in enumerate(zones.keys) if key[0] == s]] = 0.0
        done = complete_start(to_highs(lm), lm, trial, deadline)
        if done is not None:
            costs.append(float(lm.objective() @ done))
    assert float(lm.objective() @ better) == pytest.approx(min(costs), rel=1e-9)
    assert float(lm.objective() @ better) < float(lm.objective() @ start)


def test_step_6_runs_outside_the_gap_and_an_abandoned_run_keeps_the_cheaper_plan(tmp_path, monkeypatch):
    """rounded_lp_start at gap 0 on the two sites with 1,200 tok/s: the LP buys 1.5 racks, the
    rounded plan two, above the LP bound, so step 6 runs on it. When step 6's MIP, which starts from
    nothing, is abandoned at its deadline holding a dearer plan (one rack more), the
    HighsAbandoned raised carries the plan step 6 was given, not the dearer one."""
    import numpy as np

    from dcplace.optimizer.solvers import warmstart
    from dcplace.optimizer.solvers.highs_model import HighsAbandoned, to_highs

    from dcplace.optimizer.model.formulation import build_model

    ix, _ = _two_sites_for_racks(tmp_path, chat_tok_s=1200)
    lm = build_model(ix, cheapest=False)  # so that a plan with a rack more than the town needs is a plan
    given = []
    rack_rens = warmstart._rack_rens
    monkeypatch.setattr(warmstart, "_rack_rens", lambda h, lm_, plan, *rest: given.append(plan.copy()) or rack_rens(h, lm_, plan, *rest))
    how, plan = warmstart.rounded_lp_start(to_highs(lm), lm, ix, 30.0, mip_gap=0.0)
    assert len(given) == 1 and plan is not None and lm.is_feasible(plan), how
    assert float(lm.objective() @ plan) <= float(lm.objective() @ given[0])

    racks = lm.blocks["racks_inf"]
    dearer = given[0].copy()
    dearer[racks.start + int(np.flatnonzero(dearer[racks.start:racks.start + len(racks.keys)])[0])] += 1
    assert lm.is_feasible(dearer) and lm.objective() @ dearer > lm.objective() @ given[0]

    def abandoned(h, closed_cols, start, deadline, target):
        raise HighsAbandoned((dearer, float(lm.objective() @ dearer), -math.inf), 1.0)

    monkeypatch.setattr(warmstart, "_restricted_mip", abandoned)
    given.clear()
    with pytest.raises(HighsAbandoned) as caught:
        warmstart.rounded_lp_start(to_highs(lm), lm, ix, 30.0, mip_gap=0.0)
    assert len(given) == 1
    assert np.array_equal(caught.value.best[0], given[0])


def test_a_warm_start_within_the_gap_of_the_lp_bound_ends_the_solve(tmp_path, monkeypatch):
    """backends.run_highs: when the warm start's plan is within the asked gap of the LP relaxation
    the warm start solved (a bound of this very model), the search is skipped: the plan is that
    start, proven within the gap against that LP's value. At gap 0 the same scenario is searched."""
    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.model.index import build_index
    from dcplace.optimizer.solvers import backends
    from dcplace.optimizer.solvers.highs_model import to_highs
    from dcplace.optimizer.solvers.warmstart import solve_relaxation

    monkeypatch.setattr(backends, "WARM_START_MIN_COLUMNS", 0)  # this model is small enough to skip it otherwise
    scenario = _three_sites_two_jobs(tmp_path)
    lm = build_model(build_index(scenario))
    lp_bound = solve_relaxation(to_highs(lm), lm.integer_columns(), [])[1]
    loose = solve(scenario, SolveOptions(mip_gap=0.5, time_limit_s=60))
    assert loose.solve.termination.startswith("the warm start is within the gap of the LP relaxation's bound; search skipped")
    assert loose.solve.status == "optimal" and loose.solve.best_bound_usd_per_year == pytest.approx(lp_bound, rel=1e-9)
    assert lp_bound <= loose.objective_usd_per_year <= lp_bound / (1 - 0.5)
    exact = solve(scenario, EXACT)
    assert not exact.solve.termination.startswith("the warm start is within the gap")
    assert exact.objective_usd_per_year <= loose.objective_usd_per_year + 1e-6
