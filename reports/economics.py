"""The executive summary's numbers, computed from the plan: usable from the API
(`from dcplace.reports.economics import workload_costs`); reports/summary.py states them in sentences.

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
* **Small site**: fixed costs (site fixed cost plus cooling-zone fixed costs) are half or
  more of the site's annual cost.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median_low

import numpy as np

from dcplace.models.interactivity import throughput_at_targets
from dcplace.models.plan import Plan, SitePlan
from dcplace.models.provenance import Provenance
from dcplace.models.records import Scenario
from dcplace.optimizer.model.clock import standard_offset_h
from dcplace.optimizer.model.costs import rack_economics
from dcplace.optimizer.model.latency import distance_matrix_km

SECONDS_PER_HOUR = 3600.0
SMALL_SITE_FIXED_SHARE = 0.5
IMPUTED_BASES = ("rule", "assumption")
PROVEN_OPTIMAL_GAP = 1e-6  # below this relative gap the plan is stated as proven optimal


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


@dataclass(frozen=True)
class ChipAtTarget:
    """One chip on one class at the class's interactivity target: its tok/s per GPU there (and how
    the curve was read, models/interactivity.py), GPUs the plan gives it, and its own cost per M tokens."""

    workload: str
    chip: str
    target_tok_s_per_user: float | None
    tok_s_per_gpu: float | None  # None: not offered at the target
    how: str
    gpus: int
    usd_per_m_tokens: float | None  # None: not offered, or no site of the plan serving the class can host it
    site: str | None  # where that cost is reached
    points: tuple[tuple[float, float], ...] = ()  # the curve, loosest first; () for a fixed figure


CHIP_COST_RULE = ("A chip's cost per M tokens at the target: one full rack of it at the cheapest of the plan's sites that serve the "
                  "class (chips, cooling capex, energy, colocation and carbon of that rack, in the cheapest rack configuration and "
                  "cooling the site allows), over the tokens its GPUs serve a year at the target: tok/s per GPU at the target x "
                  "target utilization x the class's load factor x hours. Site and zone fixed costs and transport are left out.")


def chip_economics(plan: Plan, scenario: Scenario) -> list[ChipAtTarget]:
    """Every chip the throughput table names for every class, read at the class's target (CHIP_COST_RULE)."""
    cat, eco = scenario.catalog, scenario.economics
    chips, cooling = {c.id: c for c in cat.chips}, {c.id: c for c in cat.cooling}
    load = {w.id: w.load_factor for w in cat.workloads}
    sites = {s.id: s for s in scenario.sites}
    serving = defaultdict(set)
    for a in plan.assignments:
        serving[a.workload].add(a.site)
    gpus: dict[tuple[str, str], int] = defaultdict(int)
    for s in plan.sites:
        for ln in s.racks:
            if ln.purpose == "inference":
                gpus[ln.workload, ln.chip] += ln.gpus
    out = []
    for t in throughput_at_targets(cat):
        best: tuple[float, str] | None = None
        if t.tok_s_per_gpu is not None:
            tokens_per_gpu = t.tok_s_per_gpu * eco.inference_target_utilization * load[t.workload] * eco.hours_per_year * SECONDS_PER_HOUR
            for sid in sorted(serving[t.workload]):
                site = sites[sid]
                for rack in cat.rack_configs:
                    if rack.chip != t.chip:
                        continue
                    for cid in site.cooling_allowed:
                        c = cooling.get(cid)
                        if c is None or rack.kw_per_rack > c.max_kw_per_rack:
                            continue
                        usd = rack_economics(site, rack, chips[t.chip], c, load[t.workload], eco).total_usd_per_year
                        unit = usd / (rack.gpus_per_rack * tokens_per_gpu / 1e6)
                        if best is None or unit < best[0]:
                            best = (unit, site.name)
        out.append(ChipAtTarget(t.workload, t.chip, t.target_tok_s_per_user, t.tok_s_per_gpu, t.how, gpus.get((t.workload, t.chip), 0),
                                best[0] if best else None, best[1] if best else None, t.points))
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


def variant_overrides(plan: Plan) -> dict:
    """The inputs that made this plan a variant of its scenario file: the overrides (`--set`, a
    sweep member's, the file's own) its provenance records; {} for a plan of the file as it is."""
    found = (plan.provenance or {}).get("overrides") or {}
    return dict(found) if isinstance(found, dict) else {}


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


def gap_usd(plan: Plan) -> float | None:
    s = plan.solve
    if s.objective_usd_per_year is None or s.best_bound_usd_per_year is None:
        return None
    return max(s.objective_usd_per_year - s.best_bound_usd_per_year, 0.0)


def carbon_charge_usd(plan: Plan) -> float:
    """The notional carbon charge inside the objective (economics.carbon_price_usd_per_t x t CO2):
    a price on emissions the plan is steered by, not money it spends."""
    return float((plan.cost_breakdown_usd_per_year or {}).get("carbon", 0.0))


def opened_sites(plan: Plan) -> list[SitePlan]:
    return [s for s in plan.sites if s.open]


FILLED_FIELDS = {"colocation": ("colocation prices", "colocation_usd_per_kw_month"),
                 "energy": ("power prices", "power_price_usd_per_mwh"),
                 "site_fixed": ("site fixed costs", "fixed_cost_usd_per_year")}


def filled_cost_shares(plan: Plan, prov: Provenance) -> list[tuple[str, int, int, float]]:
    """(label, open sites where the input is filled by a rule or assumed, open sites, share of the
    plan's cost in the cost line it drives at those sites), largest share first."""
    total = plan.objective_usd_per_year or 0.0
    open_sites = opened_sites(plan)
    out = []
    for category, (label, fld) in FILLED_FIELDS.items():
        filled = [s for s in open_sites if (p := prov.get("sites", s.id, fld)) and p[0] in IMPUTED_BASES]
        if filled and total > 0:
            out.append((label, len(filled), len(open_sites), sum(s.cost_usd_per_year.get(category, 0.0) for s in filled) / total))
    return sorted(out, key=lambda r: -r[3])
