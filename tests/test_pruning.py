"""Pruning rules never cut off the optimum (issue 13, items A-C).

Every rule in optimizer.index.PruningRules is switched off in turn on small random
instances that carry every policy the model knows; the optimum (or the verdict that there
is no plan) must not change. The reproducers of the two defects found by review are built
here by hand: a job that only a mix of sparse and dense racks can hold, and a fabric that
is dearer per year but the only one a capex budget admits.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import highspy
import numpy as np
import pytest

from helpers import TINY_CATALOG, job, make_scenario, region, site
from dcplace.models import ScenarioError, load_scenario
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.model.index import PruningRules, build_index, most_per_site, undominated_fabrics, undominated_inference_racks
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.optimizer.solving.solve import InfeasibleScenario

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=60)

# A training chip deployable sparse (air, 16 GPUs in 20 kW) or dense (liquid, 40 GPUs in 60 kW):
# per rack position dense holds more, per kW sparse holds more, so when both floor and power
# bind, a mix holds more GPUs than either alone.
MIX_CATALOG = {
    **TINY_CATALOG,
    "rack_configs": [
        {"id": "trainer-air", "chip": "trainer", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 10, "rack_overhead_kw": 0},
        {"id": "trainer-dense", "chip": "trainer", "gpus_per_server": 8, "servers_per_rack": 5, "server_kw": 12, "rack_overhead_kw": 0},
        {"id": "server-air", "chip": "server", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 2, "rack_overhead_kw": 0},
    ],
}
# PUE 1 in both zones, so that facility kW = IT kW in the hand arithmetic below
UNIT_PUE_CATALOG = {**MIX_CATALOG, "cooling": [{**c, "pue": 1.0} for c in TINY_CATALOG["cooling"]]}
NOBODY = [region("nobody", 0, 0, chat=0)]


def _mix_site(id: str, **kw):
    """100 rack positions and 3,000 kW at PUE 1: air alone 100 racks = 1,600 GPUs, dense alone
    50 racks = 2,000 GPUs, 75 air + 25 dense = 2,200 GPUs."""
    return site(id, 0, 0, floor_racks=100, power_limit_kw=3000, **kw)


def test_lp_bound_of_a_site_is_exact_and_beats_any_single_configuration():
    options = [(16.0, 20.0), (40.0, 60.0)]
    assert most_per_site(options, 100, 3000) == pytest.approx(2200.0)
    assert max(v * min(100, 3000 / p) for v, p in options) == pytest.approx(2000.0)
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(1, 5))
        opts = [(float(rng.uniform(1, 50)), float(rng.uniform(1, 80))) for _ in range(n)]
        floor, power = float(rng.integers(1, 60)), float(rng.uniform(10, 2000))
        h = highspy.Highs()
        h.silent()
        inf = highspy.kHighsInf
        for v, _ in opts:
            h.addVar(0, inf)
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array([-v for v, _ in opts]))
        h.addRow(-inf, floor, n, np.arange(n, dtype=np.int32), np.ones(n))
        h.addRow(-inf, power, n, np.arange(n, dtype=np.int32), np.array([p for _, p in opts]))
        h.run()
        lp = -h.getInfo().objective_function_value
        assert most_per_site(opts, floor, power) == pytest.approx(lp, rel=1e-9, abs=1e-9)
        # and it bounds every integer mix (enumerated)
        best_int = 0.0
        for counts in itertools.product(*[range(int(min(floor, power / p)) + 1) for _, p in opts]):
            if sum(counts) <= floor and sum(c * p for c, (_, p) in zip(counts, opts)) <= power:
                best_int = max(best_int, sum(c * v for c, (v, _) in zip(counts, opts)))
        assert best_int <= lp + 1e-9


def test_a_job_only_a_mix_of_racks_can_hold_is_placed(tmp_path):
    """Reproducer A: 2,100 GPUs fit only as air + dense racks; this was rejected as
    'no allowed site can hold it whole' (exit 2)."""
    path = make_scenario(tmp_path / "in", [_mix_site("mix")], NOBODY, jobs=[job("big", 2100)], catalog=UNIT_PUE_CATALOG)
    plan, report = solve_to_folder(path, tmp_path / "plan", EXACT)
    assert report.ok, report.violations
    racks = {ln.config: ln.racks for s in plan.sites for ln in s.racks}
    assert set(racks) == {"trainer-air", "trainer-dense"}
    gpus = 16 * racks["trainer-air"] + 40 * racks["trainer-dense"]
    assert gpus >= 2100 and racks["trainer-air"] + racks["trainer-dense"] <= 100
    assert 20 * racks["trainer-air"] + 60 * racks["trainer-dense"] <= 3000


def test_the_cheaper_site_that_needs_a_mix_wins(tmp_path):
    """Reproducer A, second effect: with the cheap site pruned the dear one was 'optimal, gap 0'."""
    sites = [_mix_site("cheap", power_price_usd_per_mwh=30),
             site("dear", 0, 0, floor_racks=200, power_limit_kw=6000, power_price_usd_per_mwh=200)]
    path = make_scenario(tmp_path, sites, NOBODY, jobs=[job("big", 2100)], catalog=UNIT_PUE_CATALOG)
    scenario = load_scenario(path)
    plan = solve(scenario, EXACT)
    assert [p.site for p in plan.jobs] == ["cheap"]
    forced_dear = solve(scenario.model_copy(update={"policies": scenario.policies.model_copy(update={"forbidden_sites": ("cheap",)})}), EXACT)
    assert plan.objective_usd_per_year < forced_dear.objective_usd_per_year * 0.9


LONG_LIFE_FABRIC = {"id": "ib-long", "name": "IB, long life", "tier": 2, "cost_usd_per_gpu": 3000, "life_years": 15,
                    "training_efficiency": 1.0, "max_cluster_gpus": 100000}
SHORT_LIFE_FABRIC = {"id": "ib-short", "name": "IB, short life", "tier": 2, "cost_usd_per_gpu": 1000, "life_years": 2,
                     "training_efficiency": 1.0, "max_cluster_gpus": 100000}


def test_a_fabric_cheaper_up_front_survives_dominance(tmp_path):
    """Reproducer B: ib-long is cheaper per year (200 vs 500 USD/GPU at rate 0) but dearer up
    front; under a capex budget only ib-short fits, and dropping it made the scenario 'infeasible'."""
    catalog = {**TINY_CATALOG, "fabrics": [LONG_LIFE_FABRIC, SHORT_LIFE_FABRIC]}
    # 2 dense racks (96 GPUs): chips 960,000 + liquid cooling 120 kW x 1,000 = 120,000, plus fabric
    # 96 x 3,000 = 288,000 (long) or 96 x 1,000 = 96,000 (short): 1,368,000 vs 1,176,000 up front.
    path = make_scenario(tmp_path / "in", [site("a", 0, 0)], NOBODY, jobs=[job("pretrain", 96)], catalog=catalog,
                         policies={"capex_budget_usd": 1_250_000})
    scenario = load_scenario(path)
    assert undominated_fabrics(build_index(scenario).fabrics, 0.0) == {"ib-long", "ib-short"}
    plan, report = solve_to_folder(scenario, tmp_path / "plan", EXACT)
    assert report.ok, report.violations
    assert [p.fabric for p in plan.jobs] == ["ib-short"]
    # without the budget the long-life fabric is the cheaper choice per year
    free = solve(scenario.model_copy(update={"policies": scenario.policies.model_copy(update={"capex_budget_usd": None})}), EXACT)
    assert [p.fabric for p in free.jobs] == ["ib-long"]


def test_a_fabric_dearer_both_ways_is_still_dropped(tmp_path):
    dear = {**SHORT_LIFE_FABRIC, "id": "ib-dear", "cost_usd_per_gpu": 4000, "life_years": 15}
    catalog = {**TINY_CATALOG, "fabrics": [LONG_LIFE_FABRIC, dear]}
    scenario = load_scenario(make_scenario(tmp_path, [site("a", 0, 0)], NOBODY, jobs=[job("j", 48)], catalog=catalog))
    assert undominated_fabrics(build_index(scenario).fabrics, 0.0) == {"ib-long"}


# ----------------------------------------------------------- every rule, every policy

RULES = ["dominated_fabrics", "job_fits_site", "idle_inference_racks", "dominated_racks"]
EVERY_SIZE = PruningRules(dominated_racks_above_pairs=0)  # dominated racks are pruned only above a size; here at every size


def _random_instance(folder, seed: int):
    """Sites whose floor and power both bind (16-GPU air racks of 20 kW or 40-GPU dense racks of
    60 kW), jobs sized near what one site can hold, two fabrics that trade annual cost against
    upfront cost, and each policy switched on at random."""
    rng = random.Random(seed)
    fabrics = [
        {**LONG_LIFE_FABRIC, "id": "fab-long"},
        {**SHORT_LIFE_FABRIC, "id": "fab-short"},
        {"id": "fab-eth", "name": "Ethernet", "tier": 1, "cost_usd_per_gpu": rng.choice([300, 800]), "life_years": rng.choice([3, 6]),
         "training_efficiency": rng.choice([0.8, 0.9]), "max_cluster_gpus": rng.choice([200, 100000])},
    ]
    catalog = {**MIX_CATALOG, "fabrics": fabrics}
    floors = [rng.randint(4, 16) for _ in range(3)]
    sites = [
        site(f"s{i}", 0, i * 0.5, floor_racks=floor, power_limit_kw=round(floor * rng.uniform(30, 70)),
             power_price_usd_per_mwh=rng.choice([30, 60, 120]), grid_carbon_g_per_kwh=rng.choice([20, 300, 700]),
             fixed_cost_usd_per_year=rng.choice([0, 5000, 50000]), cooling_allowed=rng.choice(["air;liquid", "air;liquid", "liquid", "air"]),
             pue_climate_factor=rng.choice([0.5, 1.0]), country=rng.choice(["US", "US", "CA"]))
        for i, floor in enumerate(floors)
    ]
    regions = [region(f"r{i}", 0, rng.uniform(0, 1), chat=rng.choice([0, 400, 1500]), budget=rng.choice([3, 8, 50])) for i in range(2)]
    jobs = [job(f"j{i}", round(rng.choice(floors) * rng.uniform(12, 34)), min_fabric_tier=rng.choice([0, 2]),
                allowed_countries=rng.choice(["", "", "US"])) for i in range(rng.randint(1, 2))]
    if rng.random() < 0.25:
        regions[0]["allowed_countries"] = "US"
    policies = {}
    if rng.random() < 0.6:
        policies["capex_budget_usd"] = round(sum(j["gpus_h100_equiv"] for j in jobs) * rng.uniform(11_500, 14_000) + 100_000)
    if rng.random() < 0.25:
        policies["carbon_cap_t_per_year"] = rng.choice([500, 3000])
    if rng.random() < 0.25:
        policies["max_sites"] = 1
    if rng.random() < 0.25:
        policies["single_purpose_sites"] = True
    if rng.random() < 0.25:
        policies["max_share_per_site"] = 0.5
    if rng.random() < 0.2 and "max_sites" not in policies:
        policies["min_sites"] = 2
    if rng.random() < 0.2:
        policies["forced_sites"] = ["s1"]
    if rng.random() < 0.2 and policies.get("min_sites", 0) < 2:
        policies["forbidden_sites"] = ["s2"]
    return make_scenario(folder, sites, regions, jobs=jobs, catalog=catalog, policies=policies,
                         economics={"discount_rate": rng.choice([0.0, 0.08])})


def _outcome(scenario, pruning: PruningRules):
    try:
        return solve(scenario, replace(EXACT, pruning=pruning)).objective_usd_per_year
    except (ScenarioError, InfeasibleScenario):
        return None


def test_no_pruning_rule_changes_the_optimum(tmp_path):
    """40 random instances, each solved with all rules, with none, and with each rule off; the
    generator switches on, at random, every policy the model carries (capex budget, carbon cap,
    site counts, forced and forbidden sites, single purpose, max share, allowed countries)."""
    differing, solved = [], 0
    for seed in range(40):
        scenario = load_scenario(_random_instance(tmp_path / str(seed), seed))
        reference = _outcome(scenario, PruningRules.none())
        solved += reference is not None
        variants = {"all": EVERY_SIZE} | {f"without {r}": replace(EVERY_SIZE, **{r: False}) for r in RULES}
        for label, rules in variants.items():
            got = _outcome(scenario, rules)
            same = (got is None and reference is None) or (
                got is not None and reference is not None and abs(got - reference) <= 1e-7 * max(1.0, abs(reference)))
            if not same:
                differing.append((seed, label, got, reference))
    assert not differing, differing
    assert solved >= 15, f"only {solved} of 40 random instances had a plan: the generator no longer tests much"


# ------------------------------------------------------------- dominated inference racks


def _rack_instance(folder, seed: int):
    """Three inference chips with random price, speed and power in sparse and dense racks, so
    that some racks dominate others one for one and some only per tok/s; sites whose floor
    or power binds, and the policies that count racks (capex budget, carbon cap) at random."""
    rng = random.Random(seed)
    chips, racks, throughput = [], [], []
    for i in range(3):
        chips.append({"id": f"inf{i}", "name": f"Inference {i}", "vendor": "X", "capex_usd_per_gpu": rng.choice([1500, 2000, 2600]),
                      "life_years": rng.choice([4, 5]), "h100_equiv": 0})
        throughput.append({"chip": f"inf{i}", "workload": "chat", "tok_s_per_gpu": rng.choice([40, 50, 65])})
        for name, servers in (("air", 2), ("dense", rng.choice([3, 4]))):
            racks.append({"id": f"inf{i}-{name}", "chip": f"inf{i}", "gpus_per_server": 8, "servers_per_rack": servers,
                          "server_kw": rng.choice([1.5, 2.0, 2.5]), "rack_overhead_kw": rng.choice([0, 1])})
    catalog = {**TINY_CATALOG, "chips": chips, "rack_configs": racks, "throughput": throughput}
    sites = [site(f"s{i}", 0, i * 0.3, floor_racks=rng.randint(2, 8), power_limit_kw=rng.choice([40, 80, 400]),
                  power_price_usd_per_mwh=rng.choice([30, 120]), grid_carbon_g_per_kwh=rng.choice([20, 700]),
                  fixed_cost_usd_per_year=rng.choice([0, 5000]), cooling_allowed=rng.choice(["air;liquid", "air"])) for i in range(3)]
    regions = [region(f"r{i}", 0, rng.uniform(0, 0.6), chat=rng.choice([500, 1500, 4000]), budget=50) for i in range(2)]
    policies = {}
    if rng.random() < 0.4:
        policies["capex_budget_usd"] = rng.choice([150_000, 300_000])
    if rng.random() < 0.4:
        policies["carbon_cap_t_per_year"] = rng.choice([50, 200])
    if rng.random() < 0.3:
        policies["max_share_per_site"] = 0.6
    return make_scenario(folder, sites, regions, jobs=[], catalog=catalog, policies=policies)


def test_dominated_racks_keep_the_optimum(tmp_path):
    """30 random instances solved exactly with and without the rule: same optimum (or both
    without a plan), and the rule drops racks in most of them, so the test is not vacuous."""
    differing, dropped_in, solved = [], 0, 0
    without = replace(EVERY_SIZE, dominated_racks=False)
    for seed in range(30):
        scenario = load_scenario(_rack_instance(tmp_path / str(seed), seed))
        full = build_index(scenario, pruning=without)
        pruned = build_index(scenario, pruning=EVERY_SIZE)
        assert set(build_index(scenario).inf_racks) == set(full.inf_racks)  # a small scenario: dominance is not applied
        assert set(pruned.inf_racks) == undominated_inference_racks(full) and set(pruned.inf_racks) <= set(full.inf_racks)
        dropped_in += len(pruned.inf_racks) < len(full.inf_racks)
        reference, got = _outcome(scenario, without), _outcome(scenario, EVERY_SIZE)
        solved += reference is not None
        same = (got is None and reference is None) or (
            got is not None and reference is not None and abs(got - reference) <= 1e-7 * max(1.0, abs(reference)))
        if not same:
            differing.append((seed, got, reference))
    assert not differing, differing
    assert dropped_in >= 15 and solved >= 15, (dropped_in, solved)


def test_a_rack_cheaper_only_per_tok_s_is_kept(tmp_path):
    """'fast' serves twice the tok/s of 'slow' at 1.5 times the cost, power and capex: cheaper per
    tok/s, yet a region that needs one 'slow' rack's worth is served more cheaply by 'slow'."""
    chips = [{"id": "slow", "name": "Slow", "vendor": "X", "capex_usd_per_gpu": 2000, "life_years": 5, "h100_equiv": 0},
             {"id": "fast", "name": "Fast", "vendor": "X", "capex_usd_per_gpu": 3000, "life_years": 5, "h100_equiv": 0}]
    racks = [{"id": "slow-air", "chip": "slow", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 2, "rack_overhead_kw": 0},
             {"id": "fast-air", "chip": "fast", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 3, "rack_overhead_kw": 0}]
    throughput = [{"chip": "slow", "workload": "chat", "tok_s_per_gpu": 50}, {"chip": "fast", "workload": "chat", "tok_s_per_gpu": 100}]
    catalog = {**TINY_CATALOG, "chips": chips, "rack_configs": racks, "throughput": throughput}
    scenario = load_scenario(make_scenario(tmp_path, [site("a", 0, 0, cooling_allowed="air")], [region("r", 0, 0, chat=800)],
                                           jobs=[], catalog=catalog))
    assert {k for _, k, _, _ in build_index(scenario, pruning=EVERY_SIZE).inf_racks} == {"slow-air", "fast-air"}
    plan = solve(scenario, EXACT)
    assert {ln.config: ln.racks for s in plan.sites for ln in s.racks} == {"slow-air": 1}
