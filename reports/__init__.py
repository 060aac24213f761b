"""Everything made from a finished plan folder: GIS exports, maps and the executive report.

Reports read only the plan folder (plan.json and inputs/); nothing here solves or changes
a plan. Each output is one call, the same one the CLI makes:

    layers = load_plan_layers("plan")
    export_layers(layers, "plan/export", "gpkg")
    save_static_map(layers, "plan/report", png=True, pdf=True)
    save_html_map(layers, "plan/report")
    save_report(layers, "plan/report")
"""

from dcplace.reports.export import FORMATS, export_layers, read_layer
from dcplace.reports.htmlmap import save_html_map
from dcplace.reports.layers import NoPlanToReport, NotAPlanFolder, PlanLayers, load_plan_layers
from dcplace.reports.report import save_report
from dcplace.reports.staticmap import save_static_map

__all__ = [
    "FORMATS", "NoPlanToReport", "NotAPlanFolder", "PlanLayers", "export_layers", "load_plan_layers", "read_layer",
    "save_html_map", "save_report", "save_static_map",
]
