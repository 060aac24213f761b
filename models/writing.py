"""Writing scenarios: `write_scenario` writes a Scenario back as the scenario format (the
plan folder's `inputs/` and `dcplace data export` use it), so what was solved can always be
re-loaded; `export_default` copies the embedded default as editable files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from dcplace.models.outputs import check_new_folder, drop_stage, new_stage
from dcplace.models.records import CloudRegion, FootprintLine, PairCost, Profile, Scenario, Site, TrainingJob
from dcplace.models.scenario_file import default_catalog_dir, default_scenario_path
from dcplace.models.schema import SCHEMA_FILE_NAME, schema_text, stamp_schema
from dcplace.models.tables import CATALOG_TABLES


def export_default(folder: str | Path) -> Path:
    """Copy the embedded default scenario and catalog, with their sources, to `folder` as
    editable files (the scenario YAML gains `catalog: catalog`), with `scenario.schema.json` (the
    JSON Schema of a scenario file) beside them, referenced from each YAML's first line for
    editors. Returns the YAML path."""
    folder = check_new_folder(folder)
    stage = new_stage(folder)  # written whole, then renamed into place: a killed export leaves nothing
    try:
        shutil.copytree(default_scenario_path().parent, stage, dirs_exist_ok=True)
        shutil.copytree(default_catalog_dir(), stage / "catalog", ignore=shutil.ignore_patterns("__pycache__"))
        yaml_path = stage / "scenario.yaml"
        yaml_path.write_text(yaml_path.read_text() + "catalog: catalog\n")
        # the JSON Schema beside it, and the reference editors read (models/schema.py)
        (stage / SCHEMA_FILE_NAME).write_text(schema_text(), encoding="utf-8")
        for name in ("scenario.yaml", "years.yaml"):
            if (stage / name).is_file():
                stamp_schema(stage / name)
        os.rename(stage, folder)
    finally:
        drop_stage(stage)
    return folder / "scenario.yaml"


def _cell(value: Any) -> Any:
    if isinstance(value, tuple):
        return ";".join(f"{a}:{b:g}" if isinstance(a, int) else str(a) for a, b in value) if value and isinstance(value[0], tuple) \
            else ";".join(value)
    return value


def _columns(model, records, optional: tuple[str, ...]) -> list[str]:
    """The record's columns, less the optional ones no record sets (a scenario without periods
    writes no period columns)."""
    defaults = {name: model.model_fields[name].default for name in optional if name in model.model_fields}
    return [c for c in model.model_fields if c not in defaults or any(getattr(r, c) != defaults[c] for r in records)]


def _records_frame(records, columns=None) -> pd.DataFrame:
    rows = [{k: _cell(v) for k, v in r.model_dump().items()} for r in records]
    return pd.DataFrame(rows, columns=columns)


def write_scenario(scenario: Scenario, folder: str | Path) -> Path:
    """Write `scenario` as a loadable scenario folder (YAML + CSV tables in dcplace units).

    The folder must be new or empty (OutputRefused otherwise: a scenario folder becomes the
    user's, so dcplace never writes over one); it is written beside its place and renamed
    into it whole. Returns the YAML path."""
    folder = check_new_folder(folder)
    stage = new_stage(folder)
    try:
        _write_tables(scenario, stage)
        os.rename(stage, folder)
    finally:
        drop_stage(stage)
    return folder / "scenario.yaml"


def _write_tables(scenario: Scenario, folder: Path) -> None:
    (folder / "catalog").mkdir(parents=True, exist_ok=True)
    for name in CATALOG_TABLES:
        cols = _columns(CATALOG_TABLES[name], getattr(scenario.catalog, name), ("available_from_year", "ready_usd_per_kw", "retrofit_usd_per_kw"))
        _records_frame(getattr(scenario.catalog, name), cols).to_csv(folder / "catalog" / f"{name}.csv", index=False)
    site_columns = _columns(Site, scenario.sites, ("build_usd_per_mw", "power_from_year", "power_steps_mw"))
    _records_frame(scenario.sites, site_columns).to_csv(folder / "sites.csv", index=False)
    workload_ids = [w.id for w in scenario.catalog.workloads]
    failover_ids = [w for w in workload_ids if any(w in r.failover_rtt_ms for r in scenario.regions)]
    region_rows = []
    for r in scenario.regions:
        row = {k: _cell(v) for k, v in r.model_dump(exclude={"demand_tok_s", "rtt_budget_ms", "failover_rtt_ms"}).items()}
        for w in workload_ids:
            row[f"demand_{w}_tok_s"] = r.demand_tok_s.get(w)
            row[f"rtt_budget_{w}_ms"] = r.rtt_budget_ms.get(w)
        for w in failover_ids:  # only the classes some region overrides (docs/resilience.md)
            row[f"failover_rtt_{w}_ms"] = r.failover_rtt_ms.get(w)
        region_rows.append(row)
    pd.DataFrame(region_rows).to_csv(folder / "regions.csv", index=False)
    _records_frame(scenario.jobs, _columns(TrainingJob, scenario.jobs, ("from_year", "to_year"))).to_csv(folder / "jobs.csv", index=False)
    if scenario.pair_costs:
        _records_frame(scenario.pair_costs, list(PairCost.model_fields)).to_csv(folder / "pair_costs.csv", index=False)
    if scenario.footprint:
        _records_frame(scenario.footprint, list(FootprintLine.model_fields)).to_csv(folder / "footprint.csv", index=False)
    if scenario.profiles:
        _records_frame(scenario.profiles, list(Profile.model_fields)).to_csv(folder / "profiles.csv", index=False)
    if scenario.cloud_regions:
        _records_frame(scenario.cloud_regions, list(CloudRegion.model_fields)).to_csv(folder / "cloud_regions.csv", index=False)
    latency = scenario.latency.model_dump()
    if scenario.backbone_edges:
        pd.DataFrame(scenario.backbone_edges, columns=["from", "to", "km"]).to_csv(folder / "backbone.csv", index=False)
        latency["backbone"] = "backbone.csv"
    policies = {k: list(v) if isinstance(v, tuple) else v for k, v in scenario.policies.model_dump().items()}
    doc = {
        "name": scenario.name,
        "description": scenario.description,
        "sites": "sites.csv",
        "regions": "regions.csv",
        "jobs": "jobs.csv",
        **({"pair_costs": "pair_costs.csv"} if scenario.pair_costs else {}),
        **({"footprint": "footprint.csv"} if scenario.footprint else {}),
        **({"profiles": "profiles.csv"} if scenario.profiles else {}),
        **({"cloud_regions": "cloud_regions.csv"} if scenario.cloud_regions else {}),
        "catalog": "catalog",
        "economics": scenario.economics.model_dump(),
        "latency": latency,
        "policies": policies,
        "clock": scenario.clock.model_dump(),
        **({"periods": [p.model_dump() for p in scenario.periods]} if scenario.periods else {}),
    }
    (folder / "scenario.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
