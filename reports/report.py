"""The executive report: one self-contained HTML page and a PDF with the same content.

The report is an argument, built as a list of `Section`s (`report_sections`): page 1 the
executive summary (reports/summary.py computes its sentences from the plan), then the map,
key figures and the cost charts, per-workload economics, why these sites, the GPU
reconciliation, the site and job tables, the assumptions box, a glossary, the appendix and the solver
record. Later analyses (resilience, the day's load, alternatives, robustness) slot in by
appending a builder to `EXTRA_SECTIONS`; each builder takes the `PlanLayers` and returns a
`Section` or None, and lands before the assumptions box.

Each section holds typed blocks (`Paragraphs`, `Bullets`, `Headline`, `Table`, `Image`,
`Definitions`), rendered once, by Jinja2 with autoescaping, into one HTML page (every name from
the inputs reaches the page as text; images are data: URIs). report.pdf is that page printed by
WeasyPrint (reports.pdf): the template's `@page` and `@media print` rules make it A4 landscape
with the plan's title and "page N of M" on every page, bookmarks from the section headings,
each table under its caption with its header row repeated on every page it spans, and no text
below 8 pt. So the HTML and the PDF cannot disagree.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union

from matplotlib.figure import Figure

from dcplace.models.interactivity import throughput_id
from dcplace.models.plan import Plan
from dcplace.reports.charts import cost_by_category_figure, cost_by_site_figure, figure_data_uri
from dcplace.reports.layers import PlanLayers
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.output import check_destination, render_html
from dcplace.reports.pdf import write_report_files
from dcplace.reports.staticmap import draw_static_map
from dcplace.reports.style import ROLE_COLOURS, money, mw_number, mw_text, short_name, tok_s_text
from dcplace.reports.economics import (
    CHIP_COST_RULE, FULL_COST_RULE, SMALL_SITE_FIXED_SHARE, TRAINING_HOUR_RULE, chip_economics, class_tokens_per_year, site_tokens_share,
    small_site, workload_costs,
)
from dcplace.reports.summary import (
    Provenance, Summary, executive_summary, latency_reason, money_at, provenance_text, status_text, variant_title, vintages,
)

MAP_DPI = 150  # the map's PNG: about 160 dpi across an A4-landscape page
SMALL_SITE_FLAG = "small site: fixed cost dominates"


# ----------------------------------------------------------------------------- content model


@dataclass(frozen=True)
class Kpi:
    label: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class Paragraphs:
    texts: list[str]
    style: str = "body"  # body | lead | note


@dataclass(frozen=True)
class Bullets:
    items: list[str]
    style: str = "body"


@dataclass(frozen=True)
class Headline:
    kpis: list[Kpi]
    large: bool = True


@dataclass(frozen=True)
class Table:
    id: str
    columns: list[str]
    rows: list[list[str]]
    numeric: list[bool]  # right-aligned columns
    flagged: list[bool] = field(default_factory=list)  # rows to highlight
    note: str = ""
    caption: str = ""  # what the table shows, above it on the page and in the PDF; without one, its section's title


@dataclass(frozen=True)
class Image:
    key: str  # map | cost-by-category | cost-by-site
    alt: str
    half: bool = False  # two half-width images in a row
    max_height: float | None = None  # points, in print (the PDF); None: as tall as the page allows
    png: bytes | None = field(default=None, repr=False)  # a section's own figure (EXTRA_SECTIONS), drawn by its builder


@dataclass(frozen=True)
class Definitions:
    id: str
    rows: list[tuple[str, str]]


Block = Union[Paragraphs, Bullets, Headline, Table, Image, Definitions]


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: list[Block]
    new_page: bool = False


# Builders of later analyses: each takes the PlanLayers and returns a Section or None.
EXTRA_SECTIONS: list[Callable[[PlanLayers], Section | None]] = []


@dataclass(frozen=True)
class ReportContent:
    title: str
    subtitle: str
    sections: list[Section]

    def section(self, id: str) -> Section:
        return next(s for s in self.sections if s.id == id)


# ----------------------------------------------------------------------------- sections


def _num(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _summary_section(plan: Plan, summary: Summary) -> Section:
    blocks: list[Block] = []
    if summary.recommendation:
        blocks.append(Paragraphs([summary.recommendation], "decision"))
    blocks.append(Headline([Kpi(label, value, note) for label, value, note in summary.headline]))
    if summary.resilience:
        blocks.append(Paragraphs(["N-1 policy: what survives the loss of one site"], "boxhead"))
        blocks.append(Bullets(summary.resilience, "risks"))
    if summary.risks:
        blocks.append(Paragraphs(["Risks of this plan"], "boxhead"))
        blocks.append(Bullets(summary.risks, "risks"))
    if summary.notional:
        blocks.append(Paragraphs([summary.notional], "lead"))
    # the decision at a glance: where the plan builds and what it pays for (the full map follows)
    blocks.append(Image("map", "Map of the plan: sites by role and size, demand regions and the lines that serve them",
                        half=True, max_height=140))
    blocks.append(Image("cost-by-category", "Annual cost by category", half=True, max_height=140))
    return Section("summary", "Executive summary", blocks)


def _argument_section(plan: Plan, summary: Summary) -> Section:
    """Page 1's reasons: where training goes and why, how inference is spread, the cost split,
    $ per M tokens by class, the three assumptions that matter most, small sites."""
    blocks: list[Block] = []
    blocks.append(Paragraphs(summary.training + summary.inference + summary.clock + summary.cost, "lead"))
    classes = [c for c in summary.classes if c.tokens_per_year > 0]
    if classes:
        blocks.append(Bullets([
            f"{c.name}: ${c.usd_per_m_tokens:,.3f} per M tokens ({money_at(c.cost_usd_per_year, summary.money_step_usd)} a year for "
            f"{c.tokens_per_year / 1e12:,.1f} trillion tokens)" for c in classes
        ]))
        blocks.append(Paragraphs([summary.class_rule], "note"))
    if summary.assumptions:
        blocks.append(Paragraphs(["The three assumptions that matter most:"], "body"))
        blocks.append(Bullets([
            f"{a.label[0].upper()}{a.label[1:]}: {a.value_text}. The {a.category.replace('_', ' ')} line is "
            f"{money_at(a.line_usd_per_year, summary.money_step_usd)} a year ({a.share:.0%} of cost): ±10 % moves it "
            f"±{money_at(a.swing_usd_per_year, summary.money_step_usd)}. Source: {a.source_text}."
            for a in summary.assumptions
        ]))
        blocks.append(Paragraphs([summary.assumption_rule], "note"))
    if summary.small_sites:
        blocks.append(Paragraphs([f"{len(summary.small_sites)} open sites are small: fixed costs are at least "
                                  f"{SMALL_SITE_FIXED_SHARE:.0%} of what they cost (see Why these sites)."], "note"))
    return Section("argument", "Why this plan", blocks)


def _full_cost_blocks(layers: PlanLayers) -> list[Block]:
    """Every cost line allocated to the classes and training (summary.workload_costs): they add up to the plan's cost."""
    uses = workload_costs(layers.plan, layers.scenario)
    rows = [[u.name, money(u.direct_usd_per_year), money(u.shared_usd_per_year), money(u.total_usd_per_year),
             "—" if not u.units_per_year else f"${u.usd_per_unit:,.3f} per M tokens" if u.use != "training"
             else f"${u.usd_per_unit:,.2f} per effective H100-hour"] for u in uses]
    rows.append(["Total", money(sum(u.direct_usd_per_year for u in uses)), money(sum(u.shared_usd_per_year for u in uses)),
                 money(sum(u.total_usd_per_year for u in uses)), ""])
    return [Table("workloads-full", ["Use", "Own cost lines / yr", "Share of fixed costs / yr", "Fully loaded / yr", "Fully loaded unit cost"],
                  rows, [False, True, True, True, True], caption="Fully loaded cost by use: own cost lines plus a share of fixed costs"),
            Paragraphs([FULL_COST_RULE + " " + TRAINING_HOUR_RULE], "note")]


def _workload_section(layers: PlanLayers, summary: Summary) -> Section:
    plan, scenario = layers.plan, layers.scenario
    chips = {c.id: short_name(c.name) for c in scenario.catalog.chips}
    rows, flags = [], []
    for c in summary.classes:
        rows.append([c.name, _num(c.peak_tok_s), _num(c.racks), ", ".join(f"{chips.get(k, k)} {v:,}" for k, v in sorted(c.gpus_by_chip.items())) or "—",
                     mw_number(c.it_mw), money(c.cost_usd_per_year), f"${c.usd_per_m_tokens:,.3f}",
                     f"{c.rtt_p50:.1f} / {c.rtt_p95:.1f} / {c.rtt_max:.1f}",
                     f"{c.budget_min:.0f}" if c.budget_min == c.budget_max else f"{c.budget_min:.0f}–{c.budget_max:.0f}",
                     f"{c.within_budget_share:.1%}"])
        flags.append(False)
    train = [ln for s in plan.sites for ln in s.racks if ln.purpose == "training"]
    if train:
        gpus: dict[str, int] = {}
        for ln in train:
            gpus[ln.chip] = gpus.get(ln.chip, 0) + ln.gpus
        rows.append([f"Training ({len(plan.jobs)} jobs)", "—", _num(sum(ln.racks for ln in train)),
                     ", ".join(f"{chips.get(k, k)} {v:,}" for k, v in sorted(gpus.items())), mw_number(sum(ln.it_kw for ln in train) / 1000),
                     money(sum(sum(ln.cost_usd_per_year.values()) for ln in train)), "—", "—", "—", "—"])
        flags.append(False)
    table = Table("workloads", ["Class", "Tokens/s at peak", "Racks", "GPUs by chip", "IT MW", "Cost / yr", "$ per M tokens",
                                "RTT p50 / p95 / max, ms", "RTT budget, ms", "Within budget"],
                  rows, [False, True, True, False, True, True, True, True, True, True], flags,
                  caption="Per workload class: peak tokens/s, racks, GPUs, power, annual cost, $ per M tokens and round trips")
    return Section("workloads", "Per-workload economics", [
        table,
        Paragraphs([summary.class_rule + " RTT percentiles are weighted by tokens/s served."], "note"),
        *_full_cost_blocks(layers),
    ])


def _chip_section(layers: PlanLayers, prov: Provenance) -> Section | None:
    """Each chip on each class at the class's interactivity target: tok/s per GPU, how the curve was
    read, whether a published point or a fill carries it, and the chip's own cost per M tokens."""
    rows_in = chip_economics(layers.plan, layers.scenario)
    if not rows_in:
        return None
    chips = {c.id: short_name(c.name) for c in layers.scenario.catalog.chips}
    classes = {w.id: w.name for w in layers.scenario.catalog.workloads}
    rows, flags = [], []
    for c in rows_in:
        bases = {p[0] for u in _points_read(c) if (p := prov.get("throughput", throughput_id(c.chip, c.workload, u), "tok_s_per_gpu"))}
        basis = "fill (rule)" if "rule" in bases else "published" if bases else "as given"
        rows.append([classes.get(c.workload, c.workload), "—" if c.target_tok_s_per_user is None else f"{c.target_tok_s_per_user:g}",
                     chips.get(c.chip, c.chip), "not offered" if c.tok_s_per_gpu is None else _num(c.tok_s_per_gpu, 1),
                     c.how, basis, _num(c.gpus) if c.gpus else "—",
                     "—" if c.usd_per_m_tokens is None else f"${c.usd_per_m_tokens:,.3f}", c.site or "—"])
        flags.append(basis.startswith("fill"))
    return Section("chips", "Chips at the interactivity target", [
        Table("chips-at-target", ["Class", "Target, tok/s per user", "Chip", "Tok/s per GPU at target", "Read", "Carried by", "GPUs in plan",
                                  "$ per M tokens (chip's own)", "At site"],
              rows, [False, True, False, True, False, False, True, True, False], flags,
              caption="Each chip's tok/s per GPU and $ per M tokens at its class's interactivity target"),
        Paragraphs(["Tok/s per GPU comes from each chip's published curve (MLPerf Inference Server and Interactive points), "
                    "read at the class's target: linear between points, the loosest point's figure below it, not offered "
                    "beyond the strictest (models/interactivity.py). Highlighted rows rest on a filled point. " + CHIP_COST_RULE],
                   "note"),
    ])


def _points_read(c) -> list[float | None]:
    """The curve points (tok/s per user) the figure at the target rests on; [None]: a fixed figure."""
    if c.target_tok_s_per_user is None or not c.points:
        return [None]
    users = [u for u, _ in c.points]
    if c.target_tok_s_per_user <= users[0]:
        return [users[0]]
    if c.target_tok_s_per_user in users:
        return [c.target_tok_s_per_user]
    return [u for u0, u1 in zip(users, users[1:]) if u0 < c.target_tok_s_per_user < u1 for u in (u0, u1)]


def _why_section(layers: PlanLayers, summary: Summary) -> Section:
    plan, scenario = layers.plan, layers.scenario
    shares = site_tokens_share(plan, scenario)
    jobs_at: dict[str, list[str]] = {}
    for j in plan.jobs:
        jobs_at.setdefault(j.site, []).append(j.name)
    rows, flags = [], []
    for s in sorted((s for s in plan.sites if s.open), key=lambda s: -s.total_cost_usd_per_year):
        fixed = s.cost_usd_per_year.get("site_fixed", 0.0) + s.cost_usd_per_year.get("cooling_zones", 0.0)
        does = []
        if s.id in jobs_at:
            does.append("trains " + ", ".join(jobs_at[s.id]))
        if shares.get(s.id):
            does.append(f"serves {shares[s.id]:.1%} of tokens")
        flag = small_site(s)
        why = ""
        if flag:
            reason = latency_reason(plan, scenario, s)
            why = SMALL_SITE_FLAG + (f" ({reason})" if reason else "")
        rows.append([s.name, s.country, s.role, _num(s.racks_total), "; ".join(does) or "—", money(s.total_cost_usd_per_year),
                     money(fixed), f"{fixed / s.total_cost_usd_per_year:.0%}" if s.total_cost_usd_per_year else "—", why])
        flags.append(flag)
    case = summary.training_case
    text = []
    if case is not None:
        ids = case.eligible
        names = {s.id: s.name for s in plan.sites}
        cheapest = ", ".join(f"{names[i]} ${case.total(i):,.0f}" for i in ids[:5])
        text.append(f"Training on {case.chip_name} with {case.fabric_name} ({case.cooling} cooling), per effective H100-year at the "
                    f"{len(ids)} eligible sites: cheapest {cheapest}; median {names[case.median_site]} "
                    f"${case.total(case.median_site):,.0f}; dearest {names[ids[-1]]} ${case.total(ids[-1]):,.0f}.")
    text.append(f"A site is flagged \"{SMALL_SITE_FLAG}\" when its fixed costs (site fixed cost plus cooling-zone fixed costs) are "
                f"{SMALL_SITE_FIXED_SHARE:.0%} or more of its annual cost; {sum(flags)} of {len(rows)} open sites are.")
    table = Table("why", ["Site", "Country", "Role", "Racks", "What it does", "Cost / yr", "Site + zone fixed / yr", "Fixed share", "Flag"],
                  rows, [False, False, False, True, False, True, True, True, False], flags,
                  caption="Open sites, costliest first: what each does, what it costs and how much of that is fixed")
    return Section("why", "Why these sites", [Paragraphs(text, "body"), table])


def _reconcile_section(layers: PlanLayers) -> Section | None:
    plan, scenario = layers.plan, layers.scenario
    if not plan.jobs:
        return None
    chips = {c.id: c for c in scenario.catalog.chips}
    fabrics = {f.id: f for f in scenario.catalog.fabrics}
    names = {s.id: s.name for s in plan.sites}
    groups: dict[tuple[str, str, str], float] = {}
    for j in plan.jobs:
        groups[(j.site, j.chip, j.fabric)] = groups.get((j.site, j.chip, j.fabric), 0.0) + j.gpus_h100_equiv
    rows = []
    eq_total = phys_total = inst_total = 0.0
    for (site, chip, fab), eq in sorted(groups.items()):
        c, f = chips[chip], fabrics[fab]
        physical = eq / (f.training_efficiency * c.h100_equiv)
        site_plan = next(s for s in plan.sites if s.id == site)
        installed = sum(ln.gpus for ln in site_plan.racks if ln.purpose == "training" and ln.chip == chip and ln.fabric == fab)
        eq_total, phys_total, inst_total = eq_total + eq, phys_total + physical, inst_total + installed
        rows.append([names[site], short_name(c.name), f.name, _num(eq), f"{f.training_efficiency:.2f}", f"{c.h100_equiv:.2f}",
                     _num(physical), _num(installed)])
    rows.append(["Total", "", "", _num(eq_total), "", "", _num(phys_total), _num(inst_total)])
    sentence = (f"Jobs ask for {eq_total:,.0f} H100-equivalent GPUs; sites hold physical GPUs. Physical = H100-equivalent / "
                f"(fabric efficiency x chip H100-equivalence): {phys_total:,.0f} physical GPUs needed, {inst_total:,.0f} installed "
                f"in whole racks (the site tables count these). Inference GPUs ({int(plan.kpis['gpus_inference']):,}) are physical too.")
    table = Table("reconcile", ["Site", "Chip", "Fabric", "H100-eq GPUs (jobs)", "Efficiency", "H100-equiv.", "Physical needed",
                                "Physical installed"], rows, [False, False, False, True, True, True, True, True],
                  caption="Training GPUs by site, chip and fabric: H100-equivalent asked, physical needed and installed")
    return Section("reconcile", "Training GPUs: H100-equivalent and physical", [Paragraphs([sentence]), table])


def _key_figures_section(plan: Plan) -> Section:
    k = plan.kpis
    kpis = [
        Kpi("Annual cost", money(plan.objective_usd_per_year), f"upfront capex {money(k['upfront_capex_usd'])}"),
        Kpi("Inference cost", f"${k['usd_per_m_tokens']:.3f} per M tokens", f"{tok_s_text(k['tokens_per_s_served_peak'])} at peak"),
        Kpi("Demand within latency budget", f"{k['demand_within_budget_share']:.1%}", f"mean RTT {k['mean_rtt_ms']:.1f} ms"),
        Kpi("IT power", mw_text(k['it_mw_inference'] + k['it_mw_training']),
            f"{mw_text(k['it_mw_inference'])} inference + {mw_text(k['it_mw_training'])} training; facility {mw_text(k['facility_mw'])}"),
        Kpi("Carbon", f"{k['emissions_t_per_year']:,.0f} t CO₂/yr", "grid emissions of facility power"),
        Kpi("Sites open", f"{int(k['sites_open'])} of {len(plan.sites)}",
            f"{int(k['gpus_inference'] + k['gpus_training']):,} physical GPUs; {int(k['training_jobs_placed'])} training jobs placed"),
    ]
    roles = []
    for role in ROLE_COLOURS:
        mw = sum(x.facility_kw for x in plan.sites if x.role == role) / 1000
        if mw > 0:
            roles.append(f"{role} {mw_text(mw)}")
    return Section("key-figures", "Key figures and cost", [
        Headline(kpis, large=False),
        Paragraphs(["Facility MW by site role: " + ", ".join(roles) + "."]),
        Image("cost-by-category", "Annual cost by category", half=True, max_height=330),
        Image("cost-by-site", "Annual cost by site", half=True, max_height=330),
    ])


def _sites_section(plan: Plan) -> Section:
    total = plan.objective_usd_per_year or 1.0
    rows = [
        [x.name, x.country, x.role, _num(x.racks_total), _num(x.gpus), ", ".join(sorted({r.chip for r in x.racks})),
         ", ".join(x.zones), ", ".join(x.fabrics) or "—", f"{x.it_kw / 1000:,.2f}",
         f"{mw_number(x.facility_kw / 1000)} / {x.power_limit_kw / 1000:,.0f}", money(x.total_cost_usd_per_year),
         f"{x.total_cost_usd_per_year / total:.1%}"]
        for x in sorted((x for x in plan.sites if x.open), key=lambda x: -x.total_cost_usd_per_year)
    ]
    columns = ["Site", "Country", "Role", "Racks", "GPUs (physical)", "Chips", "Cooling", "Fabric", "IT MW", "Facility / limit MW",
               "Cost / yr", "Share"]
    return Section("open-sites", "Open sites", [Table("sites", columns, rows, [False, False, False, True, True, False, False, False,
                                                                              True, True, True, True],
                                                      caption="Every open site, costliest first: racks, GPUs, chips, cooling, fabric, power and cost")])


def _jobs_section(plan: Plan) -> Section | None:
    if not plan.jobs:
        return None
    names = {x.id: x.name for x in plan.sites}
    rows = [[j.name, names[j.site], j.chip, j.fabric, _num(j.gpus_h100_equiv)] for j in plan.jobs]
    return Section("jobs", "Training jobs", [Table("jobs", ["Job", "Site", "Chip", "Fabric", "H100-eq GPUs"], rows,
                                                   [False, False, False, False, True], caption="Where each training job runs, on which chip and fabric")])


def _load_factor_text(plan: Plan, scenario) -> str:
    """The basis of energy and tokens a year: the catalog's load factors, or with the clock the
    hourly profiles (then the day's mean over the served peaks, per class, measured from the plan)."""
    eco = scenario.economics
    training = f"training {eco.training_load_factor:.0%}"
    if not (plan.clock.get("on") and plan.hourly):
        return (", ".join(f"{w.name} {w.load_factor:.0%}" for w in scenario.catalog.workloads)
                + f"; {training} (average / peak use: energy and tokens a year)")
    tokens = class_tokens_per_year(plan, scenario)
    peak: dict[str, float] = {}
    for a in [*plan.assignments, *plan.rent_assignments]:
        peak[a.workload] = peak.get(a.workload, 0.0) + a.served_tok_s
    seconds = eco.hours_per_year * 3600.0
    means = [f"{short_name(w.name)} {tokens.get(w.id, 0.0) / (peak[w.id] * seconds):.0%} (catalog {w.load_factor:.0%})"
             if peak.get(w.id) else f"{short_name(w.name)} — (nothing served; catalog {w.load_factor:.0%})"
             for w in scenario.catalog.workloads]
    return ("the clock: inference energy and tokens a year follow the hourly profiles, not the catalog's load factors; the "
            f"day's mean over the sum of the served peaks is {', '.join(means)}; {training} (average / peak use). $ per M "
            "tokens is on this basis: compare it with plans on the same basis.")


def _assumptions_section(layers: PlanLayers, prov: Provenance) -> Section:
    plan, scenario = layers.plan, layers.scenario
    eco, lat, pol = scenario.economics, scenario.latency, scenario.policies
    open_sites = [s for s in plan.sites if s.open]
    used_chips = sorted({ln.chip for s in open_sites for ln in s.racks})
    used_cooling = sorted({ln.cooling for s in open_sites for ln in s.racks})
    used_fabrics = sorted({ln.fabric for s in open_sites for ln in s.racks if ln.fabric})
    chips = {c.id: c for c in scenario.catalog.chips}
    cooling = {c.id: c for c in scenario.catalog.cooling}
    fabrics = {f.id: f for f in scenario.catalog.fabrics}
    rows = [
        ("Discount rate", f"{eco.discount_rate:.1%} (capex is annualized with the capital recovery factor over each asset's life)"),
        ("Chip lives", ", ".join(f"{short_name(chips[c].name)} {chips[c].life_years:g} y" for c in used_chips) or "—"),
        ("Cooling lives", ", ".join(f"{cooling[c].name} {cooling[c].life_years:g} y" for c in used_cooling) or "—"),
        ("Fabric lives", ", ".join(f"{fabrics[f].name} {fabrics[f].life_years:g} y" for f in used_fabrics) or "—"),
        ("Load factors", _load_factor_text(plan, scenario)),
        ("Target utilization", f"{eco.inference_target_utilization:.0%} of a GPU's rated throughput planned at peak"),
        ("Carbon price", f"${eco.carbon_price_usd_per_t:,.0f} per t CO₂"),
        ("Transport price", f"${eco.transport_usd_per_tok_s_1000km_year:,.2f} per (token/s x 1000 km) a year"),
        ("Hours a year", f"{eco.hours_per_year:,.0f}"),
        ("Latency model", f"RTT = 2 x distance x route factor {lat.route_factor:g} / {lat.fiber_km_per_ms:g} km per ms + "
                          f"{lat.overhead_ms:g} ms" + ("; paths over the given backbone" if lat.backbone else "; great-circle distance")),
        ("Policies", f"max share per site {pol.max_share_per_site:.0%}; carbon cap "
                     f"{'none' if pol.carbon_cap_t_per_year is None else f'{pol.carbon_cap_t_per_year:,.0f} t/yr'}; capex budget "
                     f"{'none' if pol.capex_budget_usd is None else money(pol.capex_budget_usd)}; sites {pol.min_sites}–"
                     f"{pol.max_sites if pol.max_sites is not None else 'any'}"),
    ]
    site_fields = ("power_price_usd_per_mwh", "grid_carbon_g_per_kwh", "colocation_usd_per_kw_month", "fixed_cost_usd_per_year",
                   "pue_climate_factor", "power_limit_mw")
    keys = [("sites", s.id, f) for s in open_sites for f in site_fields]
    if prov.rows:
        for label, fld in (("Power prices", "power_price_usd_per_mwh"), ("Grid carbon", "grid_carbon_g_per_kwh"),
                           ("Colocation prices", "colocation_usd_per_kw_month")):
            ks = [("sites", s.id, fld) for s in open_sites]
            v = vintages(prov, ks)
            rows.append((f"{label} (open sites)", provenance_text(prov, ks) + (f"; data of {v}" if v else "")))
        ck = [("chips", c, "capex_usd_per_gpu") for c in used_chips]
        v = vintages(prov, ck)
        rows.append(("Chip prices", provenance_text(prov, ck) + (f"; data of {v}" if v else "")))
        known = [k for k in keys if prov.get(*k)]
        imputed = [k for k in known if prov.get(*k)[0] in ("rule", "assumption")]
        if known:
            rows.append(("Imputed inputs", f"{len(imputed)} of {len(known)} numeric inputs of the open sites with provenance "
                                           f"({len(imputed) / len(known):.0%}) are filled by a rule or assumed (provenance from "
                                           f"{prov.origin}); the appendix counts them for every site."))
            label = {"power_price_usd_per_mwh": "power price", "grid_carbon_g_per_kwh": "grid carbon",
                     "colocation_usd_per_kw_month": "colocation", "fixed_cost_usd_per_year": "fixed cost",
                     "pue_climate_factor": "PUE factor", "power_limit_mw": "power limit"}
            by_set: dict[tuple[str, ...], list[str]] = {}
            for s in open_sites:
                fields = tuple(label[f] for f in site_fields if (p := prov.get("sites", s.id, f)) and p[0] in ("rule", "assumption"))
                if fields:
                    by_set.setdefault(fields, []).append(s.name)
            for fields, names in sorted(by_set.items(), key=lambda kv: -len(kv[1])):
                rows.append(("Imputed: " + ", ".join(fields), ", ".join(names)))
    else:
        rows.append(("Data provenance", "as given: the plan's inputs carry no provenance table"))
    return Section("assumptions", "Assumptions", [Definitions("assumptions", rows)])


GLOSSARY = [
    ("Annual cost", "Capex annualized over each asset's life at the discount rate (capital recovery factor), plus energy, "
                    "colocation, fixed, carbon and transport costs of one year."),
    ("Upfront capex", "Chips, cooling and fabric bought at the start; not annualized."),
    ("H100-equivalent GPU", "Training work of one H100 at full scaling; a chip counts as its H100-equivalence times the fabric's "
                            "training efficiency."),
    ("Physical GPU", "A chip installed in a rack; site tables count these."),
    ("PUE", "Power usage effectiveness: facility power / IT power; the catalog's figure, its overhead scaled by the site's "
            "climate factor."),
    ("IT MW, facility MW", "Power drawn by the racks; the same times PUE, what the grid supplies."),
    ("Colocation", "Rent for space and power per kW of IT per month."),
    ("RTT", "Round-trip time between a demand region and the site that serves it, estimated from distance."),
    ("Latency budget", "The largest RTT a region accepts for a workload class."),
    ("Load factor", "Average use over peak capacity; sets energy and the tokens served in a year."),
    ("$ per M tokens", "Annual inference cost over the tokens served in a year, in millions."),
    ("Role", "training, inference or mixed (both) by what a site's racks do; idle: open with no racks."),
    ("Small site", f"An open site whose fixed costs are {SMALL_SITE_FIXED_SHARE:.0%} or more of its annual cost."),
    ("Gap", "How far the plan's cost may be above the best possible, as proven by the solver's bound."),
]


def _appendix_section(layers: PlanLayers, prov: Provenance) -> Section:
    plan, scenario = layers.plan, layers.scenario
    inputs = {s.id: s for s in scenario.sites}
    short = {"power_price_usd_per_mwh": "power", "grid_carbon_g_per_kwh": "carbon", "colocation_usd_per_kw_month": "colocation",
             "fixed_cost_usd_per_year": "fixed", "pue_climate_factor": "PUE factor", "power_limit_mw": "power limit"}
    rows, flags = [], []
    for s in sorted(plan.sites, key=lambda s: (not s.open, -s.total_cost_usd_per_year, s.name)):
        i = inputs[s.id]
        imputed = [label for fld, label in short.items() if (p := prov.get("sites", s.id, fld)) and p[0] in ("rule", "assumption")]
        rows.append([s.name, s.country, s.role if s.open else "closed", f"{i.power_price_usd_per_mwh:,.1f}", f"{i.grid_carbon_g_per_kwh:,.0f}",
                     f"{i.colocation_usd_per_kw_month:,.2f}", f"{i.pue_climate_factor:.2f}", f"{i.power_limit_kw / 1000:,.1f}",
                     money(i.fixed_cost_usd_per_year), _num(s.racks_total), f"{s.it_kw / 1000:,.2f}", money(s.total_cost_usd_per_year),
                     f"{len(imputed)} of {len(short)}" if prov.rows else "as given"])
        flags.append(small_site(s))
    columns = ["Site", "Country", "Role", "Power $/MWh", "Carbon g/kWh", "Colocation $/kW-mo", "PUE factor", "Limit MW", "Site fixed / yr (input)",
               "Racks", "IT MW", "Cost / yr", "Imputed inputs"]
    return Section("appendix", "Appendix: every candidate site", [
        Paragraphs([f"All {len(rows)} candidate sites, open ones first (costliest first); inputs as the plan used them."], "note"),
        Table("all-sites", columns, rows, [False, False, False] + [True] * 10, flags,
              caption="Every candidate site: its inputs, what the plan built there and what it costs"),
    ])


def _solver_section(layers: PlanLayers) -> Section:
    plan = layers.plan
    s = plan.solve
    gap = f"{s.gap:.2%}" if s.gap is not None else "n/a"
    rows = [
        ("Status", f"{status_text(plan)}; solver status {s.status} ({s.termination})"), ("Solver", f"{s.solver} {s.solver_version}"),
        ("Objective", f"${s.objective_usd_per_year:,.2f}/yr" if s.objective_usd_per_year is not None else "n/a"),
        ("Best bound", f"${s.best_bound_usd_per_year:,.2f}/yr" if s.best_bound_usd_per_year is not None else "n/a"),
        ("Gap", f"{gap} (asked for {s.options['mip_gap']:.2%})" if isinstance(s.options.get("mip_gap"), (int, float))
         else f"{gap} (asked for n/a)"),
        ("Model", f"{s.model['rows']:,} rows, {s.model['columns']:,} columns, {s.model['integers']:,} integers"),
        ("Times", f"build {s.build_time_s:.1f} s, solve {s.solve_time_s:.1f} s, extract {s.extract_time_s:.1f} s"),
        ("Warm start", s.warm_start), ("Options", json.dumps(s.options, sort_keys=True)),
    ]
    if s.pairs:
        rows.insert(5, ("Serving pairs", (
            f"{s.pairs['pairs_in_model']:,} of {s.pairs['pairs_eligible']:,} eligible, {s.pairs['pricing_rounds']} pricing rounds "
            f"({'converged' if s.pairs['converged'] else 'stopped early'}); bound and gap are the full model's LP bound's"
        )))
    p = plan.provenance
    rows += [
        ("Scenario", f"{plan.scenario} ({p.get('scenario_source', 'unknown source')})"),
        ("Scenario hash", plan.scenario_hash), ("Solved (UTC)", plan.created_utc),
        ("Re-run", str(p.get("rerun", ""))), ("Seed", str(p.get("seed", ""))),
        ("Packages", ", ".join(f"{name} {version}" for name, version in sorted(p.get("packages", {}).items()))),
        ("Python, platform", f"{p.get('python', '')}, {p.get('platform', '')}"),
    ]
    blocks: list[Block] = []
    if layers.scenario.description:
        blocks.append(Paragraphs([layers.scenario.description]))
    blocks.append(Definitions("solver", rows))
    return Section("solver", "Solver and provenance", blocks)


def report_content(layers: PlanLayers) -> ReportContent:
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    plan = layers.plan
    prov = layers.provenance
    summary = executive_summary(layers, prov)
    sections: list[Section | None] = [
        _summary_section(plan, summary),
        _argument_section(plan, summary),
        Section("map", "Map", [Image("map", "Map of the plan: sites by role and size, demand regions and the lines that serve them")],
                new_page=True),
        _key_figures_section(plan),  # the charts come before the tables (issue 49: they were on page 9, after the outage tables)
        _workload_section(layers, summary),
        _chip_section(layers, prov),
        _why_section(layers, summary),
        _reconcile_section(layers),
        *[build(layers) for build in EXTRA_SECTIONS],
        _sites_section(plan),
        _jobs_section(plan),
        _assumptions_section(layers, prov),
        Section("glossary", "Glossary", [Definitions("glossary", GLOSSARY)]),
        _appendix_section(layers, prov),
        _solver_section(layers),
    ]
    return ReportContent(
        title=f"dcplace plan — {variant_title(plan)}",
        subtitle=f"Solved {plan.created_utc[:10]} · {status_text(plan)} · {len(plan.assignments):,} region assignments",
        sections=[x for x in sections if x is not None],
    )


def report_html(content: ReportContent, images: dict[str, str]) -> str:
    return render_html("report.html.j2", c=content, images=images)


def _png(fig: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _own_pngs(content: ReportContent) -> dict[str, bytes]:
    """The figures sections carry themselves (Image.png), by key."""
    return {b.key: b.png for sec in content.sections for b in sec.blocks if isinstance(b, Image) and b.png is not None}


def save_report(layers: PlanLayers, out_dir: str | Path, html: bool = True, pdf: bool = True) -> list[Path]:
    """Write report.html and/or report.pdf into `out_dir`; returns the paths. Both are one page of
    one template: the PDF is that HTML printed (reports.pdf). Without the PDF engine's system
    libraries, report.html is written and reports.pdf.PdfEngineMissing raised."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    check_destination(out_dir, "report")  # refuse a bad --out before drawing, not after
    content = report_content(layers)
    figures = {"map": draw_static_map(layers).figure, "cost-by-category": cost_by_category_figure(layers.plan),
               "cost-by-site": cost_by_site_figure(layers.plan)}
    try:
        # the map as PNG (thousands of paths); the charts as SVG, sharp at any zoom and on paper
        uris = {key: figure_data_uri(fig, "png", dpi=MAP_DPI) if key == "map" else figure_data_uri(fig) for key, fig in figures.items()}
    finally:
        for fig in figures.values():
            plt.close(fig)
    uris.update({key: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for key, png in _own_pngs(content).items()})
    return write_report_files(out_dir, report_html(content, uris), html=html, pdf=pdf)


__all__ = ["EXTRA_SECTIONS", "Bullets", "Definitions", "Headline", "Image", "Kpi", "Paragraphs", "ReportContent", "Section", "Table",
           "report_content", "report_html", "save_report"]
