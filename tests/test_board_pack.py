"""The board pack's last three items (issue 49): outages in the GIS export, `dcplace outages` at
80 columns, and the as-is baseline (`dcplace solve --as-is footprint.csv`).

Hand-derived figures use the tiny catalog of tests/helpers.py (discount rate 0, utilization 1):
a 'server-air' rack serves 16 GPUs x 50 tok/s = 800 tok/s of chat and costs $13,828 a year
(tests/test_resilience.py's docstring); a site costs $1,000 a year to open.
"""

from __future__ import annotations

import io

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

    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(width=width, file=out))
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


# ----------------------------------------------------------------------------- the as-is baseline


def _footprint(path, rows):
    from helpers import write_csv

    write_csv(path, [{"site": s, "config": k, "cooling": c, "workload": w, "fabric": f, "racks": n} for s, k, c, w, f, n in rows],
              ["site", "config", "cooling", "workload", "fabric", "racks"])
    return path


def test_as_is_holds_todays_footprint_and_compare_shows_the_saving(tmp_path):
    """Today: 6 chat racks at b and 2 at c (8 x $13,828 + 2 sites x $1,000 = $112,624 a year), held as they are:
    nothing added, nothing removed; the plan says it is as-is, inputs/ keeps the footprint, the checker passes,
    and `dcplace compare` says what the least-cost plan (6 racks at one site: $83,968) saves against it."""
    import dcplace
    from dcplace.cli import app
    from typer.testing import CliRunner

    scenario = _three_sites(tmp_path / "s")
    fp = _footprint(tmp_path / "today.csv", [("b", "server-air", "air", "chat", "", 6), ("c", "server-air", "air", "chat", "", 2)])
    held = dcplace.with_footprint(dcplace.load_scenario(scenario), fp)  # the library call behind --as-is
    plan = dcplace.solve(held, OPTIONS)
    assert plan.objective_usd_per_year == pytest.approx(8 * RACK_USD + 2 * SITE_USD)  # $112,624
    assert {s.id: s.racks_total for s in plan.sites if s.open} == {"b": 6, "c": 2}
    assert plan.as_is["racks"] == 8 and plan.as_is["sites"] == 2 and "held as they are" in plan.as_is["rule"]
    from dcplace.reports.summary import status_text

    assert status_text(plan).startswith("as-is: the cost of today's footprint")  # not "no cheaper plan exists"

    runner = CliRunner()
    result = runner.invoke(app, ["solve", str(scenario), "--as-is", str(fp), "--out", str(tmp_path / "as-is"), "-q"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "as-is" / "inputs" / "footprint.csv").is_file()
    assert dcplace.check_plan_folder(tmp_path / "as-is").ok
    assert dcplace.read_plan(tmp_path / "as-is").as_is["footprint"] == str(fp)
    from dcplace.reports.summary import recommendation

    memo = recommendation(load_plan_layers(tmp_path / "as-is"), 1e4)  # the report's page 1 states a cost, not a build
    assert memo.startswith("Today's footprint, held as it is: runs") and "at Hong Kong Tseung Kwan O, Singapore Jurong West" in memo
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(tmp_path / "new"), "-q"]).exit_code == 0
    result = runner.invoke(app, ["compare", str(tmp_path / "as-is"), str(tmp_path / "new"), "--out", str(tmp_path / "cmp")],
                           env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    saving = 8 * RACK_USD + 2 * SITE_USD - (6 * RACK_USD + SITE_USD)  # $28,656
    assert f"saves ${saving / 1e6:,.2f} M a year against today's footprint (as-is)" in " ".join(result.output.split())
    import pandas as pd

    table = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert table["saving against today's footprint (as-is baseline), $M/yr"].iloc[1] == pytest.approx(saving / 1e6)


def test_the_checker_refuses_a_plan_that_moved_off_the_footprint(tmp_path):
    """The independent checker holds an as-is plan to inputs/footprint.csv: one rack more breaks it."""
    import json

    import dcplace
    from dcplace.models.plan import write_plan_folder

    held = dcplace.with_footprint(dcplace.load_scenario(_three_sites(tmp_path / "s")),
                                  _footprint(tmp_path / "today.csv", [("b", "server-air", "air", "chat", "", 7)]))
    plan = dcplace.solve(held, OPTIONS)
    write_plan_folder(plan, held, tmp_path / "plan")
    assert dcplace.check_plan_folder(tmp_path / "plan").ok
    doc = json.loads((tmp_path / "plan" / "plan.json").read_text())
    doc["as_is"] = {}
    (tmp_path / "plan" / "plan.json").write_text(json.dumps(doc))
    report = dcplace.check_plan_folder(tmp_path / "plan")
    assert "footprint" in report.families_violated()


def test_an_as_is_footprint_that_cannot_serve_names_the_unserved_demand(tmp_path):
    """Two racks (1,600 tok/s) for 4,800 tok/s: exit 3, and the diagnosis names the towns left short."""
    from dcplace.cli import app
    from typer.testing import CliRunner

    scenario = _three_sites(tmp_path / "s")
    fp = _footprint(tmp_path / "small.csv", [("c", "server-air", "air", "chat", "", 2)])
    result = CliRunner().invoke(app, ["solve", str(scenario), "--as-is", str(fp), "--out", str(tmp_path / "p")])
    assert result.exit_code == 3, result.output
    text = " ".join(result.output.split())
    assert "Today's footprint (--as-is) cannot keep every limit" in text
    short = [town for town in TOWNS if f"region {town} 'chat' demand 1,200 tok/s is short by" in text]
    assert len(short) >= 3  # 3,200 tok/s unserved: at least three towns of 1,200 are short
    assert "Traceback" not in result.output


def test_bad_footprint_rows_name_file_row_field_and_fix(tmp_path):
    """Exit 2, one line per problem: the file, the row, the field, what is wrong and the fix; nothing written."""
    from dcplace.cli import app
    from typer.testing import CliRunner

    scenario = _three_sites(tmp_path / "s")
    fp = _footprint(tmp_path / "bad.csv", [("zz", "server-air", "air", "chat", "", 2), ("a", "server-air", "liquid", "", "", 1),
                                           ("b", "trainer-dense", "air", "chat", "", 1), ("c", "server-air", "air", "chat", "", 0)])
    result = CliRunner().invoke(app, ["solve", str(scenario), "--as-is", str(fp), "--out", str(tmp_path / "p")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"{fp}, row 2, field 'site': unknown site 'zz'" in text
    assert f"{fp}, row 3, field 'workload': give either workload (inference racks) or fabric (training racks), not neither" in text
    assert f"{fp}, row 4, field 'cooling': 'air' cools at most 30 kW a rack; 'trainer-dense' draws 60 kW" in text
    assert f"{fp}, row 5, field 'racks'" in text
    assert text.count("Fix:") >= 4 and not (tmp_path / "p").exists()


def test_the_documented_example_footprint_fits_the_default_world():
    """docs/examples/footprint.csv (docs/as-is.md) is a valid footprint of the embedded default."""
    from pathlib import Path

    import dcplace

    example = Path(dcplace.__file__).parent / "docs" / "examples" / "footprint.csv"
    held = dcplace.with_footprint(dcplace.load_scenario(), example)
    assert len({ln.site for ln in held.footprint}) > 10 and held.content_hash != dcplace.load_scenario().content_hash
