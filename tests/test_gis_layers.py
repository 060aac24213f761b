"""GIS-ready layers (issue 18, item 5): great-circle assignment lines split at the
antimeridian, site and region attributes carrying the inputs, and a GeoPackage that holds
QGIS layer styles and the record of the plan it came from."""

from __future__ import annotations

from importlib import resources
from types import SimpleNamespace
import sqlite3
import xml.dom.minidom

import numpy as np
import pandas as pd
import pyogrio
import pytest
from helpers import catalog_with_class, make_scenario, region, site
from pyproj import Geod
from shapely.geometry import LineString, MultiLineString

from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import FORMATS, export_layers, load_plan_layers, read_layer
from dcplace.models import default_scenario_path, load_scenario
from dcplace.models.geo import great_circle_km
from dcplace.reports.layers import SITE_INPUTS, great_circle, line_ends, line_parts, site_layer
from dcplace.models.provenance import input_provenance

GEOD = Geod(ellps="WGS84")
LAYERS = ("sites", "regions", "assignments")


def _two_class_catalog():
    return catalog_with_class("reasoning", "Reasoning", 0.4, 20, 40)


@pytest.fixture(scope="module")
def pacific_plan(tmp_path_factory):
    """A region at lon 170 that only a site at lon -170 can serve (across the antimeridian),
    and London served from New York (a long route); two workload classes."""
    root = tmp_path_factory.mktemp("pacific")
    sites = [
        site("dateline", -15.0, -170.0, name="East of the date line", power_price_usd_per_mwh=71.5, grid_carbon_g_per_kwh=612,
             colocation_usd_per_kw_month=143.25, fixed_cost_usd_per_year=12345, pue_climate_factor=1.2),
        site("nyc", 40.7, -74.0, name="New York", power_price_usd_per_mwh=88.0, grid_carbon_g_per_kwh=310, floor_racks=80),
    ]
    regions = [
        region("west", -17.0, 170.0, chat=700, budget=50, demand_reasoning_tok_s=130, rtt_budget_reasoning_ms=60, country="FJ"),
        region("lon", 51.5, -0.1, chat=900, budget=100, demand_reasoning_tok_s=0, rtt_budget_reasoning_ms=120, country="GB"),
    ]
    solve_to_folder(make_scenario(root / "scenario", sites, regions, catalog=_two_class_catalog(), name="pacific"), root / "plan")
    return root / "plan"


@pytest.fixture(scope="module")
def pacific_gpkg(pacific_plan, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpkg")
    export_layers(load_plan_layers(pacific_plan), out, "gpkg")
    return out / "plan.gpkg"


# ----------------------------------------------------------------------------- great circles


def _longitude_span(coords) -> float:
    lons = [x for x, _ in coords]
    return max(lons) - min(lons)


def test_a_line_across_the_antimeridian_is_split_and_never_jumps(pacific_plan):
    layers = load_plan_layers(pacific_plan)
    line = layers.assignments[(layers.assignments["region"] == "west") & (layers.assignments["site"] == "dateline")]
    assert len(line) >= 1
    for geometry in line.geometry:
        assert isinstance(geometry, MultiLineString)
        assert len(geometry.geoms) == 2
        for part in geometry.geoms:
            assert _longitude_span(part.coords) <= 180
            assert all(-180 <= x <= 180 for x, _ in part.coords)
        west, east = geometry.geoms
        # Both parts meet on the antimeridian at the same latitude.
        assert west.coords[-1][0] == 180.0 and east.coords[0][0] == -180.0
        assert west.coords[-1][1] == pytest.approx(east.coords[0][1], abs=1e-12)
        assert line_ends(geometry) == ((170.0, -17.0), (-170.0, -15.0))


@pytest.mark.parametrize(("lon1", "lon2"), [(170.0, -170.0), (-170.0, 170.0), (179.9, -179.9), (150.0, -120.0)])
def test_great_circle_parts_stay_within_180_degrees(lon1, lon2):
    geometry = great_circle(lon1, 10.0, lon2, -5.0)
    assert isinstance(geometry, MultiLineString)
    for part in geometry.geoms:
        assert _longitude_span(part.coords) <= 180
        steps = np.abs(np.diff([x for x, _ in part.coords]))
        assert steps.max() < 10  # no segment jumps across the map
    assert line_ends(geometry) == ((lon1, 10.0), (lon2, -5.0))


def test_great_circle_has_a_vertex_about_every_100_km_and_at_least_8():
    short = great_circle(4.9, 52.4, 5.0, 52.5)
    assert isinstance(short, LineString) and len(short.coords) == 8
    long = great_circle(-74.0, 40.7, 103.8, 1.35)  # New York - Singapore, about 15,300 km
    length_km = GEOD.inv(-74.0, 40.7, 103.8, 1.35)[2] / 1000
    assert len(long.coords) == int(np.ceil(length_km / 100)) + 1
    segment_km = [GEOD.inv(*a, *b)[2] / 1000 for a, b in zip(long.coords[:-1], long.coords[1:])]
    assert max(segment_km) <= 100.0 + 1e-6


def _midpoint_along(geometry) -> tuple[float, float]:
    """The point at half the geodesic length of a drawn line, walking its vertices."""
    coords = [c for lons, lats in line_parts(geometry) for c in zip(lons, lats)]
    lengths = [GEOD.inv(*a, *b)[2] for a, b in zip(coords[:-1], coords[1:])]
    half, walked = sum(lengths) / 2, 0.0
    for (a, b), length in zip(zip(coords[:-1], coords[1:]), lengths):
        if walked + length >= half:
            azimuth = GEOD.inv(*a, *b)[0]
            lon, lat, _ = GEOD.fwd(*a, azimuth, half - walked)
            return lon, lat
        walked += length
    raise AssertionError("empty line")


def test_the_midpoint_of_a_long_route_lies_on_the_geodesic(pacific_plan):
    layers = load_plan_layers(pacific_plan)
    row = layers.assignments[(layers.assignments["region"] == "lon") & (layers.assignments["site"] == "nyc")].iloc[0]
    (lon1, lat1), (lon2, lat2) = (-0.1, 51.5), (-74.0, 40.7)
    assert line_ends(row.geometry) == ((lon1, lat1), (lon2, lat2))
    # distance_km is the model's great circle (the sphere its latency uses), within 0.6 % of the drawn geodesic
    assert row.distance_km == pytest.approx(float(great_circle_km(lat1, lon1, lat2, lon2)), rel=1e-12)
    assert row.distance_km == pytest.approx(GEOD.inv(lon1, lat1, lon2, lat2)[2] / 1000, rel=6e-3)
    assert row.distance_km > 5000
    mid_lon, mid_lat = GEOD.npts(lon1, lat1, lon2, lat2, 1)[0]
    lon, lat = _midpoint_along(row.geometry)
    assert GEOD.inv(lon, lat, mid_lon, mid_lat)[2] < 1000  # within 1 km of the geodesic's midpoint
    # Every vertex lies on the geodesic: going through it is no longer than the geodesic.
    total = GEOD.inv(lon1, lat1, lon2, lat2)[2]
    for x, y in row.geometry.coords:
        assert GEOD.inv(lon1, lat1, x, y)[2] + GEOD.inv(x, y, lon2, lat2)[2] - total < 1.0
    # A straight line in lon/lat would be far off: its middle is hundreds of km south of the route.
    assert GEOD.inv((lon1 + lon2) / 2, (lat1 + lat2) / 2, mid_lon, mid_lat)[2] > 300_000


# ----------------------------------------------------------------------------- attributes from the inputs


def test_sites_carry_the_input_prices_of_inputs_sites_csv(pacific_plan, pacific_gpkg):
    inputs = pd.read_csv(pacific_plan / "inputs" / "sites.csv").set_index("id")
    sites = pyogrio.read_dataframe(pacific_gpkg, layer="sites").set_index("id")
    for column in SITE_INPUTS:
        for site_id in sites.index:
            assert sites.at[site_id, column] == pytest.approx(float(inputs.at[site_id, column]), rel=1e-12), (site_id, column)
    assert sites.at["dateline", "power_price_usd_per_mwh"] == 71.5
    assert sites.at["dateline", "colocation_usd_per_kw_month"] == 143.25
    assert sites.at["nyc", "grid_carbon_g_per_kwh"] == 310
    # A scenario of the user's own, with no provenance table: every input is "as given".
    for column in SITE_INPUTS:
        assert set(sites[f"{column}_basis"]) == {"as given"}, column
    assert set(sites["imputed_inputs"].fillna("")) == {""}
    # Served tok/s per class adds up to the site's inference total.
    assert np.allclose(sites["served_chat_tok_s"] + sites["served_reasoning_tok_s"], sites["inference_tok_s"])


def test_site_inputs_carry_their_provenance_kind_from_the_default_data():
    """Cells equal to the embedded default's take its provenance kind; a changed cell is 'as given'."""
    scenario = load_scenario(default_scenario_path())
    recorded = pd.read_csv(resources.files("dcplace.data") / "default" / "provenance.csv")
    kind = {(r.id, r.field): r.basis for r in recorded.itertuples() if r.table == "sites"}
    first, second = scenario.sites[0], scenario.sites[1]
    changed = scenario.model_copy(update={"sites": [first.model_copy(update={"power_price_usd_per_mwh": first.power_price_usd_per_mwh + 1}),
                                                     *scenario.sites[1:]]})
    plan = SimpleNamespace(sites=[SimpleNamespace(id=x.id, name=x.name, country=x.country, role="closed", open=False, racks_total=0,
                                                  gpus=0, racks=[], zones=[], fabrics=[], it_kw=0.0, facility_kw=0.0,
                                                  power_limit_kw=x.power_limit_kw, served_tok_s={}, emissions_t_per_year=0.0,
                                                  upfront_capex_usd=0.0, total_cost_usd_per_year=0.0, lon=x.lon, lat=x.lat)
                                  for x in (first, second)], jobs=[])
    layer = site_layer(plan, changed, input_provenance(changed)).set_index("id")
    assert layer.at[first.id, "power_price_usd_per_mwh_basis"] == "as given"  # changed: its source no longer applies
    assert layer.at[second.id, "power_price_usd_per_mwh_basis"] == kind[(second.id, "power_price_usd_per_mwh")]
    assert layer.at[second.id, "grid_carbon_g_per_kwh_basis"] == kind[(second.id, "grid_carbon_g_per_kwh")]
    assert layer.at[second.id, "power_limit_kw_basis"] == kind[(second.id, "power_limit_mw")]  # recorded in MW
    imputed = [c for c in SITE_INPUTS if layer.at[second.id, f"{c}_basis"] in ("rule", "assumption")]
    assert imputed and layer.at[second.id, "imputed_inputs"] == ";".join(imputed)


def test_regions_carry_demand_by_class_equal_to_the_inputs(pacific_plan, pacific_gpkg):
    inputs = pd.read_csv(pacific_plan / "inputs" / "regions.csv").set_index("id")
    regions = pyogrio.read_dataframe(pacific_gpkg, layer="regions").set_index("id")
    for workload in ("chat", "reasoning"):
        for region_id in regions.index:
            assert regions.at[region_id, f"demand_{workload}_tok_s"] == float(inputs.at[region_id, f"demand_{workload}_tok_s"])
            assert regions.at[region_id, f"rtt_budget_{workload}_ms"] == float(inputs.at[region_id, f"rtt_budget_{workload}_ms"])
    assert regions.at["west", "demand_reasoning_tok_s"] == 130 and regions.at["lon", "demand_chat_tok_s"] == 900
    # Everything is served here, class by class, and the totals are the class sums.
    for workload in ("chat", "reasoning"):
        assert np.allclose(regions[f"served_{workload}_tok_s"], regions[f"demand_{workload}_tok_s"])
    assert np.allclose(regions["demand_chat_tok_s"] + regions["demand_reasoning_tok_s"], regions["demand_tok_s"])
    assert regions.at["west", "mean_rtt_reasoning_ms"] > 0 and np.isnan(regions.at["lon", "mean_rtt_reasoning_ms"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_carries_the_same_attributes(pacific_plan, tmp_path, fmt):
    layers = load_plan_layers(pacific_plan)
    export_layers(layers, tmp_path, fmt)
    suffix = {"geojson": ".geojson", "parquet": ".parquet", "csv": ".csv"}
    for name, original in layers.layers().items():
        back = read_layer(tmp_path / "plan.gpkg", layer=name) if fmt == "gpkg" else read_layer(tmp_path / f"{name}{suffix[fmt]}")
        assert list(back.columns) == list(original.columns), (fmt, name)
        if name == "assignments":
            tolerance = 1e-6 if fmt == "geojson" else 1e-12
            assert all(a.equals_exact(b, tolerance) for a, b in zip(original.geometry, back.geometry)), fmt
            assert any(isinstance(g, MultiLineString) for g in back.geometry), fmt


# ----------------------------------------------------------------------------- the GeoPackage


def test_geopackage_has_one_default_qgis_style_per_layer(pacific_gpkg):
    listed = {name: geometry for name, geometry in pyogrio.list_layers(pacific_gpkg)}
    assert listed["sites"] == "Point" and listed["regions"] == "Point" and listed["assignments"] == "MultiLineString"
    with sqlite3.connect(pacific_gpkg) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(layer_styles)")]
        assert {"f_table_catalog", "f_table_schema", "f_table_name", "f_geometry_column", "styleName", "styleQML", "styleSLD",
                "useAsDefault", "description", "owner", "ui", "update_time"} <= set(columns)
        styles = db.execute("SELECT f_table_name, f_geometry_column, styleQML, styleSLD FROM layer_styles WHERE useAsDefault").fetchall()
        geometry_columns = dict(db.execute("SELECT table_name, column_name FROM gpkg_geometry_columns"))
    assert sorted(name for name, *_ in styles) == sorted(LAYERS)
    by_layer = {name: (column, qml, sld) for name, column, qml, sld in styles}
    for name, (column, qml, sld) in by_layer.items():
        assert column == geometry_columns[name]
        assert xml.dom.minidom.parseString(qml).documentElement.tagName == "qgis"
        assert xml.dom.minidom.parseString(sld).documentElement.tagName == "StyledLayerDescriptor"
    renderer = lambda qml: xml.dom.minidom.parseString(qml).getElementsByTagName("renderer-v2")[0]  # noqa: E731
    sites = renderer(by_layer["sites"][1])
    assert sites.getAttribute("type") == "categorizedSymbol" and sites.getAttribute("attr") == "role"
    assert '"it_mw"' in by_layer["sites"][1]
    lines = renderer(by_layer["assignments"][1])
    assert lines.getAttribute("type") == "categorizedSymbol" and lines.getAttribute("attr") == "workload"
    assert {c.getAttribute("value") for c in lines.getElementsByTagName("category")} == {"chat", "reasoning"}
    assert '"served_tok_s"' in by_layer["assignments"][1]
    regions = renderer(by_layer["regions"][1])
    assert regions.getAttribute("type") == "graduatedSymbol" and regions.getAttribute("attr") == "demand_tok_s"


def test_geopackage_records_the_plan_it_came_from(pacific_plan, pacific_gpkg):
    plan = load_plan_layers(pacific_plan).plan
    metadata = pyogrio.read_dataframe(pacific_gpkg, layer="dcplace_metadata", read_geometry=False)
    record = dict(zip(metadata["key"], metadata["value"]))
    assert record["scenario_hash"] == plan.scenario_hash
    assert record["scenario"] == "pacific" and record["plan"] == pacific_plan.name
    assert record["created_utc"] == plan.created_utc and record["status"] == plan.solve.status
    assert record["solver"].startswith(plan.solve.solver)
    assert float(record["objective_usd_per_year"]) == plan.objective_usd_per_year
    assert record["dcplace_version"] and record["exported_utc"].endswith("Z")
    assert record["overrides"] in ("", None)  # a plan of its scenario as the file has it (a --set run names its overrides)
    with sqlite3.connect(pacific_gpkg) as db:
        assert db.execute("SELECT value FROM dcplace_metadata WHERE key = 'scenario_hash'").fetchone()[0] == plan.scenario_hash
        contents = dict(db.execute("SELECT table_name, data_type FROM gpkg_contents"))
        fields = db.execute("SELECT layer, column_name, unit FROM dcplace_fields").fetchall()
    assert contents == {"sites": "features", "regions": "features", "assignments": "features",
                        "layer_styles": "attributes", "dcplace_metadata": "attributes", "dcplace_fields": "attributes"}
    # Every attribute column of every layer has its row; the decision inputs have units.
    layers = load_plan_layers(pacific_plan)
    assert {(layer, column) for layer, column, _ in fields} == {
        (name, column) for name, frame in layers.layers().items() for column in frame.columns if column != "geometry"}
    units = {(layer, column): unit for layer, column, unit in fields}
    assert units[("sites", "power_price_usd_per_mwh")] == "USD/MWh"
    assert units[("regions", "demand_reasoning_tok_s")] == "tok/s"
    assert units[("assignments", "distance_km")] == "km"
