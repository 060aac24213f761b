"""The multi-period plan: a build schedule over the periods and its net present value
(docs/periods.md, docs/plan-format.md "Multi-period plan folder").

A schedule folder holds schedule.json (this record), builds.csv (what is bought, where and
when, and when it retires), halls.csv (liquid readiness and retrofits), periods.csv (cost
per period), inputs/ (the multi-period scenario) and periods/<year>/, one ordinary plan
folder per period whose inputs/ are that period's single-year scenario. Written whole or
not at all, like a plan folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Literal

import pandas as pd

from dcplace.models.csvtext import write_spreadsheet_csv
from dcplace.models.files import write_scenario
from dcplace.models.outputs import check_destination, staged_folder
from dcplace.models.plan import Plan, PlanRecord, SolveRecord, write_manifest, write_plan_files
from dcplace.models.records import Scenario

SCHEDULE_FORMAT_VERSION = 1


class BuildLine(PlanRecord):
    """Racks (or their fabric) bought at one site at the start of one period."""

    year: int
    site: str
    kind: Literal["racks", "fabric"]
    config: str
    chip: str
    cooling: str
    fabric: str | None = None
    count: int
    gpus_per_rack: int
    life_years: float
    serves_through_year: int  # the last year of the last period it serves
    annuity_usd_per_year: dict[str, float]  # per unit, by cost category
    charged_weight: float  # sum of the discount weights of the periods it serves
    npv_usd: float


class HallLine(PlanRecord):
    """Liquid readiness bought when a site opened, or a retrofit of an operating site's floor to a cooling."""

    year: int
    site: str
    cooling: str
    it_kw: float  # IT kW of the racks of this cooling at the site in the period
    ready_kw: float  # bought ready this period (the site opens in it)
    retrofit_kw: float  # converted this period (a new zone of this cooling at a site that operated before)
    ready_usd_per_kw: float
    retrofit_usd_per_kw: float
    npv_usd: float


class PeriodLine(PlanRecord):
    year: int
    years: int
    weight: float  # present value of $1 a year through the period
    discount_at_start: float
    annual_usd_per_year: float  # the period plan's cost as one annualized year (capex as annuities of racks in use)
    capex_annuities_usd_per_year: float  # the part of it the schedule charges to builds instead
    operating_npv_usd: float  # (annual - capex annuities) x weight
    sites_open: int
    it_mw: float
    inference_it_mw: float
    training_it_mw: float
    demand_tok_s: float


class Schedule(PlanRecord):
    format_version: int = SCHEDULE_FORMAT_VERSION
    scenario: str
    scenario_hash: str
    created_utc: str
    solve: SolveRecord
    npv_usd: float | None
    npv_breakdown_usd: dict[str, float]
    discount_rate: float
    base_year: int
    periods: list[PeriodLine]
    builds: list[BuildLine]
    halls: list[HallLine]
    diagnosis: list[str] = []
    provenance: dict[str, Any]


def write_schedule_folder(schedule: Schedule, scenario: Scenario, plans: list[tuple[Plan, Scenario]], out_dir: str | Path,
                          verify: Callable[[Path], None] | None = None) -> Path:
    """Write the schedule folder whole or not at all (it replaces only a folder dcplace wrote)."""
    with staged_folder(out_dir, "plan") as tmp:
        (tmp / "schedule.json").write_text(schedule.model_dump_json(indent=2))
        rows = [{**b.model_dump(exclude={"annuity_usd_per_year"}),
                 **{f"annuity_{c}_usd_per_year": v for c, v in b.annuity_usd_per_year.items()}} for b in schedule.builds]
        # for people (spreadsheets): text cells spreadsheet-safe (models.csvtext); schedule.json keeps them exact
        write_spreadsheet_csv(pd.DataFrame(rows, columns=_build_columns(schedule)), tmp / "builds.csv")
        write_spreadsheet_csv(pd.DataFrame([h.model_dump() for h in schedule.halls], columns=list(HallLine.model_fields)), tmp / "halls.csv")
        write_spreadsheet_csv(pd.DataFrame([p.model_dump() for p in schedule.periods], columns=list(PeriodLine.model_fields)),
                              tmp / "periods.csv")
        write_scenario(scenario, tmp / "inputs")
        (tmp / "inputs" / "provenance.json").write_text(json.dumps(schedule.provenance, indent=2, sort_keys=True))
        for plan, period_scenario in plans:
            folder = tmp / "periods" / str(plan_year(plan))
            write_plan_files(plan, period_scenario, folder)
            write_manifest(folder, plan.scenario_hash)
        write_manifest(tmp, schedule.scenario_hash)
        if verify is not None:
            verify(tmp)
    return check_destination(out_dir, "plan")


def _build_columns(schedule: Schedule) -> list[str]:
    categories = sorted({c for b in schedule.builds for c in b.annuity_usd_per_year}) or ["chips", "cooling_capex", "fabric"]
    return [c for c in BuildLine.model_fields if c != "annuity_usd_per_year"] + [f"annuity_{c}_usd_per_year" for c in categories]


def plan_year(plan: Plan) -> int:
    """The period a period's plan belongs to (its scenario is named '<name>@<year>')."""
    return int(plan.scenario.rsplit("@", 1)[1])


def read_schedule(folder: str | Path) -> Schedule:
    return Schedule.model_validate_json((Path(folder) / "schedule.json").read_text())


def is_schedule_folder(folder: str | Path) -> bool:
    return (Path(folder) / "schedule.json").is_file()


def schedule_kpis(folder: str | Path) -> dict[str, float]:
    """A schedule's figures for a batch row or a trade-off point, from its period plans: the largest
    annual emissions of any period (what a per-year carbon cap bounds), the demand-weighted mean RTT,
    the smallest share of demand within budget, and the last period's sites and IT MW."""
    from dcplace.models.plan import read_plan

    schedule = read_schedule(folder)
    plans = [read_plan(Path(folder) / "periods" / str(p.year)) for p in schedule.periods]
    demand = [max(p.demand_tok_s, 1e-9) for p in schedule.periods]
    out: dict[str, float] = {}
    if all("emissions_t_per_year" in p.kpis for p in plans):
        out["emissions_t_per_year"] = max(p.kpis["emissions_t_per_year"] for p in plans)
    if all("mean_rtt_ms" in p.kpis for p in plans):
        out["mean_rtt_ms"] = sum(p.kpis["mean_rtt_ms"] * d for p, d in zip(plans, demand)) / sum(demand)
    if all("demand_within_budget_share" in p.kpis for p in plans):
        out["demand_within_budget_share"] = min(p.kpis["demand_within_budget_share"] for p in plans)
    for key in ("sites_open", "it_mw_inference", "it_mw_training"):
        if key in plans[-1].kpis:
            out[key] = plans[-1].kpis[key]
    return out
