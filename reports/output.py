"""Writing report files: HTML from the templates, text cells made safe for spreadsheets
(models.csvtext, shared with the plan folder's own CSVs), and staging so that a failure leaves nothing half-written behind."""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

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

# A figure and its unit, never split across lines in HTML ("$451.90 M", "± $8.5 M", "11.2 M tok/s",
# "99.7 %", "42 job-days"): each is wrapped in <span class="fig"> (white-space: nowrap in the page).
_FIGURE = re.compile(r"(?:± ?)?-?\$?\d[\d,]*(?:\.\d+)?(?: ?(?:M tok/s|k tok/s|tok/s|M|k|MW|kW|ms|%|t CO₂/yr|t CO₂|job-days))?"
                     r"(?![\w/])")


def figures(value: Any) -> Markup:
    """The text, HTML-escaped, with every figure and its unit kept on one line."""
    text = str(escape(_shown(value)))
    return Markup(_FIGURE.sub(lambda m: f'<span class="fig">{m.group(0)}</span>' if " " in m.group(0) else m.group(0), text))


_TEMPLATES.filters["figs"] = figures


def render_html(template: str, **context: Any) -> str:
    """Render reports/templates/<template>; every value is HTML-escaped (autoescape is on)."""
    return _TEMPLATES.get_template(template).render(**context)


# Staging lives with the other rules for folders dcplace writes (models.outputs).
__all__ = ["Stage", "check_destination", "from_spreadsheet_frame", "from_spreadsheet_text", "render_html", "spreadsheet_frame",
           "spreadsheet_text", "staged_files"]
