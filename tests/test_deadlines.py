"""--time-limit is kept: every solve returns within its limit plus the stated margin
(optimizer.solving.solve.deadline_margin_s), whatever phase it is in, with its best plan or
NoPlanFound (issue 13 item 6). benchmarks/deadlines.py measures the same up to 500 x 3,000."""

from __future__ import annotations

import time

import pytest

from dcplace.models import load_scenario
from dcplace.models.files import default_scenario_path
from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer import InfeasibleScenario, NoPlanFound, SolveOptions, solve
from dcplace.optimizer.solving import solve as solve_module
from dcplace.optimizer.solving.solve import NO_DIAGNOSIS, UNFINISHED_DIAGNOSIS, deadline_margin_s

# Emissions of the default's unconstrained plan (t CO2/yr, measured 2026-12-07 on the issue-48 data;
# 602,070 t before it); the cap at 60 % of it is the case of issue 13: HiGHS's root rounding heuristic
# ran ~100-190 s without looking at its clock, and a 60 s limit ended after 116-149 s.
DEFAULT_EMISSIONS_T = 483_160.0


def timed_solve(scenario, options):
    started = time.perf_counter()
    try:
        plan = solve(scenario, options)
    except (NoPlanFound, InfeasibleScenario) as exc:
        plan = exc.plan
    return plan, time.perf_counter() - started


def test_margin_is_three_seconds_or_five_percent():
    assert deadline_margin_s(10) == 3.0 and deadline_margin_s(60) == 3.0 and deadline_margin_s(120) == 6.0


def test_capped_default_keeps_its_limit():
    scenario = load_scenario(default_scenario_path(), overrides={"policies.carbon_cap_t_per_year": 0.6 * DEFAULT_EMISSIONS_T})
    plan, wall = timed_solve(scenario, SolveOptions(time_limit_s=12))
    assert wall <= 12 + deadline_margin_s(12), (wall, plan.solve.termination)
    assert plan.solve.status in ("feasible", "no_solution", "optimal"), plan.solve.termination
    if plan.solve.status == "feasible":
        assert plan.sites and plan.objective_usd_per_year is not None


@pytest.mark.parametrize("size, limit", [((50, 200), 4.0), ((200, 1000), 8.0)])
def test_synthetic_scales_keep_their_limit(size, limit):
    scenario = synthetic_scenario(7, *size, n_jobs=4, box_deg=(25.0, 45.0))
    plan, wall = timed_solve(scenario, SolveOptions(time_limit_s=limit, threads=1))
    assert wall <= limit + deadline_margin_s(limit), (wall, plan.solve.termination)
    # a plan, if any, is marked with what it is: never "optimal" unless proven
    if plan.solve.status == "optimal":
        assert plan.solve.gap is not None and plan.solve.gap <= 5e-3 + 1e-12


class SleepingHighs:
    """Stands in for HiGHS in run_until: a run of `run_s` that never checks its clock (HiGHS
    inside its root heuristics); `finished` once it has returned."""

    def __init__(self, run_s: float):
        self.run_s, self.finished = run_s, False

    def getRunTime(self):
        return 0.0

    def setOptionValue(self, name, value):
        pass

    def run(self):
        time.sleep(self.run_s)
        self.finished = True


def test_a_highs_run_that_never_checks_its_clock_is_left_behind():
    """run_until returns GRACE_S after the deadline even when HiGHS does not reach a check."""
    from dcplace.optimizer.solvers.highs_model import GRACE_S, HighsAbandoned, run_until

    started = time.perf_counter()
    with pytest.raises(HighsAbandoned) as info:
        run_until(SleepingHighs(6.0), started + 0.5)
    assert time.perf_counter() - started <= 0.5 + GRACE_S + 0.3
    assert info.value.best is None


def test_abandoned_search_returns_the_best_plan_seen(monkeypatch):
    """When HiGHS has to be left behind in the search, the best plan its callbacks (or the
    warm start) produced is returned, marked feasible, with the reason in the termination."""
    import dcplace.optimizer.solvers.backends as backends
    from dcplace.optimizer.solvers.highs_model import HighsAbandoned

    scenario = synthetic_scenario(3, n_sites=4, n_regions=6, n_jobs=1)
    reference = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=60))
    monkeypatch.setattr(backends, "WARM_START_MIN_COLUMNS", 0)  # a model this small skips the warm start otherwise

    def stuck(h, deadline):  # the search's run only: the warm start's LPs and polish use warmstart.run_until
        raise HighsAbandoned(None, 1.0)

    monkeypatch.setattr(backends, "run_until", stuck)
    plan = solve(scenario, SolveOptions(time_limit_s=60))
    assert "abandoned" in plan.solve.termination
    assert plan.solve.status == "feasible"
    assert plan.objective_usd_per_year >= reference.objective_usd_per_year * (1 - 1e-9)
    # the gap is stated against the warm start's LP relaxation, a valid bound on the MIP
    assert plan.solve.best_bound_usd_per_year <= reference.objective_usd_per_year * (1 + 1e-9)
    assert plan.solve.gap == pytest.approx(1 - plan.solve.best_bound_usd_per_year / plan.objective_usd_per_year)


def test_scheduler_is_not_reset_under_a_run_left_behind(monkeypatch):
    """A different thread count would reset HiGHS's scheduler; with a run still going in
    the background that would pull it from under it, so the old count is kept instead."""
    import threading

    from dcplace.optimizer.solvers import highs_model

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=True)
    worker.start()
    monkeypatch.setattr(highs_model, "_abandoned", [(None, worker)])
    monkeypatch.setattr(highs_model, "_scheduler_threads", 1)
    try:
        assert highs_model.use_threads(2) == 1
    finally:
        stop.set()
        worker.join()
    assert highs_model.abandoned_runs() == 0


def test_diagnosis_gets_only_the_time_left(monkeypatch):
    seen = {}

    def slow_diagnose(ix, lm, options):
        seen["time_limit_s"] = options.time_limit_s
        time.sleep(30)
        return ["never"]

    monkeypatch.setattr(solve_module, "diagnose", slow_diagnose)
    options = SolveOptions(time_limit_s=100)
    started = time.perf_counter()
    assert solve_module._diagnosis(None, None, options, started + 3.0) == [UNFINISHED_DIAGNOSIS]
    assert time.perf_counter() - started <= 3.0 + 1.0
    assert seen["time_limit_s"] <= 3.0
    # no time left: not started at all
    assert solve_module._diagnosis(None, None, options, time.perf_counter() + 0.2) == [NO_DIAGNOSIS]


def test_infeasible_scenario_is_still_diagnosed_within_its_limit(tmp_path):
    from helpers import make_scenario, region, site

    path = make_scenario(tmp_path, sites=[site("west", 0, 0), site("east", 0, 10)],
                         regions=[region("wtown", 0, 0.1, budget=5), region("etown", 0, 10.1, budget=5)],
                         policies={"max_sites": 1})
    plan, wall = timed_solve(load_scenario(path), SolveOptions(time_limit_s=5))
    assert plan.solve.status == "infeasible" and wall <= 5 + deadline_margin_s(5)
    assert plan.diagnosis[0] == "max_sites 1 is exceeded by 1 site(s)"


def test_a_run_without_deadline_waits_for_highs():
    """run_until(h, inf) is the default of warmstart.solve_relaxation: it must wait for HiGHS
    to finish. Event.wait(inf) raises OverflowError with HiGHS's thread already running, and
    the caller's clean-up then changed the model under it (a segmentation fault)."""
    import math

    from dcplace.optimizer.solvers.highs_model import run_until

    for deadline in (math.inf, time.perf_counter() + 1e10):  # 1e10 s: beyond threading.TIMEOUT_MAX too
        h = SleepingHighs(0.5)
        started = time.perf_counter()
        run_until(h, deadline)
        assert h.finished and time.perf_counter() - started >= 0.5


def test_an_interrupt_at_one_deadline_does_not_stop_the_next_run():
    """HiGHS keeps the callbacks' interrupt flag between runs of an instance: the warm
    start's polish stopped at its deadline once stopped the search at its first check."""
    import highspy

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.solvers.highs_model import run_until, to_highs
    from dcplace.optimizer.solving.precheck import checked_index

    lm = build_model(checked_index(synthetic_scenario(7, 50, 200, n_jobs=4, box_deg=(25.0, 45.0))))
    h = to_highs(lm)
    h.setOptionValue("time_limit", 1e9)
    run_until(h, time.perf_counter() + 0.3)  # the root cannot finish: stopped by the interrupt callback or the clock
    assert h.getModelStatus() in (highspy.HighsModelStatus.kInterrupt, highspy.HighsModelStatus.kTimeLimit)
    started = time.perf_counter()
    run_until(h, started + 2.0)  # the root LP alone takes longer: this run must last to its deadline
    assert time.perf_counter() - started >= 1.5, h.modelStatusToString(h.getModelStatus())
