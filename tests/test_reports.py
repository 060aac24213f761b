"""Exports, maps and the executive report, from real plan folders (no browser here;
tests/test_browser.py opens the HTML in Chromium)."""

from __future__ import annotations

import html
import itertools
import json
import os
import shutil
import subprocess

import geopandas as gpd
import markupsafe
import numpy as np
import pandas as pd
import pytest
from helpers import HOSTILE_IMG, HOSTILE_SCENARIO, HOSTILE_SITE, europe_scenario, hostile_world_scenario, make_scenario, region, site
from typer.testing import CliRunner

from dcplace.cli import app
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.optimizer.solving.solve import InfeasibleScenario
from dcplace.reports import FORMATS, export_layers, load_plan_layers, read_layer, save_report
from dcplace.reports.htmlmap import plan_figure, save_html_map
from dcplace.reports.staticmap import draw_static_map

runner = CliRunner()


@pytest.fixture(scope="module")
def world_plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    solve_to_folder(hostile_world_scenario(root / "scenario"), root / "plan")
    return root / "plan"


@pytest.fixture(scope="module")
def europe_plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("europe")
    solve_to_folder(europe_scenario(root / "scenario"), root / "plan")
    return root / "plan"


# ----------------------------------------------------------------------------- layers


def test_layers_carry_the_plan_numbers(world_plan):
    layers = load_plan_layers(world_plan)
    plan = layers.plan
    assert len(layers.sites) == len(plan.sites) == 4
    assert len(layers.regions) == 6
    assert len(layers.assignments) == len(plan.assignments)
    assert layers.sites.crs.to_epsg() == 4326
    # Site MW and cost add up to the plan's KPIs and objective.
    assert layers.sites["it_mw"].sum() == pytest.approx(plan.kpis["it_mw_inference"] + plan.kpis["it_mw_training"])
    assert layers.sites["cost_usd_per_year"].sum() == pytest.approx(plan.objective_usd_per_year)
    # Every region is fully served in this plan, so served equals demand region by region.
    assert np.allclose(layers.regions["served_tok_s"], layers.regions["demand_tok_s"])
    # An assignment line runs from its region to its site (a great circle: tests/test_gis_layers.py).
    from dcplace.reports.layers import line_ends

    region_xy = {r.id: (r.geometry.x, r.geometry.y) for r in layers.regions.itertuples()}
    site_xy = {s.id: (s.geometry.x, s.geometry.y) for s in layers.sites.itertuples()}
    for a in layers.assignments.itertuples():
        assert line_ends(a.geometry) == (region_xy[a.region], site_xy[a.site])
    training_site = next(s for s in layers.sites.itertuples() if s.training_jobs)
    assert training_site.training_jobs == "Big" and training_site.role in ("training", "mixed")


# ----------------------------------------------------------------------------- exports


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_reads_back_with_geopandas(world_plan, tmp_path, fmt):
    layers = load_plan_layers(world_plan)
    paths = export_layers(layers, tmp_path / fmt, fmt)
    assert paths and all(p.exists() for p in paths)
    for name, original in layers.layers().items():
        if fmt == "gpkg":
            back = read_layer(tmp_path / fmt / "plan.gpkg", layer=name)
        else:
            suffix = {"geojson": ".geojson", "parquet": ".parquet", "csv": ".csv"}[fmt]
            back = read_layer(tmp_path / fmt / f"{name}{suffix}")
        assert back.crs.to_epsg() == 4326, (fmt, name)
        assert len(back) == len(original), (fmt, name)
        assert list(back.columns) == list(original.columns), (fmt, name)
        for column in original.columns:
            if column == "geometry":
                # RFC 7946 GeoJSON keeps 7 decimals (about 1 cm); the other formats are exact.
                tolerance = 1e-6 if fmt == "geojson" else 1e-12
                assert all(a.equals_exact(b, tolerance) for a, b in zip(original.geometry, back.geometry)), (fmt, name)
            elif pd.api.types.is_bool_dtype(original[column]):
                assert list(back[column].astype(bool)) == list(original[column]), (fmt, name, column)
            elif pd.api.types.is_numeric_dtype(original[column]):
                np.testing.assert_allclose(back[column].astype(float), original[column].astype(float), rtol=1e-12, equal_nan=True,
                                           err_msg=f"{fmt} {name} {column}")
            else:
                assert list(back[column].fillna("")) == list(original[column].fillna("")), (fmt, name, column)


def test_hostile_names_survive_export_unchanged(world_plan, tmp_path):
    export_layers(load_plan_layers(world_plan), tmp_path, "gpkg")
    names = set(gpd.read_file(tmp_path / "plan.gpkg", layer="sites")["name"])
    assert {HOSTILE_SITE, HOSTILE_IMG} <= names


# ----------------------------------------------------------------------------- static map


def test_world_plan_gets_an_equal_earth_world_map(world_plan):
    drawn = draw_static_map(load_plan_layers(world_plan))
    assert not drawn.regional
    assert drawn.crs.to_epsg() == 8857


def test_regional_plan_gets_a_regional_equal_area_zoom(europe_plan):
    layers = load_plan_layers(europe_plan)
    drawn = draw_static_map(layers)
    assert drawn.regional
    assert "Lambert Azimuthal Equal Area" in drawn.crs.to_wkt() or drawn.crs.to_dict().get("proj") == "laea"
    world = draw_static_map(layers, extent="world")
    assert not world.regional


def _label_boxes(drawn):
    """The labels' text boxes (an Annotation's own extent also spans its leader line)."""
    from matplotlib.text import Text

    renderer = drawn.figure.canvas.get_renderer()
    boxes = []
    for label in drawn.labels:
        label.update_positions(renderer)
        boxes.append(Text.get_window_extent(label, renderer))
    return boxes


def test_labels_do_not_overlap_and_every_open_site_is_labelled_or_counted(world_plan):
    layers = load_plan_layers(world_plan)
    drawn = draw_static_map(layers)
    boxes = _label_boxes(drawn)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    open_names = set(layers.sites.loc[layers.sites["open"], "name"])
    labelled = {label.get_text().rsplit("  ", 1)[0] for label in drawn.labels}
    assert labelled | set(drawn.unlabelled) == open_names
    assert HOSTILE_SITE in labelled  # drawn literally: parse_math is off, nothing is interpreted
    _assert_labels_nearest_their_own_site(drawn, layers)


def _assert_labels_nearest_their_own_site(drawn, layers):
    """A label whose box is nearer another open site's marker than its own reads as that site's."""
    from pyproj import Transformer

    from dcplace.reports.staticmap import nearest_marker

    sites = layers.sites[layers.sites["open"]]
    x, y = Transformer.from_crs("EPSG:4326", drawn.crs, always_xy=True).transform(sites.geometry.x.to_numpy(), sites.geometry.y.to_numpy())
    centres = drawn.figure.axes[0].transData.transform(np.column_stack([x, y]))
    names = sites["name"].tolist()
    for label, box in zip(drawn.labels, _label_boxes(drawn)):
        if label.arrow_patch is not None:
            continue  # a label set farther out has a leader line to its own site (issue 49)
        own = label.get_text().rsplit("  ", 1)[0]
        assert names[nearest_marker(box, centres)] == own, f"the label of {own} sits nearer another site"


def test_crowded_sites_drop_labels_rather_than_overlap(tmp_path):
    # 12 sites on a few km of one city: not every label fits, and none may overlap.
    sites = [site(f"s{i}", 52.0 + 0.02 * (i % 4), 4.0 + 0.02 * (i // 4), country="NL", power_limit_kw=40,
                  name=f"Campus number {i}") for i in range(12)]
    regions = [region(f"r{i}", 52.0 + 0.01 * i, 4.0, chat=4000, budget=20, country="NL") for i in range(12)]  # 360 kW facility: >= 9 sites
    solve_to_folder(make_scenario(tmp_path / "s", sites, regions, name="crowded"), tmp_path / "plan")
    layers = load_plan_layers(tmp_path / "plan")
    drawn = draw_static_map(layers)
    boxes = _label_boxes(drawn)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    assert int(layers.sites["open"].sum()) >= 6
    leaders = [label for label in drawn.labels if label.arrow_patch is not None]
    assert leaders, "a crowded map sets labels farther out, each with a leader line to its site (issue 49)"
    _assert_labels_nearest_their_own_site(drawn, layers)
    assert len(drawn.labels) + len(drawn.unlabelled) == int(layers.sites["open"].sum())


def test_cli_map_writes_png_pdf_and_html(world_plan, tmp_path):
    result = runner.invoke(app, ["map", str(world_plan), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "map.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "map.pdf").read_bytes()[:5] == b"%PDF-"
    page = (tmp_path / "map.html").read_text()
    assert "window.PlotlyGeoAssets" in page and "world_110m" in page
    assert page.index("window.PlotlyGeoAssets") < page.index("plotly.js v")  # base map before plotly.js
    assert "cdn.plot.ly" not in page.split("window.PlotlyGeoAssets", 1)[1].split("</script>", 1)[0]


# ----------------------------------------------------------------------------- HTML map


def test_html_map_has_one_trace_per_layer_and_every_site(world_plan):
    layers = load_plan_layers(world_plan)
    fig = plan_figure(layers)
    by_layer = {}
    for trace in fig.data:
        by_layer.setdefault(trace.meta["layer"], []).append(trace)
    assert sum(len(t.lon) for t in by_layer["sites"]) == int(layers.sites["open"].sum())
    assert sum(len(t.lon) for t in by_layer["candidates"]) == int((~layers.sites["open"]).sum())
    assert len(by_layer["regions"][0].lon) == len(layers.regions)
    # Lines: two points and a break per assignment.
    assert sum(len(t.lon) for t in by_layer["assignments"]) == 3 * len(layers.assignments)


def test_html_map_escapes_every_name(world_plan, tmp_path):
    save_html_map(load_plan_layers(world_plan), tmp_path)
    page = (tmp_path / "map.html").read_text()
    for hostile in (HOSTILE_SITE, HOSTILE_IMG, HOSTILE_SCENARIO, "<script>document.title='PWNED'</script>"):
        assert hostile not in page
    # The hover text holds the escaped name (and plotly's JSON escapes '<' and '&' once more).
    figure_json = json.dumps(json.loads(plan_figure(load_plan_layers(world_plan)).to_json()))
    assert html.escape(HOSTILE_SITE) in figure_json


# ----------------------------------------------------------------------------- report


@pytest.fixture(scope="module")
def world_report(world_plan, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = runner.invoke(app, ["report", str(world_plan), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_report_states_the_plan_numbers(world_plan, world_report):
    plan = load_plan_layers(world_plan).plan
    page = (world_report / "report.html").read_text()
    k = plan.kpis
    assert f"${plan.objective_usd_per_year / 1e6:,.2f} M" in page
    assert f"${k['usd_per_m_tokens']:.3f} per M tokens" in page
    assert f"{k['demand_within_budget_share']:.1%}" in page
    assert f"{k['emissions_t_per_year']:,.0f} t CO₂/yr" in page
    assert plan.scenario_hash in page
    assert plan.solve.status in page and plan.provenance["rerun"] in page
    # One table row per open site, plus one job row.
    sites_table = page.split('<table id="sites">', 1)[1].split("</table>", 1)[0]
    assert sites_table.count("<tr>") == 1 + sum(s.open for s in plan.sites)
    assert page.count("data:image/") == 5  # map, cost by category (page 1 and later), cost by site: all inline
    assert "http://" not in page and "https://" not in page


def test_report_escapes_names_and_runs_no_script(world_report):
    page = (world_report / "report.html").read_text()
    for hostile in (HOSTILE_SITE, HOSTILE_IMG, HOSTILE_SCENARIO):
        assert hostile not in page
        assert str(markupsafe.escape(hostile)) in page  # Jinja2's escaping, shown as text
    assert "<script" not in page  # the report has no script at all; its CSP forbids any


def test_report_pdf_has_the_pages_and_names(world_plan, world_report):
    if shutil.which("pdftotext") is None or shutil.which("pdfinfo") is None:
        if os.environ.get("DCPLACE_REQUIRE_SYSTEM_TOOLS") == "1":
            pytest.fail("poppler-utils (pdfinfo, pdftotext) missing; apt-get install poppler-utils")
        pytest.skip("poppler-utils not installed (.ci/run installs it)")
    pdf = world_report / "report.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    assert pages >= 5  # KPIs, map, cost by site, sites, jobs, solver and provenance
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Annual cost" in text and "Solver and provenance" in text
    assert HOSTILE_SITE in text  # shown literally
    plan = load_plan_layers(world_plan).plan
    assert plan.scenario_hash in text


# ----------------------------------------------------------------------------- errors


def test_not_a_plan_folder_is_exit_2_with_a_fix(tmp_path):
    for command in (["export", str(tmp_path)], ["map", str(tmp_path)], ["report", str(tmp_path)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "not a plan folder" in result.output and "Fix:" in result.output
    assert not (tmp_path / "report").exists() and not (tmp_path / "export").exists()


def test_unknown_export_format_is_exit_2(world_plan):
    result = runner.invoke(app, ["export", str(world_plan), "--format", "kml"])
    assert result.exit_code == 2
    assert "geojson, gpkg, parquet, csv" in result.output


def test_infeasible_plan_folder_is_exit_3_naming_the_cause(tmp_path):
    scenario = make_scenario(tmp_path / "s", [site("a", 40.0, -74.0)], [region("r", 40.1, -74.0)], policies={"carbon_cap_t_per_year": 1.0})
    with pytest.raises(InfeasibleScenario):
        solve_to_folder(scenario, tmp_path / "plan")
    result = runner.invoke(app, ["report", str(tmp_path / "plan")])
    assert result.exit_code == 3, result.output
    assert "infeasible" in result.output and "carbon cap" in result.output


def test_a_failure_while_writing_leaves_no_output(world_plan, tmp_path, monkeypatch):
    import dcplace.reports.pdf as pdf_module

    def broken_pdf(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pdf_module, "write_pdf", broken_pdf)
    out = tmp_path / "report"
    with pytest.raises(RuntimeError):
        save_report(load_plan_layers(world_plan), out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no staged temporary left either


def test_reports_leave_the_plan_checkable(world_plan, tmp_path):
    runner.invoke(app, ["export", str(world_plan), "--format", "csv"])
    runner.invoke(app, ["map", str(world_plan), "--png"])
    result = runner.invoke(app, ["check", str(world_plan)])
    assert result.exit_code == 0, result.output


def test_maps_meant_to_be_compared_share_one_scale(world_plan):
    """A schedule's period maps are drawn against one scale: twice the reference MW draws the
    same sites at half the area (above the smallest symbol); ten times the reference flow, the
    flows several times thinner."""
    import numpy as np

    from dcplace.reports.staticmap import MapScales, scales_of, shared_scales

    layers = load_plan_layers(world_plan)
    own = scales_of(layers)
    assert shared_scales([layers, layers]) == own
    alone = draw_static_map(layers)
    doubled = draw_static_map(layers, scales=MapScales(2 * own.site_mw, 10 * own.flow_tok_s, own.region_tok_s))
    for role, dots in alone.sites.items():
        big = dots.get_sizes() > 4 * 28  # well above the smallest symbol
        assert np.allclose(doubled.sites[role].get_sizes()[big], dots.get_sizes()[big] / 2)
    assert doubled.flow_scale.per_unit >= 4 * alone.flow_scale.per_unit  # round numbers: 10x the flows, at least 4x the unit
