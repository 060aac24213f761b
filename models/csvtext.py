"""A CSV file's text read into a frame of strings, with a problem that names the line and
says what to do for each way a CSV goes wrong: not UTF-8, not comma-separated, line ends of
two kinds, empty, a row with more cells than the header, a quote never closed; and the other
way, text cells made safe to open in a spreadsheet for every CSV dcplace writes for people."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd

from dcplace.models.errors import ProblemLog

_DELIMITERS = {";": "';'", "\t": "tabs", "|": "'|'"}
_LONE_CR = re.compile("\r(?!\n)")


def read_csv_text(path: Path, label: str, log: ProblemLog) -> pd.DataFrame | None:
    """The CSV as strings; None (and a problem that says what to do) if not UTF-8 or not comma-separated."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        bad = data[exc.start : exc.start + 1].hex()
        log.add(label, line, None, f"is not UTF-8 text: line {line}, character {column} is the byte 0x{bad}, which UTF-8 does not allow "
                "(the file was probably saved as Latin-1 / Windows-1252).", "save it as UTF-8 (in Excel: Save As > CSV UTF-8).")
        return None
    if "\r" in text and "\n" not in text:
        text = text.replace("\r", "\n")  # old Mac line ends (Excel for Mac's "CSV (Macintosh)")
    header = text.split("\n", 1)[0]
    if "," not in header:
        counts = {d: header.count(d) for d in _DELIMITERS}
        delimiter = max(counts, key=counts.get)
        if counts[delimiter]:
            log.add(label, 1, None, f"this file is delimited by {_DELIMITERS[delimiter]}, not by commas, so its columns cannot be read.",
                    "save it comma-separated (CSV with ',' between cells).")
            return None
    if not text.strip():
        log.add(label, None, None, "is empty: it has no header row.", "write the header row and the table's rows (or drop the "
                "table from the scenario if it is optional).")
        return None
    shape = _shape_problem(text)
    if shape is not None:
        log.add(label, *shape)
        return None
    # index_col=False: a first data row one cell longer than the header must not become the index (refused above anyway)
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True, index_col=False)


def _shape_problem(text: str) -> tuple[int, None, str, str] | None:
    """(line, field, message, fix) of the first line a CSV reader would misread, with its physical
    line number: a carriage return inside a line, a row longer than the header, a quote never closed."""
    quotes, scanned = 0, 0
    for match in _LONE_CR.finditer(text):
        quotes += text.count('"', scanned, match.start())
        scanned = match.start()
        if quotes % 2 == 0:  # outside a quoted cell (inside one, a line break is part of the cell)
            line = text.count("\n", 0, match.start()) + 1
            return (line, None, "holds a carriage return inside a line (line ends of two kinds: a file saved with Windows line "
                    "ends, then edited by a tool that added cells after them?), so the cells after it cannot be read.",
                    "save the file with one kind of line end (e.g. dos2unix, or open and save it in a spreadsheet).")
    reader = csv.reader(io.StringIO(text, newline=""))
    width = len(next(reader))
    last = start = reader.line_num + 1  # the physical line the next record starts on
    try:
        for record in reader:
            if len(record) > width:
                return (start, None, f"line {start} has {len(record)} cells but the header has {width} columns.",
                        "remove the extra cells, or quote a cell that holds a comma (\"a, b\").")
            last, start = start, reader.line_num + 1
    except csv.Error as exc:
        return (start, None, f"line {start} cannot be read as CSV: {one_line(exc)}.", "save it as a comma-separated table with one header row.")
    if text.count('"') % 2:  # the reader took everything after an unclosed quote as one cell of the last record
        return (last, None, f"a quoted cell opened on line {last} is never closed (is the file cut short?).",
                "close the quote, or restore the end of the file.")
    return None


def one_line(exc: BaseException) -> str:
    """A reader's error text on one line, without its trailing period (the message adds its own)."""
    return " ".join(str(exc).split()).rstrip(".") or type(exc).__name__


# A spreadsheet reads a cell that starts with one of these as a formula (OWASP "CSV
# injection"): =HYPERLINK(...), +cmd|..., -2+3, @SUM(...); tab and CR also start one.
_FORMULA = re.compile(r"^'*[=+\-@\t\r]")
_NEUTRALISED = re.compile(r"^'+[=+\-@\t\r]")


def spreadsheet_text(value: object) -> object:
    """A text cell safe to open in a spreadsheet: text that a spreadsheet would run as a
    formula gets a leading `'` (OWASP), so `=HYPERLINK("…")` shows as typed. Numbers, and
    anything else that is not a str, are returned unchanged, so `-3.5` stays a number.

    Reversible (`from_spreadsheet_text`): text already starting with quotes before such a
    character gets one more, so every name reads back exactly."""
    return "'" + value if isinstance(value, str) and _FORMULA.match(value) else value


def from_spreadsheet_text(value: object) -> object:
    """The text `spreadsheet_text` was given (for dcplace reading its own spreadsheet CSVs)."""
    return value[1:] if isinstance(value, str) and _NEUTRALISED.match(value) else value


def _map_text_columns(frame: pd.DataFrame, fn) -> pd.DataFrame:
    """A copy of `frame` with `fn` applied to its text cells; numeric, boolean and geometry
    columns are left as they are (a negative number is a number, not a formula)."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column].dtype):
            if column == getattr(out, "_geometry_column_name", None):
                continue
            out[column] = out[column].map(fn)
    return out


def spreadsheet_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose text cells are `spreadsheet_text`."""
    return _map_text_columns(frame, spreadsheet_text)


def from_spreadsheet_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Undo `spreadsheet_frame` on a frame read back from such a CSV."""
    return _map_text_columns(frame, from_spreadsheet_text)


def write_spreadsheet_csv(frame: pd.DataFrame, path: Path) -> None:
    """Write a CSV meant for people (a spreadsheet): text cells `spreadsheet_text`, numbers as
    they are. Every CSV dcplace writes for people goes through here; files it reads back as
    inputs (inputs/, scenario folders) keep every value exactly."""
    spreadsheet_frame(frame).to_csv(path, index=False)
