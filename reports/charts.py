"""Cost charts shared by the HTML and PDF reports (matplotlib figures)."""

from __future__ import annotations

import base64
import io

import numpy as np
from matplotlib.figure import Figure

from dcplace.models.plan import Plan
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.style import CATEGORY_COLOURS, category_label, money

TOP_SITES = 15


def _category_items(plan: Plan) -> list[tuple[str, float]]:
    return sorted(((c, v) for c, v in plan.cost_breakdown_usd_per_year.items() if abs(v) > 0.5), key=lambda cv: cv[1])


def cost_by_category_figure(plan: Plan) -> Figure:
    """Horizontal bars, one per cost category with a non-zero annual cost, largest on top."""
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(_category_items(plan)) + 1.2), dpi=100)
    draw_cost_by_category(ax, plan)
    fig.tight_layout()
    return fig


def draw_cost_by_category(ax, plan: Plan) -> None:
    items = _category_items(plan)
    values = [v / 1e6 for _, v in items]
    ax.barh([category_label(c) for c, _ in items], values, color=[CATEGORY_COLOURS.get(c, "#888888") for c, _ in items])
    total = plan.objective_usd_per_year or 1.0
    for y, (_, v) in enumerate(items):
        ax.text(v / 1e6, y, f"  {money(v)}  ({v / total:.0%})", va="center", fontsize=8, parse_math=False)
    ax.set_xlabel("USD M per year")
    ax.set_xlim(0, max(values, default=1) * 1.35)
    ax.set_title("Annual cost by category", loc="left", fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)


def cost_by_site_figure(plan: Plan, top: int = TOP_SITES) -> Figure:
    """Stacked bars by category for the `top` costliest open sites; the rest summed as one bar."""
    open_sites = sorted((s for s in plan.sites if s.open), key=lambda s: -s.total_cost_usd_per_year)
    shown, rest = open_sites[:top], open_sites[top:]
    bars = [(s.name, s.cost_usd_per_year) for s in shown]
    if rest:
        categories = {c for s in rest for c in s.cost_usd_per_year}
        bars.append((f"{len(rest)} other sites", {c: sum(s.cost_usd_per_year.get(c, 0.0) for s in rest) for c in categories}))
    return stacked_cost_figure(bars, list(plan.cost_breakdown_usd_per_year), "Annual cost by site", legend_columns=3)


def stacked_cost_figure(bars: list[tuple[str, dict[str, float]]], category_order: list[str], title: str,
                        legend_columns: int = 4) -> Figure:
    """One horizontal bar per (label, USD/yr by category), stacked by category, first bar on
    top; categories that are zero in every bar are left out."""
    categories = [c for c in category_order if any(abs(costs.get(c, 0.0)) > 0.5 for _, costs in bars)]
    labels = [label for label, _ in bars]
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(labels) + 1.6), dpi=100)
    left = np.zeros(len(labels))
    for category in categories:
        values = np.array([costs.get(category, 0.0) / 1e6 for _, costs in bars])
        ax.barh(labels, values, left=left, color=CATEGORY_COLOURS.get(category, "#888888"), label=category_label(category))
        left += values
    for tick in ax.get_yticklabels():
        tick.set_parse_math(False)  # a '$' in a name is text
    ax.invert_yaxis()  # first bar on top
    ax.set_xlabel("USD M per year")
    ax.set_title(title, loc="left", fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=7, ncols=legend_columns, loc="lower right", frameon=False)
    fig.tight_layout()
    return fig


def figure_data_uri(fig: Figure, fmt: str = "svg", dpi: int = 150) -> str:
    """The figure as a data: URI for an <img> (an image cannot run script, whatever it holds)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi)
    mime = {"svg": "image/svg+xml", "png": "image/png"}[fmt]
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"
