"""The `periods` section of a scenario file (docs/periods.md), validated: each entry a Period,
its economics keys checked against Economics, the periods in order and back to back, and the
classes its demand multipliers name known."""

from __future__ import annotations

from typing import Any

from dcplace.models.errors import ProblemLog
from dcplace.models.records import Catalog, Economics, Period, Policies
from dcplace.models.tables import known_hint, section


def read_periods(raw: list[dict[str, Any]], economics: Economics, label: str, log: ProblemLog) -> tuple[Period, ...]:
    """The `periods` section validated: each entry a Period, its economics keys checked against
    Economics, the periods in order and back to back (each starts where the one before ends)."""
    periods: list[Period] = []
    for i, entry in enumerate(raw or []):
        name = f"periods[{i}]"
        if not isinstance(entry, dict):
            log.add(label, None, name, "is not a mapping.", "write each period as {year: 2026, years: 2, demand: {...}}.")
            continue
        period = section(Period, entry, label, name, log)
        if "year" not in entry:
            continue  # section() named the missing year
        section(Economics, {**economics.model_dump(), **period.economics}, label, f"{name}.economics", log)
        periods.append(period)
    for before, after in zip(periods, periods[1:]):
        if after.year != before.year + before.years:
            log.add(label, None, "periods", f"period {after.year} does not start where period {before.year} ({before.years} years) "
                    f"ends ({before.year + before.years}).", "list the periods in order, back to back: each year = the one before + its years.")
    return tuple(periods)


def check_periods(periods: tuple[Period, ...], label: str, catalog: Catalog, policies: Policies, log: ProblemLog) -> None:
    """Period demand multipliers name known classes; resilience is not planned over periods yet."""
    classes = {w.id for w in catalog.workloads} | {"training"}  # training scales every job's GPUs
    for i, period in enumerate(periods):
        for w in period.demand:
            if w not in classes:
                log.add(label, None, f"periods[{i}].demand", f"unknown class '{w}'.", known_hint("workload classes (or training)", classes))
    if periods and policies.survive_site_loss:
        log.add(label, None, "policies.survive_site_loss", "survivability (N-1) is not planned over periods yet.",
                "plan the years without survive_site_loss, then run `dcplace outages` on each period's plan.")
