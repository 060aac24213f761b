"""Writing report files: HTML from the templates, text cells made safe for spreadsheets
(models.csvtext, shared with the plan folder's own CSVs), and staging so that a failure leaves nothing half-written behind."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from dcplace.models.csvtext import from_spreadsheet_frame, from_spreadsheet_text, spreadsheet_frame, spreadsheet_text
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


# Staging lives with the other rules for folders dcplace writes (models.outputs).
__all__ = ["Stage", "check_destination", "from_spreadsheet_frame", "from_spreadsheet_text", "render_html", "spreadsheet_frame",
           "spreadsheet_text", "staged_files"]
