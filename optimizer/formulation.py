"""The placement MIP in Pyomo: one small function per variable group and constraint family.

Notation (all index sets are the sparse lists of optimizer.index):
  S sites, R regions, W inference classes, K rack configs, C cooling types, F fabrics,
  J training jobs, X chips. serve = {(r,w,s)}, inf = {(s,k,c,w)}, trn = {(s,k,c,f)},
  place = {(j,s,f,x)}, zones = {(s,c)}.

Inference capacity is kept per class: a rack serves one workload class, because a model
is deployed onto dedicated hardware; pooling fractions of a rack across classes would
understate the integer rounding that real deployments pay.

`build_model(ix)` returns a ConcreteModel whose cost terms are named Expressions
(`m.cost[category]`), so a notebook user can inspect any piece of the objective.
"""

from __future__ import annotations

import pyomo.environ as pyo

from optimizer.costs import COST_CATEGORIES, transport_usd_per_year
from optimizer.index import IndexSets


def add_variables(m: pyo.ConcreteModel, ix: IndexSets) -> None:
    """open[s], zone[s,c] binary; racks_inf, racks_trn integer; share in [0, max share]; place binary."""
    pol = ix.scenario.policies
    m.S = pyo.Set(initialize=sorted(ix.sites), ordered=True)
    m.ZONES = pyo.Set(initialize=ix.zones, dimen=2, ordered=True)
    m.SERVE = pyo.Set(initialize=ix.serve, dimen=3, ordered=True)
    m.INF = pyo.Set(initialize=ix.inf_racks, dimen=4, ordered=True)
    m.TRN = pyo.Set(initialize=ix.trn_racks, dimen=4, ordered=True)
    m.PLACE = pyo.Set(initialize=ix.place, dimen=4, ordered=True)

    m.open = pyo.Var(m.S, domain=pyo.Binary)
    m.zone = pyo.Var(m.ZONES, domain=pyo.Binary)
    m.racks_inf = pyo.Var(m.INF, domain=pyo.NonNegativeIntegers, bounds=lambda m, s, k, c, w: (0, ix.rack_limit[s, k, c]))
    m.racks_trn = pyo.Var(m.TRN, domain=pyo.NonNegativeIntegers, bounds=lambda m, s, k, c, f: (0, ix.rack_limit[s, k, c]))
    m.share = pyo.Var(m.SERVE, domain=pyo.NonNegativeReals, bounds=(0.0, pol.max_share_per_site))
    m.place = pyo.Var(m.PLACE, domain=pyo.Binary)


def demand_met(m, ix: IndexSets) -> None:
    """sum_s share[r,w,s] = 1   for every (r,w) with demand > 0."""
    by_rw = ix.group("serve_by_rw")
    m.demand_met = pyo.Constraint(list(by_rw), rule=lambda m, r, w: sum(m.share[r, w, s] for s in by_rw[r, w]) == 1)


def share_needs_open_site(m, ix: IndexSets) -> None:
    """share[r,w,s] <= max_share * open[s]   per pair (the strong link; see DESIGN.md)."""
    cap = ix.scenario.policies.max_share_per_site
    m.share_needs_open = pyo.Constraint(m.SERVE, rule=lambda m, r, w, s: m.share[r, w, s] <= cap * m.open[s])


def inference_capacity(m, ix: IndexSets) -> None:
    """sum_r share[r,w,s] * demand[r,w] <= sum_{k,c} racks_inf[s,k,c,w] * gpus[k] * tok_s[k,w] * utilization."""
    by_sw = ix.group("serve_by_sw")
    racks = ix.group("inf_by_sw")

    def rule(m, s, w):
        served = sum(m.share[r, w, s] * ix.demand(r, w) for r in by_sw[s, w])
        capacity = sum(m.racks_inf[s, k, c, w] * ix.tok_s_per_rack[k, w] for k, c in racks.get((s, w), []))
        return served <= capacity

    m.inference_capacity = pyo.Constraint(list(by_sw), rule=rule)


def training_capacity(m, ix: IndexSets) -> None:
    """sum_j place[j,s,f,x] * gpus_h100[j] <= eff[f] * h100_equiv[x] * sum_{k of x, c} racks_trn[s,k,c,f] * gpus[k]."""
    jobs_at = ix.group("place_by_sfchip")
    racks = ix.group("trn_by_sfchip")

    def rule(m, s, f, x):
        need = sum(m.place[j, s, f, x] * ix.jobs[j].gpus_h100_equiv for j in jobs_at[s, f, x])
        have = sum(m.racks_trn[s, k, c, f] * ix.h100_per_rack(k, f) for k, c in racks.get((s, f, x), []))
        return need <= have

    m.training_capacity = pyo.Constraint(list(jobs_at), rule=rule)


def job_placed_once(m, ix: IndexSets) -> None:
    """sum_{s,f,x} place[j,s,f,x] = 1: every job runs whole, in one site, on one fabric and chip."""
    options = ix.group("place_by_job")
    m.job_placed_once = pyo.Constraint(list(ix.jobs), rule=lambda m, j: sum(m.place[j, s, f, x] for s, f, x in options.get(j, [])) == 1)


def density_needs_zone(m, ix: IndexSets) -> None:
    """sum_w racks_inf[s,k,c,w] + sum_f racks_trn[s,k,c,f] <= M[s,k,c] * zone[s,c].

    Density itself is enforced by pruning (a rack exists only in a cooling that can hold
    it); this links racks to a built zone with M = the most racks of k the site's floor and
    power admit in a c zone, the tightest valid bound.
    """
    inf = ix.group("inf_by_skc")
    trn = ix.group("trn_by_skc")

    def rule(m, s, k, c):
        racks = sum(m.racks_inf[s, k, c, w] for w in inf.get((s, k, c), [])) + sum(m.racks_trn[s, k, c, f] for f in trn.get((s, k, c), []))
        return racks <= ix.rack_limit[s, k, c] * m.zone[s, c]

    m.density_needs_zone = pyo.Constraint(list(ix.rack_limit), rule=rule)


def zone_needs_open_site(m, ix: IndexSets) -> None:
    """zone[s,c] <= open[s]."""
    m.zone_needs_open = pyo.Constraint(m.ZONES, rule=lambda m, s, c: m.zone[s, c] <= m.open[s])


def _site_racks(m, ix: IndexSets, s: str, weight):
    inf = ix.group("inf_by_site").get(s, [])
    trn = ix.group("trn_by_site").get(s, [])
    return sum(m.racks_inf[key] * weight(key) for key in inf) + sum(m.racks_trn[key] * weight(key) for key in trn)


def site_power(m, ix: IndexSets) -> None:
    """sum racks * kw_per_rack[k] * PUE[s,c] <= power_limit_kw[s] * open[s]."""

    def rule(m, s):
        site = ix.sites[s]
        load = _site_racks(m, ix, s, lambda key: ix.racks[key[1]].kw_per_rack * site.pue(ix.cooling[key[2]]))
        if isinstance(load, (int, float)):
            return pyo.Constraint.Skip
        return load <= site.power_limit_kw * m.open[s]

    m.site_power = pyo.Constraint(m.S, rule=rule)


def site_space(m, ix: IndexSets) -> None:
    """sum racks <= floor_racks[s] * open[s]."""

    def rule(m, s):
        racks = _site_racks(m, ix, s, lambda key: 1)
        if isinstance(racks, (int, float)):
            return pyo.Constraint.Skip
        return racks <= ix.sites[s].floor_racks * m.open[s]

    m.site_space = pyo.Constraint(m.S, rule=rule)


# --------------------------------------------------------------------------- policies


def carbon_cap(m, ix: IndexSets) -> None:
    """sum racks * emissions_t_per_rack <= carbon_cap_t_per_year   (if set)."""
    cap = ix.scenario.policies.carbon_cap_t_per_year
    if cap is None:
        return
    emitted = sum(m.racks_inf[key] * e.emissions_t_per_year for key, e in ix.inf_econ.items()) + sum(
        m.racks_trn[key] * e.emissions_t_per_year for key, e in ix.trn_econ.items()
    )
    m.carbon_cap = pyo.Constraint(expr=emitted <= cap)


def capex_budget(m, ix: IndexSets) -> None:
    """sum racks * upfront_capex_per_rack <= capex_budget_usd   (if set; upfront, not annualized)."""
    budget = ix.scenario.policies.capex_budget_usd
    if budget is None:
        return
    spent = sum(m.racks_inf[key] * e.upfront_capex_usd for key, e in ix.inf_econ.items()) + sum(
        m.racks_trn[key] * e.upfront_capex_usd for key, e in ix.trn_econ.items()
    )
    m.capex_budget = pyo.Constraint(expr=spent <= budget)


def site_count(m, ix: IndexSets) -> None:
    """min_sites <= sum_s open[s] <= max_sites."""
    pol = ix.scenario.policies
    if pol.min_sites > 0:
        m.min_sites = pyo.Constraint(expr=sum(m.open[s] for s in m.S) >= pol.min_sites)
    if pol.max_sites is not None:
        m.max_sites = pyo.Constraint(expr=sum(m.open[s] for s in m.S) <= pol.max_sites)


def forced_sites(m, ix: IndexSets) -> None:
    """open[s] = 1 for forced sites (forbidden sites have no variables at all)."""
    for s in ix.scenario.policies.forced_sites:
        m.open[s].fix(1)


def single_purpose_sites(m, ix: IndexSets) -> None:
    """hosts_inf[s] + hosts_trn[s] <= open[s]; racks of a purpose <= floor_racks[s] * hosts_purpose[s]."""
    if not ix.scenario.policies.single_purpose_sites:
        return
    m.hosts_inf = pyo.Var(m.S, domain=pyo.Binary)
    m.hosts_trn = pyo.Var(m.S, domain=pyo.Binary)
    m.one_purpose = pyo.Constraint(m.S, rule=lambda m, s: m.hosts_inf[s] + m.hosts_trn[s] <= m.open[s])
    inf = ix.group("inf_by_site")
    trn = ix.group("trn_by_site")

    def inf_rule(m, s):
        if s not in inf:
            return pyo.Constraint.Skip
        return sum(m.racks_inf[key] for key in inf[s]) <= ix.sites[s].floor_racks * m.hosts_inf[s]

    def trn_rule(m, s):
        if s not in trn:
            return pyo.Constraint.Skip
        return sum(m.racks_trn[key] for key in trn[s]) <= ix.sites[s].floor_racks * m.hosts_trn[s]

    m.inference_role = pyo.Constraint(m.S, rule=inf_rule)
    m.training_role = pyo.Constraint(m.S, rule=trn_rule)


# -------------------------------------------------------------------------- objective


def objective(m, ix: IndexSets) -> None:
    """min sum of the annualized cost categories in optimizer.costs.COST_CATEGORIES."""
    terms = {c: 0 for c in COST_CATEGORIES}
    terms["site_fixed"] = sum(ix.sites[s].fixed_cost_usd_per_year * m.open[s] for s in m.S)
    terms["cooling_zones"] = sum(ix.cooling[c].zone_fixed_usd_per_year * m.zone[s, c] for s, c in m.ZONES)
    for var, table in ((m.racks_inf, ix.inf_econ), (m.racks_trn, ix.trn_econ)):
        for key, econ in table.items():
            for category, value in econ.cost_usd_per_year.items():
                if value:
                    terms[category] = terms[category] + value * var[key]
    if ix.scenario.economics.transport_usd_per_tok_s_1000km_year or ix.pair_cost:
        terms["transport"] = sum(
            transport_usd_per_year(ix.demand(r, w), ix.distance_km[r, s], ix.scenario.economics, ix.pair_cost.get((r, w, s), 0.0))
            * m.share[r, w, s]
            for r, w, s in m.SERVE
        )
    m.CATEGORIES = pyo.Set(initialize=COST_CATEGORIES, ordered=True)
    m.cost = pyo.Expression(m.CATEGORIES, rule=lambda m, c: terms[c])
    m.total_cost = pyo.Objective(expr=sum(m.cost[c] for c in m.CATEGORIES), sense=pyo.minimize)


FAMILIES = (
    demand_met,
    share_needs_open_site,
    inference_capacity,
    training_capacity,
    job_placed_once,
    density_needs_zone,
    zone_needs_open_site,
    site_power,
    site_space,
    carbon_cap,
    capex_budget,
    site_count,
    forced_sites,
    single_purpose_sites,
)


def build_model(ix: IndexSets) -> pyo.ConcreteModel:
    """The full MIP over the sparse index sets of `ix`."""
    m = pyo.ConcreteModel(name=ix.scenario.name)
    add_variables(m, ix)
    for family in FAMILIES:
        family(m, ix)
    objective(m, ix)
    return m


def model_size(m: pyo.ConcreteModel) -> dict[str, int]:
    """Rows, columns and integer columns of the built model (fixed variables included)."""
    columns = integers = binaries = 0
    for var in m.component_data_objects(pyo.Var, active=True):
        columns += 1
        if var.is_binary():
            binaries += 1
            integers += 1
        elif var.is_integer():
            integers += 1
    rows = sum(1 for _ in m.component_data_objects(pyo.Constraint, active=True))
    return {"rows": rows, "columns": columns, "integers": integers, "binaries": binaries}


__all__ = ["build_model", "model_size", "FAMILIES"]
