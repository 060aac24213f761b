"""The plan: what the optimizer decided, what it costs, and how it was obtained.

A plan folder (docs/plan-format.md) holds plan.json (this record), sites.csv,
assignments.csv, jobs.csv, and inputs/ (the resolved scenario as loadable files plus
provenance.json). Folders are written whole or not at all, and replace only a plan folder
dcplace wrote (models.outputs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, ValidationError

from dcplace.models.csvtext import write_spreadsheet_csv
from dcplace.models.files import write_scenario
from dcplace.models.outputs import check_destination, staged_folder
from dcplace.models.records import Scenario

PLAN_FORMAT_VERSION = 1


class PlanRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RackLine(PlanRecord):
    """Racks of one configuration in one cooling zone for one purpose at a site."""

    config: str
    chip: str
    cooling: str
    purpose: Literal["inference", "training"]
    workload: str | None = None
    fabric: str | None = None
    racks: int
    gpus: int
    it_kw: float
    facility_kw: float
    cost_usd_per_year: dict[str, float]


class SitePlan(PlanRecord):
    id: str
    name: str
    lat: float
    lon: float
    country: str
    open: bool
    role: Literal["training", "inference", "mixed", "idle", "closed"]
    zones: list[str]
    fabrics: list[str]
    racks: list[RackLine]
    racks_total: int
    gpus: int
    it_kw: float
    facility_kw: float
    power_limit_kw: float
    floor_racks: int
    served_tok_s: dict[str, float]
    emissions_t_per_year: float
    upfront_capex_usd: float
    cost_usd_per_year: dict[str, float]
    total_cost_usd_per_year: float
    # self-build (docs/plan-format.md): None where the site cannot self-build (no build cost given)
    tenure: Literal["lease", "build"] | None = None
    built_kw: float | None = None  # IT kW of training in the self-built campus (0 when leased)


class Assignment(PlanRecord):
    region: str
    region_name: str
    workload: str
    site: str
    share: float
    served_tok_s: float
    rtt_ms: float
    rtt_budget_ms: float


class JobPlacement(PlanRecord):
    job: str
    name: str
    site: str
    fabric: str
    chip: str
    gpus_h100_equiv: float
    standby_site: str | None = None  # jobs with standby_required: where the job can resume (docs/resilience.md)
    standby_fabric: str | None = None
    standby_chip: str | None = None


class HourLine(PlanRecord):
    """One place's load and capacity for one class in one represented UTC hour (docs/clock.md)."""

    place: str  # a site id, or a cloud region id when kind is "rented"
    kind: Literal["owned", "rented"]
    workload: str
    hour_utc: int
    weight_h: float  # hours of the day this represented hour stands for
    load_tok_s: float
    capacity_tok_s: float  # installed (owned) or rented, at the target utilization
    lent_gpus: float = 0.0  # owned: GPUs lent to interruptible training in this hour
    serving_gpus: float = 0.0  # owned: GPUs the dispatch keeps busy serving; rented: GPUs rented in this hour


class RouteLine(PlanRecord):
    """With routing per hour (clock.routing hour): the part of a region's class demand one site serves in one
    represented UTC hour (docs/clock.md)."""

    region: str
    workload: str
    site: str
    hour_utc: int
    weight_h: float  # hours of the day this represented hour stands for
    share: float  # of the region's class demand in this hour
    served_tok_s: float  # share x demand x the region's load share p in this hour


class DispatchLine(PlanRecord):
    """GPUs of one dispatch group (a chip) in one cooling zone busy in one hour: serving or lent."""

    site: str
    group: str
    chip: str
    cooling: str
    workload: str
    hour_utc: int
    serving_gpus: float
    lent_gpus: float


class BackfillLine(PlanRecord):
    """GPUs an interruptible job borrows from one site's inference racks in one represented hour."""

    job: str
    site: str
    group: str
    chip: str
    workload: str
    hour_utc: int
    weight_h: float
    gpus: float
    h100_gpu_hours_per_day: float


class RentalLine(PlanRecord):
    """Rented GPUs: on demand for one represented hour, reserved for every hour, or a training job's."""

    cloud: str
    chip: str
    kind: Literal["on_demand", "reserved", "training"]
    workload: str | None = None
    job: str | None = None
    hour_utc: int | None = None
    gpus: float
    gpu_hours_per_year: float
    usd_per_year: float


class SolveRecord(PlanRecord):
    solver: str
    solver_version: str
    status: Literal["optimal", "feasible", "infeasible", "unbounded", "error", "no_solution"]
    termination: str
    objective_usd_per_year: float | None
    best_bound_usd_per_year: float | None
    gap: float | None
    build_time_s: float
    solve_time_s: float
    extract_time_s: float = 0.0
    warm_start: str = "off"
    options: dict[str, Any]
    model: dict[str, int]
    pairs: dict[str, Any] = {}  # candidate-pair path only (optimizer.pairs): pricing rounds, full LP bound
    failover: dict[str, Any] = {}  # N-1 only (optimizer.solving.failover): classes, losses generated, rounds, secure
    race: dict[str, Any] = {}  # HiGHS against OR-Tools' SCIP on the full model (optimizer.solving.race): each engine, winner; or why none ran


class Plan(PlanRecord):
    """A solved plan: what to open and build where, who serves whom, what it costs, how it was solved
    (plan.json of a plan folder, docs/plan-format.md); `frames()` gives its tables as DataFrames."""

    format_version: int = PLAN_FORMAT_VERSION
    scenario: str
    scenario_hash: str
    created_utc: str
    solve: SolveRecord
    objective_usd_per_year: float | None
    cost_breakdown_usd_per_year: dict[str, float]
    kpis: dict[str, float]
    sites: list[SitePlan]
    assignments: list[Assignment]
    jobs: list[JobPlacement]
    clock: dict[str, Any] = {}  # represented hours, weights, offsets (docs/clock.md); empty with no clock and no cloud
    hourly: list[HourLine] = []
    dispatch: list[DispatchLine] = []
    backfill: list[BackfillLine] = []
    rentals: list[RentalLine] = []
    rent_assignments: list[Assignment] = []  # demand served from cloud regions (site = the cloud region id)
    routing: list[RouteLine] = []  # routing per hour only (clock.routing hour): shares per represented hour
    # the as-is baseline only (docs/as-is.md): today's footprint, held fixed; empty for a plan the optimizer chose
    as_is: dict[str, Any] = {}
    diagnosis: list[str] = []
    provenance: dict[str, Any]

    def frames(self) -> dict[str, pd.DataFrame]:
        """The plan's tables as pandas DataFrames, by name: `sites`, `assignments` and `jobs`
        always; with the clock or cloud regions (docs/clock.md) also `hourly`, `dispatch`,
        `backfill`, `rentals` and `rent_assignments`; with routing per hour `routing`. They are
        exactly the tables of the plan folder's CSVs (same names, columns and values), with
        every value as plan.json holds it (no spreadsheet quoting): `dcplace.read_plan("plan").frames()`.
        GeoDataFrames of sites, regions and assignment lines: `dcplace.plan_layers(plan, scenario)`."""
        return plan_frames(self)


# --------------------------------------------------------------------------- folder


def _site_rows(plan: Plan) -> pd.DataFrame:
    rows = []
    tenure_columns = any(x.tenure is not None for x in plan.sites)  # self-build on: the tenure columns
    for s in plan.sites:
        row = {
            "id": s.id, "name": s.name, "lat": s.lat, "lon": s.lon, "country": s.country, "open": s.open,
            "role": s.role, "zones": ";".join(s.zones), "fabrics": ";".join(s.fabrics), "racks": s.racks_total,
            "gpus": s.gpus, "it_kw": s.it_kw, "facility_kw": s.facility_kw, "power_limit_kw": s.power_limit_kw,
            "floor_racks": s.floor_racks, "emissions_t_per_year": s.emissions_t_per_year,
            "upfront_capex_usd": s.upfront_capex_usd, "total_cost_usd_per_year": s.total_cost_usd_per_year,
        }
        row.update({f"served_{w}_tok_s": v for w, v in s.served_tok_s.items()})
        row.update({f"cost_{c}_usd_per_year": v for c, v in s.cost_usd_per_year.items()})
        if tenure_columns:
            row.update({"tenure": s.tenure or "", "built_kw": s.built_kw})
        rows.append(row)
    return pd.DataFrame(rows)


def _records(rows: list[PlanRecord], model: type[PlanRecord]) -> pd.DataFrame:
    return pd.DataFrame([r.model_dump() for r in rows], columns=list(model.model_fields))


def plan_frames(plan: Plan) -> dict[str, pd.DataFrame]:
    """`Plan.frames()`: the plan folder's tables as DataFrames, in the order the folder writes them."""
    frames = {"sites": _site_rows(plan), "assignments": _records(plan.assignments, Assignment),
              "jobs": _records(plan.jobs, JobPlacement)}
    if plan.clock:
        for name, rows, model in (("hourly", plan.hourly, HourLine), ("dispatch", plan.dispatch, DispatchLine),
                                  ("backfill", plan.backfill, BackfillLine), ("rentals", plan.rentals, RentalLine),
                                  ("rent_assignments", plan.rent_assignments, Assignment)):
            frames[name] = _records(rows, model)
        if plan.routing:  # routing per hour (docs/clock.md); a plan routed by the day has no routing.csv
            frames["routing"] = _records(plan.routing, RouteLine)
    return frames


def write_plan_files(plan: Plan, scenario: Scenario, folder: Path) -> None:
    """The files of a plan folder, less the manifest, into `folder` (which dcplace is staging)."""
    tmp = Path(folder)
    tmp.mkdir(parents=True, exist_ok=True)
    if scenario.overrides and "overrides" not in plan.provenance:
        # a variant says what it is: the overrides (--set, a sweep member's, the file's own) that
        # made it from its scenario file; plan.json and inputs/provenance.json carry the same
        plan = plan.model_copy(update={"provenance": {**plan.provenance, "overrides": dict(scenario.overrides)}})
    (tmp / "plan.json").write_text(plan.model_dump_json(indent=2))
    # The CSVs are for people (spreadsheets): a name a spreadsheet would run as a formula gets
    # a leading ' (models.csvtext); plan.json and inputs/ keep every value exactly.
    for name, frame in plan_frames(plan).items():
        write_spreadsheet_csv(frame, tmp / f"{name}.csv")
    write_scenario(scenario, tmp / "inputs")
    (tmp / "inputs" / "provenance.json").write_text(json.dumps(plan.provenance, indent=2, sort_keys=True))


def write_plan_folder(plan: Plan, scenario: Scenario, out_dir: str | Path, verify: Callable[[Path], None] | None = None) -> Path:
    """Write the plan folder whole or not at all; it replaces only a plan folder dcplace
    wrote (models.outputs: anything else raises OutputRefused before any work).

    `verify(staged_folder)` runs on the complete folder before it is moved into place; if it
    raises, nothing is left behind.
    """
    with staged_folder(out_dir, "plan") as tmp:
        write_plan_files(plan, scenario, tmp)
        write_manifest(tmp, plan.scenario_hash)  # the last file: it lists every other one
        if verify is not None:
            verify(tmp)
    return check_destination(out_dir, "plan")


MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT_VERSION = 1


def write_manifest(folder: str | Path, scenario_hash: str) -> dict[str, Any]:
    """Write `folder`/manifest.json: every file of the plan folder (path relative to the
    folder, '/'-separated) with its SHA-256 and size, `inputs_sha256` (SHA-256 of the sorted
    lines "<path relative to inputs/> <sha256>\\n" over the files in inputs/), the scenario
    hash and the format version (docs/plan-format.md). manifest.json itself and the folder
    marker (models.outputs.MARKER, written at the move into place) are not listed."""
    import hashlib

    from dcplace.models.outputs import MARKER

    folder = Path(folder)
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel in (MANIFEST_NAME, MARKER):
            continue
        data = path.read_bytes()
        files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    inputs = sorted((rel.removeprefix("inputs/"), v["sha256"]) for rel, v in files.items() if rel.startswith("inputs/"))
    doc = {
        "format_version": MANIFEST_FORMAT_VERSION,
        "algorithm": "sha256",
        "scenario_hash": scenario_hash,
        "inputs_sha256": hashlib.sha256("".join(f"{rel} {digest}\n" for rel, digest in inputs).encode("utf-8")).hexdigest(),
        "files": files,
    }
    (folder / MANIFEST_NAME).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return doc


def plan_json_edited(folder: str | Path) -> bool:
    """Whether `folder`/plan.json is not the file write_manifest recorded (its SHA-256 differs);
    False when there is no manifest or plan.json to compare."""
    import hashlib

    folder = Path(folder)
    try:
        recorded = json.loads((folder / MANIFEST_NAME).read_text())["files"]["plan.json"]["sha256"]
        return hashlib.sha256((folder / "plan.json").read_bytes()).hexdigest() != recorded
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return False


def manifest_removed(folder: str | Path) -> bool:
    """Whether `folder` was written with a manifest.json that is gone: its marker (written at the
    move into place) lists the file. A folder from before manifests has none in its list."""
    from dcplace.models.outputs import read_marker

    marker = read_marker(Path(folder)) or {}
    return MANIFEST_NAME in marker.get("files", []) and not (Path(folder) / MANIFEST_NAME).is_file()


class PlanFileError(ValueError):
    """A folder's plan.json cannot be read as a plan: the message names the file, the record and
    the field, and says what would fix it."""

    def __init__(self, path: Path, problem: str):
        self.path = path
        super().__init__(f"{path}: {problem} Fix: restore plan.json as `dcplace solve` wrote it, or solve again; "
                         f"`dcplace check {path.parent}` lists every problem of the folder.")


def read_plan(folder: str | Path) -> Plan:
    """The Plan record of a plan folder. Raises PlanFileError when plan.json is not JSON, is of
    another format version, or breaks the plan's schema (up to three fields named)."""
    path = Path(folder) / "plan.json"
    text = path.read_text()
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PlanFileError(path, f"not readable as JSON ({type(exc).__name__}: {exc}).") from None
    version = doc.get("format_version", PLAN_FORMAT_VERSION) if isinstance(doc, dict) else PLAN_FORMAT_VERSION
    if version != PLAN_FORMAT_VERSION:
        raise PlanFileError(path, f"format_version is {version!r}; this dcplace reads plan.json version {PLAN_FORMAT_VERSION}.")
    try:
        return Plan.model_validate(doc)
    except ValidationError as exc:
        problems = [_where(doc, err["loc"]) + f": {err['msg']}" for err in exc.errors()[:3]]
        more = f" (and {exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        raise PlanFileError(path, "does not hold a plan: " + "; ".join(problems) + more + ".") from None


def _where(doc: Any, loc: tuple) -> str:
    """A validation error's location, with a list entry named by its record's id where it has one:
    sites[12] ('tokyo') -> racks[0] -> field 'racks'."""
    parts, node = [], doc
    for step in loc[:-1] if loc else ():
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and -len(node) <= step < len(node) else None
            name = next((node[k] for k in ("id", "region", "job", "name") if isinstance(node, dict) and isinstance(node.get(k), str)), None)
            entry = f"[{step}]" + (f" ({name!r})" if name is not None else "")
            if parts:
                parts[-1] += entry
            else:
                parts.append(entry)
        else:
            node = node.get(step) if isinstance(node, dict) else None
            parts.append(str(step))
    field = f"field {loc[-1]!r}" if loc and not isinstance(loc[-1], int) else (f"entry {loc[-1]}" if loc else "the document")
    return " -> ".join(parts + [field]) if parts else field


HAS_PLAN = frozenset({"optimal", "feasible"})  # SolveRecord statuses that come with a plan
