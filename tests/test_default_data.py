"""The embedded default: every number has a source, a rule or an assumption; the data is coherent."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dcplace.models import load_scenario

DATA = Path(__file__).resolve().parent.parent / "data"
BASES = {"source", "derived", "rule", "assumption"}


def read(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def numeric_cells(path):
    for row in read(path):
        key = row.get("id") or f"{row['chip']}/{row['workload']}"
        for field, value in row.items():
            try:
                float(value)
            except (TypeError, ValueError):
                continue
            yield key, field


@pytest.mark.parametrize(
    "table,folder",
    [("chips", "catalog"), ("rack_configs", "catalog"), ("cooling", "catalog"), ("fabrics", "catalog"),
     ("workloads", "catalog"), ("throughput", "catalog"), ("sites", "default")],
)
def test_every_numeric_cell_has_provenance(table, folder):
    provenance = {(r["id"], r["field"]): r for r in read(DATA / folder / "provenance.csv") if r["table"] == table}
    cells = list(numeric_cells(DATA / folder / f"{table}.csv"))
    assert cells
    missing = [c for c in cells if c not in provenance]
    assert not missing, f"{table}: cells without a source or assumption marker: {missing[:10]}"
    for cell in cells:
        entry = provenance[cell]
        assert entry["basis"] in BASES, entry
        assert len(entry["reference"]) > 10, f"{table} {cell}: the marker must say where the number comes from or why"


def test_default_covers_the_world():
    scenario = load_scenario()
    assert len(scenario.sites) >= 60
    continents = {
        "NA": {"US", "CA"}, "EU": {"DE", "GB", "NL", "FR", "IE", "SE"}, "APAC": {"SG", "JP", "AU", "IN"},
        "LATAM": {"BR", "MX", "CL"}, "ME": {"AE", "SA"}, "AF": {"ZA", "NG", "KE"},
    }
    countries = {s.country for s in scenario.sites}
    for name, members in continents.items():
        assert countries & members, f"no candidate market in {name}"
    assert len(scenario.regions) >= 300
    assert len({r.country for r in scenario.regions}) >= 60
    chips = {c.id for c in scenario.catalog.chips}
    assert {"gb200", "b200", "h200", "h100", "mi300x", "l40s", "l4"} <= chips
    per_chip = {}
    for k in scenario.catalog.rack_configs:
        per_chip.setdefault(k.chip, []).append(k.kw_per_rack)
    air_max = next(c.max_kw_per_rack for c in scenario.catalog.cooling if c.id == "air")
    for chip in ("b200", "h200", "h100", "mi300x"):
        kws = per_chip[chip]
        assert min(kws) <= air_max < max(kws), f"{chip} has an air-coolable and a liquid-only configuration"
    assert {c.id for c in scenario.catalog.cooling} == {"air", "rdhx", "dlc", "immersion"}


def test_metros_merge_boroughs_into_one_region():
    regions = {r.name: r for r in load_scenario().regions}
    assert "New York City" in regions and "Brooklyn" not in regions and "Queens" not in regions
    assert regions["New York City"].population > 8_000_000
