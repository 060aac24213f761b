"""Reading input tables: CSV, Excel (.xlsx, models/xlsx.py), Parquet, GeoJSON, GeoPackage (or a DataFrame in memory)
into rows, and validating each row as a record.

Every problem names the file, the row and the field (models/errors.py). What the user
usually did wrong gets said outright: a file saved with ';' or tabs as delimiter, a file
not saved as UTF-8 (with the line of the first bad byte), a header cell left empty, a
polygon where a point is needed, an id that differs from another only by case.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from dcplace.models.csvtext import one_line, read_csv_text
from dcplace.models.errors import DANGLING_LINK, ProblemLog, unreadable
from dcplace.models.interactivity import check_curves
from dcplace.models.ranges import RANGE_ERRORS, range_text
from dcplace.models.xlsx import SHEET_SEPARATOR, XLSX_SUFFIXES, CellLog, read_xlsx, split_sheet
from dcplace.models.records import (
    Catalog,
    Chip,
    Cooling,
    Fabric,
    RackConfig,
    Record,
    Throughput,
    Workload,
)

GEO_SUFFIXES = {".geojson", ".json", ".gpkg", ".shp"}
TABLE_SUFFIXES = {".csv", ".parquet"} | GEO_SUFFIXES | XLSX_SUFFIXES

# Columns that document a row (sources, assumptions) and are carried but not modelled.
DOC_COLUMN_PREFIXES = ("source", "note", "assumption", "rule", "description")

# Input columns in another unit, converted once: column -> (dcplace column, factor).
UNIT_ALTERNATIVES = {
    "power_limit_mw": ("power_limit_kw", 1000.0),
}
# The fix a problem in such a column gives (in that column's unit).
UNIT_FIXES = {
    "power_limit_mw": "facility power available in MW, e.g. 300 (a value in the tens of thousands is probably kW: divide it by "
                      "1000, or name the column power_limit_kw)",
}

CATALOG_TABLES: dict[str, type[Record]] = {
    "chips": Chip,
    "rack_configs": RackConfig,
    "cooling": Cooling,
    "fabrics": Fabric,
    "workloads": Workload,
    "throughput": Throughput,
}

_UNNAMED = re.compile(r"^Unnamed: (\d+)$")  # pandas' name for a column with an empty header cell
_SURROGATE = re.compile("[\ud800-\udfff]")


class Table:
    """Rows of one input file as dicts of Python values, with their row numbers.

    `geometry_types` holds, for a geodata layer, each feature's geometry type (None for a
    feature without geometry); None for a table without geometry.
    """

    def __init__(self, path: Path, label: str, rows: list[dict[str, Any]], row_numbers: list[int], columns: list[str],
                 geometry_types: list[str | None] | None = None, header_row: int | None = None):
        self.path = path
        self.label = label
        self.rows = rows
        self.row_numbers = row_numbers
        self.columns = columns
        self.geometry_types = geometry_types
        self.header_row = header_row  # 1 for a CSV (problems with a column name point at line 1)
        self.letters: dict[str, str] = {}  # a sheet's column letters by header: problems name the cell (H3)


def join_surrogates(text: str) -> str:
    """A string with UTF-16 surrogate pairs (JSON's escape for an emoji: "\\ud83d\\ude80")
    joined into the characters they stand for; raises UnicodeError on a lone surrogate."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16")


def _clean_cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        try:
            return join_surrogates(value)
        except UnicodeError:
            return value  # left as is; the row check names the cell
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    if value is pd.NaT:
        return None
    return value


def read_table(path: Path, label: str, log: ProblemLog) -> Table | None:
    """Read a CSV, Excel (`book.xlsx`, `book.xlsx#Sheet`), Parquet, GeoJSON or GeoPackage table; None (and a problem) if unreadable."""
    path, sheet = split_sheet(path)  # book.xlsx#Sheet
    if path.is_dir():
        log.add(label, None, None, "is a folder, not a table file.", f"give the path of a .csv, .xlsx, .parquet, .geojson or .gpkg file (looked at {path}).")
        return None
    if not path.exists():
        if path.is_symlink():
            log.add(label, None, None, DANGLING_LINK, f"point the link at the table file, or give the file's own path (looked at {path}).")
        else:
            log.add(label, None, None, "file not found.", f"create it, or correct the path (looked for {path}).")
        return None
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        log.add(label, None, None, f"unsupported table format '{suffix}'.", "use .csv, .xlsx, .parquet, .geojson or .gpkg.")
        return None
    geometry_types = None
    try:
        if suffix in XLSX_SUFFIXES:
            book = read_xlsx(path, sheet, label.removesuffix(f"{SHEET_SEPARATOR}{sheet}") if sheet else label, log)
            return None if book is None else book.numbered(frame_table(book.frame, book.label, log, path=path, header_row=book.header_row))
        if suffix == ".csv":
            frame = read_csv_text(path, label, log)
            if frame is None:
                return None
            first_row = 2  # line 1 is the header
        elif suffix == ".parquet":
            frame = pd.read_parquet(path)
            first_row = 1
        else:
            frame, geometry_types = _read_geo(path)
            first_row = 1
    except PermissionError:
        log.add(label, None, None, *unreadable(path))
        return None
    except Exception as exc:  # noqa: BLE001 - any reader failure is an input problem
        log.add(label, None, None, f"cannot be read: {one_line(exc)}.", f"check that the file is a valid {suffix.lstrip('.')} table "
                "(open it in the program that wrote it and save it again).")
        return None
    return frame_table(frame, label, log, path=path, first_row=first_row, geometry_types=geometry_types,
                       header_row=1 if suffix == ".csv" else None)


def _read_geo(path: Path) -> tuple[pd.DataFrame, list[str | None]]:
    """A layer as a frame with lat/lon columns taken from point geometry (EPSG:4326), and
    each feature's geometry type."""
    import geopandas as gpd

    gdf = gpd.read_file(path)
    return geo_frame(gdf)


def geo_frame(gdf) -> tuple[pd.DataFrame, list[str | None]]:
    """A GeoDataFrame as a plain frame with lat/lon from its points, and the geometry types."""
    if gdf.crs is not None and gdf.crs.to_epsg() != 4326:
        gdf = gdf.to_crs(4326)
    geom = gdf.geometry
    types = [None if g is None or g.is_empty else g.geom_type for g in geom]
    frame = pd.DataFrame(gdf.drop(columns=gdf.geometry.name))
    if "lat" not in frame.columns and "lon" not in frame.columns:
        frame["lon"] = [g.x if t == "Point" else None for g, t in zip(geom, types)]
        frame["lat"] = [g.y if t == "Point" else None for g, t in zip(geom, types)]
    return frame, types


def frame_table(frame: pd.DataFrame, label: str, log: ProblemLog, path: Path | None = None, first_row: int = 1,
                geometry_types: list[str | None] | None = None, header_row: int | None = None) -> Table:
    """A Table from a frame (read from a file or given in memory). Empty columns without a
    header (Excel's trailing `Unnamed: 13`) are dropped; a non-empty one is a problem."""
    if geometry_types is None and hasattr(frame, "geometry") and getattr(frame, "_geometry_column_name", None) in frame.columns:
        frame, geometry_types = geo_frame(frame)
    columns = [str(c).strip() for c in frame.columns]
    rows = [{k: _clean_cell(v) for k, v in zip(columns, rec)} for rec in frame.itertuples(index=False, name=None)]
    for column in list(columns):
        match = _UNNAMED.match(column)
        if not match and column:
            continue
        if any(row.get(column) is not None for row in rows):
            position = int(match.group(1)) + 1 if match else columns.index(column) + 1
            log.add(label, header_row, None, f"column {position} has no header but holds values.",
                    "give the column a name in the header row, or delete it.")
        columns.remove(column)
        for row in rows:
            row.pop(column, None)
    return Table(path or Path(label), label, rows, [first_row + i for i in range(len(rows))], columns, geometry_types, header_row)


def _field_fix(model: type[Record], field: str) -> str:
    info = model.model_fields.get(field)
    extra = info.json_schema_extra if info is not None else None
    return extra.get("fix", "") if isinstance(extra, dict) else ""


def _describe(error: dict[str, Any], bounds: str = "", converted: bool = False) -> str:
    """What is wrong with a value; `bounds` (the field's physical range, models.ranges.range_text)
    is stated for a value outside it; `converted`: the value is in the unit of the user's column."""
    kind = error["type"]
    if kind == "missing":
        return "is empty or missing."
    msg = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if kind == "finite_number" or (isinstance(value, float) and math.isnan(value)):
        return "is NaN or infinite; a finite number is needed" + (f" within {bounds}." if bounds else ".")
    shown = _shown(value) if value is not None and not isinstance(value, dict) else ""
    if kind in RANGE_ERRORS and bounds:
        if converted:  # pydantic's bound is in dcplace's unit, not the column's
            return f"is {shown or value}, outside its physical range {bounds}."
        return f"{msg} (got {shown or value}); its physical range is {bounds}."
    return f"{msg}{' (got ' + shown + ')' if shown else ''}."


def _shown(value: Any) -> str:
    """A cell as the user wrote it: a number read from text shows as the number (the same
    text whether the table came from a CSV or from a frame in memory)."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return repr(value)
        return value
    return repr(value)


def record_problems(model: type[Record], exc: ValidationError, file: str, row: int | None, column_of=None,
                    converted: dict[str, tuple[str, float]] | None = None):
    """Translate a pydantic ValidationError into problems naming file, row and field. A field
    the user gave in another unit (`converted`: field -> (their column, factor), e.g.
    power_limit_kw from power_limit_mw) is reported under their column, in their unit."""
    out = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        field = loc[0] if loc else None
        column = column_of(loc) if column_of else (".".join(loc) if loc else None)
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(field or "", list(model.model_fields), n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(model.model_fields)}."
            out.append((file, row, column, "unknown key.", hint))
            continue
        hint = (_field_fix(model, field) if field else "") or f"give a valid value for '{column}'."
        factor = 1.0
        if converted and field in converted:
            column, factor = converted[field]
            hint = UNIT_FIXES.get(column, hint)
            if isinstance(error.get("input"), float):
                error = {**error, "input": f"{error['input'] / factor:.15g}"}  # as the user wrote it, in their unit
        message = _describe(error, range_text(model, loc, column or "", factor), factor != 1.0)
        if column_of is None and len(loc) > 1 and loc[1].isdigit():
            # an entry of a list cell (power_steps_mw's YEAR:MW steps, a ';' list): the cell is the column
            part = f" ({('year', 'MW')[int(loc[2])]})" if field == "power_steps_mw" and len(loc) > 2 and loc[2] in ("0", "1") else ""
            column, message = field, f"entry {int(loc[1]) + 1}{part}: {message}"
        out.append((file, row, column, message, hint))
    return out


def _is_doc(column: str) -> bool:
    return column.lower().startswith(DOC_COLUMN_PREFIXES)


def parse_rows(
    table: Table,
    model: type[Record],
    log: ProblemLog,
    reshape=None,
    column_of=None,
    extra_columns: set[str] = frozenset(),
) -> list[tuple[int, Any]]:
    """Validate every row of `table` as a `model`: (row number, record) pairs; bad rows are logged and dropped.

    An unknown column is one problem (with the closest known column), not one per row.
    """
    log = CellLog(log, table.letters) if table.letters else log  # a sheet's problems name the cell (H3)
    known = set(model.model_fields) | set(UNIT_ALTERNATIVES) | set(extra_columns)
    if reshape is not None:
        # a field the reshape fills from its wide columns (rtt_budget_ms from rtt_budget_<class>_ms)
        # is not a column: one named so would be dropped by the reshape without a word
        known -= set(reshape.consumes)
    unknown = set()
    for column in table.columns:
        if column in known or _is_doc(column):
            continue
        unknown.add(column)
        close = difflib.get_close_matches(column, sorted(known), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known columns: {', '.join(sorted(known))}."
        where = f" (in all {len(table.rows)} rows)" if len(table.rows) > 1 else ""
        log.add(table.label, table.header_row, column, f"unknown column{where}.", hint)
    required = [n for n, f in model.model_fields.items() if f.is_required() and not (reshape and n in reshape.consumes)]
    missing = [c for c in required if c not in table.columns and not any(a in table.columns for a in _alts(c))]
    for column in missing:
        also = f" (or {', '.join(_alts(column))})" if _alts(column) else ""
        log.add(table.label, None, column, "required column is missing.", f"add a '{column}'{also} column.")
    if missing:
        return []
    points = "lat" in model.model_fields and table.geometry_types is not None
    records = []
    for index, (row, values) in enumerate(zip(table.row_numbers, table.rows)):
        values = {k: v for k, v in values.items() if k not in unknown and not _is_doc(k)}
        if points and (values.get("lat") is None or values.get("lon") is None):
            kind = table.geometry_types[index]
            if kind != "Point":
                what = f"the feature's geometry is a {kind}" if kind else "the feature has no geometry"
                log.add(table.label, row, "geometry", f"{what}; dcplace needs a point (one location) per row.",
                        "give the feature a Point geometry (the site's or region's location), or lat and lon columns.")
                continue
        if not _text_ok(values, table.label, row, log):
            continue
        converted = {UNIT_ALTERNATIVES[c][0]: (c, UNIT_ALTERNATIVES[c][1]) for c in UNIT_ALTERNATIVES if values.get(c) is not None}
        values = _convert_units(values, table.label, row, log)
        if values is None:
            continue
        if reshape is not None:
            values = reshape(values)
        try:
            records.append((row, model(**{k: v for k, v in values.items() if v is not None})))
        except ValidationError as exc:
            for problem in record_problems(model, exc, table.label, row, column_of, converted):
                log.add(*problem)
    return records


def _text_ok(values: dict[str, Any], label: str, row: int, log: ProblemLog) -> bool:
    ok = True
    for column, value in values.items():
        if isinstance(value, str) and _SURROGATE.search(value):
            log.add(label, row, column, f"holds a broken character escape (a lone UTF-16 surrogate, {_surrogate_at(value)}).",
                    "write the character itself, or a complete surrogate pair such as \\ud83d\\ude80.")
            ok = False
    return ok


def _surrogate_at(text: str) -> str:
    match = _SURROGATE.search(text)
    return f"\\u{ord(match.group()):04x} at character {match.start() + 1}" if match else "?"


def _alts(column: str) -> list[str]:
    return [a for a, (target, _) in UNIT_ALTERNATIVES.items() if target == column]


def _convert_units(values: dict[str, Any], label: str, row: int, log: ProblemLog) -> dict[str, Any] | None:
    for column, (target, factor) in UNIT_ALTERNATIVES.items():
        if column not in values:
            continue
        raw = values.pop(column)
        if values.get(target) is not None and raw is not None:
            log.add(label, row, column, f"both '{column}' and '{target}' are given.", "keep one of the two columns.")
            return None
        if raw is None:
            continue
        try:
            values[target] = float(raw) * factor
        except (TypeError, ValueError):
            log.add(label, row, column, f"is not a number (got {raw!r}).", "write a plain number.")
            return None
    return values


def check_unique(parsed: list[tuple[int, Any]], label: str, log: ProblemLog) -> None:
    """Every id once; ids that differ only by case or surrounding spaces ('nyc', 'NYC ') are
    the same id to a reader, so they are refused too, naming both rows."""
    seen: dict[str, int] = {}
    folded: dict[str, tuple[str, int]] = {}
    for row, rec in parsed:
        if rec.id in seen:
            log.add(label, row, "id", f"duplicate id '{rec.id}' (first used in row {seen[rec.id]}).", "give every row its own id.")
            continue
        key = rec.id.strip().casefold()
        if key in folded:
            other, other_row = folded[key]
            log.add(label, row, "id", f"id '{rec.id}' differs from id '{other}' in row {other_row} only by case or surrounding spaces.",
                    "write the same id the same way everywhere, or give the rows clearly different ids.")
        seen.setdefault(rec.id, row)
        folded.setdefault(key, (rec.id, row))


_check_unique = check_unique  # the old private name


class RegionReshape:
    """Folds wide demand_<w>_tok_s / rtt_budget_<w>_ms columns into the Region's dicts."""

    def __init__(self, workload_ids: list[str]):
        self.workload_ids = workload_ids
        self.consumes = {"demand_tok_s", "rtt_budget_ms", "failover_rtt_ms"}
        self.columns = {f"demand_{w}_tok_s" for w in workload_ids} | {f"rtt_budget_{w}_ms" for w in workload_ids}
        self.optional = {f"failover_rtt_{w}_ms" for w in workload_ids}  # per-region failover budgets (docs/resilience.md)

    def __call__(self, values: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in values.items() if k not in self.columns}
        out["demand_tok_s"] = {w: values.get(f"demand_{w}_tok_s") for w in self.workload_ids}
        out["rtt_budget_ms"] = {w: values.get(f"rtt_budget_{w}_ms") for w in self.workload_ids}
        out = {k: v for k, v in out.items() if k not in self.optional}
        out["failover_rtt_ms"] = {w: values[f"failover_rtt_{w}_ms"] for w in self.workload_ids
                                  if values.get(f"failover_rtt_{w}_ms") is not None}
        if all(v is None for v in out["demand_tok_s"].values()):
            out["demand_tok_s"] = {w: 0.0 for w in self.workload_ids}
        return out

    @staticmethod
    def column_of(loc: list[str]) -> str:
        if len(loc) >= 2 and loc[0] == "demand_tok_s":
            return f"demand_{loc[1]}_tok_s"
        if len(loc) >= 2 and loc[0] == "rtt_budget_ms":
            return f"rtt_budget_{loc[1]}_ms"
        if len(loc) >= 2 and loc[0] == "failover_rtt_ms":
            return f"failover_rtt_{loc[1]}_ms"
        return ".".join(loc)


_RegionReshape = RegionReshape


def section(model: type[Record], values: dict[str, Any], label: str, name: str, log: ProblemLog) -> Any:
    """A scenario section (economics, latency, policies) validated; problems name `name.key`."""
    try:
        return model(**values)
    except ValidationError as exc:
        for file, _, column, message, hint in record_problems(model, exc, label, None):
            log.add(file, None, f"{name}.{column}", message, hint)
        return model()


_section = section


def load_catalog(folder: Path, log: ProblemLog, label_root: Path | None = None) -> Catalog | None:
    """Read and cross-check the six catalog tables in `folder`."""
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "folder not found"
        log.add(_label(folder, label_root), None, None, f"catalog {what}.",
                "give a folder holding chips.csv, rack_configs.csv, cooling.csv, fabrics.csv, workloads.csv and throughput.csv.")
        return None
    tables = {}
    for name in CATALOG_TABLES:
        path = folder / f"{name}.csv"
        tables[name] = read_table(path, _label(path, label_root), log)
    return catalog_from_tables(tables, log)


def catalog_from_tables(tables: dict[str, Table | None], log: ProblemLog) -> Catalog | None:
    """Validate and cross-check the six catalog tables (None where a table could not be read)."""
    parts: dict[str, list[tuple[int, Any]]] = {}
    labels: dict[str, str] = {}
    for name, model in CATALOG_TABLES.items():
        table = tables.get(name)
        labels[name] = table.label if table is not None else name
        parts[name] = parse_rows(table, model, log) if table else []
        if name != "throughput":
            check_unique(parts[name], labels[name], log)
    chips = {c.id for _, c in parts["chips"]}
    workloads = {w.id for _, w in parts["workloads"]}
    # a table that could not be read is one problem, said once: its ids are not checked against (no knock-on errors)
    check_chips, check_workloads = tables.get("chips") is not None, tables.get("workloads") is not None
    for row, rc in parts["rack_configs"]:
        if check_chips and rc.chip not in chips:
            log.add(labels["rack_configs"], row, "chip", f"rack config '{rc.id}' names unknown chip '{rc.chip}'.", known_hint("chips", chips))
    for row, tp in parts["throughput"]:
        if check_chips and tp.chip not in chips:
            log.add(labels["throughput"], row, "chip", f"unknown chip '{tp.chip}'.", known_hint("chips", chips))
        if check_workloads and tp.workload not in workloads:
            log.add(labels["throughput"], row, "workload", f"unknown workload '{tp.workload}'.", known_hint("workloads", workloads))
    check_curves(parts["throughput"], parts["workloads"], labels, log)
    if not parts["workloads"] and not log:
        log.add(labels["workloads"], None, None, "no workload classes.", "add at least one row.")
    if log:
        return None
    return Catalog(**{name: tuple(rec for _, rec in recs) for name, recs in parts.items()})


def known_hint(what: str, ids: set[str]) -> str:
    return f"use one of the known {what}: {', '.join(sorted(ids))}."


_known = known_hint


def _label(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return str(path.relative_to(root))
        except ValueError:
            pass
    return str(path)


