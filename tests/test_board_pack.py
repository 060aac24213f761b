"""The board pack's last three items (issue 49): outages in the GIS export, `dcplace outages` at
80 columns, and the as-is baseline (`dcplace solve --as-is footprint.csv`).

Hand-derived figures use the tiny catalog of tests/helpers.py (discount rate 0, utilization 1):
a 'server-air' rack serves 16 GPUs x 50 tok/s = 800 tok/s of chat and costs $13,828 a year
(tests/test_resilience.py's docstring); a site costs $1,000 a year to open.
"""

from __future__ import annotations

import geopandas as gpd
import pytest
from helpers import make_scenario, region, site

from dcplace.models import load_scenario
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports.export import export_layers
from dcplace.reports.layers import load_plan_layers

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)
RACK_USD = 6400 + 2628 + 4800
SITE_USD = 1000


TOWNS = ["Ho Chi Minh City Metropolitan Area", "Quezon City and Metro Manila", "Kuala Lumpur Klang Valley",
         "Saint Petersburg Leningrad Oblast"]


def _three_sites(folder, **policies):
    """Four towns of 1,200 tok/s of chat each (4,800 in all; long names, as the world's are) and three
    sites within reach of all of them."""
    sites = [site("a", 0, 0, name="Ashburn Northern Virginia Campus"), site("b", 0, 0.2, name="Hong Kong Tseung Kwan O"),
             site("c", 0.2, 0, name="Singapore Jurong West")]
    regions = [region(f"t{i}", 0.1, 0.1 + 0.01 * i, chat=1200, budget=50, name=name) for i, name in enumerate(TOWNS)]
    return make_scenario(folder, sites=sites, regions=regions, policies=policies)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """An ordinary plan (one site serves the whole town: its loss puts all of it at risk) and an N-1 plan
    (three sites of 2,400 tok/s each: any one's loss is re-served by the other two)."""
    root = tmp_path_factory.mktemp("board")
    solve_to_folder(load_scenario(_three_sites(root / "s-today")), root / "today", OPTIONS)
    solve_to_folder(load_scenario(_three_sites(root / "s-n1", survive_site_loss={"chat": 1.0})), root / "n1", OPTIONS)
    return root / "today", root / "n1"


# ----------------------------------------------------------------------------- outages in the GIS export


@pytest.mark.parametrize("fmt, file", [("gpkg", "plan.gpkg"), ("geojson", "sites.geojson")])
def test_gis_export_carries_each_sites_outage_row(plans, tmp_path, fmt, file):
    """Read back with geopandas: an ordinary plan's only open site puts the whole peak at risk and no
    policy speaks of it; an N-1 plan's every loss is covered, nothing at risk; a closed site is 'not open'."""
    today, n1 = plans
    for folder, name in ((today, "today"), (n1, "n1")):
        export_layers(load_plan_layers(folder), tmp_path / name, fmt)
    kw = {"layer": "sites"} if fmt == "gpkg" else {}
    back = gpd.read_file(tmp_path / "today" / file, **kw).set_index("id")
    (opened,) = back.index[back["open"].astype(bool)]
    row = back.loc[opened]
    assert row["outage_served_tok_s"] == pytest.approx(4800) and row["outage_at_risk_tok_s"] == pytest.approx(4800)
    assert row["outage_at_risk_chat_tok_s"] == pytest.approx(4800) and row["outage_reserved_tok_s"] == pytest.approx(0)
    assert row["outage_at_risk_share_of_peak"] == pytest.approx(1.0) and row["outage_regions_at_risk"] == len(TOWNS)
    assert row["outage_policy"] == "no policy" and row["outage_jobs_stalled"] == 0
    closed = back.drop(index=opened)
    assert set(closed["outage_policy"]) == {"not open"} and (closed["outage_at_risk_tok_s"] == 0).all()

    back = gpd.read_file(tmp_path / "n1" / file, **kw).set_index("id")
    assert back["open"].astype(bool).all()
    assert set(back["outage_policy"]) == {"covered"}
    assert back["outage_served_tok_s"].sum() == pytest.approx(4800)  # each site's load is the solver's choice
    assert back["outage_reserved_tok_s"].tolist() == pytest.approx(back["outage_served_tok_s"].tolist())
    assert back["outage_at_risk_tok_s"].abs().max() < 1e-6 and back["outage_at_risk_share_of_peak"].abs().max() < 1e-9
    serving = back["outage_served_tok_s"] > 0
    assert (back.loc[serving, "outage_fallback_rtt_ms"] > 0).all()


def test_plan_layers_in_memory_carry_the_same_outage_fields(plans):
    """`dcplace.plan_layers(plan, scenario)` gives the layers export writes, outage fields included,
    and every new field has its unit and meaning (the GeoPackage's dcplace_fields)."""
    import dcplace
    from dcplace.reports.layers import field_rows

    today, _ = plans
    layers = load_plan_layers(today)
    memory = dcplace.plan_layers(layers.plan, layers.scenario)["sites"]
    written = layers.layers()["sites"]
    assert list(memory.columns) == list(written.columns)
    outage = [c for c in written.columns if c.startswith("outage_")]
    assert len(outage) == 10  # nine figures and one per class (chat)
    assert memory[outage].equals(written[outage])
    described = {column: text for layer, column, _, text in field_rows(layers) if layer == "sites"}
    assert all(described[c] for c in outage)


# ----------------------------------------------------------------------------- dcplace outages at 80 columns


def _cells(line: str, bar: str) -> list[str]:
    return [c.strip() for c in line.split(bar)[1:-1]]


@pytest.mark.parametrize("width", [80, 160])
def test_outages_fit_the_terminal_by_leaving_columns_out(plans, monkeypatch, width):
    """At 80 columns whole columns are left out by priority and named, no header or figure is cut, and the
    region list keeps whole names on its lines (not one word a line); at 160 every column is shown."""
    from rich.console import Console
    from typer.testing import CliRunner

    import dcplace.cli as cli
    from dcplace.reports.outages import REGION_COLUMNS, SITE_COLUMNS

    monkeypatch.setattr(cli, "console", Console(width=width, file=(out := __import__("io").StringIO())))
    result = CliRunner().invoke(cli.app, ["outages", str(plans[0])])
    assert result.exit_code == 0, result.output
    text = out.getvalue()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "…" not in text  # no header and no figure cut
    note = " ".join(text.split("Left out at")[1:]) if "Left out at" in text else ""
    for header in SITE_COLUMNS + REGION_COLUMNS:
        left_out = header in " ".join(note.split())
        shown = all(word in text for word in header.split())
        assert left_out or shown, header
    if width == 160:
        assert not note
        return
    assert "Regions at risk" not in " ".join(note.split()) and "At risk" in text
    # the region list's column: its lines hold whole phrases, not one word each
    head = next(i for i, line in enumerate(lines) if "Regions" in line and "┃" in line)
    column = next(i for i, cell in enumerate(_cells(lines[head], "┃")) if cell.startswith("Regions"))
    end = next(i for i in range(head, len(lines)) if lines[i].startswith("└"))
    body = [cell for line in lines[head:end] if line.startswith("│") and (cell := _cells(line, "│")[column])]
    assert body and sum(len(cell.split()) for cell in body) / len(body) >= 3, body
