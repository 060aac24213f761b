"""The independent plan checker.

It re-reads a plan folder (plan.json and the resolved tables in inputs/) with nothing but
pandas, yaml, json, hashlib and networkx, and verifies every hard constraint and every cost
line from first principles, then every figure the folder reports (site figures, KPIs, the
solve status against its gap and bound, the flat CSV views) and the folder's integrity
(manifest.json: every file's SHA-256, no file added or missing, one scenario hash). It
deliberately shares no code with the formulation, the index sets, the cost coefficients,
the extraction of the plan or the latency model: a bug there cannot hide itself here. Every
formula it uses is written down in docs/plan-format.md.

    report = check_plan_folder("plan/")
    report.ok, report.violations
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import networkx as nx
import pandas as pd
import yaml

REL_TOL = 1e-6
ABS_TOL = 1e-6
GAP_TOL = 1e-9  # on the relative gap: status "optimal" needs gap <= mip_gap + GAP_TOL
MANIFEST = "manifest.json"
MARKER = ".dcplace-folder.json"  # written by dcplace at the move into place (models/outputs.py)
LATER_KINDS = ("report", "export", "compare", "pareto")  # outputs other commands may write into a plan folder later
WHY_FOLDER = "why"  # ... and the analyses of `dcplace why`, in batch-kind folders under PLAN/why/
REQUIRED_FILES = (
    "plan.json", "sites.csv", "assignments.csv", "jobs.csv", "inputs/scenario.yaml", "inputs/provenance.json",
    "inputs/sites.csv", "inputs/regions.csv", "inputs/jobs.csv",
    *(f"inputs/catalog/{t}.csv" for t in ("chips", "rack_configs", "cooling", "fabrics", "workloads", "throughput")),
)
OPTIONAL_FILES = ("inputs/pair_costs.csv", "inputs/footprint.csv", "inputs/backbone.csv", "inputs/profiles.csv", "inputs/cloud_regions.csv",
                  "hourly.csv", "dispatch.csv", "backfill.csv", "rentals.csv", "rent_assignments.csv", "routing.csv")
PLAN_STATUSES = ("optimal", "feasible")  # solve.status with a plan (docs/plan-format.md)
NO_PLAN_STATUSES = ("infeasible", "unbounded", "no_solution", "error")  # ... and without one: the folder records why
DECISION_KEYS = ("sites", "assignments", "jobs", "hourly", "dispatch", "backfill", "rentals", "rent_assignments", "routing")
# The fields of plan.json's records (docs/plan-format.md): "required" and "optional" (the second may be absent).
PLAN_FIELDS = ("format_version scenario scenario_hash created_utc solve objective_usd_per_year cost_breakdown_usd_per_year "
               "kpis sites assignments jobs provenance")
PLAN_OPTIONAL = "clock hourly dispatch backfill rentals rent_assignments routing diagnosis as_is"
SOLVE_FIELDS = ("solver solver_version status termination objective_usd_per_year best_bound_usd_per_year gap build_time_s "
                "solve_time_s options model")
SOLVE_OPTIONAL = "extract_time_s warm_start pairs failover race"
SITE_FIELDS = ("id name lat lon country open role zones fabrics racks racks_total gpus it_kw facility_kw power_limit_kw "
               "floor_racks served_tok_s emissions_t_per_year upfront_capex_usd cost_usd_per_year total_cost_usd_per_year")
SITE_OPTIONAL = "tenure built_kw"
RACK_FIELDS = "config chip cooling purpose racks gpus it_kw facility_kw cost_usd_per_year"
RACK_OPTIONAL = "workload fabric"
ASSIGNMENT_FIELDS = "region region_name workload site share served_tok_s rtt_ms rtt_budget_ms"
JOB_FIELDS = "job name site fabric chip gpus_h100_equiv"
JOB_OPTIONAL = "standby_site standby_fabric standby_chip"
HOUR_FIELDS = "place kind workload hour_utc weight_h load_tok_s capacity_tok_s"
HOUR_OPTIONAL = "lent_gpus serving_gpus"
ROUTE_FIELDS = "region workload site hour_utc weight_h share served_tok_s"
DISPATCH_FIELDS = "site group chip cooling workload hour_utc serving_gpus lent_gpus"
BACKFILL_FIELDS = "job site group chip workload hour_utc weight_h gpus h100_gpu_hours_per_day"
RENTAL_FIELDS = "cloud chip kind gpus gpu_hours_per_year usd_per_year"
RENTAL_OPTIONAL = "workload job hour_utc"
CLOCK_FIELDS = ("on hours represented_hours_utc weight_h blocks_utc block_overstatement idle_power_share inference_fabric_tier "
                "routing utc_offsets_h load_share")
FAILOVER_FIELDS = "classes secure stopped rounds"
FAILOVER_OPTIONAL = ("scenarios_generated losses_in_model reroutings_in_model cuts_in_model open_sites_checked loop_s repaired "
                     "held_sites")
ROUND_FIELDS = "objective_usd_per_year solve_s losses_checked losses_broken reroutings_added unserved_tok_s"
ROUND_OPTIONAL = "repaired_usd_per_year cuts_added"
ROLES = ("training", "inference", "mixed", "idle", "closed")
COST_CATEGORIES = ("site_fixed", "cooling_zones", "chips", "cooling_capex", "energy", "colocation", "self_build", "fabric",
                   "carbon", "transport", "rental")
HOURS_PER_DAY = 24
SECONDS_PER_HOUR = 3600.0
# Columns of the input tables read as text whatever they hold (an id "1" stays "1").
TEXT_COLUMNS = ("id", "name", "country", "chip", "workload", "region", "site", "from", "to",
                "cooling_allowed", "allowed_countries", "eligible_chips", "config", "cooling", "fabric")
# The plan's CSVs are for spreadsheets: text that a spreadsheet would run as a formula (it
# starts with = + - @, tab or CR, after any quotes) carries one more leading ' there (OWASP;
# docs/plan-format.md), while plan.json keeps it exact. Written out here, not imported: the
# checker shares no code with what it checks.
SPREADSHEET_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """How a plan CSV shows the text `text` (plan.json's value)."""
    return "'" + text if text.lstrip("'").startswith(SPREADSHEET_FORMULA_START) else text


@dataclass(frozen=True)
class Violation:
    family: str
    message: str

    def __str__(self) -> str:
        return f"[{self.family}] {self.message}"


@dataclass
class CheckReport:
    """What the independent checker found in a plan folder: `ok`, the families `checked`, every
    `violations` entry (family and message), and the cost it recomputed from the plan's inputs."""

    folder: str
    checked: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    recomputed_cost_usd_per_year: float = 0.0
    status: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations

    def families_violated(self) -> set[str]:
        return {v.family for v in self.violations}


def _close(a: float, b: float, rel: float = REL_TOL, abs_: float = ABS_TOL) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def _list(cell) -> list[str]:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [p.strip() for p in str(cell).split(";") if p.strip()]


def _text(cell) -> str:
    """A text cell as written, "" for an empty one (NaN as pandas reads it, None in plan.json)."""
    return ";".join(_list(cell))


class _Inputs:
    """The resolved scenario of a plan folder, read as plain tables."""

    def __init__(self, folder: Path):
        spec = yaml.safe_load((folder / "scenario.yaml").read_text())
        if not isinstance(spec, dict):
            raise ValueError("inputs/scenario.yaml is empty or not a YAML mapping")
        missing = [key for key in ("economics", "latency", "policies", "sites", "regions") if key not in spec]
        if missing:
            raise ValueError(f"inputs/scenario.yaml lacks {', '.join(repr(k) for k in missing)}")
        self.spec = spec
        self.name = spec.get("name")
        self.economics = spec["economics"]
        self.latency = spec["latency"]
        self.policies = spec["policies"]

        def path(name: str) -> Path:
            target = (folder / name).resolve()
            if folder.resolve() not in target.parents:
                raise ValueError(f"inputs/scenario.yaml names {name!r}, outside inputs/")
            return target

        def read(name: str) -> pd.DataFrame:
            return pd.read_csv(path(name), keep_default_na=False, na_values=[""], dtype={c: str for c in TEXT_COLUMNS})

        catalog = spec.get("catalog") or "catalog"
        # every table's rows as read, by the name check_inputs gives it: (file under inputs/, rows)
        self.tables: dict[str, tuple[str, list[dict]]] = {}

        def rows(table: str, name: str) -> list[dict]:
            records = read(name).to_dict("records")
            self.tables[table] = (name, records)
            return records

        self.sites = {r["id"]: r for r in rows("sites", spec["sites"])}
        self.regions = {r["id"]: r for r in rows("regions", spec["regions"])}
        self.jobs = {r["id"]: r for r in rows("jobs", spec["jobs"])} if spec.get("jobs") else {}
        self.chips = {r["id"]: r for r in rows("chips", f"{catalog}/chips.csv")}
        self.racks = {r["id"]: r for r in rows("rack_configs", f"{catalog}/rack_configs.csv")}
        self.cooling = {r["id"]: r for r in rows("cooling", f"{catalog}/cooling.csv")}
        self.fabrics = {r["id"]: r for r in rows("fabrics", f"{catalog}/fabrics.csv")}
        self.workloads = {r["id"]: r for r in rows("workloads", f"{catalog}/workloads.csv")}
        self.tok_s = {(r["chip"], r["workload"]): r["tok_s_per_gpu"] for r in rows("throughput", f"{catalog}/throughput.csv")}
        self.backbone = None
        if self.latency.get("backbone"):
            self.backbone = read(self.latency["backbone"])
            self.tables["backbone"] = (self.latency["backbone"], self.backbone.to_dict("records"))
        self.clock = spec.get("clock") or {"hours": 0}  # docs/clock.md; folders from before the clock have none
        self.profiles = rows("profiles", spec["profiles"]) if spec.get("profiles") else []
        self.clouds = {r["id"]: r for r in rows("cloud_regions", spec["cloud_regions"])} if spec.get("cloud_regions") else {}
        self.pair_costs = {}
        if spec.get("pair_costs"):
            self.pair_costs = {(r["region"], r["workload"], r["site"]): r["usd_per_year"] for r in rows("pair_costs", spec["pair_costs"])}
        # today's racks, held fixed (the as-is baseline, docs/as-is.md): (site, config, cooling, class or fabric) -> racks
        self.footprint = {(r["site"], r["config"], r["cooling"], _text(r.get("workload")), _text(r.get("fabric"))): int(r["racks"])
                          for r in rows("footprint", spec["footprint"])} if spec.get("footprint") else {}

    def gpus_per_rack(self, k: str) -> int:
        rack = self.racks[k]
        return int(rack["gpus_per_server"]) * int(rack["servers_per_rack"])

    def kw_per_rack(self, k: str) -> float:
        rack = self.racks[k]
        return rack["servers_per_rack"] * rack["server_kw"] + rack["rack_overhead_kw"]

    def pue(self, s: str, c: str) -> float:
        return 1.0 + (self.cooling[c]["pue"] - 1.0) * self.sites[s]["pue_climate_factor"]

    def demand(self, r: str, w: str) -> float:
        value = self.regions[r].get(f"demand_{w}_tok_s")
        return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)

    @property
    def clock_on(self) -> bool:
        return int(self.clock.get("hours") or 0) > 0

    def interruptible(self, j: str) -> bool:
        value = self.jobs[j].get("interruptible")
        return self.clock_on and (value is True or str(value).strip().lower() in ("true", "1", "yes"))

    def daily_h100_hours(self, j: str) -> float:
        value = self.jobs[j].get("gpu_hours_per_day")
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return float(self.jobs[j]["gpus_h100_equiv"]) * HOURS_PER_DAY
        return float(value)

    def tok_s_at_target(self, chip: str, w: str) -> float:
        tok = self.tok_s.get((chip, w))
        return 0.0 if tok is None else tok * self.economics["inference_target_utilization"]

    def group_of(self, k: str) -> str:
        """Dispatch group of a rack config: its chip, unless the chip's configs differ in kW per GPU."""
        chip = self.racks[k]["chip"]
        per_gpu = {round(self.kw_per_rack(c) / self.gpus_per_rack(c), 9) for c, r in self.racks.items() if r["chip"] == chip}
        return chip if len(per_gpu) == 1 else k

    def kw_per_gpu_of_group(self, g: str) -> float:
        k = g if g in self.racks else next(c for c, r in self.racks.items() if r["chip"] == g)
        return self.kw_per_rack(k) / self.gpus_per_rack(k)


def _haversine_km(lat1, lon1, lat2, lon2) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(min(1.0, math.sqrt(a)))


def _sha256_file(path: Path) -> tuple[str, int]:
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), len(data)


def inputs_digest(folder: str | Path) -> str:
    """SHA-256 of the sorted lines "<path relative to inputs/> <sha256 of the file>\\n" over
    every file under `folder`/inputs (the manifest's `inputs_sha256`; docs/plan-format.md)."""
    inputs = Path(folder) / "inputs"
    rows = sorted((p.relative_to(inputs).as_posix(), _sha256_file(p)[0]) for p in inputs.rglob("*") if p.is_file())
    return hashlib.sha256("".join(f"{rel} {digest}\n" for rel, digest in rows).encode("utf-8")).hexdigest()


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ------------------------------------------------------------------ the inputs' rules
#
# The ranges `dcplace validate` holds every input to (models/records.py, models/clock_inputs.py),
# written again here so that the checker never recomputes a plan from inputs dcplace would refuse:
# (field, low, high, flags): flags "g" low excluded (> low), "l" high excluded, "i" a whole number,
# "o" optional (a blank cell or a missing key is allowed). None: no bound on that side.

INF = None
SITE_RULES = (("lat", -90, 90, ""), ("lon", -180, 180, ""), ("power_price_usd_per_mwh", 0, 2000, ""),
              ("grid_carbon_g_per_kwh", 0, 2000, ""), ("power_limit_kw", 0, INF, "g"), ("floor_racks", 0, INF, "i"),
              ("fixed_cost_usd_per_year", 0, INF, ""), ("colocation_usd_per_kw_month", 0, INF, ""),
              ("pue_climate_factor", 0, 3, "go"), ("build_usd_per_mw", 1e5, INF, "o"), ("power_from_year", 1900, 2200, "io"))
REGION_RULES = (("lat", -90, 90, ""), ("lon", -180, 180, ""), ("population", 0, INF, "io"), ("utc_offset_h", -12, 14, "o"))
CHIP_RULES = (("capex_usd_per_gpu", 0, INF, ""), ("life_years", 0, 30, "g"), ("h100_equiv", 0, 100, ""),
              ("available_from_year", 1900, 2200, "io"))
RACK_RULES = (("gpus_per_server", 0, INF, "gi"), ("servers_per_rack", 0, INF, "gi"), ("server_kw", 0, 200, "g"),
              ("rack_overhead_kw", 0, 100, "o"))
COOLING_RULES = (("max_kw_per_rack", 0, 1000, "g"), ("pue", 1, 3, ""), ("capex_usd_per_kw", 0, INF, ""), ("life_years", 0, 50, "g"),
                 ("zone_fixed_usd_per_year", 0, INF, ""), ("ready_usd_per_kw", 0, 20000, "o"), ("retrofit_usd_per_kw", 0, 20000, "o"))
FABRIC_RULES = (("tier", 0, INF, "i"), ("cost_usd_per_gpu", 0, INF, ""), ("life_years", 0, 30, "g"),
                ("training_efficiency", 0, 1, "g"), ("max_cluster_gpus", 0, INF, "gi"))
WORKLOAD_RULES = (("load_factor", 0, 1, "g"),)
THROUGHPUT_RULES = (("tok_s_per_gpu", 0, INF, "g"),)
JOB_RULES = (("gpus_h100_equiv", 0, INF, "g"), ("min_fabric_tier", 0, INF, "io"), ("gpu_hours_per_day", 0, INF, "go"),
             ("from_year", 1900, 2200, "io"), ("to_year", 1900, 2200, "io"))
PROFILE_RULES = (("local_hour", 0, 23, "i"), ("load", 0, 1, ""))
CLOUD_RULES = (("lat", -90, 90, ""), ("lon", -180, 180, ""), ("usd_per_gpu_hour_on_demand", 0, 1000, "go"),
               ("usd_per_gpu_hour_reserved", 0, 1000, "go"), ("cap_gpus", 0, INF, "go"), ("fabric_tier", 0, INF, "io"))
PAIR_COST_RULES = (("usd_per_year", 0, INF, ""),)
FOOTPRINT_RULES = (("racks", 1, INF, "i"),)
BACKBONE_RULES = (("km", 0, INF, ""),)
TABLE_RULES = {"sites": SITE_RULES, "regions": REGION_RULES, "chips": CHIP_RULES, "rack_configs": RACK_RULES,
               "cooling": COOLING_RULES, "fabrics": FABRIC_RULES, "workloads": WORKLOAD_RULES, "throughput": THROUGHPUT_RULES,
               "jobs": JOB_RULES, "profiles": PROFILE_RULES, "cloud_regions": CLOUD_RULES, "pair_costs": PAIR_COST_RULES,
               "backbone": BACKBONE_RULES, "footprint": FOOTPRINT_RULES}
SECTION_RULES = {
    "economics": (("discount_rate", 0, 1, ""), ("training_load_factor", 0, 1, "g"), ("inference_target_utilization", 0, 1, "g"),
                  ("carbon_price_usd_per_t", 0, INF, ""), ("transport_usd_per_tok_s_1000km_year", 0, INF, ""),
                  ("hours_per_year", 0, 8784, "g"), ("build_usd_per_mw", 1e5, INF, "o"), ("build_om_share_per_year", 0, 0.5, "o"),
                  ("build_life_years", 0, 100, "go"), ("min_campus_mw", 0, INF, "o"), ("campus_fixed_usd_per_year", 0, INF, "o")),
    "latency": (("route_factor", 1, 5, ""), ("fiber_km_per_ms", 0, 300, "g"), ("overhead_ms", 0, INF, "")),
    "policies": (("max_share_per_site", 0, 1, "g"), ("carbon_cap_t_per_year", 0, INF, "o"), ("capex_budget_usd", 0, INF, "o"),
                 ("min_sites", 0, INF, "io"), ("max_sites", 1, INF, "io"), ("site_outage_days", 0, 365, "go"),
                 ("standby_resume_days", 0, 365, "o")),
    "clock": (("hours", 0, 24, "io"), ("idle_power_share", 0, 1, "o"), ("inference_fabric_tier", 0, INF, "io")),
}
# The rules a period's derived inputs are held to instead (_InputRules, `derived`).
DERIVED = {("sites", "power_price_usd_per_mwh"): (0, INF, ""), ("jobs", "gpus_h100_equiv"): (0, INF, "")}
YES_NO = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip())


def _number_of(value) -> float:
    """The finite number a cell or YAML value holds; ValueError for text, a yes/no value, inf or NaN."""
    if type(value).__name__ in ("bool", "bool_"):
        raise ValueError("a yes/no value")
    number = float(value.strip()) if isinstance(value, str) else float(value)
    if not math.isfinite(number):
        raise ValueError("not finite")
    return number


def _rule_problem(value, low, high, flags: str) -> str | None:
    """Why `value` breaks the rule (low, high, flags), or None."""
    if _blank(value):
        return None if "o" in flags else "is missing"
    try:
        number = _number_of(value)
    except (TypeError, ValueError):
        return f"is {value!r}, not a number"
    if "i" in flags and number != int(number):
        return f"is {value!r}, not a whole number"
    if low is not None and (number <= low if "g" in flags else number < low):
        return f"is {value!r}, must be {'>' if 'g' in flags else '>='} {low:g}"
    if high is not None and (number >= high if "l" in flags else number > high):
        return f"is {value!r}, must be {'<' if 'l' in flags else '<='} {high:g}"
    return None


def _yes_no(value) -> bool | None:
    """A yes/no cell as a bool (blank: None); ValueError for anything else."""
    if _blank(value):
        return None
    if type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    text = str(value).strip().lower()
    if text in YES_NO:
        return YES_NO[text]
    raise ValueError(value)


class _InputRules:
    """What `dcplace validate` refuses in a folder's inputs/ (models/records.py, models/clock_inputs.py; the rules
    written again above): every number the checkers recompute from outside its range, ids missing, repeated or
    unknown where another table names them, a daily profile without each of its 24 hours or not peaking at 1.
    `derived`: the inputs of one period of a schedule, derived from the schedule's (whose own inputs are held to
    every rule): a power price times the period's factor and a job's GPUs times its training multiplier may leave
    the ranges a file's values are held to (the schedule checker verifies the derivation)."""

    def __init__(self, inp: "_Inputs", derived: bool = False):
        self.inp, self.derived = inp, derived
        self.problems: list[str] = []

    def run(self) -> list[str]:
        inp = self.inp
        spec = inp.spec

        def bad(where: str, why: str) -> None:
            self.problems.append(f"{where} {why}: `dcplace validate` refuses it, so no plan can be checked against it.")

        def label(name: str, i: int, row: dict) -> str:
            key = row.get("id")
            return f"inputs/{name} row {i + 2}" + (f" ({key})" if isinstance(key, str) and key else "")

        for table, rules in TABLE_RULES.items():
            if table not in inp.tables:
                continue
            name, rows = inp.tables[table]
            for i, row in enumerate(rows):
                for column, low, high, flags in rules:
                    if self.derived and (table, column) in DERIVED:
                        low, high, flags = DERIVED[table, column]
                    if column in row or "o" not in flags:
                        why = _rule_problem(row.get(column), low, high, flags)
                        if why:
                            bad(f"{label(name, i, row)}: {column}", why)
        for section, rules in SECTION_RULES.items():
            values = spec.get(section) or {}
            if not isinstance(values, dict):
                bad(f"inputs/scenario.yaml {section}", "is not a mapping")
                continue
            for key, low, high, flags in rules:
                why = _rule_problem(values.get(key), low, high, flags)
                if why:
                    bad(f"inputs/scenario.yaml {section}.{key}", why)
        # ids: present and unique (ids differing only by case or spaces are one id to dcplace)
        for table in ("sites", "regions", "jobs", "chips", "rack_configs", "cooling", "fabrics", "workloads", "cloud_regions"):
            if table not in inp.tables:
                continue
            name, rows = inp.tables[table]
            seen: dict[str, int] = {}
            for i, row in enumerate(rows):
                key = row.get("id")
                if not isinstance(key, str) or not key.strip():
                    bad(f"inputs/{name} row {i + 2}: id", "is missing")
                    continue
                folded = key.strip().casefold()
                if folded in seen:
                    bad(f"inputs/{name} row {i + 2}: id {key!r}", f"repeats the id of row {seen[folded] + 2}")
                seen.setdefault(folded, i)
        for q in sorted(set(inp.clouds) & set(inp.sites)):
            bad(f"inputs/cloud_regions.csv: id {q!r}", "is also a site's id")
        # references between the tables
        for i, row in enumerate(inp.tables["sites"][1]):
            where = label(inp.tables["sites"][0], i, row)
            price = row.get("power_price_usd_per_mwh")
            if _is_number(price) and 0 < price < 5 and not self.derived:
                bad(f"{where}: power_price_usd_per_mwh", f"is {price!r}, a price per kWh, not per MWh")
            allowed = _list(row.get("cooling_allowed"))
            if not allowed:
                bad(f"{where}: cooling_allowed", "is empty")
            for c in allowed:
                if c not in inp.cooling:
                    bad(f"{where}: cooling_allowed", f"names {c!r}, not a cooling type of the catalog")
        for table in ("sites", "regions", "cloud_regions"):
            if table in inp.tables:
                for i, row in enumerate(inp.tables[table][1]):
                    if not isinstance(row.get("country"), str) or len(row["country"].strip()) != 2:
                        bad(f"{label(inp.tables[table][0], i, row)}: country", f"is {row.get('country')!r}, not a two-letter code")
        for k, rack in inp.racks.items():
            if rack.get("chip") not in inp.chips:
                bad(f"inputs/catalog/rack_configs.csv ({k}): chip", f"is {rack.get('chip')!r}, not a chip of the catalog")
        name, rows = inp.tables["throughput"]
        pairs = set()
        for i, row in enumerate(rows):
            if row.get("chip") not in inp.chips or row.get("workload") not in inp.workloads:
                bad(f"inputs/{name} row {i + 2}", f"names chip {row.get('chip')!r} and class {row.get('workload')!r}, not both in the catalog")
            if (row.get("chip"), row.get("workload")) in pairs:
                bad(f"inputs/{name} row {i + 2}", f"gives {row.get('chip')} on '{row.get('workload')}' a second time")
            pairs.add((row.get("chip"), row.get("workload")))
        classes = set(inp.workloads)
        name, rows = inp.tables["regions"]
        for i, row in enumerate(rows):
            where = label(name, i, row)
            for column in row:
                for prefix, suffix in (("demand_", "_tok_s"), ("rtt_budget_", "_ms"), ("failover_rtt_", "_ms")):
                    if column.startswith(prefix) and column.endswith(suffix) and column[len(prefix):-len(suffix)] not in classes:
                        bad(f"{where}: {column}", "names a class the catalog does not have")
            for w in classes:
                why = _rule_problem(row.get(f"demand_{w}_tok_s"), 0, INF, "o")
                if why:
                    bad(f"{where}: demand_{w}_tok_s", why)
                demand = row.get(f"demand_{w}_tok_s")
                needed = "g" if not why and not _blank(demand) and _number_of(demand) > 0 else "go"
                why = _rule_problem(row.get(f"rtt_budget_{w}_ms"), 0, INF, needed)
                if why:
                    bad(f"{where}: rtt_budget_{w}_ms", why)
                why = _rule_problem(row.get(f"failover_rtt_{w}_ms"), 0, INF, "go")
                if why:
                    bad(f"{where}: failover_rtt_{w}_ms", why)
        if "jobs" in inp.tables:
            name, rows = inp.tables["jobs"]
            for i, row in enumerate(rows):
                where = label(name, i, row)
                for c in _list(row.get("eligible_chips")):
                    if c not in inp.chips:
                        bad(f"{where}: eligible_chips", f"names {c!r}, not a chip of the catalog")
                for column in ("standby_required", "interruptible"):
                    try:
                        _yes_no(row.get(column))
                    except ValueError:
                        bad(f"{where}: {column}", f"is {row.get(column)!r}, not true or false")
                if _is_number(row.get("from_year")) and _is_number(row.get("to_year")) and row["to_year"] < row["from_year"]:
                    bad(f"{where}: to_year", f"{row['to_year']!r} is before from_year {row['from_year']!r}")
        for q, cloud in inp.clouds.items():
            where = f"inputs/cloud_regions.csv ({q})"
            if cloud.get("chip") not in inp.chips:
                bad(f"{where}: chip", f"is {cloud.get('chip')!r}, not a chip of the catalog")
            if _blank(cloud.get("usd_per_gpu_hour_on_demand")) and _blank(cloud.get("usd_per_gpu_hour_reserved")):
                bad(where, "has neither an on-demand nor a reserved price")
        for (r, w, s_) in inp.pair_costs:
            if r not in inp.regions or w not in classes or s_ not in inp.sites:
                bad(f"inputs/pair_costs.csv ({r}, {w}, {s_})", "names a region, class or site that inputs/ does not have")
        self._check_profiles(bad)
        self._check_sections(bad)
        return self.problems

    def _check_profiles(self, bad) -> None:
        """Every daily profile (class, and region or every region) gives each local hour 0..23 once and peaks at 1;
        with the clock on every class with demand has one (models/clock_inputs.py)."""
        inp = self.inp
        if "profiles" not in inp.tables:
            hours_of = {}
        else:
            name, rows = inp.tables["profiles"]
            hours_of: dict[tuple, dict[int, float]] = {}
            for i, row in enumerate(rows):
                w, r = row.get("workload"), row.get("region")
                r = r.strip() if isinstance(r, str) else ""
                where = f"inputs/{name} row {i + 2}"
                if w not in inp.workloads or (r and r not in inp.regions):
                    bad(where, f"names class {w!r} and region {r!r}, not a class and region of inputs/")
                    continue
                if _rule_problem(row.get("local_hour"), 0, 23, "i") or _rule_problem(row.get("load"), 0, 1, ""):
                    continue  # reported by the table's rules
                seen = hours_of.setdefault((w, r), {})
                h = int(row["local_hour"])
                if h in seen:
                    bad(f"{where}: local_hour", f"gives hour {h} of '{w}'{' in ' + r if r else ''} a second time")
                seen[h] = float(row["load"])
            for (w, r), seen in hours_of.items():
                which = f"inputs/{name}: the profile of '{w}'" + (f" in region {r}" if r else "")
                missing = sorted(set(range(HOURS_PER_DAY)) - set(seen))
                if missing:
                    bad(which, f"has no row for hour(s) {', '.join(map(str, missing))} (a missing hour would read as no load)")
                peak = max(seen.values(), default=0.0)
                if abs(peak - 1.0) > 1e-6:
                    bad(which, f"peaks at {peak:g}, not 1 (loads are relative to the day's peak)")
        if inp.clock_on:
            for w in inp.workloads:
                demanding = [r for r in inp.regions if inp.demand(r, w) > 0]
                if demanding and (w, "") not in hours_of and not all((w, r) in hours_of for r in demanding):
                    bad(f"inputs/scenario.yaml clock.hours {inp.clock.get('hours')!r}", f"is on, but class '{w}' has no daily profile")

    def _check_sections(self, bad) -> None:
        """economics, policies and clock: yes/no values, the classes and sites they name, routing per hour's limits."""
        inp = self.inp
        eco, pol, clock = inp.economics, inp.policies, inp.clock
        for section, values, key in (("economics", eco, "self_build"), ("policies", pol, "single_purpose_sites")):
            if isinstance(values, dict) and values.get(key) is not None and not isinstance(values.get(key), bool):
                bad(f"inputs/scenario.yaml {section}.{key}", f"is {values.get(key)!r}, not true or false")
        if not isinstance(pol, dict):
            return
        for key in ("forced_sites", "forbidden_sites"):
            named = pol.get(key) or []
            if not isinstance(named, list):
                bad(f"inputs/scenario.yaml policies.{key}", f"is {named!r}, not a list of site ids")
                continue
            for s in named:
                if s not in inp.sites:
                    bad(f"inputs/scenario.yaml policies.{key}", f"names {s!r}, not a site of inputs/sites.csv")
        survive = pol.get("survive_site_loss") or {}
        if isinstance(survive, str):
            survive = _list(survive)
        if isinstance(survive, list):
            survive = {w: 1.0 for w in survive}
        if not isinstance(survive, dict):
            bad("inputs/scenario.yaml policies.survive_site_loss", f"is {survive!r}, not classes with shares")
            survive = {}
        for w, share in survive.items():
            if w not in inp.workloads:
                bad("inputs/scenario.yaml policies.survive_site_loss", f"names {w!r}, not a class of the catalog")
            why = _rule_problem(1.0 if share is True else share, 0, 1, "g")
            if why:
                bad(f"inputs/scenario.yaml policies.survive_site_loss.{w}", why)
        failover = pol.get("failover_rtt_ms") or {}
        for w, ms in (failover.items() if isinstance(failover, dict) else []):
            if w not in inp.workloads:
                bad("inputs/scenario.yaml policies.failover_rtt_ms", f"names {w!r}, not a class of the catalog")
            why = _rule_problem(ms, 0, INF, "g")
            if why:
                bad(f"inputs/scenario.yaml policies.failover_rtt_ms.{w}", why)
        if not isinstance(failover, dict):
            bad("inputs/scenario.yaml policies.failover_rtt_ms", f"is {failover!r}, not classes with round trips")
        if isinstance(clock, dict):
            routing = clock.get("routing") or "day"
            if routing not in ("day", "hour"):
                bad("inputs/scenario.yaml clock.routing", f"is {routing!r}, not 'day' or 'hour'")
            elif routing == "hour" and (not inp.clock_on or survive):
                bad("inputs/scenario.yaml clock.routing", "is 'hour' without the clock on, or with policies.survive_site_loss")
            tier = clock.get("inference_fabric_tier")
            tiers = [f["tier"] for f in inp.fabrics.values() if _is_number(f.get("tier"))]
            if inp.clock_on and _is_number(tier) and tier > max(tiers, default=0):
                bad("inputs/scenario.yaml clock.inference_fabric_tier", f"is {tier!r}, above every fabric's tier")


class PlanChecker:
    """Each `check_*` method verifies one family of constraints."""

    def __init__(self, folder: str | Path, period: bool = False):
        """`period`: the folder is a period of a schedule folder, its inputs derived from the schedule's
        (check_schedule.py verifies the derivation and holds the schedule's inputs to every rule)."""
        self.folder = Path(folder)
        self.period = period
        self.report = CheckReport(str(self.folder))
        self._paths = None
        self.plan = self._read_json("plan.json", "plan")
        if self.plan is not None and not isinstance(self.plan, dict):
            self.fail("plan", "plan.json is not a JSON object.")
            self.plan = None
        self.manifest = self._read_json(MANIFEST, "manifest") if (self.folder / MANIFEST).is_file() else None
        try:
            self.inp = _Inputs(self.folder / "inputs")
        except Exception as exc:  # a missing or unreadable table: reported, never raised
            self.inp = None
            why = str(exc) if type(exc) is ValueError else f"{type(exc).__name__}: {exc}"
            self.fail("inputs", f"inputs/ cannot be read as a scenario ({why}); the checker "
                      "needs every resolved table. Re-run `dcplace solve` to write a complete folder.")

    def _read_json(self, name: str, family: str):
        path = self.folder / name
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            self.fail(family, f"{name} is missing from {self.folder}.")
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: arrays nested deeper than Python's stack
            self.fail(family, f"{name} cannot be read as JSON ({type(exc).__name__}: {exc}).")
        return None

    def fail(self, family: str, message: str) -> None:
        self.report.violations.append(Violation(family, message))

    def lines(self):
        for site in self.plan["sites"]:
            for line in site["racks"]:
                yield site, line

    # ------------------------------------------------------------------ recomputed figures

    def _annuity(self, years: float) -> float:
        r = self.inp.economics["discount_rate"]
        return 1 / years if r == 0 else r / (1 - (1 + r) ** -years)

    def _line(self, s: str, ln: dict) -> dict:
        """Everything one rack line is, costs and emits, from the inputs and its rack count."""
        eco = self.inp.economics
        n = ln["racks"]
        kw = n * self.inp.kw_per_rack(ln["config"])
        site = self.inp.sites[s]
        chip, cool = self.inp.chips[ln["chip"]], self.inp.cooling[ln["cooling"]]
        gpus = n * self.inp.gpus_per_rack(ln["config"])
        facility_kw = kw * self.inp.pue(s, ln["cooling"])
        mwh = facility_kw * eco["hours_per_year"] * self._load_factor(ln) / 1000
        emissions = mwh * site["grid_carbon_g_per_kwh"] / 1000
        cost = {
            "chips": gpus * chip["capex_usd_per_gpu"] * self._annuity(chip["life_years"]),
            "cooling_capex": kw * cool["capex_usd_per_kw"] * self._annuity(cool["life_years"]),
            "energy": mwh * site["power_price_usd_per_mwh"],
            "colocation": kw * site["colocation_usd_per_kw_month"] * 12,
            "carbon": emissions * eco["carbon_price_usd_per_t"],
            "fabric": 0.0,
        }
        upfront = gpus * chip["capex_usd_per_gpu"] + kw * cool["capex_usd_per_kw"]
        if ln.get("fabric"):
            fab = self.inp.fabrics[ln["fabric"]]
            cost["fabric"] = gpus * fab["cost_usd_per_gpu"] * self._annuity(fab["life_years"])
            upfront += gpus * fab["cost_usd_per_gpu"]
        return {"gpus": gpus, "it_kw": kw, "facility_kw": facility_kw, "mwh": mwh, "emissions": emissions,
                "upfront": upfront, "cost": cost}

    def _build_usd_per_mw(self, s: str) -> float | None:
        """The site's build_usd_per_mw cell, else economics.build_usd_per_mw; None: it cannot self-build
        (economics.self_build false, or no cost given)."""
        if self.inp.economics.get("self_build", True) is False:
            return None
        cell = self.inp.sites[s].get("build_usd_per_mw")
        if _is_number(cell):
            return float(cell)
        value = self.inp.economics.get("build_usd_per_mw")
        return float(value) if _is_number(value) else None

    def _campus(self, site: dict) -> tuple[float, float]:
        """(self_build cost, colocation credit) of a site's self-built campus, USD per year:
        built_kw x build_usd_per_mw / 1000 x (annuity(build_life_years) + build_om_share_per_year)
        + campus_fixed_usd_per_year, and built_kw x colocation_usd_per_kw_month x 12; (0, 0) when leased."""
        if site.get("tenure") != "build":
            return 0.0, 0.0
        eco = self.inp.economics
        built = float(site.get("built_kw") or 0.0)
        per_mw = self._build_usd_per_mw(site["id"]) or 0.0
        annual_per_kw = per_mw / 1000 * (self._annuity(eco.get("build_life_years", 20.0)) + eco.get("build_om_share_per_year", 0.0))
        cost = built * annual_per_kw + eco.get("campus_fixed_usd_per_year", 0.0)
        return cost, built * self.inp.sites[site["id"]]["colocation_usd_per_kw_month"] * 12

    def _served(self, a: dict) -> float:
        return a["share"] * self.inp.demand(a["region"], a["workload"])

    def _transport(self, a: dict) -> float:
        eco = self.inp.economics
        out = 0.0
        if eco["transport_usd_per_tok_s_1000km_year"]:
            region, site = self.inp.regions[a["region"]], self.inp.sites[a["site"]]
            km = _haversine_km(region["lat"], region["lon"], site["lat"], site["lon"])  # great circle, even with a backbone
            out += self._served(a) * km / 1000 * eco["transport_usd_per_tok_s_1000km_year"]
        return out + a["share"] * self.inp.pair_costs.get((a["region"], a["workload"], a["site"]), 0.0)

    def _compare(self, family: str, where: str, field: str, reported, expected: float, abs_: float = ABS_TOL,
                 source: str = "recomputed") -> None:
        if not _is_number(reported) or not _close(float(reported), expected, abs_=abs_):
            self.fail(family, f"{where}: {field} is {reported!r} in plan.json, {source} {expected!r}.")

    def check_inputs(self) -> None:
        """inputs/ holds only what `dcplace validate` accepts (_InputRules): a plan recomputed from inputs dcplace
        refuses proves nothing, so each refusal is a violation."""
        for problem in _InputRules(self.inp, self.period).run():
            self.fail("inputs", problem)

    # ------------------------------------------------------------------ families

    def check_integrality(self) -> None:
        for site, ln in self.lines():
            n = ln["racks"]
            if not isinstance(n, int) or n <= 0:
                self.fail("integrality", f"site {site['id']}: {ln['config']} has {n} racks; a positive whole number is required.")
                continue
            if ln["gpus"] != n * self.inp.gpus_per_rack(ln["config"]):
                self.fail("integrality", f"site {site['id']}: {ln['config']} lists {ln['gpus']} GPUs for {n} racks.")
            if not _close(ln["it_kw"], n * self.inp.kw_per_rack(ln["config"])):
                self.fail("integrality", f"site {site['id']}: {ln['config']} lists {ln['it_kw']} kW IT for {n} racks.")

    def check_demand(self) -> None:
        total = defaultdict(float)
        cap = self.inp.policies["max_share_per_site"]
        for a in self.plan["assignments"] + self.plan.get("rent_assignments", []):
            total[a["region"], a["workload"]] += a["share"]
            if a["share"] < -ABS_TOL or a["share"] > cap + ABS_TOL:
                self.fail("demand", f"region {a['region']} {a['workload']}: share {a['share']} from {a['site']} outside [0, {cap}].")
            if not _close(a["served_tok_s"], a["share"] * self.inp.demand(a["region"], a["workload"]), abs_=1e-3):
                self.fail("demand", f"region {a['region']} {a['workload']}: served tok/s does not equal share x demand.")
        for r in self.inp.regions:
            for w in self.inp.workloads:
                if self.inp.demand(r, w) > 0 and not _close(total[r, w], 1.0):
                    self.fail("demand", f"region {r} '{w}' demand is {total[r, w] * 100:.4f}% served, not 100%.")

    def _rtt_ms(self, r: str, s: str) -> float:
        lat = self.inp.latency
        if self.inp.backbone is not None:
            if self._paths is None:
                g = nx.Graph()
                for e in self.inp.backbone.to_dict("records"):
                    if not g.has_edge(e["from"], e["to"]) or g[e["from"]][e["to"]]["km"] > e["km"]:
                        g.add_edge(e["from"], e["to"], km=e["km"])
                self._paths = dict(nx.all_pairs_dijkstra_path_length(g, weight="km"))
            km = self._paths.get(r, {}).get(s, math.inf)
        else:
            region, site = self.inp.regions[r], self.inp.sites[s]
            km = _haversine_km(region["lat"], region["lon"], site["lat"], site["lon"]) * lat["route_factor"]
        return 2 * km / lat["fiber_km_per_ms"] + lat["overhead_ms"]

    def check_latency(self) -> None:
        for a in self.plan["assignments"]:
            rtt = self._rtt_ms(a["region"], a["site"])
            budget = self.inp.regions[a["region"]][f"rtt_budget_{a['workload']}_ms"]
            if rtt > budget + 1e-6:
                self.fail("latency", f"region {a['region']} '{a['workload']}' served from {a['site']} at {rtt:.2f} ms, over its {budget:g} ms budget.")
            if not _close(rtt, a["rtt_ms"], abs_=1e-6):
                self.fail("latency", f"region {a['region']} to {a['site']}: plan says {a['rtt_ms']:.3f} ms, recomputed {rtt:.3f} ms.")

    def check_residency(self) -> None:
        for a in self.plan["assignments"]:
            allowed = _list(self.inp.regions[a["region"]].get("allowed_countries"))
            country = self.inp.sites[a["site"]]["country"]
            if allowed and country not in allowed:
                self.fail("residency", f"region {a['region']} served from {a['site']} in {country}, outside {';'.join(allowed)}.")
        for p in self.plan["jobs"]:
            allowed = _list(self.inp.jobs[p["job"]].get("allowed_countries"))
            country = self.inp.sites[p["site"]]["country"]
            if allowed and country not in allowed:
                self.fail("residency", f"job {p['job']} runs at {p['site']} in {country}, outside {';'.join(allowed)}.")

    def check_inference_capacity(self) -> None:
        if self.inp.clock_on:
            return  # sized hour by hour instead: check_clock
        util = self.inp.economics["inference_target_utilization"]
        capacity = defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] != "inference":
                continue
            tok = self.inp.tok_s.get((ln["chip"], ln["workload"]))
            if tok is None:
                self.fail("inference_capacity", f"site {site['id']}: chip {ln['chip']} cannot serve '{ln['workload']}'.")
                continue
            capacity[site["id"], ln["workload"]] += ln["racks"] * self.inp.gpus_per_rack(ln["config"]) * tok * util
        served = defaultdict(float)
        for a in self.plan["assignments"]:
            served[a["site"], a["workload"]] += a["share"] * self.inp.demand(a["region"], a["workload"])
        for (s, w), need in served.items():
            if need > capacity[s, w] * (1 + REL_TOL) + 1e-3:
                self.fail("inference_capacity", f"site {s} serves {need:,.1f} tok/s of '{w}' with capacity {capacity[s, w]:,.1f}.")

    def check_density(self) -> None:
        for site in self.plan["sites"]:
            allowed = _list(self.inp.sites[site["id"]]["cooling_allowed"]) if site["id"] in self.inp.sites else []
            for c in site["zones"]:
                if c not in allowed or site["zones"].count(c) > 1:
                    self.fail("density", f"site {site['id']}: a {c} zone is built {site['zones'].count(c)} time(s) where the site "
                              f"allows {';'.join(allowed)}, once each.")
        for site, ln in self.lines():
            s, c, k = site["id"], ln["cooling"], ln["config"]
            if self.inp.racks[k]["chip"] != ln["chip"]:
                self.fail("density", f"site {s}: config {k} is listed with chip {ln['chip']}.")
            if c not in _list(self.inp.sites[s]["cooling_allowed"]):
                self.fail("density", f"site {s}: cooling {c} is not allowed there.")
            if self.inp.kw_per_rack(k) > self.inp.cooling[c]["max_kw_per_rack"] + 1e-9:
                self.fail("density", f"site {s}: {k} at {self.inp.kw_per_rack(k):g} kW/rack in a {c} zone rated {self.inp.cooling[c]['max_kw_per_rack']:g} kW.")
            if c not in site["zones"]:
                self.fail("density", f"site {s}: racks in a {c} zone that was not built.")

    def check_power_and_space(self) -> None:
        for site in self.plan["sites"]:
            s = site["id"]
            inp = self.inp.sites[s]
            kw = sum(ln["racks"] * self.inp.kw_per_rack(ln["config"]) * self.inp.pue(s, ln["cooling"]) for ln in site["racks"])
            racks = sum(ln["racks"] for ln in site["racks"])
            if kw > inp["power_limit_kw"] * (1 + REL_TOL):
                self.fail("power", f"site {s} draws {kw:,.1f} kW facility power over its {inp['power_limit_kw']:,.1f} kW limit.")
            if racks > inp["floor_racks"]:
                self.fail("space", f"site {s} holds {racks} racks on {inp['floor_racks']} rack positions.")
            if (racks or site["zones"]) and not site["open"]:
                self.fail("open", f"site {s} has racks or zones but is not open.")
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        for a in self.plan["assignments"]:
            if a["site"] not in open_sites:
                self.fail("open", f"region {a['region']} served from closed site {a['site']}.")

    def check_training(self) -> None:
        placed = defaultdict(list)
        for p in self.plan["jobs"]:
            placed[p["job"]].append(p)
        need = defaultdict(float)
        rented = defaultdict(int)
        for ln in self.plan.get("rentals", []):
            if ln["kind"] == "training":
                rented[ln["job"]] += 1
        for j, job in self.inp.jobs.items():
            if len(placed[j]) + rented[j] != 1:
                if self.inp.interruptible(j) and len(placed[j]) + rented[j] == 0:
                    continue  # runs in the troughs: check_clock counts its GPU-hours
                self.fail("training", f"job {j} is placed {len(placed[j])} times and rented {rented[j]} times; exactly once is required.")
                continue
            if rented[j]:
                continue  # on rented GPUs: check_clock verifies the rental
            p = placed[j][0]
            chip, fabric = self.inp.chips[p["chip"]], self.inp.fabrics[p["fabric"]]
            eligible = _list(job.get("eligible_chips"))
            if chip["h100_equiv"] <= 0 or (eligible and p["chip"] not in eligible):
                self.fail("training", f"job {j} runs on chip {p['chip']}, which is not eligible.")
            if fabric["tier"] < job["min_fabric_tier"]:
                self.fail("training", f"job {j} runs on fabric {p['fabric']} (tier {fabric['tier']}) below its minimum tier {job['min_fabric_tier']}.")
            physical = job["gpus_h100_equiv"] / (fabric["training_efficiency"] * chip["h100_equiv"]) if chip["h100_equiv"] > 0 else math.inf
            if physical > fabric["max_cluster_gpus"] + 1e-9:
                self.fail("training", f"job {j} needs {physical:,.0f} GPUs, beyond fabric {p['fabric']}'s {fabric['max_cluster_gpus']:,} GPU limit.")
            need[p["site"], p["fabric"], p["chip"]] += job["gpus_h100_equiv"]
        have = defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] == "training":
                eff = self.inp.fabrics[ln["fabric"]]["training_efficiency"]
                have[site["id"], ln["fabric"], ln["chip"]] += eff * self.inp.chips[ln["chip"]]["h100_equiv"] * ln["gpus"]
        for key, n in need.items():
            if n > have[key] * (1 + REL_TOL) + 1e-6:
                self.fail("training", f"site {key[0]} runs {n:,.0f} H100-eq of jobs on {key[1]}/{key[2]} with {have[key]:,.1f} H100-eq installed.")

    def check_self_build(self) -> None:
        """Tenure per site: none where no build cost is given, else lease (built_kw 0) or build, an open site whose
        built_kw is at least economics.min_campus_mw x 1000 and at most its training racks' IT kW."""
        min_kw = float(self.inp.economics.get("min_campus_mw") or 0.0) * 1000
        for site in self.plan["sites"]:
            s, tenure, built = site["id"], site.get("tenure"), site.get("built_kw")
            can = self._build_usd_per_mw(s) is not None
            if tenure is None:
                if can:
                    self.fail("self_build", f"site {s} has a build cost but no tenure (lease or build) in plan.json.")
                if built:
                    self.fail("self_build", f"site {s} lists built_kw {built} but no tenure.")
                continue
            if not can:
                self.fail("self_build", f"site {s} is '{tenure}' but neither inputs/sites.csv nor economics gives it a build cost.")
                continue
            if tenure not in ("lease", "build") or not _is_number(built):
                self.fail("self_build", f"site {s}: tenure {tenure!r} with built_kw {built!r}; lease or build with a number is required.")
                continue
            if tenure == "lease":
                if abs(built) > ABS_TOL:
                    self.fail("self_build", f"site {s} leases but lists {built:,.1f} kW self-built.")
                continue
            training_kw = sum(ln["racks"] * self.inp.kw_per_rack(ln["config"]) for ln in site["racks"] if ln["purpose"] == "training")
            if not site["open"]:
                self.fail("self_build", f"site {s} self-builds a campus but is not open.")
            if built > training_kw * (1 + REL_TOL) + 1e-6:
                self.fail("self_build", f"site {s} self-builds {built:,.1f} kW, more than the {training_kw:,.1f} kW IT of its training racks.")
            if built < min_kw * (1 - REL_TOL) - 1e-6:
                self.fail("self_build", f"site {s} self-builds {built:,.1f} kW, below the minimum campus of {min_kw:,.1f} kW "
                          "(economics.min_campus_mw).")

    def check_policies(self) -> None:
        pol = self.inp.policies
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        for s in pol.get("forced_sites") or []:
            if s not in open_sites:
                self.fail("policy", f"forced site {s} is not open.")
        for s in pol.get("forbidden_sites") or []:
            if s in open_sites:
                self.fail("policy", f"forbidden site {s} is open.")
        if pol.get("min_sites") and len(open_sites) < pol["min_sites"]:
            self.fail("policy", f"{len(open_sites)} sites open, fewer than min_sites {pol['min_sites']}.")
        if pol.get("max_sites") is not None and len(open_sites) > pol["max_sites"]:
            self.fail("policy", f"{len(open_sites)} sites open, more than max_sites {pol['max_sites']}.")
        if pol.get("single_purpose_sites"):
            for site in self.plan["sites"]:
                if len({ln["purpose"] for ln in site["racks"]}) > 1:
                    self.fail("policy", f"site {site['id']} hosts both training and inference under single_purpose_sites.")
        emitted = sum(b["t"] for b in self._busy_energy().values())
        capex = 0.0
        for site, ln in self.lines():
            line = self._line(site["id"], ln)
            emitted += line["emissions"]
            capex += line["upfront"]
        if pol.get("carbon_cap_t_per_year") is not None and emitted > pol["carbon_cap_t_per_year"] * (1 + REL_TOL):
            self.fail("policy", f"emissions {emitted:,.0f} t/yr exceed the carbon cap {pol['carbon_cap_t_per_year']:,.0f} t/yr.")
        if pol.get("capex_budget_usd") is not None and capex > pol["capex_budget_usd"] * (1 + REL_TOL):
            self.fail("policy", f"upfront capex ${capex:,.0f} exceeds the budget ${pol['capex_budget_usd']:,.0f}.")

    def check_footprint(self) -> None:
        """With today's footprint (inputs/footprint.csv, the as-is baseline): the open sites are its sites and
        every site's racks are its racks, line for line; plan.json says it is an as-is plan."""
        held = self.inp.footprint
        if not held:
            if self.plan.get("as_is"):
                self.fail("footprint", "plan.json says it is an as-is plan, but inputs/ holds no footprint.")
            return
        if not self.plan.get("as_is"):
            self.fail("footprint", "inputs/ holds today's footprint, but plan.json does not say it is an as-is plan (as_is).")
        built = {}
        for site, ln in self.lines():
            key = (site["id"], ln["config"], ln["cooling"], _text(ln.get("workload")), _text(ln.get("fabric")))
            built[key] = built.get(key, 0) + int(ln["racks"])
        for key in sorted(set(held) | set(built)):
            if held.get(key, 0) != built.get(key, 0):
                self.fail("footprint", f"site {key[0]} has {built.get(key, 0)} racks of {key[1]} in {key[2]} for "
                          f"{key[3] or key[4]}; today's footprint has {held.get(key, 0)}.")
        want = {key[0] for key in held}
        for site in self.plan["sites"]:
            if bool(site["open"]) != (site["id"] in want):
                self.fail("footprint", f"site {site['id']} is {'open' if site['open'] else 'closed'}; today's footprint "
                          f"{'has' if site['id'] in want else 'does not have'} it.")

    # ------------------------------------------------------------------ resilience (docs/resilience.md)

    FAILOVER_RTT_FACTOR = 2.0  # default failover budget: twice the region's rtt_budget_<class>_ms (docs/plan-format.md)

    def _survive(self) -> dict[str, float]:
        """policies.survive_site_loss as class -> share (a list means 1 each)."""
        value = self.inp.policies.get("survive_site_loss") or {}
        if isinstance(value, str):
            value = _list(value)
        if isinstance(value, (list, tuple)):
            return {w: 1.0 for w in value}
        return {w: float(a) for w, a in value.items()}

    def _failover_budget(self, r: str, w: str) -> float:
        cell = self.inp.regions[r].get(f"failover_rtt_{w}_ms")
        if cell is not None and not (isinstance(cell, float) and math.isnan(cell)) and str(cell) != "":
            return float(cell)
        stated = (self.inp.policies.get("failover_rtt_ms") or {}).get(w)
        if stated is not None:
            return float(stated)
        return self.FAILOVER_RTT_FACTOR * float(self.inp.regions[r][f"rtt_budget_{w}_ms"])

    def check_failover(self) -> None:
        """N-1: for every open site f and every class w in policies.survive_site_loss (share a),
        a max-flow re-serves what each region loses beyond 1 - a of its demand,
        max(0, share[r,w,f] - (1 - a)) x demand, from the other sites' spare capacity
        (inference capacity of w minus what they serve) over pairs within the region's
        failover budget and allowed countries. Capacities are whole milli-tokens/s."""
        survive = self._survive()
        shortfalls: dict[tuple[str, str], tuple[float, float]] = {}  # (lost site, class) -> (tok/s short, tok/s needed)
        try:
            if survive:
                self._reroute_every_loss(survive, shortfalls)
        finally:
            self._check_failover_record(survive, shortfalls)

    def _check_failover_record(self, survive: dict[str, float], shortfalls: dict) -> None:
        """solve.failover (docs/resilience.md) against the checker's own re-routing: present exactly when the
        policy names a class; its classes the policy's; `secure` the re-routing's verdict (false needs a loss
        short by more than half the solver's own rule, 1e-6 x need + 0.001 tok/s); its rounds consistent: each a
        count of losses checked, the broken ones among them (sites of inputs/), unserved tok/s > 0 exactly when
        some broke, no broken round after one without; when secure (and not repaired) the last round broke
        none and nothing stopped the loop, when not secure the last one broke some and `stopped` says why;
        scenarios_generated the number of losses_in_model."""
        record = (self.plan.get("solve") or {}).get("failover")
        if not survive:
            if record:
                self.fail("failover", "solve.failover records an N-1 loop, but inputs/ has no policies.survive_site_loss.")
            return
        if not isinstance(record, dict) or not record:
            self.fail("failover", f"policies.survive_site_loss names {', '.join(sorted(survive))}, but solve.failover is empty: "
                      "the plan does not record its N-1 loop (classes, secure, rounds).")
            return
        classes = record.get("classes")
        if not isinstance(classes, dict) or set(classes) != set(survive) or \
                any(not _is_number(classes[w]) or not _close(float(classes[w]), a) for w, a in survive.items()):
            self.fail("failover", f"solve.failover.classes is {classes!r}; policies.survive_site_loss is {survive!r}.")
        broken = sorted(f"{f} '{w}'" for (f, w), (short, need) in shortfalls.items() if short > 1e-5 * need + 1e-2)
        # the solver's rule, halved for the whole milli-tok/s of the max-flow (a loss it found broken by a hair)
        beyond_rule = [k for k, (short, need) in shortfalls.items() if short > 0.5 * (1e-6 * need + 1e-3)]
        secure, repaired = record.get("secure"), record.get("repaired", False)
        if not isinstance(secure, bool) or not isinstance(repaired, bool):
            self.fail("failover", f"solve.failover.secure is {secure!r} (repaired {repaired!r}), not true or false.")
        elif secure and broken:
            self.fail("failover", f"solve.failover.secure is true, but the losses of {', '.join(broken)} leave demand unserved.")
        elif not secure and not beyond_rule:
            self.fail("failover", "solve.failover.secure is false, but every loss of an open site re-routes within the failover "
                      "budgets: the plan is N-1 secure.")
        stopped = record.get("stopped")
        if not isinstance(stopped, str) or (secure is True and not repaired and stopped) or (secure is False and not stopped):
            self.fail("failover", f"solve.failover.stopped is {stopped!r} with secure {secure!r}: a loop stops early only "
                      "without a secure plan of its own.")
        rounds = record.get("rounds")
        if not isinstance(rounds, list) or not rounds:
            self.fail("failover", "solve.failover.rounds is empty: the N-1 loop records at least the round of its first plan.")
            return
        clean = False
        for i, rnd in enumerate(rounds):
            where = f"solve.failover.rounds[{i}]"
            if not isinstance(rnd, dict):
                self.fail("failover", f"{where} is not a record.")
                continue
            lost, checked, unserved = rnd.get("losses_broken"), rnd.get("losses_checked"), rnd.get("unserved_tok_s")
            if not isinstance(lost, list) or any(f not in self.inp.sites for f in lost) or len(set(lost)) != len(lost):
                self.fail("failover", f"{where}.losses_broken is {lost!r}, not distinct sites of inputs/.")
                continue
            for key in ("losses_checked", "reroutings_added", "cuts_added"):
                value = rnd.get(key, 0)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    self.fail("failover", f"{where}.{key} is {value!r}, not a count.")
            if isinstance(checked, int) and len(lost) > checked:
                self.fail("failover", f"{where} breaks {len(lost)} losses of {checked} checked.")
            if not _is_number(unserved) or unserved < 0 or (unserved > 0) != bool(lost):
                self.fail("failover", f"{where}: unserved_tok_s {unserved!r} with {len(lost)} broken loss(es); demand goes "
                          "unserved exactly when a loss breaks.")
            if lost and clean:
                self.fail("failover", f"{where} breaks losses after a round that broke none: the loop ends at its first secure round.")
            clean = clean or not lost
        last = rounds[-1] if isinstance(rounds[-1], dict) else {}
        if secure is True and not repaired and last.get("losses_broken"):
            self.fail("failover", f"solve.failover.secure is true, but its last round broke {last.get('losses_broken')!r}.")
        if secure is False and not last.get("losses_broken"):
            self.fail("failover", "solve.failover.secure is false, but its last round broke no loss.")
        generated, losses = record.get("scenarios_generated"), record.get("losses_in_model")
        if losses is not None and (not isinstance(losses, list) or any(f not in self.inp.sites for f in losses)):
            self.fail("failover", f"solve.failover.losses_in_model is {losses!r}, not sites of inputs/.")
        elif generated is not None and (not isinstance(losses, list) or generated != len(set(losses))):
            self.fail("failover", f"solve.failover.scenarios_generated is {generated!r}; losses_in_model lists "
                      f"{len(set(losses)) if isinstance(losses, list) else losses!r}.")

    def _reroute_every_loss(self, survive: dict[str, float], shortfalls: dict) -> None:
        util = self.inp.economics["inference_target_utilization"]
        capacity, served = defaultdict(float), defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] == "inference" and ln["workload"] in survive:
                tok = self.inp.tok_s.get((ln["chip"], ln["workload"]), 0.0)
                capacity[site["id"], ln["workload"]] += ln["racks"] * self.inp.gpus_per_rack(ln["config"]) * tok * util
        for a in self.plan["assignments"]:
            served[a["site"], a["workload"]] += self._served(a)
        open_sites = sorted(s["id"] for s in self.plan["sites"] if s["open"])
        for f in open_sites:
            for w, share_kept in survive.items():
                need = {}
                for a in self.plan["assignments"]:
                    if a["site"] == f and a["workload"] == w:
                        lost = max(0.0, a["share"] - (1.0 - share_kept)) * self.inp.demand(a["region"], w)
                        if lost > 0:
                            need[a["region"]] = need.get(a["region"], 0.0) + lost
                if not need:
                    continue
                g = nx.DiGraph()
                for r, v in need.items():
                    g.add_edge("source", ("region", r), capacity=int(round(v * 1000)))
                    allowed = _list(self.inp.regions[r].get("allowed_countries"))
                    budget = self._failover_budget(r, w)
                    for s in open_sites:
                        spare = capacity[s, w] - served[s, w]
                        if s == f or spare <= 0 or (allowed and self.inp.sites[s]["country"] not in allowed):
                            continue
                        if self._rtt_ms(r, s) <= budget + 1e-6:
                            g.add_edge(("region", r), ("site", s))  # no capacity attribute: unbounded
                            g.add_edge(("site", s), "sink", capacity=int(math.floor(spare * 1000)))
                if "sink" in g:
                    value, flows = nx.maximum_flow(g, "source", "sink")
                else:
                    value, flows = 0, {}
                total = sum(need.values())
                short = total - value / 1000
                shortfalls[f, w] = (short, total)
                if short > 1e-5 * total + 1e-2:
                    gone = {r: v - sum(flows.get(("region", r), {}).values()) / 1000 for r, v in need.items()}
                    worst = sorted(((v, r) for r, v in gone.items() if v > 1e-3), reverse=True)[:3]
                    named = ", ".join(f"{self.inp.regions[r]['name']} {v:,.0f} tok/s" for v, r in worst)
                    self.fail("failover", f"losing site {f} leaves {short:,.1f} tok/s of '{w}' unserved within the failover "
                              f"budgets (policies.survive_site_loss {w}: {share_kept:g}): {named}.")

    def check_standby(self) -> None:
        """A job with standby_required has a standby site other than its own, with an eligible chip, a fabric of its
        tier, room for its cluster, allowed countries, and capacity beside the jobs placed there (not pooled)."""
        need, have = defaultdict(float), defaultdict(float)
        for p in self.plan["jobs"]:
            need[p["site"], p["fabric"], p["chip"]] += float(self.inp.jobs[p["job"]]["gpus_h100_equiv"])
        for p in self.plan["jobs"]:
            job = self.inp.jobs[p["job"]]
            flag = job.get("standby_required", False)
            required = flag if isinstance(flag, bool) else str(flag).strip().lower() in ("true", "1", "yes")
            if not p.get("standby_site"):
                if required:
                    self.fail("standby", f"job {p['job']} requires a standby site (jobs.csv standby_required) and has none.")
                continue
            s, f, x = p["standby_site"], p.get("standby_fabric"), p.get("standby_chip")
            if s == p["site"]:
                self.fail("standby", f"job {p['job']}: its standby site {s} is the site it runs at.")
            chip, fabric = self.inp.chips[x], self.inp.fabrics[f]
            eligible = _list(job.get("eligible_chips"))
            if chip["h100_equiv"] <= 0 or (eligible and x not in eligible) or fabric["tier"] < job["min_fabric_tier"]:
                self.fail("standby", f"job {p['job']}: standby on {f}/{x} is not an eligible fabric and chip for it.")
            elif job["gpus_h100_equiv"] / (fabric["training_efficiency"] * chip["h100_equiv"]) > fabric["max_cluster_gpus"] + 1e-9:
                self.fail("standby", f"job {p['job']}: standby fabric {f} cannot carry its cluster.")
            allowed = _list(job.get("allowed_countries"))
            if allowed and self.inp.sites[s]["country"] not in allowed:
                self.fail("standby", f"job {p['job']}: standby site {s} is outside {';'.join(allowed)}.")
            need[s, f, x] += float(job["gpus_h100_equiv"])
        for site, ln in self.lines():
            if ln["purpose"] == "training":
                have[site["id"], ln["fabric"], ln["chip"]] += (self.inp.fabrics[ln["fabric"]]["training_efficiency"]
                                                              * self.inp.chips[ln["chip"]]["h100_equiv"] * ln["gpus"])
        for key, n in need.items():
            if any(p.get("standby_site") == key[0] and p.get("standby_fabric") == key[1] and p.get("standby_chip") == key[2]
                   for p in self.plan["jobs"]) and n > have[key] * (1 + REL_TOL) + 1e-6:
                self.fail("standby", f"site {key[0]} holds {n:,.0f} H100-eq of jobs and standbys on {key[1]}/{key[2]} "
                          f"with {have[key]:,.1f} H100-eq installed.")

    # ------------------------------------------------------------------ the clock (docs/clock.md)

    def _blocks(self) -> dict[int, list[int]]:
        """Represented UTC hour -> the hours it stands for, as plan.json records them (check_clock verifies them);
        read once (callers only read it)."""
        if "_blocks_read" not in self.__dict__:
            if not self.inp.clock_on:
                blocks = {0: list(range(HOURS_PER_DAY))}
            else:
                blocks = {int(h): [int(x) for x in hours] for h, hours in (self.plan.get("clock") or {}).get("blocks_utc", {}).items()}
            self.__dict__["_blocks_read"] = blocks
        return self.__dict__["_blocks_read"]

    def _offset_h(self, r: str) -> float:
        given = self.inp.regions[r].get("utc_offset_h")
        if given is not None and not (isinstance(given, float) and math.isnan(given)):
            return float(given)
        return float(self.plan["clock"]["utc_offsets_h"][r]["offset_h"])

    def _local_profile(self, w: str, r: str) -> list[float]:
        """The region's own profile of class w, else the class's (check_inputs holds each to 24 hours peaking at 1)."""
        if "_profile_rows" not in self.__dict__:
            grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
            for p in self.inp.profiles:
                region = p.get("region")
                grouped[p["workload"], region if isinstance(region, str) else ""].append(p)
            self.__dict__["_profile_rows"] = grouped
        grouped = self.__dict__["_profile_rows"]
        rows = grouped.get((w, r)) or grouped.get((w, ""), [])
        out = [0.0] * HOURS_PER_DAY
        for p in rows:
            out[int(p["local_hour"])] = float(p["load"])
        return out

    def _p(self, r: str, w: str, h: int) -> float:
        """Region r's class-w load at represented hour h relative to its peak: the largest, over
        the UTC hours h stands for, of its local profile read at utc + offset (linear between hours)."""
        if not self.inp.clock_on:
            return 1.0
        key = (r, w)
        cache = self.__dict__.setdefault("_p_cache", {})
        if key not in cache:
            utc = self._utc(r, w)
            cache[key] = {b: max(utc[x] for x in hours) for b, hours in self._blocks().items()}
        return cache[key][h]

    def _utc(self, r: str, w: str) -> list[float]:
        """Region r's class-w load at each UTC hour 0..23 relative to its peak: its local profile at utc + offset,
        linear between whole hours."""
        cache = self.__dict__.setdefault("_utc_cache", {})
        if (r, w) not in cache:
            local, offset = self._local_profile(w, r), self._offset_h(r)
            out = []
            for utc in range(HOURS_PER_DAY):
                t = (utc + offset) % HOURS_PER_DAY
                lo = math.floor(t)
                frac = t - lo
                out.append(local[lo % HOURS_PER_DAY] * (1 - frac) + local[(lo + 1) % HOURS_PER_DAY] * frac)
            cache[r, w] = out
        return cache[r, w]

    def _day_load(self, r: str, w: str) -> float:
        """Token-hours a day of (r, w) at share 1: demand x sum over represented hours of weight x p."""
        return self.inp.demand(r, w) * sum(len(hours) * self._p(r, w, h) for h, hours in self._blocks().items())

    def _busy_energy(self) -> dict[str, dict[str, float]]:
        """Site -> MWh a year of GPUs busy serving and lent to training, above the racks' idle share, and their t CO2."""
        if "_busy" in self.__dict__:
            return self.__dict__["_busy"]
        out: dict[str, dict[str, float]] = {}
        if self.inp.clock_on:
            days = self.inp.economics["hours_per_year"] / HOURS_PER_DAY
            idle = float(self.inp.clock["idle_power_share"])
            blocks = self._blocks()
            for d in self.plan.get("dispatch", []):
                s = d["site"]
                kw = self.inp.kw_per_gpu_of_group(d["group"]) * self.inp.pue(s, d["cooling"]) * (1 - idle)
                hours = len(blocks.get(int(d["hour_utc"]), [])) * days
                entry = out.setdefault(s, {"serving_mwh": 0.0, "lent_mwh": 0.0, "t": 0.0})
                entry["serving_mwh"] += d["serving_gpus"] * kw * hours / 1000
                entry["lent_mwh"] += d["lent_gpus"] * kw * hours / 1000
            for s, entry in out.items():
                entry["t"] = (entry["serving_mwh"] + entry["lent_mwh"]) * self.inp.sites[s]["grid_carbon_g_per_kwh"] / 1000
        self.__dict__["_busy"] = out
        return out

    def _cloud_rtt_ms(self, r: str, q: str) -> float:
        lat, region, cloud = self.inp.latency, self.inp.regions[r], self.inp.clouds[q]
        km = _haversine_km(region["lat"], region["lon"], cloud["lat"], cloud["lon"]) * lat["route_factor"]
        return 2 * km / lat["fiber_km_per_ms"] + lat["overhead_ms"]

    def _rental_gpu_hours(self, ln: dict) -> float:
        hours = self.inp.economics["hours_per_year"]
        if ln["kind"] == "on_demand":
            return ln["gpus"] * len(self._blocks().get(int(ln["hour_utc"]), [])) * hours / HOURS_PER_DAY
        return ln["gpus"] * hours

    def _rental_cost(self, ln: dict) -> float:
        cloud = self.inp.clouds[ln["cloud"]]
        price = cloud["usd_per_gpu_hour_on_demand"] if ln["kind"] == "on_demand" else cloud["usd_per_gpu_hour_reserved"]
        return self._rental_gpu_hours(ln) * float(price)

    def _clock_kpis(self) -> dict[str, float]:
        hourly = self.plan.get("hourly", [])
        hours = sorted(self._blocks())
        out = {
            "rental_usd_per_year": sum(self._rental_cost(ln) for ln in self.plan.get("rentals", [])),
            "rented_gpus_peak": max((sum(ln["serving_gpus"] for ln in hourly if ln["kind"] == "rented" and ln["hour_utc"] == h) for h in hours),
                                    default=0.0),
            "trough_h100_gpu_hours_per_day": sum(b["gpus"] * len(self._blocks().get(int(b["hour_utc"]), [])) * self.inp.chips[b["chip"]]["h100_equiv"]
                                                 for b in self.plan.get("backfill", [])),
        }
        if self.inp.clock_on:
            capacity, peak = self._owned_capacity(), defaultdict(float)
            for (s, w, h), load in self._site_loads().items():
                peak[s, w] = max(peak[s, w], load)
            out["owned_capacity_tok_s"] = sum(capacity.values())
            out["owned_coincident_peak_tok_s"] = sum(peak.values())
        return out

    def _installed(self) -> dict[tuple, float]:
        """(site, group, cooling, class) -> inference GPUs installed, from the rack lines."""
        out = defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] == "inference":
                out[site["id"], self.inp.group_of(ln["config"]), ln["cooling"], ln["workload"]] += ln["gpus"]
        return out

    def _owned_capacity(self) -> dict[tuple, float]:
        out = defaultdict(float)
        for (s, g, c, w), gpus in self._installed().items():
            chip = g if g in self.inp.chips else self.inp.racks[g]["chip"]
            out[s, w] += gpus * self.inp.tok_s_at_target(chip, w)
        return out

    @property
    def _routes_by_hour(self) -> bool:
        """clock.routing 'hour' in inputs/scenario.yaml: the shares of routing.csv, one per represented hour."""
        return self.inp.clock_on and str(self.inp.clock.get("routing") or "day") == "hour"

    def _site_loads(self) -> dict[tuple, float]:
        """(site, class, represented hour) -> tok/s the assignments put there (with routing per hour, the
        hour's own shares: share x demand x p for every line of plan.json's routing); computed once."""
        if "_loads" not in self.__dict__:
            self.__dict__["_loads"] = dict(self._compute_site_loads())
        return self.__dict__["_loads"]

    def _compute_site_loads(self) -> dict[tuple, float]:
        out = defaultdict(float)
        if self._routes_by_hour:
            for ln in self.plan.get("routing", []):
                out[ln["site"], ln["workload"], int(ln["hour_utc"])] += \
                    ln["share"] * self.inp.demand(ln["region"], ln["workload"]) * self._p(ln["region"], ln["workload"], int(ln["hour_utc"]))
            return out
        for a in self.plan["assignments"]:
            for h in self._blocks():
                out[a["site"], a["workload"], h] += self._served(a) * self._p(a["region"], a["workload"], h)
        return out

    def check_clock(self) -> None:
        """Hourly serving, dispatch within installed GPUs, troughs lent to training, rentals (docs/clock.md)."""
        plan = self.plan
        if not self.inp.clock_on and not self.inp.clouds:
            for key in ("hourly", "dispatch", "backfill", "rentals", "rent_assignments"):
                if plan.get(key):
                    self.fail("clock", f"plan.json lists {key} but the scenario has neither the clock nor cloud regions.")
            return
        if self.inp.clock_on:
            self._check_day()
            self._check_rows()
            self._check_dispatch()
            self._check_backfill()
        elif plan.get("dispatch") or plan.get("backfill"):
            self.fail("clock", "plan.json lists dispatch or backfill, but the clock is off.")
        self._check_rentals()

    def _check_rows(self) -> None:
        """Each dispatch and backfill line names a known site, dispatch group (its chip's: the chip, or the config
        where the chip's configs differ in kW per GPU), the group's chip, a cooling type and class of inputs/ and a
        represented hour, once; a backfill line weighs its block's hours."""
        blocks = self._blocks()
        groups = {self.inp.group_of(k): r["chip"] for k, r in self.inp.racks.items()}
        for name, key in (("dispatch", ("site", "group", "cooling", "workload", "hour_utc")),
                          ("backfill", ("job", "site", "group", "workload", "hour_utc"))):
            seen = set()
            for i, ln in enumerate(self.plan.get(name, [])):
                where = f"{name}[{i}] ({ln['site']} {ln['group']} '{ln['workload']}' at {ln['hour_utc']}:00 UTC)"
                k = tuple(ln[f] for f in key)
                if k in seen:
                    self.fail("clock", f"{where} appears more than once.")
                seen.add(k)
                if ln["site"] not in self.inp.sites or ln["workload"] not in self.inp.workloads or int(ln["hour_utc"]) not in blocks \
                        or (name == "dispatch" and ln["cooling"] not in self.inp.cooling):
                    self.fail("clock", f"{where}: its site, class, cooling or hour is not one of inputs/ or the represented hours.")
                    continue
                if groups.get(ln["group"]) is None or ln["chip"] != groups[ln["group"]]:
                    self.fail("clock", f"{where}: group {ln['group']!r} with chip {ln['chip']!r} is not a dispatch group of the "
                              f"catalog and its chip ({groups.get(ln['group'])!r}).")
                if name == "backfill":
                    self._compare("clock", where, "weight_h", ln["weight_h"], float(len(blocks[int(ln["hour_utc"])])))

    def check_hourly(self) -> None:
        """hourly[] recomputed row by row (docs/clock.md): with the clock on, one owned row per (site, class) with
        inference racks and represented hour (load from the shares, capacity from the racks, serving and lent GPUs
        the dispatch's sums); one rented row per (cloud region, class) a rent assignment serves and represented
        hour (load, the GPUs rented then, their capacity). Every row present once, no other, each figure equal."""
        rows = self.plan.get("hourly") or []
        if not self.inp.clock_on and not self.inp.clouds:
            return  # check_clock: such a plan lists no hourly rows
        blocks = self._blocks()
        expected: dict[tuple, dict] = {}
        if self.inp.clock_on:
            loads, capacity = self._site_loads(), self._owned_capacity()
            serving, lent = defaultdict(float), defaultdict(float)
            for d in self.plan.get("dispatch", []):
                serving[d["site"], d["workload"], int(d["hour_utc"])] += d["serving_gpus"]
                lent[d["site"], d["workload"], int(d["hour_utc"])] += d["lent_gpus"]
            for s, w in sorted({(s, w) for (s, _, _, w) in self._installed()}):
                for h in blocks:
                    expected[s, "owned", w, h] = {"weight_h": float(len(blocks[h])), "load_tok_s": loads.get((s, w, h), 0.0),
                                                  "capacity_tok_s": capacity.get((s, w), 0.0),
                                                  "serving_gpus": serving.get((s, w, h), 0.0), "lent_gpus": lent.get((s, w, h), 0.0)}
        load, on_demand, reserved = defaultdict(float), defaultdict(float), defaultdict(float)
        for a in self.plan.get("rent_assignments", []):
            if a["site"] in self.inp.clouds and a["share"] > 1e-9:
                for h in blocks:
                    load[a["site"], a["workload"], h] += self._served(a) * self._p(a["region"], a["workload"], h)
        for ln in self.plan.get("rentals", []):
            if ln["kind"] == "on_demand":
                on_demand[ln["cloud"], ln["workload"], int(ln["hour_utc"])] += ln["gpus"]
            elif ln["kind"] == "reserved":
                reserved[ln["cloud"], ln["workload"]] += ln["gpus"]
        for q, w in sorted({(q, w) for (q, w, _) in load}):
            for h in blocks:
                gpus = on_demand.get((q, w, h), 0.0) + reserved.get((q, w), 0.0)
                expected[q, "rented", w, h] = {"weight_h": float(len(blocks[h])), "load_tok_s": load[q, w, h],
                                               "capacity_tok_s": gpus * self.inp.tok_s_at_target(self.inp.clouds[q]["chip"], w),
                                               "serving_gpus": gpus, "lent_gpus": 0.0}
        seen = set()
        for i, ln in enumerate(rows):
            key = (ln["place"], ln["kind"], ln["workload"], ln["hour_utc"])
            where = f"hourly[{i}] ({ln['place']} {ln['kind']} '{ln['workload']}' at {ln['hour_utc']}:00 UTC)"
            if key in seen:
                self.fail("hourly", f"{where} appears more than once.")
                continue
            seen.add(key)
            want = expected.get(key)
            if want is None:
                self.fail("hourly", f"{where} is no row of the plan: its place, kind, class or hour has no load or capacity "
                          "there (owned rows: sites with inference racks of the class; rented rows: cloud regions it rents "
                          "from; hours: the represented hours).")
                continue
            for name, value in want.items():
                abs_ = 1e-3 if name.endswith("_tok_s") else 1e-6
                self._compare("hourly", where, name, ln.get(name, 0.0), value, abs_=abs_)
        missing = sorted(set(expected) - seen, key=str)
        if missing:
            shown = "; ".join(f"{p} {k} '{w}' at {h}:00" for p, k, w, h in missing[:5])
            self.fail("hourly", f"hourly[] lacks {len(missing)} row(s) the plan has ({shown}{' …' if len(missing) > 5 else ''}).")

    def check_clock_record(self) -> None:
        """plan.json clock (docs/clock.md): empty exactly when the scenario has neither the clock nor cloud regions;
        its settings those of inputs/scenario.yaml; represented hours, weights and blocks one partition of the day
        (check_clock); load_share the recomputed p[r,w,h] of every (region, class) with demand, block_overstatement
        the share of the day's served tokens the blocks overstate, both recomputed."""
        clock = self.plan.get("clock") or {}
        inp = self.inp
        if not inp.clock_on and not inp.clouds:
            if clock:
                self.fail("clock_record", "plan.json has a clock record, but the scenario has neither the clock nor cloud regions.")
            return
        if not clock:
            self.fail("clock_record", "plan.json has no clock record; the scenario has the clock on or cloud regions.")
            return
        blocks = self._blocks()
        for key, expected in (("on", inp.clock_on), ("hours", int(inp.clock.get("hours") or 0)),
                              ("idle_power_share", float(inp.clock.get("idle_power_share", 0.3))),
                              ("inference_fabric_tier", int(inp.clock.get("inference_fabric_tier", 1))),
                              ("routing", "hour" if self._routes_by_hour else "day")):
            value = clock.get(key)
            same = value == expected if isinstance(expected, (bool, str)) else (_is_number(value) and _close(float(value), expected))
            if not same or isinstance(value, bool) != isinstance(expected, bool):
                self.fail("clock_record", f"clock.{key} is {value!r} in plan.json; inputs/scenario.yaml gives {expected!r}.")
        hours = clock.get("represented_hours_utc")
        if not isinstance(hours, list) or sorted(int(h) for h in hours) != sorted(blocks) or len(hours) != len(blocks):
            self.fail("clock_record", f"clock.represented_hours_utc is {hours!r}; the blocks start at {sorted(blocks)}.")
            return
        if set((clock.get("weight_h") or {})) != {str(h) for h in blocks}:
            self.fail("clock_record", "clock.weight_h does not weigh exactly the represented hours.")
        offsets = clock.get("utc_offsets_h") or {}
        demanded = [(r, w) for r in inp.regions for w in inp.workloads if inp.demand(r, w) > 0] if inp.clock_on else []
        if inp.clock_on:
            for r in sorted(set(offsets) - set(inp.regions)):
                self.fail("clock_record", f"clock.utc_offsets_h names region {r!r}, not a region of inputs/.")
            for r in sorted({r for r, _ in demanded} - set(offsets)):
                self.fail("clock_record", f"clock.utc_offsets_h has no offset for region {r}, which has demand.")
        shares = clock.get("load_share") or {}
        want = {f"{r}|{w}" for r, w in demanded}
        for key in sorted(set(shares) ^ want):
            self.fail("clock_record", f"clock.load_share {'lists' if key in shares else 'lacks'} {key!r}; it holds the "
                      "(region, class) pairs with demand.")
        for r, w in demanded:
            values = shares.get(f"{r}|{w}")
            if values is None:
                continue
            if not isinstance(values, list) or len(values) != len(hours):
                self.fail("clock_record", f"clock.load_share {r}|{w} has not one value per represented hour.")
                continue
            for h, value in zip(hours, values):
                if not _is_number(value) or not _close(float(value), self._p(r, w, int(h)), abs_=1e-9):
                    self.fail("clock_record", f"clock.load_share {r}|{w} at {h}:00 UTC is {value!r}, recomputed {self._p(r, w, int(h))!r}.")
                    break
        served = over = 0.0
        for r, w in demanded:
            demand = inp.demand(r, w)
            utc = [v * demand for v in self._utc(r, w)]
            served += sum(utc)
            for block in blocks.values():
                over += max(utc[u] for u in block) * len(block) - sum(utc[u] for u in block)
        expected = over / served if served else 0.0
        self._compare("clock_record", "clock", "block_overstatement", clock.get("block_overstatement"), expected, abs_=1e-9)

    def _check_day(self) -> None:
        clock = self.plan.get("clock") or {}
        blocks = self._blocks()
        covered = sorted(x for hours in blocks.values() for x in hours)
        if covered != list(range(HOURS_PER_DAY)):
            self.fail("clock", f"the represented hours stand for UTC hours {covered}, not each of 0..23 once.")
        for h, hours in blocks.items():
            if not hours or hours[0] != h or any((b - a) % HOURS_PER_DAY != 1 for a, b in zip(hours, hours[1:])):
                self.fail("clock", f"represented hour {h} stands for {hours}: a block must be consecutive hours starting at {h}.")
            if not _close(float((clock.get("weight_h") or {}).get(str(h), -1)), float(len(hours))):
                self.fail("clock", f"represented hour {h} weighs {(clock.get('weight_h') or {}).get(str(h))!r} hours, its block holds {len(hours)}.")
        if len(blocks) != int(self.inp.clock["hours"]) and not (int(self.inp.clock["hours"]) >= HOURS_PER_DAY and len(blocks) == HOURS_PER_DAY):
            self.fail("clock", f"clock.hours is {self.inp.clock['hours']} but the plan represents the day by {len(blocks)} hours.")
        try:
            from timezonefinder import TimezoneFinder  # an independent reading of the offsets, where the package is installed
            from zoneinfo import ZoneInfo
            from datetime import datetime, timezone
            finder = TimezoneFinder()
        except ImportError:
            finder = None
        for r, region in self.inp.regions.items():
            given = region.get("utc_offset_h")
            if given is not None and not (isinstance(given, float) and math.isnan(given)):
                recorded = (clock.get("utc_offsets_h") or {}).get(r, {}).get("offset_h")
                if recorded is not None and not _close(float(recorded), float(given)):
                    self.fail("clock", f"region {r}: plan.json records UTC offset {recorded}, inputs/regions.csv gives {given}.")
            elif finder is not None and any(self.inp.demand(r, w) > 0 for w in self.inp.workloads):
                name = finder.timezone_at(lat=float(region["lat"]), lng=float(region["lon"]))
                if name:  # standard time: the smaller of the January and July offsets (DST is in one of them)
                    expected = min(datetime(2026, m, 15, 12, tzinfo=timezone.utc).astimezone(ZoneInfo(name)).utcoffset().total_seconds()
                                   for m in (1, 7)) / 3600
                    if not _close(self._offset_h(r), expected):
                        self.fail("clock", f"region {r} lies in {name} (standard offset {expected:+g} h); plan.json records {self._offset_h(r):+g} h.")

    def check_hourly_routing(self) -> None:
        """Routing per hour (clock.routing hour, docs/clock.md): every line of plan.json's routing is a known
        pair within its round-trip budget and allowed countries, at an open site, its share in [0, max share]
        and its served tok/s share x demand x p[r,w,h]; every represented hour's demand is met (owned shares
        of that hour plus the day's rented shares = 1); each assignment's share is the hours' weighted mean
        sum_h (w_h / 24) share_h. The hourly load these shares put on each site is what check_clock holds
        against its capacity and dispatch, hour by hour."""
        lines = self.plan.get("routing", [])
        if not self._routes_by_hour:
            if lines:
                self.fail("hourly_routing", "plan.json lists routing per hour, but inputs/scenario.yaml routes by the day "
                          "(clock.routing is not 'hour').")
            return
        blocks = self._blocks()
        cap = self.inp.policies["max_share_per_site"]
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        served, mean, seen = defaultdict(float), defaultdict(float), set()
        for ln in lines:
            r, w, s, h = ln["region"], ln["workload"], ln["site"], int(ln["hour_utc"])
            where = f"routing of {r} '{w}' from {s} at {h}:00 UTC"
            if (r, w, s, h) in seen:
                self.fail("hourly_routing", f"{where} appears more than once.")
            seen.add((r, w, s, h))
            if r not in self.inp.regions or s not in self.inp.sites or w not in self.inp.workloads or h not in blocks:
                self.fail("hourly_routing", f"{where}: region, class, site or represented hour is not in inputs/ or plan.json's clock.")
                continue
            share = ln["share"]
            if share < -ABS_TOL or share > cap + ABS_TOL:
                self.fail("hourly_routing", f"{where}: share {share} outside [0, {cap}].")
            budget = float(self.inp.regions[r][f"rtt_budget_{w}_ms"])
            rtt = self._rtt_ms(r, s)
            if rtt > budget + 1e-6:
                self.fail("hourly_routing", f"{where} at {rtt:.2f} ms, over its {budget:g} ms budget.")
            allowed = _list(self.inp.regions[r].get("allowed_countries"))
            if allowed and self.inp.sites[s]["country"] not in allowed:
                self.fail("hourly_routing", f"{where}: {s} is outside {';'.join(allowed)}.")
            if share > ABS_TOL and s not in open_sites:
                self.fail("hourly_routing", f"{where}: the site is not open.")
            self._compare("hourly_routing", where, "weight_h", ln["weight_h"], float(len(blocks[h])))
            self._compare("hourly_routing", where, "served_tok_s", ln["served_tok_s"], share * self.inp.demand(r, w) * self._p(r, w, h), abs_=1e-3)
            served[r, w, h] += share
            mean[r, w, s] += share * len(blocks[h]) / HOURS_PER_DAY
        for a in self.plan.get("rent_assignments", []):  # rented shares hold for the whole day
            for h in blocks:
                served[a["region"], a["workload"], h] += a["share"]
        for r in self.inp.regions:
            for w in self.inp.workloads:
                if self.inp.demand(r, w) <= 0:
                    continue
                for h in sorted(blocks):
                    if not _close(served[r, w, h], 1.0):
                        self.fail("hourly_routing", f"region {r} '{w}' demand at {h}:00 UTC is {served[r, w, h] * 100:.4f}% served, not 100%.")
        listed = set()
        for a in self.plan["assignments"]:
            key = (a["region"], a["workload"], a["site"])
            listed.add(key)
            self._compare("hourly_routing", f"assignment {key[0]} '{key[1]}' from {key[2]}", "share", a["share"], mean.get(key, 0.0),
                          abs_=1e-6, source="the hours' weighted mean of routing gives")
        for key, value in mean.items():
            if key not in listed and value > 1e-6:
                self.fail("hourly_routing", f"routing serves {key[0]} '{key[1]}' from {key[2]} ({value:.6f} of the day), "
                          "which assignments does not list.")

    def _check_dispatch(self) -> None:
        installed, loads = self._installed(), self._site_loads()
        used = defaultdict(float)
        serving_tok = defaultdict(float)
        lent = defaultdict(float)
        for d in self.plan.get("dispatch", []):
            key = (d["site"], d["group"], d["cooling"], d["workload"])
            if d["serving_gpus"] < -ABS_TOL or d["lent_gpus"] < -ABS_TOL:
                self.fail("clock", f"site {d['site']} hour {d['hour_utc']}: negative GPUs in the dispatch.")
            used[key + (int(d["hour_utc"]),)] += d["serving_gpus"] + d["lent_gpus"]
            chip = d["group"] if d["group"] in self.inp.chips else self.inp.racks[d["group"]]["chip"]
            serving_tok[d["site"], d["workload"], int(d["hour_utc"])] += d["serving_gpus"] * self.inp.tok_s_at_target(chip, d["workload"])
            lent[d["site"], d["group"], d["workload"], int(d["hour_utc"])] += d["lent_gpus"]
        for (s, g, c, w, h), n in used.items():
            if n > installed.get((s, g, c, w), 0.0) * (1 + REL_TOL) + 1e-6:
                self.fail("clock", f"site {s} hour {h}: {n:,.2f} {g} GPUs of '{w}' in {c} are busy, {installed.get((s, g, c, w), 0.0):,.0f} installed.")
        for (s, w, h), load in loads.items():
            if load > serving_tok[s, w, h] * (1 + REL_TOL) + 1e-3:
                self.fail("clock", f"site {s} hour {h} UTC: '{w}' load {load:,.1f} tok/s, its serving GPUs give {serving_tok[s, w, h]:,.1f}.")
        backfill = defaultdict(float)
        for b in self.plan.get("backfill", []):
            backfill[b["site"], b["group"], b["workload"], int(b["hour_utc"])] += b["gpus"]
        for key in sorted(set(lent) | set(backfill)):
            if not _close(lent.get(key, 0.0), backfill.get(key, 0.0), abs_=1e-6):
                self.fail("clock", f"site {key[0]} hour {key[3]}: the dispatch lends {lent.get(key, 0.0):,.3f} {key[1]} GPUs of '{key[2]}', "
                          f"backfill.csv borrows {backfill.get(key, 0.0):,.3f}.")

    def _check_backfill(self) -> None:
        tier = int(self.inp.clock.get("inference_fabric_tier", 0))
        got = defaultdict(float)
        for b in self.plan.get("backfill", []):
            j, where = b["job"], f"backfill of job {b['job']} at {b['site']} hour {b['hour_utc']}"
            if j not in self.inp.jobs or not self.inp.interruptible(j):
                self.fail("clock", f"{where}: the job is not an interruptible job of inputs/jobs.csv.")
                continue
            job, chip = self.inp.jobs[j], self.inp.chips[b["chip"]]
            eligible = _list(job.get("eligible_chips"))
            if chip["h100_equiv"] <= 0 or (eligible and b["chip"] not in eligible):
                self.fail("clock", f"{where}: chip {b['chip']} is not eligible for the job.")
            if int(job["min_fabric_tier"]) > tier:
                self.fail("clock", f"{where}: the job needs fabric tier {job['min_fabric_tier']}, inference racks sit on tier {tier}.")
            allowed = _list(job.get("allowed_countries"))
            if allowed and self.inp.sites[b["site"]]["country"] not in allowed:
                self.fail("clock", f"{where}: site {b['site']} is outside {';'.join(allowed)}.")
            hours = len(self._blocks().get(int(b["hour_utc"]), []))
            self._compare("clock", where, "h100_gpu_hours_per_day", b["h100_gpu_hours_per_day"], b["gpus"] * hours * chip["h100_equiv"], abs_=1e-6)
            got[j] += b["gpus"] * hours * chip["h100_equiv"]
        own = {p["job"] for p in self.plan["jobs"]} | {ln["job"] for ln in self.plan.get("rentals", []) if ln["kind"] == "training"}
        for j in self.inp.jobs:
            if self.inp.interruptible(j) and j not in own and got[j] < self.inp.daily_h100_hours(j) * (1 - REL_TOL) - 1e-6:
                self.fail("clock", f"interruptible job {j} gets {got[j]:,.1f} H100-equivalent GPU-hours a day from the troughs, "
                          f"needs {self.inp.daily_h100_hours(j):,.1f}, and has no racks or rented GPUs of its own.")

    def _check_rentals(self) -> None:
        loads = defaultdict(float)
        for a in self.plan.get("rent_assignments", []):
            r, w, q = a["region"], a["workload"], a["site"]
            where = f"rented serving of {r} '{w}' from {q}"
            if q not in self.inp.clouds:
                self.fail("clock", f"{where}: {q} is not in inputs/cloud_regions.csv.")
                continue
            cloud, region = self.inp.clouds[q], self.inp.regions[r]
            rtt = self._cloud_rtt_ms(r, q)
            if rtt > float(region[f"rtt_budget_{w}_ms"]) + 1e-6:
                self.fail("clock", f"{where} at {rtt:.2f} ms, over its {region[f'rtt_budget_{w}_ms']:g} ms budget.")
            self._compare("clock", where, "rtt_ms", a["rtt_ms"], rtt)
            self._compare("clock", where, "served_tok_s", a["served_tok_s"], self._served(a), abs_=1e-3)
            allowed = _list(region.get("allowed_countries"))
            if allowed and cloud["country"] not in allowed:
                self.fail("clock", f"{where}: {q} in {cloud['country']} is outside {';'.join(allowed)}.")
            if (cloud["chip"], w) not in self.inp.tok_s:
                self.fail("clock", f"{where}: chip {cloud['chip']} cannot serve '{w}'.")
            for h in self._blocks():
                loads[q, w, h] += self._served(a) * self._p(r, w, h)
        rented = defaultdict(float)
        reserved = defaultdict(float)
        per_hour = defaultdict(float)
        for ln in self.plan.get("rentals", []):
            q = ln["cloud"]
            where = f"rental {ln['kind']} at {q}"
            if q not in self.inp.clouds:
                self.fail("clock", f"{where}: not in inputs/cloud_regions.csv.")
                continue
            cloud = self.inp.clouds[q]
            if ln["chip"] != cloud["chip"]:
                self.fail("clock", f"{where}: lists chip {ln['chip']}, the region rents {cloud['chip']}.")
            on_demand, training = ln["kind"] == "on_demand", ln["kind"] == "training"
            if (ln.get("workload") in self.inp.workloads) == training or (ln.get("job") is not None) != training \
                    or (ln.get("hour_utc") is not None) != on_demand or (on_demand and int(ln["hour_utc"]) not in self._blocks()):
                self.fail("clock", f"{where}: a rental on demand names a class and a represented hour, a reserved one a class, "
                          f"a training one a job (it names class {ln.get('workload')!r}, job {ln.get('job')!r}, hour {ln.get('hour_utc')!r}).")
            self._compare("clock", where, "gpu_hours_per_year", ln["gpu_hours_per_year"], self._rental_gpu_hours(ln), abs_=1e-6)
            self._compare("clock", where, "usd_per_year", ln["usd_per_year"], self._rental_cost(ln), abs_=1e-3)
            if ln["kind"] == "on_demand":
                rented[q, ln["workload"], int(ln["hour_utc"])] += ln["gpus"]
                per_hour[q, int(ln["hour_utc"])] += ln["gpus"]
            elif ln["kind"] == "reserved":
                reserved[q, ln["workload"]] += ln["gpus"]
                for h in self._blocks():
                    per_hour[q, h] += ln["gpus"]
            else:
                j = ln["job"]
                job, chip = self.inp.jobs[j], self.inp.chips[cloud["chip"]]
                eligible = _list(job.get("eligible_chips"))
                if chip["h100_equiv"] <= 0 or (eligible and cloud["chip"] not in eligible) or int(cloud["fabric_tier"]) < int(job["min_fabric_tier"]):
                    self.fail("clock", f"{where}: job {j} cannot run on {cloud['chip']} at fabric tier {cloud['fabric_tier']}.")
                    continue
                allowed = _list(job.get("allowed_countries"))
                if allowed and cloud["country"] not in allowed:
                    self.fail("clock", f"{where}: job {j} must stay in {';'.join(allowed)}.")
                self._compare("clock", where, "gpus", ln["gpus"], float(job["gpus_h100_equiv"]) / chip["h100_equiv"], abs_=1e-6)
                for h in self._blocks():
                    per_hour[q, h] += ln["gpus"]
        for (q, w, h), load in loads.items():
            have = (rented[q, w, h] + reserved[q, w]) * self.inp.tok_s_at_target(self.inp.clouds[q]["chip"], w)
            if load > have * (1 + REL_TOL) + 1e-3:
                self.fail("clock", f"cloud region {q} hour {h} UTC: '{w}' load {load:,.1f} tok/s on rented GPUs giving {have:,.1f}.")
        for (q, h), gpus in per_hour.items():
            cap = self.inp.clouds[q].get("cap_gpus")
            if cap is not None and not (isinstance(cap, float) and math.isnan(cap)) and gpus > float(cap) * (1 + REL_TOL) + 1e-6:
                self.fail("clock", f"cloud region {q} hour {h} UTC rents {gpus:,.1f} GPUs over its cap {cap:,.0f}.")

    def _load_factor(self, ln) -> float:
        if ln["purpose"] == "training":
            return self.inp.economics["training_load_factor"]
        if self.inp.clock_on:  # the idle share all year; busy GPUs pay the rest by the hour (check_clock)
            return float(self.inp.clock["idle_power_share"])
        return self.inp.workloads[ln["workload"]]["load_factor"]

    def check_cost(self) -> None:
        """Recompute every line item from the inputs; their sum must equal the objective."""
        by_category = defaultdict(float)
        for site in self.plan["sites"]:
            s = site["id"]
            inp = self.inp.sites[s]
            mine = defaultdict(float)
            if site["open"]:
                mine["site_fixed"] += inp["fixed_cost_usd_per_year"]
            for c in site["zones"]:
                mine["cooling_zones"] += self.inp.cooling[c]["zone_fixed_usd_per_year"]
            for ln in site["racks"]:
                cost = self._line(s, ln)["cost"]
                for cat in sorted(set(cost) | set(ln["cost_usd_per_year"])):
                    if cat not in cost:
                        self.fail("cost", f"site {s}: {ln['config']} line lists an unknown cost category '{cat}'.")
                        continue
                    mine[cat] += cost[cat]
                    if not _close(cost[cat], ln["cost_usd_per_year"].get(cat, 0.0), abs_=1e-3):
                        self.fail("cost", f"site {s}: {ln['config']} ({ln['purpose']}) line {cat}: plan says "
                                  f"${ln['cost_usd_per_year'].get(cat, 0.0):,.2f}, recomputed ${cost[cat]:,.2f}.")
            for a in self.plan["assignments"]:
                if a["site"] == s:
                    mine["transport"] += self._transport(a)
            campus, credit = self._campus(site)
            if campus or credit:  # self-build replaces colocation on the built kW (check_self_build)
                mine["self_build"] += campus
                mine["colocation"] -= credit
            busy = self._busy_energy().get(s)
            if busy:
                mwh = busy["serving_mwh"] + busy["lent_mwh"]
                mine["energy"] += mwh * inp["power_price_usd_per_mwh"]
                mine["carbon"] += busy["t"] * self.inp.economics["carbon_price_usd_per_t"]
            for cat in sorted(set(mine) | set(site["cost_usd_per_year"])):
                value = mine.get(cat, 0.0)
                by_category[cat] += value
                if not _close(value, site["cost_usd_per_year"].get(cat, 0.0), abs_=1e-3):
                    self.fail("cost", f"site {s} {cat}: plan says ${site['cost_usd_per_year'].get(cat, 0.0):,.2f}, recomputed ${value:,.2f}.")
        rental = sum(self._rental_cost(ln) for ln in self.plan.get("rentals", []))
        if rental or "rental" in self.plan["cost_breakdown_usd_per_year"]:
            by_category["rental"] += rental
        total = sum(by_category.values())
        self.report.recomputed_cost_usd_per_year = total
        if not _close(total, self.plan["objective_usd_per_year"]):
            self.fail("cost", f"line items add up to ${total:,.2f}, the plan's objective is ${self.plan['objective_usd_per_year']:,.2f}.")
        breakdown = self.plan["cost_breakdown_usd_per_year"]
        for cat in sorted(set(breakdown) | set(by_category)):
            if not _close(breakdown.get(cat, 0.0), by_category.get(cat, 0.0), abs_=1e-3):
                self.fail("cost", f"breakdown {cat}: plan says ${breakdown.get(cat, 0.0):,.2f}, recomputed ${by_category.get(cat, 0.0):,.2f}.")
        solver_objective = self.plan["solve"]["objective_usd_per_year"]
        if solver_objective is not None and not _close(total, solver_objective, rel=1e-6, abs_=1.0):
            self.fail("cost", f"line items add up to ${total:,.2f}, the solver's objective was ${solver_objective:,.2f}.")

    # ------------------------------------------------------------------ the folder and what it reports

    def check_manifest(self) -> None:
        """manifest.json lists every file with its SHA-256 and size; nothing missing, changed or added."""
        if not (self.folder / MANIFEST).is_file():
            self.fail("manifest", f"{self.folder} has no {MANIFEST}: it was written before plan folders carried a manifest "
                      "(or the manifest was removed), so its files cannot be verified. Re-run `dcplace solve` "
                      "(the command is in inputs/provenance.json, `rerun`) to write a checked folder.")
            return
        doc = self.manifest
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
            self.fail("manifest", f"{MANIFEST} is not a manifest (a JSON object with a 'files' mapping).")
            return
        if doc.get("format_version") != 1 or doc.get("algorithm", "sha256") != "sha256":
            self.fail("manifest", f"{MANIFEST}: format_version {doc.get('format_version')!r} / algorithm "
                      f"{doc.get('algorithm')!r} is not the documented 1 / sha256.")
        listed = doc["files"]
        root = self.folder.resolve()
        for rel, entry in sorted(listed.items()):
            path = (self.folder / rel).resolve()
            if rel in (MANIFEST, MARKER) or root not in path.parents:
                self.fail("manifest", f"{MANIFEST} lists '{rel}', which cannot be a file of the plan.")
                continue
            if not path.is_file():
                self.fail("manifest", f"{rel} is listed in {MANIFEST} but missing from the folder.")
                continue
            digest, size = _sha256_file(path)
            if not isinstance(entry, dict) or entry.get("sha256") != digest or entry.get("bytes") != size:
                self.fail("manifest", f"{rel} was changed after the plan was written: its SHA-256 {digest[:12]}… "
                          f"({size} bytes) differs from the manifest's.")
        for path in sorted(self.folder.rglob("*")):
            rel = path.relative_to(self.folder).as_posix()
            if not path.is_file() or rel in (MANIFEST, MARKER) or self._later_output(rel):
                continue
            if rel not in listed:
                self.fail("manifest", f"{rel} is in the folder but not in {MANIFEST}: it was added after the plan was written.")
            elif rel not in REQUIRED_FILES and rel not in OPTIONAL_FILES:
                self.fail("manifest", f"{rel} is not a file of a plan folder (docs/plan-format.md lists them).")
        for rel in REQUIRED_FILES:
            if rel not in listed and not (self.folder / rel).is_file():
                self.fail("manifest", f"{rel}, which every plan folder holds, is missing and unlisted.")
        if (self.folder / "inputs").is_dir():
            digest = inputs_digest(self.folder)
            if doc.get("inputs_sha256") != digest:
                self.fail("manifest", f"inputs_sha256 in {MANIFEST} is {str(doc.get('inputs_sha256'))[:12]}…, "
                          f"the files in inputs/ give {digest[:12]}…: the inputs are not the ones the plan was solved on.")

    def _later_output(self, rel: str) -> bool:
        """Whether `rel` lies in a subfolder that another dcplace command wrote into the plan
        folder later (it carries the marker of a report, export, ... folder): not plan data."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            try:
                doc = json.loads((self.folder.joinpath(*parts[:i]) / MARKER).read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and (doc.get("kind") in LATER_KINDS or (i == 1 and parts[0] == WHY_FOLDER and doc.get("kind") == "batch")):
                return True
        return False

    def check_provenance(self) -> None:
        """One scenario: plan.json, its provenance, inputs/provenance.json and the manifest agree."""
        plan = self.plan
        if plan.get("format_version") != 1:
            self.fail("provenance", f"plan.json format_version is {plan.get('format_version')!r}; this checker reads 1.")
        hashes = {"plan.json scenario_hash": plan.get("scenario_hash"),
                  "plan.json provenance.scenario_hash": (plan.get("provenance") or {}).get("scenario_hash")}
        try:
            stored = json.loads((self.folder / "inputs" / "provenance.json").read_text())
        except (OSError, ValueError) as exc:
            self.fail("provenance", f"inputs/provenance.json cannot be read ({type(exc).__name__}).")
            stored = None
        if isinstance(stored, dict):
            hashes["inputs/provenance.json scenario_hash"] = stored.get("scenario_hash")
            if stored != plan.get("provenance"):
                differ = sorted(k for k in set(stored) | set(plan.get("provenance") or {})
                                if stored.get(k) != (plan.get("provenance") or {}).get(k))
                self.fail("provenance", f"plan.json provenance differs from inputs/provenance.json in: {', '.join(differ)}.")
        if isinstance(self.manifest, dict):
            hashes[f"{MANIFEST} scenario_hash"] = self.manifest.get("scenario_hash")
        if len(set(hashes.values())) != 1:
            shown = "; ".join(f"{k} {str(v)[:12]}…" for k, v in hashes.items())
            self.fail("provenance", f"the scenario hashes disagree ({shown}): plan.json was not solved on these inputs.")
        names = {"plan.json scenario": plan.get("scenario"), "inputs/scenario.yaml name": self.inp.name}
        if isinstance(stored, dict):
            names["inputs/provenance.json scenario_name"] = stored.get("scenario_name")
        if len({str(v) for v in names.values()}) != 1:
            self.fail("provenance", "the scenario names disagree: " + "; ".join(f"{k} {v!r}" for k, v in names.items()) + ".")

    def check_sites(self) -> None:
        """plan.json lists each site of inputs/sites.csv (but the forbidden ones) once, with its input fields and every figure recomputed."""
        ids = [s["id"] for s in self.plan["sites"]]
        for s in sorted({i for i in ids if ids.count(i) > 1}):
            self.fail("sites", f"site {s} appears {ids.count(s)} times in plan.json.")
        forbidden = set(self.inp.policies.get("forbidden_sites") or [])  # they get no variables and no entry
        for s in sorted(set(self.inp.sites) - set(ids) - forbidden):
            self.fail("sites", f"inputs/sites.csv lists site {s}, which plan.json never mentions.")
        for s in sorted(set(ids) & forbidden):
            self.fail("sites", f"plan.json lists site {s}, which policies.forbidden_sites excludes from the plan.")
        for s in sorted(set(ids) - set(self.inp.sites)):
            self.fail("sites", f"plan.json lists site {s}, which is not in inputs/sites.csv.")
        served = defaultdict(lambda: defaultdict(float))
        for a in self.plan["assignments"]:
            if a["site"] in self.inp.sites and a["region"] in self.inp.regions:
                served[a["site"]][a["workload"]] += self._served(a)
        for site in self.plan["sites"]:
            s = site["id"]
            if s not in self.inp.sites:
                continue
            where = f"site {s}"
            inp = self.inp.sites[s]
            for key in ("name", "country"):
                if str(site[key]) != str(inp[key]):
                    self.fail("sites", f"{where}: {key} is {site[key]!r} in plan.json, {inp[key]!r} in inputs/sites.csv.")
            for key in ("lat", "lon", "power_limit_kw", "floor_racks"):
                self._compare("sites", where, key, site[key], float(inp[key]), source="inputs/sites.csv says")
            lines = [self._line(s, ln) for ln in site["racks"]]
            for ln, line in zip(site["racks"], lines):
                self._compare("sites", f"{where} {ln['config']} ({ln['purpose']}) line", "facility_kw", ln["facility_kw"], line["facility_kw"])
            self._compare("sites", where, "racks_total", site["racks_total"], float(sum(ln["racks"] for ln in site["racks"])))
            self._compare("sites", where, "gpus", site["gpus"], float(sum(x["gpus"] for x in lines)))
            self._compare("sites", where, "it_kw", site["it_kw"], sum(x["it_kw"] for x in lines))
            self._compare("sites", where, "facility_kw", site["facility_kw"], sum(x["facility_kw"] for x in lines))
            self._compare("sites", where, "emissions_t_per_year", site["emissions_t_per_year"],
                          sum(x["emissions"] for x in lines) + self._busy_energy().get(s, {}).get("t", 0.0))
            self._compare("sites", where, "upfront_capex_usd", site["upfront_capex_usd"], sum(x["upfront"] for x in lines), abs_=1e-3)
            costs = site["cost_usd_per_year"]
            self._compare("sites", where, "total_cost_usd_per_year", site["total_cost_usd_per_year"], sum(costs.values()), abs_=1e-3)
            expected_served = {w: v for w, v in served[s].items() if v > 0}
            for w in sorted(set(expected_served) | set(site["served_tok_s"])):
                self._compare("sites", where, f"served_tok_s[{w}]", site["served_tok_s"].get(w, 0.0), expected_served.get(w, 0.0), abs_=1e-3)
            purposes = {ln["purpose"] for ln in site["racks"]}
            role = "closed" if not site["open"] else "idle" if not purposes else "mixed" if len(purposes) == 2 else next(iter(purposes))
            if site["role"] != role:
                self.fail("sites", f"{where}: role is '{site['role']}' in plan.json; its open flag and rack lines make it '{role}'.")
            fabrics = sorted({ln["fabric"] for ln in site["racks"] if ln.get("fabric")})
            if list(site["fabrics"]) != fabrics:
                self.fail("sites", f"{where}: fabrics are {site['fabrics']} in plan.json, its training lines use {fabrics}.")

    def check_kpis(self) -> None:
        """Every KPI recomputed from the inputs and the decisions (racks, shares, placements)."""
        eco = self.inp.economics
        hours = eco["hours_per_year"]
        by_purpose = defaultdict(float)
        it_kw, gpus = defaultdict(float), defaultdict(float)
        facility_kw = emissions = upfront = 0.0
        for site, ln in self.lines():
            line = self._line(site["id"], ln)
            by_purpose[ln["purpose"]] += sum(line["cost"].values())
            it_kw[ln["purpose"]] += line["it_kw"]
            gpus[ln["purpose"]] += line["gpus"]
            facility_kw += line["facility_kw"]
            emissions += line["emissions"]
            upfront += line["upfront"]
        shared = 0.0
        for site in self.plan["sites"]:
            campus, credit = self._campus(site)
            by_purpose["training"] += campus - credit  # a campus houses training racks only
            if site["open"]:
                shared += self.inp.sites[site["id"]]["fixed_cost_usd_per_year"]
            shared += sum(self.inp.cooling[c]["zone_fixed_usd_per_year"] for c in site["zones"])
        transport = sum(self._transport(a) for a in self.plan["assignments"])
        busy = self._busy_energy()
        carbon_price = eco["carbon_price_usd_per_t"]
        for s, b in busy.items():
            price = self.inp.sites[s]["power_price_usd_per_mwh"]
            t_serving = b["t"] * b["serving_mwh"] / max(b["serving_mwh"] + b["lent_mwh"], 1e-12)
            by_purpose["inference"] += b["serving_mwh"] * price + t_serving * carbon_price
            by_purpose["training"] += b["lent_mwh"] * price + (b["t"] - t_serving) * carbon_price
            emissions += b["t"]
        for ln in self.plan.get("rentals", []):
            by_purpose["training" if ln["kind"] == "training" else "inference"] += self._rental_cost(ln)
        inference = by_purpose["inference"] + transport
        total = inference + by_purpose["training"] + shared
        peak = tokens = within = rtt_weighted = 0.0
        owned = len(self.plan["assignments"])
        for i, a in enumerate(self.plan["assignments"] + self.plan.get("rent_assignments", [])):
            served = self._served(a)
            rtt = self._rtt_ms(a["region"], a["site"]) if a["site"] in self.inp.sites else self._cloud_rtt_ms(a["region"], a["site"])
            peak += served
            if self._routes_by_hour and i < owned:
                pass  # owned pairs routed per hour: their tokens are counted hour by hour below
            elif self.inp.clock_on:
                tokens += a["share"] * self._day_load(a["region"], a["workload"]) * hours / HOURS_PER_DAY * SECONDS_PER_HOUR
            else:
                tokens += served * self.inp.workloads[a["workload"]]["load_factor"] * hours * SECONDS_PER_HOUR
            rtt_weighted += served * rtt
            if rtt <= self.inp.regions[a["region"]][f"rtt_budget_{a['workload']}_ms"] + 1e-9:
                within += served
        if self._routes_by_hour:
            blocks = self._blocks()
            for ln in self.plan.get("routing", []):
                r, w, h = ln["region"], ln["workload"], int(ln["hour_utc"])
                tokens += ln["share"] * self.inp.demand(r, w) * self._p(r, w, h) * len(blocks.get(h, [])) * hours / HOURS_PER_DAY * SECONDS_PER_HOUR
        demand = sum(self.inp.demand(r, w) for r in self.inp.regions for w in self.inp.workloads)
        expected = {
            "total_cost_usd_per_year": total,
            "inference_cost_usd_per_year": inference,
            "training_cost_usd_per_year": by_purpose["training"],
            "shared_cost_usd_per_year": shared,
            "usd_per_m_tokens": inference / (tokens / 1e6) if tokens else 0.0,
            "tokens_per_s_served_peak": peak,
            "tokens_per_year": tokens,
            "demand_within_budget_share": within / demand if demand else 1.0,
            "mean_rtt_ms": rtt_weighted / peak if peak else 0.0,
            "sites_open": float(sum(1 for s in self.plan["sites"] if s["open"])),
            "it_mw_inference": it_kw["inference"] / 1000,
            "it_mw_training": it_kw["training"] / 1000,
            "facility_mw": facility_kw / 1000,
            "gpus_inference": gpus["inference"],
            "gpus_training": gpus["training"],
            "emissions_t_per_year": emissions,
            "upfront_capex_usd": upfront,
            "training_jobs_placed": float(len(self.plan["jobs"])),
        }
        if self.plan.get("clock"):
            expected.update(self._clock_kpis())
        kpis = self.plan["kpis"]
        for key in sorted(set(kpis) - set(expected)):
            self.fail("kpis", f"plan.json kpis has '{key}', which is not a documented KPI.")
        for key, value in expected.items():
            if key not in kpis:
                self.fail("kpis", f"plan.json kpis lacks '{key}'.")
                continue
            abs_ = 1e-3 if key.endswith("_usd_per_year") or key == "upfront_capex_usd" else 1e-9
            if not _is_number(kpis[key]) or not _close(float(kpis[key]), value, abs_=abs_):
                self.fail("kpis", f"KPI {key}: plan.json says {kpis[key]!r}, recomputed {value!r}.")

    def _assignment_rows(self, rows: list, label: str, places: dict, place: str):
        """Each of `rows` named once, with a known region, class and `place`, its region_name and
        rtt_budget_ms as in inputs/regions.csv; yields (row, its description) for the rows that name
        known ones."""
        seen = set()
        for i, a in enumerate(rows):
            key = (a["region"], a["workload"], a["site"])
            where = f"{label} {i} ({a['region']} '{a['workload']}' from {a['site']})"
            if key in seen:
                self.fail("assignments", f"{where} appears more than once.")
            seen.add(key)
            if a["region"] not in self.inp.regions or a["site"] not in places or a["workload"] not in self.inp.workloads:
                self.fail("assignments", f"{where}: region, class or {place} is not in inputs/.")
                continue
            region = self.inp.regions[a["region"]]
            if str(a["region_name"]) != str(region["name"]):
                self.fail("assignments", f"{where}: region_name is {a['region_name']!r}, inputs/regions.csv says {region['name']!r}.")
            self._compare("assignments", where, "rtt_budget_ms", a["rtt_budget_ms"], float(region[f"rtt_budget_{a['workload']}_ms"]),
                          source="inputs/regions.csv says")
            yield a, where

    def check_assignments(self) -> None:
        """Each assignment names a known region, class and site once; its fields mirror the inputs. Each rent
        assignment names a known region, class and cloud region once, its region_name and rtt_budget_ms as in
        inputs/regions.csv (check_clock recomputes its rtt_ms and served tok/s)."""
        for _ in self._assignment_rows(self.plan.get("rent_assignments", []), "rent assignment", self.inp.clouds, "cloud region"):
            pass  # check_clock recomputes a rent assignment's rtt_ms and served tok/s
        for a, where in self._assignment_rows(self.plan["assignments"], "assignment", self.inp.sites, "site"):
            self._compare("assignments", where, "served_tok_s", a["served_tok_s"], self._served(a), abs_=1e-3)
            self._compare("assignments", where, "rtt_ms", a["rtt_ms"], self._rtt_ms(a["region"], a["site"]))

    def check_jobs(self) -> None:
        """Each placement names a known job, site, fabric and chip; its fields mirror inputs/jobs.csv."""
        for p in self.plan["jobs"]:
            where = f"job {p['job']}"
            job = self.inp.jobs.get(p["job"])
            if job is None or p["site"] not in self.inp.sites or p["fabric"] not in self.inp.fabrics or p["chip"] not in self.inp.chips:
                self.fail("jobs", f"{where}: job, site ({p['site']}), fabric ({p['fabric']}) or chip ({p['chip']}) is not in inputs/.")
                continue
            if str(p["name"]) != str(job["name"]):
                self.fail("jobs", f"{where}: name is {p['name']!r}, inputs/jobs.csv says {job['name']!r}.")
            self._compare("jobs", where, "gpus_h100_equiv", p["gpus_h100_equiv"], float(job["gpus_h100_equiv"]), source="inputs/jobs.csv says")

    def check_status(self) -> None:
        """A status of the documented set; `optimal` or `feasible` exactly when plan.json carries a plan (a folder
        that claims no plan but holds decisions is checked as any plan, and named here); `optimal` only within
        options.mip_gap; gap = (objective - bound) / |objective|; bound <= objective."""
        solve = self.plan["solve"]
        status, gap = solve["status"], solve.get("gap")
        carried = self._carried()
        if status not in PLAN_STATUSES + NO_PLAN_STATUSES:
            self.fail("status", f"solve.status is {status!r}, not one of {', '.join(PLAN_STATUSES + NO_PLAN_STATUSES)}; "
                      "the plan it carries was checked as any plan.")
        elif status in NO_PLAN_STATUSES and carried:
            self.fail("status", f"solve.status is {status!r} (no plan), but plan.json carries {', '.join(carried)}: "
                      "a plan that claims there is none; it was checked as any plan.")
        elif status in PLAN_STATUSES and not self.plan.get("sites"):
            self.fail("status", f"solve.status is {status!r}, but plan.json lists no sites: there is no plan.")
        if status in PLAN_STATUSES and self.plan.get("diagnosis"):
            self.fail("status", f"solve.status is {status!r}, but plan.json carries a diagnosis of infeasibility.")
        provenance = self.plan.get("provenance") or {}
        solver = provenance.get("solver") if isinstance(provenance.get("solver"), dict) else {}
        if (solve.get("solver"), solve.get("solver_version")) != (solver.get("name"), solver.get("version")):
            self.fail("status", f"solve names solver {solve.get('solver')!r} {solve.get('solver_version')!r}; its provenance "
                      f"{solver.get('name')!r} {solver.get('version')!r}.")
        if solve.get("options") != provenance.get("options"):
            self.fail("status", "solve.options differ from the options of plan.json's provenance.")
        race = solve.get("race") if isinstance(solve.get("race"), dict) else {}
        if race.get("winner") is not None and status in PLAN_STATUSES:
            # the race's record must name the engine whose plan is here (its objectives are the engines' own
            # words, in the model's terms: with the clock the plan's cost is re-stated by dispatch, so not compared)
            if solve.get("solver") != race["winner"]:
                self.fail("status", f"solve.race names {race['winner']!r} the winner, but solve.solver is {solve.get('solver')!r}.")
        for key in ("build_time_s", "solve_time_s", "extract_time_s"):
            if key in solve and (not _is_number(solve[key]) or solve[key] < 0):
                self.fail("status", f"solve.{key} is {solve[key]!r}, not a time in seconds.")
        for key, value in (solve.get("model") or {}).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                self.fail("status", f"solve.model.{key} is {value!r}, not a count.")
        objective, bound = solve.get("objective_usd_per_year"), solve.get("best_bound_usd_per_year")
        mip_gap = (solve.get("options") or {}).get("mip_gap")
        if not _is_number(mip_gap):
            self.fail("status", f"solve.options.mip_gap is {mip_gap!r}, not a number.")
            mip_gap = 0.0
        if objective is not None and bound is not None:
            if bound > objective + max(ABS_TOL, REL_TOL * abs(objective)):
                self.fail("status", f"best bound ${bound:,.2f} exceeds the objective ${objective:,.2f}: impossible when minimizing.")
            expected = abs(objective - bound) / max(abs(objective), 1e-9)
            if gap is None or not _is_number(gap) or abs(gap - expected) > GAP_TOL + REL_TOL * expected:
                self.fail("status", f"gap is {gap!r}; (objective - bound) / |objective| = {expected:.6g}.")
        elif gap is not None:
            self.fail("status", f"gap {gap!r} is given without both an objective and a bound.")
        if status == "optimal":
            absolute = abs(objective - bound) if objective is not None and bound is not None else math.inf
            if gap is None or not _is_number(gap):
                self.fail("status", "status is 'optimal' without a gap: nothing proves it.")
            elif gap > mip_gap + GAP_TOL and absolute > ABS_TOL:
                self.fail("status", f"status is 'optimal' with gap {gap:.6g} above options.mip_gap {mip_gap:g}; it is 'feasible'.")

    def check_schema(self) -> None:
        """Every record of plan.json has the documented fields and no other (docs/plan-format.md): a figure the
        checker does not know is not shown unchecked by a report, map or compare; the words of the documented
        sets (role, purpose, kind, cost category) are the documented ones."""
        plan = self.plan

        def keys(where: str, record, fields: str, optional: str = "") -> bool:
            if not isinstance(record, dict):
                self.fail("schema", f"{where} is {type(record).__name__}, not a record.")
                return False
            allowed, required = set(fields.split()) | set(optional.split()), set(fields.split())
            unknown, missing = sorted(set(record) - allowed), sorted(required - set(record))
            if unknown:
                self.fail("schema", f"{where} has field(s) {', '.join(unknown)}, which the plan format does not have: "
                          "a figure the checker cannot check.")
            if missing:
                self.fail("schema", f"{where} lacks field(s) {', '.join(missing)}.")
            return not missing

        keys("plan.json", plan, PLAN_FIELDS, PLAN_OPTIONAL)
        try:
            datetime.fromisoformat(str(plan.get("created_utc")))
        except ValueError:
            self.fail("schema", f"plan.json created_utc is {plan.get('created_utc')!r}, not an ISO 8601 time.")
        solve = plan.get("solve")
        if keys("plan.json solve", solve, SOLVE_FIELDS, SOLVE_OPTIONAL):
            for key in ("pairs", "failover", "race", "options", "model"):
                if not isinstance(solve.get(key, {}), dict):
                    self.fail("schema", f"plan.json solve.{key} is not a record.")
        for name, fields, optional in (("assignments", ASSIGNMENT_FIELDS, ""), ("rent_assignments", ASSIGNMENT_FIELDS, ""),
                                       ("jobs", JOB_FIELDS, JOB_OPTIONAL), ("hourly", HOUR_FIELDS, HOUR_OPTIONAL),
                                       ("dispatch", DISPATCH_FIELDS, ""), ("backfill", BACKFILL_FIELDS, ""),
                                       ("rentals", RENTAL_FIELDS, RENTAL_OPTIONAL), ("routing", ROUTE_FIELDS, "")):
            rows = plan.get(name) or []
            if not isinstance(rows, list):
                self.fail("schema", f"plan.json {name} is not a list.")
                continue
            for i, row in enumerate(rows):
                keys(f"plan.json {name}[{i}]", row, fields, optional)
        for i, site in enumerate(plan.get("sites") or []):
            where = f"plan.json sites[{i}] ({site.get('id') if isinstance(site, dict) else '?'})"
            if not keys(where, site, SITE_FIELDS, SITE_OPTIONAL):
                continue
            if site["role"] not in ROLES:
                self.fail("schema", f"{where}: role {site['role']!r} is not one of {', '.join(ROLES)}.")
            for cat in sorted(set(site["cost_usd_per_year"]) - set(COST_CATEGORIES)):
                self.fail("schema", f"{where}: cost category {cat!r} is not one of the documented categories.")
            for w in sorted(set(site["served_tok_s"]) - set(self.inp.workloads)):
                self.fail("schema", f"{where}: served_tok_s names {w!r}, not a class of inputs/.")
            for j, ln in enumerate(site["racks"]):
                line = f"{where} racks[{j}]"
                if not keys(line, ln, RACK_FIELDS, RACK_OPTIONAL):
                    continue
                if ln["purpose"] == "inference" and (ln.get("workload") not in self.inp.workloads or ln.get("fabric")):
                    self.fail("schema", f"{line}: an inference line serves a class of inputs/ ({ln.get('workload')!r}) on no fabric.")
                elif ln["purpose"] == "training" and (ln.get("fabric") not in self.inp.fabrics or ln.get("workload")):
                    self.fail("schema", f"{line}: a training line sits on a fabric of inputs/ ({ln.get('fabric')!r}) for no class.")
                elif ln["purpose"] not in ("inference", "training"):
                    self.fail("schema", f"{line}: purpose {ln['purpose']!r} is neither inference nor training.")
                for cat in sorted(set(ln["cost_usd_per_year"]) - set(COST_CATEGORIES)):
                    self.fail("schema", f"{line}: cost category {cat!r} is not one of the documented categories.")
        for cat in sorted(set(plan.get("cost_breakdown_usd_per_year") or {}) - set(COST_CATEGORIES)):
            self.fail("schema", f"plan.json cost_breakdown_usd_per_year has {cat!r}, not one of the documented categories.")
        for i, ln in enumerate(plan.get("hourly") or []):
            if isinstance(ln, dict) and ln.get("kind") not in ("owned", "rented"):
                self.fail("schema", f"plan.json hourly[{i}]: kind {ln.get('kind')!r} is neither owned nor rented.")
        for i, ln in enumerate(plan.get("rentals") or []):
            if isinstance(ln, dict) and ln.get("kind") not in ("on_demand", "reserved", "training"):
                self.fail("schema", f"plan.json rentals[{i}]: kind {ln.get('kind')!r} is not on_demand, reserved or training.")
        clock = plan.get("clock") or {}
        if clock:
            keys("plan.json clock", clock, CLOCK_FIELDS)
        failover = (solve or {}).get("failover") if isinstance(solve, dict) else None
        if isinstance(failover, dict) and failover:
            keys("plan.json solve.failover", failover, FAILOVER_FIELDS, FAILOVER_OPTIONAL)
            rounds = failover.get("rounds")
            for i, rnd in enumerate(rounds if isinstance(rounds, list) else []):
                keys(f"plan.json solve.failover.rounds[{i}]", rnd, ROUND_FIELDS, ROUND_OPTIONAL)

    def check_tables(self) -> None:
        """sites.csv, assignments.csv and jobs.csv mirror plan.json row by row, column by column."""
        sites = self.plan["sites"]
        served = sorted({w for s in sites for w in s["served_tok_s"]})
        categories = sorted({c for s in sites for c in s["cost_usd_per_year"]})
        site_rows = []
        tenure_columns = any(x.get("tenure") is not None for x in sites)  # self-build on
        for s in sites:
            row = {"id": s["id"], "name": s["name"], "lat": s["lat"], "lon": s["lon"], "country": s["country"], "open": s["open"],
                   "role": s["role"], "zones": ";".join(s["zones"]), "fabrics": ";".join(s["fabrics"]), "racks": s["racks_total"],
                   "gpus": s["gpus"], "it_kw": s["it_kw"], "facility_kw": s["facility_kw"], "power_limit_kw": s["power_limit_kw"],
                   "floor_racks": s["floor_racks"], "emissions_t_per_year": s["emissions_t_per_year"],
                   "upfront_capex_usd": s["upfront_capex_usd"], "total_cost_usd_per_year": s["total_cost_usd_per_year"]}
            row.update({f"served_{w}_tok_s": s["served_tok_s"].get(w) for w in served})
            row.update({f"cost_{c}_usd_per_year": s["cost_usd_per_year"].get(c) for c in categories})
            if tenure_columns:
                row.update({"tenure": s.get("tenure") or "", "built_kw": s.get("built_kw")})
            site_rows.append(row)
        self._compare_table("sites.csv", "id", site_rows)
        fields = ("region", "region_name", "workload", "site", "share", "served_tok_s", "rtt_ms", "rtt_budget_ms")
        self._compare_table("assignments.csv", "region", [{k: a.get(k) for k in fields} for a in self.plan["assignments"]], fields)
        fields = ("job", "name", "site", "fabric", "chip", "gpus_h100_equiv")
        if any("standby_site" in p for p in self.plan["jobs"]):  # plan folders written since resilience (docs/resilience.md)
            fields += ("standby_site", "standby_fabric", "standby_chip")
        self._compare_table("jobs.csv", "job", [{k: p.get(k) for k in fields} for p in self.plan["jobs"]], fields)
        if self.plan.get("clock"):  # docs/clock.md
            for name, key in (("hourly", "place"), ("dispatch", "site"), ("backfill", "job"), ("rentals", "cloud"), ("rent_assignments", "region")):
                rows = self.plan.get(name, [])
                self._compare_table(f"{name}.csv", key, rows, list(rows[0]) if rows else None)
            if self.plan.get("routing") or self._routes_by_hour:  # routing per hour
                rows = self.plan.get("routing", [])
                self._compare_table("routing.csv", "region", rows, list(rows[0]) if rows else None)

    def _compare_table(self, name: str, key: str, rows: list[dict], columns=None) -> None:
        columns = list(columns or (rows[0] if rows else []))
        try:
            frame = pd.read_csv(self.folder / name, dtype=str, keep_default_na=False)
        except FileNotFoundError:
            self.fail("tables", f"{name} is missing; it is the flat view of plan.json.")
            return
        except (OSError, ValueError) as exc:
            self.fail("tables", f"{name} cannot be read ({type(exc).__name__}: {exc}).")
            return
        if rows and set(frame.columns) != set(columns):
            extra, missing = sorted(set(frame.columns) - set(columns)), sorted(set(columns) - set(frame.columns))
            self.fail("tables", f"{name} does not have plan.json's columns (extra: {extra or 'none'}; missing: {missing or 'none'}).")
            return
        if len(frame) != len(rows):
            self.fail("tables", f"{name} has {len(frame)} rows, plan.json has {len(rows)}.")
            return
        for i, (cells, row) in enumerate(zip(frame.to_dict("records"), rows)):
            for col in columns:
                value, cell = row[col], cells[col]
                if value is None:
                    ok = cell == ""
                elif isinstance(value, (bool, str)):
                    ok = cell in (str(value), spreadsheet_cell(str(value)))  # folders written before the quote: as is
                else:
                    try:
                        ok = _close(float(cell), float(value), rel=1e-9, abs_=1e-9)
                    except ValueError:
                        ok = False
                if not ok:
                    self.fail("tables", f"{name} row {i + 2} ({key} {row[key]}): {col} is {cell!r}, plan.json says {value!r}.")

    def run(self) -> CheckReport:
        """Every check_* family; a family that cannot read what it needs reports it as a violation."""
        solve = self.plan.get("solve") if isinstance(self.plan, dict) else None
        self.report.status = str(solve.get("status", "")) if isinstance(solve, dict) else ""
        self._run("check_manifest")
        if self.plan is None or self.inp is None:
            return self.report  # reported by __init__: nothing to recompute from
        if self.report.status in NO_PLAN_STATUSES and not self._carried():
            # no plan to check: the folder records why (plan.json "diagnosis"); what it does hold is checked
            for name in ("check_inputs", "check_provenance", "check_schema", "check_status"):
                self._run(name)
            return self.report
        # a plan: checked whatever its status says (check_status names a status that does not fit it)
        for name in sorted(n for n in dir(self) if n.startswith("check_") and n != "check_manifest"):
            self._run(name)
        return self.report

    def _carried(self) -> list[str]:
        """The decisions and figures plan.json carries (a plan-less folder carries none of them)."""
        plan = self.plan
        out = [key for key in DECISION_KEYS if plan.get(key)]
        out += [key for key in ("cost_breakdown_usd_per_year", "kpis") if plan.get(key)]
        if plan.get("objective_usd_per_year") is not None:
            out.append("objective_usd_per_year")
        return out

    def _run(self, name: str) -> None:
        try:
            getattr(self, name)()
        except Exception as exc:  # a damaged or tampered folder: a violation, never a traceback
            family = name.removeprefix("check_")
            what = (f"plan.json names {exc} where inputs/ has no such id, or a record lacks the field {exc}"
                    if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}")
            self.fail(family, f"this check could not read what it needs ({what}); the folder is damaged or was edited by hand.")
        self.report.checked.append(name.removeprefix("check_"))


def check_plan_folder(folder: str | Path) -> CheckReport:
    """Verify a plan folder; the report lists every violation found (it never raises on a
    damaged folder: a missing or unreadable file is a violation too)."""
    return PlanChecker(folder).run()
