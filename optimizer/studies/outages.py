"""The outage table: what losing each open site of a plan costs (docs/resilience.md).

Works on any plan folder, N-1-secure or not (a strategist wants it for today's plans too):

    table = outage_table("plan")
    for o in table.outages: print(o.site, o.at_risk_tok_s, o.fallback_rtt_ms)

For every open site f and every class it serves, all of f's load is lost at once; an LP
(optimizer.solving.failover.reroute_lp) re-serves as much of it as the other sites' spare
capacity (built capacity minus their own load) can hold within each region's failover
budget, over the shortest round trips. What it cannot re-serve is at risk. Training jobs
placed at f stall: a job with a standby site loses `policies.standby_resume_days`, one
without loses the outage, `policies.site_outage_days`; an interruptible job that ran in f's
troughs loses the GPU-hours f gave it for the outage: that share of its day times the outage's
days counts as its job-days at risk (what re-served load takes from other sites' troughs is not
counted).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from dcplace.models import Scenario, load_scenario
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.optimizer.model.index import IndexSets, build_index
from dcplace.optimizer.model.resilience import failover_budget_ms, reach_mask, survivable
from dcplace.optimizer.solving.failover import ServingState, failover_arcs, lost_need, reroute_lp, with_load


AT_RISK_TOL_TOK_S = 1e-6  # below this, a loss leaves nothing at risk (the re-route LP's round-off)


class NoOutageTable(Exception):
    """The folder holds no plan to take sites away from; the message says why and what to do."""


@dataclass(frozen=True)
class RegionLoss:
    region: str
    region_name: str
    workload: str
    lost_tok_s: float  # what the region was served from the lost site
    reserved_tok_s: float  # re-served elsewhere within its failover budget
    at_risk_tok_s: float  # neither
    normal_rtt_ms: float  # of the lost site
    fallback_rtt_ms: float | None  # tok/s-weighted round trip of what is re-served; None when nothing is
    failover_budget_ms: float


@dataclass(frozen=True)
class JobLoss:
    job: str
    name: str
    gpus_h100_equiv: float  # placed whole: the job's size; in the troughs: the GPU-hours it ran at the site / 24
    standby_site: str | None
    days_at_risk: float
    troughs_share: float | None = None  # in the troughs: the share of its daily GPU-hours the lost site gave it


@dataclass(frozen=True)
class SiteOutage:
    site: str
    name: str
    lost_tok_s: dict[str, float]  # class -> tok/s the site served
    reserved_tok_s: dict[str, float]
    at_risk_tok_s: dict[str, float]
    regions: list[RegionLoss]
    jobs: list[JobLoss]
    meets_policy: bool | None  # the loss keeps policies.survive_site_loss; None when no class must survive

    @property
    def lost_total_tok_s(self) -> float:
        return sum(self.lost_tok_s.values())

    @property
    def at_risk_total_tok_s(self) -> float:
        return sum(self.at_risk_tok_s.values())

    @property
    def fallback_rtt_ms(self) -> float | None:
        moved = sum(r.reserved_tok_s for r in self.regions)
        if moved <= 0:
            return None
        return sum(r.reserved_tok_s * (r.fallback_rtt_ms or 0.0) for r in self.regions) / moved

    @property
    def training_days_at_risk(self) -> float:
        return sum(j.days_at_risk for j in self.jobs)

    @property
    def gpu_days_at_risk(self) -> float:
        return sum(j.days_at_risk * j.gpus_h100_equiv for j in self.jobs)

    def regions_at_risk(self) -> list[RegionLoss]:
        return sorted((r for r in self.regions if r.at_risk_tok_s > AT_RISK_TOL_TOK_S), key=lambda r: -r.at_risk_tok_s)


@dataclass(frozen=True)
class OutageTable:
    folder: str
    scenario: str
    survive_site_loss: dict[str, float]
    site_outage_days: float
    standby_resume_days: float
    outages: list[SiteOutage] = field(default_factory=list)
    class_names: dict[str, str] = field(default_factory=dict)  # class id -> its display name

    def class_name(self, workload: str) -> str:
        return self.class_names.get(workload, workload)

    @property
    def secure(self) -> bool | None:
        """Every loss keeps the policy (None when the scenario asks no class to survive)."""
        if not self.survive_site_loss:
            return None
        return all(o.meets_policy is not False for o in self.outages)

    def worst(self) -> SiteOutage | None:
        return max(self.outages, key=lambda o: (o.at_risk_total_tok_s, o.gpu_days_at_risk), default=None)

    @property
    def served_tok_s(self) -> float:
        """The plan's peak inference: what every open site serves, summed (each loss takes its own)."""
        return sum(o.lost_total_tok_s for o in self.outages)

    def breaks(self, outage: SiteOutage) -> bool:
        """The loss leaves short a class it should not: one the policy names, or any class when
        the scenario names none (today's plan, judged as it is)."""
        if self.survive_site_loss:
            return outage.meets_policy is False
        return outage.at_risk_total_tok_s > AT_RISK_TOL_TOK_S


def state_from_plan(plan: Plan, ix: IndexSets) -> ServingState:
    """Capacity per (site, class) from the plan's inference rack lines, shares from its assignments."""
    capacity: dict[tuple[str, str], float] = defaultdict(float)
    for site in plan.sites:
        for line in site.racks:
            if line.purpose == "inference" and (line.config, line.workload) in ix.tok_s_per_rack:
                capacity[site.id, line.workload] += line.racks * ix.tok_s_per_rack[line.config, line.workload]
    shares = {(a.region, a.workload, a.site): a.share for a in plan.assignments}
    return with_load(ServingState({s.id for s in plan.sites if s.open}, dict(capacity), shares), ix)


def outages_of(plan: Plan, scenario: Scenario, folder: str = "") -> OutageTable:
    """The outage table of a solved plan of `scenario`."""
    if plan.solve.status not in HAS_PLAN:
        raise NoOutageTable(f"{folder or plan.scenario}: the scenario was {plan.solve.status}; there is no plan to take sites "
                            "away from. Fix: loosen the limits its diagnosis names, re-solve, then run outages on the new folder.")
    ix = build_index(scenario)
    state = state_from_plan(plan, ix)
    policy = survivable(scenario)
    pol = scenario.policies
    reach = {w: reach_mask(ix, w) for w in ix.workloads}
    jobs_at = defaultdict(list)
    for p in plan.jobs:
        jobs_at[p.site].append(p)
    # interruptible jobs in the troughs: the GPU-hours each site gave each job a day (H100-equivalent)
    trough_hours: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    trough_total: dict[str, float] = defaultdict(float)
    for b in plan.backfill:
        trough_hours[b.site][b.job] += b.h100_gpu_hours_per_day
        trough_total[b.job] += b.h100_gpu_hours_per_day
    job_names = {j.id: j.name for j in scenario.jobs}
    outages = []
    for site in plan.sites:
        if not site.open:
            continue
        f = site.id
        lost, reserved, at_risk, regions = {}, {}, {}, []
        meets = None if not policy else True
        for w in ix.workloads:
            need = lost_need(state, ix, f, w, 1.0)
            if not need:
                continue
            arcs = failover_arcs(ix, need, w, f, reach[w])
            result = reroute_lp(need, state.spare(w), arcs)
            moved = defaultdict(float)
            rtt_moved = defaultdict(float)
            for (r, s), v in result.flows.items():
                moved[r] += v
                rtt_moved[r] += v * arcs[r, s]
            for r, v in sorted(need.items()):
                region = ix.regions[r]
                regions.append(RegionLoss(
                    r, region.name, w, v, moved[r], result.unserved_tok_s.get(r, 0.0), ix.rtt(r, f),
                    rtt_moved[r] / moved[r] if moved[r] > 1e-9 else None, failover_budget_ms(scenario, region, w)))
            lost[w], reserved[w], at_risk[w] = sum(need.values()), sum(moved.values()), result.short_tok_s
            if w in policy:
                kept = policy[w]
                must = lost_need(state, ix, f, w, kept)
                if must and reroute_lp(must, state.spare(w), failover_arcs(ix, must, w, f, reach[w])).breaks:
                    meets = False
        jobs = [JobLoss(p.job, p.name, p.gpus_h100_equiv, p.standby_site,
                        pol.standby_resume_days if p.standby_site else pol.site_outage_days) for p in jobs_at.get(f, [])]
        # a job in the troughs loses the share of its GPU-hours the site gave it: that share of the outage's days
        jobs += [JobLoss(j, job_names.get(j, j), hours / 24.0, None, pol.site_outage_days * hours / trough_total[j],
                         hours / trough_total[j])
                 for j, hours in sorted(trough_hours.get(f, {}).items()) if hours > 1e-9]
        outages.append(SiteOutage(f, site.name, lost, reserved, at_risk, regions, jobs, meets))
    return OutageTable(folder, plan.scenario, dict(policy), pol.site_outage_days, pol.standby_resume_days, outages,
                       {w.id: w.name for w in scenario.catalog.workloads})


def outage_table(folder: str | Path) -> OutageTable:
    """The outage table of a plan folder (plan.json and inputs/ only)."""
    folder = Path(folder)
    if not (folder / "plan.json").is_file() or not (folder / "inputs" / "scenario.yaml").is_file():
        raise NoOutageTable(f"{folder}: not a plan folder (plan.json and inputs/scenario.yaml are needed). "
                            "Fix: give a folder written by `dcplace solve`.")
    return outages_of(read_plan(folder), load_scenario(folder / "inputs" / "scenario.yaml"), str(folder))


__all__ = ["AT_RISK_TOL_TOK_S", "OutageTable", "SiteOutage", "RegionLoss", "JobLoss", "NoOutageTable", "outage_table", "outages_of", "state_from_plan"]
