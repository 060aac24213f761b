"""Cheap checks before solving: what cannot work, named in the user's terms.

Each returns InputProblems that name the file, the row and the field at fault, so that
`dcplace validate` and `dcplace solve` report them exactly like a bad cell.
"""

from __future__ import annotations

import math

from dcplace.models import InputProblem, Scenario, ScenarioError
from dcplace.models.checks import record_row
from dcplace.optimizer.model.index import MAX_FULL_PAIRS, IndexSets, PruningRules, build_index, most_per_site
from dcplace.optimizer.solving.failover import failover_reachable, standby_reachable  # resilience (docs/resilience.md)



def _hosts_class(ix: IndexSets, s: str, w: str) -> bool:
    return any(ix.eligible[w][:, ix.site_pos[s]]) or any(
        (k, w) in ix.tok_s_per_rack and ix.racks[k].kw_per_rack <= ix.cooling[c].max_kw_per_rack + 1e-9
        and ix.racks[k].kw_per_rack * ix.sites[s].pue(ix.cooling[c]) <= ix.sites[s].power_limit_kw and ix.sites[s].floor_racks >= 1
        for c in ix.sites[s].cooling_allowed for k in ix.racks)


def _power(kw: float) -> str:
    return f"{kw / 1000:,.1f} MW" if kw >= 1000 else f"{kw:,.1f} kW"


def _hosting_options(ix: IndexSets, s: str, w: str) -> list[tuple[float, str, str, str]]:
    """Why site s cannot host a rack serving class w: (relative change, field, why, fix) per cause."""
    site = ix.sites[s]
    sites_file = ix.scenario.files.get("sites", "sites.csv")
    configs = [k for k in ix.racks if (k, w) in ix.tok_s_per_rack]
    if not configs:
        return []
    fits = [(k, c) for k in configs for c in site.cooling_allowed if ix.racks[k].kw_per_rack <= ix.cooling[c].max_kw_per_rack + 1e-9]
    out = []
    if not fits:
        least = min(ix.racks[k].kw_per_rack for k in configs)
        held = max(ix.cooling[c].max_kw_per_rack for c in site.cooling_allowed)
        out.append((least / held - 1, "cooling_allowed", f"no cooling allowed at {site.name} ({s}) can hold a {least:g} kW rack (they hold at most {held:g} kW)",
                    f"allow a denser cooling at {s} (cooling_allowed in {sites_file})."))
    else:
        need = min(ix.racks[k].kw_per_rack * site.pue(ix.cooling[c]) for k, c in fits)
        if need > site.power_limit_kw:
            out.append((need / site.power_limit_kw - 1, "power_limit_kw",
                        f"{site.name} ({s}) has {_power(site.power_limit_kw)} of power and one rack needs {_power(need)} ({_power(need - site.power_limit_kw)} missing)",
                        f"raise power_limit_kw of {s} in {sites_file} to at least {_power(need)} (is it in MW where kW is meant?)."))
        if site.floor_racks < 1:
            out.append((math.inf, "floor_racks", f"{site.name} ({s}) has no floor space", f"give {s} floor_racks in {sites_file}."))
    return out


def unreachable_regions(ix: IndexSets) -> list[InputProblem]:
    """A region with demand for a class but no site that can serve it within budget."""
    scenario = ix.scenario
    reachable = {(r, w) for w, mask in ix.eligible.items() for r, i in ix.region_pos.items() if mask[i].any()}
    out = []
    for i, region in enumerate(scenario.regions):
        for w, demand in region.demand_tok_s.items():
            if demand <= 0 or (region.id, w) in reachable:
                continue
            candidates = [
                (ix.rtt(region.id, s), s)
                for s, site in ix.sites.items()
                if not region.allowed_countries or site.country in region.allowed_countries
            ]
            finite = [c for c in candidates if math.isfinite(c[0])]
            field = f"rtt_budget_{w}_ms"
            if finite:
                budget = region.rtt_budget_ms[w]
                hosts = [(rtt, s) for rtt, s in finite if _hosts_class(ix, s, w)]
                in_reach = [(rtt, s) for rtt, s in finite if rtt <= budget + 1e-9]
                # each way out, with the relative change it needs. A site within reach that cannot
                # hold one rack is named first, least change first: its power, cooling or floor is
                # the input that is off (a kW/MW mix-up makes every site look so), while the budget
                # is a service requirement; a wider budget is then offered as the other way out.
                farther = None
                if hosts:
                    rtt, s = min(hosts)
                    farther = (rtt / budget - 1, field, f"the nearest allowed site that can serve '{w}', {ix.sites[s].name} ({s}), is {rtt:.1f} ms away",
                               f"raise {field} to at least {math.ceil(rtt)} ms, or add a candidate site closer to {region.name}.")
                options = [o for rtt, s in in_reach for o in _hosting_options(ix, s, w)]
                if options:
                    _, field, why, fix = min(options, key=lambda o: o[0])
                    if farther is not None:
                        fix = f"{fix.rstrip('.')}; or {farther[3]}"
                elif farther is not None:
                    _, field, why, fix = farther
                if options or farther is not None:
                    if in_reach:
                        rtt, s = min(in_reach)
                        why = f"{len(in_reach)} allowed site(s) are within it (nearest {ix.sites[s].name}, {rtt:.1f} ms) but none can host a rack that serves '{w}': {why}"
                else:
                    rtt, s = min(finite)
                    why = f"the nearest allowed site, {ix.sites[s].name} ({s}), is {rtt:.1f} ms away and no site can host a rack that serves '{w}'"
                    fix = "check the catalog: no rack configuration serves this class at any site's cooling, floor and power."
            elif candidates:
                field = f"rtt_budget_{w}_ms"
                why = "the backbone graph connects it to no candidate site"
                fix = f"add backbone edges from '{region.id}' towards the sites."
            else:
                field = "allowed_countries"
                why = f"no candidate site is in its allowed countries ({';'.join(region.allowed_countries)})"
                fix = "widen allowed_countries or add a site in one of them."
            out.append(
                InputProblem(
                    scenario.files.get("regions", "regions") if field.startswith(("rtt_", "allowed")) else scenario.files.get("sites", "sites"),
                    record_row(scenario, "regions", i) if field.startswith(("rtt_", "allowed")) else None, field,
                    f"region {region.name} ({region.id}) has {demand:,.0f} tok/s of '{w}' demand and no site within its "
                    f"{region.rtt_budget_ms[w]:g} ms budget: {why}.",
                    fix,
                )
            )
    return out


def redundancy_reachable(ix: IndexSets) -> list[InputProblem]:
    """With max_share_per_site < 1 a region needs ceil(1 / max_share) reachable sites."""
    cap = ix.scenario.policies.max_share_per_site
    if cap >= 1:
        return []
    need = math.ceil(1.0 / cap - 1e-9)
    out = []
    reachable = {w: mask.sum(axis=1) for w, mask in ix.eligible.items()}
    for i, region in enumerate(ix.scenario.regions):
        for w in ix.workloads:
            n_sites = int(reachable[w][i])
            if 0 < n_sites < need:
                out.append(
                    InputProblem(
                        ix.scenario.files.get("regions", "regions"), record_row(ix.scenario, "regions", i), f"rtt_budget_{w}_ms",
                        f"region {region.name} ({region.id}) reaches {n_sites} site(s) for '{w}', but max_share_per_site "
                        f"{cap:g} needs at least {need}.",
                        "raise policies.max_share_per_site, widen the budget, or add sites near the region.",
                    )
                )
    return out


def unplaceable_jobs(ix: IndexSets) -> list[InputProblem]:
    """A job no site, fabric and chip combination can hold, with the first cause the
    evidence shows, in this order: density (no allowed cooling holds the chip's racks),
    fabric tier, cluster size, countries, then floor and power."""
    placed = set(ix.place_by_job)
    out = []
    for i, job in enumerate(ix.scenario.jobs):
        if job.id in placed:
            continue
        field, why, fix = _job_cause(ix, job)
        out.append(
            InputProblem(
                ix.scenario.files.get("jobs", "jobs") or "jobs" if field not in ("power_limit_kw", "cooling_allowed") else ix.scenario.files.get("sites", "sites"),
                record_row(ix.scenario, "jobs", i) if field not in ("power_limit_kw", "cooling_allowed") else None, field,
                f"training job {job.name} ({job.id}) needs {job.gpus_h100_equiv:,.0f} H100-equivalent GPUs and cannot be placed whole: {why}.",
                fix,
            )
        )
    return out


def _job_cause(ix: IndexSets, job) -> tuple[str, str, str]:
    """(field, why, fix) for a job with no placement."""
    sites_file = ix.scenario.files.get("sites", "sites.csv")
    chips = [c for c in (job.eligible_chips or sorted(ix.chips)) if c in ix.chips and ix.chips[c].h100_equiv > 0]
    if not chips:
        return "eligible_chips", "none of its eligible chips is a training chip (h100_equiv > 0)", "name a training chip in eligible_chips."
    configs = [k for k, r in ix.racks.items() if r.chip in chips]
    if not configs:
        return "eligible_chips", f"the catalog has no rack configuration of {', '.join(chips)}", "add a rack configuration or another eligible chip."
    allowed = [s for s, site in ix.sites.items() if not job.allowed_countries or site.country in job.allowed_countries]
    held = max((ix.cooling[c].max_kw_per_rack for site in ix.sites.values() for c in site.cooling_allowed), default=0.0)
    least = min(ix.racks[k].kw_per_rack for k in configs)
    if least > held + 1e-9:
        return ("cooling_allowed", f"every rack configuration of {', '.join(chips)} draws at least {least:g} kW per rack and no allowed "
                f"cooling can hold a {least:g} kW rack (the densest allowed holds {held:g} kW)",
                f"allow a cooling that holds {least:g} kW per rack (cooling_allowed in {sites_file}), or add a lower-density configuration.")
    fabrics = [f for f in ix.fabrics.values() if f.tier >= job.min_fabric_tier]
    if not fabrics:
        top = max((f.tier for f in ix.fabrics.values()), default=0)
        return "min_fabric_tier", f"no fabric has tier {job.min_fabric_tier} or above (the highest is {top})", f"lower min_fabric_tier to {top} or add a fabric."
    fitting = [(f, c) for f in fabrics for c in chips if job.gpus_h100_equiv / (f.training_efficiency * ix.chips[c].h100_equiv) <= f.max_cluster_gpus]
    if not fitting:
        largest = max(f.max_cluster_gpus for f in fabrics)
        return "gpus_h100_equiv", f"it needs more GPUs than the largest cluster of any fabric of tier >= {job.min_fabric_tier} ({largest:,} GPUs)", "split the job."
    if not allowed:
        return "allowed_countries", f"no candidate site is in its allowed countries ({';'.join(job.allowed_countries)})", "widen allowed_countries or add a site there."
    # floor and power: the site that comes closest, and what it lacks
    best = None
    for s in allowed:
        site = ix.sites[s]
        options = [(ix.racks[k].gpus_per_rack, ix.racks[k].kw_per_rack * site.pue(ix.cooling[c]))
                   for k in configs for c in site.cooling_allowed if ix.racks[k].kw_per_rack <= ix.cooling[c].max_kw_per_rack + 1e-9]
        if not options:
            continue
        f, c = max(fitting, key=lambda fc: fc[0].training_efficiency * ix.chips[fc[1]].h100_equiv)
        need_gpus = job.gpus_h100_equiv / (f.training_efficiency * ix.chips[c].h100_equiv)
        kw_per_gpu = min(kw / g for g, kw in options)
        gpus_per_rack = max(g for g, _ in options)
        need_kw, need_racks = need_gpus * kw_per_gpu, math.ceil(need_gpus / gpus_per_rack)
        ratio = max(need_kw / site.power_limit_kw, need_racks / max(site.floor_racks, 1))
        if best is None or ratio < best[0]:
            best = (ratio, s, need_kw, need_racks)
    if best is None:
        return ("cooling_allowed", f"no site in its allowed countries allows a cooling that can hold its racks",
                f"allow a denser cooling (cooling_allowed in {sites_file}) at a site in its allowed countries.")
    _, s, need_kw, need_racks = best
    site = ix.sites[s]
    if need_kw / site.power_limit_kw >= need_racks / max(site.floor_racks, 1):
        return ("power_limit_kw", f"the site that comes closest, {site.name} ({s}), has {_power(site.power_limit_kw)} of power and the job "
                f"needs about {_power(need_kw)} ({_power(need_kw - site.power_limit_kw)} missing)",
                f"raise power_limit_kw of {s} in {sites_file} to at least {_power(need_kw)} (is it in MW where kW is meant?), or split the job.")
    return ("floor_racks", f"the site that comes closest, {site.name} ({s}), has {site.floor_racks:,} rack positions and the job needs "
            f"{need_racks:,} ({need_racks - site.floor_racks:,} missing)", f"raise floor_racks of {s} in {sites_file}, or split the job.")


def capacity_shortfall(ix: IndexSets) -> list[InputProblem]:
    """Total class-w demand beyond what every site could serve if it did nothing else.

    Each site's most is the LP bound of its floor and power filled with any mix of its
    class-w racks (index.most_per_site): a mix of sparse and dense racks can serve more
    than the best single configuration when both limits bind, so that would not be a bound.
    """
    out = []
    inf_by_sw = ix.inf_by_sw
    for w, workload in ix.workloads.items():
        demand = sum(r.demand_tok_s.get(w, 0.0) for r in ix.regions.values())
        if demand <= 0:
            continue
        possible = sum(
            most_per_site(
                [(ix.tok_s_per_rack[k, w], ix.racks[k].kw_per_rack * ix.sites[s].pue(ix.cooling[c])) for k, c in inf_by_sw.get((s, w), [])],
                ix.sites[s].floor_racks, ix.sites[s].power_limit_kw,
            )
            for s in ix.sites
        )
        if demand > possible * (1 + 1e-9):
            # with power unlimited, would the floor do? then power is what binds: name it, and by how much
            by_floor = sum(
                max((ix.tok_s_per_rack[k, w] for k, c in inf_by_sw.get((s, w), [])), default=0.0) * ix.sites[s].floor_racks for s in ix.sites
            )
            fix = "lower demand, add sites or power, or raise inference_target_utilization."
            if by_floor >= demand:
                factor = demand / max(possible, 1e-9)
                fix = (f"power_limit_kw in {ix.scenario.files.get('sites', 'sites.csv')} binds (the floor alone could serve {by_floor:,.0f} tok/s): "
                       f"the sites need about {factor:,.1f}x their power" + (" (is it in MW where kW is meant?)" if factor > 100 else "") +
                       "; or lower demand, or add sites.")
            out.append(
                InputProblem(
                    ix.scenario.files.get("regions", "regions"), None, f"demand_{w}_tok_s",
                    f"total '{w}' demand is {demand:,.0f} tok/s but all reachable sites together could serve at most "
                    f"{possible:,.0f} tok/s (every site's floor and power filled with its racks for '{w}').",
                    fix,
                )
            )
    return out


CHECKS = (unreachable_regions, redundancy_reachable, unplaceable_jobs, capacity_shortfall, failover_reachable, standby_reachable)


def precheck(ix: IndexSets) -> list[InputProblem]:
    """Every problem the cheap checks find."""
    return [problem for check in CHECKS for problem in check(ix)]


def checked_index(scenario: Scenario, max_full_pairs: int = MAX_FULL_PAIRS, pruning: PruningRules = PruningRules()) -> IndexSets:
    """The scenario's index sets, or ScenarioError listing what cannot work (`dcplace validate`)."""
    ix = build_index(scenario, max_full_pairs, pruning)
    problems = precheck(ix)
    if problems:
        raise ScenarioError(problems)
    return ix
