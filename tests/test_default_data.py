"""The embedded default: every number has a source, a rule or an assumption; the data is coherent."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dcplace.models import load_scenario
from dcplace.models.interactivity import throughput_id

DATA = Path(__file__).resolve().parent.parent / "data"
BASES = {"source", "derived", "rule", "assumption"}


def read(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def numeric_cells(path):
    for row in read(path):
        key = row.get("id") or throughput_id(row["chip"], row["workload"], float(row.get("tok_s_per_user") or "nan"))
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


def test_training_equivalence_is_measured_time_to_train():
    """Issue 14: h100_equiv of the chips MLPerf Training has measured is (H100 time x 8) / (chip
    time x 8) on llama2_70b_lora at 8 accelerators, the fastest closed submission per chip (v5.0;
    H100 from v4.1, bridged through H200), not a ratio of peak FLOPS."""
    best = {}
    for r in read(DATA / "reference" / "mlperf_training.csv"):
        if r["accelerators"] == "8" and r["benchmark"] == "llama2_70b_lora":
            key = (r["round"], r["chip"])
            best[key] = min(best.get(key, float("inf")), float(r["time_to_train_min"]))
    h100 = best["v4.1", "h100"] * best["v5.0", "h200"] / best["v4.1", "h200"]
    expected = {"h200": best["v4.1", "h100"] / best["v4.1", "h200"], "h100": 1.0,
                **{chip: h100 / best["v5.0", chip] for chip in ("gb200", "b200", "mi300x")}}
    chips = {r["id"]: float(r["h100_equiv"]) for r in read(DATA / "catalog" / "chips.csv")}
    provenance = {r["id"]: r for r in read(DATA / "catalog" / "provenance.csv") if r["table"] == "chips" and r["field"] == "h100_equiv"}
    for chip, value in expected.items():
        assert chips[chip] == pytest.approx(value, abs=0.005), chip
        if chip != "h100":
            assert provenance[chip]["basis"] == "derived" and "MLPerf Training" in provenance[chip]["reference"], chip
    # MI300X trains slower than H100 on a measured run, though its peak BF16 is 1.32x H100's.
    assert chips["mi300x"] < 1.0 < chips["h200"] < chips["b200"] < chips["gb200"]


def test_metros_merge_boroughs_into_one_region():
    regions = {r.name: r for r in load_scenario().regions}
    assert "New York City" in regions and "Brooklyn" not in regions and "Queens" not in regions
    assert regions["New York City"].population > 8_000_000


# ------------------------------------------------------------------ how much is sourced

SITE_ECONOMICS = ("power_price_usd_per_mwh", "grid_carbon_g_per_kwh", "colocation_usd_per_kw_month")
IMPUTED = {"rule", "assumption"}
# The share of the three site-economics fields (all 76 markets) that may be a rule fill or an
# assumption. Issue 14 asks for at most 15 %, i.e. at most 34 of the 228 cells; power price has 5
# and colocation 70 (6 markets have a comparable figure of their own), so the total is 75 (33 %,
# see the xfail below). Reaching the target needs at least 47 comparable colocation figures.
POWER_PRICE_IMPUTED_MAX = 0.10  # GB, HK, PE, and Ontario and Alberta (the Canadian figure is Quebec's)
GRID_CARBON_IMPUTED_MAX = 0.0   # Ember 2024 for every country, Electricity Maps 2024 for every US market
SITE_ECONOMICS_IMPUTED_MAX = 0.15


def site_bases() -> dict[str, list[str]]:
    rows = [r for r in read(DATA / "default" / "provenance.csv") if r["table"] == "sites"]
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["field"], []).append(r["basis"])
    return out


def imputed_share(bases: list[str]) -> float:
    return sum(b in IMPUTED for b in bases) / len(bases)


def test_power_price_and_grid_carbon_are_sourced_per_market():
    bases = site_bases()
    assert imputed_share(bases["power_price_usd_per_mwh"]) <= POWER_PRICE_IMPUTED_MAX
    assert imputed_share(bases["grid_carbon_g_per_kwh"]) <= GRID_CARBON_IMPUTED_MAX


def test_one_vintage_per_figure():
    """Power prices are 2024 industrial figures, grid carbon 2024 lifecycle intensities
    (Ember's latest year where a country has no 2024 row: Hong Kong, Indonesia, Israel)."""
    rows = [r for r in read(DATA / "default" / "provenance.csv") if r["table"] == "sites"]
    for r in rows:
        if r["field"] == "power_price_usd_per_mwh" and r["basis"] not in IMPUTED:
            assert "2024" in r["reference"], r
        if r["field"] == "grid_carbon_g_per_kwh":
            assert "2024" in r["reference"] or r["id"] in {"hong-kong", "jakarta", "tel-aviv"}, r


@pytest.mark.xfail(strict=True, reason=(
    "issue 14's 15 % target is not met (75 of 228 cells, 33 %): colocation is a CBRE set average for 70 of 76 "
    "markets because CBRE publishes most markets' asking rates only as chart images and no other comparable "
    "per-market figure was found for them; power price and grid carbon are within it"))
def test_site_economics_are_at_most_15_percent_imputed():
    bases = site_bases()
    cells = [b for field in SITE_ECONOMICS for b in bases[field]]
    assert imputed_share(cells) <= SITE_ECONOMICS_IMPUTED_MAX


def test_colocation_uses_the_markets_own_figure_where_one_was_found():
    """Markets with a comparable published colocation figure in colocation_prices.csv
    (COLO_MARKET_ROWS: CBRE's 250-500 kW series, dated) get it; the others keep the CBRE set
    average (rule), and this states how many. A figure found for another requirement size or
    of unknown vintage (COLO_NOT_COMPARABLE) is named in the rule's reference."""
    rows = {r["id"]: r for r in read(DATA / "default" / "provenance.csv")
            if r["table"] == "sites" and r["field"] == "colocation_usd_per_kw_month"}
    own = {sid for sid, r in rows.items() if r["basis"] not in IMPUTED}
    assert own == {"ashburn", "phoenix", "chicago", "singapore", "tokyo", "santa-clara"}
    assert len(rows) - len(own) == 70  # the CBRE set averages: markets without a comparable figure of their own
    for sid in ("dallas", "secaucus", "london", "frankfurt", "chennai", "hyderabad", "hillsboro"):
        assert "is not comparable" in rows[sid]["reference"], rows[sid]


def test_power_limits_come_from_published_market_size_where_it_exists():
    """Markets with a published size (market_power.csv or the December 2026 market search), a country
    total, a cap or a moratorium get a derived power limit; the others the fill of their tier (rule),
    and this states how many (issue 48: at most 46 of 76 on a rule or an assumption, was 54)."""
    rows = {r["id"]: r for r in read(DATA / "default" / "provenance.csv")
            if r["table"] == "sites" and r["field"] == "power_limit_mw"}
    derived = {sid for sid, r in rows.items() if r["basis"] in ("derived", "source")}
    assert {"ashburn", "dallas", "phoenix", "chicago", "london", "frankfurt", "amsterdam", "paris", "singapore",
            "atlanta", "secaucus", "toronto", "sao-paulo", "tokyo", "sydney", "mumbai", "johor", "manila",
            "auckland", "dublin", "santa-clara", "seoul", "madrid", "oslo", "queretaro"} <= derived
    assert len(rows) - len(derived) == 43 <= 46  # the tier fill: markets without a published size
    # Singapore's derived tenth (98 MW) is capped by the DC-CFA's 60 MW per application.
    assert "DC-CFA" in rows["singapore"]["reference"]
    assert "no new grid connection before 2028" in rows["dublin"]["reference"] and "Quebec" in rows["montreal"]["reference"]
    # Montreal: no new power (Quebec), so what an entrant can lease: the largest block one facility offers.
    assert rows["montreal"]["basis"] == "derived" and "largest contiguous block for lease 2 MW" in rows["montreal"]["reference"]
    montreal = {r["metric"]: r for r in read(DATA / "reference" / "market_power.csv") if r["market"] == "Montreal"}
    block, size = montreal["largest contiguous block for lease"], montreal["inventory"]
    assert "limited to 2 MW at any given facility" in block["notes"]
    assert (float(rows["montreal"]["low"]), float(rows["montreal"]["high"])) == (float(block["value"]), round(0.1 * float(size["value"])))
