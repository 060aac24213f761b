"""The trade-off curve drawn: pareto.csv, pareto.png and a self-contained pareto.html."""

from __future__ import annotations

from pathlib import Path

from dcplace.models.outputs import check_destination
from dcplace.optimizer.studies.pareto import FrontierPoint, frontier_table
from dcplace.reports.charts import figure_data_uri
from dcplace.reports.mpl import plt
from dcplace.reports.output import render_html, spreadsheet_frame, staged_files

AXES = {"carbon": ("emissions_t_per_year", 1e-3, "emissions, kt CO₂ per year"),
        "latency": ("mean_rtt_ms", 1.0, "demand-weighted mean RTT, ms")}


def frontier_figure(frontier: list[FrontierPoint], tradeoff: str, title: str):
    measure, scale, label = AXES[tradeoff]
    solved = [p for p in frontier if p.cost_usd_per_year is not None]
    efficient = sorted((p for p in solved if p.efficient), key=lambda p: getattr(p, measure))
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    ax.plot([getattr(p, measure) * scale for p in efficient], [p.cost_usd_per_year / 1e6 for p in efficient],
            "-o", color="#1b9e77", label="efficient plans (frontier)", zorder=3)
    others = [p for p in solved if not p.efficient]
    if others:
        ax.scatter([getattr(p, measure) * scale for p in others], [p.cost_usd_per_year / 1e6 for p in others],
                   color="#9a9a9a", label="dominated", zorder=2)
    for p in solved:
        ax.annotate(p.name, (getattr(p, measure) * scale, p.cost_usd_per_year / 1e6), fontsize=7,
                    xytext=(5, 4), textcoords="offset points", parse_math=False)
    failed = [p.name for p in frontier if p.cost_usd_per_year is None]
    if failed:
        ax.text(0.0, -0.16, "no plan: " + ", ".join(failed), transform=ax.transAxes, fontsize=8, color="#b2182b",
                parse_math=False)
    ax.set_xlabel(label)
    ax.set_ylabel("annual cost, USD M")
    ax.set_title(title, loc="left", fontsize=11, parse_math=False)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def save_frontier(frontier: list[FrontierPoint], out_dir: str | Path, tradeoff: str, scenario_name: str) -> list[Path]:
    """Write pareto.csv, pareto.png and pareto.html into out_dir (beside points/)."""
    check_destination(out_dir, "pareto")  # refuse before drawing
    title = f"{scenario_name}: annual cost against {'emissions' if tradeoff == 'carbon' else 'mean latency'}"
    fig = frontier_figure(frontier, tradeoff, title)
    try:
        image = figure_data_uri(fig)
        page = render_html("pareto.html.j2", title=title, image=image, points=frontier)
        with staged_files(out_dir, "pareto") as stage:
            spreadsheet_frame(frontier_table(frontier)).to_csv(stage.dir / "pareto.csv", index=False)
            fig.savefig(stage.dir / "pareto.png", dpi=150)
            (stage.dir / "pareto.html").write_text(page, encoding="utf-8")
    finally:
        plt.close(fig)
    return stage.moved
