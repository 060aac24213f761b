"""Compare plans against a named baseline: KPI table, site changes, charts (CSV and HTML).

    plans = collect_plans(["runs/"])                # plan folders, or batch folders (expanded)
    paths, table = save_comparison(plans, "compare/", baseline="baseline")

Only plan.json of each folder is read. compare.csv is for spreadsheets: a text cell that a
spreadsheet would run as a formula (a plan or site name starting with `=`, `+`, `-`, `@`, a
tab or CR) gets a leading `'`; numbers are written as numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.reports.charts import figure_data_uri, stacked_cost_figure
from dcplace.reports.layers import NotAPlanFolder
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.output import check_destination, render_html, spreadsheet_frame, staged_files
from dcplace.reports.style import CATEGORY_COLOURS

KPIS = [  # (plan kpi key, column, scale, format)
    ("total_cost_usd_per_year", "cost_musd_per_year", 1e-6, "{:,.2f}"),
    ("usd_per_m_tokens", "usd_per_m_tokens", 1.0, "{:.3f}"),
    ("mean_rtt_ms", "mean_rtt_ms", 1.0, "{:.1f}"),
    ("demand_within_budget_share", "demand_within_budget", 1.0, "{:.1%}"),
    ("it_mw_inference", "it_mw_inference", 1.0, "{:,.1f}"),
    ("it_mw_training", "it_mw_training", 1.0, "{:,.1f}"),
    ("emissions_t_per_year", "emissions_kt_per_year", 1e-3, "{:,.1f}"),
    ("sites_open", "sites_open", 1.0, "{:.0f}"),
    ("upfront_capex_usd", "upfront_capex_musd", 1e-6, "{:,.1f}"),
]


@dataclass(frozen=True)
class NamedPlan:
    label: str
    folder: Path
    plan: Plan


def collect_plans(paths: list[str | Path]) -> list[NamedPlan]:
    """Plan folders as given; a batch folder (with batch.json) stands for its members in order."""
    plans: list[NamedPlan] = []
    for path in map(Path, paths):
        if (path / "batch.json").is_file():
            try:
                members = json.loads((path / "batch.json").read_text(encoding="utf-8"))["members"]
                folders = [path / m["name"] for m in members if (path / m["name"] / "plan.json").is_file()]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise NotAPlanFolder(f"{path}: batch.json is damaged ({type(exc).__name__}: {exc}). "
                                     "Fix: re-run the same `dcplace batch` command to rewrite it.") from exc
        elif (path / "plan.json").is_file():
            folders = [path]
        else:
            raise NotAPlanFolder(f"{path}: neither a plan folder (plan.json) nor a batch folder (batch.json). Fix: give folders written by `dcplace solve` or `dcplace batch`.")
        for folder in folders:
            try:
                plans.append(NamedPlan(folder.name, folder, read_plan(folder)))
            except ValueError as exc:
                raise NotAPlanFolder(f"{folder}: plan.json is damaged ({exc}). Fix: re-run the solve.") from exc
    labels = [p.label for p in plans]
    duplicates = {x for x in labels if labels.count(x) > 1}
    if duplicates:  # two folders of the same name from different places: qualify by parent
        plans = [NamedPlan(f"{p.folder.parent.name}/{p.label}" if p.label in duplicates else p.label, p.folder, p.plan) for p in plans]
    return plans


def _open_sites(plan: Plan) -> dict[str, str]:
    return {s.id: s.name for s in plan.sites if s.open}


def comparison_table(plans: list[NamedPlan], baseline: str) -> pd.DataFrame:
    """One row per plan: status, KPIs, cost change against the baseline, sites opened/closed."""
    base = next((p for p in plans if p.label == baseline), None)
    if base is None:
        raise ValueError(f"baseline '{baseline}' is not among the plans ({', '.join(p.label for p in plans)}); pass --baseline with one of them")
    base_cost = base.plan.objective_usd_per_year
    base_sites = _open_sites(base.plan)
    rows = []
    for p in plans:
        row: dict[str, object] = {"plan": p.label, "baseline": p.label == baseline, "status": p.plan.solve.status,
                                  "gap": p.plan.solve.gap}
        feasible = p.plan.solve.status in HAS_PLAN
        for key, column, scale, _ in KPIS:
            row[column] = p.plan.kpis.get(key, np.nan) * scale if feasible else np.nan
        cost = p.plan.objective_usd_per_year if feasible else None
        row["cost_change_musd_per_year"] = (cost - base_cost) / 1e6 if cost is not None and base_cost is not None else np.nan
        row["cost_change_share"] = (cost - base_cost) / base_cost if cost is not None and base_cost else np.nan
        sites = _open_sites(p.plan)
        row["sites_opened"] = "; ".join(sorted(sites[s] for s in sites.keys() - base_sites.keys())) if feasible else ""
        row["sites_closed"] = "; ".join(sorted(base_sites[s] for s in base_sites.keys() - sites.keys())) if feasible else ""
        row["scenario_hash"] = p.plan.scenario_hash
        row["folder"] = str(p.folder)
        rows.append(row)
    return pd.DataFrame(rows)


def _cost_figure(plans: list[NamedPlan]):
    feasible = [p for p in plans if p.plan.solve.status in HAS_PLAN]
    bars = [(p.label, p.plan.cost_breakdown_usd_per_year) for p in feasible]
    return stacked_cost_figure(bars, list(CATEGORY_COLOURS), "Annual cost by category")


def _tradeoff_figure(table: pd.DataFrame, x: str, xlabel: str):
    fig, ax = plt.subplots(figsize=(6, 4.2), dpi=100)
    rows = table.dropna(subset=[x, "cost_musd_per_year"])
    ax.scatter(rows[x], rows["cost_musd_per_year"], color="#1b9e77", zorder=3)
    base = rows[rows["baseline"]]
    ax.scatter(base[x], base["cost_musd_per_year"], color="#d95f02", s=80, zorder=4, label="baseline")
    for r in rows.itertuples():
        ax.annotate(str(r.plan), (getattr(r, x), r.cost_musd_per_year), fontsize=7, xytext=(4, 3), textcoords="offset points", parse_math=False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("annual cost, USD M")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def save_comparison(plans: list[NamedPlan], out_dir: str | Path, baseline: str | None = None) -> tuple[list[Path], pd.DataFrame]:
    """Write compare.csv and compare.html (table, site changes, charts) into out_dir; return
    the paths and the table."""
    if not plans:
        raise ValueError("no plans to compare")
    check_destination(out_dir, "compare")  # refuse a bad --out before drawing, not after
    baseline = baseline or plans[0].label
    table = comparison_table(plans, baseline)
    figures = [_cost_figure(plans), _tradeoff_figure(table, "emissions_kt_per_year", "emissions, kt CO₂ per year"),
               _tradeoff_figure(table, "mean_rtt_ms", "demand-weighted mean RTT, ms")]
    try:
        images = [figure_data_uri(f) for f in figures]
    finally:
        for f in figures:
            plt.close(f)
    shown = []
    for row in table.to_dict(orient="records"):
        cells = {column: ("—" if pd.isna(row[column]) else fmt.format(row[column])) for _, column, _, fmt in KPIS}
        change = row["cost_change_musd_per_year"]
        cells["change"] = "—" if pd.isna(change) else f"{change:+,.2f} ({row['cost_change_share']:+.1%})"
        shown.append({**row, "cells": cells})
    page = render_html("compare.html.j2", rows=shown, baseline=baseline, kpis=KPIS, images=images)
    with staged_files(out_dir, "compare") as stage:
        spreadsheet_frame(table).to_csv(stage.dir / "compare.csv", index=False)
        (stage.dir / "compare.html").write_text(page, encoding="utf-8")
    return stage.moved, table
