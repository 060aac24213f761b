"""Infeasible scenarios are explained in the user's words: which limit, and by how much."""

from __future__ import annotations

import math

import pytest

from helpers import job, make_scenario, region, site
from dcplace.models import load_scenario
from dcplace.optimizer import InfeasibleScenario, NoPlanFound, SolveOptions, solve

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)


def diagnosis_of(path) -> list[str]:
    with pytest.raises(InfeasibleScenario) as info:
        solve(load_scenario(path), OPTIONS)
    plan = info.value.plan
    assert plan.solve.status == "infeasible" and not plan.sites
    assert plan.diagnosis == info.value.diagnosis
    return info.value.diagnosis


def two_towns(tmp_path, **kw):
    """Two regions 10 degrees apart, each reachable only from its own site."""
    args = dict(
        sites=[site("west", 0, 0), site("east", 0, 10)],
        regions=[region("wtown", 0, 0.1, budget=5), region("etown", 0, 10.1, budget=5)],
    )
    args.update(kw)
    return make_scenario(tmp_path, **args)


def test_carbon_cap_too_low(tmp_path):
    # least-carbon plan: one 'server-air' rack per town in a liquid zone (PUE 1.1):
    # 4 kW x 1.1 x 8760 h x 0.5 = 19.27 MWh at 400 g/kWh = 7.71 t/yr per site, 15.4 t in all
    found = diagnosis_of(two_towns(tmp_path, policies={"carbon_cap_t_per_year": 1.0}))
    assert any("carbon cap 1 t CO2/yr is exceeded by 14 t CO2/yr" in line for line in found), found


def test_capex_budget_too_low(tmp_path):
    # one rack per town: 16 GPUs x $2,000 = $32,000 each, $64,000 in all
    found = diagnosis_of(two_towns(tmp_path, policies={"capex_budget_usd": 40000}))
    assert any("capex budget $40,000 is exceeded by $24,000" in line for line in found), found


def test_max_sites_too_few(tmp_path):
    found = diagnosis_of(two_towns(tmp_path, policies={"max_sites": 1}))
    assert found[0] == "max_sites 1 is exceeded by 1 site(s)"


def test_forced_sites_beyond_max_sites(tmp_path):
    path = make_scenario(
        tmp_path, sites=[site("a", 0, 0), site("b", 0, 1), site("c", 0, 2)], regions=[region("town", 0, 0.5)],
        policies={"forced_sites": ["a", "b", "c"], "max_sites": 2},
    )
    found = diagnosis_of(path)
    assert found[0] == "max_sites 2 is exceeded by 1 site(s)"
    assert found[1] == "HiGHS infeasible subset of the LP relaxation (1 rows): max_sites"


def test_min_sites_beyond_candidates(tmp_path):
    found = diagnosis_of(two_towns(tmp_path, policies={"min_sites": 4}))
    assert found[0] == "min_sites 4 cannot be met: 2 candidate site(s) short"


def test_site_power_too_small_for_the_region_it_alone_reaches(tmp_path):
    # 'wtown' needs 3 'server-air' racks (2,400 tok/s); 'west' has 7 kW: the least power is
    # 3 racks x 4 kW x PUE 1.1 (liquid) = 13.2 kW, so 6.2 kW over
    found = diagnosis_of(two_towns(tmp_path, sites=[site("west", 0, 0, power_limit_kw=7), site("east", 0, 10)],
                                   regions=[region("wtown", 0, 0.1, chat=2400, budget=5), region("etown", 0, 10.1, budget=5)]))
    assert found[0] == "site West power 7.0 kW is over by 6.2 kW: raise power_limit_kw in sites.csv to at least 13.2 kW", found


def test_floor_space_too_small(tmp_path):
    # 6,000 tok/s needs two racks even of 'trainer-dense' (4,800 tok/s each)
    found = diagnosis_of(two_towns(tmp_path, sites=[site("west", 0, 0, floor_racks=1), site("east", 0, 10)],
                                   regions=[region("wtown", 0, 0.1, chat=6000, budget=5), region("etown", 0, 10.1, budget=5)]))
    assert "site West floor space 1 racks is over by 1 racks (floor_racks in sites.csv)" in found, found


def test_job_only_a_full_site_could_hold_with_space_taken(tmp_path):
    # the job needs 2 dense racks; the only liquid site has floor for 2 and must also serve its town
    path = two_towns(
        tmp_path,
        sites=[site("west", 0, 0, floor_racks=2), site("east", 0, 10, cooling_allowed="air")],
        jobs=[job("pretrain", 96)],
    )
    found = diagnosis_of(path)
    assert "site West floor space 2 racks is over by 1 racks (floor_racks in sites.csv)" in found, found


def test_time_limit_returns_the_incumbent_marked_with_its_gap():
    """A solve stopped by its limit is 'feasible' with the gap it reached, never 'optimal'."""
    scenario = load_scenario()
    try:
        plan = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=10, threads=2))
    except NoPlanFound as exc:  # a slow machine may not finish the warm start in 10 s
        assert exc.plan.solve.status == "no_solution"
        return
    assert plan.solve.status == "feasible"
    assert plan.solve.gap is not None and plan.solve.gap > 0
    assert plan.solve.termination != "convergenceCriteriaSatisfied"
    # One deadline for build, warm start and search together. HiGHS checks its clock between
    # LP iterations and Pyomo then loads the plan, so it may end a little late (2.7 s seen on
    # a loaded machine); the arithmetic itself is tested exactly below.
    assert plan.solve.build_time_s + plan.solve.solve_time_s <= 10 + 5.0
    assert plan.solve.options["time_limit_s"] == 10


def test_a_time_limit_spent_building_the_model_is_no_plan_not_a_crash():
    with pytest.raises(NoPlanFound) as info:
        solve(load_scenario(), SolveOptions(time_limit_s=1e-3))
    assert info.value.plan.solve.termination == "timeLimitDuringModelBuild"
    assert "raise --time-limit" in str(info.value)


def test_highs_deadline_accounts_for_its_cumulative_run_clock():
    """HiGHS compares time_limit with the instance's run time summed over all its runs, so the
    limit handed to a later run is the run time so far plus the time left to the deadline."""
    import time

    from dcplace.optimizer.solvers.warmstart import set_deadline

    class FakeHighs:
        def __init__(self):
            self.options = {}

        def getRunTime(self):
            return 13.0  # spent by earlier runs of this instance

        def setOptionValue(self, name, value):
            self.options[name] = value

    h = FakeHighs()
    set_deadline(h, time.perf_counter() + 10.0)
    assert 22.9 < h.options["time_limit"] <= 23.0
    set_deadline(h, time.perf_counter() - 5.0)  # already past: stop at once, never a negative limit
    assert h.options["time_limit"] == pytest.approx(13.001)


def test_no_search_is_started_when_the_lp_relaxation_did_not_finish():
    """The search would begin with the LP that just ran out of time; HiGHS's presolve of a
    large model is not interrupted by its clock, so starting it anyway overran by minutes."""
    import time

    from dcplace.optimizer.solvers.backends import run_highs
    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.solving.precheck import checked_index

    ix = checked_index(load_scenario())
    lm = build_model(ix)
    started = time.perf_counter()
    facts, x = run_highs(lm, SolveOptions(time_limit_s=0.05), ix)  # the default's LP takes ~1 s
    elapsed = time.perf_counter() - started
    assert x is None and facts["status"] == "no_solution"
    assert facts["termination"] == "time limit: the LP relaxation did not finish"
    assert elapsed <= 0.05 + 2.0  # the hand-off to HiGHS and its clock checks between iterations


# ---------------------------------------------------------------- issue 13 item 8


def test_a_capex_shortfall_many_times_the_budget_is_measured_against_the_budget(tmp_path):
    """The default world's case (a $56 M budget, ~$4.6 B of capex needed: the move is 82 budgets) on one
    site and one town, answered by hand. 116,000,000 tok/s of chat at 800 tok/s per 'server-air' rack
    (16 GPUs x 50 tok/s) is 145,000 racks at 16 x $2,000 = $32,000 each in an air zone (no cooling capex;
    the liquid zone costs $1,000/kW more, and 'trainer-dense' $112.5 per tok/s against server-air's $40):
    $4,640,000,000 of capex, so the $56,000,000 budget is exceeded by $4,584,000,000, proven.
    (A dollar slack weighted 1/budget, ~1.8e-8, once sat under HiGHS's dual tolerance and was
    reported as billions off; the slack is now t budgets, t >= 0, families.Relax.)"""
    racks = 145_000
    path = make_scenario(tmp_path, sites=[site("west", 0, 0, floor_racks=200_000, power_limit_kw=1_000_000)],
                         regions=[region("wtown", 0, 0.1, chat=800 * racks, budget=5)],
                         policies={"capex_budget_usd": 56e6})
    found = diagnosis_of(path)
    line = next(d for d in found if d.startswith("capex budget $56,000,000 is exceeded by $"))
    excess = float(line.split("$")[2].replace(",", "").split()[0])
    assert excess == pytest.approx(racks * 32_000 - 56e6, rel=1e-9), line
    assert "proven" not in line, line  # solved to proof: no share-proven note
    assert len([d for d in found if not d.startswith("HiGHS")]) == 1, found  # the budget alone moves


@pytest.mark.slow
def test_capex_budget_shortfall_is_measured_against_the_budget():
    """Default with a $56 M budget (slow, ~30 s: a 30 s solve and diagnosis; the small world above answers
    the same question by hand in seconds, this one keeps the real data and a search that may stop
    short of proof, whose note says how much is proven). Measured 2026-12-07 on the merged main: the
    diagnosis names $4,614,232,728 at 20 s (99.27 % proven), $4,602,518,828 at 30 s and $4,585,705,408
    at 40 s (each with a power limit moved too, "not proven least"): all within the 3 % below, so the
    120 s it once waited bought nothing this test checks. Its least upfront capex, measured by a
    600 s diagnosis on two threads (2026-12-04; the same plan as a 600 s least-capex solve on 2026-12-03, whose
    HiGHS bound was $4,637,458,435): at most $4,639,314,436 (a plan) and at least
    $4,637,458,435, so between $4,581,458,435 and $4,583,314,436 is missing.

    Within 30 s the diagnosis need not reach the least: it may name more, never less than
    the bound proves, and then says how much of it is proven. (A dollar slack weighted
    1/budget, ~1.8e-8, once sat under HiGHS's dual tolerance and was reported as billions off.)"""
    least_missing, most_missing = 4_581_458_435, 4_583_314_436
    with pytest.raises(InfeasibleScenario) as info:
        solve(load_scenario(None, overrides={"policies.capex_budget_usd": 56e6}), SolveOptions(time_limit_s=30))
    line = next(d for d in info.value.diagnosis if d.startswith("capex budget $56,000,000 is exceeded by $"))
    excess = float(line.split("$")[2].replace(",", "").split()[0])
    assert least_missing * (1 - 1e-6) <= excess <= most_missing * 1.03, line
    if excess > most_missing * 1.0001:  # unproven: with capex alone, the share proven; with other limits moved too, said so
        assert "of it is proven needed" in line or "not proven least" in line, line


def test_an_unfinished_elastic_search_says_how_much_of_its_move_is_proven():
    """A diagnosis stopped at its time limit names the least move it found, and the share of
    it HiGHS's bound proves needed; several moves together are said to be one unproven combination
    (the share proven belongs to no single limit); a finished one says nothing more."""
    from dcplace.optimizer.solving.diagnose import ElasticResult

    one = [("capex_budget", None, 4.6e9, 82.0)]
    assert ElasticResult(one, 82.0, 82.0).bound_note() == ""
    note = ElasticResult(one, 82.0, 81.18).bound_note()
    assert "at least 99.00 % of it is proven needed" in note, note
    assert "at least 99.98 %" in ElasticResult(one, 82.0, 81.99).bound_note()  # 99.9878 %, floored
    assert ElasticResult(one, 82.0, -math.inf).bound_note().count("at least 0.00 %") == 1
    two = one + [("power", "x", 1.0, 0.1)]
    assert ElasticResult(two, 82.1, 80.0).bound_note() == ""
    assert "not proven least" in ElasticResult(two, 82.1, 80.0).combined_note()
    assert ElasticResult(two, 82.1, 82.1).combined_note() == "" and ElasticResult(one, 82.0, 81.18).combined_note() == ""


def test_a_chip_no_cooling_can_hold_is_blamed_on_density(tmp_path):
    from dcplace.models import ScenarioError
    from dcplace.optimizer.solving.precheck import checked_index

    path = two_towns(tmp_path, sites=[site("west", 0, 0, cooling_allowed="air"), site("east", 0, 10, cooling_allowed="air")],
                     jobs=[job("pretrain", 48, eligible_chips="trainer", min_fabric_tier=9)])
    with pytest.raises(ScenarioError) as info:
        checked_index(load_scenario(path))
    text = str(info.value)
    assert "no allowed cooling can hold a 60 kW rack (the densest allowed holds 30 kW)" in text, text
    assert "fabric" not in text.split("Fix")[0].lower(), text


def test_power_limits_1000x_too_small_name_power_limit_kw():
    """An MW/kW mix-up on every site: the advice names power_limit_kw in sites.csv and how much is missing."""
    from dcplace.models import ScenarioError

    with pytest.raises(ScenarioError) as info:
        solve(load_scenario(None, overrides={"sites.power_limit_mw": "*0.001"}), OPTIONS)
    text = str(info.value)
    # a region whose in-reach site lacks power is blamed on that power; a wider budget is only the other way out
    assert "field 'rtt_budget" not in text and "min_fabric_tier" not in text, text
    assert "field 'power_limit_kw'" in text and "missing)" in text and "is it in MW where kW is meant?" in text, text
    assert "power_limit_kw in sites.csv binds" in text, text


def test_a_region_whose_sites_in_reach_lack_power_is_told_so_not_to_shrink_its_budget(tmp_path):
    # 'west' is in reach (0.1 deg) but 2 kW holds no 4.4 kW rack; 'east' is 10 degrees away
    path = two_towns(tmp_path, sites=[site("west", 0, 0, power_limit_kw=2), site("east", 0, 10)],
                     regions=[region("wtown", 0, 0.1, budget=120), region("etown", 0, 10.1, budget=5)])
    from dcplace.models import ScenarioError
    from dcplace.optimizer.solving.precheck import checked_index

    try:
        checked_index(load_scenario(path))
        text = ""
    except ScenarioError as exc:
        text = str(exc)
    assert "to at least 13 ms" not in text, text
