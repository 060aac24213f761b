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
    from dcplace.reports.economics import money_step_usd
    from dcplace.reports.summary import money_at  # money as precise as the solver's gap supports (issue 49)

    step = money_step_usd(plan)
    for y, (_, v) in enumerate(items):
        ax.text(v / 1e6, y, f"  {money_at(v, step)}  ({v / total:.0%})", va="center", fontsize=8, parse_math=False)
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
    rows = -(-len(categories) // legend_columns)
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(labels) + 1.6 + 0.16 * rows), dpi=100)
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
    # below the axes, never on a bar (it was drawn over the last bar in compare.html: issue 49)
    ax.legend(fontsize=7, ncols=legend_columns, loc="upper center", bbox_to_anchor=(0.5, -0.22 - 0.5 / max(len(labels), 1)),
              frameon=False)
    fig.tight_layout()
    return fig


def figure_data_uri(fig: Figure, fmt: str = "svg", dpi: int = 150) -> str:
    """The figure as a data: URI for an <img> (an image cannot run script, whatever it holds)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi)
    mime = {"svg": "image/svg+xml", "png": "image/png"}[fmt]
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def cost_waterfall_figure(base: dict[str, float], plan: dict[str, float], category_order: list[str], title: str,
                          notional: dict[str, float] | None = None, base_label: str = "baseline",
                          plan_label: str = "plan") -> Figure:
    """A waterfall from the baseline's annual cost to the plan's: the baseline total, one step
    per cost category that changes (rising red, falling green; notional charges such as a
    carbon price hatched grey), then the plan's total. `notional`: the notional part of each
    category's change (USD/yr), drawn as its own hatched step."""
    notional = notional or {}
    steps: list[tuple[str, float, bool]] = []  # (label, change in USD M, notional?)
    for category in category_order:
        change = plan.get(category, 0.0) - base.get(category, 0.0)
        fake = notional.get(category, 0.0)
        real = change - fake
        if abs(real) > 0.5:
            steps.append((category_label(category), real / 1e6, False))
        if abs(fake) > 0.5:
            steps.append((f"{category_label(category)} (notional)", fake / 1e6, True))
    # Steps too small to read as money ($0.00 M) are summed into one, so every bar shows a figure.
    small = [s for s in steps if abs(s[1]) < 0.005 and not s[2]]
    if len(small) > 1:
        steps = [s for s in steps if s not in small] + [(f"{len(small)} small lines", sum(v for _, v, _ in small), False)]
    start, end = sum(base.values()) / 1e6, sum(plan.values()) / 1e6
    labels = [base_label] + [label for label, _, _ in steps] + [plan_label]
    fig, ax = plt.subplots(figsize=(7.2, 0.36 * len(labels) + 1.5), dpi=100)
    ax.barh(0, start, color="#5b6b7b")
    level = start
    span = max(abs(v) for _, v, _ in steps) if steps else max(start, end, 1e-9)
    for y, (_, value, fake) in enumerate(steps, start=1):
        colour = "#bdbdbd" if fake else ("#c0392b" if value > 0 else "#1b7a3d")
        ax.barh(y, value, left=level, color=colour, hatch="///" if fake else None, edgecolor="#555555" if fake else colour)
        figure = money(value * 1e6)
        if figure.lstrip("-") == "$0.00 M":  # under $5k: say how small, with its sign
            figure = f"{'+' if value > 0 else '-'}${abs(value) * 1e3:,.1f} k"
        elif value > 0:
            figure = "+" + figure
        ax.text(max(level, level + value), y, f"  {figure}", va="center", fontsize=8, parse_math=False)
        level += value
    ax.barh(len(labels) - 1, end, color="#2c3e50")
    for y, total in ((0, start), (len(labels) - 1, end)):
        ax.text(total, y, f"  {money(total * 1e6)}", va="center", fontsize=8, fontweight="bold", parse_math=False)
    ax.set_yticks(range(len(labels)), labels)
    for tick in ax.get_yticklabels():
        tick.set_parse_math(False)  # a '$' in a plan's name is text
    ax.invert_yaxis()
    # Zoom on the changes: the totals are long bars, the steps short; start the axis below both.
    low = min([start, end] + [start + sum(v for _, v, _ in steps[:i + 1]) for i in range(len(steps))])
    high = max([start, end] + [start + sum(v for _, v, _ in steps[:i + 1]) for i in range(len(steps))])
    pad = max(span, (high - low)) * 0.6 + 1e-9
    ax.set_xlim(max(0.0, low - pad), high + pad * 1.2)
    ax.set_xlabel("USD M per year (axis starts above zero to show the changes)" if low - pad > 0 else "USD M per year")
    ax.set_title(title, loc="left", fontsize=11)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
