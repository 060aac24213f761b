"""Provenance of a plan's input cells: (table, id, field) -> (basis, reference).

`basis` is the kind the data's provenance tables give a cell: `source`, `derived`, `rule`
or `assumption`; a cell with no record is "as given". A row may also carry the cell's range
(`low`, `high`: the spread of the markets that publish the figure, in the cell's own unit),
kept in `Provenance.ranges`; the robustness study samples within it. One home for the rule, used by the
robustness study (ranges by kind), the GIS layers (a `<input>_basis` column per site
input), the report (assumptions box, appendix, the three assumptions that matter) and the
executive summary.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from dcplace.models.interactivity import throughput_id
from dcplace.models.records import Scenario

AS_GIVEN = "as given"
IMPUTED = ("rule", "assumption")  # the kinds a strategist must know were filled in, not sourced


@dataclass(frozen=True)
class Provenance:
    """(table, id, field) -> (basis, reference); `origin` says where the rows came from."""

    rows: dict[tuple[str, str, str], tuple[str, str]]
    origin: str
    ranges: dict[tuple[str, str, str], tuple[float, float]] = field(default_factory=dict)  # (low, high) where recorded

    def get(self, table: str, id: str, field: str) -> tuple[str, str] | None:
        return self.rows.get((table, id, field))

    def range(self, table: str, id: str, field: str) -> tuple[float, float] | None:
        """The cell's recorded (low, high), or None where its row gives none."""
        return self.ranges.get((table, id, field))


Rows = dict[tuple[str, str, str], tuple[str, str]]
Ranges = dict[tuple[str, str, str], tuple[float, float]]


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def _read_provenance_csv(path: Path) -> tuple[Rows, Ranges]:
    rows, ranges = {}, {}
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if {"table", "id", "field", "basis", "reference"} <= set(row):
                key = (row["table"], row["id"], row["field"])
                rows[key] = (row["basis"], row["reference"])
                low, high = _number(row.get("low")), _number(row.get("high"))
                if low is not None and high is not None and low <= high:
                    ranges[key] = (low, high)
    return rows, ranges


def _cell_values(scenario: Scenario) -> dict[tuple[str, str, str], float]:
    """The plan's numeric input cells under the names the provenance tables use."""
    cells: dict[tuple[str, str, str], float] = {}
    for s in scenario.sites:
        for f in ("power_price_usd_per_mwh", "grid_carbon_g_per_kwh", "fixed_cost_usd_per_year", "colocation_usd_per_kw_month",
                  "pue_climate_factor", "floor_racks"):
            cells[("sites", s.id, f)] = float(getattr(s, f))
        cells[("sites", s.id, "power_limit_mw")] = s.power_limit_kw / 1000
        cells[("sites", s.id, "power_limit_kw")] = s.power_limit_kw
        if s.build_usd_per_mw is not None:
            cells[("sites", s.id, "build_usd_per_mw")] = float(s.build_usd_per_mw)
    for f, v in scenario.economics.model_dump().items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            cells[("economics", "default", f)] = float(v)
    c = scenario.catalog
    for table, records in (("chips", c.chips), ("cooling", c.cooling), ("fabrics", c.fabrics), ("rack_configs", c.rack_configs),
                           ("workloads", c.workloads)):
        for r in records:
            for f, v in r.model_dump().items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    cells[(table, r.id, f)] = float(v)
    for t in c.throughput:
        for f in ("tok_s_per_gpu", "tok_s_per_user"):
            if getattr(t, f) is not None:
                cells[("throughput", throughput_id(t.chip, t.workload, t.tok_s_per_user), f)] = float(getattr(t, f))
    return cells


def _default_cell_values() -> dict[tuple[str, str, str], float]:
    root = resources.files("dcplace.data")
    out: dict[tuple[str, str, str], float] = {}
    for table, rel in (("sites", "default/sites.csv"), ("chips", "catalog/chips.csv"), ("cooling", "catalog/cooling.csv"),
                       ("fabrics", "catalog/fabrics.csv"), ("rack_configs", "catalog/rack_configs.csv"),
                       ("workloads", "catalog/workloads.csv"), ("throughput", "catalog/throughput.csv")):
        path = root / rel
        if not path.is_file():
            continue
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                ident = row.get("id") or throughput_id(row["chip"], row["workload"], float(row.get("tok_s_per_user") or "nan"))
                for f, v in row.items():
                    try:
                        out[(table, ident, f)] = float(v)
                    except (TypeError, ValueError):
                        pass
    path = root / "default" / "scenario.yaml"
    if path.is_file():
        economics = yaml.safe_load(path.read_text(encoding="utf-8")).get("economics") or {}
        for f, v in economics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[("economics", "default", f)] = float(v)
    return out


def input_provenance(scenario: Scenario, folder: Path | None = None) -> Provenance:
    """Where each input cell of a scenario came from: the provenance tables in a plan folder's
    inputs (`folder`), else a `provenance.csv` beside the scenario's file, else the embedded
    default data's for the cells whose value equals the default's (a cell changed by an
    override or given by the user has no recorded source)."""
    candidates = []
    if folder is not None:
        candidates += [(Path(folder) / "inputs" / "provenance.csv", "the provenance tables in the plan's inputs"),
                       (Path(folder) / "inputs" / "catalog" / "provenance.csv", "the provenance tables in the plan's inputs")]
    embedded = Path(str(resources.files("dcplace.data"))).resolve()
    if scenario.source_path and embedded not in Path(scenario.source_path).resolve().parents:  # the default: matched by value below
        candidates.append((Path(scenario.source_path).parent / "provenance.csv", "the provenance table beside the scenario"))
    found, found_ranges, origin = {}, {}, ""
    for path, where in candidates:
        if path.is_file():
            rows, ranges = _read_provenance_csv(path)
            found.update(rows)
            found_ranges.update(ranges)
            origin = origin or where
    if found:
        return Provenance(found, origin, found_ranges)
    root = resources.files("dcplace.data")
    default_rows: Rows = {}
    default_ranges: Ranges = {}
    for rel in ("default/provenance.csv", "catalog/provenance.csv"):
        path = root / rel
        if path.is_file():
            rows, ranges = _read_provenance_csv(Path(str(path)))
            default_rows.update(rows)
            default_ranges.update(ranges)
    if not default_rows:
        return Provenance({}, "")
    mine, theirs = _cell_values(scenario), _default_cell_values()
    matched = {}
    for key, value in mine.items():
        other = theirs.get(key)
        if key in default_rows and other is not None and abs(other - value) <= 1e-9 * max(1.0, abs(value)):
            matched[key] = default_rows[key]
    return Provenance(matched, "the embedded default data's provenance (cells whose value matches the default)",
                      {k: v for k, v in default_ranges.items() if k in matched})


def basis(prov: Provenance, table: str, id: str, field: str) -> str:
    """The kind of one cell ("source", "derived", "rule", "assumption") or AS_GIVEN; a site's
    power limit is recorded in MW or kW by the data, under either name."""
    found = prov.get(table, id, field)
    if found is None and field == "power_limit_kw":
        found = prov.get(table, id, "power_limit_mw")
    return found[0] if found else AS_GIVEN
