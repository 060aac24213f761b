"""The in-memory front door: a Scenario from pandas / GeoPandas DataFrames.

`scenario_from_frames` (also `Scenario.from_frames`) feeds the frames through the same
builder as a scenario file (models/scenario_file.build_scenario), so a frame gets exactly
the validation a file gets: the same problems, with the file named "<sites frame>" and
the row numbered from 1 (the frame's first row). A GeoDataFrame of points gives lat/lon
from its geometry, as a GeoJSON file does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dcplace.models.errors import ProblemLog
from dcplace.models.records import FRONT_DOORS, Catalog, Record, Scenario
from dcplace.models.scenario_file import build_scenario, default_catalog_dir, parse_spec
from dcplace.models.tables import CATALOG_TABLES, Table, catalog_from_tables, frame_table, load_catalog, read_table

FRAMES_LABEL = "<frames>"


def frame_label(table: str) -> str:
    return f"<{table} frame>"


def _section(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Record):
        return value.model_dump()
    return dict(value)


def scenario_from_frames(
    sites: pd.DataFrame,
    regions: pd.DataFrame,
    jobs: pd.DataFrame | None = None,
    catalog: Catalog | str | Path | dict[str, pd.DataFrame] | None = None,
    name: str = "in-memory",
    economics: dict[str, Any] | Record | None = None,
    latency: dict[str, Any] | Record | None = None,
    policies: dict[str, Any] | Record | None = None,
    pair_costs: pd.DataFrame | None = None,
    description: str = "",
) -> Scenario:
    """A validated Scenario from tables in memory (columns as in the file format).

    `catalog`: None = the embedded catalog, a Catalog, a folder of catalog CSVs, or a dict
    of the six catalog frames (chips, rack_configs, cooling, fabrics, workloads,
    throughput). Sections are dicts (or records) as in the YAML. Raises ScenarioError
    listing every problem found, exactly as `load_scenario` would for the same tables.
    """
    log = ProblemLog()
    frames: dict[str, Any] = {frame_label("sites"): sites, frame_label("regions"): regions}
    raw: dict[str, Any] = {
        "name": name, "description": description, "sites": frame_label("sites"), "regions": frame_label("regions"),
        "economics": _section(economics), "latency": _section(latency), "policies": _section(policies),
    }
    for key, frame in (("jobs", jobs), ("pair_costs", pair_costs)):
        if frame is not None:
            frames[frame_label(key)] = frame
            raw[key] = frame_label(key)
    spec = parse_spec(raw, FRAMES_LABEL, log)

    def open_table(ref: str) -> Table | None:
        if ref in frames:
            return _table(frames[ref], ref, log)
        return read_table(Path(ref), ref, log)  # a file named in a section (latency.backbone)

    def catalog_of(log: ProblemLog) -> Catalog | None:
        if catalog is None:
            return load_catalog(default_catalog_dir(), log)
        if isinstance(catalog, Catalog):
            return catalog
        if isinstance(catalog, dict):
            tables = {}
            for table in CATALOG_TABLES:
                if table not in catalog:
                    log.add(frame_label(table), None, None, f"catalog table '{table}' is missing.",
                            f"give catalog={{'{table}': DataFrame, ...}} with all of: {', '.join(CATALOG_TABLES)}.")
                    tables[table] = None
                else:
                    tables[table] = _table(catalog[table], frame_label(table), log)
            for extra in set(catalog) - set(CATALOG_TABLES):
                log.add(frame_label(str(extra)), None, None, "unknown catalog table.", f"the catalog tables are: {', '.join(CATALOG_TABLES)}.")
            return catalog_from_tables(tables, log)
        return load_catalog(Path(catalog), log)

    return build_scenario(spec, FRAMES_LABEL, log, open_table, catalog_of)


def _table(frame: Any, label: str, log: ProblemLog) -> Table | None:
    if not isinstance(frame, pd.DataFrame):
        log.add(label, None, None, f"is a {type(frame).__name__}, not a DataFrame.", "pass a pandas or GeoPandas DataFrame.")
        return None
    return frame_table(frame, label, log)


FRONT_DOORS["frames"] = scenario_from_frames
