"""Writing report files: HTML from the templates, text cells made safe for spreadsheets,
and staging so that a failure leaves nothing half-written behind."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from dcplace.models.outputs import Stage, check_destination, staged_files
from dcplace.reports.style import without_bidi_controls

def _shown(value: Any) -> Any:
    """Every value a template prints, without bidi controls (reports.style.BIDI_CONTROLS); markup stays markup."""
    if isinstance(value, Markup):
        return Markup(without_bidi_controls(str(value)))
    return without_bidi_controls(value) if isinstance(value, str) else value


_TEMPLATES = Environment(loader=PackageLoader("dcplace.reports", "templates"), autoescape=select_autoescape(["html", "j2"]),
                         finalize=_shown)


def render_html(template: str, **context: Any) -> str:
    """Render reports/templates/<template>; every value is HTML-escaped (autoescape is on)."""
    return _TEMPLATES.get_template(template).render(**context)


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


# Staging lives with the other rules for folders dcplace writes (models.outputs).
__all__ = ["Stage", "check_destination", "from_spreadsheet_frame", "from_spreadsheet_text", "render_html", "spreadsheet_frame",
           "spreadsheet_text", "staged_files"]
