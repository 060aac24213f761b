"""Cross-checks of the clock's inputs (docs/clock.md): the daily profiles and the cloud regions."""

from __future__ import annotations

from dcplace.models.errors import ProblemLog
from dcplace.models.interactivity import tok_s_at_target
from dcplace.models.records import Catalog, Clock
from dcplace.models.tables import known_hint


def check_clock_inputs(ptable: str, ctable: str, label: str, clock: Clock, profiles, clouds, regions, catalog: Catalog,
                       log: ProblemLog, profile_rows_dropped: bool = False) -> None:
    """Profiles: known classes and regions, 24 hours each, peak 1; the clock needs a profile
    for every class; cloud regions rent a catalog chip that can serve or train something;
    clock.inference_fabric_tier is a tier some fabric of the catalog reaches. `ptable` and `ctable`
    name the two tables' files in messages. With `profile_rows_dropped` (rows of the profiles
    table, or the whole file, already refused) the whole-profile checks are skipped: what was
    refused would show up again as a missing hour, a wrong peak or a class without a profile."""
    workload_ids = {w.id for w in catalog.workloads}
    region_ids = {r.id for _, r in regions}
    hours: dict[tuple[str, str], dict[int, int]] = {}
    for row, p in profiles:
        if p.workload not in workload_ids:
            log.add(ptable, row, "workload", f"unknown workload class '{p.workload}'.", known_hint("workload classes", workload_ids))
            continue
        if p.region and p.region not in region_ids:
            log.add(ptable, row, "region", f"unknown region '{p.region}'.", "use an id from the regions table, or leave it empty for every region.")
            continue
        seen = hours.setdefault((p.workload, p.region), {})
        if p.local_hour in seen:
            log.add(ptable, row, "local_hour", f"hour {p.local_hour} of '{p.workload}'{' in ' + p.region if p.region else ''} is given twice "
                    f"(rows {seen[p.local_hour]} and {row}).", "keep one row per class, region and hour.")
        seen[p.local_hour] = row
    for (w, r), seen in ({} if profile_rows_dropped else hours).items():
        where = f" in region '{r}'" if r else ""
        missing = sorted(set(range(24)) - set(seen))
        if missing:
            log.add(ptable, None, "local_hour", f"the profile of '{w}'{where} has no row for hour(s) {', '.join(map(str, missing))}.",
                    "give all 24 local hours, 0..23.")
        peak = max(p.load for _, p in profiles if (p.workload, p.region) == (w, r))
        if peak <= 0:
            log.add(ptable, None, "load", f"the profile of '{w}'{where} is 0 at every hour: it has no peak to be relative to.",
                    "give each hour's load relative to the day's busiest hour (that hour 1); a class with no demand "
                    "needs no profile rows, or set its demand to 0 in the regions table.")
        elif abs(peak - 1.0) > 1e-6:
            log.add(ptable, None, "load", f"the profile of '{w}'{where} peaks at {peak:g}, not 1: loads are relative to the day's peak.",
                    f"divide every load of this profile by {peak:g}.")
    if clock.on and not profile_rows_dropped:
        demanded = {w for _, r in regions for w, d in r.demand_tok_s.items() if d > 0}
        for w in sorted(demanded):
            if (w, "") not in hours and not all((w, r.id) in hours for _, r in regions if r.demand_tok_s.get(w, 0) > 0):
                log.add(label, None, "clock.hours", f"the clock is on (hours {clock.hours}) but class '{w}' has no daily profile.",
                        f"add 24 rows (workload {w}, local_hour 0..23, load) to the profiles table ({ptable}), named under profiles: in the scenario.")
    chips = {c.id: c for c in catalog.chips}
    serves = {chip for chip, _ in tok_s_at_target(catalog)}
    tiers = sorted({f.tier for f in catalog.fabrics})
    tiers_text = f"the catalog's fabrics have tiers {', '.join(map(str, tiers))}" if tiers else "the catalog has no fabric"
    if clock.on and clock.inference_fabric_tier > max(tiers, default=0):
        log.add(label, None, "clock.inference_fabric_tier", f"no fabric has tier {clock.inference_fabric_tier} or above ({tiers_text}).",
                f"give the tier of the catalog fabric inference racks sit on (at most {max(tiers, default=0)}), or add that fabric.")
    for row, q in clouds:
        if q.chip not in chips:
            log.add(ctable, row, "chip", f"cloud region '{q.id}' rents unknown chip '{q.chip}'.", known_hint("chips", set(chips)))
        elif q.chip not in serves and not chips[q.chip].h100_equiv:
            log.add(ctable, row, "chip", f"chip '{q.chip}' has no throughput and no h100_equiv: renting it serves nothing.",
                    "rent a chip the catalog gives a throughput or a training equivalence.")
        if q.usd_per_gpu_hour_on_demand is None and q.usd_per_gpu_hour_reserved is None:
            log.add(ctable, row, "usd_per_gpu_hour_on_demand", f"cloud region '{q.id}' has neither an on-demand nor a reserved price.",
                    "give usd_per_gpu_hour_on_demand or usd_per_gpu_hour_reserved.")


def check_routing(label: str, clock: Clock, policies, periods, log: ProblemLog) -> None:
    """clock.routing 'hour' needs the clock on, and is not combined with N-1 (whose failover
    rows size for one share per region and site) or with periods (not built for it)."""
    if clock.routing != "hour":
        return
    if not clock.on:
        log.add(label, None, "clock.routing", "routing per hour needs the clock on, but clock.hours is 0.",
                "set clock.hours to 24 (or 1..23 representative blocks), or clock.routing to day.")
    if policies.survive_site_loss:
        log.add(label, None, "clock.routing", "routing per hour is not combined with policies.survive_site_loss: the failover "
                "rows re-serve one share per region and site.", "set clock.routing to day, or drop policies.survive_site_loss.")
    if periods:
        log.add(label, None, "clock.routing", "routing per hour is not combined with periods.",
                "set clock.routing to day, or plan one period at a time.")
