"""Cheap checks before solving: what cannot work, named in the user's terms.

Each returns InputProblems that name the file, the row and the field at fault, so that
`dcplace validate` and `dcplace solve` report them exactly like a bad cell.
"""

from __future__ import annotations

import math

from dcplace.models import InputProblem, Scenario, ScenarioError
from dcplace.optimizer.model.index import MAX_FULL_PAIRS, IndexSets, PruningRules, build_index, most_per_site


def _row(scenario: Scenario, table: str, position: int) -> int | None:
    """CSV row of the record at `position` (header is row 1); feature number for geo files."""
    name = scenario.files.get(table, "")
    return position + (2 if name.lower().endswith(".csv") else 1) if name else None


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
            if finite:
                rtt, s = min(finite)
                why = f"the nearest allowed site, {ix.sites[s].name} ({s}), is {rtt:.1f} ms away"
                if rtt <= region.rtt_budget_ms[w]:
                    why += f" but cannot host any rack that serves '{w}'"
                fix = f"raise rtt_budget_{w}_ms to at least {math.ceil(rtt)} ms, or add a candidate site closer to {region.name}."
            elif candidates:
                why = "the backbone graph connects it to no candidate site"
                fix = f"add backbone edges from '{region.id}' towards the sites."
            else:
                why = f"no candidate site is in its allowed countries ({';'.join(region.allowed_countries)})"
                fix = "widen allowed_countries or add a site in one of them."
            out.append(
                InputProblem(
                    scenario.files.get("regions", "regions"), _row(scenario, "regions", i), f"rtt_budget_{w}_ms",
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
                        ix.scenario.files.get("regions", "regions"), _row(ix.scenario, "regions", i), f"rtt_budget_{w}_ms",
                        f"region {region.name} ({region.id}) reaches {n_sites} site(s) for '{w}', but max_share_per_site "
                        f"{cap:g} needs at least {need}.",
                        "raise policies.max_share_per_site, widen the budget, or add sites near the region.",
                    )
                )
    return out


def unplaceable_jobs(ix: IndexSets) -> list[InputProblem]:
    """A job no site, fabric and chip combination can hold."""
    placed = set(ix.group("place_by_job"))
    out = []
    largest = max((f.max_cluster_gpus for f in ix.fabrics.values()), default=0)
    for i, job in enumerate(ix.scenario.jobs):
        if job.id in placed:
            continue
        out.append(
            InputProblem(
                ix.scenario.files.get("jobs", "jobs") or "jobs", _row(ix.scenario, "jobs", i), "gpus_h100_equiv",
                f"training job {job.name} ({job.id}) needs {job.gpus_h100_equiv:,.0f} H100-equivalent GPUs and no allowed site, "
                f"fabric (tier >= {job.min_fabric_tier}, largest cluster {largest:,} GPUs) and eligible chip can hold it whole.",
                "split the job, relax min_fabric_tier, eligible_chips or allowed_countries, or add a site with more power and floor space.",
            )
        )
    return out


def capacity_shortfall(ix: IndexSets) -> list[InputProblem]:
    """Total class-w demand beyond what every site could serve if it did nothing else.

    Each site's most is the LP bound of its floor and power filled with any mix of its
    class-w racks (index.most_per_site): a mix of sparse and dense racks can serve more
    than the best single configuration when both limits bind, so that would not be a bound.
    """
    out = []
    inf_by_sw = ix.group("inf_by_sw")
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
            out.append(
                InputProblem(
                    ix.scenario.files.get("regions", "regions"), None, f"demand_{w}_tok_s",
                    f"total '{w}' demand is {demand:,.0f} tok/s but all reachable sites together could serve at most "
                    f"{possible:,.0f} tok/s (every site's floor and power filled with its racks for '{w}').",
                    "lower demand, add sites or power, or raise inference_target_utilization.",
                )
            )
    return out


CHECKS = (unreachable_regions, redundancy_reachable, unplaceable_jobs, capacity_shortfall)


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
