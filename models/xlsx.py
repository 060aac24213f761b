"""Excel workbooks (.xlsx) as input tables, read with openpyxl, with the problems a CSV gets.

A scenario names a workbook's first sheet as `sites: sites.xlsx`, or another sheet as
`sites: book.xlsx#Quotes`. The header is the sheet's first row that holds anything (a title
row above it is not supported: the first non-empty row is the header); every row below is
a record, numbered by its row in the sheet, as Excel shows it. Each cell is read as the text a
CSV of the sheet would hold (a number as Python writes it, exactly; a date as ISO 8601), so
the validation and every message are the CSV's: a problem names the workbook and the sheet
("sites.xlsx, sheet 'Sites'"), the row, the column's header, and the cell (`cell H3`).

What goes wrong with workbooks in particular is said outright: an old binary .xls, a sheet
that is not there (with the sheets that are), a formula whose value was never saved (a
workbook written by a program and not opened in Excel since), an error value (#DIV/0!).
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pandas as pd

from dcplace.models.csvtext import one_line
from dcplace.models.errors import ProblemLog

XLSX_SUFFIXES = {".xlsx", ".xlsm"}
SHEET_SEPARATOR = "#"
_ERRORS = {"#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A", "#GETTING_DATA", "#SPILL!", "#CALC!"}


def split_sheet(path: Path) -> tuple[Path, str | None]:
    """`book.xlsx#Sheet` -> (book.xlsx, 'Sheet'); any other path -> (path, None)."""
    name = path.name
    for suffix in XLSX_SUFFIXES:
        mark = suffix + SHEET_SEPARATOR
        at = name.lower().find(mark)
        if at > 0:
            return path.with_name(name[: at + len(suffix)]), name[at + len(mark):]
    return path, None


def column_letter(index: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def _text(value: Any) -> str:
    """A cell as the text a CSV export of the sheet holds (numbers exactly, dates ISO 8601)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    return str(value)


class Sheet:
    """One sheet read as strings: the frame, where its header is, and each column's letter."""

    def __init__(self, frame: pd.DataFrame, name: str, header_row: int, letters: dict[str, str], row_numbers: list[int],
                 label: str):
        self.frame = frame
        self.name = name
        self.header_row = header_row
        self.letters = letters  # header text -> column letter
        self.row_numbers = row_numbers  # each record's row in the sheet
        self.label = label  # "sites.xlsx, sheet 'Sites'": the file every problem names

    def numbered(self, table):
        """`table` (models.tables.Table, made from `frame`) with the sheet's row numbers and column letters."""
        table.row_numbers = self.row_numbers
        table.letters = self.letters
        return table


def read_xlsx(path: Path, sheet: str | None, label: str, log: ProblemLog) -> Sheet | None:
    """The sheet (None: the first) as a frame of strings; None and a problem when it cannot be read."""
    from openpyxl import load_workbook

    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except PermissionError:
        raise
    except Exception as exc:  # noqa: BLE001 - a reader failure is an input problem
        log.add(label, None, None, f"cannot be read as an Excel workbook: {one_line(exc)}.",
                "save it from Excel as an .xlsx workbook (File > Save As > Excel Workbook).")
        return None
    try:
        names = book.sheetnames
        if sheet is None:
            sheet = names[0]
        elif sheet not in names:
            close = [n for n in names if n.strip().casefold() == sheet.strip().casefold()]
            log.add(f"{label}, sheet '{sheet}'", None, None, f"the workbook has no sheet '{sheet}' (its sheets: {', '.join(repr(n) for n in names)}).",
                    f"name the sheet as the workbook spells it, e.g. {path.name}#{close[0] if close else names[0]}.")
            return None
        rows = [list(r) for r in book[sheet].iter_rows(values_only=True)]
    finally:
        book.close()
    where = f"{label}, sheet '{sheet}'"
    start = next((i for i, r in enumerate(rows) if any(v is not None and str(v).strip() for v in r)), None)
    if start is None:
        log.add(where, None, None, "is empty: it has no header row.", "write the header row and the table's rows in this sheet.")
        return None
    width = max(len(r) for r in rows[start:])
    header = [_text(v).strip() for v in rows[start]] + [""] * (width - len(rows[start]))
    body = [r + [None] * (width - len(r)) for r in rows[start + 1:]]
    first = start + 2  # sheet rows are 1-based; the first record is the row under the header
    if _value_problems(path, sheet, header, body, first, where, log):
        return None
    # a blank row is no record (as a blank line of a CSV); the others keep their sheet row numbers
    kept = [(first + i, r) for i, r in enumerate(body) if any(_text(v).strip() for v in r)]
    columns = [h or f"Unnamed: {i}" for i, h in enumerate(header)]
    frame = pd.DataFrame([[_text(v) for v in r] for _, r in kept], columns=columns, dtype=str)
    letters = {h: column_letter(i) for i, h in enumerate(header) if h}
    return Sheet(frame, sheet, start + 1, letters, [n for n, _ in kept], where)


def _value_problems(path: Path, sheet: str, header: list[str], body: list[list[Any]], first: int, where: str,
                    log: ProblemLog) -> bool:
    """Error values (#DIV/0!) and formulas without a saved value: problems naming the cell."""
    found = False
    empty: list[tuple[int, int]] = []
    for r, row in enumerate(body):
        for c, value in enumerate(row):
            if isinstance(value, str) and value.strip() in _ERRORS:
                found = True
                log.add(where, first + r, header[c] or None, f"cell {column_letter(c)}{first + r} holds the error value {value.strip()}.",
                        "correct the formula or type the value.")
            elif value is None and c < len(header) and header[c]:
                empty.append((r, c))
    if empty:  # a formula never calculated reads as empty: look at the formulas themselves
        from openpyxl import load_workbook

        book = load_workbook(path, read_only=True, data_only=False)
        try:
            formulas = [list(x) for x in book[sheet].iter_rows(min_row=first, values_only=True)]
        finally:
            book.close()
        for r, c in empty:
            value = formulas[r][c] if r < len(formulas) and c < len(formulas[r]) else None
            if isinstance(value, str) and value.startswith("="):
                found = True
                log.add(where, first + r, header[c], f"cell {column_letter(c)}{first + r} holds the formula {value[:60]} but no saved "
                        "value (the workbook was written by a program and not recalculated since).",
                        "open the workbook in Excel or LibreOffice and save it (that stores each formula's value), or type the value.")
    return found


class CellLog:
    """A ProblemLog that adds the cell (`cell H3`) to each problem of a sheet's row and column."""

    def __init__(self, log: ProblemLog, letters: dict[str, str]):
        self._log = log
        self._letters = letters

    def add(self, file: str, row: int | None, field: str | None, message: str, fix: str = "") -> None:
        letter = self._letters.get(field or "")
        if letter and row is not None:
            message = f"{message.rstrip('.')} (cell {letter}{row})."
        self._log.add(file, row, field, message, fix)

    def __getattr__(self, name: str):
        return getattr(self._log, name)

    def __bool__(self) -> bool:
        return bool(self._log)
