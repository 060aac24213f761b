"""The multi-period schedule report (docs/periods.md): NPV, what is built when and where, the
cost of each period, a map per period; HTML and PDF from the plan report's template (the PDF
is the page printed: reports/pdf.py).

    from dcplace.reports.schedule import save_schedule_report
    save_schedule_report("years/", "years/report")
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure

from dcplace.models.schedule import Schedule, read_schedule
from dcplace.reports.charts import figure_data_uri
from dcplace.reports.layers import load_plan_layers
from dcplace.reports.mpl import plt
from dcplace.reports.output import check_destination
from dcplace.reports.pdf import write_report_files
from dcplace.reports.report import Bullets, Definitions, Headline, Image, Kpi, Paragraphs, ReportContent, Section, Table, report_html
from dcplace.reports.staticmap import draw_static_map, shared_scales
from dcplace.reports.style import category_label, money, mw_number, tok_s_text

TOP_BUILDS = 40  # rows of the build table; builds.csv holds them all
PURPOSE_COLOURS = {"inference": "#2f6db5", "training": "#d9822b"}


def _gap_text(schedule: Schedule) -> str:
    s = schedule.solve
    if s.gap is None or s.best_bound_usd_per_year is None:
        return "no bound: nothing proves how far from the best schedule this one is"
    return (f"within {s.gap:.2%} of the best possible schedule ({money(schedule.npv_usd - s.best_bound_usd_per_year)} of NPV at most), "
            f"proven by the solver's bound {money(s.best_bound_usd_per_year)}")


def schedule_lines(schedule: Schedule) -> list[str]:
    """The schedule on a terminal: one line per period, then what the NPV is made of."""
    out = [f"Status: {_gap_text(schedule)}."]
    bought = defaultdict(int)
    for b in schedule.builds:
        if b.kind == "racks":
            bought[b.year] += b.count
    for p in schedule.periods:
        out.append(f"  {p.year}-{p.year + p.years - 1}: {p.sites_open} sites open, {mw_number(p.it_mw)} MW IT "
                   f"({mw_number(p.inference_it_mw)} inference, {mw_number(p.training_it_mw)} training), {bought[p.year]:,} racks bought, "
                   f"{money(p.annual_usd_per_year)}/yr as one annualized year")
    parts = ", ".join(f"{category_label(c)} {money(v)}" for c, v in sorted(schedule.npv_breakdown_usd.items(), key=lambda cv: -cv[1]))
    out.append(f"NPV at {schedule.base_year}, {schedule.discount_rate:.0%}/yr: {money(schedule.npv_usd)} ({parts}).")
    ready = sum(h.ready_kw for h in schedule.halls)
    retrofit = sum(h.retrofit_kw for h in schedule.halls)
    out.append(f"Liquid halls: {mw_number(ready / 1000)} MW built ready, {mw_number(retrofit / 1000)} MW retrofitted "
               "(halls.csv); builds per site and period in builds.csv; each period's plan in periods/<year>/.")
    return out


def timeline_figure(schedule: Schedule) -> Figure:
    """IT load in service by purpose per period, and GPUs bought per period by chip."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), dpi=100)
    labels = [f"{p.year}-{str(p.year + p.years - 1)[-2:]}" for p in schedule.periods]
    inference = [p.inference_it_mw for p in schedule.periods]
    training = [p.training_it_mw for p in schedule.periods]
    left.bar(labels, inference, color=PURPOSE_COLOURS["inference"], label="inference")
    left.bar(labels, training, bottom=inference, color=PURPOSE_COLOURS["training"], label="training")
    for i, p in enumerate(schedule.periods):
        left.text(i, p.it_mw, f"{p.it_mw:,.0f} MW", ha="center", va="bottom", fontsize=8)
    left.set_ylabel("IT MW in service")
    left.set_title("IT load in service", loc="left", fontsize=11)
    left.legend(frameon=False, fontsize=8, loc="upper left")
    chips = sorted({b.chip for b in schedule.builds if b.kind == "racks"})
    gpus = {chip: [0.0] * len(schedule.periods) for chip in chips}
    index = {p.year: i for i, p in enumerate(schedule.periods)}
    bottom = [0.0] * len(schedule.periods)
    cmap = plt.get_cmap("tab10")
    for b in schedule.builds:
        if b.kind == "racks":
            gpus[b.chip][index[b.year]] += b.count * b.gpus_per_rack / 1000.0
    for k, chip in enumerate(chips):
        right.bar(labels, gpus[chip], bottom=bottom, color=cmap(k % 10), label=chip)
        bottom = [a + b for a, b in zip(bottom, gpus[chip])]
    right.set_ylabel("thousand GPUs bought")
    right.set_title("GPUs bought at the start of each period", loc="left", fontsize=11)
    right.legend(frameon=False, fontsize=8, ncols=2, loc="upper left")
    for ax in (left, right):
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def schedule_content(schedule: Schedule, years: list[int], names: dict[str, str] | None = None) -> ReportContent:
    """The report's sections; `names` maps site ids to the names the tables show."""
    names = names or {}
    first, last = schedule.periods[0], schedule.periods[-1]
    sections = [
        Section("summary", "Summary", [
            Headline([
                Kpi("Net present value", money(schedule.npv_usd), f"at {schedule.base_year}, {schedule.discount_rate:.0%} a year"),
                Kpi("Periods", f"{first.year}-{last.year + last.years - 1}", f"{len(schedule.periods)} periods"),
                Kpi("IT load", f"{first.it_mw:,.0f} → {last.it_mw:,.0f} MW", "in service, first to last period"),
                Kpi("Sites open", f"{first.sites_open} → {last.sites_open}", "a site once open stays open"),
            ]),
            Paragraphs([f"Status: {_gap_text(schedule)}."], "lead"),
            Paragraphs(["Every period is today's single-year model over that period's demand, power, prices, chips and jobs; "
                        "racks, fabric, sites, zones and liquid readiness persist between periods, racks retire with their "
                        "chips, and costs are counted in net present value. Each period's plan is an ordinary plan folder "
                        "in periods/<year>/, checked on its own; the schedule checker re-derives each period's inputs and "
                        "verifies the ties and the NPV."], "note"),
        ]),
        Section("timeline", "What is built when", [Image("timeline", "IT load in service per period by purpose, and GPUs bought per period by chip"),
                                                   _periods_table(schedule)]),
        Section("builds", "Racks bought, by site and period", [_builds_table(schedule, names)]),
        Section("npv", "What the NPV is made of", [_npv_table(schedule), _halls_block(schedule, names)]),
        Section("maps", "A map per period", [Image(f"map-{y}", f"Map of the {y} period's plan: sites by role and size, regions and the lines that serve them")
                                             for y in years], new_page=True),
        Section("rules", "How the schedule is counted", [Bullets(RULES, "note")]),
        Section("solver", "Solver and provenance", [Definitions("solver", _solver_rows(schedule))]),
    ]
    return ReportContent(title=f"dcplace schedule — {schedule.scenario}",
                         subtitle=f"Solved {schedule.created_utc[:10]} · NPV {money(schedule.npv_usd)} · {schedule.solve.status}",
                         sections=sections)


RULES = [
    "Discounting: a cost in year y counts (1 + r)^-(y - first year); a period's annual costs count the sum of that over its years.",
    "Racks and fabric are bought at the start of a period and serve every period that ends within their life (the chip's, the "
    "fabric's); their capex annuity is charged for the years of those periods only. What is left of an asset's life after the "
    "last period it serves, or past the horizon, is its salvage, worth its remaining annuities, so it is not charged.",
    "Operating costs (energy, colocation, sites, zones, carbon, transport, rental) are each period plan's annual costs less its "
    "capex annuities, times the period's discount weight.",
    "Time to power: a site whose power arrives after a period starts has none in that period; power steps set a site's limit "
    "from their year on; other sites' limits follow the period's power limit factor.",
    "Liquid halls: a liquid zone added to a site that already operated without one converts its floor at the retrofit price per kW, "
    "less what the site was built ready for when it opened (at the readiness price per kW).",
    "Each period's plan folder reports that period as one annualized year (capex as the annuities of the racks in use), which is "
    "how today's single-year plans read; the schedule's NPV charges capex to the builds instead.",
]


def _periods_table(schedule: Schedule) -> Table:
    rows = [[f"{p.year}-{p.year + p.years - 1}", f"{p.weight:.3f}", money(p.annual_usd_per_year), money(p.capex_annuities_usd_per_year),
             money(p.operating_npv_usd), f"{p.sites_open}", mw_number(p.inference_it_mw), mw_number(p.training_it_mw), tok_s_text(p.demand_tok_s)]
            for p in schedule.periods]
    return Table("periods", ["period", "discount weight", "annual cost", "of which capex annuities", "operating NPV", "sites open",
                             "inference IT MW", "training IT MW", "peak demand"], rows, [False] + [True] * 8,
                 caption="Each period: its weight, annual cost, operating NPV, sites, power and demand",
                 note="Annual cost: the period's plan as one annualized year. Operating NPV: (annual cost - capex annuities) x weight.")


def _builds_table(schedule: Schedule, names: dict[str, str]) -> Table:
    racks = sorted((b for b in schedule.builds if b.kind == "racks"), key=lambda b: -b.npv_usd)
    rows = [[str(b.year), names.get(b.site, b.site), b.config, b.cooling, f"{b.count:,}", f"{b.serves_through_year}", money(b.npv_usd)] for b in racks[:TOP_BUILDS]]
    left = len(racks) - len(rows)
    if left:  # the total of every purchase, so that the table's sum is never mistaken for the whole
        rows.append(["all", f"{len({b.site for b in racks})} sites", f"{len(racks)} purchases", "", f"{sum(b.count for b in racks):,}", "",
                     money(sum(b.npv_usd for b in racks))])
    fabrics = sum(1 for b in schedule.builds if b.kind != "racks")
    return Table("builds", ["bought", "site", "rack", "cooling", "racks", "serves through", "capex NPV"], rows,
                 [False, False, False, False, True, True, True], caption="Rack purchases, largest NPV first: when, where and what",
                 note=(f"The {len(rows) - 1} largest of {len(racks)} rack purchases by NPV, and in the last row all of them; " if left else "") +
                 f"builds.csv lists every purchase{f', the {fabrics} fabric builds too,' if fabrics else ''} with its annuity per rack "
                 "and the periods it serves.")


def _npv_table(schedule: Schedule) -> Table:
    items = sorted(schedule.npv_breakdown_usd.items(), key=lambda cv: -cv[1])
    rows = [[category_label(c), money(v), f"{v / schedule.npv_usd:.1%}"] for c, v in items]
    rows.append(["Total", money(schedule.npv_usd), "100%"])
    return Table("npv", ["category", "NPV", "share"], rows, [False, True, True], caption="The schedule's NPV by cost category")


def _halls_block(schedule: Schedule, names: dict[str, str]):
    if not schedule.halls:
        return Paragraphs(["No site was built liquid-ready and none was retrofitted: every liquid zone is built when its site opens, "
                           "or grows as new construction."], "note")
    rows = [[str(h.year), names.get(h.site, h.site), h.cooling, f"{h.ready_kw:,.0f}", f"{h.retrofit_kw:,.0f}", money(h.npv_usd)] for h in schedule.halls]
    return Table("halls", ["year", "site", "cooling", "kW built ready", "kW retrofitted", "NPV"], rows,
                 [False, False, False, True, True, True], caption="Halls built liquid-ready or retrofitted")


def _solver_rows(schedule: Schedule) -> list[tuple[str, str]]:
    s = schedule.solve
    prov = schedule.provenance
    return [
        ("Solver", f"{s.solver} {s.solver_version}, {s.options.get('threads')} thread(s), seed {prov.get('seed')}"),
        ("Status", f"{s.status}: {s.termination}"),
        ("Objective, bound", f"{money(schedule.npv_usd)} NPV; bound {money(s.best_bound_usd_per_year) if s.best_bound_usd_per_year is not None else 'none'}"),
        ("Model", f"{s.model.get('rows', 0):,} rows, {s.model.get('columns', 0):,} columns, {s.model.get('integers', 0):,} integers"),
        ("Time", f"build {s.build_time_s:.1f} s, search {s.solve_time_s:.1f} s"),
        ("Start", s.warm_start),
        ("Scenario", f"{schedule.scenario} ({schedule.scenario_hash[:12]})"),
        ("Re-run", str(prov.get("rerun", ""))),
    ]


def save_schedule_report(folder: str | Path, out_dir: str | Path, html: bool = True, pdf: bool = True) -> list[Path]:
    """report.html and report.pdf of a schedule folder into `out_dir`; returns the paths."""
    folder = Path(folder)
    check_destination(out_dir, "report")
    schedule = read_schedule(folder)
    years = [p.year for p in schedule.periods]
    layers = {year: load_plan_layers(folder / "periods" / str(year)).for_display() for year in years}  # names as shown
    names = {s.id: s.name for period in layers.values() for s in period.plan.sites}
    content = schedule_content(schedule, years, names)
    figures: dict[str, Figure] = {"timeline": timeline_figure(schedule)}
    scales = shared_scales(layers.values())  # equal sizes mean equal MW and tok/s in every period's map
    for year in years:
        figures[f"map-{year}"] = draw_static_map(layers[year], scales=scales).figure
    try:
        uris = {key: figure_data_uri(fig, "png", dpi=130) for key, fig in figures.items()}
    finally:
        for fig in figures.values():
            plt.close(fig)
    return write_report_files(out_dir, report_html(content, uris), html=html, pdf=pdf)  # the PDF is this page printed


__all__ = ["save_schedule_report", "schedule_content", "schedule_lines", "timeline_figure"]
