"""Resilience (issue 16, docs/resilience.md): N-1 inference, training standby, the outage table,
the checker's N-1 rule, the named infeasibility, and the new fields' round trip.

Hand-derived figures use the tiny catalog of tests/helpers.py with discount rate 0 and
target utilization 1: a 'server-air' rack is 16 GPUs x 50 tok/s = 800 tok/s of chat, 4 kW
IT at PUE 1.5, and costs per year 16 x $2,000 / 5 (chips) + 4 x 1.5 x 8,760 x 0.5 / 1000
MWh x $100 (energy) + 4 kW x $100 x 12 (colocation) = 6,400 + 2,628 + 4,800 = $13,828.
A site costs $1,000 a year to open. Round trips: route factor 1, 200 km/ms, no overhead, so
rtt_ms = great-circle km / 100.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from helpers import job, make_scenario, region, site
from dcplace.models import ScenarioError, load_scenario
from dcplace.models.files import write_scenario
from dcplace.models.plan import write_plan_folder
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.checker import PlanChecker, check_plan_folder
from dcplace.optimizer.studies.outages import outage_table
import dcplace.optimizer.solving.solve as solve_module

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)
RACK_USD = 6400 + 2628 + 4800  # one server-air rack a year, by hand (module docstring)
RACK_TOK_S = 800
SITE_USD = 1000
KM_PER_DEG = 6371.0088 * math.pi / 180


def rtt_deg(deg: float) -> float:
    """Round trip along the equator over `deg` degrees of longitude, by hand."""
    return 2 * deg * KM_PER_DEG / 200


def capacity(plan, s: str) -> float:
    return sum(ln.racks * RACK_TOK_S for x in plan.sites if x.id == s for ln in x.racks if ln.purpose == "inference")


def three_sites(tmp_path, **policies):
    return make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 0.2), site("c", 0.2, 0)],
                         regions=[region("town", 0.1, 0.1, chat=4800, budget=50)],
                         policies={"survive_site_loss": {"chat": 1.0}, **policies})


def test_three_sites_survive_the_loss_of_any_one(tmp_path):
    """One region, 4,800 tok/s, three sites in reach: each open site holds half the demand
    (2,400 tok/s = 3 racks), so the other two re-serve whatever any one served. Two sites
    would need 4,800 each (12 racks), one cannot survive its own loss."""
    plan = solve(load_scenario(three_sites(tmp_path / "in")), OPTIONS)
    assert plan.solve.failover["secure"] is True
    assert sorted(s.id for s in plan.sites if s.open) == ["a", "b", "c"]
    assert [capacity(plan, s) for s in "abc"] == [2400, 2400, 2400]  # = 4,800 / 2 each
    assert plan.objective_usd_per_year == pytest.approx(9 * RACK_USD + 3 * SITE_USD)  # $127,452
    base = solve(load_scenario(make_scenario(tmp_path / "base", sites=[site("a", 0, 0), site("b", 0, 0.2), site("c", 0.2, 0)],
                                             regions=[region("town", 0.1, 0.1, chat=4800, budget=50)])), OPTIONS)
    assert base.objective_usd_per_year == pytest.approx(6 * RACK_USD + SITE_USD)  # today's plan: one site, 6 racks


def test_a_survive_share_below_one_needs_less(tmp_path):
    """80 % must survive: losing site f, the others' spare capacity must re-serve
    max(0, load_f - 20 % x 4,800) = max(0, load_f - 960). With total capacity C over the open
    sites, spare S = C - 4,800, the loss of f needs S - (cap_f - load_f) >= load_f - 960, i.e.
    cap_f <= S + 960 wherever load_f >= 960. Two sites: cap_1 + cap_2 = 4,800 + S <= 2 (S + 960)
    gives S >= 2,880, 10 racks: $140,280. Three sites, 7 racks (S = 800): a 3-rack site has
    cap 2,400 > 1,760, so its load must stay under 960 yet at least cap - S = 1,600: impossible.
    Three sites, 8 racks as 3/3/2 (loads 2,000/2,000/800) hold: 8 x $13,828 + 3 x $1,000 = $113,624.
    With 50 %: two sites of 2,400 each lose exactly what they may: 6 racks, $84,968."""
    plan = solve(load_scenario(three_sites(tmp_path / "in", survive_site_loss={"chat": 0.8})), OPTIONS)
    assert plan.solve.failover["secure"] is True
    assert sum(s.open for s in plan.sites) == 3
    assert plan.objective_usd_per_year == pytest.approx(8 * RACK_USD + 3 * SITE_USD)
    half = solve(load_scenario(three_sites(tmp_path / "half", survive_site_loss={"chat": 0.5})), OPTIONS)
    assert half.objective_usd_per_year == pytest.approx(6 * RACK_USD + 2 * SITE_USD)
    assert sorted(capacity(half, s) for s in "abc" if capacity(half, s)) == [2400, 2400]


def test_no_second_site_within_the_failover_budget_is_named(tmp_path):
    """'b' is 9.9 degrees from the town: 11.0 ms, beyond the 8 ms failover budget."""
    path = make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 10)], regions=[region("town", 0, 0.1, budget=5)],
                         policies={"survive_site_loss": ["chat"], "failover_rtt_ms": {"chat": 8}})
    with pytest.raises(ScenarioError) as info:
        solve(load_scenario(path), OPTIONS)
    text = str(info.value)
    expected = f"region Town has no second site within its failover budget of 8 ms for 'chat'; nearest backup B (b) at {rtt_deg(9.9):.1f} ms"
    assert expected in text, text
    assert "regions.csv, row 2, field 'failover_rtt_chat_ms'" in text


def test_a_region_failover_budget_overrides_the_policy(tmp_path):
    """The same world with the town's own failover_rtt_chat_ms of 12 ms reaches 'b' (11.0 ms)."""
    path = make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 10)],
                         regions=[region("town", 0, 0.1, budget=5, failover_rtt_chat_ms=12)],
                         policies={"survive_site_loss": ["chat"], "failover_rtt_ms": {"chat": 8}})
    plan = solve(load_scenario(path), OPTIONS)
    assert plan.solve.failover["secure"] is True
    assert capacity(plan, "a") == capacity(plan, "b") == 800  # a serves the town, b stands by with as much


def two_towns_with_job(tmp_path, **job_fields):
    """x (4,500 tok/s) reaches only 'a', y (1,200 tok/s) only 'b' within 0.5 ms; 2 ms when a site is down."""
    return make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 1)],
                         regions=[region("x", 0, 0.1, chat=4500, budget=0.5), region("y", 0, 0.9, chat=1200, budget=0.5)],
                         jobs=[job("pretrain", 48, **job_fields)], policies={"failover_rtt_ms": {"chat": 2}})


def test_outage_table_matches_a_hand_calculation(tmp_path):
    """Today's plan (no survival policy): 'a' has 6 racks (4,800) for x's 4,500, spare 300;
    'b' has 2 racks (1,600) for y's 1,200, spare 400. Losing 'a': 400 of x's 4,500 re-served
    at b (0.9 degrees: 1.0008 ms), 4,100 at risk. Losing 'b': 300 of y's 1,200 re-served at
    a, 900 at risk. The job stalls 14 days (policies.site_outage_days) where it runs."""
    scenario = load_scenario(two_towns_with_job(tmp_path / "in"))
    plan = solve(scenario, OPTIONS)
    folder = write_plan_folder(plan, scenario, tmp_path / "plan")
    table = outage_table(folder)
    assert table.secure is None
    by_site = {o.site: o for o in table.outages}
    assert set(by_site) == {"a", "b"}
    a, b = by_site["a"], by_site["b"]
    assert a.lost_tok_s["chat"] == pytest.approx(4500)
    assert a.reserved_tok_s["chat"] == pytest.approx(400)
    assert a.at_risk_tok_s["chat"] == pytest.approx(4100)
    assert a.fallback_rtt_ms == pytest.approx(rtt_deg(0.9))
    assert [r.region for r in a.regions_at_risk()] == ["x"]
    assert b.lost_tok_s["chat"] == pytest.approx(1200)
    assert b.reserved_tok_s["chat"] == pytest.approx(300)
    assert b.at_risk_tok_s["chat"] == pytest.approx(900)
    assert b.fallback_rtt_ms == pytest.approx(rtt_deg(0.9))
    runs_at = plan.jobs[0].site
    assert by_site[runs_at].training_days_at_risk == 14
    assert by_site[runs_at].gpu_days_at_risk == 14 * 48
    other = ({"a", "b"} - {runs_at}).pop()
    assert by_site[other].jobs == []


def test_a_standby_site_holds_the_job_elsewhere(tmp_path):
    """standby_required: one 48-GPU trainer rack where the job runs and one at the other site;
    a loss of the job's site then stalls it for standby_resume_days (1), not 14."""
    scenario = load_scenario(two_towns_with_job(tmp_path / "in", standby_required=True))
    plan = solve(scenario, OPTIONS)
    placed = plan.jobs[0]
    assert placed.standby_site and placed.standby_site != placed.site
    trainers = {s.id: sum(ln.racks for ln in s.racks if ln.purpose == "training") for s in plan.sites}
    assert trainers == {"a": 1, "b": 1}
    folder = write_plan_folder(plan, scenario, tmp_path / "plan")
    assert check_plan_folder(folder).ok
    table = outage_table(folder)
    assert {o.site: o.training_days_at_risk for o in table.outages}[placed.site] == 1


def test_checker_rejects_a_plan_that_loses_demand_when_a_site_goes_down(tmp_path):
    """Today's single-site plan, judged under a survival policy: losing 'a' loses all 4,800 tok/s."""
    base = load_scenario(make_scenario(tmp_path / "base", sites=[site("a", 0, 0), site("b", 0, 0.2), site("c", 0.2, 0)],
                                       regions=[region("town", 0.1, 0.1, chat=4800, budget=50)]))
    plan = solve(base, OPTIONS)
    strict = load_scenario(three_sites(tmp_path / "strict"))
    folder = write_plan_folder(plan, strict, tmp_path / "plan")
    checker = PlanChecker(folder)
    checker.check_failover()
    messages = [str(v) for v in checker.report.violations]
    assert len(messages) == 2
    lost = next(s.id for s in plan.sites if s.open)
    assert f"losing site {lost} leaves 4,800.0 tok/s of 'chat' unserved" in messages[0]
    assert "solve.failover is empty" in messages[1]  # solved without the policy, the plan records no N-1 loop
    table = outage_table(folder)
    assert table.secure is False
    assert [o.meets_policy for o in table.outages] == [False]


def test_checker_accepts_the_secure_plan(tmp_path):
    scenario = load_scenario(three_sites(tmp_path / "in"))
    plan = solve(scenario, OPTIONS)
    report = check_plan_folder(write_plan_folder(plan, scenario, tmp_path / "plan"))
    assert report.ok, report.violations
    assert "failover" in report.checked and "standby" in report.checked


def all_reroutings(ix):
    """Every (lost site, region, class) of the full N-1 model."""
    return sorted({(s, r, w) for r, w, s in ix.serve if w in ix.failover})


def test_lazy_generation_reaches_the_full_model_optimum(tmp_path, monkeypatch):
    """Towns spread along a line, budgets that make each loss's re-routing regional: the lazy
    loop's plan costs exactly what the full N-1 model (every loss from the start) costs."""
    sites = [site(f"s{i}", 0, i * 0.5, power_price_usd_per_mwh=100 + 10 * (i % 3)) for i in range(6)]
    regions = [region(f"t{i}", 0, i * 0.4 + 0.1, chat=800 * (1 + i % 3), budget=6) for i in range(7)]
    path = make_scenario(tmp_path, sites=sites, regions=regions, policies={"survive_site_loss": ["chat"], "failover_rtt_ms": {"chat": 12}})
    lazy = solve(load_scenario(path), OPTIONS)
    assert lazy.solve.failover["secure"] is True
    original = solve_module.checked_index

    def full(*args, **kwargs):
        ix = original(*args, **kwargs)
        ix.failover_lost = all_reroutings(ix)
        return ix

    monkeypatch.setattr(solve_module, "checked_index", full)
    whole = solve(load_scenario(path), OPTIONS)
    monkeypatch.undo()
    assert whole.solve.failover["secure"] is True
    assert len(whole.solve.failover["rounds"]) == 1
    assert lazy.objective_usd_per_year == pytest.approx(whole.objective_usd_per_year, rel=1e-9)
    assert lazy.solve.failover["reroutings_in_model"] <= whole.solve.failover["reroutings_in_model"]


def test_the_new_fields_round_trip(tmp_path):
    path = make_scenario(tmp_path / "in", sites=[site("a", 0, 0), site("b", 0, 0.2)],
                         regions=[region("town", 0, 0.1, budget=5, failover_rtt_chat_ms=9.5), region("city", 0, 0.15, budget=5)],
                         jobs=[job("pretrain", 48, standby_required=True)],
                         policies={"survive_site_loss": {"chat": 0.8}, "failover_rtt_ms": {"chat": 7}, "site_outage_days": 30,
                                   "standby_resume_days": 2})
    scenario = load_scenario(path)
    assert scenario.regions[0].failover_rtt_ms == {"chat": 9.5} and scenario.regions[1].failover_rtt_ms == {}
    assert scenario.jobs[0].standby_required is True
    assert scenario.policies.survive_site_loss == {"chat": 0.8}
    again = load_scenario(write_scenario(scenario, tmp_path / "out"))
    assert again.content_hash == scenario.content_hash
    assert again.regions == scenario.regions and again.jobs == scenario.jobs and again.policies == scenario.policies
    listed = load_scenario(make_scenario(tmp_path / "list", sites=[site("a", 0, 0)], regions=[region("town", 0, 0.1)],
                                         policies={"survive_site_loss": "chat"}))
    assert listed.policies.survive_site_loss == {"chat": 1.0}


@pytest.mark.parametrize("policies, field, words", [
    ({"survive_site_loss": {"chatt": 1.0}}, "policies.survive_site_loss", "unknown workload class 'chatt'"),
    ({"survive_site_loss": {"chat": 1.5}}, "policies.survive_site_loss", "less than or equal to 1"),
    ({"failover_rtt_ms": {"chat": -3}}, "policies.failover_rtt_ms", "greater than 0"),
])
def test_bad_resilience_policies_are_named(tmp_path, policies, field, words):
    path = make_scenario(tmp_path, sites=[site("a", 0, 0)], regions=[region("town", 0, 0.1)], policies=policies)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    text = str(info.value)
    assert field in text and words in text, text


def test_a_bad_region_failover_budget_names_its_cell(tmp_path):
    path = make_scenario(tmp_path, sites=[site("a", 0, 0)], regions=[region("town", 0, 0.1, failover_rtt_chat_ms="fast")])
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert re.search(r"regions\.csv, row 2, field 'failover_rtt_chat_ms'", str(info.value)), str(info.value)


def test_a_standby_no_second_site_can_hold_is_named(tmp_path):
    path = make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 0.2, cooling_allowed="air")],
                         regions=[region("town", 0, 0.1)], jobs=[job("pretrain", 48, standby_required=True)])
    with pytest.raises(ScenarioError) as info:
        solve(load_scenario(path), OPTIONS)
    assert "job Pretrain requires a standby site, but only A (a) can hold it" in str(info.value)


def test_batch_compare_and_pareto_carry_the_policy(tmp_path):
    """A sweep member sets the policy by override; its plan is N-1-secure and checked, compare
    shows the premium, and a carbon frontier of the survivable scenario keeps the policy at
    every point (each point's plan passes the checker's N-1 re-route)."""
    from dcplace.models.sweep import Member, Sweep
    from dcplace.optimizer.studies.batch import run_batch
    from dcplace.optimizer.studies.pareto import trace_pareto
    from dcplace.reports.compare import collect_plans, comparison_table

    sites = [site("a", 0, 0, grid_carbon_g_per_kwh=800, power_price_usd_per_mwh=50), site("b", 0, 0.2), site("c", 0.2, 0, grid_carbon_g_per_kwh=20)]
    base = make_scenario(tmp_path / "in", sites=sites, regions=[region("town", 0.1, 0.1, chat=4800, budget=50)])
    sweep = Sweep("n-1", base, [Member("today", {}), Member("n-1", {"policies.survive_site_loss": {"chat": 1}})], {"mip_gap": 0})
    result = run_batch(sweep, tmp_path / "runs", workers=1)
    by_name = {r.name: r for r in result.results}
    assert by_name["today"].status == by_name["n-1"].status == "optimal"
    assert check_plan_folder(tmp_path / "runs" / "n-1").ok
    today = outage_table(tmp_path / "runs" / "today")
    assert today.secure is None and today.worst().at_risk_total_tok_s == pytest.approx(4800)
    table = comparison_table(collect_plans([tmp_path / "runs" / "today", tmp_path / "runs" / "n-1"]), "today")
    premium = by_name["n-1"].objective_usd_per_year - by_name["today"].objective_usd_per_year
    assert table.iloc[1]["cost_change_musd_per_year"] == pytest.approx(premium / 1e6)
    assert premium > 0

    survivable = make_scenario(tmp_path / "n1", sites=sites, regions=[region("town", 0.1, 0.1, chat=4800, budget=50)],
                               policies={"survive_site_loss": {"chat": 1}})
    frontier = trace_pareto(load_scenario(survivable), tmp_path / "pareto", "carbon", points=3, options={"mip_gap": 0})
    solved = [Path(p.folder) for p in frontier if p.folder and (Path(p.folder) / "plan.json").exists()]
    assert len(solved) >= 2
    for folder in solved:
        assert check_plan_folder(folder).ok
        assert all(o.meets_policy for o in outage_table(folder).outages)


def test_an_n1_that_power_cannot_hold_is_diagnosed(tmp_path):
    """Two sites of 18 kW: each must hold the whole 4,800 tok/s when the other is lost, 6 racks,
    at least 6 x 4 kW x 1.1 (the liquid zone's PUE, the leanest) = 26.4 kW: over by 8.4 kW each."""
    from dcplace.optimizer.solving.solve import InfeasibleScenario

    path = make_scenario(tmp_path, sites=[site("a", 0, 0, power_limit_kw=18), site("b", 0, 0.2, power_limit_kw=18)],
                         regions=[region("town", 0.1, 0.1, chat=4800, budget=50)], policies={"survive_site_loss": ["chat"]})
    with pytest.raises(InfeasibleScenario) as info:
        solve(load_scenario(path), OPTIONS)
    assert info.value.diagnosis == [
        "site A power 18.0 kW is over by 8.4 kW: raise power_limit_kw in sites.csv to at least 26.4 kW",
        "site B power 18.0 kW is over by 8.4 kW: raise power_limit_kw in sites.csv to at least 26.4 kW"]


def test_min_cut_of_a_broken_reroute_is_violated_by_exactly_its_shortfall():
    """The min cut the lazy loop adds (optimizer.solving.failover.min_cut): its regions reach no
    site outside it, and their need exceeds its sites' spare by the tok/s left unserved."""
    from dcplace.optimizer.solving.failover import min_cut, reroute_lp

    cases = [({"a": 10.0, "b": 5.0}, {"s1": 4.0, "s2": 100.0}, {("a", "s1"): 1.0, ("b", "s1"): 1.0, ("b", "s2"): 2.0}),
             ({"a": 10.0, "b": 5.0}, {"s1": 8.0, "s2": 2.0}, {("a", "s1"): 1.0, ("b", "s1"): 1.0, ("b", "s2"): 2.0}),
             ({"a": 3.0, "b": 5.0}, {"s1": 0.0, "s2": 2.0}, {("a", "s1"): 1.0, ("a", "s2"): 1.0, ("b", "s2"): 2.0})]
    for need, spare, arcs in cases:
        rr = reroute_lp(need, spare, arcs)
        assert rr.breaks
        regions, sites = min_cut(rr, arcs, spare)
        assert {s for (r, s) in arcs if r in regions} <= set(sites)
        assert sum(need[r] for r in regions) - sum(spare[s] for s in sites) == pytest.approx(rr.short_tok_s, rel=1e-6)


def test_an_lp_plan_is_read_with_its_fractional_racks_and_sites(tmp_path):
    """state_from_columns(fractional=True), as benchmarks/n1_bound.py re-routes an LP plan: half a
    rack is 400 tok/s of capacity and a site open at 0.1 is open; rounded, the half rack rounds to
    nothing (round half to even) and the site is closed. By hand: RACK_TOK_S = 800."""
    import numpy as np

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.solving.failover import state_from_columns
    from dcplace.optimizer.solving.precheck import checked_index

    ix = checked_index(load_scenario(three_sites(tmp_path)))
    lm = build_model(ix)
    x = np.zeros(lm.n_cols)
    rack = next(key for key in ix.inf_racks if key[0] == "a" and key[1] == "server-air")
    x[lm.col("racks_inf", rack)] = 0.5
    x[lm.col("open", "a")] = 0.1
    x[lm.col("share", ("town", "chat", "a"))] = 0.25
    lp = state_from_columns(x, lm, ix, fractional=True)
    assert lp.capacity == {("a", "chat"): pytest.approx(0.5 * RACK_TOK_S)} and lp.open_sites == {"a"}
    assert lp.load == {("a", "chat"): pytest.approx(0.25 * 4800)}
    assert lp.spare("chat") == {"a": 0.0}  # 400 tok/s built, 1,200 served: no spare
    rounded = state_from_columns(x, lm, ix)
    assert rounded.capacity == {} and rounded.open_sites == set()


@pytest.mark.parametrize("block", [2048, 7])
def test_hall_cuts_are_the_subset_rule_by_brute_force(monkeypatch, block):
    """model.failover.hall_cuts finds each region's cut by one matrix product per (site, class);
    here every pair of regions is tested for reach[q] <= reach[r] with sets, as the docstring
    states the rule, on a synthetic world with N-1 (the product must give the same cuts in the
    same order: the model's rows follow it). With blocks of 7 regions the product is taken in
    pieces and alike cuts are merged across them: the same cuts again."""
    import numpy as np

    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.optimizer.model import failover
    from dcplace.optimizer.model.failover import hall_cuts
    from dcplace.optimizer.solving.precheck import checked_index

    monkeypatch.setattr(failover, "CUT_BLOCK", block)

    scenario = synthetic_scenario(7, 40, 160, 2, box_deg=(25.0, 45.0))
    scenario = scenario.model_copy(update={"policies": scenario.policies.model_copy(
        update={"survive_site_loss": {"chat": 1.0, "reasoning": 0.8}})})
    ix = checked_index(scenario)
    site_ids = [s.id for s in scenario.sites]
    has = set(ix.inf_by_sw)
    lost = set(ix.failover_lost)
    expected, seen = [], set()
    for (f, w), regions in sorted(ix.serve_by_sw.items()):
        if w not in ("chat", "reasoning"):
            continue
        reach = {r: {site_ids[j] for j in np.flatnonzero(ix.failover[w][ix.region_pos[r]])
                     if site_ids[j] != f and (site_ids[j], w) in has} for r in regions}
        for r in regions:
            inside = tuple(sorted(q for q in regions if reach[q] <= reach[r]))
            if (f, w, inside) not in seen and any((f, q, w) not in lost for q in inside):
                seen.add((f, w, inside))
                expected.append((f, w, inside, tuple(sorted(reach[r]))))
    assert len(expected) > 40
    assert any(len(cut[2]) > 1 for cut in expected)  # some cuts hold several regions
    assert hall_cuts(ix) == expected


@pytest.mark.parametrize("block", [1, 3, 8, 9, 2048])
def test_distinct_cuts_in_blocks_are_the_whole_product(monkeypatch, block):
    """failover._distinct_cuts, its product taken CUT_BLOCK regions at a time and its cuts kept as
    bits, gives what one whole product gives: for the first region of each distinct cut, in
    region order, the regions inside it (q inside i's cut when reach[q] <= reach[i]), on random
    reach matrices with repeated rows, no backups at all, and region counts not a multiple of 8;
    and nothing for no regions."""
    import numpy as np

    from dcplace.optimizer.model import failover

    monkeypatch.setattr(failover, "CUT_BLOCK", block)
    rng = np.random.default_rng(3)
    for n_regions, n_sites in [(0, 4), (1, 3), (5, 0), (13, 4), (29, 6), (64, 5)]:
        reach = rng.random((n_regions, n_sites)) < 0.4
        if n_regions > 4:
            reach[n_regions // 2] = reach[1]  # a repeated region: the same cut, kept once
        whole = [(i, np.flatnonzero([(reach[q] <= reach[i]).all() for q in range(n_regions)]))
                 for i in range(n_regions)]
        expected, seen = [], set()
        for i, members in whole:
            if tuple(members) not in seen:
                seen.add(tuple(members))
                expected.append((i, members.tolist()))
        assert [(i, members.tolist()) for i, members in failover._distinct_cuts(reach)] == expected


def test_the_warm_start_keeps_every_site_the_lp_opens_when_the_kept_ones_cannot_survive(tmp_path):
    """warmstart.rounded_lp_start with N-1: the LP opens 'c' by half, 'a' by 0.47 and 'b' by
    0.03, so only 'c' is kept at first, and the LP over 'c' alone is infeasible (nothing
    re-serves its loss). The warm start then keeps every site the LP opens at all and rounds a
    secure plan over them (it had rounded the whole LP's point instead, which broke a site's
    limits at 200 x 1,000 and left no plan). The model is built without failover_open_spread,
    whose rows make this LP open all three sites whole (tests/test_registry.py): with it there is
    no fractional site to fall back on, and the path is not taken."""
    import math

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.model.index import build_index
    from dcplace.optimizer.solvers import warmstart
    from dcplace.optimizer.solvers.highs_model import to_highs
    from dcplace.optimizer.solvers.lazy_rows import LazyRows

    path = make_scenario(tmp_path, sites=[site("a", 0, 0, power_price_usd_per_mwh=20), site("b", 0, 0.2, power_price_usd_per_mwh=200),
                                          site("c", 0.2, 0, power_price_usd_per_mwh=200)],
                         regions=[region("town", 0.1, 0.1, chat=4800, budget=50)], policies={"survive_site_loss": {"chat": 1.0}})
    ix = build_index(load_scenario(path))
    lm = build_model(ix, without=("failover_open_spread",))
    integer = lm.integer_columns()
    x, _ = warmstart.solve_relaxation(to_highs(lm), integer, [], math.inf, LazyRows(lm))
    kept = warmstart._sites_to_keep(x, lm, ix)
    closed = [lm.col("open", s) for s in ix.sites if s not in kept]
    assert len(kept) < 3 and warmstart.solve_relaxation(to_highs(lm), integer, closed, math.inf, LazyRows(lm)) is None
    how, plan = warmstart.rounded_lp_start(to_highs(lm), lm, ix, 30.0)
    assert plan is not None and lm.is_feasible(plan) and "3 sites kept" in how, how


def test_the_executive_summary_says_the_plan_is_n1_secure(tmp_path):
    from dcplace.reports.layers import load_plan_layers
    from dcplace.reports.summary import executive_summary

    scenario = load_scenario(three_sites(tmp_path / "in"))
    plan = solve(scenario, OPTIONS)
    summary = executive_summary(load_plan_layers(write_plan_folder(plan, scenario, tmp_path / "plan")))
    (line,) = [t for t in summary.inference if "N-1" in t]
    assert line.startswith("The plan is N-1 secure:") and "of any one of its 3 open sites" in line, line
