"""Turn a solved model's column values into a Plan: racks per site, assignments, job placements, costs, KPIs.

Integer variables are rounded to the nearest integer (the solver's integrality tolerance
leaves values like 2.9999999); every cost is then recomputed from those integers, so
the plan's line items add up exactly to its objective.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from dcplace.models.plan import Assignment, JobPlacement, RackLine, SitePlan
from dcplace.optimizer.model.clock import day_weighted_load
from dcplace.optimizer.model.costs import COST_CATEGORIES, site_build_usd_per_mw, transport_usd_per_year
from dcplace.optimizer.solving.extract_clock import busy_energy_by_site, clock_kpis, day_shares, extract_clock
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel

SECONDS_PER_HOUR = 3600.0


def extract(x: np.ndarray, lm: LinearModel, ix: IndexSets) -> dict:
    """Sites, assignments, jobs, cost breakdown and KPIs from the column values `x` of `lm`."""
    _value = lambda block, key: float(x[lm.col(block, key)])  # noqa: E731
    econ = ix.scenario.economics
    lines: dict[str, list[RackLine]] = defaultdict(list)
    emissions: dict[str, float] = defaultdict(float)
    upfront: dict[str, float] = defaultdict(float)
    site_cost: dict[str, dict[str, float]] = {s: {c: 0.0 for c in COST_CATEGORIES} for s in ix.sites}
    purpose_cost = {"inference": 0.0, "training": 0.0}

    for purpose, block, table in (("inference", "racks_inf", ix.inf_econ), ("training", "racks_trn", ix.trn_econ)):
        for key, e in table.items():
            n = int(round(_value(block, key)))
            if n <= 0:
                continue
            s, k, c, tag = key
            rack = ix.racks[k]
            cost = {cat: n * v for cat, v in e.cost_usd_per_year.items()}
            lines[s].append(
                RackLine(
                    config=k, chip=rack.chip, cooling=c, purpose=purpose,
                    workload=tag if purpose == "inference" else None, fabric=tag if purpose == "training" else None,
                    racks=n, gpus=n * rack.gpus_per_rack, it_kw=n * rack.kw_per_rack, facility_kw=n * e.facility_kw,
                    cost_usd_per_year=cost,
                )
            )
            for cat, v in cost.items():
                site_cost[s][cat] += v
            purpose_cost[purpose] += sum(cost.values())
            emissions[s] += n * e.emissions_t_per_year
            upfront[s] += n * e.upfront_capex_usd

    opened = {s for s in ix.sites if _value("open", s) > 0.5}
    zones = defaultdict(list)
    for s, c in ix.zones:
        if _value("zone", (s, c)) > 0.5:
            zones[s].append(c)
            site_cost[s]["cooling_zones"] += ix.cooling[c].zone_fixed_usd_per_year
    for s in opened:
        site_cost[s]["site_fixed"] += ix.sites[s].fixed_cost_usd_per_year
    built: dict[str, tuple[bool, float]] = {}  # self-build: site -> (campus built, its IT kW) (model.formulation self_build_*)
    for s in ix.build:
        training_kw = sum(ln.it_kw for ln in lines[s] if ln.purpose == "training")
        campus, kw = _value("build", s) > 0.5, max(0.0, _value("built_kw", s))
        kw = min(kw, training_kw) if kw <= training_kw * (1 + 1e-9) + 1e-6 else kw  # solver noise only; a breach stays visible
        if kw < 1e-6:
            kw = 0.0
        if not (campus or kw):
            continue
        built[s] = (campus, kw)
        build_cost = kw * ix.build_usd_per_kw_year[s] + (econ.campus_fixed_usd_per_year if campus else 0.0)
        credit = kw * 12.0 * ix.sites[s].colocation_usd_per_kw_month
        site_cost[s]["self_build"] += build_cost
        site_cost[s]["colocation"] -= credit
        purpose_cost["training"] += build_cost - credit

    assignments = []
    served = defaultdict(lambda: defaultdict(float))
    shares = day_shares(x, lm, ix)  # with routing per hour, the hours' weighted mean (routing.csv has each hour)
    for i in np.flatnonzero(shares > 1e-9):
        r, w, s = ix.serve[i]
        share = min(1.0, float(shares[i]))
        demand = ix.demand(r, w)
        served[s][w] += share * demand
        transport = share * transport_usd_per_year(demand, ix.km(r, s), econ, ix.pair_cost.get((r, w, s), 0.0))
        site_cost[s]["transport"] += transport
        purpose_cost["inference"] += transport
        region = ix.regions[r]
        assignments.append(
            Assignment(
                region=r, region_name=region.name, workload=w, site=s, share=share, served_tok_s=share * demand,
                rtt_ms=ix.rtt(r, s), rtt_budget_ms=region.rtt_budget_ms[w],
            )
        )

    standby = {}  # job -> (site, fabric, chip) it can resume at (optimizer.model.failover.training_standby)
    if "standby" in lm.blocks:
        for key in lm.blocks["standby"].keys:
            if _value("standby", key) > 0.5:
                standby[key[0]] = key[1:]
    jobs = []
    for j, s, f, chip in ix.place:
        if _value("place", (j, s, f, chip)) > 0.5:
            job = ix.jobs[j]
            backup = dict(zip(("standby_site", "standby_fabric", "standby_chip"), standby[j])) if j in standby else {}
            jobs.append(JobPlacement(job=j, name=job.name, site=s, fabric=f, chip=chip, gpus_h100_equiv=job.gpus_h100_equiv, **backup))

    if ix.clock.on:  # energy that follows the load: the merit-order dispatch of the racks built
        for s, serving_mwh, lent_mwh in busy_energy_by_site(x, lm, ix):
            usd_per_mwh = ix.sites[s].power_price_usd_per_mwh
            t_per_mwh = ix.sites[s].grid_carbon_g_per_kwh / 1000.0
            for purpose, mwh in (("inference", serving_mwh), ("training", lent_mwh)):
                site_cost[s]["energy"] += mwh * usd_per_mwh
                site_cost[s]["carbon"] += mwh * t_per_mwh * econ.carbon_price_usd_per_t
                purpose_cost[purpose] += mwh * (usd_per_mwh + t_per_mwh * econ.carbon_price_usd_per_t)
                emissions[s] += mwh * t_per_mwh
    sites = []
    for s, site in ix.sites.items():
        site_lines = sorted(lines[s], key=lambda ln: (ln.purpose, ln.config, ln.cooling, ln.workload or "", ln.fabric or ""))
        purposes = {ln.purpose for ln in site_lines}
        is_open = s in opened
        role = "closed" if not is_open else "idle" if not purposes else "mixed" if len(purposes) == 2 else purposes.pop()
        cost = dict(site_cost[s])
        sites.append(
            SitePlan(
                id=s, name=site.name, lat=site.lat, lon=site.lon, country=site.country, open=is_open, role=role,
                zones=sorted(zones[s]), fabrics=sorted({ln.fabric for ln in site_lines if ln.fabric}),
                racks=site_lines, racks_total=sum(ln.racks for ln in site_lines), gpus=sum(ln.gpus for ln in site_lines),
                it_kw=sum(ln.it_kw for ln in site_lines), facility_kw=sum(ln.facility_kw for ln in site_lines),
                power_limit_kw=site.power_limit_kw, floor_racks=site.floor_racks,
                served_tok_s={w: served[s][w] for w in ix.workloads if served[s][w] > 0},
                emissions_t_per_year=emissions[s], upfront_capex_usd=upfront[s],
                cost_usd_per_year=cost, total_cost_usd_per_year=sum(cost.values()),
                **_tenure(ix, s, built),
            )
        )

    breakdown = {c: sum(site_cost[s][c] for s in ix.sites) for c in COST_CATEGORIES}
    clock_parts = extract_clock(x, lm, ix) if (ix.clock.on or ix.scenario.cloud_regions) else {}
    if clock_parts:
        breakdown["rental"] += sum(ln.usd_per_year for ln in clock_parts["rentals"])
        for ln in clock_parts["rentals"]:
            purpose_cost["training" if ln.kind == "training" else "inference"] += ln.usd_per_year
    total = sum(breakdown.values())
    kpis = _kpis(ix, sites, assignments + clock_parts.get("rent_assignments", []), jobs, purpose_cost, total, clock_parts)
    return {"sites": sites, "assignments": assignments, "jobs": jobs, "breakdown": breakdown, "objective": total, "kpis": kpis,
            **clock_parts}


def _tenure(ix: IndexSets, s: str, built: dict[str, tuple[bool, float]]) -> dict:
    """tenure/built_kw of a site: none where it cannot self-build, else build (its built kW) or lease (0)."""
    if site_build_usd_per_mw(ix.sites[s], ix.scenario.economics) is None:
        return {}
    campus, kw = built.get(s, (False, 0.0))
    return {"tenure": "build" if campus else "lease", "built_kw": kw}


def _kpis(ix: IndexSets, sites, assignments, jobs, purpose_cost, total, clock_parts=None) -> dict[str, float]:
    """Headline numbers. $/M tokens charges inference racks, transport and rented GPU-hours to
    the tokens they serve in a year: peak demand x the class's load factor x hours x 3600, or
    with the clock on the hourly load x the hours each represented hour stands for."""
    hours = ix.scenario.economics.hours_per_year
    peak = sum(a.served_tok_s for a in assignments)
    if ix.clock.hourly_routing:  # owned pairs hour by hour (routing.csv), rented ones by the day
        days = ix.clock.days_per_year(ix.scenario)
        rented = clock_parts["rent_assignments"]
        tokens_per_year = sum(ln.served_tok_s * ln.weight_h for ln in clock_parts["routing"]) * days * SECONDS_PER_HOUR + \
            sum(a.share * day_weighted_load(ix, a.region, a.workload) * days * SECONDS_PER_HOUR for a in rented)
    elif ix.clock.on:
        days = ix.clock.days_per_year(ix.scenario)
        tokens_per_year = sum(a.share * day_weighted_load(ix, a.region, a.workload) * days * SECONDS_PER_HOUR for a in assignments)
    else:
        tokens_per_year = sum(a.served_tok_s * ix.workloads[a.workload].load_factor * hours * SECONDS_PER_HOUR for a in assignments)
    demand_total = sum(ix.demand(r, w) for r in ix.regions for w in ix.workloads)
    within = sum(a.served_tok_s for a in assignments if a.rtt_ms <= a.rtt_budget_ms + 1e-9)
    by_role = defaultdict(float)
    for s in sites:
        for ln in s.racks:
            by_role[ln.purpose] += ln.it_kw
    kpis = {
        "total_cost_usd_per_year": total,
        "inference_cost_usd_per_year": purpose_cost["inference"],
        "training_cost_usd_per_year": purpose_cost["training"],
        "shared_cost_usd_per_year": total - purpose_cost["inference"] - purpose_cost["training"],
        "usd_per_m_tokens": purpose_cost["inference"] / (tokens_per_year / 1e6) if tokens_per_year else 0.0,
        "tokens_per_s_served_peak": peak,
        "tokens_per_year": tokens_per_year,
        "demand_within_budget_share": within / demand_total if demand_total else 1.0,
        "mean_rtt_ms": sum(a.served_tok_s * a.rtt_ms for a in assignments) / peak if peak else 0.0,
        "sites_open": float(sum(s.open for s in sites)),
        "it_mw_inference": by_role["inference"] / 1000.0,
        "it_mw_training": by_role["training"] / 1000.0,
        "facility_mw": sum(s.facility_kw for s in sites) / 1000.0,
        "gpus_inference": float(sum(ln.gpus for s in sites for ln in s.racks if ln.purpose == "inference")),
        "gpus_training": float(sum(ln.gpus for s in sites for ln in s.racks if ln.purpose == "training")),
        "emissions_t_per_year": sum(s.emissions_t_per_year for s in sites),
        "upfront_capex_usd": sum(s.upfront_capex_usd for s in sites),
        "training_jobs_placed": float(len(jobs)),
    }
    if clock_parts:
        kpis.update(clock_kpis(ix, clock_parts))
    return kpis
