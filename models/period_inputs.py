"""The `periods` section of a scenario file (docs/periods.md), validated: each entry a Period,
its economics keys checked against Economics, the periods in order and back to back, and the
classes its demand multipliers name known."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from dcplace.models.errors import ProblemLog
from dcplace.models.records import Catalog, Economics, Period, Policies
from dcplace.models.tables import known_hint, record_problems


def read_periods(raw: list[dict[str, Any]], economics: Economics, label: str, log: ProblemLog) -> tuple[Period, ...]:
    """The `periods` section validated: each entry a Period, its economics keys checked against
    Economics, the periods in order and back to back (each starts where the one before ends)."""
    periods: list[Period] = []
    for i, entry in enumerate(raw or []):
        name = f"periods[{i}]"
        if not isinstance(entry, dict):
            log.add(label, None, name, "is not a mapping.", "write each period as {year: 2026, years: 2, demand: {...}}.")
            continue
        try:
            period = Period(**entry)
        except ValidationError as exc:
            for file, _, column, message, hint in record_problems(Period, exc, label, None):
                log.add(file, None, f"{name}.{column}", message, hint)
            continue
        if "discount_rate" in period.economics:
            log.add(label, None, f"{name}.economics.discount_rate", "the discount rate is the horizon's, not a period's: "
                    "every period's costs are discounted to the first period's first year at one rate.",
                    "set economics.discount_rate at the top of the scenario and remove it here.")
            continue
        try:
            merged = Economics(**{**economics.model_dump(), **period.economics})
        except ValidationError as exc:
            for file, _, column, message, hint in record_problems(Economics, exc, label, None):
                log.add(file, None, f"{name}.economics.{column}", message, hint)
            continue
        periods.append(period.model_copy(update={"economics": {k: getattr(merged, k) for k in period.economics}}))
    if len(periods) < len(raw or []):
        return tuple(periods)  # a refused entry leaves a hole: the order check would blame its neighbours
    for before, after in zip(periods, periods[1:]):
        if after.year != before.year + before.years:
            log.add(label, None, "periods", f"period {after.year} does not start where period {before.year} ({before.years} years) "
                    f"ends ({before.year + before.years}).", "list the periods in order, back to back: each year = the one before + its years.")
    return tuple(periods)


def check_periods(periods: tuple[Period, ...], label: str, catalog: Catalog, policies: Policies, log: ProblemLog) -> None:
    """Period demand multipliers name known classes; a period no rack can last through is named;
    resilience is not planned over periods yet."""
    classes = {w.id for w in catalog.workloads} | {"training"}  # training scales every job's GPUs
    racked = {k.chip for k in catalog.rack_configs}
    longest = max((c.life_years for c in catalog.chips if c.id in racked), default=0.0)
    for i, period in enumerate(periods):
        if period.years > longest + 1e-9:
            log.add(label, None, f"periods[{i}].years", f"period {period.year} is {period.years} years long, but no chip lives that "
                    f"long (the longest life is {longest:g} years): racks bought at its start could not last through it.",
                    f"split it into periods of at most {longest:g} years.")
        for w in period.demand:
            if w not in classes:
                log.add(label, None, f"periods[{i}].demand", f"unknown class '{w}'.", known_hint("workload classes (or training)", classes))
    if periods and policies.survive_site_loss:
        log.add(label, None, "policies.survive_site_loss", "survivability (N-1) is not planned over periods yet.",
                "plan the years without survive_site_loss, then run `dcplace outages` on each period's plan.")
