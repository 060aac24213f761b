"""Plan layers as GIS files that geopandas, QGIS and GDAL read as they are.

| format  | files                                              |
| ------- | -------------------------------------------------- |
| geojson | sites.geojson, regions.geojson, assignments.geojson (RFC 7946, EPSG:4326) |
| gpkg    | plan.gpkg with layers sites, regions, assignments  |
| parquet | sites.parquet, regions.parquet, assignments.parquet (GeoParquet) |
| csv     | sites.csv, regions.csv, assignments.csv with a WKT geometry column, and a .csvt (column types) and .prj (EPSG:4326) beside each, so GDAL and QGIS read typed columns and geometry |

The CSV layers are meant for spreadsheets as well as GIS, so a text cell a spreadsheet
would run as a formula (it starts with `=`, `+`, `-`, `@`, a tab or CR) is written with a
leading `'` (`reports.output.spreadsheet_text`); numbers stay numbers, and `read_layer`
removes the quote again. GeoJSON, GeoPackage and Parquet hold every name exactly.
"""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd

from dcplace.reports.layers import PlanLayers
from dcplace.reports.output import from_spreadsheet_frame, spreadsheet_frame, staged_files

FORMATS = ("geojson", "gpkg", "parquet", "csv")


def export_layers(layers: PlanLayers, out_dir: str | Path, fmt: str) -> list[Path]:
    """Write the plan's sites, regions and assignments in `fmt` into `out_dir`.

    Files appear all at once (staged, then moved into place); returns their paths.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    frames = layers.layers()
    with staged_files(out_dir, "export") as stage:
        if fmt == "gpkg":
            for name, frame in frames.items():
                frame.to_file(stage.dir / "plan.gpkg", layer=name, driver="GPKG", engine="pyogrio")
        else:
            for name, frame in frames.items():
                _write_one(frame, stage.dir / name, fmt)
    return stage.moved


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
    return gpd.read_file(path, layer=layer, engine="pyogrio")
