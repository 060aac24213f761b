"""Why this plan: the report sections of the explanation studies, and their figures.

Each builder takes the `PlanLayers` and returns a `Section`, or None when its analysis has not
been run for this plan (optimizer/studies/explain.py: saved under PLAN/why/<analysis>/ and
stamped with the plan it explains, so a re-solved plan never shows a stale analysis):

* `prices_section`: prices of the limits (LP duals with the integer decisions fixed);
* `worth_section`: what each open site is worth and what closed candidates lack to enter;
* `alternatives_section`: near-optimal alternatives, what they share, a map;
* `robustness_section`: decisions that flip under sampled inputs, regret, a tornado chart.

Importing this module registers the builders in `reports.report.EXTRA_SECTIONS` (the
executive report shows them after "Why these sites"); `dcplace.reports.save_report` and
`dcplace report` import it. The figures (`tornado_figure`, `alternatives_map_figure`) are also
written as PNG files beside each analysis by `save_why_figures`.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from pyproj import Transformer

from dcplace.optimizer.studies.alternatives import AlternativesStudy
from dcplace.optimizer.studies.duals import LimitPrices
from dcplace.optimizer.studies.explain import WHY_FOLDER, saved_analysis, write_file
from dcplace.optimizer.studies.robustness import RobustnessStudy
from dcplace.optimizer.studies.worth import WorthStudy
from dcplace.reports.layers import PlanLayers
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.report import EXTRA_SECTIONS, Bullets, Image, Paragraphs, Section, Table, save_report
from dcplace.reports.style import BORDER_COLOUR, LAND_COLOUR, OCEAN_COLOUR, countries, money
from dcplace.reports.summary import money_step_usd, robustness_lines

TOP_PRICES = 12
WORLD = "EPSG:8857"  # Equal Earth, as the plan map


def _money_or(x: float | None, none: str = "—") -> str:
    return none if x is None else money(x)


# ----------------------------------------------------------------------------- loading


ANALYSES = {LimitPrices: "prices", WorthStudy: "worth", AlternativesStudy: "alternatives", RobustnessStudy: "robustness"}


def load_analysis(layers: PlanLayers, study_type: type):
    """This plan's saved analysis of `study_type` (PLAN/why/<kind>/<kind>.json), or None when
    none was run for this plan."""
    kind = ANALYSES[study_type]
    doc = saved_analysis(layers.folder, kind, f"{kind}.json", layers.plan)
    return study_type.from_dict(doc) if doc else None


# ----------------------------------------------------------------------------- sections


def _price_text(value: float, unit: str) -> str:
    return f"${value:,.0f} a year per {unit}" if abs(value) >= 1 else f"${value:,.4f} a year per {unit}"


def prices_section(layers: PlanLayers, prices: LimitPrices | None = None) -> Section | None:
    prices = prices or load_analysis(layers, LimitPrices)
    if prices is None:
        return None
    binding = [p for p in prices.binding() if p.limit != "latency budget"]
    latency = [p for p in prices.prices if p.limit == "latency budget"]
    rows = []
    for p in binding[:TOP_PRICES]:
        check = "—" if p.check_usd_per_year_per_unit is None else _price_text(p.check_usd_per_year_per_unit, p.unit)
        rows.append([p.limit, p.name, _price_text(p.value_usd_per_year_per_unit, p.unit), f"{p.used:,.1f} of {p.limit_value:,.1f}",
                     p.method, check])
    blocks = [Paragraphs([
        f"What one more unit of each limit would save a year, with this plan's sites, cooling zones and job placements held. "
        f"{prices.basis} The plan LP costs {money(prices.lp_objective_usd_per_year)} a year against the plan's "
        f"{money(prices.plan_objective_usd_per_year)} (whole racks). "
        + (f"{len(binding)} limits bind; the dearest are listed." if binding else
           "No site power, floor space or policy limit binds with these sites: more of any would save nothing until the sites change.")
    ])]
    if rows:
        blocks.append(Table("prices", ["Limit", "Where", "Value of one more unit", "Used (units)", "Method", "Finite-difference check"],
                            rows, [False, False, True, True, False, True], caption="What one more unit of each binding limit is worth"))
    if latency:
        blocks.append(Bullets([
            f"Latency budget, {p.name}: 1 ms more in every region saves {money(p.value_usd_per_year_per_unit)} a year; 1 ms less "
            + ("has no plan with these sites" if p.cost_of_one_less_usd_per_year is None else
               f"costs {money(p.cost_of_one_less_usd_per_year)} a year")
            + " (a finite difference of the plan LP: a budget acts by pruning region-site pairs, so it has no row and no dual)."
            for p in latency
        ]))
    blocks.append(Paragraphs([f"Computed in {prices.seconds:,.1f} s (`dcplace why prices`). Site counts and forced sites involve only "
                              "integer decisions and have no LP price: what a site is worth is measured by re-solving (next section)."],
                             "note"))
    return Section("prices", "Prices of the limits", blocks)


def worth_section(layers: PlanLayers, study: WorthStudy | None = None) -> Section | None:
    study = study or load_analysis(layers, WorthStudy)
    if study is None:
        return None
    names = {s.id: s.name for s in layers.plan.sites}
    plan_cost = {s.id: s.total_cost_usd_per_year for s in layers.plan.sites}
    rows, flags = [], []
    items = sorted(study.open_sites(), key=lambda w: (w.worth_usd_per_year is not None, -(w.worth_usd_per_year or 0)))
    for w in items:
        if w.indispensable:
            value, interval, note = "indispensable", "—", _short_reason(w.message)
        elif w.worth_usd_per_year is None:
            value, interval, note = "not found", "—", f"{w.status}: re-run to retry"
        else:
            value = money(w.worth_usd_per_year)
            interval = f"{_money_or(w.worth_low_usd_per_year)} to {money(w.worth_high_usd_per_year)}"
            changes = ([f"opens {', '.join(names.get(s, s) for s in w.opens)}"] if w.opens else []) + \
                      ([f"closes {', '.join(names.get(s, s) for s in w.closes)}"] if w.closes else [])
            note = ("a tie: within the solver gaps; " if w.tie else "") + ("; ".join(changes) or "the others absorb it")
            if w.worth_usd_per_year < 0:
                note = f"the re-solve without it found a plan {money(-w.worth_usd_per_year)} a year cheaper (within the gap); " + note
        rows.append([w.name, w.role, money(plan_cost.get(w.site, 0.0)), value, interval, note])
        flags.append(w.tie)
    indispensable = sum(w.indispensable for w in items)
    ties = sum(w.tie for w in items if w.worth_usd_per_year is not None)
    gap_usd = (study.plan_objective_usd_per_year - study.plan_bound_usd_per_year) if study.plan_bound_usd_per_year is not None else None
    blocks = [Paragraphs([
        f"For each of the {len(items)} open sites, the least annual cost without it (a full re-solve with the site forbidden, run "
        f"through the batch engine) minus this plan's cost. {indispensable} are indispensable: without them some region has no "
        f"site within its latency budget, or no plan exists. {ties} are ties: the interval of what the re-solves prove holds "
        f"zero, so the solver cannot tell the plan with the site from the plan without it"
        + (f" (this plan is proven within {money(gap_usd)} a year of the best)." if gap_usd is not None else ".")
    ]), Table("worth", ["Site", "Role", "Its cost / yr", "Worth: cost without it / yr", "Proven interval", "What changes without it"],
              rows, [False, False, True, True, True, False], flags, caption="What each open site is worth: the plan's cost without it")]
    cands = study.candidates()
    if cands:
        crow = []
        for w in sorted(cands, key=lambda w: w.worth_usd_per_year if w.worth_usd_per_year is not None else float("inf")):
            changes = "; ".join(([f"closes {', '.join(names.get(s, s) for s in w.closes)}"] if w.closes else [])
                                + ([f"also opens {', '.join(names.get(s, s) for s in w.opens)}"] if w.opens else [])) or "—"
            if w.worth_usd_per_year is not None and w.worth_usd_per_year < 0:
                changes = f"enters at today's cost: the re-solve with it found a plan {money(-w.worth_usd_per_year)} a year cheaper (within the gap); " + changes
            crow.append([w.name, _money_or(w.worth_usd_per_year, w.status),
                         f"{_money_or(w.worth_low_usd_per_year)} to {_money_or(w.worth_high_usd_per_year)}", changes])
        blocks += [Paragraphs([
            "Closed candidates nearest to entering (the sites the re-solves above open most often in place of a forbidden one, then the LP relaxation's nearest): the least annual cost with the site forced "
            "open minus this plan's. A site enters the plan if its annual cost (its fixed cost, say) falls by more than that."]),
            Table("entry", ["Candidate", "Must be cheaper by / yr", "Proven interval", "What changes with it"], crow,
                  [False, True, True, False], caption="What a closed candidate must cost less to enter the plan")]
    blocks.append(Paragraphs([f"{len(study.items)} re-solves on {study.workers} worker(s) in {study.seconds:,.0f} s, each with time limit "
                              f"{study.options.get('time_limit_s', 0):g} s and gap {float(study.options.get('mip_gap', 0)):.2%} "
                              f"(`dcplace why worth`; plan folders in {WHY_FOLDER}/worth/)."], "note"))
    return Section("worth", "What each site is worth", blocks)


def _short_reason(message: str) -> str:
    first = message.split(";")[0].split(" Fix:")[0]
    if "no site within" in first:
        region = first.split("region ", 1)[-1].split(" has ")[0]
        return f"{region} has no other site within its latency budget" + (" (and more)" if message.count(";") else "")
    return first[:160] or "no plan without it"


def alternatives_section(layers: PlanLayers, study: AlternativesStudy | None = None) -> Section | None:
    study = study or load_analysis(layers, AlternativesStudy)
    if study is None:
        return None
    names = study.names
    plans = [("Recommended", study.plan_objective_usd_per_year, study.plan_roles)] + \
            [(a.name, a.cost_usd_per_year, a.roles) for a in study.alternatives]
    rows = [[label, money(cost), f"{cost / study.plan_objective_usd_per_year - 1:+.2%}", f"{len(roles)}",
             "—" if i == 0 else f"{study.alternatives[i - 1].differs_from_plan}",
             "—" if i == 0 else f"{study.alternatives[i - 1].min_difference}"]
            for i, (label, cost, roles) in enumerate(plans)]
    must, some = study.must_haves(), study.interchangeable()
    letter = {"training": "T", "inference": "I", "mixed": "M", "idle": "o"}
    matrix = [[names.get(s, s), *[letter.get(roles.get(s, ""), "·") for _, _, roles in plans],
               f"{sum(s in roles for _, _, roles in plans)} of {len(plans)}"] for s in some]
    blocks = [
        Paragraphs([
            f"{len(study.alternatives)} plans within {study.slack:.0%} of the recommended plan's cost, each as different from the plans "
            f"before it as the search found (MGA: it minimises reuse of the sites the earlier plans open and train at, with a cost "
            f"cap and one no-good row per earlier plan). Each is an ordinary plan folder that passed the independent checker."
            + (f" {study.note}." if study.note else ""),
            f"Every good plan opens these {len(must)} sites (the must-haves): " + (", ".join(names.get(s, s) for s in must) or "none")
            + f". {len(some)} sites are interchangeable: some good plans open them and others do not.",
        ]),
        Table("alternatives", ["Plan", "Cost / yr", "Against the plan", "Sites open", "Sites different from the plan",
                               "Fewest sites different from any other"], rows, [False, True, True, True, True, True],
              caption="Near-optimal alternative plans against this plan"),
    ]
    if matrix:
        blocks.append(Table("interchangeable", ["Interchangeable site", *[p[0] for p in plans], "Open in"], matrix,
                            [False] + [False] * len(plans) + [True],
                            caption="Sites that change between the alternative plans", note="T training, I inference, M mixed, o open and idle, · closed"))
    blocks.append(Image("alternatives-map", "Map: sites every good plan opens, sites some open, and the rest", png=_png(
        alternatives_map_figure(layers, study))))
    return Section("alternatives", "Near-optimal alternatives", blocks)


def robustness_section(layers: PlanLayers, study: RobustnessStudy | None = None) -> Section | None:
    study = study or load_analysis(layers, RobustnessStudy)
    if study is None:
        return None
    solved = study.solved()
    names = study.names
    rates = study.flip_rates()
    q = study.regret_quantiles()
    never = sum(1 for s in solved if not s.flips)
    text = [
        f"{len(study.samples)} scenarios sampled (Latin hypercube, seed {study.seed}) by moving {len(study.groups)} groups of inputs "
        f"within the ranges their provenance records (each cell over its own recorded low to high, the spread of the markets "
        f"that publish it; a cell with none ±5 % if sourced or derived, ±25 % if rule-filled or assumed; unless ranges are "
        f"given), each solved through the batch engine from the recommended plan; {len(solved)} solved. In {never} of them the "
        f"least-cost plan opens the same sites in the same roles.",
        *robustness_lines(study, money_step_usd(layers.plan)),
    ]
    if q:
        text.append(f"Regret of the recommended plan (its cost in the sampled world minus the least cost found there): median "
                    f"{money(q['p50'])}, 90th percentile {money(q['p90'])}, worst {money(q['max'])} a year, against a plan of "
                    f"{money(study.plan_objective_usd_per_year)}.")
    blocks = [Paragraphs(text)]
    if study.labels:
        rows = [[x.name if x.kind == "site" else f"{study.job_names.get(x.id, x.id)} at {names.get(x.decision, x.decision)}",
                 x.decision if x.kind == "site" else "training placement", f"{x.holds} of {x.samples}", x.label]
                for x in sorted(study.labels, key=lambda x: (x.robust, x.holds, x.kind, x.name))]
        blocks.append(Table("robustness-labels", ["Decision", "Role", "Holds in", "Label"], rows, [False, False, True, False],
                            [not x.robust for x in sorted(study.labels, key=lambda x: (x.robust, x.holds, x.kind, x.name))],
                            note="'depends on': the input groups whose sampled factor best separates the worlds where the "
                                 "decision changes from those where it holds (Kolmogorov-Smirnov statistic; docs/why.md)."))
    if rates:
        blocks.append(Table("flips", ["Site", "Role in the plan", "Decision differs in"],
                            [[names.get(s, s), study.plan_roles.get(s, "closed"), f"{r:.0%} of samples"] for s, r in list(rates.items())[:15]],
                            [False, False, True], caption="Sites whose decision changes across the sampled inputs"))
    bars = study.tornado()
    if bars:
        ranges = {g.label: g.range_text() for g in study.groups}
        blocks.append(Image("tornado-chart", "Tornado: the fitted change of the least cost from each input group's low to high end",
                            png=_png(tornado_figure(study))))
        blocks.append(Table("tornado", ["Input group", "Range", "Least cost, low to high", "Regret, low to high"],
                            [[b.label, ranges.get(b.label, f"x{b.low:.2f} to x{b.high:.2f}"), money(b.cost_swing_usd_per_year),
                              money(b.regret_swing_usd_per_year)] for b in bars], [False, True, True, True], caption="How far each input group moves the least cost and the regret",
                            note="Swings fitted by least squares over the samples (each group's coefficient times its range)."))
    blocks.append(Paragraphs([f"Computed in {study.seconds:,.0f} s on {study.workers} worker(s) (`dcplace why robustness`). Only prices "
                              "move by default, so the recommended plan meets every limit of every sample; catalog cells are not "
                              "perturbed (overrides cannot address them). The robust plan is a min-max over candidate plans "
                              "(the recommended one and each sample's optimum), not the exact two-stage robust optimum."], "note"))
    return Section("robustness", "Robustness to assumptions", blocks)


# ----------------------------------------------------------------------------- figures


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=150)
    plt.close(fig)
    return buffer.getvalue()


def tornado_figure(study: RobustnessStudy):
    bars = study.tornado()[:12][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(bars) + 1.4))
    y = np.arange(len(bars))
    half = np.array([b.cost_swing_usd_per_year for b in bars]) / 2e6
    ax.barh(y, half, color="#c0504d", label="input at its high end")
    ax.barh(y, -half, color="#4f81bd", label="input at its low end")
    ax.set_yticks(y, [b.label for b in bars], fontsize=8)
    ax.axvline(0, color="#333333", linewidth=0.8)
    ax.set_xlabel("change of the least annual cost from the mean, $ M a year (fitted over the samples)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Which inputs matter most", fontsize=10)
    fig.tight_layout()
    return fig


def alternatives_map_figure(layers: PlanLayers, study: AlternativesStudy):
    to_map = Transformer.from_crs("EPSG:4326", WORLD, always_xy=True)
    fig, ax = plt.subplots(figsize=(11, 5.6))
    ax.set_axis_off()
    ax.set_aspect("equal")
    ax.set_facecolor(OCEAN_COLOUR)
    countries().to_crs(WORLD).plot(ax=ax, color=LAND_COLOUR, edgecolor=BORDER_COLOUR, linewidth=0.4, zorder=1)
    plans = [study.plan_roles] + [a.roles for a in study.alternatives]
    must, some = set(study.must_haves()), set(study.interchangeable())
    for kind, colour, label in (("never", "#b8bec4", "never open"), ("some", "#e3912d", "open in some good plans"),
                                ("must", "#1f4e79", "open in every good plan")):
        pts = [s for s in layers.plan.sites if (s.id in must if kind == "must" else s.id in some if kind == "some"
                                                else s.id not in must | some)]
        if not pts:
            continue
        x, yy = to_map.transform([s.lon for s in pts], [s.lat for s in pts])
        size = [20 + 60 * sum(s.id in p for p in plans) / len(plans) for s in pts] if kind == "some" else 40 if kind == "must" else 10
        ax.scatter(x, yy, s=size, color=colour, edgecolor="white", linewidth=0.5, zorder=3, label=label)
    ax.legend(loc="lower left", fontsize=8, frameon=True)
    ax.set_title(f"What the {len(plans)} good plans share (within {study.slack:.0%} of the recommended plan's cost); "
                 "orange size: how many open it", fontsize=10)
    fig.tight_layout()
    return fig


def save_why_figures(layers: PlanLayers) -> list[Path]:
    """tornado.png and alternatives-map.png beside their analyses, where those exist."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    written = []
    robust, alts = load_analysis(layers, RobustnessStudy), load_analysis(layers, AlternativesStudy)
    if robust is not None and robust.tornado():
        path = layers.folder / WHY_FOLDER / "robustness" / "tornado.png"
        write_file(path, _png(tornado_figure(robust)))
        written.append(path)
    if alts is not None:
        path = layers.folder / WHY_FOLDER / "alternatives" / "alternatives-map.png"
        write_file(path, _png(alternatives_map_figure(layers, alts)))
        written.append(path)
    return written


SECTIONS = (prices_section, worth_section, alternatives_section, robustness_section)
for _builder in SECTIONS:
    if _builder not in EXTRA_SECTIONS:
        EXTRA_SECTIONS.append(_builder)

__all__ = ["ANALYSES", "SECTIONS", "alternatives_map_figure", "alternatives_section", "load_analysis", "prices_section", "robustness_section", "save_report", "save_why_figures", "tornado_figure",
           "worth_section"]
