"""The executive report: one self-contained HTML page and a PDF with the same content.

The report is an argument, built as a list of `Section`s (`report_sections`): page 1 the
executive summary (reports/summary.py computes its sentences from the plan), then the map,
per-workload economics, why these sites, the GPU reconciliation, key figures and cost,
the site and job tables, the assumptions box, a glossary, the appendix and the solver
record. Later analyses (resilience, the day's load, alternatives, robustness) slot in by
appending a builder to `EXTRA_SECTIONS`; each builder takes the `PlanLayers` and returns a
`Section` or None, and lands before the assumptions box.

Each section holds typed blocks (`Paragraphs`, `Bullets`, `Headline`, `Table`, `Image`,
`Definitions`), rendered twice: by Jinja2 with autoescaping into HTML (so every name from
the inputs reaches the page as text; images are data: URIs), and by a small flow layout on
matplotlib into an A4-landscape PDF: "page N of M" on every page, table text at 8.5 pt with
numbers right-aligned, tables split only at row boundaries with their header repeated and
filling the page, a heading never alone at a page foot, figures embedded as images so that
every piece of text in the PDF is the layout's own (8 pt or more). Matplotlib text is drawn
with parse_math=False, so a '$' in a name is a dollar sign.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Union

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.image import imread
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.textpath import TextToPath

from dcplace.models.interactivity import throughput_id
from dcplace.models.plan import Plan
from dcplace.reports.charts import cost_by_category_figure, cost_by_site_figure, figure_data_uri
from dcplace.reports.layers import PlanLayers
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.output import check_destination, render_html, staged_files
from dcplace.reports.staticmap import draw_static_map
from dcplace.reports.style import ROLE_COLOURS, money, mw_number, mw_text, short_name, tok_s_text
from dcplace.reports.summary import (
    CHIP_COST_RULE, FULL_COST_RULE, SMALL_SITE_FIXED_SHARE, TRAINING_HOUR_RULE, Provenance, Summary, chip_economics, class_tokens_per_year,
    executive_summary, latency_reason,
    money_at, provenance_text, site_tokens_share, small_site, status_text, variant_title, vintages, workload_costs,
)

A4_LANDSCAPE_IN = (11.69, 8.27)
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


@dataclass(frozen=True)
class Image:
    key: str  # map | cost-by-category | cost-by-site
    alt: str
    half: bool = False  # two half-width images in a row
    max_height: float = 10_000.0  # points, in the PDF
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
                  rows, [False, True, True, True, True]),
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
                  rows, [False, True, True, False, True, True, True, True, True, True], flags)
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
              rows, [False, True, False, True, False, False, True, True, False], flags),
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
                  rows, [False, False, False, True, False, True, True, True, False], flags)
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
                                "Physical installed"], rows, [False, False, False, True, True, True, True, True])
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
                                                                              True, True, True, True])])


def _jobs_section(plan: Plan) -> Section | None:
    if not plan.jobs:
        return None
    names = {x.id: x.name for x in plan.sites}
    rows = [[j.name, names[j.site], j.chip, j.fabric, _num(j.gpus_h100_equiv)] for j in plan.jobs]
    return Section("jobs", "Training jobs", [Table("jobs", ["Job", "Site", "Chip", "Fabric", "H100-eq GPUs"], rows,
                                                   [False, False, False, False, True])])


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
        Table("all-sites", columns, rows, [False, False, False] + [True] * 10, flags),
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
        _workload_section(layers, summary),
        _chip_section(layers, prov),
        _why_section(layers, summary),
        _reconcile_section(layers),
        *[build(layers) for build in EXTRA_SECTIONS],
        _key_figures_section(plan),
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


# ----------------------------------------------------------------------------- PDF layout

PAGE_W, PAGE_H = A4_LANDSCAPE_IN[0] * 72, A4_LANDSCAPE_IN[1] * 72  # points
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 36.0, 36.0, 34.0, 40.0
CONTENT_W = PAGE_W - MARGIN_L - MARGIN_R
TABLE_PT, BODY_PT, LEAD_PT, NOTE_PT, HEADING_PT, FOOTER_PT = 8.5, 9.0, 9.5, 8.0, 14.0, 8.0
DECISION_PT = 11.0  # page 1's recommendation
MIN_PT = 8.0  # nothing in the PDF is smaller
MIN_GLYPH_EM = 0.2  # narrower than any DejaVu Sans glyph a name uses (its space is 0.32 em): bounds a line's characters
_MEASURE = TextToPath()
_WIDTH_CACHE: dict[tuple[str, float, bool], float] = {}


def text_width(text: str, size: float, bold: bool = False) -> float:
    key = (text, size, bold)
    if key not in _WIDTH_CACHE:
        prop = FontProperties(family="DejaVu Sans", size=size, weight="bold" if bold else "normal")
        _WIDTH_CACHE[key] = _MEASURE.get_text_width_height_descent(text, prop, ismath=False)[0] if text else 0.0
    return _WIDTH_CACHE[key]


def wrap(text: str, width: float, size: float, bold: bool = False) -> list[str]:
    """Greedy word wrap by measured width; a word longer than the line is broken by characters."""
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for word in para.split(" "):
            candidate = f"{line} {word}" if line else word
            if text_width(candidate, size, bold) <= width:
                line = candidate
                continue
            if line:
                lines.append(line)
            while len(word) > 1:
                # the longest prefix that fits, by bisection over at most the characters a line
                # can hold: trying every length from the end measured a 5,000-character word
                # thousands of times (minutes per table)
                most = min(len(word), int(width / (MIN_GLYPH_EM * size)) + 1)
                if most == len(word) and text_width(word, size, bold) <= width:
                    break
                low, high = 1, most  # word[:1] is kept even when it alone does not fit
                while low < high:
                    mid = (low + high + 1) // 2
                    if text_width(word[:mid], size, bold) <= width:
                        low = mid
                    else:
                        high = mid - 1
                if low == len(word):
                    break
                lines.append(word[:low])
                word = word[low:]
            line = word
        lines.append(line)
    return lines


@dataclass
class _Op:
    kind: str  # text | line | rect | image
    args: tuple
    kw: dict = field(default_factory=dict)


class PdfLayout:
    """Flows sections onto A4-landscape pages (coordinates in points from the top left)."""

    def __init__(self, title: str):
        self.title = title
        self.pages: list[list[_Op]] = [[]]
        self.y = MARGIN_T

    # -- primitives
    @property
    def room(self) -> float:
        return PAGE_H - MARGIN_B - self.y

    def new_page(self) -> None:
        if self.pages[-1]:
            self.pages.append([])
        self.y = MARGIN_T

    def text(self, x: float, y: float, s: str, size: float, bold: bool = False, colour: str = "#1d2630", ha: str = "left") -> None:
        assert size >= MIN_PT
        self.pages[-1].append(_Op("text", (x, y, s), {"size": size, "bold": bold, "colour": colour, "ha": ha}))

    def hline(self, x0: float, x1: float, y: float, colour: str = "#d5d9de", lw: float = 0.5) -> None:
        self.pages[-1].append(_Op("line", (x0, x1, y), {"colour": colour, "lw": lw}))

    def rect(self, x: float, y: float, w: float, h: float, colour: str) -> None:
        self.pages[-1].append(_Op("rect", (x, y, w, h), {"colour": colour}))

    # -- measuring blocks: height of the smallest piece that may start a page region
    def first_height(self, block: Block) -> float:
        if isinstance(block, Paragraphs):
            size = self._size(block.style)
            return min(2, len(wrap(block.texts[0], CONTENT_W, size))) * size * 1.35 if block.texts else 0
        if isinstance(block, Bullets):
            size = self._size(block.style)
            return len(wrap(block.items[0], CONTENT_W - 14, size)[:2]) * size * 1.35 if block.items else 0
        if isinstance(block, Headline):  # drawn whole (headline() keeps its rows together)
            return _headline_height(block) * -(-len(block.kpis) // (4 if block.large else 3))
        if isinstance(block, Table):
            return self._table_opening(block, self._column_widths(block))
        if isinstance(block, Image):
            return 200
        if isinstance(block, Definitions):
            return sum(self._definition_height(r) for r in block.rows[:2])
        return 0

    @staticmethod
    def _size(style: str) -> float:
        return {"lead": LEAD_PT, "note": NOTE_PT, "decision": DECISION_PT, "boxhead": BODY_PT}.get(style, BODY_PT)

    def ensure(self, height: float) -> None:
        if height > self.room:
            self.new_page()

    # -- sections
    def _opening_height(self, section: Section) -> float:
        """What must follow a heading on its page: any short intro paragraphs in full and the
        start of the first other block (a table's header and first rows)."""
        height = 0.0
        for block in section.blocks:
            if isinstance(block, Paragraphs) and sum(len(t) for t in block.texts) < 600:
                size = self._size(block.style)
                height += sum(len(wrap(t, CONTENT_W, size)) for t in block.texts) * size * 1.35 + 6
                continue
            return height + self.first_height(block)
        return height

    def heading(self, section: Section) -> None:
        first = self._opening_height(section)
        if section.new_page:
            self.new_page()
        else:
            self.y += 8 if self.y > MARGIN_T else 0
            self.ensure(HEADING_PT * 1.7 + first)  # never a heading alone at a page foot
        self.text(MARGIN_L, self.y, section.title, HEADING_PT, bold=True)
        self.y += HEADING_PT * 1.7

    def paragraphs(self, block: Paragraphs) -> None:
        size = self._size(block.style)
        colour = "#4a5560" if block.style == "note" else "#8a1c1c" if block.style == "boxhead" else "#1d2630"
        bold = block.style in ("decision", "boxhead")
        for text in block.texts:
            for line in wrap(text, CONTENT_W, size, bold):
                self.ensure(size * 1.35)
                self.text(MARGIN_L, self.y, line, size, bold=bold, colour=colour)
                self.y += size * 1.35
            self.y += size * 0.45

    def bullets(self, block: Bullets) -> None:
        size = self._size(block.style)
        for item in block.items:
            lines = wrap(item, CONTENT_W - 14, size)
            self.ensure(min(2, len(lines)) * size * 1.35)
            if block.style == "risks":  # the risks box: a tinted band beside each item
                self.rect(MARGIN_L - 4, self.y - 1, 2.5, len(lines) * size * 1.35, "#c0392b")
            self.text(MARGIN_L + 3, self.y, "•", size)
            for line in lines:
                self.ensure(size * 1.35)
                self.text(MARGIN_L + 14, self.y, line, size)
                self.y += size * 1.35
            self.y += size * 0.3
        self.y += size * 0.3

    def headline(self, block: Headline) -> None:
        height = _headline_height(block)
        per_row = 4 if block.large else 3
        gap = 10
        self.ensure(height * -(-len(block.kpis) // per_row))
        for start in range(0, len(block.kpis), per_row):
            row = block.kpis[start:start + per_row]
            self.ensure(height)
            w = (CONTENT_W - gap * (per_row - 1)) / per_row
            for i, kpi in enumerate(row):
                x = MARGIN_L + i * (w + gap)
                self.rect(x, self.y, w, height - 8, "#f0f2f4")
                self.text(x + 8, self.y + 8, kpi.label.upper(), 8, colour="#5a6570")
                value_pt = 20 if block.large else 15
                while value_pt > 11 and text_width(kpi.value, value_pt, True) > w - 16:
                    value_pt -= 1
                self.text(x + 8, self.y + 21, kpi.value, value_pt, bold=True)
                below = 21 + (20 if block.large else 15) * 1.3  # the notes start under the value at its largest size
                for k, note in enumerate(wrap(kpi.note, w - 16, 8)[:2] if kpi.note else []):
                    self.text(x + 8, self.y + below + k * 10, note, 8, colour="#4a5560")
            self.y += height

    def _column_widths(self, table: Table) -> list[float]:
        """Column widths that fill the text width. Numbers are never wrapped: a numeric
        column is at least its widest cell. When the table is too wide, numeric headers wrap
        first (one word a line), then text columns wrap, each shrunk in proportion to its
        room above its longest word (at most 110 pt), so a name column keeps whole words."""
        pad = 8.0
        columns = range(len(table.columns))
        cells = [[r[j] for r in table.rows] for j in columns]
        widest_cell = [max((text_width(c, TABLE_PT) for c in cells[j]), default=0.0) for j in columns]
        head_word = [max((text_width(w, TABLE_PT, True) for w in h.split()), default=0.0) for h in table.columns]
        head_full = [text_width(h, TABLE_PT, True) for h in table.columns]
        natural = [max(widest_cell[j], min(head_word[j] * 2.2, head_full[j]), head_word[j]) + pad for j in columns]

        def fill(widths: list[float], give_to: list[float]) -> list[float]:
            extra, weight = CONTENT_W - sum(widths), sum(give_to)
            if weight <= 0:
                return [w + extra / len(widths) for w in widths]
            return [w + extra * g / weight for w, g in zip(widths, give_to)]

        if sum(natural) <= CONTENT_W:
            return fill(natural, [1.0] * len(natural))
        compact = [max(widest_cell[j], head_word[j]) + pad if table.numeric[j] else natural[j] for j in columns]
        if sum(compact) <= CONTENT_W:
            return fill(compact, [n - c for n, c in zip(natural, compact)])
        floors = [compact[j] if table.numeric[j] else
                  min(110.0, max([text_width(w, TABLE_PT) for c in cells[j] for w in c.split()] + [head_word[j]]) + pad)
                  for j in columns]
        floors = [min(f, c) for f, c in zip(floors, compact)]
        slack = [c - f for c, f in zip(compact, floors)]
        over = sum(compact) - CONTENT_W
        if sum(slack) <= over:
            return floors
        return [c - over * s / sum(slack) for c, s in zip(compact, slack)]

    def _cell_lines(self, text: str, width: float, bold: bool) -> list[str]:
        # + 0.01 pt: a numeric column is exactly its widest cell plus padding, and the sums that
        # fit the columns to the page can round that cell a hair over (141.4 drawn as 141. / 4)
        return wrap(text, width - 8 + 0.01, TABLE_PT, bold)

    def _row_height(self, row: list[str], widths: list[float], header: bool) -> float:
        lines = max(len(self._cell_lines(c, w, header)) for c, w in zip(row, widths))
        return lines * TABLE_PT * 1.3 + 5

    def _draw_row(self, row: list[str], widths: list[float], numeric: list[bool], header: bool, flagged: bool) -> None:
        height = self._row_height(row, widths, header)
        if header:
            self.rect(MARGIN_L, self.y, CONTENT_W, height, "#e6eaee")
        elif flagged:
            self.rect(MARGIN_L, self.y, CONTENT_W, height, "#fdf1dc")
        x = MARGIN_L
        for cell, w, num in zip(row, widths, numeric):
            for k, line in enumerate(self._cell_lines(cell, w, header)):
                y = self.y + 2.5 + k * TABLE_PT * 1.3
                if num:
                    self.text(x + w - 4, y, line, TABLE_PT, bold=header, ha="right")
                else:
                    self.text(x + 4, y, line, TABLE_PT, bold=header)
            x += w
        self.y += height
        self.hline(MARGIN_L, MARGIN_L + CONTENT_W, self.y)

    def _table_opening(self, block: Table, widths: list[float]) -> float:
        """A table starts where its header and first three rows fit, or all of it when it has
        at most six rows (a short table is never split)."""
        rows = block.rows if len(block.rows) <= 6 else block.rows[:3]
        return self._row_height(block.columns, widths, True) + sum(self._row_height(r, widths, False) for r in rows)

    def table(self, block: Table, title: str) -> None:
        widths = self._column_widths(block)
        flagged = block.flagged or [False] * len(block.rows)
        rows = block.rows or [["—"] * len(block.columns)]
        opening = self._table_opening(block, widths)
        first = True
        heights = [self._row_height(r, widths, False) for r in rows]
        for i, row in enumerate(rows):
            h = heights[i]
            # ... and never leaves fewer than three rows alone on the next page.
            widow = not first and i >= 3 and len(rows) - i == 3 and sum(heights[i:]) > self.room
            if first or h > self.room or widow:
                if not first or opening > self.room:
                    self.new_page()
                    self.text(MARGIN_L, self.y, f"{title} (continued)", 10, bold=True, colour="#4a5560")
                    self.y += 16
                self._draw_row(block.columns, widths, [n for n in block.numeric], True, False)
                first = False
            self._draw_row(row, widths, block.numeric, False, flagged[i] if i < len(flagged) else False)
        self.y += 8

    def images(self, pngs: list[bytes], max_height: float, min_height: float = 220.0) -> None:
        """One image across the page, or several side by side, scaled to fit."""
        arrs = [imread(io.BytesIO(png), format="png") for png in pngs]
        gap = 12.0
        slot = (CONTENT_W - gap * (len(arrs) - 1)) / len(arrs)
        h = min(max_height, max(slot * a.shape[0] / a.shape[1] for a in arrs))
        if h > self.room and self.room < min(min_height, h) and self.y > MARGIN_T:
            self.new_page()
        h = min(h, self.room)
        x = MARGIN_L
        for arr in arrs:
            h_px, w_px = arr.shape[:2]
            w = min(slot, h * w_px / h_px)
            hh = w * h_px / w_px
            self.pages[-1].append(_Op("image", (x + (slot - w) / 2, self.y, w, hh, arr)))
            x += slot + gap
        self.y += h + 8

    def _definition_height(self, row: tuple[str, str]) -> float:
        return max(len(wrap(row[0], 150, BODY_PT - 0.5, True)), len(wrap(row[1], CONTENT_W - 170, BODY_PT - 0.5))) * (BODY_PT - 0.5) * 1.35 + 4

    def definitions(self, block: Definitions) -> None:
        size = BODY_PT - 0.5
        for label, value in block.rows:
            self.ensure(self._definition_height((label, value)))
            top = self.y
            for k, line in enumerate(wrap(label, 150, size, True)):
                self.text(MARGIN_L, top + k * size * 1.35, line, size, bold=True)
            for k, line in enumerate(wrap(value, CONTENT_W - 170, size)):
                self.text(MARGIN_L + 170, top + k * size * 1.35, line, size)
            self.y = top + self._definition_height((label, value))
        self.y += 6

    # -- drawing
    def draw(self, pdf: PdfPages) -> int:
        total = len(self.pages)
        for n, ops in enumerate(self.pages, start=1):
            fig = plt.figure(figsize=A4_LANDSCAPE_IN)
            for op in ops:
                if op.kind == "text":
                    x, y, s = op.args
                    fig.text(x / PAGE_W, 1 - y / PAGE_H, s, fontsize=op.kw["size"], weight="bold" if op.kw["bold"] else "normal",
                             color=op.kw["colour"], ha=op.kw["ha"], va="top", family="DejaVu Sans", parse_math=False)
                elif op.kind == "line":
                    x0, x1, y = op.args
                    fig.add_artist(Line2D([x0 / PAGE_W, x1 / PAGE_W], [1 - y / PAGE_H] * 2, transform=fig.transFigure,
                                          color=op.kw["colour"], lw=op.kw["lw"]))
                elif op.kind == "rect":
                    x, y, w, h = op.args
                    fig.add_artist(Rectangle((x / PAGE_W, 1 - (y + h) / PAGE_H), w / PAGE_W, h / PAGE_H, transform=fig.transFigure,
                                             facecolor=op.kw["colour"], edgecolor="none", zorder=-1))
                elif op.kind == "image":
                    x, y, w, h, arr = op.args
                    ax = fig.add_axes((x / PAGE_W, 1 - (y + h) / PAGE_H, w / PAGE_W, h / PAGE_H))
                    ax.imshow(arr, interpolation="none", aspect="auto")
                    ax.set_axis_off()
            footer_y = 1 - (PAGE_H - 20) / PAGE_H
            fig.text(MARGIN_L / PAGE_W, footer_y, self.title, fontsize=FOOTER_PT, color="#5a6570", va="baseline", parse_math=False)
            fig.text(1 - MARGIN_R / PAGE_W, footer_y, f"page {n} of {total}", fontsize=FOOTER_PT, color="#5a6570", ha="right",
                     va="baseline")
            pdf.savefig(fig)
            plt.close(fig)
        return total


def _png(fig: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _headline_height(block: Headline) -> float:
    """A row of KPI cards with its gap: label, value (15 pt, 20 pt large), two lines of note."""
    return 78 if block.large else 70


def write_pdf(path: Path, content: ReportContent, images: dict[str, bytes]) -> int:
    """Lay the sections out and write the PDF; returns the number of pages."""
    layout = PdfLayout(content.title)
    title_pt = 18.0 if text_width(content.title, 18.0, True) <= CONTENT_W else 14.0  # a variant's title names its changed inputs
    for line in wrap(content.title, CONTENT_W, title_pt, True):
        layout.text(MARGIN_L, layout.y, line, title_pt, bold=True)
        layout.y += title_pt * 1.35
    layout.y += 25 - title_pt * 1.35
    for line in wrap(content.subtitle, CONTENT_W, 9.5):
        layout.text(MARGIN_L, layout.y, line, 9.5, colour="#4a5560")
        layout.y += 14
    layout.y += 4
    for section in content.sections:
        layout.heading(section)
        blocks = list(section.blocks)
        while blocks:
            block = blocks.pop(0)
            if isinstance(block, Image):
                group = [block]
                while block.half and blocks and isinstance(blocks[0], Image) and blocks[0].half and len(group) < 2:
                    group.append(blocks.pop(0))
                layout.images([images[b.key] for b in group], min(b.max_height for b in group))
            elif isinstance(block, Paragraphs):
                layout.paragraphs(block)
            elif isinstance(block, Bullets):
                layout.bullets(block)
            elif isinstance(block, Headline):
                layout.headline(block)
            elif isinstance(block, Table):
                layout.table(block, section.title)
            elif isinstance(block, Definitions):
                layout.definitions(block)
    with PdfPages(path, metadata={"Title": content.title, "Creator": "dcplace"}) as pdf:
        return layout.draw(pdf)


def _own_pngs(content: ReportContent) -> dict[str, bytes]:
    """The figures sections carry themselves (Image.png), by key."""
    return {b.key: b.png for sec in content.sections for b in sec.blocks if isinstance(b, Image) and b.png is not None}


def save_report(layers: PlanLayers, out_dir: str | Path, html: bool = True, pdf: bool = True) -> list[Path]:
    """Write report.html and/or report.pdf into `out_dir`; returns the paths."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    check_destination(out_dir, "report")  # refuse a bad --out before drawing, not after
    content = report_content(layers)
    map_fig = draw_static_map(layers).figure
    category = cost_by_category_figure(layers.plan)
    by_site = cost_by_site_figure(layers.plan)
    figures = {"map": map_fig, "cost-by-category": category, "cost-by-site": by_site}
    try:
        with staged_files(out_dir, "report") as stage:
            if html:
                uris = {"map": figure_data_uri(map_fig, "png", dpi=130), "cost-by-category": figure_data_uri(category),
                        "cost-by-site": figure_data_uri(by_site)}
                uris.update({key: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for key, png in _own_pngs(content).items()})
                (stage.dir / "report.html").write_text(report_html(content, uris), encoding="utf-8")
            if pdf:
                pngs = {key: _png(fig, 170 if key == "map" else 200) for key, fig in figures.items()} | _own_pngs(content)
                write_pdf(stage.dir / "report.pdf", content, pngs)
    finally:
        for fig in figures.values():
            plt.close(fig)
    return stage.moved


__all__ = ["EXTRA_SECTIONS", "Bullets", "Definitions", "Headline", "Image", "Kpi", "Paragraphs", "ReportContent", "Section", "Table",
           "report_content", "report_html", "save_report", "write_pdf"]
