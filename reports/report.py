"""The executive report: one self-contained HTML page and a PDF with the same content.

Both are built from one `ReportContent` (KPIs, map, cost charts, site and job tables,
solver record, provenance). The HTML is rendered by Jinja2 with autoescaping, so every
name from the inputs reaches the page as text; images are data: URIs, so the page needs
no network and no files beside it. The PDF is drawn with matplotlib (A4 landscape).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure

from dcplace.models.plan import Plan
from dcplace.reports.charts import cost_by_category_figure, cost_by_site_figure, draw_cost_by_category, figure_data_uri
from dcplace.reports.layers import PlanLayers
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.output import check_destination, render_html, staged_files
from dcplace.reports.staticmap import draw_static_map
from dcplace.reports.style import ROLE_COLOURS, money, mw_text

A4_LANDSCAPE_IN = (11.69, 8.27)
SITE_ROWS_PER_PDF_PAGE = 24


@dataclass(frozen=True)
class Kpi:
    label: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class ReportContent:
    """Everything the report says, as plain values (rendered twice: HTML and PDF)."""

    title: str
    subtitle: str
    kpis: list[Kpi]
    mw_by_role: list[tuple[str, str, str]]  # role, facility MW, colour
    site_columns: list[str]
    site_rows: list[list[str]]
    job_columns: list[str]
    job_rows: list[list[str]]
    solver_rows: list[tuple[str, str]]
    provenance_rows: list[tuple[str, str]]
    description: str


def report_content(layers: PlanLayers) -> ReportContent:
    plan, k = layers.plan, layers.plan.kpis
    s = plan.solve
    gap = f"{s.gap:.2%}" if s.gap is not None else "n/a"
    kpis = [
        Kpi("Annual cost", money(plan.objective_usd_per_year), f"upfront capex {money(k['upfront_capex_usd'])}"),
        Kpi("Inference cost", f"${k['usd_per_m_tokens']:.3f} per M tokens", f"{k['tokens_per_s_served_peak'] / 1e6:,.1f} M tok/s at peak"),
        Kpi("Demand within latency budget", f"{k['demand_within_budget_share']:.1%}", f"mean RTT {k['mean_rtt_ms']:.1f} ms"),
        Kpi("IT power", f"{k['it_mw_inference'] + k['it_mw_training']:,.1f} MW",
            f"{k['it_mw_inference']:,.1f} inference + {k['it_mw_training']:,.1f} training; facility {k['facility_mw']:,.1f} MW"),
        Kpi("Carbon", f"{k['emissions_t_per_year']:,.0f} t CO₂/yr", "grid emissions of facility power"),
        Kpi("Sites open", f"{int(k['sites_open'])} of {len(plan.sites)}",
            f"{int(k['gpus_inference'] + k['gpus_training']):,} GPUs; {int(k['training_jobs_placed'])} training jobs placed"),
    ]
    mw_by_role = []
    for role, colour in ROLE_COLOURS.items():
        mw = sum(x.facility_kw for x in plan.sites if x.role == role) / 1000
        if mw > 0:
            mw_by_role.append((role, mw_text(mw), colour))
    site_columns = ["Site", "Country", "Role", "Racks", "GPUs", "Chips", "Cooling", "Fabric", "IT MW", "Facility / limit MW", "Cost / yr", "Share"]
    total = plan.objective_usd_per_year or 1.0
    site_rows = [
        [x.name, x.country, x.role, f"{x.racks_total:,}", f"{x.gpus:,}", ", ".join(sorted({r.chip for r in x.racks})),
         ", ".join(x.zones), ", ".join(x.fabrics) or "—", f"{x.it_kw / 1000:,.2f}",
         f"{x.facility_kw / 1000:,.1f} / {x.power_limit_kw / 1000:,.0f}", money(x.total_cost_usd_per_year),
         f"{x.total_cost_usd_per_year / total:.1%}"]
        for x in sorted((x for x in plan.sites if x.open), key=lambda x: -x.total_cost_usd_per_year)
    ]
    names = {x.id: x.name for x in plan.sites}
    job_rows = [[j.name, names[j.site], j.chip, j.fabric, f"{j.gpus_h100_equiv:,.0f}"] for j in plan.jobs]
    solver_rows = [
        ("Status", f"{s.status} ({s.termination})"), ("Solver", f"{s.solver} {s.solver_version}"),
        ("Objective", f"${s.objective_usd_per_year:,.2f}/yr" if s.objective_usd_per_year is not None else "n/a"),
        ("Best bound", f"${s.best_bound_usd_per_year:,.2f}/yr" if s.best_bound_usd_per_year is not None else "n/a"),
        ("Gap", f"{gap} (asked for {s.options.get('mip_gap', 'n/a')})"),
        ("Model", f"{s.model['rows']:,} rows, {s.model['columns']:,} columns, {s.model['integers']:,} integers"),
        ("Times", f"build {s.build_time_s:.1f} s, solve {s.solve_time_s:.1f} s, extract {s.extract_time_s:.1f} s"),
        ("Warm start", s.warm_start), ("Options", json.dumps(s.options, sort_keys=True)),
    ]
    if s.pairs:
        solver_rows.insert(5, ("Serving pairs", (
            f"{s.pairs['pairs_in_model']:,} of {s.pairs['pairs_eligible']:,} eligible, {s.pairs['pricing_rounds']} pricing rounds "
            f"({'converged' if s.pairs['converged'] else 'stopped early'}); bound and gap are the full model's LP bound's"
        )))
    p = plan.provenance
    provenance_rows = [
        ("Scenario", f"{plan.scenario} ({p.get('scenario_source', 'unknown source')})"),
        ("Scenario hash", plan.scenario_hash), ("Solved (UTC)", plan.created_utc),
        ("Re-run", str(p.get("rerun", ""))), ("Seed", str(p.get("seed", ""))),
        ("Packages", ", ".join(f"{name} {version}" for name, version in sorted(p.get("packages", {}).items()))),
        ("Python, platform", f"{p.get('python', '')}, {p.get('platform', '')}"),
    ]
    return ReportContent(
        title=f"dcplace plan — {plan.scenario}",
        subtitle=f"Solved {plan.created_utc[:10]} · {s.status}, gap {gap} · {len(plan.assignments):,} region assignments",
        kpis=kpis, mw_by_role=mw_by_role, site_columns=site_columns, site_rows=site_rows,
        job_columns=["Job", "Site", "Chip", "Fabric", "H100-eq GPUs"], job_rows=job_rows,
        solver_rows=solver_rows, provenance_rows=provenance_rows, description=layers.scenario.description,
    )


def report_html(content: ReportContent, map_uri: str, category_uri: str, site_uri: str) -> str:
    return render_html("report.html.j2", c=content, map_uri=map_uri, category_uri=category_uri, site_uri=site_uri)


def _text_page(pdf: PdfPages, title: str, rows: list[tuple[str, str]], top_text: str = "") -> None:
    fig = plt.figure(figsize=A4_LANDSCAPE_IN)
    fig.text(0.05, 0.93, title, fontsize=16, weight="bold", parse_math=False)
    y = 0.87
    if top_text:
        for line in textwrap.wrap(top_text, 130):
            fig.text(0.05, y, line, fontsize=9, parse_math=False)
            y -= 0.025
        y -= 0.02
    for label, value in rows:
        fig.text(0.05, y, label, fontsize=9, weight="bold", parse_math=False)
        for line in textwrap.wrap(value, 120) or [""]:
            fig.text(0.25, y, line, fontsize=9, parse_math=False)
            y -= 0.027
        y -= 0.006
    pdf.savefig(fig)
    plt.close(fig)


def _kpi_page(pdf: PdfPages, content: ReportContent, plan: Plan) -> None:
    fig = plt.figure(figsize=A4_LANDSCAPE_IN)
    fig.text(0.05, 0.93, content.title, fontsize=18, weight="bold", parse_math=False)
    fig.text(0.05, 0.895, content.subtitle, fontsize=10, color="#444444", parse_math=False)
    for i, kpi in enumerate(content.kpis):
        x, y = 0.05 + (i % 3) * 0.31, 0.80 - (i // 3) * 0.13
        fig.text(x, y, kpi.label.upper(), fontsize=8, color="#666666", parse_math=False)
        fig.text(x, y - 0.045, kpi.value, fontsize=17, weight="bold", parse_math=False)
        fig.text(x, y - 0.075, kpi.note, fontsize=7.5, color="#444444", parse_math=False)
    roles = "   ".join(f"{role}: {mw} facility" for role, mw, _ in content.mw_by_role)
    fig.text(0.05, 0.52, f"MW by site role — {roles}", fontsize=9, parse_math=False)
    draw_cost_by_category(fig.add_axes([0.17, 0.08, 0.55, 0.38]), plan)
    pdf.savefig(fig)
    plt.close(fig)


def _table_pages(pdf: PdfPages, title: str, columns: list[str], rows: list[list[str]]) -> None:
    for start in range(0, max(len(rows), 1), SITE_ROWS_PER_PDF_PAGE):
        chunk = rows[start:start + SITE_ROWS_PER_PDF_PAGE] or [["—"] * len(columns)]
        fig = plt.figure(figsize=A4_LANDSCAPE_IN)
        page = f" ({start // SITE_ROWS_PER_PDF_PAGE + 1})" if len(rows) > SITE_ROWS_PER_PDF_PAGE else ""
        fig.text(0.05, 0.93, title + page, fontsize=16, weight="bold", parse_math=False)
        ax = fig.add_axes([0.03, 0.05, 0.94, 0.85])
        ax.set_axis_off()
        table = ax.table(cellText=chunk, colLabels=columns, loc="upper center", cellLoc="left")
        table.auto_set_font_size(False)
        table.set_fontsize(7)
        table.auto_set_column_width(list(range(len(columns))))
        for cell in table.get_celld().values():
            cell.get_text().set_parse_math(False)
            cell.set_linewidth(0.3)
        pdf.savefig(fig)
        plt.close(fig)


def write_pdf(path: Path, content: ReportContent, plan: Plan, map_fig: Figure, by_site: Figure) -> None:
    with PdfPages(path, metadata={"Title": content.title, "Creator": "dcplace"}) as pdf:
        _kpi_page(pdf, content, plan)
        pdf.savefig(map_fig)
        pdf.savefig(by_site)
        _table_pages(pdf, "Open sites", content.site_columns, content.site_rows)
        if content.job_rows:
            _table_pages(pdf, "Training jobs", content.job_columns, content.job_rows)
        _text_page(pdf, "Solver and provenance", content.solver_rows + content.provenance_rows, content.description)


def save_report(layers: PlanLayers, out_dir: str | Path, html: bool = True, pdf: bool = True) -> list[Path]:
    """Write report.html and/or report.pdf into `out_dir`; returns the paths."""
    check_destination(out_dir, "report")  # refuse a bad --out before drawing, not after
    content = report_content(layers)
    map_fig = draw_static_map(layers).figure
    category = cost_by_category_figure(layers.plan)
    by_site = cost_by_site_figure(layers.plan)
    try:
        with staged_files(out_dir, "report") as stage:
            if html:
                page = report_html(content, figure_data_uri(map_fig, "png", dpi=130), figure_data_uri(category), figure_data_uri(by_site))
                (stage.dir / "report.html").write_text(page, encoding="utf-8")
            if pdf:
                write_pdf(stage.dir / "report.pdf", content, layers.plan, map_fig, by_site)
    finally:
        for fig in (map_fig, category, by_site):
            plt.close(fig)
    return stage.moved
