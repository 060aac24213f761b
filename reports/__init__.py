"""Everything made from a finished plan folder: GIS exports, maps and the executive report.

Reports read only the plan folder (plan.json and inputs/); nothing here solves or changes
a plan. Each output is one call, the same one the CLI makes:

    layers = load_plan_layers("plan")
    export_layers(layers, "plan/export", "gpkg")
    save_static_map(layers, "plan/report", png=True, pdf=True)
    save_html_map(layers, "plan/report")
    save_maps(layers, "plan/report")              # all three maps, all or none
    save_report(layers, "plan/report")

The names below load on first use (PEP 562), so `import dcplace.reports.style` — which the
CLI needs for its money format — does not pull in matplotlib, plotly and geopandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_WHERE = {
    "EXPORT_FORMATS": "export", "FORMATS": "export", "export_layers": "export", "read_layer": "export",
    "save_html_map": "htmlmap", "save_maps": "htmlmap",
    "NoPlanToReport": "layers", "NotAPlanFolder": "layers", "PlanLayers": "layers", "load_plan_layers": "layers",
    "PdfEngineMissing": "pdf",  # save_report wrote the HTML but no PDF: the system's Pango is missing (docs/reports.md)
    "save_report": "why",  # reports.why registers the explanation sections, then hands on report.save_report
    "save_static_map": "staticmap",
}

__all__ = sorted(_WHERE)
# reports.outages: what losing each site costs (docs/resilience.md); reports.day: the day's load, owned
# and rented, training in the troughs (the clock, issue 15; only in plans with the clock or cloud regions).
_MORE_SECTIONS = ("outages", "day")


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name == "save_report":
        for extra in _MORE_SECTIONS:  # each appends its section builder to report.EXTRA_SECTIONS on import
            import_module(f"{__name__}.{extra}")
    value = getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


if TYPE_CHECKING:
    from dcplace.reports.export import EXPORT_FORMATS, FORMATS, export_layers, read_layer
    from dcplace.reports.htmlmap import save_html_map, save_maps
    from dcplace.reports.layers import NoPlanToReport, NotAPlanFolder, PlanLayers, load_plan_layers
    from dcplace.reports.pdf import PdfEngineMissing
    from dcplace.reports.report import save_report
    from dcplace.reports.staticmap import save_static_map
