"""The resolved scenario of a plan folder (inputs/), read as plain tables (`Inputs`), and the rules
`dcplace validate` holds it to, written again (`InputRules`, reported by `InputChecks.check_inputs`)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from dcplace.optimizer.checker.common import HOURS_PER_DAY, TEXT_COLUMNS, cell_text, is_number, split_list


class Inputs:
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
        self.tok_s = tok_s_at_targets(rows("throughput", f"{catalog}/throughput.csv"), self.workloads)
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
        self.footprint = {(r["site"], r["config"], r["cooling"], cell_text(r.get("workload")), cell_text(r.get("fabric"))): int(r["racks"])
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
WORKLOAD_RULES = (("load_factor", 0, 1, "g"), ("interactivity_tok_s_per_user", 0, 1000, "go"))
THROUGHPUT_RULES = (("tok_s_per_gpu", 0, INF, "g"), ("tok_s_per_user", 0, 1000, "go"))
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
# The rules a period's derived inputs are held to instead (InputRules, `derived`).
DERIVED = {("sites", "power_price_usd_per_mwh"): (0, INF, ""), ("jobs", "gpus_h100_equiv"): (0, INF, "")}
YES_NO = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def tok_s_at_targets(rows: list[dict], workloads: dict[str, dict]) -> dict[tuple[str, str], float]:
    """(chip, class) -> tok/s per GPU, recomputed from the recorded throughput rows: a row without
    tok_s_per_user is the figure; rows with it are a curve read at the class's
    interactivity_tok_s_per_user, linear between points, the loosest point's figure when the target
    is looser, no figure (the chip cannot serve the class) when it is stricter than every point."""
    out: dict[tuple[str, str], float] = {}
    curves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        key = (r["chip"], r["workload"])
        if _blank(r.get("tok_s_per_user")):
            out[key] = r["tok_s_per_gpu"]
        else:
            curves.setdefault(key, []).append((float(r["tok_s_per_user"]), float(r["tok_s_per_gpu"])))
    for (chip, w), points in curves.items():
        target = (workloads.get(w) or {}).get("interactivity_tok_s_per_user")
        if _blank(target):
            continue
        target, points = float(target), sorted(points)
        if target <= points[0][0]:
            out[chip, w] = points[0][1]
        for (u0, g0), (u1, g1) in zip(points, points[1:]):
            if u0 < target <= u1:
                out[chip, w] = g0 + (g1 - g0) * (target - u0) / (u1 - u0)
    return out


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


def rule_problem(value, low, high, flags: str) -> str | None:
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


class InputRules:
    """What `dcplace validate` refuses in a folder's inputs/ (models/records.py, models/clock_inputs.py; the rules
    written again above): every number the checkers recompute from outside its range, ids missing, repeated or
    unknown where another table names them, a daily profile without each of its 24 hours or not peaking at 1.
    `derived`: the inputs of one period of a schedule, derived from the schedule's (whose own inputs are held to
    every rule): a power price times the period's factor and a job's GPUs times its training multiplier may leave
    the ranges a file's values are held to (the schedule checker verifies the derivation)."""

    def __init__(self, inp: "Inputs", derived: bool = False):
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
                        why = rule_problem(row.get(column), low, high, flags)
                        if why:
                            bad(f"{label(name, i, row)}: {column}", why)
        for section, rules in SECTION_RULES.items():
            values = spec.get(section) or {}
            if not isinstance(values, dict):
                bad(f"inputs/scenario.yaml {section}", "is not a mapping")
                continue
            for key, low, high, flags in rules:
                why = rule_problem(values.get(key), low, high, flags)
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
            if is_number(price) and 0 < price < 5 and not self.derived:
                bad(f"{where}: power_price_usd_per_mwh", f"is {price!r}, a price per kWh, not per MWh")
            allowed = split_list(row.get("cooling_allowed"))
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
            point = None if _blank(row.get("tok_s_per_user")) else float(row["tok_s_per_user"])
            if (row.get("chip"), row.get("workload"), point) in pairs:
                bad(f"inputs/{name} row {i + 2}", f"gives {row.get('chip')} on '{row.get('workload')}' a second time")
            pairs.add((row.get("chip"), row.get("workload"), point))
        for chip, w in sorted({(chip, w) for chip, w, point in pairs if point is not None}, key=str):
            if (chip, w, None) in pairs:
                bad(f"inputs/{name}", f"gives {chip} on '{w}' both one figure and a curve")
            if _blank((inp.workloads.get(w) or {}).get("interactivity_tok_s_per_user")):
                bad(f"inputs/catalog/workloads.csv ({w}): interactivity_tok_s_per_user", "is empty, but throughput gives the class a curve")
        classes = set(inp.workloads)
        name, rows = inp.tables["regions"]
        for i, row in enumerate(rows):
            where = label(name, i, row)
            for column in row:
                for prefix, suffix in (("demand_", "_tok_s"), ("rtt_budget_", "_ms"), ("failover_rtt_", "_ms")):
                    if column.startswith(prefix) and column.endswith(suffix) and column[len(prefix):-len(suffix)] not in classes:
                        bad(f"{where}: {column}", "names a class the catalog does not have")
            for w in classes:
                why = rule_problem(row.get(f"demand_{w}_tok_s"), 0, INF, "o")
                if why:
                    bad(f"{where}: demand_{w}_tok_s", why)
                demand = row.get(f"demand_{w}_tok_s")
                needed = "g" if not why and not _blank(demand) and _number_of(demand) > 0 else "go"
                why = rule_problem(row.get(f"rtt_budget_{w}_ms"), 0, INF, needed)
                if why:
                    bad(f"{where}: rtt_budget_{w}_ms", why)
                why = rule_problem(row.get(f"failover_rtt_{w}_ms"), 0, INF, "go")
                if why:
                    bad(f"{where}: failover_rtt_{w}_ms", why)
        if "jobs" in inp.tables:
            name, rows = inp.tables["jobs"]
            for i, row in enumerate(rows):
                where = label(name, i, row)
                for c in split_list(row.get("eligible_chips")):
                    if c not in inp.chips:
                        bad(f"{where}: eligible_chips", f"names {c!r}, not a chip of the catalog")
                for column in ("standby_required", "interruptible"):
                    try:
                        _yes_no(row.get(column))
                    except ValueError:
                        bad(f"{where}: {column}", f"is {row.get(column)!r}, not true or false")
                if is_number(row.get("from_year")) and is_number(row.get("to_year")) and row["to_year"] < row["from_year"]:
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
                if rule_problem(row.get("local_hour"), 0, 23, "i") or rule_problem(row.get("load"), 0, 1, ""):
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
            survive = split_list(survive)
        if isinstance(survive, list):
            survive = {w: 1.0 for w in survive}
        if not isinstance(survive, dict):
            bad("inputs/scenario.yaml policies.survive_site_loss", f"is {survive!r}, not classes with shares")
            survive = {}
        for w, share in survive.items():
            if w not in inp.workloads:
                bad("inputs/scenario.yaml policies.survive_site_loss", f"names {w!r}, not a class of the catalog")
            why = rule_problem(1.0 if share is True else share, 0, 1, "g")
            if why:
                bad(f"inputs/scenario.yaml policies.survive_site_loss.{w}", why)
        failover = pol.get("failover_rtt_ms") or {}
        for w, ms in (failover.items() if isinstance(failover, dict) else []):
            if w not in inp.workloads:
                bad("inputs/scenario.yaml policies.failover_rtt_ms", f"names {w!r}, not a class of the catalog")
            why = rule_problem(ms, 0, INF, "g")
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
            tiers = [f["tier"] for f in inp.fabrics.values() if is_number(f.get("tier"))]
            if inp.clock_on and is_number(tier) and tier > max(tiers, default=0):
                bad("inputs/scenario.yaml clock.inference_fabric_tier", f"is {tier!r}, above every fabric's tier")



class InputChecks:
    """The `inputs` family: a plan recomputed from inputs dcplace refuses proves nothing."""

    def check_inputs(self) -> None:
        """inputs/ holds only what `dcplace validate` accepts (InputRules): a plan recomputed from inputs dcplace
        refuses proves nothing, so each refusal is a violation."""
        for problem in InputRules(self.inp, self.period).run():
            self.fail("inputs", problem)
