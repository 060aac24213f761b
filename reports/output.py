"""Writing report files: HTML from the templates, and staging so that a failure leaves
nothing half-written behind."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from dcplace.models.outputs import Stage, staged_files

_TEMPLATES = Environment(loader=PackageLoader("dcplace.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))


def render_html(template: str, **context: Any) -> str:
    """Render reports/templates/<template>; every value is HTML-escaped (autoescape is on)."""
    return _TEMPLATES.get_template(template).render(**context)


# Staging lives with the other rules for folders dcplace writes (models.outputs).
__all__ = ["render_html", "staged_files", "Stage"]
