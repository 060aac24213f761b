"""The executive summary's content: the decision in sentences, computed from the plan.

Every figure here comes from the plan record and the plan's own copy of its inputs
(`PlanLayers.scenario`, read from inputs/); nothing is canned and nothing is re-solved.
The rules, stated once (the report repeats them where it uses them):

* **Training, and why**: the main training site is the one holding the most H100-equivalent
  job GPUs. Its delivered cost per effective H100-year is the annual cost of one rack of the
  configuration it trains on (chips, cooling capex, energy at the site's price and PUE,
  colocation, fabric, carbon) divided by the rack's effective GPUs (physical GPUs x chip
  H100-equivalence x fabric efficiency). The same rack is priced at every eligible
  candidate site (countries allowed for those jobs, the cooling allowed, enough power and
  floor, not forbidden); the site's fixed cost is left out. The comparison is against the
  median eligible site (a real site: the lower middle one).
* **Cost per million tokens by class**: each inference rack line's whole annual cost goes to
  the class it serves; transport goes to the class of the flow; site and cooling-zone fixed
  costs are shared and left out (as in the plan's headline $/M tokens, so the classes add up
  to it). Tokens per year = peak tok/s served x the class's load factor x hours x 3600.
* **The three assumptions that matter most**: the inputs behind the three largest cost
  categories of the plan (chips -> chip capex, colocation -> colocation price, energy -> power
  price, ...). Each line is proportional to its input, so +/-10 % on it moves the annual cost
  by 10 % of the line (this plan held fixed).
* **Provenance**: from provenance tables in the plan's inputs (`inputs/provenance.csv`,
  `inputs/catalog/provenance.csv`) if present; otherwise from the embedded default data's
  provenance for cells whose value in the plan's inputs equals the default's; otherwise
  "as given".
* **Small site**: fixed costs (site fixed cost plus cooling-zone fixed costs) are half or
  more of the site's annual cost.
"""

from __future__ import annotations

import re
from pathlib import Path
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from statistics import median_low

import numpy as np

from dcplace.models.plan import Plan, SitePlan
from dcplace.models.records import Scenario
from dcplace.optimizer.model.clock import standard_offset_h
from dcplace.optimizer.model.costs import crf, rack_economics
from dcplace.optimizer.model.latency import distance_matrix_km, rtt_matrix_ms
from dcplace.reports.layers import PlanLayers
from dcplace.models.provenance import Provenance
from dcplace.reports.style import money, mw_text, short_name, tok_s_text

SECONDS_PER_HOUR = 3600.0
SMALL_SITE_FIXED_SHARE = 0.5
SENSITIVITY = 0.10
IMPUTED_BASES = ("rule", "assumption")

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


# ----------------------------------------------------------------------------- figures


def class_tokens_per_year(plan: Plan, scenario: Scenario) -> dict[str, float]:
    """Tokens a year by class: peak tok/s x load factor x hours; with the clock on, the hourly
    load of every owned site and cloud region x the hours each represented hour stands for."""
    hours = scenario.economics.hours_per_year
    out: dict[str, float] = defaultdict(float)
    if plan.clock.get("on") and plan.hourly:
        for ln in plan.hourly:
            out[ln.workload] += ln.load_tok_s * ln.weight_h * hours / 24 * SECONDS_PER_HOUR
        return dict(out)
    lf = {w.id: w.load_factor for w in scenario.catalog.workloads}
    for a in plan.assignments:
        out[a.workload] += a.served_tok_s * lf[a.workload] * hours * SECONDS_PER_HOUR
    return dict(out)


def busy_energy_by_use(plan: Plan) -> dict[str, float]:
    """With the clock on, a site's energy line holds, beyond its racks' own (idle) energy, the
    energy of GPUs busy serving or lent to training. That remainder is split over the classes
    and training in proportion to their busy GPU-hours at the site (plan.hourly: serving GPUs
    by class, lent GPUs to "training"). Empty with the clock off."""
    if not plan.clock.get("on") or not plan.hourly:
        return {}
    busy: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ln in plan.hourly:
        if ln.kind == "owned":
            busy[ln.place][ln.workload] += ln.serving_gpus * ln.weight_h
            busy[ln.place]["training"] += ln.lent_gpus * ln.weight_h
    out: dict[str, float] = defaultdict(float)
    for s in plan.sites:
        if not s.open:
            continue
        rest = s.cost_usd_per_year.get("energy", 0.0) - sum(ln.cost_usd_per_year.get("energy", 0.0) for ln in s.racks)
        hours = busy.get(s.id, {})
        total = sum(hours.values())
        if abs(rest) < 0.005 or total <= 0:
            continue
        for use, h in hours.items():
            out[use] += rest * h / total
    return dict(out)


def rental_by_use(plan: Plan) -> dict[str, float]:
    """Rented GPU-hours' cost a year by class (on demand and reserved) and "training" (jobs on rented GPUs)."""
    out: dict[str, float] = defaultdict(float)
    for ln in plan.rentals:
        out["training" if ln.kind == "training" else (ln.workload or "training")] += ln.usd_per_year
    return dict(out)


def transport_by_class(plan: Plan, scenario: Scenario) -> dict[str, float]:
    """Transport cost of each class's flows (distance rate x served tok/s, plus pair costs)."""
    eco = scenario.economics
    pair = {(p.region, p.workload, p.site): p.usd_per_year for p in scenario.pair_costs}
    out: dict[str, float] = defaultdict(float)
    if not eco.transport_usd_per_tok_s_1000km_year and not pair:
        return {}
    km = distance_matrix_km(scenario)
    r_index = {r.id: i for i, r in enumerate(scenario.regions)}
    s_index = {s.id: i for i, s in enumerate(scenario.sites)}
    for a in plan.assignments:
        d = float(km[r_index[a.region], s_index[a.site]])
        out[a.workload] += a.served_tok_s * d / 1000 * eco.transport_usd_per_tok_s_1000km_year
        out[a.workload] += a.share * pair.get((a.region, a.workload, a.site), 0.0)
    return dict(out)


@dataclass(frozen=True)
class ClassEconomics:
    workload: str
    name: str
    peak_tok_s: float
    racks: int
    gpus_by_chip: dict[str, int]
    it_mw: float
    cost_usd_per_year: float
    tokens_per_year: float
    rtt_p50: float
    rtt_p95: float
    rtt_max: float
    budget_min: float
    budget_max: float
    within_budget_share: float

    @property
    def usd_per_m_tokens(self) -> float:
        return self.cost_usd_per_year / (self.tokens_per_year / 1e6) if self.tokens_per_year else 0.0


def _weighted_quantile(values: list[float], weights: list[float], q: float) -> float:
    if not values:
        return float("nan")
    order = np.argsort(values)
    v, w = np.asarray(values)[order], np.asarray(weights, dtype=float)[order]
    if w.sum() <= 0:
        return float(np.quantile(v, q))
    cum = np.cumsum(w) / w.sum()
    return float(v[min(int(np.searchsorted(cum, q - 1e-12)), len(v) - 1)])


def class_economics(plan: Plan, scenario: Scenario) -> list[ClassEconomics]:
    tokens = class_tokens_per_year(plan, scenario)
    transport = transport_by_class(plan, scenario)
    busy, rented = busy_energy_by_use(plan), rental_by_use(plan)  # both empty with the clock off and no cloud
    out = []
    for w in scenario.catalog.workloads:
        lines = [ln for s in plan.sites for ln in s.racks if ln.purpose == "inference" and ln.workload == w.id]
        gpus: dict[str, int] = defaultdict(int)
        for ln in lines:
            gpus[ln.chip] += ln.gpus
        flows = [a for a in [*plan.assignments, *plan.rent_assignments] if a.workload == w.id]
        rtts, weights = [a.rtt_ms for a in flows], [a.served_tok_s for a in flows]
        peak = sum(weights)
        within = sum(a.served_tok_s for a in flows if a.rtt_ms <= a.rtt_budget_ms + 1e-9)
        budgets = [a.rtt_budget_ms for a in flows] or [float("nan")]
        out.append(ClassEconomics(
            workload=w.id, name=w.name, peak_tok_s=peak, racks=sum(ln.racks for ln in lines), gpus_by_chip=dict(gpus),
            it_mw=sum(ln.it_kw for ln in lines) / 1000,
            cost_usd_per_year=sum(sum(ln.cost_usd_per_year.values()) for ln in lines) + transport.get(w.id, 0.0)
            + busy.get(w.id, 0.0) + rented.get(w.id, 0.0),
            tokens_per_year=tokens.get(w.id, 0.0), rtt_p50=_weighted_quantile(rtts, weights, 0.5),
            rtt_p95=_weighted_quantile(rtts, weights, 0.95), rtt_max=max(rtts, default=float("nan")),
            budget_min=min(budgets), budget_max=max(budgets), within_budget_share=within / peak if peak else 1.0,
        ))
    return out


FULL_COST_RULE = ("Fully loaded: each open site's fixed cost is split over what its racks do (each inference class, training) "
                  "in proportion to their IT kW, and each cooling zone's fixed cost over the racks in that zone the same way; "
                  "so the classes and training add up to the plan's annual cost.")
TRAINING_HOUR_RULE = ("Effective H100-hours a year = installed training GPUs x chip H100-equivalence x fabric training efficiency "
                      "x 8,760 h x the training load factor.")


@dataclass(frozen=True)
class WorkloadCost:
    """One use of the plan (an inference class or "training"): its own cost lines (direct) and
    its share of site and cooling-zone fixed costs (shared), by FULL_COST_RULE."""

    use: str
    name: str
    direct_usd_per_year: float
    shared_usd_per_year: float
    units_per_year: float  # tokens a year (inference) or effective H100-hours a year (training)

    @property
    def total_usd_per_year(self) -> float:
        return self.direct_usd_per_year + self.shared_usd_per_year

    @property
    def usd_per_unit(self) -> float:
        """USD per M tokens (inference) or per effective H100-hour (training), fully loaded."""
        if not self.units_per_year:
            return 0.0
        return self.total_usd_per_year / (self.units_per_year / 1e6 if self.use != "training" else self.units_per_year)


def workload_costs(plan: Plan, scenario: Scenario) -> list[WorkloadCost]:
    """Every cost line of the plan allocated to the inference classes and training (FULL_COST_RULE);
    the totals add up to plan.objective_usd_per_year (an open site with no racks, if any, is listed as
    use "idle")."""
    classes = {c.workload: c for c in class_economics(plan, scenario)}
    chips = {c.id: c for c in scenario.catalog.chips}
    fabrics = {f.id: f for f in scenario.catalog.fabrics}
    zone_fixed = {c.id: c.zone_fixed_usd_per_year for c in scenario.catalog.cooling}
    direct: dict[str, float] = defaultdict(float)
    shared: dict[str, float] = defaultdict(float)
    for w, c in classes.items():
        direct[w] = c.cost_usd_per_year  # racks serving the class and transport of its flows
    # With the clock on: the energy of GPUs lent to interruptible jobs, and jobs on rented GPUs.
    for use, v in ((u, busy_energy_by_use(plan).get(u, 0.0) + rental_by_use(plan).get(u, 0.0)) for u in ("training",)):
        if v:
            direct[use] += v
    for s in plan.sites:
        if not s.open:
            continue
        kw: dict[str, float] = defaultdict(float)
        zone_kw: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for ln in s.racks:
            use = ln.workload if ln.purpose == "inference" else "training"
            kw[use] += ln.it_kw
            zone_kw[ln.cooling][use] += ln.it_kw
            if use == "training":
                direct[use] += sum(ln.cost_usd_per_year.values())
        fixed = s.cost_usd_per_year.get("site_fixed", 0.0)
        zones = s.cost_usd_per_year.get("cooling_zones", 0.0)
        total_kw = sum(kw.values())
        if total_kw <= 0:
            shared["idle"] += fixed + zones
            continue
        for use, v in kw.items():
            shared[use] += fixed * v / total_kw
        priced = {c: zone_fixed.get(c, 0.0) for c in s.zones}
        scale = zones / sum(priced.values()) if sum(priced.values()) > 0 else 0.0
        for c, per_use in zone_kw.items():
            zkw = sum(per_use.values())
            for use, v in per_use.items():
                shared[use] += priced.get(c, 0.0) * scale * v / zkw
        unzoned = zones - sum(priced.get(c, 0.0) * scale for c in zone_kw)  # a built zone with no racks
        for use, v in kw.items():
            shared[use] += unzoned * v / total_kw
    h100_hours = sum(ln.gpus * chips[ln.chip].h100_equiv * fabrics[ln.fabric].training_efficiency
                     for s in plan.sites for ln in s.racks if ln.purpose == "training" and ln.fabric)
    h100_hours *= scenario.economics.hours_per_year * scenario.economics.training_load_factor
    h100_hours += plan.kpis.get("trough_h100_gpu_hours_per_day", 0.0) * scenario.economics.hours_per_year / 24  # troughs (the clock)
    h100_hours += sum(ln.gpu_hours_per_year * chips[ln.chip].h100_equiv for ln in plan.rentals if ln.kind == "training" and ln.chip in chips)
    out = [WorkloadCost(w, c.name, direct[w], shared[w], c.tokens_per_year) for w, c in classes.items()]
    if direct.get("training") or shared.get("training"):
        out.append(WorkloadCost("training", "Training", direct["training"], shared["training"], h100_hours))
    if shared.get("idle"):
        out.append(WorkloadCost("idle", "Open sites with no racks", 0.0, shared["idle"], 0.0))
    return out


@dataclass(frozen=True)
class TrainingCase:
    site: SitePlan
    jobs: list[str]
    h100_equiv_gpus: float
    config: str
    chip_name: str
    fabric_name: str
    cooling: str
    per_eff_h100_year: dict[str, dict[str, float]]  # site id -> category -> USD per effective H100-year
    eligible: list[str]  # site ids, cheapest first
    median_site: str
    inputs: dict[str, dict[str, float]]  # site id -> price, pue, colocation

    def total(self, site_id: str) -> float:
        return sum(self.per_eff_h100_year[site_id].values())


def training_case(plan: Plan, scenario: Scenario) -> TrainingCase | None:
    if not plan.jobs:
        return None
    by_site: dict[str, float] = defaultdict(float)
    for j in plan.jobs:
        by_site[j.site] += j.gpus_h100_equiv
    main_id = max(by_site, key=lambda s: (by_site[s], s))
    main = next(s for s in plan.sites if s.id == main_id)
    chips = {c.id: c for c in scenario.catalog.chips}
    fabrics = {f.id: f for f in scenario.catalog.fabrics}
    coolings = {c.id: c for c in scenario.catalog.cooling}
    configs = {k.id: k for k in scenario.catalog.rack_configs}
    lines = [ln for ln in main.racks if ln.purpose == "training" and ln.fabric]
    if not lines:
        return None
    line = max(lines, key=lambda ln: ln.gpus * chips[ln.chip].h100_equiv * fabrics[ln.fabric].training_efficiency)
    rack, chip, fabric = configs[line.config], chips[line.chip], fabrics[line.fabric]
    jobs_here = [j for j in plan.jobs if j.site == main_id]
    job_records = {j.id: j for j in scenario.jobs}
    training_racks = sum(ln.racks for ln in main.racks if ln.purpose == "training")
    training_it_kw = sum(ln.it_kw for ln in main.racks if ln.purpose == "training")
    eff_per_rack = rack.gpus_per_rack * chip.h100_equiv * fabric.training_efficiency
    per: dict[str, dict[str, float]] = {}
    inputs: dict[str, dict[str, float]] = {}
    for s in scenario.sites:
        if s.id in scenario.policies.forbidden_sites:
            continue
        if any(job_records[j.job].allowed_countries and s.country not in job_records[j.job].allowed_countries for j in jobs_here):
            continue
        usable = [coolings[c] for c in s.cooling_allowed if c in coolings and coolings[c].max_kw_per_rack >= rack.kw_per_rack]
        if not usable or s.floor_racks < training_racks:
            continue
        best = None
        for cool in usable:
            if s.power_limit_kw < training_it_kw * s.pue(cool) - 1e-6:
                continue
            econ = rack_economics(s, rack, chip, cool, scenario.economics.training_load_factor, scenario.economics, fabric)
            if best is None or econ.total_usd_per_year < best[1].total_usd_per_year:
                best = (cool, econ)
        if best is None:
            continue
        cool, econ = best
        per[s.id] = {c: v / eff_per_rack for c, v in econ.cost_usd_per_year.items()}
        inputs[s.id] = {"price": s.power_price_usd_per_mwh, "pue": s.pue(cool), "colocation": s.colocation_usd_per_kw_month}
    if main_id not in per:
        return None
    eligible = sorted(per, key=lambda k: (sum(per[k].values()), k))
    median_site = median_low([(sum(per[k].values()), k) for k in eligible])[1]
    return TrainingCase(main, [j.name for j in jobs_here], by_site[main_id], line.config, chip.name, fabric.name, line.cooling,
                        per, eligible, median_site, inputs)


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


def small_site(site: SitePlan) -> bool:
    fixed = site.cost_usd_per_year.get("site_fixed", 0.0) + site.cost_usd_per_year.get("cooling_zones", 0.0)
    return site.open and site.total_cost_usd_per_year > 0 and fixed >= SMALL_SITE_FIXED_SHARE * site.total_cost_usd_per_year


def site_tokens_share(plan: Plan, scenario: Scenario) -> dict[str, float]:
    """Each owned site's share of the tokens the owned sites serve in a year (with the clock on:
    from the hourly load; otherwise peak tok/s x load factor)."""
    per: dict[str, float] = defaultdict(float)
    if plan.clock.get("on") and plan.hourly:
        for ln in plan.hourly:
            if ln.kind == "owned":
                per[ln.place] += ln.load_tok_s * ln.weight_h
        total = sum(per.values())
        return {s: v / total for s, v in per.items()} if total else {}
    lf = {w.id: w.load_factor for w in scenario.catalog.workloads}
    for a in plan.assignments:
        per[a.site] += a.served_tok_s * lf[a.workload]
    total = sum(per.values())
    return {s: v / total for s, v in per.items()} if total else {}


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


PROVEN_OPTIMAL_GAP = 1e-6  # below this relative gap the plan is stated as proven optimal


def status_text(plan: Plan) -> str:
    """The plan's status as a strategist should read it: how far from the best possible plan
    it is proven to be, in % and in dollars a year (objective - the solver's best bound), not a
    bare "optimal" (which only means "within the asked gap")."""
    s = plan.solve
    objective, bound = s.objective_usd_per_year, s.best_bound_usd_per_year
    if objective is None:
        return s.status
    if bound is None or s.gap is None:
        return "a feasible plan; no bound was proven, so how much better a plan may exist is unknown"
    if s.gap <= PROVEN_OPTIMAL_GAP:
        return "proven optimal: no cheaper plan exists"
    return (f"within {s.gap:.2%} of the best possible plan (at most {money(max(objective - bound, 0.0))} a year better exists)"
            + ("" if s.status == "optimal" else "; stopped by the time limit"))


# ----------------------------------------------------------------------------- the clock (issue 15)


HOURS = 24


@dataclass(frozen=True)
class ClockFacts:
    """What the clock did in a plan (docs/reports.md, "The day"); every figure from plan.json.

    * peak_sum_tok_s: the owned sites' load if every region they serve peaked at once (the sum
      of the served daily peaks, plan.assignments), what sizing without the clock would cover;
    * coincident_tok_s: the owned sites' load at each site's and class's busiest represented
      hour, summed (kpis owned_coincident_peak_tok_s), what the clock sizes for;
    * saved_it_mw: the difference in IT MW at each site's own kW per tok/s of inference
      capacity, and saved_gpus the same in GPUs (this plan's routing held fixed: an estimate, not
      a second solve). GPUs and MW add up across classes; tok/s do not weigh them alike (a GPU
      serves many more tok/s of a light class than of a reasoning one), so the sentences say
      what is saved in GPUs and MW."""

    on: bool
    hours: int
    peak_sum_tok_s: float
    coincident_tok_s: float
    capacity_tok_s: float
    saved_it_mw: float
    saved_gpus: float
    saved_share_by_class: dict[str, float]  # class name -> 1 - its busiest-hour tok/s over its peak-sum tok/s
    inference_it_mw: float
    inference_gpus: float
    rental_usd_per_year: float
    rented_gpus_peak: float
    rented_tok_s: float  # demand served from cloud regions, at its daily peaks
    served_tok_s: float  # all demand served, at its daily peaks (owned + rented)
    clouds: list[str]  # cloud region names with rented GPUs, by rented $ a year, largest first
    trough_h100_gpu_hours_per_day: float
    trough_jobs: list[str]
    trough_sites: list[str]

    @property
    def saved_share(self) -> float:
        return 1 - self.coincident_tok_s / self.peak_sum_tok_s if self.peak_sum_tok_s > 0 else 0.0

    @property
    def rented_share(self) -> float:
        return self.rented_tok_s / self.served_tok_s if self.served_tok_s > 0 else 0.0


def clock_facts(plan: Plan, scenario: Scenario | None = None) -> ClockFacts | None:
    """None when the plan has neither the clock nor rented capacity (every report looks as before).
    Without the scenario, cloud regions and jobs are named by their ids."""
    if not plan.clock or (not plan.clock.get("on") and not plan.rentals and not plan.rent_assignments):
        return None
    k = plan.kpis
    peak_sum: dict[tuple[str, str], float] = defaultdict(float)
    for a in plan.assignments:
        peak_sum[a.site, a.workload] += a.served_tok_s
    busiest: dict[tuple[str, str], float] = defaultdict(float)
    capacity: dict[tuple[str, str], float] = {}
    for ln in plan.hourly:
        if ln.kind == "owned":
            busiest[ln.place, ln.workload] = max(busiest[ln.place, ln.workload], ln.load_tok_s)
            capacity[ln.place, ln.workload] = ln.capacity_tok_s
    kw: dict[tuple[str, str], float] = defaultdict(float)
    gpus: dict[tuple[str, str], float] = defaultdict(float)
    for s in plan.sites:
        for ln in s.racks:
            if ln.purpose == "inference":
                kw[s.id, ln.workload] += ln.it_kw
                gpus[s.id, ln.workload] += ln.gpus
    extra = {key: max(peak_sum.get(key, 0.0) - busiest[key], 0.0) / capacity[key] for key in busiest if capacity.get(key, 0.0) > 0}
    saved_kw = sum(v * kw[key] for key, v in extra.items())
    class_names = {w.id: w.name for w in scenario.catalog.workloads} if scenario is not None else {}
    by_class = {}
    for w in dict.fromkeys([*class_names, *sorted({key[1] for key in busiest})]):
        total = sum(v for key, v in peak_sum.items() if key[1] == w and key in busiest)
        if total > 0:
            by_class[class_names.get(w, w)] = 1 - sum(v for key, v in busiest.items() if key[1] == w) / total
    saved_gpus = sum(v * gpus[key] for key, v in extra.items())
    clouds = {q.id: q.name for q in scenario.cloud_regions} if scenario is not None else {}
    spend: dict[str, float] = defaultdict(float)
    for ln in plan.rentals:
        spend[ln.cloud] += ln.usd_per_year
    names = {s.id: s.name for s in plan.sites}
    job_names = {j.id: j.name for j in scenario.jobs} if scenario is not None else {}
    rented = sum(a.served_tok_s for a in plan.rent_assignments)
    on = bool(plan.clock.get("on"))
    return ClockFacts(
        on=on, hours=int(plan.clock.get("hours", 0) or 0),
        peak_sum_tok_s=sum(peak_sum.values()) if on else 0.0,
        coincident_tok_s=k.get("owned_coincident_peak_tok_s", sum(busiest.values())),
        capacity_tok_s=k.get("owned_capacity_tok_s", sum(capacity.values())),
        saved_it_mw=saved_kw / 1000, saved_gpus=saved_gpus, saved_share_by_class=by_class if on else {},
        inference_it_mw=sum(kw.values()) / 1000,
        inference_gpus=sum(gpus.values()),
        rental_usd_per_year=k.get("rental_usd_per_year", sum(spend.values())),
        rented_gpus_peak=k.get("rented_gpus_peak", 0.0),
        rented_tok_s=rented, served_tok_s=sum(a.served_tok_s for a in plan.assignments) + rented,
        clouds=[clouds.get(q, q) for q, v in sorted(spend.items(), key=lambda kv: (-kv[1], kv[0])) if v > 0.005],
        trough_h100_gpu_hours_per_day=k.get("trough_h100_gpu_hours_per_day", 0.0),
        trough_jobs=sorted({job_names.get(b.job, b.job) for b in plan.backfill if b.gpus > 1e-9}),
        trough_sites=sorted({names.get(b.site, b.site) for b in plan.backfill if b.gpus > 1e-9}),
    )


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
    from the inputs: print them as text (cli._text)."""
    return clock_sentences(clock_facts(plan, scenario))


@dataclass(frozen=True)
class PlaceDay:
    """One owned site or cloud region over the 24 UTC hours (a represented hour's values
    repeated over the hours of its block), all classes together.

    Use is counted in GPUs, which add up across classes (tok/s do not: a GPU serves many
    more tok/s of a light class than of a reasoning one): an owned site's GPUs busy serving
    over its inference GPUs installed; a cloud region's GPUs rented over the most it rents at
    once. The busiest hour is the hour with the most GPUs busy serving (or rented)."""

    id: str
    name: str
    kind: str  # owned | rented
    lon: float
    load_tok_s: np.ndarray  # 24 values
    capacity_tok_s: np.ndarray
    serving_gpus: np.ndarray  # owned: GPUs busy serving; rented: GPUs rented
    lent_gpus: np.ndarray
    installed_gpus: float  # owned: inference GPUs installed; rented: 0
    utc_offset_h: float = 0.0  # standard time of the place's time zone, as the model reads regions' (optimizer.model.clock)

    @property
    def gpus(self) -> float:
        """What the use is counted against: inference GPUs installed, or the most GPUs rented at once."""
        return self.installed_gpus if self.kind == "owned" else float(self.serving_gpus.max())

    @property
    def peak_hour(self) -> int:
        return int(np.argmax(self.serving_gpus))

    @property
    def peak_tok_s(self) -> float:
        return float(self.load_tok_s.max())

    def local_time(self, utc: int) -> str:
        """The place's standard local time at UTC hour `utc`, as HH:MM (India is UTC+5:30)."""
        minutes = round((utc + self.utc_offset_h) * 60) % (HOURS * 60)
        return f"{minutes // 60:02d}:{minutes % 60:02d}"

    def use(self, first: int, last: int) -> float | None:
        """Mean GPUs busy serving (rented) over `gpus` in UTC hours first..last-1 (None with no GPUs)."""
        if self.gpus <= 0:
            return None
        return float(self.serving_gpus[first:last].mean() / self.gpus)

    @property
    def lent_gpu_hours_per_day(self) -> float:
        return float(self.lent_gpus.sum())


def _hours_of(plan: Plan) -> dict[int, list[int]]:
    """Represented UTC hour -> the UTC hours of the day it stands for."""
    blocks = plan.clock.get("blocks_utc") or {}
    rep = plan.clock.get("represented_hours_utc") or sorted({ln.hour_utc for ln in plan.hourly})
    return {int(h): [int(x) for x in blocks.get(str(h), [h])] for h in rep}


def place_days(plan: Plan, scenario: Scenario) -> list[PlaceDay]:
    """Every owned site and cloud region with hourly lines, most GPUs (installed, or rented at once) first."""
    expand = _hours_of(plan)
    arrays: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    for ln in plan.hourly:
        a = arrays.setdefault((ln.kind, ln.place), {k: np.zeros(HOURS) for k in ("load", "cap", "serving", "lent")})
        for h in expand.get(ln.hour_utc, [ln.hour_utc]):
            a["load"][h % HOURS] += ln.load_tok_s
            a["cap"][h % HOURS] += ln.capacity_tok_s
            a["serving"][h % HOURS] += ln.serving_gpus
            a["lent"][h % HOURS] += ln.lent_gpus
    sites = {s.id: s for s in plan.sites}
    clouds = {q.id: q for q in scenario.cloud_regions}
    out = []
    for (kind, place), a in arrays.items():
        if kind == "owned" and place in sites:
            s = sites[place]
            name, lat, lon = s.name, s.lat, s.lon
            installed = float(sum(ln.gpus for ln in s.racks if ln.purpose == "inference"))
        else:
            q = clouds.get(place)
            name, lat, lon, installed = (q.name, q.lat, q.lon, 0.0) if q else (place, 0.0, 0.0, 0.0)
        offset = standard_offset_h(lat, lon)[0]
        out.append(PlaceDay(place, name, kind, lon, a["load"], a["cap"], a["serving"], a["lent"], installed, offset))
    return sorted(out, key=lambda d: (-d.gpus, d.kind, d.id))


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


def variant_overrides(plan: Plan) -> dict:
    """The inputs that made this plan a variant of its scenario file: the overrides (`--set`, a
    sweep member's, the file's own) its provenance records; {} for a plan of the file as it is."""
    found = (plan.provenance or {}).get("overrides") or {}
    return dict(found) if isinstance(found, dict) else {}


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


def money_step_usd(plan: Plan) -> float:
    """What the solver's proof supports: the power of ten at or below the gap in dollars a year
    (objective - best bound), never finer than $10 k (the report's two decimals of $ M)."""
    s = plan.solve
    if s.objective_usd_per_year is None or s.best_bound_usd_per_year is None:
        return 1e4
    slack = max(s.objective_usd_per_year - s.best_bound_usd_per_year, 0.0)
    if slack < 1e4:
        return 1e4
    return float(10 ** np.floor(np.log10(slack)))


def money_at(usd: float, step_usd: float) -> str:
    """Money in $ M rounded to `step_usd` (money_step_usd): `$452 M` on a plan proven to ±$8.5 M."""
    step_m = step_usd / 1e6
    millions = round(usd / 1e6 / step_m) * step_m
    decimals = int(max(0, min(2, -np.floor(np.log10(step_m))))) if step_m < 1 else 0
    sign = "-" if round(millions, decimals) < 0 else ""
    return f"{sign}${abs(millions):,.{decimals}f} M"


def step_text(step_usd: float) -> str:
    return f"${step_usd / 1e6:,.0f} M" if step_usd >= 1e6 else f"${step_usd / 1e3:,.0f} k"


def gap_usd(plan: Plan) -> float | None:
    s = plan.solve
    if s.objective_usd_per_year is None or s.best_bound_usd_per_year is None:
        return None
    return max(s.objective_usd_per_year - s.best_bound_usd_per_year, 0.0)


def carbon_charge_usd(plan: Plan) -> float:
    """The notional carbon charge inside the objective (economics.carbon_price_usd_per_t x t CO2):
    a price on emissions the plan is steered by, not money it spends."""
    return float((plan.cost_breakdown_usd_per_year or {}).get("carbon", 0.0))


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


def _open_with_names(plan: Plan) -> list[SitePlan]:
    return [s for s in plan.sites if s.open]


def recommendation(layers: PlanLayers, step: float) -> str:
    """One sentence that decides: what to build, where, for how much, and what it delivers."""
    plan, scenario = layers.plan, layers.scenario
    k = plan.kpis
    open_sites = sorted(_open_with_names(plan), key=lambda s: -s.it_kw)
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
    parts = [f"Build {mw_text(mw)} of IT ({gpus:,} GPUs) at {where} for {cost} and {money_at(k.get('upfront_capex_usd', 0.0), step)} "
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
FILLED_FIELDS = {"colocation": ("colocation prices", "colocation_usd_per_kw_month"),
                 "energy": ("power prices", "power_price_usd_per_mwh"),
                 "site_fixed": ("site fixed costs", "fixed_cost_usd_per_year")}


def filled_cost_shares(plan: Plan, prov: Provenance) -> list[tuple[str, int, int, float]]:
    """(label, open sites where the input is filled by a rule or assumed, open sites, share of the
    plan's cost in the cost line it drives at those sites), largest share first."""
    total = plan.objective_usd_per_year or 0.0
    open_sites = _open_with_names(plan)
    out = []
    for category, (label, fld) in FILLED_FIELDS.items():
        filled = [s for s in open_sites if (p := prov.get("sites", s.id, fld)) and p[0] in IMPUTED_BASES]
        if filled and total > 0:
            out.append((label, len(filled), len(open_sites), sum(s.cost_usd_per_year.get(category, 0.0) for s in filled) / total))
    return sorted(out, key=lambda r: -r[3])


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
    for s in _open_with_names(plan):
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
    if gap is None:
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
