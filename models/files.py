"""The scenario file format: a YAML file that points at tables, read into a `Scenario`.

```yaml
name: my-scenario
sites: sites.csv            # CSV, GeoJSON, GeoPackage or Parquet
regions: regions.geojson
jobs: jobs.csv              # optional
catalog: catalog/           # optional: a folder of catalog tables; default = embedded
economics: {discount_rate: 0.08}
latency: {route_factor: 2.1, backbone: backbone.csv}
policies: {max_share_per_site: 0.6}
```

Paths are relative to the YAML file. Every problem found is collected and raised at once
as a `ScenarioError` whose entries name the file, the row and the field. Units are
converted here, once: `power_limit_mw` becomes `power_limit_kw`.

`write_scenario` writes a scenario back as the same format (the plan folder's `inputs/`
and `dcplace data export` use it), so what was solved can always be re-loaded.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from dcplace.models.errors import InputProblem, ProblemLog, ScenarioError
from dcplace.models.outputs import check_new_folder, new_stage
from dcplace.models.overrides import Override, OverrideError, apply_to_rows, apply_to_section, parse_override
from dcplace.models.records import (
    Catalog,
    Chip,
    Cooling,
    Economics,
    Fabric,
    Latency,
    PairCost,
    Policies,
    RackConfig,
    Record,
    Region,
    Scenario,
    Site,
    Throughput,
    TrainingJob,
    Workload,
)

GEO_SUFFIXES = {".geojson", ".json", ".gpkg", ".shp"}
TABLE_SUFFIXES = {".csv", ".parquet"} | GEO_SUFFIXES

# Columns that document a row (sources, assumptions) and are carried but not modelled.
DOC_COLUMN_PREFIXES = ("source", "note", "assumption", "rule", "description")

# Input columns in another unit, converted once: column -> (dcplace column, factor).
UNIT_ALTERNATIVES = {
    "power_limit_mw": ("power_limit_kw", 1000.0),
}

CATALOG_TABLES: dict[str, type[Record]] = {
    "chips": Chip,
    "rack_configs": RackConfig,
    "cooling": Cooling,
    "fabrics": Fabric,
    "workloads": Workload,
    "throughput": Throughput,
}


class ScenarioFile(BaseModel):
    """The top level of a scenario YAML file. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    sites: str
    regions: str
    overrides: dict[str, Any] = {}  # path -> value, see models/overrides.py (`extends` is folded in before this)
    jobs: str | None = None
    pair_costs: str | None = None
    catalog: str | None = None
    economics: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    policies: dict[str, Any] = {}


def default_scenario_path() -> Path:
    """The embedded default scenario shipped in the `data` package."""
    return Path(str(resources.files("dcplace.data") / "default" / "scenario.yaml"))


def default_catalog_dir() -> Path:
    return Path(str(resources.files("dcplace.data") / "catalog"))


# ------------------------------------------------------------------------- reading


class Table:
    """Rows of one input file as dicts of Python values, with their row numbers."""

    def __init__(self, path: Path, label: str, rows: list[dict[str, Any]], row_numbers: list[int], columns: list[str]):
        self.path = path
        self.label = label
        self.rows = rows
        self.row_numbers = row_numbers
        self.columns = columns


def _clean_cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str):
        value = value.strip()
        return value if value else None
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value


def read_table(path: Path, label: str, log: ProblemLog) -> Table | None:
    """Read a CSV, Parquet, GeoJSON or GeoPackage table; None (and a logged problem) if unreadable."""
    if not path.exists():
        log.add(label, None, None, "file not found.", f"create it, or correct the path (looked for {path}).")
        return None
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        log.add(label, None, None, f"unsupported table format '{suffix}'.", "use .csv, .parquet, .geojson or .gpkg.")
        return None
    try:
        if suffix == ".csv":
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
            first_row = 2  # line 1 is the header
        elif suffix == ".parquet":
            frame = pd.read_parquet(path)
            first_row = 1
        else:
            frame = _read_geo(path)
            first_row = 1
    except Exception as exc:  # noqa: BLE001 - any reader failure is an input problem
        log.add(label, None, None, f"cannot be read: {exc}", "check that the file is a valid table of its type.")
        return None
    frame.columns = [str(c).strip() for c in frame.columns]
    rows = [{k: _clean_cell(v) for k, v in rec.items()} for rec in frame.to_dict(orient="records")]
    return Table(path, label, rows, [first_row + i for i in range(len(rows))], list(frame.columns))


def _read_geo(path: Path) -> pd.DataFrame:
    """A point layer as a frame with lat/lon columns taken from the geometry (EPSG:4326)."""
    import geopandas as gpd

    gdf = gpd.read_file(path)
    if gdf.crs is not None and gdf.crs.to_epsg() != 4326:
        gdf = gdf.to_crs(4326)
    frame = pd.DataFrame(gdf.drop(columns=gdf.geometry.name))
    if "lat" not in frame.columns and "lon" not in frame.columns:
        geom = gdf.geometry
        is_point = geom.geom_type == "Point"
        frame["lon"] = [g.x if ok else None for g, ok in zip(geom, is_point)]
        frame["lat"] = [g.y if ok else None for g, ok in zip(geom, is_point)]
    return frame


def _field_fix(model: type[Record], field: str) -> str:
    info = model.model_fields.get(field)
    extra = info.json_schema_extra if info is not None else None
    return extra.get("fix", "") if isinstance(extra, dict) else ""


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    if kind == "missing":
        return "is empty or missing."
    msg = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if kind == "finite_number" or (isinstance(value, float) and math.isnan(value)):
        return "is NaN or infinite; a finite number is needed."
    shown = repr(value) if value is not None and not isinstance(value, dict) else ""
    return f"{msg}{' (got ' + shown + ')' if shown else ''}."


def record_problems(model: type[Record], exc: ValidationError, file: str, row: int | None, column_of=None):
    """Translate a pydantic ValidationError into problems naming file, row and field."""
    out = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        field = loc[0] if loc else None
        column = column_of(loc) if column_of else (".".join(loc) if loc else None)
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(field or "", list(model.model_fields), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(model.model_fields)}."
            out.append((file, row, column, "unknown key.", hint))
            continue
        hint = (_field_fix(model, field) if field else "") or f"give a valid value for '{column}'."
        out.append((file, row, column, _describe(error), hint))
    return out


def parse_rows(
    table: Table,
    model: type[Record],
    log: ProblemLog,
    reshape=None,
    column_of=None,
    extra_columns: set[str] = frozenset(),
) -> list[tuple[int, Any]]:
    """Validate every row of `table` as a `model`: (row number, record) pairs; bad rows are logged and dropped."""
    known = set(model.model_fields) | set(UNIT_ALTERNATIVES) | set(extra_columns)
    for column in table.columns:
        if column in known or column.lower().startswith(DOC_COLUMN_PREFIXES):
            continue
        close = difflib.get_close_matches(column, sorted(known), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known columns: {', '.join(sorted(model.model_fields))}."
        log.add(table.label, 1 if table.path.suffix == ".csv" else None, column, "unknown column.", hint)
    required = [n for n, f in model.model_fields.items() if f.is_required() and not (reshape and n in reshape.consumes)]
    missing = [c for c in required if c not in table.columns and not any(a in table.columns for a in _alts(c))]
    for column in missing:
        also = f" (or {', '.join(_alts(column))})" if _alts(column) else ""
        log.add(table.label, None, column, "required column is missing.", f"add a '{column}'{also} column.")
    if missing:
        return []
    records = []
    for row, values in zip(table.row_numbers, table.rows):
        values = {k: v for k, v in values.items() if not k.lower().startswith(DOC_COLUMN_PREFIXES)}
        values = _convert_units(values, table.label, row, log)
        if values is None:
            continue
        if reshape is not None:
            values = reshape(values)
        try:
            records.append((row, model(**{k: v for k, v in values.items() if v is not None})))
        except ValidationError as exc:
            for problem in record_problems(model, exc, table.label, row, column_of):
                log.add(*problem)
    return records


def _alts(column: str) -> list[str]:
    return [a for a, (target, _) in UNIT_ALTERNATIVES.items() if target == column]


def _convert_units(values: dict[str, Any], label: str, row: int, log: ProblemLog) -> dict[str, Any] | None:
    for column, (target, factor) in UNIT_ALTERNATIVES.items():
        if column not in values:
            continue
        raw = values.pop(column)
        if values.get(target) is not None and raw is not None:
            log.add(label, row, column, f"both '{column}' and '{target}' are given.", "keep one of the two columns.")
            return None
        if raw is None:
            continue
        try:
            values[target] = float(raw) * factor
        except (TypeError, ValueError):
            log.add(label, row, column, f"is not a number (got {raw!r}).", "write a plain number.")
            return None
    return values


def _check_unique(parsed: list[tuple[int, Any]], label: str, log: ProblemLog) -> None:
    seen: dict[str, int] = {}
    for row, rec in parsed:
        if rec.id in seen:
            log.add(label, row, "id", f"duplicate id '{rec.id}' (first used in row {seen[rec.id]}).", "give every row its own id.")
        seen.setdefault(rec.id, row)


class _RegionReshape:
    """Folds wide demand_<w>_tok_s / rtt_budget_<w>_ms columns into the Region's dicts."""

    def __init__(self, workload_ids: list[str]):
        self.workload_ids = workload_ids
        self.consumes = {"demand_tok_s", "rtt_budget_ms"}
        self.columns = {f"demand_{w}_tok_s" for w in workload_ids} | {f"rtt_budget_{w}_ms" for w in workload_ids}

    def __call__(self, values: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in values.items() if k not in self.columns}
        out["demand_tok_s"] = {w: values.get(f"demand_{w}_tok_s") for w in self.workload_ids}
        out["rtt_budget_ms"] = {w: values.get(f"rtt_budget_{w}_ms") for w in self.workload_ids}
        if all(v is None for v in out["demand_tok_s"].values()):
            out["demand_tok_s"] = {w: 0.0 for w in self.workload_ids}
        return out

    @staticmethod
    def column_of(loc: list[str]) -> str:
        if len(loc) >= 2 and loc[0] == "demand_tok_s":
            return f"demand_{loc[1]}_tok_s"
        if len(loc) >= 2 and loc[0] == "rtt_budget_ms":
            return f"rtt_budget_{loc[1]}_ms"
        return ".".join(loc)


def _section(model: type[Record], values: dict[str, Any], label: str, section: str, log: ProblemLog) -> Any:
    try:
        return model(**values)
    except ValidationError as exc:
        for file, _, column, message, hint in record_problems(model, exc, label, None):
            log.add(file, None, f"{section}.{column}", message, hint)
        return model()


def load_catalog(folder: Path, log: ProblemLog, label_root: Path | None = None) -> Catalog | None:
    """Read and cross-check the six catalog tables in `folder`."""
    parts: dict[str, list[tuple[int, Any]]] = {}
    labels: dict[str, str] = {}
    for name, model in CATALOG_TABLES.items():
        path = folder / f"{name}.csv"
        labels[name] = _label(path, label_root)
        table = read_table(path, labels[name], log)
        parts[name] = parse_rows(table, model, log) if table else []
        if name != "throughput":
            _check_unique(parts[name], labels[name], log)
    chips = {c.id for _, c in parts["chips"]}
    workloads = {w.id for _, w in parts["workloads"]}
    for row, rc in parts["rack_configs"]:
        if rc.chip not in chips:
            log.add(labels["rack_configs"], row, "chip", f"rack config '{rc.id}' names unknown chip '{rc.chip}'.", _known("chips", chips))
    seen_pairs: set[tuple[str, str]] = set()
    for row, tp in parts["throughput"]:
        if tp.chip not in chips:
            log.add(labels["throughput"], row, "chip", f"unknown chip '{tp.chip}'.", _known("chips", chips))
        if tp.workload not in workloads:
            log.add(labels["throughput"], row, "workload", f"unknown workload '{tp.workload}'.", _known("workloads", workloads))
        if (tp.chip, tp.workload) in seen_pairs:
            log.add(labels["throughput"], row, "chip", f"throughput for ({tp.chip}, {tp.workload}) given twice.", "keep one row per chip and workload.")
        seen_pairs.add((tp.chip, tp.workload))
    if not parts["workloads"] and not log:
        log.add(labels["workloads"], None, None, "no workload classes.", "add at least one row.")
    if log:
        return None
    return Catalog(**{name: tuple(rec for _, rec in recs) for name, recs in parts.items()})


def _known(what: str, ids: set[str]) -> str:
    return f"use one of the known {what}: {', '.join(sorted(ids))}."


def _label(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.relative_to(root))
        except ValueError:
            pass
    return str(path)


def load_scenario(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Scenario:
    """Load and validate a scenario YAML file (None = the embedded default).

    `overrides` ({path: value}, models/overrides.py) apply after the file's own, as if the
    file had them last; a batch sweep uses this for its members. Raises ScenarioError
    listing every problem found.
    """
    path = Path(path) if path is not None else default_scenario_path()
    log = ProblemLog()
    label = path.name
    raw = _resolved_raw(path, label, log, ())
    log.raise_if_any()
    if overrides:
        raw["overrides"] = {**raw.get("overrides", {}), **overrides}
    try:
        spec = ScenarioFile(**raw)
    except ValidationError as exc:
        for error in exc.errors():
            key = ".".join(str(p) for p in error["loc"])
            if error["type"] == "extra_forbidden":
                close = difflib.get_close_matches(key, list(ScenarioFile.model_fields), n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(ScenarioFile.model_fields)}."
                log.add(label, None, key, "unknown key.", hint)
            else:
                log.add(label, None, key, _describe(error), "see docs/scenario-format in README.")
        log.raise_if_any()
    root = path.parent
    spec, table_overrides = _apply_spec_overrides(spec, label, log)

    economics = _section(Economics, spec.economics, label, "economics", log)
    latency = _section(Latency, spec.latency, label, "latency", log)
    policies = _section(Policies, spec.policies, label, "policies", log)

    catalog_dir = (root / spec.catalog) if spec.catalog else default_catalog_dir()
    catalog = load_catalog(catalog_dir, log, root if spec.catalog else None)

    sites_table = _overridden(read_table(root / spec.sites, spec.sites, log), "sites", table_overrides, set(Site.model_fields), label, log)
    sites = parse_rows(sites_table, Site, log) if sites_table else []
    _check_unique(sites, spec.sites, log)

    regions: list[tuple[int, Region]] = []
    regions_table = read_table(root / spec.regions, spec.regions, log)
    if regions_table and catalog is not None:
        reshape = _RegionReshape([w.id for w in catalog.workloads])
        regions_table = _overridden(regions_table, "regions", table_overrides, set(Region.model_fields) | reshape.columns, label, log)
        for w in reshape.workload_ids:
            for column in (f"demand_{w}_tok_s", f"rtt_budget_{w}_ms"):
                if column not in regions_table.columns:
                    log.add(spec.regions, None, column, f"required column for workload class '{w}' is missing.", f"add a '{column}' column.")
        if all(c in regions_table.columns for c in reshape.columns):
            regions = parse_rows(regions_table, Region, log, reshape, reshape.column_of, reshape.columns)
        _check_unique(regions, spec.regions, log)

    jobs: list[tuple[int, TrainingJob]] = []
    if spec.jobs:
        jobs_table = _overridden(read_table(root / spec.jobs, spec.jobs, log), "jobs", table_overrides, set(TrainingJob.model_fields), label, log)
        jobs = parse_rows(jobs_table, TrainingJob, log) if jobs_table else []
        _check_unique(jobs, spec.jobs, log)

    pair_costs: list[tuple[int, PairCost]] = []
    if spec.pair_costs:
        pairs_table = _overridden(read_table(root / spec.pair_costs, spec.pair_costs, log), "pair_costs", table_overrides, set(PairCost.model_fields), label, log)
        pair_costs = parse_rows(pairs_table, PairCost, log) if pairs_table else []
        _check_pairs(pair_costs, spec.pair_costs, sites, regions, catalog, log)

    backbone: list[tuple[str, str, float]] = []
    if latency.backbone:
        backbone = _load_backbone(root / latency.backbone, latency.backbone, log)

    for override in table_overrides:
        if override.target not in _loaded_tables(spec):
            log.add(label, None, f"overrides.{override.path}", f"the scenario has no {override.target} table.", f"give the scenario a {override.target} table, or drop this override.")
    if catalog is not None:
        _cross_check(spec, label, catalog, sites, jobs, policies, log)
    if not sites and sites_table is not None and not log:
        log.add(spec.sites, None, None, "has no sites.", "add at least one candidate site.")
    if not regions and regions_table is not None and not log:
        log.add(spec.regions, None, None, "has no regions.", "add at least one demand region.")
    log.raise_if_any()

    scenario = Scenario(
        name=spec.name,
        description=spec.description,
        sites=tuple(rec for _, rec in sites),
        regions=tuple(rec for _, rec in regions),
        catalog=catalog,
        jobs=tuple(rec for _, rec in jobs),
        pair_costs=tuple(rec for _, rec in pair_costs),
        economics=economics,
        latency=latency,
        policies=policies,
        backbone_edges=tuple(backbone),
        files={"scenario": label, "sites": spec.sites, "regions": spec.regions, "jobs": spec.jobs or ""},
        source_path=str(path.resolve()),
    )
    return scenario.model_copy(update={"content_hash": scenario_hash(scenario)})


# ------------------------------------------------------------------ extends / overrides

TABLE_KEYS = ("sites", "regions", "jobs", "pair_costs", "catalog")


def _read_yaml(path: Path, label: str, log: ProblemLog) -> dict[str, Any] | None:
    if not path.exists():
        log.add(str(path), None, None, "scenario file not found.", "give the path of a scenario YAML file.")
        return None
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        log.add(label, mark.line + 1 if mark else None, None, f"is not valid YAML: {getattr(exc, 'problem', exc)}.", "fix the YAML syntax.")
        return None
    if not isinstance(raw, dict):
        log.add(label, None, None, "must be a mapping of keys to values.", "start from `dcplace data export`.")
        return None
    return raw


def _absolute_paths(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A base scenario's table paths made absolute, so they still resolve from its child."""
    out = dict(raw)
    for key in TABLE_KEYS:
        if isinstance(out.get(key), str):
            out[key] = str((folder / out[key]).resolve())
    latency = out.get("latency")
    if isinstance(latency, dict) and isinstance(latency.get("backbone"), str):
        out["latency"] = {**latency, "backbone": str((folder / latency["backbone"]).resolve())}
    return out


def _resolved_raw(path: Path, label: str, log: ProblemLog, chain: tuple[Path, ...]) -> dict[str, Any]:
    """The YAML mapping with `extends` folded in: the base's keys, then the child's on top
    (sections merged key by key, overrides appended after the base's)."""
    raw = _read_yaml(path, label, log)
    if raw is None:
        return {}
    extends = raw.pop("extends", None)
    if extends is None:
        return raw
    base_path = default_scenario_path() if extends == "default" else (path.parent / str(extends)).resolve()
    if base_path.resolve() in chain or base_path.resolve() == path.resolve():
        log.add(label, None, "extends", f"extends '{extends}', which extends this file again (a cycle).", "make one scenario the base of the other, not both.")
        return {}
    if not base_path.exists():
        log.add(label, None, "extends", f"base scenario '{extends}' not found (looked for {base_path}).", "give a path relative to this file, or 'default'.")
        return {}
    base = _absolute_paths(_resolved_raw(base_path, str(base_path), log, (*chain, path.resolve())), base_path.parent)
    merged = {**base, **{k: v for k, v in raw.items() if k not in ("economics", "latency", "policies", "overrides")}}
    for section in ("economics", "latency", "policies"):
        merged[section] = {**(base.get(section) or {}), **(raw.get(section) or {})}
    merged["overrides"] = {**(base.get("overrides") or {}), **(raw.get("overrides") or {})}
    return merged


def _apply_spec_overrides(spec: ScenarioFile, label: str, log: ProblemLog) -> tuple[ScenarioFile, list[Override]]:
    """Apply name, description and section overrides to the spec; return the table overrides."""
    table_overrides: list[Override] = []
    update: dict[str, Any] = {}
    section_models = {"economics": Economics, "latency": Latency, "policies": Policies}
    for path, value in spec.overrides.items():
        try:
            override = parse_override(path, value)
            if override.kind == "top":
                update[override.key] = override.apply_to(update.get(override.key, getattr(spec, override.key)))
            elif override.kind == "section":
                model = section_models[override.target]
                if override.key not in model.model_fields:
                    close = difflib.get_close_matches(override.key, list(model.model_fields), n=1)
                    raise OverrideError(f"{override.target} has no key '{override.key}'. Fix: " + (f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(model.model_fields)}."))
                current = update.get(override.target, getattr(spec, override.target))
                update[override.target] = apply_to_section(current, override, model.model_fields[override.key].default)
            else:
                table_overrides.append(override)
        except OverrideError as exc:
            message, _, fix = str(exc).partition(" Fix: ")
            log.add(label, None, f"overrides.{path}", message, fix)
    return spec.model_copy(update=update), table_overrides


def _overridden(table: Table | None, name: str, overrides: list[Override], known: set[str], label: str, log: ProblemLog) -> Table | None:
    """The table with this table's overrides applied to its raw rows.

    An override in dcplace's unit of a column the file gives in another unit
    (power_limit_kw vs power_limit_mw) converts that column first. Problems later found
    in an overridden cell say which override produced the value.
    """
    mine = [o for o in overrides if o.target == name]
    if table is None or not mine:
        return table
    for column, (target, factor) in UNIT_ALTERNATIVES.items():
        if column in table.columns and target not in table.columns and any(o.key == target for o in mine):
            _convert_column(table, column, target, factor)
    for override in mine:
        before = [dict(row) for row in table.rows]
        try:
            apply_to_rows(table.rows, table.columns, override, known)
        except OverrideError as exc:
            message, _, fix = str(exc).partition(" Fix: ")
            log.add(label, None, f"overrides.{override.path}", message, fix)
            continue
        for row_number, old, new in zip(table.row_numbers, before, table.rows):
            if old.get(override.key) != new.get(override.key):
                log.note_origin(table.label, row_number, override.key, f"after override '{override.path}: {override.value}' in {label}")
    return table


def _convert_column(table: Table, column: str, target: str, factor: float) -> None:
    """Rewrite a column given in another unit into dcplace's unit, in the raw rows."""
    for row in table.rows:
        raw = row.pop(column, None)
        try:
            row[target] = None if raw is None else float(raw) * factor
        except (TypeError, ValueError):
            row[column] = raw  # left for the unit check, which names the bad cell
    table.columns[table.columns.index(column)] = target
    if any(column in row for row in table.rows):
        table.columns.append(column)


def _loaded_tables(spec: ScenarioFile) -> set[str]:
    return {"sites", "regions"} | {k for k in ("jobs", "pair_costs") if getattr(spec, k)}


def scenario_hash(scenario: Scenario) -> str:
    """SHA-256 of the resolved content (not of file bytes): the same model, the same hash."""
    payload = scenario.model_dump(mode="json", exclude={"source_path", "content_hash", "files"})
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _check_pairs(pairs, label: str, sites, regions, catalog: Catalog | None, log: ProblemLog) -> None:
    """Pair costs must name known regions, sites and workloads, once each."""
    known = {"region": {r.id for _, r in regions}, "site": {s.id for _, s in sites}}
    known["workload"] = {w.id for w in catalog.workloads} if catalog else set()
    seen: dict[tuple[str, str, str], int] = {}
    for row, pair in pairs:
        for field, ids in known.items():
            if getattr(pair, field) not in ids:
                log.add(label, row, field, f"unknown {field} '{getattr(pair, field)}'.", f"use an id from the {field}s table.")
        key = (pair.region, pair.site, pair.workload)
        if key in seen:
            log.add(label, row, "region", f"cost for {key} already given in row {seen[key]}.", "keep one row per region, site and workload.")
        seen.setdefault(key, row)


def _load_backbone(path: Path, label: str, log: ProblemLog) -> list[tuple[str, str, float]]:
    table = read_table(path, label, log)
    if table is None:
        return []
    missing = [c for c in ("from", "to", "km") if c not in table.columns]
    if missing:
        for c in missing:
            log.add(label, None, c, "required column is missing.", "a backbone table has columns from,to,km.")
        return []
    edges = []
    for row, values in zip(table.row_numbers, table.rows):
        try:
            km = float(values["km"])
            if not math.isfinite(km) or km < 0:
                raise ValueError
        except (TypeError, ValueError):
            log.add(label, row, "km", f"must be a finite distance >= 0 in km (got {values['km']!r}).", "write the fibre length in km.")
            continue
        if not values["from"] or not values["to"]:
            log.add(label, row, "from" if not values["from"] else "to", "is empty.", "name a site, region or backbone node id.")
            continue
        edges.append((str(values["from"]), str(values["to"]), km))
    return edges


def _cross_check(spec: ScenarioFile, label: str, catalog: Catalog, sites, jobs, policies: Policies, log: ProblemLog) -> None:
    """References between tables: cooling names, chip names, site ids in policies."""
    cooling_ids = {c.id for c in catalog.cooling}
    chip_ids = {c.id for c in catalog.chips}
    site_ids = {s.id for _, s in sites}
    for row, site in sites:
        for c in site.cooling_allowed:
            if c not in cooling_ids:
                log.add(spec.sites, row, "cooling_allowed", f"site '{site.id}' allows unknown cooling '{c}'.", _known("cooling types", cooling_ids))
    for row, job in jobs:
        for chip in job.eligible_chips:
            if chip not in chip_ids:
                log.add(spec.jobs or "jobs", row, "eligible_chips", f"job '{job.id}' names unknown chip '{chip}'.", _known("chips", chip_ids))
            elif not next(c for c in catalog.chips if c.id == chip).h100_equiv:
                log.add(spec.jobs or "jobs", row, "eligible_chips", f"job '{job.id}' names chip '{chip}', which has h100_equiv 0 (not a training chip).", "name a training chip, or give the chip an h100_equiv.")
    for key in ("forced_sites", "forbidden_sites"):
        for sid in getattr(policies, key):
            if sid not in site_ids:
                log.add(label, None, f"policies.{key}", f"unknown site '{sid}'.", "use ids from the sites table.")
    both = set(policies.forced_sites) & set(policies.forbidden_sites)
    if both:
        log.add(label, None, "policies.forced_sites", f"sites both forced and forbidden: {', '.join(sorted(both))}.", "remove them from one of the two lists.")
    if policies.max_sites is not None and policies.max_sites < policies.min_sites:
        log.add(label, None, "policies.max_sites", f"max_sites {policies.max_sites} < min_sites {policies.min_sites}.", "raise max_sites or lower min_sites.")


# ------------------------------------------------------------------------- writing


def export_default(folder: str | Path) -> Path:
    """Copy the embedded default scenario and catalog, with their sources, to `folder` as
    editable files (the scenario YAML gains `catalog: catalog`). Returns the YAML path."""
    folder = check_new_folder(folder)
    stage = new_stage(folder)  # written whole, then renamed into place: a killed export leaves nothing
    try:
        shutil.copytree(default_scenario_path().parent, stage, dirs_exist_ok=True)
        shutil.copytree(default_catalog_dir(), stage / "catalog", ignore=shutil.ignore_patterns("__pycache__"))
        yaml_path = stage / "scenario.yaml"
        yaml_path.write_text(yaml_path.read_text() + "catalog: catalog\n")
        os.rename(stage, folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return folder / "scenario.yaml"


def _cell(value: Any) -> Any:
    if isinstance(value, tuple):
        return ";".join(value)
    return value


def _records_frame(records, columns=None) -> pd.DataFrame:
    rows = [{k: _cell(v) for k, v in r.model_dump().items()} for r in records]
    return pd.DataFrame(rows, columns=columns)


def write_scenario(scenario: Scenario, folder: str | Path) -> Path:
    """Write `scenario` as a loadable scenario folder (YAML + CSV tables in dcplace units)."""
    folder = Path(folder)
    (folder / "catalog").mkdir(parents=True, exist_ok=True)
    for name in CATALOG_TABLES:
        cols = list(CATALOG_TABLES[name].model_fields)
        _records_frame(getattr(scenario.catalog, name), cols).to_csv(folder / "catalog" / f"{name}.csv", index=False)
    _records_frame(scenario.sites, list(Site.model_fields)).to_csv(folder / "sites.csv", index=False)
    workload_ids = [w.id for w in scenario.catalog.workloads]
    region_rows = []
    for r in scenario.regions:
        row = {k: _cell(v) for k, v in r.model_dump(exclude={"demand_tok_s", "rtt_budget_ms"}).items()}
        for w in workload_ids:
            row[f"demand_{w}_tok_s"] = r.demand_tok_s.get(w)
            row[f"rtt_budget_{w}_ms"] = r.rtt_budget_ms.get(w)
        region_rows.append(row)
    pd.DataFrame(region_rows).to_csv(folder / "regions.csv", index=False)
    _records_frame(scenario.jobs, list(TrainingJob.model_fields)).to_csv(folder / "jobs.csv", index=False)
    if scenario.pair_costs:
        _records_frame(scenario.pair_costs, list(PairCost.model_fields)).to_csv(folder / "pair_costs.csv", index=False)
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
        "catalog": "catalog",
        "economics": scenario.economics.model_dump(),
        "latency": latency,
        "policies": policies,
    }
    (folder / "scenario.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder / "scenario.yaml"


__all__ = ["load_scenario", "write_scenario", "export_default", "default_scenario_path", "scenario_hash", "ScenarioError"]
