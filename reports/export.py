"""Plan layers as GIS files that geopandas, QGIS and GDAL read as they are.

| format  | files                                              |
| ------- | -------------------------------------------------- |
| geojson | sites.geojson, regions.geojson, assignments.geojson (RFC 7946, EPSG:4326) |
| gpkg    | plan.gpkg with layers sites, regions, assignments, their QGIS styles (`layer_styles`), the plan's record (`dcplace_metadata`) and the unit of every column (`dcplace_fields`) |
| parquet | sites.parquet, regions.parquet, assignments.parquet (GeoParquet) |
| csv     | sites.csv, regions.csv, assignments.csv with a WKT geometry column, and a .csvt (column types) and .prj (EPSG:4326) beside each, so GDAL and QGIS read typed columns and geometry |
| xlsx    | plan.xlsx: one Excel workbook with a sheet per table (summary, the plan folder's tables, regions; `write_plan_workbook`), no geometry |

The CSV layers are meant for spreadsheets as well as GIS, so a text cell a spreadsheet
would run as a formula (it starts with `=`, `+`, `-`, `@`, a tab or CR) is written with a
leading `'` (`reports.output.spreadsheet_text`); numbers stay numbers, and `read_layer`
removes the quote again. GeoJSON, GeoPackage and Parquet hold every name exactly.

Every format carries the same attributes. The GeoPackage adds three attribute tables,
written with sqlite3 after GDAL wrote the layers (in the staging folder, so the file
appears complete or not at all) and registered in `gpkg_contents`:

* `layer_styles`, QGIS's own table: one default style per layer (QML, and SLD for other
  tools), so QGIS draws sites by role sized by IT MW, lines by class with width by tok/s
  and regions graduated by demand as soon as the layer is added;
* `dcplace_metadata` (key, value): plan, scenario, scenario hash, solve date, solver,
  status, objective, gap, dcplace version, export date;
* `dcplace_fields` (layer, column, unit, description).

An assignment of a region to a site at the same place (distance 0 km: a metro area served by its
own market) has no line: its row is written with an empty geometry, since a two-point line of
no length is invalid geometry in GIS tools (`layers.zero_length`; `dcplace export` says how many).

The assignment lines are declared MultiLineString in the GeoPackage (one geometry type per
layer, as GIS tools expect); `read_layer` gives single-part lines back as LineStrings, as
`load_plan_layers` made them.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import geopandas as gpd
import numpy as np
import pandas as pd
from shapely.geometry import MultiLineString

from dcplace.models.versions import package_versions
from dcplace.reports.layers import CRS, PlanLayers, field_rows, zero_length
from dcplace.reports.style import CLOSED_COLOUR, REGION_COLOUR, ROLE_COLOURS, workload_classes
from dcplace.reports.style import class_colours as colours_by_class  # `class_colours` names a local below
from dcplace.reports.output import from_spreadsheet_frame, spreadsheet_frame, spreadsheet_text, staged_files

FORMATS = ("geojson", "gpkg", "parquet", "csv")  # GIS layers: sites, regions, assignment lines
EXPORT_FORMATS = (*FORMATS, "xlsx")  # and the plan's tables as one workbook (write_plan_workbook)


def export_layers(layers: PlanLayers, out_dir: str | Path, fmt: str) -> list[Path]:
    """Write the plan's sites, regions and assignments in `fmt` into `out_dir`.

    Files appear all at once (staged, then moved into place); returns their paths.
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    frames = layers.layers()
    # a region served by a site at its own place: no line (an empty geometry), not an invalid zero-length one
    lines = frames["assignments"]
    frames["assignments"] = lines.set_geometry(lines.geometry.where(~zero_length(lines), None), crs=lines.crs)
    with staged_files(out_dir, "export") as stage:
        if fmt == "xlsx":
            write_plan_workbook(layers, stage.dir / "plan.xlsx")
        elif fmt == "gpkg":
            gpkg = stage.dir / "plan.gpkg"
            for name, frame in frames.items():
                frame.to_file(gpkg, layer=name, driver="GPKG", engine="pyogrio", promote_to_multi=name == "assignments")
            write_gpkg_extras(gpkg, layers)
        else:
            for name, frame in frames.items():
                _write_one(frame, stage.dir / name, fmt)
    return stage.moved


def workbook_sheets(layers: PlanLayers) -> dict[str, pd.DataFrame]:
    """The sheets of `plan.xlsx`: `summary` (the plan's record: scenario, status, cost, gap, the
    cost by category and the KPIs, one per row), then the plan folder's tables (`Plan.frames()`:
    sites, assignments, jobs and, with the clock, its tables) and `regions` (the regions layer,
    with lat/lon for its points)."""
    plan = layers.plan
    s = plan.solve
    summary = [("scenario", plan.scenario), ("scenario_hash", plan.scenario_hash), ("solved_utc", plan.created_utc),
               ("solver", s.solver), ("status", s.status), ("objective_usd_per_year", plan.objective_usd_per_year),
               ("best_bound_usd_per_year", s.best_bound_usd_per_year), ("gap", s.gap)]
    summary += [(f"cost_{k}_usd_per_year", v) for k, v in plan.cost_breakdown_usd_per_year.items()]
    summary += [(f"kpi_{k}", v) for k, v in plan.kpis.items()]
    sheets = {"summary": pd.DataFrame(summary, columns=["key", "value"])}
    sheets.update(plan.frames())
    regions = layers.regions
    sheets["regions"] = pd.DataFrame(regions.drop(columns=regions.geometry.name)).assign(
        lat=[g.y for g in regions.geometry], lon=[g.x for g in regions.geometry])
    return sheets


def write_plan_workbook(layers: PlanLayers, path: str | Path) -> Path:
    """The plan's tables as one Excel workbook, one sheet each (`workbook_sheets`). Text that a
    spreadsheet would run as a formula gets a leading `'` as in every CSV dcplace writes for
    people (models.csvtext.spreadsheet_text), and every text cell is stored as text, never as a
    formula; numbers stay numbers (NaN: an empty cell). The header row is frozen."""
    from openpyxl import Workbook

    book = Workbook()
    book.remove(book.active)
    for name, frame in workbook_sheets(layers).items():
        sheet = book.create_sheet(name)
        sheet.append([str(spreadsheet_text(str(c))) for c in frame.columns])
        for row in spreadsheet_frame(frame).itertuples(index=False, name=None):
            sheet.append([_xlsx_cell(v) for v in row])
        for cells in sheet.iter_rows(min_row=1):
            for cell in cells:
                if isinstance(cell.value, str):
                    cell.data_type = "s"  # text, whatever it starts with
        sheet.freeze_panes = "A2"
    book.save(path)
    return Path(path)


def _xlsx_cell(value):
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return None
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
        if isinstance(value, float) and not np.isfinite(value):
            return None
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _write_one(frame: gpd.GeoDataFrame, stem: Path, fmt: str) -> None:
    if fmt == "geojson":
        frame.to_file(stem.with_suffix(".geojson"), driver="GeoJSON", engine="pyogrio", layer_options={"RFC7946": "YES"})
    elif fmt == "parquet":
        frame.to_parquet(stem.with_suffix(".parquet"), index=False)
    else:
        spreadsheet_frame(frame).to_file(
            stem.with_suffix(".csv"), driver="CSV", engine="pyogrio",
            layer_options={"GEOMETRY": "AS_WKT", "CREATE_CSVT": "YES"},
        )


def read_layer(path: str | Path, layer: str | None = None) -> gpd.GeoDataFrame:
    """Read back one exported layer (CSV gets its EPSG:4326, which CSV cannot record, and its
    text cells without the spreadsheet-safety quote)."""
    path = Path(path)
    if path.suffix == ".parquet":
        return gpd.read_parquet(path)
    if path.suffix == ".csv":
        # The WKT column becomes the geometry; the .prj beside it carries the CRS.
        frame = from_spreadsheet_frame(gpd.read_file(path, engine="pyogrio", KEEP_GEOM_COLUMNS="NO"))
        return frame if frame.crs is not None else frame.set_crs("EPSG:4326")
    frame = gpd.read_file(path, layer=layer, engine="pyogrio")
    if path.suffix == ".gpkg" and len(frame):
        # Promoted to MultiLineString for the GeoPackage's one geometry type: give back
        # single-part lines as the LineStrings load_plan_layers made.
        frame = frame.set_geometry(frame.geometry.map(
            lambda g: g.geoms[0] if isinstance(g, MultiLineString) and len(g.geoms) == 1 else g), crs=frame.crs)
    return frame


# ----------------------------------------------------------------------------- GeoPackage extras

# QGIS's layer_styles table, as QGIS itself creates it in a GeoPackage.
_LAYER_STYLES_DDL = """CREATE TABLE IF NOT EXISTS layer_styles (
    id INTEGER PRIMARY KEY AUTOINCREMENT, f_table_catalog TEXT(256), f_table_schema TEXT(256),
    f_table_name TEXT(256), f_geometry_column TEXT(256), styleName TEXT(30), styleQML TEXT, styleSLD TEXT,
    useAsDefault BOOLEAN, description TEXT, owner TEXT(30), ui TEXT(30), update_time DATETIME DEFAULT CURRENT_TIMESTAMP)"""

# Regions graduated by demand: five quantile classes, light to dark blue (ColorBrewer Blues).
DEMAND_RAMP = ("#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c")


def write_gpkg_extras(gpkg: Path, layers: PlanLayers) -> None:
    """Add `layer_styles`, `dcplace_metadata` and `dcplace_fields` to a GeoPackage that
    holds the three layers, registering the two dcplace tables (and layer_styles, as QGIS
    does) in gpkg_contents as 'attributes'."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    connection = sqlite3.connect(gpkg)
    try:
        with connection:
            geometry_column = dict(connection.execute("SELECT table_name, column_name FROM gpkg_geometry_columns"))
            connection.execute(_LAYER_STYLES_DDL)
            for name, (qml, sld, description) in layer_styles(layers).items():
                connection.execute(
                    "INSERT INTO layer_styles (f_table_catalog, f_table_schema, f_table_name, f_geometry_column, styleName, "
                    "styleQML, styleSLD, useAsDefault, description, owner, ui, update_time) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    ("", "", name, geometry_column[name], f"dcplace {name}", qml, sld, 1, description, "dcplace", "", now))
            connection.execute("CREATE TABLE dcplace_metadata (key TEXT PRIMARY KEY NOT NULL, value TEXT)")
            connection.executemany("INSERT INTO dcplace_metadata (key, value) VALUES (?, ?)", metadata_rows(layers, now))
            connection.execute("CREATE TABLE dcplace_fields (layer TEXT NOT NULL, column_name TEXT NOT NULL, unit TEXT, "
                               "description TEXT, PRIMARY KEY (layer, column_name))")
            connection.executemany("INSERT INTO dcplace_fields VALUES (?, ?, ?, ?)", field_rows(layers))
            for table, description in (
                ("layer_styles", "QGIS layer styles"),
                ("dcplace_metadata", f"dcplace plan record: scenario {layers.plan.scenario}, hash {layers.plan.scenario_hash}"),
                ("dcplace_fields", "unit and meaning of every column of the sites, regions and assignments layers"),
            ):
                connection.execute(
                    "INSERT OR REPLACE INTO gpkg_contents (table_name, data_type, identifier, description, last_change) "
                    "VALUES (?, 'attributes', ?, ?, ?)", (table, table, description, now))
    finally:
        connection.close()


def metadata_rows(layers: PlanLayers, exported_utc: str) -> list[tuple[str, str]]:
    """The plan an export came from, as (key, value) text rows."""
    from dcplace.reports.economics import variant_overrides
    from dcplace.reports.summary import overrides_label

    plan = layers.plan
    solve = plan.solve
    number = lambda v: "" if v is None else repr(float(v))  # noqa: E731
    rows = {
        "plan": layers.folder.resolve().name, "scenario": plan.scenario, "scenario_hash": plan.scenario_hash,
        "created_utc": plan.created_utc, "exported_utc": exported_utc,
        "solver": f"{solve.solver} {solve.solver_version}".strip(), "status": solve.status,
        "objective_usd_per_year": number(plan.objective_usd_per_year), "gap": number(solve.gap),
        "mip_gap": number(solve.options.get("mip_gap")),
        "dcplace_version": package_versions(("dcplace",))["dcplace"],
        "crs": CRS, "input_provenance": layers.provenance.origin or "as given: no provenance recorded for these inputs",
        "rerun": str(plan.provenance.get("rerun", "")),
        "overrides": overrides_label(variant_overrides(plan)),  # what makes it a variant (--set), '' for none
        "layers": "sites;regions;assignments",
    }
    return list(rows.items())


def layer_styles(layers: PlanLayers) -> dict[str, tuple[str, str, str]]:
    """layer -> (QML, SLD, description) of its default style."""
    sites, regions, lines = layers.sites, layers.regions, layers.assignments
    max_mw = float(np.nanmax(sites["it_mw"])) if len(sites) else 0.0
    roles = [(role, ROLE_COLOURS[role]) for role in ROLE_COLOURS] + [("closed", CLOSED_COLOUR)]
    size = f'coalesce(scale_exp("it_mw", 0, {max(max_mw, 1e-9)!r}, 2, 12, 0.5), 2)'  # marker area ~ IT MW
    site_qml = _qml(
        _categorized("role", [(v, v, colour) for v, colour in roles], "marker", size_expression=size),
        geometry_type=0, label_field="name", label_filter='"open"')
    site_sld = _sld("sites", [(f"role {v}", ("role", v), "point", colour, 6) for v, colour in roles])

    # The same colour per class as the static and interactive maps.
    class_colours = [(c, c, colour) for c, colour in colours_by_class(workload_classes(layers)).items()]
    max_tok = float(lines["served_tok_s"].max()) if len(lines) else 0.0
    width = f'coalesce(scale_linear("served_tok_s", 0, {max(max_tok, 1e-9)!r}, 0.2, 3), 0.2)'
    line_qml = _qml(_categorized("workload", class_colours, "line", width_expression=width), geometry_type=1)
    line_sld = _sld("assignments", [(f"class {v}", ("workload", v), "line", colour, 1) for v, _, colour in class_colours])

    demand = regions["demand_tok_s"].to_numpy(dtype=float)
    breaks = _quantile_breaks(demand, len(DEMAND_RAMP))
    ranges = [(lo, hi, DEMAND_RAMP[round(i * (len(DEMAND_RAMP) - 1) / max(len(breaks) - 2, 1))])
              for i, (lo, hi) in enumerate(zip(breaks[:-1], breaks[1:]))]
    region_qml = _qml(_graduated("demand_tok_s", ranges), geometry_type=0)
    region_sld = _sld("regions", [(f"demand {lo:,.0f}-{hi:,.0f} tok/s", ("demand_tok_s", (lo, hi)), "point", colour, 5)
                                  for lo, hi, colour in ranges] or [("regions", None, "point", REGION_COLOUR, 5)])
    return {
        "sites": (site_qml, site_sld, "sites categorized by role, marker area proportional to IT MW, open sites labelled"),
        "regions": (region_qml, region_sld, "regions graduated by peak demand (tok/s), quantiles"),
        "assignments": (line_qml, line_sld, "assignment lines coloured by workload class, width by tok/s served"),
    }


def _quantile_breaks(values: np.ndarray, classes: int) -> list[float]:
    values = values[np.isfinite(values)]
    if not len(values):
        return []
    breaks = sorted(set(float(v) for v in np.quantile(values, np.linspace(0, 1, classes + 1))))
    return breaks if len(breaks) > 1 else [breaks[0], breaks[0]]


def _rgba(colour: str) -> str:
    return ",".join(str(int(colour[i:i + 2], 16)) for i in (1, 3, 5)) + ",255"


def _option(name: str, value: str, kind: str = "QString") -> str:
    return f"<Option type={quoteattr(kind)} name={quoteattr(name)} value={quoteattr(value)}/>"


def _data_defined(prop: str | None, expression: str | None) -> str:
    inner = ""
    if prop and expression:
        inner = (f'<Option type="Map" name="properties"><Option type="Map" name={quoteattr(prop)}>'
                 f'{_option("active", "true", "bool")}{_option("expression", expression)}{_option("type", "3", "int")}'
                 "</Option></Option>")
    return (f'<data_defined_properties><Option type="Map">{_option("name", "")}{inner}{_option("type", "collection")}'
            "</Option></data_defined_properties>")


def _symbol(name: str, kind: str, colour: str, size_expression: str | None = None, width_expression: str | None = None) -> str:
    if kind == "marker":
        options = (_option("name", "circle") + _option("color", _rgba(colour)) + _option("outline_color", "255,255,255,255")
                   + _option("outline_width", "0.2") + _option("outline_width_unit", "MM") + _option("size", "3")
                   + _option("size_unit", "MM"))
        layer_class, prop, expression = "SimpleMarker", "size", size_expression
    else:
        options = (_option("line_color", _rgba(colour)) + _option("line_width", "0.4") + _option("line_width_unit", "MM")
                   + _option("capstyle", "round") + _option("joinstyle", "round"))
        layer_class, prop, expression = "SimpleLine", "outlineWidth", width_expression
    return (f'<symbol type="{kind}" name={quoteattr(name)} alpha="{0.85 if kind == "marker" else 0.7}" clip_to_extent="1" force_rhr="0">'
            f"{_data_defined(None, None)}"
            f'<layer class="{layer_class}" enabled="1" locked="0" pass="0"><Option type="Map">{options}</Option>'
            f"{_data_defined(prop, expression)}</layer></symbol>")


def _categorized(attribute: str, categories: list[tuple[str, str, str]], kind: str, size_expression: str | None = None,
                 width_expression: str | None = None) -> str:
    cats = "".join(f'<category value={quoteattr(str(v))} label={quoteattr(str(label))} symbol="{i}" render="true"/>'
                   for i, (v, label, _) in enumerate(categories))
    symbols = "".join(_symbol(str(i), kind, colour, size_expression, width_expression) for i, (_, _, colour) in enumerate(categories))
    return (f'<renderer-v2 type="categorizedSymbol" attr={quoteattr(attribute)} symbollevels="0" enableorderby="0" forceraster="0">'
            f"<categories>{cats}</categories><symbols>{symbols}</symbols></renderer-v2>")


def _graduated(attribute: str, ranges: list[tuple[float, float, str]]) -> str:
    items = "".join(f'<range lower="{lo!r}" upper="{hi!r}" label={quoteattr(f"{lo:,.0f} - {hi:,.0f} tok/s")} symbol="{i}" render="true"/>'
                    for i, (lo, hi, _) in enumerate(ranges))
    symbols = "".join(_symbol(str(i), "marker", colour) for i, (_, _, colour) in enumerate(ranges))
    return (f'<renderer-v2 type="graduatedSymbol" attr={quoteattr(attribute)} graduatedMethod="GraduatedColor" symbollevels="0" '
            f'enableorderby="0" forceraster="0"><ranges>{items}</ranges><symbols>{symbols}</symbols>'
            '<classificationMethod id="Quantile"/></renderer-v2>')


def _qml(renderer: str, geometry_type: int, label_field: str | None = None, label_filter: str | None = None) -> str:
    labeling = ""
    if label_field:
        labeling = ('<labeling type="simple"><settings calloutType="simple">'
                    f'<text-style fieldName={quoteattr(label_field)} isExpression="0" fontSize="8" fontSizeUnit="Point" '
                    'textColor="40,40,40,255" namedStyle="Regular"/>'
                    '<text-buffer bufferDraw="1" bufferSize="0.8" bufferSizeUnits="MM" bufferColor="255,255,255,255"/>'
                    '<placement placement="6" dist="1" distUnits="MM"/>'
                    '<rendering obstacle="1" scaleVisibility="0" displayAll="0" upsidedownLabels="0"/>'
                    f'<dd_properties><Option type="Map">{_option("name", "")}'
                    f'<Option type="Map" name="properties"><Option type="Map" name="Show">{_option("active", "true", "bool")}'
                    f'{_option("expression", label_filter or "true")}{_option("type", "3", "int")}</Option></Option>'
                    f'{_option("type", "collection")}</Option></dd_properties></settings></labeling>')
    return ("<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
            f'<qgis version="3.28.0" styleCategories="Symbology|Labeling" labelsEnabled="{1 if label_field else 0}">'
            f"{renderer}{labeling}<layerGeometryType>{geometry_type}</layerGeometryType></qgis>\n")


def _sld(layer: str, rules: list[tuple[str, tuple[str, object] | None, str, str, float]]) -> str:
    """A plain SLD 1.1 (Symbology Encoding) with one rule per category or class."""
    out = []
    for title, test, kind, colour, size in rules:
        if test is None:
            where = ""
        elif isinstance(test[1], tuple):
            lo, hi = test[1]
            where = (f"<ogc:Filter><ogc:PropertyIsBetween><ogc:PropertyName>{escape(test[0])}</ogc:PropertyName>"
                     f"<ogc:LowerBoundary><ogc:Literal>{lo!r}</ogc:Literal></ogc:LowerBoundary>"
                     f"<ogc:UpperBoundary><ogc:Literal>{hi!r}</ogc:Literal></ogc:UpperBoundary></ogc:PropertyIsBetween></ogc:Filter>")
        else:
            where = (f"<ogc:Filter><ogc:PropertyIsEqualTo><ogc:PropertyName>{escape(test[0])}</ogc:PropertyName>"
                     f"<ogc:Literal>{escape(str(test[1]))}</ogc:Literal></ogc:PropertyIsEqualTo></ogc:Filter>")
        if kind == "point":
            symbolizer = (f'<se:PointSymbolizer><se:Graphic><se:Mark><se:WellKnownName>circle</se:WellKnownName>'
                          f'<se:Fill><se:SvgParameter name="fill">{colour}</se:SvgParameter></se:Fill>'
                          '<se:Stroke><se:SvgParameter name="stroke">#ffffff</se:SvgParameter></se:Stroke></se:Mark>'
                          f"<se:Size>{size}</se:Size></se:Graphic></se:PointSymbolizer>")
        else:
            symbolizer = (f'<se:LineSymbolizer><se:Stroke><se:SvgParameter name="stroke">{colour}</se:SvgParameter>'
                          f'<se:SvgParameter name="stroke-width">{size}</se:SvgParameter></se:Stroke></se:LineSymbolizer>')
        out.append(f"<se:Rule><se:Name>{escape(title)}</se:Name>{where}{symbolizer}</se:Rule>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<StyledLayerDescriptor version="1.1.0" '
            'xmlns="http://www.opengis.net/sld" xmlns:se="http://www.opengis.net/se" xmlns:ogc="http://www.opengis.net/ogc" '
            'xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
            f"<NamedLayer><se:Name>{escape(layer)}</se:Name><UserStyle><se:Name>dcplace {escape(layer)}</se:Name>"
            f"<se:FeatureTypeStyle>{''.join(out)}</se:FeatureTypeStyle></UserStyle></NamedLayer></StyledLayerDescriptor>\n")
