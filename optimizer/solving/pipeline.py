"""The whole job in one call: load, solve, write the plan folder, check it.

    from dcplace.optimizer.solving.pipeline import solve_to_folder
    plan, report = solve_to_folder("my/scenario.yaml", "plan/")

The folder appears only if the independent checker passes on it, and only one run writes a
folder at a time (models.outputs.destination_lock, taken before the solve). An infeasible scenario
still gets its folder, holding the diagnosis in plan.json (status "infeasible", no sites),
and then raises InfeasibleScenario.
"""

from __future__ import annotations

from pathlib import Path

from dcplace.models import Scenario, load_scenario
from dcplace.models.outputs import destination_lock
from dcplace.models.plan import Plan, write_plan_folder
from dcplace.optimizer.checker import CheckReport, check_plan_folder, check_schedule_folder
from dcplace.optimizer.solving.budget import job_budget
from dcplace.optimizer.solving.progress import ProgressCallback, as_feed
from dcplace.optimizer.solving.solve import InfeasibleScenario, SolveOptions, solve


class PlanCheckFailed(Exception):
    """The solved plan broke a constraint the checker verifies: a bug, never an input problem."""

    def __init__(self, report: CheckReport):
        self.report = report
        super().__init__("the plan failed its independent check:\n" + "\n".join(str(v) for v in report.violations))


def solve_to_folder(
    scenario: Scenario | str | Path | None, out_dir: str | Path, options: SolveOptions | None = None,
    progress: ProgressCallback | None = None, start=None, started: float | None = None,
) -> tuple[Plan, CheckReport]:
    """Solve `scenario` (a Scenario, a YAML path, or None for the embedded default) into `out_dir`.
    `progress` as for solve(), with the phases load, write and check added; `start(lm, ix)` as for solve().
    `started` (a time.perf_counter() value, e.g. budget.process_started()): the time limit then covers the
    whole job from that moment, the load, write and check included (budget.job_budget), as a scheduler
    that started the process sees it; None: the limit is the solve's, from when it starts."""
    # refuse a folder dcplace did not write, or one another run is writing, before any work, not after
    with destination_lock(out_dir, "plan"):
        feed, _ = as_feed(progress, (options or SolveOptions()).time_limit_s)
        try:
            return _solve_to_folder(scenario, out_dir, options, feed, start, started)
        finally:
            feed.close()


def _solve_to_folder(scenario, out_dir, options, feed, start=None, started=None) -> tuple[Plan, CheckReport]:
    if not isinstance(scenario, Scenario):
        feed.phase("load")
        scenario = load_scenario(scenario)
    budget = job_budget((options or SolveOptions()).time_limit_s, started) if started is not None else None
    try:
        plan = solve(scenario, options, start=start, progress=feed, budget=budget)
    except InfeasibleScenario as exc:
        feed.phase("write")
        write_plan_folder(exc.plan, scenario, out_dir)
        raise
    feed.phase("write")
    verify, reports = _verifier(check_plan_folder, feed)
    written = write_plan_folder(plan, scenario, out_dir, verify=verify)
    reports[0].folder = str(written)
    return plan, reports[0]


def _verifier(check, feed):
    """(verify, reports): verify(staged folder) runs `check` on it before the folder moves into
    place and raises PlanCheckFailed if it fails; reports collects what it found."""
    reports: list[CheckReport] = []

    def verify(folder: Path) -> None:
        feed.phase("check")
        report = check(folder)
        reports.append(report)
        if not report.ok:
            raise PlanCheckFailed(report)

    return verify, reports


def solve_schedule_to_folder(scenario: Scenario | str | Path | None, out_dir: str | Path, options: SolveOptions | None = None,
                             progress: ProgressCallback | None = None, started: float | None = None):
    """A scenario with periods (docs/periods.md) solved into a schedule folder, checked by the
    independent schedule checker before it is moved into place. Returns (schedule, period plans,
    report). An infeasible period leaves a plan folder with its diagnosis, as solve_to_folder does.
    `started` as for solve_to_folder."""
    with destination_lock(out_dir, "plan"):
        return _solve_schedule_to_folder(scenario, out_dir, options, progress, started)


def _solve_schedule_to_folder(scenario, out_dir, options, progress, started=None):
    from dcplace.models.schedule import write_schedule_folder
    from dcplace.optimizer.solving.periods import solve_periods

    feed, _ = as_feed(progress, (options or SolveOptions()).time_limit_s)
    try:
        if not isinstance(scenario, Scenario):
            feed.phase("load")
            scenario = load_scenario(scenario)
        try:
            limit = (options or SolveOptions()).time_limit_s
            # a schedule writes a folder per period: twice a plan's finishing reserve
            budget = job_budget(limit, started, finish_factor=2.0) if started is not None else None
            schedule, plans = solve_periods(scenario, options, progress=feed, budget=budget)
        except InfeasibleScenario as exc:
            feed.phase("write")
            write_plan_folder(exc.plan, exc.scenario, out_dir)
            raise
        feed.phase("write")
        verify, reports = _verifier(check_schedule_folder, feed)
        written = write_schedule_folder(schedule, scenario, plans, out_dir, verify=verify)
        reports[0].folder = str(written)
        return schedule, plans, reports[0]
    finally:
        feed.close()
