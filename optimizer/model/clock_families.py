"""Constraint families of the clock: its columns, its objective terms and its rows (docs/clock.md).

The clock's sets (time zones, profiles, represented hours, the sparse hourly sets, rentals, the
merit-order dispatch) are in optimizer.model.clock, as N-1's are in optimizer.model.resilience;
this module builds on them, as optimizer.model.failover does on those. Notation as in
optimizer.model.formulation, plus:
  H, w_h          the represented UTC hours and the hours of the day each stands for (sum 24);
  p[r,w,h]        region r's class-w load at hour h in its local time, peak 1 (ClockSets.p);
  g               a dispatch group: a chip, or a config where a chip's configs differ in kW per GPU;
  token_hours[s,g,c,w], busy[s,g,c,w,h], backfill[j,s,g,w,h], share_h[r,w,s,h],
  rent_share[r,w,q], rent_od[q,w,h], rent_res[q,w], rent_trn[j,q]: the columns of add_clock_variables.
With the clock off none of the hourly families writes a row; rentals work with it off too.
"""

from __future__ import annotations

import numpy as np

from dcplace.optimizer.model.clock import (HOURS_PER_DAY, busy_kw_per_gpu, day_weighted_load, hourly_load, lent_kw_per_gpu,
                                           rented_training_gpus, serving_options, tok_s_per_gpu, trough_jobs)
from dcplace.optimizer.model.families import Relax, family
from dcplace.optimizer.model.linear import LinearModel


# ------------------------------------------------------------------------- columns


def add_clock_variables(lm: LinearModel, ix) -> None:
    """token_hours[s,g,c,w] >= 0 tok/s-hours a day served by group g in c zones (clock on);
    share_h[r,w,s,h] in [0, max share]: the part of (r, w) served from s in represented hour h (clock.routing hour);
    backfill[j,s,g,w,h] >= 0 GPUs lent to job j; rent_share[r,w,q] in [0, max share];
    rent_od[q,w,h], rent_res[q,w] >= 0 GPUs; rent_trn[j,q] binary."""
    ck = ix.clock
    if ck.busy:
        lm.add_block("busy", ck.busy, 0.0, np.inf, "continuous")
    elif ck.on and ck.configs:
        lm.add_block("token_hours", sorted(ck.configs), 0.0, np.inf, "continuous")
    if ck.backfill:
        lm.add_block("backfill", ck.backfill, 0.0, np.inf, "continuous")
    if ck.share_h:
        lm.add_block("share_h", ck.share_h, 0.0, ix.scenario.policies.max_share_per_site, "continuous")
    if ck.rent_serve:
        lm.add_block("rent_share", ck.rent_serve, 0.0, ix.scenario.policies.max_share_per_site, "continuous")
    if ck.rent_on_demand:
        lm.add_block("rent_od", ck.rent_on_demand, 0.0, np.inf, "continuous")
    if ck.rent_reserved:
        lm.add_block("rent_res", ck.rent_reserved, 0.0, np.inf, "continuous")
    if ck.rent_train:
        lm.add_block("rent_trn", ck.rent_train, 0.0, 1.0, "binary")

def clock_costs(lm: LinearModel, ix) -> None:
    """Objective terms. Energy that follows the load (clock on): each tok/s-hour a group serves
    (token_hours, split by busy_energy_split) pays that group's busy power per token; lent GPUs
    pay at their coolest zone. This is a lower bound on the energy of any hourly dispatch of the
    racks built (the split ignores which hour a token falls in); the plan's energy is the
    merit-order dispatch itself, and its gap is restated against this bound
    (optimizer.solving.solve). Rented GPU-hours: on demand for the hours rented, reserved for
    every hour (power included in the price)."""
    ck, econ = ix.clock, ix.scenario.economics
    days = ck.days_per_year(ix.scenario)

    def energy(block: str, key, s: str, mwh: float) -> None:
        site = ix.sites[s]
        lm.add_cost("energy", lm.col(block, key), mwh * site.power_price_usd_per_mwh)
        if econ.carbon_price_usd_per_t:
            lm.add_cost("carbon", lm.col(block, key), mwh * site.grid_carbon_g_per_kwh / 1000.0 * econ.carbon_price_usd_per_t)

    if ck.on:
        for key in lm.blocks["token_hours"].keys if "token_hours" in lm.blocks else []:
            s, g, c, w = key
            energy("token_hours", key, s, busy_kw_per_gpu(ix, s, g, c) / tok_s_per_gpu(ix, ck.group_chip[g], w) * days / 1000.0)
        for key in ck.busy:
            s, g, c, w, h = key
            energy("busy", key, s, busy_kw_per_gpu(ix, s, g, c) * ck.weight_h[h] * days / 1000.0)
        for key in ck.backfill:
            j, s, g, w, h = key
            energy("backfill", key, s, lent_kw_per_gpu(ix, s, g, w) * ck.weight_h[h] * days / 1000.0)
    clouds = {q.id: q for q in ix.scenario.cloud_regions}
    for q, w, h in ck.rent_on_demand:
        lm.add_cost("rental", lm.col("rent_od", (q, w, h)), clouds[q].usd_per_gpu_hour_on_demand * ck.weight_h[h] * days)
    for q, w in ck.rent_reserved:
        lm.add_cost("rental", lm.col("rent_res", (q, w)), clouds[q].usd_per_gpu_hour_reserved * econ.hours_per_year)
    for j, q in ck.rent_train:
        lm.add_cost("rental", lm.col("rent_trn", (j, q)),
                    rented_training_gpus(ix, j, clouds[q].chip) * clouds[q].usd_per_gpu_hour_reserved * econ.hours_per_year)


def clock_emissions(lm: LinearModel, ix) -> list[tuple[int, float]]:
    """t CO2 per year of busy GPUs (the exact dispatch the model carries under a carbon cap,
    which becomes the plan's) and lent GPUs (at their warmest zone: an upper bound), for the cap."""
    ck = ix.clock
    if not ck.on:
        return []
    days = ck.days_per_year(ix.scenario)
    out = []
    for key in ck.busy:
        s, g, c, w, h = key
        mwh = busy_kw_per_gpu(ix, s, g, c) * ck.weight_h[h] * days / 1000.0
        out.append((lm.col("busy", key), mwh * ix.sites[s].grid_carbon_g_per_kwh / 1000.0))
    for key in ck.backfill:
        j, s, g, w, h = key
        mwh = lent_kw_per_gpu(ix, s, g, w, max) * ck.weight_h[h] * days / 1000.0
        out.append((lm.col("backfill", key), mwh * ix.sites[s].grid_carbon_g_per_kwh / 1000.0))
    return out


# ------------------------------------------------------------------------ families


def _installed(lm: LinearModel, ix) -> dict[tuple[str, str, str], list[tuple[int, float]]]:
    """(s, g, w) -> -GPUs installed in group g for class w at s (every cooling), in one pass over
    the configs (a scan per (s, g, w, h) took 4.2 s of the default world's 4.7 s 24-hour build)."""
    out: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for (s, g, c, w), configs in ix.clock.configs.items():
        out.setdefault((s, g, w), []).extend(
            (lm.col("racks_inf", (s, k, c, w)), -float(ix.racks[k].gpus_per_rack)) for k in configs)
    return out


def _load_terms(lm: LinearModel, ix, by_sw: dict, s: str, w: str, hours: list[int]) -> dict[int, list[tuple[int, float]]]:
    """represented hour h -> the load the shares put on (s, w) at h, for each h of `hours`: share[r,w,s] x
    demand[r,w] x p[r,w,h], with routing per hour share_h[r,w,s,h] in place of share[r,w,s]. The columns and
    the regions' loads are looked up once per (s, w), not once per hour."""
    ck = ix.clock
    regions = by_sw.get((s, w), [])
    if ck.hourly_routing:
        return {h: [(lm.col("share_h", (r, w, s, h)), ix.demand(r, w) * ck.p(r, w, h)) for r in regions] for h in hours}
    cols = [lm.col("share", (r, w, s)) for r in regions]
    load = np.array([hourly_load(ix, r, w) for r in regions]).reshape(len(regions), len(ck.hours))
    return {h: list(zip(cols, load[:, ck.hour_pos[h]].tolist())) for h in hours}


@family(priced=True, checker="check_clock", section="clock", not_relaxed="a law of the model: the load is what the racks serve; "
        "the limits behind it (power, floor, demand) are relaxed instead")
def hourly_serving(lm: LinearModel, ix) -> None:
    """sum_r share[r,w,s] * demand[r,w] * p[r,w,h] + sum_{j,g} backfill[j,s,g,w,h] * tok_s[g,w]
      - sum_{k,c} racks_inf[s,k,c,w] * tok_s[k,w] <= 0   for every (s,w,h)   (clock on; replaces inference_capacity).
    p[r,w,h] is the class's profile in r's local time at UTC hour h (peak 1); GPUs lent to interruptible jobs in
    that hour serve nothing. Hours another hour dominates at (s,w) are implied and left out (ClockSets.binding_hours).
    With routing per hour (clock.routing hour) share_h[r,w,s,h] takes the place of share[r,w,s] and every hour is kept."""
    ck = ix.clock
    if not ck.on:
        return
    by_sw = ix.serve_by_sw
    lent: dict[tuple, list] = {}
    for key in ck.backfill:
        j, s, g, w, h = key
        lent.setdefault((s, w, h), []).append((lm.col("backfill", key), tok_s_per_gpu(ix, ck.group_chip[g], w)))
    for (s, w), racks in ix.inf_by_sw.items():
        capacity = [(lm.col("racks_inf", (s, k, c, w)), -ix.tok_s_per_rack[k, w]) for k, c in racks]
        hours = ck.binding_hours.get((s, w), ck.hours)
        load = _load_terms(lm, ix, by_sw, s, w, hours)
        for h in hours:
            lm.add_row("hourly_serving", (s, w, h), load[h] + lent.get((s, w, h), []) + capacity, upper=0.0)


def _hour_demand_fields(ix, key, share: float) -> dict:
    r, w, h = key
    region = ix.regions[r]
    load = region.demand_tok_s[w] * ix.clock.p(r, w, h)
    return dict(region=region.name, w=w, h=h, load=f"{load:,.0f}", short=f"{share * load:,.0f}", budget=f"{region.rtt_budget_ms[w]:g}")


@family(checker="check_hourly_routing", section="clock", relax=Relax(
    "short", "share of the region's demand in that hour", lambda ix, key: 1.0,
    "region {region} '{w}' load {load} tok/s at {h}:00 UTC is short by {short} tok/s within {budget} ms: add power or floor "
    "space at a site within reach, or widen the budget", _hour_demand_fields,
    "regions.csv demand_<class>_tok_s or rtt_budget_<class>_ms", weight=1e6))
def hourly_demand_met(lm: LinearModel, ix) -> None:
    """sum_s share_h[r,w,s,h] + sum_q rent_share[r,w,q] = 1   for every (r,w) with demand > 0 and every represented
    hour h (clock.routing hour; demand_met is then implied by hourly_share_mean and left out). Rented shares stay one
    per day."""
    ck = ix.clock
    if not ck.hourly_routing:
        return
    for (r, w), sites, clouds in serving_options(ix):
        rented = [(lm.col("rent_share", (r, w, q)), 1.0) for q in clouds]
        for h in ck.hours:
            row = [(lm.col("share_h", (r, w, s, h)), 1.0) for s in sites]
            lm.add_row("hourly_demand_met", (r, w, h), row + rented, lower=1.0, upper=1.0)


@family(checker="check_hourly_routing", section="clock", not_relaxed="a definition that limits no plan: the day's "
        "share carries the transport cost (the plan's assignments are the hours' mean whatever the model holds)")
def hourly_share_mean(lm: LinearModel, ix) -> None:
    """share[r,w,s] - sum_h (w_h / 24) * share_h[r,w,s,h] = 0   for every serving pair (clock.routing hour): the
    day-share is the hours' weighted mean, which carries the pair's transport cost, its link to open[s]
    (share_needs_open: every share_h is 0 at a closed site) and its line in assignments.csv."""
    ck = ix.clock
    if not ck.hourly_routing:
        return
    for r, w, s in ix.serve:
        row = [(lm.col("share", (r, w, s)), 1.0)] + [(lm.col("share_h", (r, w, s, h)), -ck.weight_h[h] / HOURS_PER_DAY) for h in ck.hours]
        lm.add_row("hourly_share_mean", (r, w, s), row, lower=0.0, upper=0.0)


@family(priced=True, checker="check_cost", section="clock", not_relaxed="bounds the objective's energy, limits no plan: every plan "
        "has a split (its dispatch's), so relaxing it would move nothing")
def busy_energy_split(lm: LinearModel, ix) -> None:
    """sum_{g,c} token_hours[s,g,c,w] - sum_r share[r,w,s] * demand[r,w] * sum_h w_h p[r,w,h] >= 0   for every (s,w)
    (clock on): the day's served tok/s-hours at s are split among the groups that serve them, each paying its busy power.
    With routing per hour the served term is sum_{r,h} share_h[r,w,s,h] * demand[r,w] * w_h * p[r,w,h]."""
    ck = ix.clock
    if not ck.on or ck.busy:
        return
    by_sw = ix.serve_by_sw
    split: dict[tuple, list] = {}
    for key in ck.configs:
        s, g, c, w = key
        split.setdefault((s, w), []).append((lm.col("token_hours", key), 1.0))
    for (s, w), cols in split.items():
        if ck.hourly_routing:
            served = [(lm.col("share_h", (r, w, s, h)), -ix.demand(r, w) * ck.weight_h[h] * ck.p(r, w, h))
                      for r in by_sw.get((s, w), []) for h in ck.hours]
        else:
            served = [(lm.col("share", (r, w, s)), -day_weighted_load(ix, r, w)) for r in by_sw.get((s, w), [])]
        lm.add_row("busy_energy_split", (s, w), cols + served, lower=0.0)


@family(checker="check_cost", section="clock", not_relaxed="bounds the objective's energy, limits no plan: a group serves "
        "at most 24 hours a day of what it has installed")
def busy_energy_within_racks(lm: LinearModel, ix) -> None:
    """token_hours[s,g,c,w] - 24 * sum_{k in g} racks_inf[s,k,c,w] * gpus[k] * tok_s[g,w] <= 0   for every (s,g,c,w)   (clock on)."""
    ck = ix.clock
    if not ck.on or ck.busy:
        return
    for key, configs in ck.configs.items():
        s, g, c, w = key
        tok = tok_s_per_gpu(ix, ck.group_chip[g], w)
        racks = [(lm.col("racks_inf", (s, k, c, w)), -HOURS_PER_DAY * ix.racks[k].gpus_per_rack * tok) for k in configs]
        lm.add_row("busy_energy_within_racks", key, [(lm.col("token_hours", key), 1.0)] + racks, upper=0.0)


@family(priced=True, checker="check_clock", section="clock", not_relaxed="a law of the model: the load is what the busy GPUs serve")
def busy_serves_load(lm: LinearModel, ix) -> None:
    """sum_r share[r,w,s] * demand[r,w] * p[r,w,h] - sum_{g,c} busy[s,g,c,w,h] * tok_s[g,w] <= 0   for every (s,w,h)
    (clock on under a carbon cap: the dispatch is a variable, so the cap holds for the plan's own; with routing per
    hour share_h[r,w,s,h] in place of share[r,w,s])."""
    ck = ix.clock
    if not ck.busy:
        return
    by_sw = ix.serve_by_sw
    busy: dict[tuple, list] = {}
    for key in ck.busy:
        s, g, c, w, h = key
        busy.setdefault((s, w, h), []).append((lm.col("busy", key), -tok_s_per_gpu(ix, ck.group_chip[g], w)))
    load: dict[tuple, dict] = {}
    for (s, w, h), cols in busy.items():
        if (s, w) not in load:
            load[s, w] = _load_terms(lm, ix, by_sw, s, w, ck.hours)
        lm.add_row("busy_serves_load", (s, w, h), load[s, w][h] + cols, upper=0.0)


@family(checker="check_clock", section="clock", not_relaxed="a law of the model: a GPU is busy only if it is installed")
def busy_within_racks(lm: LinearModel, ix) -> None:
    """busy[s,g,c,w,h] - sum_{k in g} racks_inf[s,k,c,w] * gpus[k] <= 0   for every (s,g,c,w,h)   (clock on under a carbon cap)."""
    ck = ix.clock
    for key in ck.busy:
        s, g, c, w, h = key
        racks = [(lm.col("racks_inf", (s, k, c, w)), -float(ix.racks[k].gpus_per_rack)) for k in ck.configs[s, g, c, w]]
        lm.add_row("busy_within_racks", key, [(lm.col("busy", key), 1.0)] + racks, upper=0.0)


@family(checker="check_clock", section="clock", not_relaxed="a law of the model: a GPU lent to training is an "
        "installed inference GPU")
def trough_fits_idle(lm: LinearModel, ix) -> None:
    """sum_j backfill[j,s,g,w,h] - sum_{k in g, c} racks_inf[s,k,c,w] * gpus[k] <= 0   for every (s,g,w,h) some
    interruptible job may use (clock on); hourly_serving keeps the lent GPUs out of serving."""
    lent: dict[tuple, list] = {}
    for key in ix.clock.backfill:
        j, s, g, w, h = key
        lent.setdefault((s, g, w, h), []).append((lm.col("backfill", key), 1.0))
    busy: dict[tuple, list] = {}
    for key in ix.clock.busy:  # under a carbon cap the dispatch's busy GPUs are not lent
        s, g, c, w, h = key
        busy.setdefault((s, g, w, h), []).append((lm.col("busy", key), 1.0))
    installed = _installed(lm, ix)
    for (s, g, w, h), cols in lent.items():
        lm.add_row("trough_fits_idle", (s, g, w, h), cols + busy.get((s, g, w, h), []) + installed.get((s, g, w), []), upper=0.0)


def _job_fields(ix, j, _amount: float) -> dict:
    job = ix.jobs[j]
    return dict(job=job.name, hours=f"{job.daily_h100_hours:,.0f}")


@family(checker="check_clock", section="clock", relax=Relax(
    "short", "the job's daily GPU-hours (0 to 1)", lambda ix, key: ix.jobs[key].daily_h100_hours,
    "interruptible job {job} cannot get its {hours} H100-equivalent GPU-hours a day from troughs, its own racks or rented GPUs",
    _job_fields, "jobs.csv gpu_hours_per_day, eligible_chips, min_fabric_tier or allowed_countries", weight=1e6))
def trough_job_hours(lm: LinearModel, ix) -> None:
    """sum_{s,g,w,h} w_h * backfill[j,s,g,w,h] * h100[g] + H_j * (sum place[j,...] + sum rent_trn[j,q]) >= H_j
    for every interruptible job j (clock on): H_j H100-equivalent GPU-hours a day, from the troughs unless the job has its
    own racks or rented GPUs (its job_placed_once row is then <= 1)."""
    ck = ix.clock
    jobs = trough_jobs(ix)
    if not jobs:
        return
    lent: dict[str, list] = {j: [] for j in jobs}
    for key in ck.backfill:
        j, s, g, w, h = key
        lent[j].append((lm.col("backfill", key), ck.weight_h[h] * ix.chips[ck.group_chip[g]].h100_equiv))
    options = ix.place_by_job
    rented: dict[str, list] = {}
    for j, q in ck.rent_train:
        rented.setdefault(j, []).append(q)
    for j in jobs:
        need = ix.jobs[j].daily_h100_hours
        own = [(lm.col("place", (j, *o)), need) for o in options.get(j, [])]
        own += [(lm.col("rent_trn", (j, q)), need) for q in rented.get(j, [])]
        lm.add_row("trough_job_hours", j, lent[j] + own, lower=need)


@family(checker="check_clock", section="clock", not_relaxed="a law of the model: rented GPUs serve what they are rented for; "
        "demand is relaxed instead")
def rental_capacity(lm: LinearModel, ix) -> None:
    """sum_r rent_share[r,w,q] * demand[r,w] * p[r,w,h] - (rent_od[q,w,h] + rent_res[q,w]) * tok_s[chip_q,w] <= 0
    for every cloud region q, class w and represented hour h with a rentable pair."""
    ck = ix.clock
    if not ck.rent_serve:
        return
    by_qw: dict[tuple, list] = {}
    for r, w, q in ck.rent_serve:
        by_qw.setdefault((q, w), []).append(r)
    on_demand, reserved = set(ck.rent_on_demand), set(ck.rent_reserved)
    chips = {q.id: q.chip for q in ix.scenario.cloud_regions}
    for (q, w), regions in by_qw.items():
        tok = tok_s_per_gpu(ix, chips[q], w)
        for h in ck.hours:
            row = [(lm.col("rent_share", (r, w, q)), ix.demand(r, w) * ck.p(r, w, h)) for r in regions]
            if (q, w, h) in on_demand:
                row.append((lm.col("rent_od", (q, w, h)), -tok))
            if (q, w) in reserved:
                row.append((lm.col("rent_res", (q, w)), -tok))
            lm.add_row("rental_capacity", (q, w, h), row, upper=0.0)


def _cap_fields(ix, key, gpus: float) -> dict:
    q = next(c for c in ix.scenario.cloud_regions if c.id == key[0])
    return dict(cloud=q.name, cap=f"{q.cap_gpus:,.0f}", over=f"{gpus:,.0f}")


@family(checker="check_clock", section="clock", relax=Relax(
    "over", "GPUs", lambda ix, key: next(q.cap_gpus for q in ix.scenario.cloud_regions if q.id == key[0]),
    "cloud region {cloud} can rent {cap} GPUs at once and is over by {over}", _cap_fields, "cloud_regions.csv cap_gpus"))
def rental_cap(lm: LinearModel, ix) -> None:
    """sum_w (rent_od[q,w,h] + rent_res[q,w]) + sum_j rent_trn[j,q] * gpus[j,q] <= cap_gpus[q]   for every capped q and hour h."""
    ck = ix.clock
    for q in ix.scenario.cloud_regions:
        if q.cap_gpus is None:
            continue
        for h in ck.hours:
            row = [(lm.col("rent_od", key), 1.0) for key in ck.rent_on_demand if key[0] == q.id and key[2] == h]
            row += [(lm.col("rent_res", key), 1.0) for key in ck.rent_reserved if key[0] == q.id]
            row += [(lm.col("rent_trn", key), rented_training_gpus(ix, key[0], q.chip)) for key in ck.rent_train if key[1] == q.id]
            if row:
                lm.add_row("rental_cap", (q.id, h), row, upper=float(q.cap_gpus))
