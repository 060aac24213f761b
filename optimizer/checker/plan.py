"""PlanChecker: every family of checks over one plan folder (docs/plan-format.md), put together from
the mixins of this package; `run` calls each `check_*` method in turn."""

from __future__ import annotations

import json
from pathlib import Path

from dcplace.optimizer.checker.clock import ClockChecks
from dcplace.optimizer.checker.common import ABS_TOL, close, is_number
from dcplace.optimizer.checker.constraints import ConstraintChecks
from dcplace.optimizer.checker.costs import CostChecks
from dcplace.optimizer.checker.folder import DECISION_KEYS, MANIFEST, NO_PLAN_STATUSES, FolderChecks
from dcplace.optimizer.checker.hourly import HourlyChecks
from dcplace.optimizer.checker.inputs import InputChecks, Inputs
from dcplace.optimizer.checker.report import CheckReport
from dcplace.optimizer.checker.reported import ReportedChecks
from dcplace.optimizer.checker.resilience import ResilienceChecks


class PlanChecker(InputChecks, ConstraintChecks, ResilienceChecks, ClockChecks, HourlyChecks, CostChecks, FolderChecks,
                  ReportedChecks):
    """Each `check_*` method verifies one family of constraints or figures; `fail` records a violation.

    What every mixin reads: `folder`, `plan` (plan.json), `inp` (Inputs: inputs/ as tables), `manifest`,
    `report`, `fail`, `lines()` (each site's rack lines) and `_compare` (a reported figure against the
    recomputed one); the helpers one mixin gives the others are named in each mixin's docstring."""

    def __init__(self, folder: str | Path, period: bool = False):
        """`period`: the folder is a period of a schedule folder, its inputs derived from the schedule's
        (schedule.py verifies the derivation and holds the schedule's inputs to every rule)."""
        self.folder = Path(folder)
        self.period = period
        self.report = CheckReport(str(self.folder))
        self._paths = None
        self.plan = self._read_json("plan.json", "plan")
        if self.plan is not None and not isinstance(self.plan, dict):
            self.fail("plan", "plan.json is not a JSON object.")
            self.plan = None
        self.manifest = self._read_json(MANIFEST, "manifest") if (self.folder / MANIFEST).is_file() else None
        try:
            self.inp = Inputs(self.folder / "inputs")
        except Exception as exc:  # a missing or unreadable table: reported, never raised
            self.inp = None
            why = str(exc) if type(exc) is ValueError else f"{type(exc).__name__}: {exc}"
            self.fail("inputs", f"inputs/ cannot be read as a scenario ({why}); the checker "
                      "needs every resolved table. Re-run `dcplace solve` to write a complete folder.")

    def _read_json(self, name: str, family: str):
        path = self.folder / name
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            self.fail(family, f"{name} is missing from {self.folder}.")
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: arrays nested deeper than Python's stack
            self.fail(family, f"{name} cannot be read as JSON ({type(exc).__name__}: {exc}).")
        return None

    def fail(self, family: str, message: str, breaks: str | tuple[str, ...] = ()) -> None:
        self.report.add(family, message, breaks)

    def lines(self):
        for site in self.plan["sites"]:
            for line in site["racks"]:
                yield site, line

    def _compare(self, family: str, where: str, field: str, reported, expected: float, abs_: float = ABS_TOL,
                 source: str = "recomputed") -> None:
        if not is_number(reported) or not close(float(reported), expected, abs_=abs_):
            self.fail(family, f"{where}: {field} is {reported!r} in plan.json, {source} {expected!r}.")

    def run(self) -> CheckReport:
        """Every check_* family; a family that cannot read what it needs reports it as a violation."""
        solve = self.plan.get("solve") if isinstance(self.plan, dict) else None
        self.report.status = str(solve.get("status", "")) if isinstance(solve, dict) else ""
        self._run("check_manifest")
        if self.plan is None or self.inp is None:
            return self.report  # reported by __init__: nothing to recompute from
        if self.report.status in NO_PLAN_STATUSES and not self._carried():
            # no plan to check: the folder records why (plan.json "diagnosis"); what it does hold is checked
            for name in ("check_inputs", "check_provenance", "check_schema", "check_status"):
                self._run(name)
            return self.report
        # a plan: checked whatever its status says (check_status names a status that does not fit it)
        for name in sorted(n for n in dir(self) if n.startswith("check_") and n != "check_manifest"):
            self._run(name)
        return self.report

    def _carried(self) -> list[str]:
        """The decisions and figures plan.json carries (a plan-less folder carries none of them)."""
        plan = self.plan
        out = [key for key in DECISION_KEYS if plan.get(key)]
        out += [key for key in ("cost_breakdown_usd_per_year", "kpis") if plan.get(key)]
        if plan.get("objective_usd_per_year") is not None:
            out.append("objective_usd_per_year")
        return out

    def _run(self, name: str) -> None:
        try:
            getattr(self, name)()
        except Exception as exc:  # a damaged or tampered folder: a violation, never a traceback
            family = name.removeprefix("check_")
            what = (f"plan.json names {exc} where inputs/ has no such id, or a record lacks the field {exc}"
                    if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}")
            self.fail(family, f"this check could not read what it needs ({what}); the folder is damaged or was edited by hand.")
        self.report.checked.append(name.removeprefix("check_"))


def check_plan_folder(folder: str | Path) -> CheckReport:
    """Verify a plan folder; the report lists every violation found (it never raises on a
    damaged folder: a missing or unreadable file is a violation too)."""
    return PlanChecker(folder).run()
