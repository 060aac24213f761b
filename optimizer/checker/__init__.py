"""The independent plan checker.

It re-reads a plan folder (plan.json and the resolved tables in inputs/) with nothing but
pandas, yaml, json, hashlib and networkx, and verifies every hard constraint and every cost
line from first principles, then every figure the folder reports (site figures, KPIs, the
solve status against its gap and bound, the flat CSV views) and the folder's integrity
(manifest.json: every file's SHA-256, no file added or missing, one scenario hash). It
deliberately shares no code with the formulation, the index sets, the cost coefficients,
the extraction of the plan or the latency model: a bug there cannot hide itself here. Every
formula it uses is written down in docs/plan-format.md. It imports nothing of dcplace but
this package (tests/test_layers.py holds it to that).

    report = check_plan_folder("plan/")
    report.ok, report.violations

Where to read, in the order a plan is checked:

    plan.py         PlanChecker: reads the folder, runs every check_* method of the mixins below
    inputs.py       Inputs (inputs/ as plain tables) and the rules `dcplace validate` holds them to
    constraints.py  demand, latency, residency, capacity, density, power, space, training, policies
    resilience.py   N-1: every loss re-routed on the checker's own max-flow; standby sites
    clock.py        the represented day, hourly loads, dispatch, troughs, rentals (docs/clock.md)
    hourly.py       hourly[], the clock record, routing per hour
    costs.py        every cost line item and KPI recomputed
    reported.py     plan.json's documented fields, its site, assignment and job records, the CSV views
    folder.py       manifest.json and its hashes, provenance, the solve status
    report.py       CheckReport and Violation (each with the rule's label and the registry family it breaks)
    schedule.py     ScheduleChecker: a multi-period schedule folder, PlanChecker per period (docs/periods.md)
"""

from dcplace.optimizer.checker.plan import PlanChecker, check_plan_folder
from dcplace.optimizer.checker.report import CheckReport, Violation
from dcplace.optimizer.checker.schedule import ScheduleChecker, check_schedule_folder

__all__ = ["CheckReport", "PlanChecker", "ScheduleChecker", "Violation", "check_plan_folder", "check_schedule_folder"]
