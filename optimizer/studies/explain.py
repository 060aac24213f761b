"""What the explanation studies share: a plan folder's plan and scenario, where each analysis
is saved, and the stamp that ties a saved analysis to the plan it explains.

Each analysis of a plan (prices of limits, site worth, near-optimal alternatives,
robustness) is written under `PLAN/why/<analysis>/` by default, as a dcplace output folder
(its own marker), so that re-solving into the plan folder replaces it with the plan and the
report shows an analysis only while its stamp (scenario hash, objective, creation time)
matches the plan's (`saved_analysis`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from dcplace.models import Scenario, load_scenario
from dcplace.models.outputs import claim_folder
from dcplace.models.plan import HAS_PLAN, Plan, read_plan

WHY_FOLDER = "why"


class NotExplainable(ValueError):
    """The plan folder cannot be explained: no plan in it, or its inputs are missing."""


def plan_and_scenario(folder: str | Path) -> tuple[Plan, Scenario]:
    """The plan of a plan folder and the scenario it was solved for (its inputs/ copy)."""
    folder = Path(folder)
    if not (folder / "plan.json").is_file() or not (folder / "inputs" / "scenario.yaml").is_file():
        raise NotExplainable(f"{folder}: not a plan folder (plan.json and inputs/scenario.yaml are needed). "
                             "Fix: give a folder written by `dcplace solve`.")
    plan = read_plan(folder)
    if plan.solve.status in HAS_PLAN and plan.objective_usd_per_year is None:
        raise NotExplainable(f"{folder}: plan.json says status {plan.solve.status} but records no objective_usd_per_year; "
                             f"the folder is damaged or was edited by hand. Fix: restore it or solve again; "
                             f"`dcplace check {folder}` lists every problem.")
    if plan.solve.status not in HAS_PLAN:
        raise NotExplainable(f"{folder}: holds no plan (status {plan.solve.status}); there is nothing to explain. "
                             "Fix: solve a feasible scenario first.")
    return plan, load_scenario(folder / "inputs" / "scenario.yaml")


def stamp(plan: Plan) -> dict[str, Any]:
    """What ties an analysis to its plan."""
    return {"scenario_hash": plan.scenario_hash, "objective_usd_per_year": plan.objective_usd_per_year,
            "created_utc": plan.created_utc}


def matches(doc: dict[str, Any], plan: Plan) -> bool:
    mine = doc.get("plan", {})
    objective = mine.get("objective_usd_per_year")
    return (mine.get("scenario_hash") == plan.scenario_hash and mine.get("created_utc") == plan.created_utc
            and objective is not None and plan.objective_usd_per_year is not None
            and math.isclose(objective, plan.objective_usd_per_year, rel_tol=1e-12, abs_tol=1e-6))


def analysis_folder(plan_folder: str | Path, name: str, out_dir: str | Path | None = None) -> Path:
    """The folder an analysis writes into (created, marked as dcplace's): out_dir or PLAN/why/<name>."""
    folder = Path(out_dir) if out_dir is not None else Path(plan_folder) / WHY_FOLDER / name
    if out_dir is None:
        claim_folder(folder.parent, "batch")
    return claim_folder(folder, "batch")


def write_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all (a killed run leaves only a `.partial`)."""
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_json(path: Path, doc: dict[str, Any]) -> None:
    write_file(path, json.dumps(doc, indent=2, default=_plain).encode("utf-8"))


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def saved_analysis(plan_folder: str | Path, name: str, file: str, plan: Plan | None = None) -> dict[str, Any] | None:
    """The saved analysis PLAN/why/<name>/<file> if it exists and explains this plan, else None."""
    path = Path(plan_folder) / WHY_FOLDER / name / file
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    plan = plan if plan is not None else read_plan(plan_folder)
    return doc if isinstance(doc, dict) and matches(doc, plan) else None


__all__ = ["NotExplainable", "WHY_FOLDER", "analysis_folder", "matches", "plan_and_scenario", "saved_analysis", "stamp",
           "write_json"]
