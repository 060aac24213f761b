"""The scenario file: a YAML file that points at tables, read into a `Scenario`.

```yaml
name: my-scenario
sites: sites.csv            # CSV, Excel (.xlsx, or book.xlsx#Sheet), GeoJSON, GeoPackage or Parquet
regions: regions.geojson
jobs: jobs.csv              # optional
catalog: catalog/           # optional: a folder of catalog tables; default = embedded
economics: {discount_rate: 0.08}
latency: {route_factor: 2.1, backbone: backbone.csv}
policies: {max_share_per_site: 0.6}
```

Paths are relative to the YAML file. Every problem found is collected and raised at once
as a `ScenarioError` whose entries name the file, the row and the field. Units are
converted here, once: `power_limit_mw` becomes `power_limit_kw`. A key given twice in the
YAML is a problem naming both lines (models/yamlio.py).

`build_scenario` is the one builder behind both front doors: `load_scenario` (files) and
`Scenario.from_frames` (DataFrames in memory, models/frames.py), so both validate alike.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from dcplace.models.clock_inputs import check_clock_inputs, check_routing
from dcplace.models.references import check_cloud_ids, check_pairs, cross_check, footprint_rows
from dcplace.models.period_inputs import check_periods, read_periods
from dcplace.models.limits import size_problem
from dcplace.models.errors import ProblemLog
from dcplace.models.overrides import Override, OverrideError, apply_to_rows, apply_to_section, parse_override
from dcplace.models.records import (
    Catalog,
    Clock,
    CloudRegion,
    Economics,
    Latency,
    PairCost,
    Policies,
    Profile,
    Region,
    Scenario,
    Site,
    TrainingJob,
)
from dcplace.models.tables import (
    UNIT_ALTERNATIVES,
    RegionReshape,
    Table,
    _describe,
    check_unique,
    load_catalog,
    parse_rows,
    read_table,
    section,
)
from dcplace.models.yamlio import read_yaml


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
    footprint: str | None = None  # today's sites and racks, held fixed: the as-is baseline (docs/as-is.md)
    profiles: str | None = None
    cloud_regions: str | None = None
    catalog: str | None = None
    economics: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    policies: dict[str, Any] = {}
    clock: dict[str, Any] = {}
    periods: list[dict[str, Any]] = []  # docs/periods.md: empty = one annualized year


_SPEC_EXAMPLES = {
    "economics": "economics: {carbon_price_usd_per_t: 80}", "latency": "latency: {route_factor: 1.5}",
    "policies": "policies: {max_sites: 20}", "clock": "clock: {hours: 24}",
    "periods": "periods: [{year: 2026, years: 2}, {year: 2028, years: 2}]",
    "overrides": "overrides: {regions.rtt_budget_chat_ms: '*0.75'}",
}


def _spec_fix(key: str) -> str:
    """What a top-level key of the scenario file holds, with an example (README.md, 'Scenario format')."""
    if key in _SPEC_EXAMPLES:
        kind = "a list of periods" if key == "periods" else "a mapping of keys to values"
        return f"give '{key}' as {kind}, e.g. {_SPEC_EXAMPLES[key]} (README.md, 'Scenario format', lists every key)."
    if key in ("name", "description"):
        return f"give '{key}' as text, e.g. {key}: my-scenario."
    if key == "catalog":
        return "give 'catalog' as the path of a catalog folder (chips.csv, rack_configs.csv, ...), relative to this YAML."
    return f"give '{key}' as the path of its table file, relative to this YAML (README.md, 'Scenario format')."


def default_scenario_path() -> Path:
    """The embedded default scenario shipped in the `data` package."""
    return Path(str(resources.files("dcplace.data") / "default" / "scenario.yaml"))


def default_catalog_dir() -> Path:
    return Path(str(resources.files("dcplace.data") / "catalog"))


def load_scenario(path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                  overrides_origin: str | dict[str, str] | None = None) -> Scenario:
    """Load and validate a scenario YAML file (None = the embedded default; "years", when no file
    of that name exists, = the embedded default over three periods, data/default/years.yaml).

    `overrides` ({path: value}, models/overrides.py) apply after the file's own, as if the
    file had them last; a batch sweep uses this for its members. `overrides_origin` says
    where they were written (one text, or one per path, e.g. "whatifs.yaml, grid key
    'economics.carbon_price_usd_per_t'"), so that a problem they cause names that file, not
    the scenario's. Raises ScenarioError listing every problem found.
    """
    path = Path(path) if path is not None else default_scenario_path()
    if str(path) == "years" and not path.is_file():
        path = default_scenario_path().with_name("years.yaml")
    log = ProblemLog()
    label = path.name
    raw = _resolved_raw(path, label, log, ())
    log.raise_if_any()
    origins: dict[str, str] = {}
    if overrides:
        raw["overrides"] = {**raw.get("overrides", {}), **overrides}
        for key in overrides:
            origin = overrides_origin.get(key) if isinstance(overrides_origin, dict) else overrides_origin
            if origin:
                origins[key] = origin
    spec = parse_spec(raw, label, log)
    root = path.parent

    def open_table(ref: str) -> Table | None:
        return read_table(root / ref, ref, log)

    def catalog_of(log: ProblemLog) -> Catalog | None:
        folder = (root / spec.catalog) if spec.catalog else default_catalog_dir()
        return load_catalog(folder, log, root if spec.catalog else None)

    scenario = build_scenario(spec, label, log, open_table, catalog_of, str(path.resolve()), origins)
    applied = {k: v for k, v in (raw.get("overrides") or {}).items() if k not in ("name", "description")}
    # what makes this scenario a variant of its file (its own overrides, then --set or a sweep's):
    # not content (the hash is of the values they produce), but a plan's provenance records them
    return scenario.model_copy(update={"overrides": applied}) if applied else scenario


def with_footprint(scenario: Scenario, path: str | Path) -> Scenario:
    """`scenario` as it is today: with the footprint table at `path` (docs/as-is.md) held fixed, so that a
    solve gives the cost of today's sites and racks (`dcplace solve --as-is footprint.csv`). The table gets
    exactly the checks a scenario file's `footprint:` key does; raises ScenarioError listing every problem."""
    log = ProblemLog()
    label = str(path)
    lines = footprint_rows(read_table(Path(path), label, log), label, list(enumerate(scenario.sites, start=2)),
                            scenario.catalog, scenario.policies, log)
    if scenario.periods:
        log.add(label, None, None, "an as-is baseline is today's cost, one year: the scenario plans several periods.",
                "solve the as-is baseline on a scenario without periods (docs/as-is.md).")
    log.raise_if_any()
    held = scenario.model_copy(update={"footprint": tuple(line for _, line in lines),
                                       "files": {**scenario.files, "footprint": label}})
    return held.model_copy(update={"content_hash": scenario_hash(held)})


def parse_spec(raw: dict[str, Any], label: str, log: ProblemLog) -> ScenarioFile:
    """The top-level mapping as a ScenarioFile; raises ScenarioError naming unknown or bad keys."""
    try:
        return ScenarioFile(**raw)
    except ValidationError as exc:
        for error in exc.errors():
            key = ".".join(str(p) for p in error["loc"])
            if error["type"] == "extra_forbidden":
                close = difflib.get_close_matches(key, list(ScenarioFile.model_fields), n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(ScenarioFile.model_fields)}."
                log.add(label, None, key, "unknown key.", hint)
            else:
                log.add(label, None, key, _describe(error), _spec_fix(error["loc"][0] if error["loc"] else ""))
        log.raise_if_any()
        raise


def build_scenario(
    spec: ScenarioFile,
    label: str,
    log: ProblemLog,
    open_table: Callable[[str], Table | None],
    catalog_of: Callable[[ProblemLog], Catalog | None],
    source_path: str = "",
    origins: dict[str, str] | None = None,
) -> Scenario:
    """Validate every table and section of `spec` into a Scenario (the one builder).

    `open_table(ref)` gives the table a spec entry names (from a file, or a frame in memory);
    `catalog_of(log)` the catalog. Raises ScenarioError listing every problem found.
    """
    spec, table_overrides = _apply_spec_overrides(spec, label, log, origins or {})

    sections_log = ProblemLog()
    economics = section(Economics, spec.economics, label, "economics", sections_log)
    latency = section(Latency, spec.latency, label, "latency", sections_log)
    policies = section(Policies, spec.policies, label, "policies", sections_log)
    clock = section(Clock, spec.clock, label, "clock", sections_log)
    periods = read_periods(spec.periods, economics, label, sections_log)
    for problem in sections_log.problems:  # a bad value set by a sweep is blamed on the sweep
        origin = (origins or {}).get(problem.field or "")
        if origin:
            log.add(origin, None, problem.field, f"{problem.message.rstrip('.')} (the value comes from {origin}, not {label}).", problem.fix)
        else:
            log.add(problem.file, problem.row, problem.field, problem.message, problem.fix)

    catalog = catalog_of(log)

    def overridden(table, name, known):
        return _overridden(table, name, table_overrides, known, label, log, origins or {})

    sites_table = overridden(open_table(spec.sites), "sites", set(Site.model_fields))
    regions_table = open_table(spec.regions)
    if sites_table and regions_table:  # before a row is validated: a table too large for memory is refused now
        too_large = size_problem(len(regions_table.rows), len(sites_table.rows), spec.sites)
        if too_large is not None:
            log.extend([too_large])
            log.raise_if_any()
    sites = parse_rows(sites_table, Site, log) if sites_table else []
    check_unique(sites, sites_table.label if sites_table else spec.sites, log)

    regions: list[tuple[int, Region]] = []
    if regions_table and catalog is not None:
        reshape = RegionReshape([w.id for w in catalog.workloads])
        regions_table = overridden(regions_table, "regions", (set(Region.model_fields) - reshape.consumes) | reshape.columns | reshape.optional)
        for w in reshape.workload_ids:
            for column in (f"demand_{w}_tok_s", f"rtt_budget_{w}_ms"):
                if column not in regions_table.columns:
                    log.add(spec.regions, None, column, f"required column for workload class '{w}' is missing.", f"add a '{column}' column.")
        if all(c in regions_table.columns for c in reshape.columns):
            regions = parse_rows(regions_table, Region, log, reshape, reshape.column_of, reshape.columns | reshape.optional)
        check_unique(regions, regions_table.label if regions_table else spec.regions, log)

    jobs: list[tuple[int, TrainingJob]] = []
    if spec.jobs:
        jobs_table = overridden(open_table(spec.jobs), "jobs", set(TrainingJob.model_fields))
        jobs = parse_rows(jobs_table, TrainingJob, log) if jobs_table else []
        check_unique(jobs, jobs_table.label if jobs_table else spec.jobs, log)

    pair_costs: list[tuple[int, PairCost]] = []
    if spec.pair_costs:
        pairs_table = overridden(open_table(spec.pair_costs), "pair_costs", set(PairCost.model_fields))
        pair_costs = parse_rows(pairs_table, PairCost, log) if pairs_table else []
        check_pairs(pair_costs, spec.pair_costs, sites, regions, catalog, log)

    footprint = footprint_rows(open_table(spec.footprint), spec.footprint, sites, catalog, policies, log) if spec.footprint else []

    profiles: list[tuple[int, Profile]] = []
    profile_rows_dropped = False
    if spec.profiles:
        profiles_table = overridden(open_table(spec.profiles), "profiles", set(Profile.model_fields))
        profiles = parse_rows(profiles_table, Profile, log) if profiles_table else []
        profile_rows_dropped = profiles_table is None or len(profiles) < len(profiles_table.rows)
    clouds: list[tuple[int, CloudRegion]] = []
    if spec.cloud_regions:
        clouds_table = overridden(open_table(spec.cloud_regions), "cloud_regions", set(CloudRegion.model_fields))
        clouds = parse_rows(clouds_table, CloudRegion, log) if clouds_table else []
        check_unique(clouds, spec.cloud_regions, log)
        check_cloud_ids(clouds, spec.cloud_regions, sites, log)
    if catalog is not None:
        check_clock_inputs(spec.profiles or "profiles", spec.cloud_regions or "cloud_regions", label, clock, profiles, clouds, regions, catalog, log,
                           profile_rows_dropped)
    if not sections_log.problems:
        check_routing(label, clock, policies, periods, log)

    backbone: list[tuple[str, str, float]] = []
    if latency.backbone:
        backbone = _load_backbone(open_table(latency.backbone), latency.backbone, log)

    for override in table_overrides:
        if override.target not in _loaded_tables(spec):
            log.add(_origin_label(label, override.path, origins), None, f"overrides.{override.path}", f"the scenario has no {override.target} table.",
                    f"give the scenario a {override.target} table, or drop this override.")
    if catalog is not None:
        cross_check(spec, label, catalog, sites, jobs, policies, log)
        check_periods(periods, label, catalog, policies, log)
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
        footprint=tuple(rec for _, rec in footprint),
        profiles=tuple(rec for _, rec in profiles),
        cloud_regions=tuple(rec for _, rec in clouds),
        clock=clock,
        periods=periods,
        economics=economics,
        latency=latency,
        policies=policies,
        backbone_edges=tuple(backbone),
        files={"scenario": label, "sites": spec.sites, "regions": spec.regions, "jobs": spec.jobs or "",
               "profiles": spec.profiles or "", "cloud_regions": spec.cloud_regions or "", "footprint": spec.footprint or ""},
        source_path=source_path,
    )
    return scenario.model_copy(update={"content_hash": scenario_hash(scenario)})


def _origin_label(label: str, path: str, origins: dict[str, str] | None) -> str:
    return (origins or {}).get(path, label)


# ------------------------------------------------------------------ extends / overrides

TABLE_KEYS = ("sites", "regions", "jobs", "pair_costs", "footprint", "profiles", "cloud_regions", "catalog")
SECTION_KEYS = ("economics", "latency", "policies", "clock")


def _read_yaml(path: Path, label: str, log: ProblemLog) -> dict[str, Any] | None:
    raw = read_yaml(path, label, log, "scenario")
    if raw is None:
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
    merged = {**base, **{k: v for k, v in raw.items() if k not in (*SECTION_KEYS, "overrides")}}
    for section in SECTION_KEYS:
        merged[section] = {**(base.get(section) or {}), **(raw.get(section) or {})}
    merged["overrides"] = {**(base.get("overrides") or {}), **(raw.get("overrides") or {})}
    return merged


def _apply_spec_overrides(spec: ScenarioFile, label: str, log: ProblemLog, origins: dict[str, str] | None = None) -> tuple[ScenarioFile, list[Override]]:
    """Apply name, description and section overrides to the spec; return the table overrides."""
    table_overrides: list[Override] = []
    update: dict[str, Any] = {}
    section_models = {"economics": Economics, "latency": Latency, "policies": Policies, "clock": Clock}
    for path, value in spec.overrides.items():
        try:
            override = parse_override(path, value)
            if override.kind == "top":
                update[override.key] = override.apply_to(update.get(override.key, getattr(spec, override.key)))
            elif override.kind == "section":
                model = section_models[override.target]
                if override.key not in model.model_fields:
                    close = difflib.get_close_matches(override.key, list(model.model_fields), n=1)
                    raise OverrideError(f"{override.target} has no key '{override.key}'.",
                                        f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(model.model_fields)}.")
                current = update.get(override.target, getattr(spec, override.target))
                update[override.target] = apply_to_section(current, override, model.model_fields[override.key].default)
            else:
                table_overrides.append(override)
        except OverrideError as exc:
            log.add(_origin_label(label, path, origins), None, f"overrides.{path}", exc.message, exc.fix)
    return spec.model_copy(update=update), table_overrides


def _overridden(table: Table | None, name: str, overrides: list[Override], known: set[str], label: str, log: ProblemLog,
                origins: dict[str, str] | None = None) -> Table | None:
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
            log.add(_origin_label(label, override.path, origins), None, f"overrides.{override.path}", exc.message, exc.fix)
            continue
        for row_number, old, new in zip(table.row_numbers, before, table.rows):
            if old.get(override.key) != new.get(override.key):
                log.note_origin(table.label, row_number, override.key, f"after override '{override.path}: {override.value}' in {_origin_label(label, override.path, origins)}")
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
    return {"sites", "regions"} | {k for k in ("jobs", "pair_costs", "profiles", "cloud_regions") if getattr(spec, k)}


def scenario_hash(scenario: Scenario) -> str:
    """SHA-256 of the resolved content (not of file bytes): the same model, the same hash.

    Where the files were (source_path, files, the backbone's file name) is not content: the
    backbone's edges are, so a plan's inputs/ (which renames the backbone file to
    backbone.csv) re-load to the same hash. Pair costs, which can be a whole facilities x
    customers matrix, are left out of the sorted JSON and appended as pydantic's JSON of the
    records in their fields' order (a quarter of the time; docs/plan-format.md, "Scenario
    hash"): a scenario without them hashes as it always did."""
    exclude = {"source_path": True, "content_hash": True, "files": True, "latency": {"backbone"}}
    if scenario.pair_costs:
        exclude["pair_costs"] = True
    payload = scenario.model_dump(mode="json", exclude=exclude)
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode())
    if scenario.pair_costs:
        digest.update(b"\npair_costs:" + _PAIR_COSTS_JSON.dump_json(scenario.pair_costs))
    return digest.hexdigest()


_PAIR_COSTS_JSON = TypeAdapter(tuple[PairCost, ...])


def _load_backbone(table: Table | None, label: str, log: ProblemLog) -> list[tuple[str, str, float]]:
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
