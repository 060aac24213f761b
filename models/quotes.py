"""The user's own figures in place of the default's fills, in one step (`dcplace data quotes`).

A quotes file is a CSV, one quote a row:

```
site,field,value,source,date
montreal,colocation_usd_per_kw_month,128,Broker quote ACME-2026-114 (250-500 kW),2026-11-30
dublin,power_limit_mw,24,ESB connection offer 7731 (own gas turbines),2026-10
```

`site` (or `market`) is a site id of the base scenario; `field` a numeric site column
(QUOTE_FIELDS); `value` a number in that column's unit; `source` who gave the figure; `date`
when (YYYY, YYYY-MM or YYYY-MM-DD). `write_quote_scenario` writes a folder holding a scenario
YAML that `extends` the base and overrides exactly those cells (models/overrides.py), and a
`provenance.csv` beside it: the base's provenance rows, each quoted cell replaced by basis
`source` naming the quote (file, row, source, date), which `models.provenance.input_provenance`
reads for the new scenario. A quoted power limit for a site the base forbids (the default's
markets with no new grid power: Dublin, Montreal) lifts that ban: the user has an allocation.
Bad rows are reported all at once by file, row and field, with a fix (ScenarioError).
"""

from __future__ import annotations

import csv
import difflib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.outputs import check_new_folder, drop_stage, new_stage
from dcplace.models.scenario_file import default_catalog_dir, default_scenario_path, load_scenario

# field -> (unit, low, high): the numeric site columns a quote may set, with the bounds dcplace
# accepts for them (models/records.py), so a bad figure is named here, on its row of the quotes file.
QUOTE_FIELDS = {
    "colocation_usd_per_kw_month": ("USD per kW of IT per month", 0, 10_000),
    "power_price_usd_per_mwh": ("USD per MWh", 0, 2000),
    "power_limit_mw": ("MW of facility power", 0, 10_000),
    "build_usd_per_mw": ("USD per MW of IT", 1e5, 1e9),
    "grid_carbon_g_per_kwh": ("g CO2e per kWh", 0, 2000),
    "pue_climate_factor": ("multiplier on PUE - 1", 0, 3),
    "fixed_cost_usd_per_year": ("USD per year", 0, 1e12),
}
COLUMNS = ("site", "field", "value", "source", "date")
KW_PER_RACK_POSITION = 15.0  # the default's floor-space rule (data/README.md "Power limit")
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


@dataclass(frozen=True)
class Quote:
    """One row of a quotes file."""

    row: int  # line number in the file (the header is line 1)
    site: str
    field: str
    value: float
    source: str
    date: str

    def reference(self, file: str) -> str:
        return f"user quote: {self.source}, {self.date} ({file}, row {self.row})"


def read_quotes(path: str | Path, site_ids: set[str]) -> list[Quote]:
    """The quotes of a CSV file, checked against the base's site ids; raises ScenarioError naming
    every bad row by file, row and field, with a fix."""
    path = Path(path)
    label = path.name
    problems: list[InputProblem] = []
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [(h or "").strip().lower() for h in (reader.fieldnames or [])]
        reader.fieldnames = ["site" if h == "market" else h for h in header]
        missing = [c for c in COLUMNS if c not in reader.fieldnames]
        if missing:
            raise ScenarioError([InputProblem(label, 1, None, f"the header lacks {', '.join(missing)} (it has "
                                              f"{', '.join(header) or 'nothing'}).",
                                              "begin the file with the line: site,field,value,source,date")])
        quotes, seen = [], {}
        for number, raw in enumerate(reader, start=2):
            row = {k: (v or "").strip() for k, v in raw.items() if k}
            if not any(row.values()):
                continue
            bad = len(problems)
            sid, field = row["site"], row["field"]
            if sid not in site_ids:
                close = difflib.get_close_matches(sid, sorted(site_ids), n=1)
                problems.append(InputProblem(label, number, "site", f"'{sid}' is not a site of the base scenario.",
                                             f"did you mean '{close[0]}'?" if close else "use a site id of the base's sites table."))
            if field not in QUOTE_FIELDS:
                close = difflib.get_close_matches(field, list(QUOTE_FIELDS), n=1)
                problems.append(InputProblem(label, number, "field", f"'{field}' is not a site figure a quote can set.",
                                             (f"did you mean '{close[0]}'? " if close else "") + "use one of " + ", ".join(QUOTE_FIELDS) + "."))
            value = math.nan
            try:
                value = float(row["value"].replace(",", "")) if row["value"] else math.nan
            except ValueError:
                pass
            if not math.isfinite(value):
                problems.append(InputProblem(label, number, "value", f"'{row['value']}' is not a number.",
                                             "give the figure as a plain number in the field's unit, e.g. 128."))
            elif field in QUOTE_FIELDS:
                unit, low, high = QUOTE_FIELDS[field]
                strict_low = field in ("power_limit_mw", "pue_climate_factor")
                if value < low or value > high or (strict_low and value <= low):
                    above = f"above {low:g}" if strict_low else f"from {low:g}"
                    problems.append(InputProblem(label, number, "value", f"{value:g} is not a {field} dcplace accepts "
                                                 f"({above} to {high:g} {unit}).", f"give {field} in {unit}."))
            if not row["source"]:
                problems.append(InputProblem(label, number, "source", "the quote names no source.",
                                             "say who gave the figure (a broker, a utility offer, a contract), so the plan can name it."))
            if not _DATE.match(row["date"]):
                problems.append(InputProblem(label, number, "date", f"'{row['date']}' is not a date.",
                                             "write it as YYYY, YYYY-MM or YYYY-MM-DD, e.g. 2026-11-30."))
            if len(problems) == bad and (sid, field) in seen:
                problems.append(InputProblem(label, number, "field", f"{sid} {field} is quoted again (first on row {seen[sid, field]}).",
                                             "keep one quote per site and field."))
            if len(problems) == bad:
                seen[sid, field] = number
                quotes.append(Quote(number, sid, field, value, row["source"], row["date"]))
    if problems:
        raise ScenarioError(problems)
    if not quotes:
        raise ScenarioError([InputProblem(label, None, None, "the file has no quote.", "add one row per quoted figure under the header.")])
    return quotes


def _base_provenance_files(base_path: Path | None) -> list[Path]:
    if base_path is None:
        return [default_scenario_path().parent / "provenance.csv", default_catalog_dir() / "provenance.csv"]
    return [p for p in (base_path.parent / "provenance.csv", base_path.parent / "catalog" / "provenance.csv") if p.is_file()]


def write_quote_scenario(quotes_path: str | Path, folder: str | Path, base: str | Path | None = None) -> tuple[Path, list[Quote]]:
    """Write `folder`/scenario.yaml (extends `base`, None = the embedded default, and overrides the
    quoted cells) and `folder`/provenance.csv (the base's rows, the quoted cells as the user's
    sources). Returns the YAML path and the quotes. Raises ScenarioError for a bad base or quotes
    file (OutputRefused for a folder that is not new or empty)."""
    base_path = None if base in (None, "default") else Path(base).resolve()
    scenario = load_scenario(base_path)
    quotes = read_quotes(quotes_path, {s.id for s in scenario.sites})
    label = Path(quotes_path).name
    folder = check_new_folder(folder)
    overrides: dict[str, object] = {}
    for q in quotes:
        value = int(q.value) if q.value.is_integer() else q.value
        if q.field == "power_limit_mw":  # set in kW: it converts a table given in either unit (models/overrides.py)
            kw = q.value * 1000
            overrides[f"sites[{q.site}].power_limit_kw"] = int(kw) if kw.is_integer() else kw
        else:
            overrides[f"sites[{q.site}].{q.field}"] = value
    # A quoted power limit carries the floor space the base derived from its own limit (the default's
    # rule: power / 15 kW per rack position), unless the base gave the site more room than that rule.
    floor_rule: dict[str, int] = {}
    sites = {s.id: s for s in scenario.sites}
    for q in quotes:
        if q.field == "power_limit_mw":
            site = sites[q.site]
            if site.floor_racks == math.floor(site.power_limit_kw / KW_PER_RACK_POSITION):
                floor_rule[q.site] = math.floor(q.value * 1000 / KW_PER_RACK_POSITION)
                overrides[f"sites[{q.site}].floor_racks"] = floor_rule[q.site]
    lifted = sorted({q.site for q in quotes if q.field == "power_limit_mw"} & set(scenario.policies.forbidden_sites))
    if lifted:
        overrides["policies.forbidden_sites"] = [s for s in scenario.policies.forbidden_sites if s not in lifted]
    extends = "default" if base_path is None else os.path.relpath(base_path, folder)
    document = {
        "name": f"{scenario.name}+quotes",
        "extends": extends,
        "description": f"{scenario.name} with {len(quotes)} quoted figure(s) from {label} in place of its own; "
                       "provenance.csv beside this file names each quote"
                       + (f"; a quoted power limit lifts the ban on {', '.join(lifted)}" if lifted else "") + ".",
        "overrides": overrides,
    }
    quoted = {("sites", q.site, q.field): q for q in quotes}
    rows: list[dict] = []
    for path in _base_provenance_files(base_path):
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if (row.get("table"), row.get("id"), row.get("field")) in quoted:
                    continue
                if row.get("table") == "sites" and row.get("field") == "floor_racks" and row.get("id") in floor_rule:
                    q = quoted["sites", row["id"], "power_limit_mw"]
                    row = {**row, "basis": "rule", "low": "", "high": "",
                           "reference": f"floor space = power / {KW_PER_RACK_POSITION:g} kW per rack position, from the quoted "
                                        f"power limit ({q.reference(label)})"}
                rows.append({k: row.get(k, "") for k in ("table", "id", "field", "basis", "reference", "low", "high")})
    for q in quotes:
        rows.append({"table": "sites", "id": q.site, "field": q.field, "basis": "source", "reference": q.reference(label),
                     "low": "", "high": ""})
    stage = new_stage(folder)
    try:
        header = f"# Written by `dcplace data quotes {label}`: the user's quotes in place of the base's figures.\n"
        (stage / "scenario.yaml").write_text(header + yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
        with (stage / "provenance.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=["table", "id", "field", "basis", "reference", "low", "high"])
            writer.writeheader()
            writer.writerows(rows)
        # the written scenario must load before it is put in place (the stage sits beside the folder,
        # so `extends` resolves the same from both)
        load_scenario(stage / "scenario.yaml")
        if folder.exists():
            folder.rmdir()  # empty (check_new_folder)
        os.rename(stage, folder)
    finally:
        drop_stage(stage)
    return folder / "scenario.yaml", quotes
