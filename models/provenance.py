"""Provenance of a plan's input cells: (table, id, field) -> (basis, reference).

`basis` is the kind the data's provenance tables give a cell: `source`, `derived`, `rule`
or `assumption`; a cell with no record is "as given". One home for the rule, used by the
robustness study (ranges by kind), the GIS layers (a `<input>_basis` column per site
input), the report (assumptions box, appendix, the three assumptions that matter) and the
executive summary.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dcplace.models.interactivity import throughput_id
from dcplace.models.records import Scenario

AS_GIVEN = "as given"
IMPUTED = ("rule", "assumption")  # the kinds a strategist must know were filled in, not sourced


@dataclass(frozen=True)
class Provenance:
    """(table, id, field) -> (basis, reference); `origin` says where the rows came from."""

    rows: dict[tuple[str, str, str], tuple[str, str]]
    origin: str

    def get(self, table: str, id: str, field: str) -> tuple[str, str] | None:
        return self.rows.get((table, id, field))


def _read_provenance_csv(path: Path) -> dict[tuple[str, str, str], tuple[str, str]]:
    out = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if {"table", "id", "field", "basis", "reference"} <= set(row):
                out[(row["table"], row["id"], row["field"])] = (row["basis"], row["reference"])
    return out


def _cell_values(scenario: Scenario) -> dict[tuple[str, str, str], float]:
    """The plan's numeric input cells under the names the provenance tables use."""
    cells: dict[tuple[str, str, str], float] = {}
    for s in scenario.sites:
        for f in ("power_price_usd_per_mwh", "grid_carbon_g_per_kwh", "fixed_cost_usd_per_year", "colocation_usd_per_kw_month",
                  "pue_climate_factor", "floor_racks"):
            cells[("sites", s.id, f)] = float(getattr(s, f))
        cells[("sites", s.id, "power_limit_mw")] = s.power_limit_kw / 1000
        cells[("sites", s.id, "power_limit_kw")] = s.power_limit_kw
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
    found, origin = {}, ""
    for path, where in candidates:
        if path.is_file():
            found.update(_read_provenance_csv(path))
            origin = origin or where
    if found:
        return Provenance(found, origin)
    root = resources.files("dcplace.data")
    default_rows: dict[tuple[str, str, str], tuple[str, str]] = {}
    for rel in ("default/provenance.csv", "catalog/provenance.csv"):
        path = root / rel
        if path.is_file():
            default_rows.update(_read_provenance_csv(Path(str(path))))
    if not default_rows:
        return Provenance({}, "")
    mine, theirs = _cell_values(scenario), _default_cell_values()
    matched = {}
    for key, value in mine.items():
        other = theirs.get(key)
        if key in default_rows and other is not None and abs(other - value) <= 1e-9 * max(1.0, abs(value)):
            matched[key] = default_rows[key]
    return Provenance(matched, "the embedded default data's provenance (cells whose value matches the default)")


def basis(prov: Provenance, table: str, id: str, field: str) -> str:
    """The kind of one cell ("source", "derived", "rule", "assumption") or AS_GIVEN; a site's
    power limit is recorded in MW or kW by the data, under either name."""
    found = prov.get(table, id, field)
    if found is None and field == "power_limit_kw":
        found = prov.get(table, id, "power_limit_mw")
    return found[0] if found else AS_GIVEN
