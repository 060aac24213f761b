"""The executive summary's content: the decision in sentences, built from the plan's numbers
(reports/economics.py, which states its rules); nothing is canned and nothing is re-solved.
The rules of the sentences' own figures:

* **The three assumptions that matter most**: the inputs behind the three largest cost
  categories of the plan (chips -> chip capex, colocation -> colocation price, energy -> power
  price, ...). Each line is proportional to its input, so +/-10 % on it moves the annual cost
  by 10 % of the line (this plan held fixed).
* **Provenance**: from provenance tables in the plan's inputs (`inputs/provenance.csv`,
  `inputs/catalog/provenance.csv`) if present; otherwise from the embedded default data's
  provenance for cells whose value in the plan's inputs equals the default's; otherwise
  "as given".
"""

from __future__ import annotations

import re
from pathlib import Path
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from dcplace.models.plan import Plan, SitePlan
from dcplace.models.provenance import Provenance
from dcplace.models.records import Scenario
from dcplace.optimizer.model.costs import crf
from dcplace.optimizer.model.latency import rtt_matrix_ms
from dcplace.reports.economics import (
    PROVEN_OPTIMAL_GAP, ClassEconomics, ClockFacts, TrainingCase, carbon_charge_usd, class_economics,
    clock_facts, filled_cost_shares, gap_usd, money_step_usd, opened_sites, site_tokens_share, small_site, training_case,
    variant_overrides,
)
from dcplace.reports.layers import PlanLayers
from dcplace.reports.style import money, mw_text, short_name, tok_s_text

SENSITIVITY = 0.10

# cost category -> (the input behind it, table, field)
CATEGORY_INPUTS = {
    "chips": ("chip prices (capex per GPU)", "chips", "capex_usd_per_gpu"),
    "colocation": ("colocation price (per kW of IT per month)", "sites", "colocation_usd_per_kw_month"),
    "energy": ("power price (per MWh)", "sites", "power_price_usd_per_mwh"),
    "site_fixed": ("fixed cost of an open site", "sites", "fixed_cost_usd_per_year"),
    "fabric": ("fabric cost per GPU", "fabrics", "cost_usd_per_gpu"),
    "cooling_capex": ("cooling capex per kW", "cooling", "capex_usd_per_kw"),
    "cooling_zones": ("fixed cost of a cooling zone", "cooling", "zone_fixed_usd_per_year"),
    "carbon": ("carbon price", "economics", "carbon_price_usd_per_t"),
    "transport": ("network transport price", "economics", "transport_usd_per_tok_s_1000km_year"),
}


# ----------------------------------------------------------------------------- provenance


def _short_reference(reference: str) -> str:
    text = re.split(r"[;(]", reference, maxsplit=1)[0].strip().rstrip(",")
    return text if len(text) <= 70 else text[:67].rstrip() + "..."


def provenance_text(prov: Provenance, keys: list[tuple[str, str, str]]) -> str:
    """'12 sourced, 17 by rule (EIA Electric Power Annual 2023; ...)' or 'as given'."""
    found = [prov.get(*k) for k in keys]
    known = [f for f in found if f]
    if not known:
        return "as given (no provenance recorded in the plan's inputs)"
    bases = Counter(basis for basis, _ in known)
    names = {"source": "sourced", "derived": "derived from sources", "rule": "by rule", "assumption": "assumed"}
    parts = [f"{n} {names.get(b, b)}" for b, n in bases.most_common()]
    if len(known) < len(keys):
        parts.append(f"{len(keys) - len(known)} as given")
    refs = Counter(_short_reference(ref) for _, ref in known)
    top = "; ".join(r for r, _ in refs.most_common(1))
    return f"{', '.join(parts)} ({top})"


def vintages(prov: Provenance, keys: list[tuple[str, str, str]]) -> str:
    years = sorted({int(y) for k in keys if (p := prov.get(*k)) for y in re.findall(r"\b(19[89]\d|20[0-4]\d)\b", p[1])})
    if not years:
        return ""
    return str(years[0]) if years[0] == years[-1] else f"{years[0]}–{years[-1]}"


@dataclass(frozen=True)
class Assumption:
    category: str
    label: str
    line_usd_per_year: float
    share: float
    value_text: str
    source_text: str

    @property
    def swing_usd_per_year(self) -> float:
        return SENSITIVITY * self.line_usd_per_year


def _range_text(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if abs(hi - lo) < 1e-9 else f"{fmt.format(lo)}–{fmt.format(hi)}"


def top_assumptions(plan: Plan, scenario: Scenario, prov: Provenance, n: int = 3) -> list[Assumption]:
    total = plan.objective_usd_per_year or 1.0
    open_sites = [s for s in plan.sites if s.open]
    inputs = {s.id: s for s in scenario.sites}
    chips_used = sorted({ln.chip for s in open_sites for ln in s.racks})
    fabrics_used = sorted({ln.fabric for s in open_sites for ln in s.racks if ln.fabric})
    cooling_used = sorted({ln.cooling for s in open_sites for ln in s.racks})
    catalog = {"chips": {c.id: c for c in scenario.catalog.chips}, "fabrics": {f.id: f for f in scenario.catalog.fabrics},
               "cooling": {c.id: c for c in scenario.catalog.cooling}}
    out = []
    for category, value in sorted(plan.cost_breakdown_usd_per_year.items(), key=lambda cv: -cv[1]):
        if value <= 0.5 or category not in CATEGORY_INPUTS:
            continue
        label, table, fld = CATEGORY_INPUTS[category]
        if table == "sites":
            ids = [s.id for s in open_sites]
            values = [float(getattr(inputs[i], fld)) for i in ids]
            unit = {"colocation_usd_per_kw_month": ("${:,.0f}", " per kW-month"), "power_price_usd_per_mwh": ("${:,.0f}", " per MWh"),
                    "fixed_cost_usd_per_year": ("${:,.0f}", " per year")}[fld]
            value_text = f"{_range_text(values, unit[0])}{unit[1]} at the {len(ids)} open sites"
            keys = [("sites", i, fld) for i in ids]
        elif table in catalog:
            ids = {"chips": chips_used, "fabrics": fabrics_used, "cooling": cooling_used}[table]
            recs = [catalog[table][i] for i in ids]
            values = [float(getattr(r, fld)) for r in recs]
            unit = {"capex_usd_per_gpu": " per GPU", "cost_usd_per_gpu": " per GPU", "capex_usd_per_kw": " per kW",
                    "zone_fixed_usd_per_year": " per zone-year"}[fld]
            value_text = f"{_range_text(values, '${:,.0f}')}{unit} for the {len(ids)} {table} used"
            keys = [(table, i, fld) for i in ids]
        else:
            v = getattr(scenario.economics, fld)
            value_text = f"{v:,.2f} (scenario economics)"
            keys = []
        source = provenance_text(prov, keys) if keys else "as given in the scenario"
        out.append(Assumption(category, label, value, value / total, value_text, source))
        if len(out) == n:
            break
    return out


def latency_reason(plan: Plan, scenario: Scenario, site: SitePlan) -> str:
    """Why a small inference site is kept: does any other open site reach its regions within budget?"""
    flows = [a for a in plan.assignments if a.site == site.id]
    if not flows:
        return ""
    if scenario.latency.backbone or scenario.backbone_edges:
        return ""
    rtt = rtt_matrix_ms(scenario)
    r_index = {r.id: i for i, r in enumerate(scenario.regions)}
    s_index = {s.id: i for i, s in enumerate(scenario.sites)}
    others = [s_index[s.id] for s in plan.sites if s.open and s.id != site.id]
    alone = sorted({a.region_name for a in flows
                    if not any(rtt[r_index[a.region], j] <= a.rtt_budget_ms + 1e-9 for j in others)})
    if alone:
        shown = ", ".join(alone[:3]) + (f" and {len(alone) - 3} more" if len(alone) > 3 else "")
        return f"the only open site within the latency budget of {shown}"
    return "another open site is within budget of its regions: a cost choice, worth re-checking"


# ----------------------------------------------------------------------------- sentences


@dataclass
class Summary:
    headline: list[tuple[str, str, str]]  # label, value, note (large type)
    training: list[str] = field(default_factory=list)
    inference: list[str] = field(default_factory=list)
    cost: list[str] = field(default_factory=list)
    classes: list[ClassEconomics] = field(default_factory=list)
    class_rule: str = ""
    assumptions: list[Assumption] = field(default_factory=list)
    assumption_rule: str = ""
    small_sites: list[str] = field(default_factory=list)
    training_case: TrainingCase | None = None
    clock: list[str] = field(default_factory=list)  # the clock's sentences (clock_sentences); empty without it
    recommendation: str = ""  # the decision in one sentence (issue 49)
    risks: list[str] = field(default_factory=list)  # the plan's own risks, from its numbers
    resilience: list[str] = field(default_factory=list)  # with an N-1 policy: classes protected, unprotected, training
    notional: str = ""  # the carbon price's notional charge, apart from real spend
    money_step_usd: float = 1e4  # what the solver's gap supports: page 1's rounding


def _per_h100(x: float) -> str:
    return f"${x:,.0f}"


def executive_summary(layers: PlanLayers, prov: Provenance | None = None) -> Summary:
    plan, scenario = layers.plan, layers.scenario
    k = plan.kpis
    prov = prov if prov is not None else layers.provenance
    names = {s.id: s.name for s in plan.sites}
    total = plan.objective_usd_per_year or 0.0
    step = money_step_usd(plan)
    carbon = carbon_charge_usd(plan) if scenario.economics.carbon_price_usd_per_t else 0.0
    gap = gap_usd(plan)
    bound = f"± {money_at(gap, step)} (solver gap); " if gap and plan.solve.gap and plan.solve.gap > PROVEN_OPTIMAL_GAP else ""
    summary = Summary(headline=[
        ("Annual cost", money_at(total, step),
         bound + (f"incl. {money_at(carbon, step)} notional carbon charge at ${scenario.economics.carbon_price_usd_per_t:,.0f}/t CO₂"
                  if carbon > 0 else "annualized capex plus operating cost, per year")),
        ("Upfront capex", money_at(k["upfront_capex_usd"], step), "chips, cooling and fabric, paid once"),
        ("Inference", f"${k['usd_per_m_tokens']:.3f} per M tokens", f"{k['demand_within_budget_share']:.1%} of demand within its latency budget"),
        ("Sites open", f"{int(k['sites_open'])} of {len(plan.sites)}", f"{mw_text(k['facility_mw'])} facility power"),
    ])

    # Training
    case = training_case(plan, scenario)
    summary.training_case = case
    if case is not None:
        med, here = case.median_site, case.site.id
        a, b = case.per_eff_h100_year[here], case.per_eff_h100_year[med]
        ta, tb = case.total(here), case.total(med)
        rank = case.eligible.index(here) + 1
        diff = (tb - ta) / tb if tb else 0.0
        job_total = sum(j.gpus_h100_equiv for j in plan.jobs)
        other = sorted({names[j.site] for j in plan.jobs if j.site != here})
        ia, ib = case.inputs[here], case.inputs[med]
        s1 = (f"Training goes to {case.site.name}: {len(case.jobs)} of {len(plan.jobs)} jobs, "
              f"{case.h100_equiv_gpus:,.0f} of {job_total:,.0f} H100-equivalent GPUs, mainly on {case.chip_name} with {case.fabric_name}"
              + (f"; the other jobs run at {', '.join(other)}." if other else "."))
        if med == here:
            s2 = (f"Delivered training costs {_per_h100(ta)} per effective H100-year there, the median of the {len(case.eligible)} "
                  f"eligible sites (rank {rank}); {case.site.name} wins on what it adds to the rest of the plan, not on unit cost.")
        else:
            s2 = (f"Delivered training costs {_per_h100(ta)} per effective H100-year there, against {_per_h100(tb)} at the median "
                  f"eligible site ({names.get(med, med)}): {abs(diff):.0%} {'less' if diff >= 0 else 'more'}; "
                  f"${ta / scenario.economics.hours_per_year:,.2f} against ${tb / scenario.economics.hours_per_year:,.2f} per effective "
                  "H100-hour (this rack alone over every hour of the year; Per-workload economics gives the fully loaded figure, over the "
                  "hours at the training load factor and with a share of fixed costs); "
                  f"rank {rank} of {len(case.eligible)} eligible sites (site fixed cost left out).")
        s3 = (f"The difference is the site: energy {_per_h100(a.get('energy', 0))} against {_per_h100(b.get('energy', 0))} "
              f"(${ia['price']:,.0f}/MWh at PUE {ia['pue']:.2f} against ${ib['price']:,.0f}/MWh at PUE {ib['pue']:.2f}), "
              f"colocation {_per_h100(a.get('colocation', 0))} against {_per_h100(b.get('colocation', 0))} "
              f"(${ia['colocation']:,.0f} against ${ib['colocation']:,.0f} per kW-month); chips "
              f"({_per_h100(a.get('chips', 0))}) and fabric ({_per_h100(a.get('fabric', 0))}) cost the same everywhere.")
        summary.training = [s1 + " " + s2, s3]
    elif plan.jobs:
        summary.training = [f"{len(plan.jobs)} training jobs are placed at " + ", ".join(sorted({names[j.site] for j in plan.jobs})) + "."]
    else:
        summary.training = ["The scenario has no training jobs."]
    robust = robustness_study(layers)
    if robust is not None and plan.jobs:
        summary.training.append(training_robustness(robust, case.site.id if case is not None else plan.jobs[0].site))

    # Inference
    shares = site_tokens_share(plan, scenario)
    if shares:
        top = sorted(shares.items(), key=lambda kv: -kv[1])[:3]
        countries = {next(s.country for s in plan.sites if s.id == sid) for sid in shares}
        summary.inference = [
            f"Inference runs at {len(shares)} sites in {len(countries)} countries, {tok_s_text(k['tokens_per_s_served_peak'])} at peak "
            f"({k['tokens_per_year'] / 1e12:,.1f} trillion tokens a year). The largest hubs are "
            + ", ".join(f"{names[s]} ({v:.0%})" for s, v in top)
            + f" of tokens, {sum(v for _, v in top):.0%} together; {k['demand_within_budget_share']:.1%} of peak demand is served "
            f"within its latency budget, mean round trip {k['mean_rtt_ms']:.1f} ms.",
        ]
    failover = plan.solve.failover or {}
    if failover.get("classes") and summary.inference:
        classes = {w.id: w.name for w in scenario.catalog.workloads}
        policy = ", ".join(f"{short_name(classes.get(w, w))} {a:.0%}" for w, a in sorted(failover["classes"].items()))
        others = sorted({short_name(classes.get(a.workload, a.workload)) for a in plan.assignments if a.workload not in failover["classes"]})
        summary.inference.append(
            ((f"The plan is N-1 secure for {policy} only, not for {', '.join(others)}: those shares of their demand are re-served "
              "within the failover budgets after the loss of any one of its " if others else
              f"The plan is N-1 secure: {policy} of demand is re-served within the failover budgets after the loss of any one of its ")
             + 
             f"{sum(1 for x in plan.sites if x.open)} open sites ({failover.get('scenarios_generated', 0)} losses built into the model; "
             "every loss re-routed after the solve, and again by `dcplace check`); 'What losing a site costs' has each loss."
             if failover.get("secure") else
             f"The plan is NOT N-1 secure for {policy}: {failover.get('stopped') or 'some single-site losses break it'}; "
             "'What losing a site costs' has each loss."))
    summary.clock = [" ".join(clock_sentences(clock_facts(plan, scenario)))] if clock_facts(plan, scenario) is not None else []
    summary.clock = [t for t in summary.clock if t]
    # Cost
    summary.cost = [
        f"The plan costs {money_at(total, step)} a year: {money_at(k['inference_cost_usd_per_year'], step)} inference, "
        f"{money_at(k['training_cost_usd_per_year'], step)} training and {money_at(k['shared_cost_usd_per_year'], step)} shared site "
        f"and cooling-zone fixed costs; it needs {money_at(k['upfront_capex_usd'], step)} of upfront capex.",
    ]
    summary.money_step_usd = step
    summary.notional = notional_sentence(plan, scenario, step)
    summary.recommendation = recommendation(layers, step)
    summary.risks = risks(layers, prov, step)
    summary.resilience = resilience_lines(layers)
    summary.classes = class_economics(plan, scenario)
    summary.class_rule = ("Rule: each inference rack's annual cost goes to the class it serves and transport to the class of its "
                          "flow; site and cooling-zone fixed costs are shared and left out, so the classes add up to the headline "
                          "$ per M tokens. " + ("Tokens a year = the hourly load of the represented day x the hours each "
                                                "hour stands for x 365 (the clock)." if plan.clock.get("on") and plan.hourly
                                                else "Tokens a year = peak tok/s x load factor x 8,760 h."))
    summary.assumptions = top_assumptions(plan, scenario, prov)
    summary.assumption_rule = ("Rule: the inputs behind the plan's three largest cost lines; each line is proportional to its "
                               f"input, so ±{SENSITIVITY:.0%} on the input moves the annual cost by {SENSITIVITY:.0%} of the line "
                               "(this plan held fixed).")
    summary.small_sites = [s.id for s in plan.sites if small_site(s)]
    return summary


def annuity_text(rate: float, years: float) -> str:
    return f"{crf(rate, years):.3f}"


def status_text(plan: Plan) -> str:
    """The plan's status as a strategist should read it: how far from the best possible plan
    it is proven to be, in % and in dollars a year (objective - the solver's best bound), not a
    bare "optimal" (which only means "within the asked gap")."""
    s = plan.solve
    objective, bound = s.objective_usd_per_year, s.best_bound_usd_per_year
    if objective is None:
        return s.status
    if plan.as_is:  # its bound is the bound of today's footprint, not of every plan (docs/as-is.md)
        return "as-is: the cost of today's footprint, held as it is (only its routing and job placements were chosen)"
    if bound is None or s.gap is None:
        return "a feasible plan; no bound was proven, so how much better a plan may exist is unknown"
    if s.gap <= PROVEN_OPTIMAL_GAP:
        return "proven optimal: no cheaper plan exists"
    return (f"within {s.gap:.2%} of the best possible plan (at most {money(max(objective - bound, 0.0))} a year better exists)"
            + ("" if s.status == "optimal" else "; stopped by the time limit"))


# ----------------------------------------------------------------------------- the clock (issue 15)


def _listed(names: list[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def clock_sentences(facts: ClockFacts | None) -> list[str]:
    """The executive summary's sentences on the clock: capacity against the coincident peak,
    rented spend, GPU-hours the troughs absorbed; each only when there is something to say."""
    if facts is None:
        return []
    out = []
    if facts.on and facts.peak_sum_tok_s > 0:
        day = "every hour of the UTC day" if facts.hours >= 24 else f"the UTC day in {facts.hours} represented blocks of hours"
        if facts.saved_gpus >= 0.5:
            out.append(f"Sized on the clock ({day}), each owned site covers the load of its busiest hour, not the sum of the "
                       f"daily peaks of the regions it serves: sizing for that sum would take about {facts.saved_gpus:,.0f} more "
                       f"GPUs and {mw_text(facts.saved_it_mw)} more IT, {facts.saved_it_mw / facts.inference_it_mw:.0%} on top of "
                       f"the {mw_text(facts.inference_it_mw)} of inference IT built (this plan's routing held fixed).")
        else:
            out.append(f"Sized on the clock ({day}), each owned site covers the load of its busiest hour; the regions each "
                       "site serves peak at the same hours, so the clock saves no capacity here.")
    if facts.rental_usd_per_year > 0.005:
        out.append(f"{money(facts.rental_usd_per_year)} a year rents GPU-hours in {len(facts.clouds)} cloud "
                   f"region{'s' if len(facts.clouds) != 1 else ''} ({_listed(facts.clouds)})"
                   + (f", serving {facts.rented_share:.0%} of peak demand" if facts.rented_tok_s > 0 else "")
                   + f"; at most {facts.rented_gpus_peak:,.0f} GPUs are rented at once.")
    if facts.trough_h100_gpu_hours_per_day > 0.05:
        out.append(f"The troughs absorb {facts.trough_h100_gpu_hours_per_day:,.0f} H100-equivalent GPU-hours of training a day "
                   f"({_listed(facts.trough_jobs)}) on inference GPUs the served load leaves idle, instead of racks of their own.")
    return out


def clock_terminal_lines(plan: Plan, scenario: Scenario | None = None) -> list[str]:
    """Plain lines for `dcplace solve` to print under the KPIs when the plan has the clock or
    rented capacity (none otherwise): the same figures as the report's summary. Names come
    from the inputs: print them as text (reports.terminal)."""
    return clock_sentences(clock_facts(plan, scenario))


# ----------------------------------------------------------------------------- the decision memo (issue 49)


def status_word(plan: Plan) -> str:
    """A few words for a footnote: 'proven optimal', 'proven within 0.48 %' (never a bare
    'optimal' for a plan proven only to within the asked gap), 'feasible, no bound'."""
    s = plan.solve
    if s.objective_usd_per_year is None:
        return s.status
    if s.gap is None or s.best_bound_usd_per_year is None:
        return "feasible, no bound proven"
    return "proven optimal" if s.gap <= PROVEN_OPTIMAL_GAP else f"proven within {s.gap:.2%}"


def _override_value(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_override_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_override_value(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer():
        return f"{value:.0f}"
    return str(value)


def overrides_label(overrides: dict) -> str:
    """'economics.carbon_price_usd_per_t=100; policies.survive_site_loss={chat: 1}' ('' for none)."""
    return "; ".join(f"{k}={_override_value(v)}" for k, v in overrides.items())


def variant_title(plan: Plan, name: str | None = None) -> str:
    """The scenario's name and, for a variant, its changed inputs: every title (report, maps)."""
    label = overrides_label(variant_overrides(plan))
    name = plan.scenario if name is None else name
    return f"{name} · {label}" if label else name


def money_at(usd: float, step_usd: float) -> str:
    """Money in $ M rounded to `step_usd` (money_step_usd): `$452 M` on a plan proven to ±$8.5 M."""
    step_m = step_usd / 1e6
    millions = round(usd / 1e6 / step_m) * step_m
    decimals = int(max(0, min(2, -np.floor(np.log10(step_m))))) if step_m < 1 else 0
    sign = "-" if round(millions, decimals) < 0 else ""
    return f"{sign}${abs(millions):,.{decimals}f} M"


def step_text(step_usd: float) -> str:
    return f"${step_usd / 1e6:,.0f} M" if step_usd >= 1e6 else f"${step_usd / 1e3:,.0f} k"


def notional_sentence(plan: Plan, scenario: Scenario, step: float) -> str:
    """'' without a carbon price; else the real spend and the notional charge, apart."""
    price = scenario.economics.carbon_price_usd_per_t
    carbon = carbon_charge_usd(plan)
    if not price or carbon <= 0:
        return ""
    total = plan.objective_usd_per_year or 0.0
    return (f"Carbon is priced at ${price:,.0f} per t CO₂ (economics.carbon_price_usd_per_t): the {money_at(total, step)} a year "
            f"that the plan minimizes includes {money_at(carbon, step)} of notional carbon charge "
            f"({plan.kpis.get('emissions_t_per_year', 0):,.0f} t CO₂ a year), which steers the choice but is not spent; "
            f"real spend is {money_at(total - carbon, step)} a year.")


def recommendation(layers: PlanLayers, step: float) -> str:
    """One sentence that decides: what to build, where, for how much, and what it delivers."""
    plan, scenario = layers.plan, layers.scenario
    k = plan.kpis
    open_sites = sorted(opened_sites(plan), key=lambda s: -s.it_kw)
    if not open_sites:
        return "Build nothing: the plan opens no site."
    mw = (k.get("it_mw_inference", 0.0) + k.get("it_mw_training", 0.0))
    gpus = int(k.get("gpus_inference", 0) + k.get("gpus_training", 0))
    named = [s.name for s in open_sites[:3]]
    rest = len(open_sites) - len(named)
    where = ", ".join(named) + (f" and {rest} more site{'s' if rest > 1 else ''}" if rest else "")
    total = plan.objective_usd_per_year or 0.0
    carbon = carbon_charge_usd(plan) if scenario.economics.carbon_price_usd_per_t else 0.0
    cost = (f"{money_at(total - carbon, step)} a year of real spend (plus {money_at(carbon, step)} notional carbon charge)"
            if carbon > 0 else f"{money_at(total, step)} a year")
    # an as-is plan decides nothing to build: it states what today's footprint costs (docs/as-is.md)
    verb, spend = ("Today's footprint, held as it is: ", "runs") if plan.as_is else ("", "Build")
    parts = [f"{verb}{spend} {mw_text(mw)} of IT ({gpus:,} GPUs) at {where} for {cost} and {money_at(k.get('upfront_capex_usd', 0.0), step)} "
             "upfront"]
    by_site: dict[str, float] = defaultdict(float)
    for j in plan.jobs:
        by_site[j.site] += j.gpus_h100_equiv
    names = {s.id: s.name for s in plan.sites}
    if by_site:
        main = max(by_site, key=by_site.get)
        parts.append(f"train at {names.get(main, main)} ({by_site[main] / sum(by_site.values()):.0%} of training GPUs)")
    if k.get("tokens_per_s_served_peak"):
        parts.append(f"serve {tok_s_text(k['tokens_per_s_served_peak'])} at peak at ${k['usd_per_m_tokens']:.3f} per M tokens, "
                     f"{k['demand_within_budget_share']:.0%} of demand within its latency budget")
    return ": ".join(parts[:1]) + ("; " + "; ".join(parts[1:]) if len(parts) > 1 else "") + "."


NEAR_LIMIT = 0.95  # a site above this share of its power limit or floor is "near its limit"


def _class_share_of_tokens(plan: Plan) -> dict[str, float]:
    served: dict[str, float] = defaultdict(float)
    for a in plan.assignments:
        served[a.workload] += a.served_tok_s
    total = sum(served.values()) or 1.0
    return {w: v / total for w, v in served.items()}


def risks(layers: PlanLayers, prov: Provenance, step: float) -> list[str]:
    """The plan's own risks, from its numbers: training concentration, the worst site loss, sites
    near a limit, cost resting on filled-in inputs, and what the solver proved."""
    plan, scenario = layers.plan, layers.scenario
    names = {s.id: s.name for s in plan.sites}
    out: list[str] = []
    table = layers.outages
    by_site: dict[str, float] = defaultdict(float)
    for j in plan.jobs:
        by_site[j.site] += j.gpus_h100_equiv
    if by_site:
        main = max(by_site, key=by_site.get)
        share = by_site[main] / sum(by_site.values())
        n_jobs = sum(1 for j in plan.jobs if j.site == main)
        loss = next((o for o in table.outages if o.site == main), None)
        stalls = (f"; losing it stalls {len(loss.jobs)} training job{'s' if len(loss.jobs) != 1 else ''} "
                  f"({loss.training_days_at_risk:,.0f} job-days)" if loss is not None and loss.jobs else "")
        out.append(f"Concentration: {share:.0%} of training (H100-equivalent GPUs; {n_jobs} of {len(plan.jobs)} jobs) is at "
                   f"{names.get(main, main)}{stalls}.")
    peak = table.served_tok_s
    if table.outages and peak > 0:
        biggest = max(table.outages, key=lambda o: o.lost_total_tok_s)
        worst = table.worst()
        text = f"Single-site loss: {biggest.name} carries {biggest.lost_total_tok_s / peak:.0%} of peak inference"
        if worst is not None and worst.at_risk_total_tok_s > 0:
            text += (f"; losing {'it' if worst.site == biggest.site else worst.name} leaves {tok_s_text(worst.at_risk_total_tok_s)} "
                     f"({worst.at_risk_total_tok_s / peak:.1%} of peak) unserved within the failover budgets, the worst single loss")
        else:
            text += "; every single-site loss is re-served within the failover budgets"
        out.append(text + ("" if scenario.policies.survive_site_loss else " (no N-1 policy is set: policies.survive_site_loss)") + ".")
    floors = {s.id: s.floor_racks for s in scenario.sites}
    near = []
    for s in opened_sites(plan):
        power = s.facility_kw / s.power_limit_kw if s.power_limit_kw else 0.0
        floor = s.racks_total / floors[s.id] if floors.get(s.id) else 0.0
        if max(power, floor) > NEAR_LIMIT:
            near.append(f"{s.name} at {power:.1%} of its power limit" if power >= floor else f"{s.name} at {floor:.1%} of its floor")
    if near:
        out.append(f"Near a limit (over {NEAR_LIMIT:.0%}): " + ", ".join(near) + "; a small change of load or input moves load elsewhere.")
    filled = [f for f in filled_cost_shares(plan, prov) if f[3] >= 0.01]
    if filled:
        out.append("Filled-in inputs: " + "; ".join(f"{label} at {n} of {m} open sites are filled by a rule or assumed "
                                                     f"({share:.0%} of cost)" for label, n, m, share in filled)
                   + " (Assumptions has the rules).")
    worth = worth_line(layers, step)
    if worth:
        out.append(worth)
    robust = robustness_study(layers)
    if robust is not None:
        out.append(" ".join(robustness_lines(robust, step)))
    gap = gap_usd(plan)
    if plan.as_is:
        out.append("As-is: today's sites and racks are held as they are; a plan free to choose costs less or the same "
                   "(`dcplace compare` this folder with one: docs/as-is.md).")
    elif gap is None:
        out.append("Solver: a feasible plan with no proven bound; how much cheaper a plan may exist is unknown.")
    elif plan.solve.gap is not None and plan.solve.gap > PROVEN_OPTIMAL_GAP:
        out.append(f"Solver: proven within {plan.solve.gap:.2%} of the best possible plan, ± {money_at(gap, step)} a year; "
                   f"money on this page is rounded to {step_text(step)}.")
    else:
        out.append("Solver: proven optimal (gap 0): no cheaper plan exists for these inputs.")
    return out


def worth_line(layers: PlanLayers, step: float) -> str:
    """With `dcplace why worth` run on this plan: which open sites are indispensable, which is
    worth most (what the plan costs without it), and how many are ties within the gaps."""
    from dcplace.optimizer.studies.explain import saved_analysis
    from dcplace.optimizer.studies.worth import WorthStudy

    if layers.folder is None:
        return ""
    doc = saved_analysis(layers.folder, "worth", "worth.json", layers.plan)
    if not doc:
        return ""
    items = WorthStudy.from_dict(doc).open_sites()
    if not items:
        return ""
    parts = []
    must = [w.name for w in items if w.indispensable]
    if must:
        parts.append(f"{', '.join(must)} {'is' if len(must) == 1 else 'are'} indispensable (no plan without {'it' if len(must) == 1 else 'each'})")
    valued = [w for w in items if w.worth_usd_per_year is not None and not w.indispensable]
    if valued:
        top = max(valued, key=lambda w: w.worth_usd_per_year)
        if top.worth_usd_per_year > 0 and not top.tie:
            parts.append(f"{top.name} is worth most: the plan without it costs {money_at(top.worth_usd_per_year, step)} a year more")
        ties = sum(w.tie for w in valued)
        if ties:
            parts.append(f"{ties} of {len(items)} open sites could be replaced at no proven cost (ties within the solver gaps)")
    return ("What each site is worth (`dcplace why worth`): " + "; ".join(parts) + ".") if parts else ""


def robustness_study(layers: PlanLayers):
    """This plan's saved `dcplace why robustness` study (optimizer.studies.robustness), or None."""
    from dcplace.optimizer.studies.explain import saved_analysis
    from dcplace.optimizer.studies.robustness import RobustnessStudy

    if layers.folder is None:
        return None
    doc = saved_analysis(layers.folder, "robustness", "robustness.json", layers.plan)
    return RobustnessStudy.from_dict(doc) if doc else None


def _inputs_text(label) -> str:
    return "; ".join(f"{g} (changes when {end})" for g, end in zip(label.inputs, label.ends)) or "the inputs"


def training_robustness(study, site: str) -> str:
    """Page 1: whether the main training site and the placements there hold over the sampled
    ranges of the inputs, and if not, which inputs decide it."""
    name = study.names.get(site, site)
    mine = [x for x in study.labels if x.kind == "job" and x.decision == site]
    site_label = study.label_of("site", site)
    shaky = [x for x in ([site_label] if site_label else []) + mine if not x.robust]
    n = site_label.samples if site_label else (mine[0].samples if mine else 0)
    if not n:
        return ""
    if not shaky:
        return (f"Training at {name} is robust: it holds in all {n} sampled worlds of the inputs' recorded ranges "
                f"(`dcplace why robustness`).")
    worst = min(shaky, key=lambda x: x.holds)
    return (f"Training at {name} is fill-dependent: over {n} sampled worlds of the inputs' recorded ranges "
            f"(`dcplace why robustness`), {'the site' if worst.kind == 'site' else study.job_names.get(worst.id, worst.id)} "
            f"holds in {worst.holds} of {worst.samples}; it depends on {_inputs_text(worst)}.")


def _money_or_unbounded(usd: float | None, step: float) -> str:
    return "unbounded (it breaks a limit in some sample)" if usd is None else money_at(usd, step)


def robustness_lines(study, step: float = 1e4) -> list[str]:
    """What the robustness study says, in sentences: how many decisions are robust, which are not
    and on what they depend, and the robust plan's premium and worst case (when chosen)."""
    sites = [x for x in study.labels if x.kind == "site"]
    jobs = [x for x in study.labels if x.kind == "job"]
    n = len(study.solved())
    share = "every" if study.robust_share >= 1 else f"at least {study.robust_share:.0%} of the"
    out = [f"Robustness (`dcplace why robustness`, {n} sampled worlds of the inputs' recorded ranges): "
           f"{sum(x.robust for x in sites)} of {len(sites)} open sites and {sum(x.robust for x in jobs)} of {len(jobs)} training "
           f"placements are robust (they hold in {share} sample)."]
    shaky = sorted((x for x in study.labels if not x.robust), key=lambda x: (x.holds, x.kind, x.name))
    if shaky:
        out.append("Fill-dependent: " + "; ".join(
            f"{x.name if x.kind == 'site' else study.job_names.get(x.id, x.id) + ' at ' + study.names.get(x.decision, x.decision)}"
            f" holds in {x.holds} of {x.samples}, depends on {_inputs_text(x)}" for x in shaky[:6])
            + (f"; and {len(shaky) - 6} more (labels.csv)" if len(shaky) > 6 else "") + ".")
    r = study.robust_plan
    if r:
        if r["chosen"] == "plan":
            out.append(f"Robust plan: the recommended plan itself has the least worst case among {len(r['candidates'])} candidates "
                       f"({_money_or_unbounded(r['worst_usd_per_year'], step)} a year).")
        else:
            out.append(f"Robust plan ({r['chosen']}'s decisions, least worst case among {len(r['candidates'])} candidates): "
                       f"{money_at(r['premium_usd_per_year'], step)} a year more than the recommended plan at the nominal inputs; "
                       f"worst case {_money_or_unbounded(r['worst_usd_per_year'], step)} against the recommended plan's "
                       + _money_or_unbounded(r['plan_worst_usd_per_year'], step)
                       + f"; its {r['quantile']:.0%} quantile {_money_or_unbounded(r['quantile_usd_per_year'], step)} against "
                       f"{_money_or_unbounded(r['plan_quantile_usd_per_year'], step)} (folder {Path(r['folder']).name}).")
    return out


def resilience_lines(layers: PlanLayers) -> list[str]:
    """With an N-1 policy (policies.survive_site_loss): every protected class, every class it
    leaves unprotected with its worst loss, and the training a loss stalls."""
    plan, scenario = layers.plan, layers.scenario
    policy = {w: a for w, a in (scenario.policies.survive_site_loss or {}).items() if a > 0}
    if not policy:
        return []
    table = layers.outages
    peak = table.served_tok_s or 1.0
    shares = _class_share_of_tokens(plan)
    names = {w.id: short_name(w.name) for w in scenario.catalog.workloads}
    protected, broken = [], []
    for w, a in sorted(policy.items()):
        worst = max(table.outages, key=lambda o: o.at_risk_tok_s.get(w, 0.0), default=None)
        keeps = all(o.at_risk_tok_s.get(w, 0.0) <= (1 - a) * o.lost_tok_s.get(w, 0.0) + 1.0 for o in table.outages)
        (protected if keeps else broken).append((w, a, worst))
    out = []
    if protected:
        out.append("Protected against the loss of any one open site: " + ", ".join(
            f"{names.get(w, w)} ({a:.0%} of its demand, {shares.get(w, 0.0):.0%} of tokens)" for w, a, _ in protected) + ".")
    for w, a, worst in broken:
        out.append(f"The policy asks {names.get(w, w)} to survive ({a:.0%}) but losing {worst.name} leaves "
                   f"{tok_s_text(worst.at_risk_tok_s.get(w, 0.0))} of it unserved.")
    served = [w for w in shares if shares[w] > 0 and w not in policy]
    for w in sorted(served, key=lambda w: -shares[w]):
        worst = max(table.outages, key=lambda o: o.at_risk_tok_s.get(w, 0.0), default=None)
        lost = worst.at_risk_tok_s.get(w, 0.0) if worst is not None else 0.0
        out.append(f"NOT protected: {names.get(w, w)} ({shares[w]:.0%} of tokens)" + (
            f": losing {worst.name} leaves {tok_s_text(lost)} ({lost / peak:.1%} of peak) unserved." if lost > 1.0 else
            ": no single-site loss leaves it short today, but the policy does not hold it."))
    stall = max(table.outages, key=lambda o: (o.training_days_at_risk, len(o.jobs)), default=None)
    if stall is not None and stall.jobs:
        out.append(f"Training is not covered by the policy: losing {stall.name} stalls {len(stall.jobs)} job"
                   f"{'s' if len(stall.jobs) != 1 else ''} ({stall.training_days_at_risk:,.0f} job-days at risk).")
    return out
