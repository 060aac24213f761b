"""The clock: hourly demand by local time, coincident sizing, training in the troughs, rented GPU-hours.

Docs: docs/clock.md. With `clock.hours = 0` (the default) every site is sized for the sum
of the peaks it serves (the `inference_capacity` family) and none of the hourly families
writes a row. With the clock on, a day is a set of represented UTC hours H with weights
w_h (sum 24) and region r's class-w demand at hour h is demand[r,w] x p[r,w,h], where p
is the class's profile in r's local time (peak 1). Then:

* capacity: a site's racks serve the load it carries at every represented hour
  (`hourly_serving`), less the GPUs it lends to training in that hour;
* energy follows the load: an inference rack always draws `idle_power_share` of its rated
  power, and its GPUs the rest for the hours they are busy. The objective charges each
  served token-hour the busy power of the site's most efficient chip and cooling for its
  class, a lower bound on any dispatch; the plan's energy is the merit-order dispatch of
  the racks it builds (`dispatch`, what an operator's scheduler does), and its gap is
  restated against the bound (optimizer.solving.solve), so it stays honest. Charging a
  dispatch variable per (site, chip, cooling, class, hour) instead made the root LP of
  the default at 24 hours take over a minute (docs/clock.md);
* interruptible jobs take GPU-hours from the inference GPUs the served load leaves idle
  (`trough_job_hours`, `trough_fits_idle`) or else run on their own racks;
* cloud regions rent GPU-hours: on demand for the hours used, reserved for every hour
  (`rental_capacity`, `rental_cap`); training may rent reserved capacity.
* routing is one share per (region, class, site) for the whole day (`clock.routing: day`, the
  anycast mapping operators publish), or with `clock.routing: hour` a share per represented hour
  share_h[r,w,s,h] (`hourly_demand_met` per hour; `hourly_share_mean` makes share[r,w,s] the
  hours' weighted mean, which carries transport and the link to open[s]); the capacity rows,
  the energy split and the exact dispatch then read the hour's own shares. Every hour's row is
  kept (no hour dominates another when each has its own shares). The columns grow by the
  number of represented hours: use it with representative blocks on large worlds
  (benchmarks/RESULTS.md, "clock").

Rentals work with the clock off too: the day is then one block of 24 hours at the peak.

Representative hours (`clock.hours = k < 24`) are k contiguous blocks of the UTC day
chosen to lose least: each block carries, for every (region, class), the largest load of
the hours it stands for, so capacity sized on k blocks covers all 24 hours (never
undersized) and energy is overstated by the loss the block choice minimises
(`ClockSets.block_overstatement` reports it).

This module holds the clock's sets (as optimizer.model.resilience holds N-1's): time zones,
profiles, the represented hours, the sparse hourly sets and rentals (`build_clock`), the
per-GPU and per-share quantities, and the merit-order `dispatch`. Its columns, objective
terms and constraint families are in optimizer.model.clock_families (as N-1's are in
optimizer.model.failover).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache

import numpy as np

from dcplace.models import Scenario
from dcplace.models.geo import great_circle_km
from dcplace.models.interactivity import tok_s_at_target

HOURS_PER_DAY = 24


# ---------------------------------------------------------------------- time zones


@lru_cache(maxsize=1)
def _finder():
    from timezonefinder import TimezoneFinder

    return TimezoneFinder()


def standard_offset_h(lat: float, lon: float) -> tuple[float, str]:
    """Standard-time (no daylight saving) UTC offset in hours at a point, and how it was found:
    the IANA zone from timezonefinder's shipped polygons, the smaller of its offsets on
    2026-01-15 and 2026-07-15 (daylight saving moves clocks forward in one of the two, north or
    south; Europe/Dublin's zone data calls its winter time a negative DST, so 'offset minus DST'
    gave Ireland UTC+1); solar time round(lon / 15) where no zone covers the point (at sea)."""
    from zoneinfo import ZoneInfo

    name = _finder().timezone_at(lat=lat, lng=lon)
    if name:
        zone = ZoneInfo(name)
        hours = min(datetime(2026, month, 15, 12, tzinfo=timezone.utc).astimezone(zone).utcoffset().total_seconds() / 3600.0
                    for month in (1, 7))
        return hours, name
    return float(round(lon / 15.0)), "solar time (no zone at this point)"


def region_offsets_h(scenario: Scenario) -> dict[str, tuple[float, str]]:
    """region id -> (UTC offset in hours, basis): the regions table's utc_offset_h where given."""
    out = {}
    for r in scenario.regions:
        out[r.id] = (r.utc_offset_h, "regions table utc_offset_h") if r.utc_offset_h is not None else standard_offset_h(r.lat, r.lon)
    return out


# ------------------------------------------------------------------------ profiles


def local_profile(scenario: Scenario, w: str, region: str) -> np.ndarray | None:
    """The 24 local-hour loads of class w for a region: its own profile, else the class's."""
    rows = [p for p in scenario.profiles if p.workload == w and p.region == region] or \
           [p for p in scenario.profiles if p.workload == w and not p.region]
    if not rows:
        return None
    out = np.zeros(HOURS_PER_DAY)
    for p in rows:
        out[p.local_hour] = p.load
    return out


def utc_profile(local: np.ndarray, offset_h: float) -> np.ndarray:
    """Load at each UTC hour 0..23 of a region `offset_h` hours ahead of UTC: local time
    utc + offset, read off the local profile by linear interpolation on the circular day
    (exact for whole-hour offsets; India's +5.5 averages the two neighbouring hours)."""
    t = (np.arange(HOURS_PER_DAY) + offset_h) % HOURS_PER_DAY
    lo = np.floor(t).astype(int)
    frac = t - lo
    return local[lo % HOURS_PER_DAY] * (1 - frac) + local[(lo + 1) % HOURS_PER_DAY] * frac


def best_blocks(loads: np.ndarray, k: int) -> list[list[int]]:
    """k contiguous blocks of the circular UTC day (lists of hours) minimising the load a
    block's maximum overstates: sum over blocks, hours and columns of (block max - load).
    `loads` is 24 x columns (demand-weighted). Exact: every rotation x dynamic programme."""
    if k >= HOURS_PER_DAY:
        return [[h] for h in range(HOURS_PER_DAY)]
    n = HOURS_PER_DAY
    best_cost, best = np.inf, None
    for start in range(n):
        order = [(start + i) % n for i in range(n)]
        seq = loads[order]
        # cost[i][j]: overstatement of one block holding seq[i:j]
        cost = np.full((n + 1, n + 1), np.inf)
        for i in range(n):
            peak = seq[i].copy()
            total = seq[i].copy()
            for j in range(i + 1, n + 1):
                if j > i + 1:
                    peak = np.maximum(peak, seq[j - 1])
                    total = total + seq[j - 1]
                cost[i, j] = float((peak * (j - i) - total).sum())
        dp = np.full((k + 1, n + 1), np.inf)
        arg = np.zeros((k + 1, n + 1), dtype=int)
        dp[0, 0] = 0.0
        for b in range(1, k + 1):
            for j in range(b, n + 1):
                cands = dp[b - 1, b - 1:j] + cost[b - 1:j, j]
                i = int(np.argmin(cands)) + b - 1
                dp[b, j], arg[b, j] = dp[b - 1, i] + cost[i, j], i
        if dp[k, n] < best_cost - 1e-9:
            cuts, j = [], n
            for b in range(k, 0, -1):
                i = arg[b, j]
                cuts.append(order[i:j])
                j = i
            best_cost, best = dp[k, n], cuts[::-1]
    return best


# ---------------------------------------------------------------------- index sets


@dataclass
class ClockSets:
    """Everything hourly, built once by `build_clock` before the model."""

    on: bool
    hours: list[int]  # represented hours: the first UTC hour of each block
    weight_h: dict[int, float]  # hours of the day each represented hour stands for (sum 24)
    blocks: dict[int, list[int]]  # represented hour -> the UTC hours it stands for
    load_share: dict[tuple[str, str], np.ndarray]  # (region, class) -> p over `hours` (peak 1)
    offsets_h: dict[str, tuple[float, str]]
    block_overstatement: float = 0.0  # share of the day's served tokens the blocks overstate (0 at 24 hours)
    energy_group: dict[str, str] = field(default_factory=dict)  # rack config -> dispatch group (chip, or the config itself)
    group_chip: dict[str, str] = field(default_factory=dict)
    group_kw_per_gpu: dict[str, float] = field(default_factory=dict)
    backfill: list[tuple] = field(default_factory=list)  # (j, s, g, w, h) GPUs of class-w racks lent to job j in hour h
    cloud_rtt_ms: np.ndarray | None = None  # regions x cloud regions
    rent_serve: list[tuple[str, str, str]] = field(default_factory=list)  # (r, w, q)
    rent_on_demand: list[tuple[str, str, int]] = field(default_factory=list)  # (q, w, h) GPUs rented on demand
    rent_reserved: list[tuple[str, str]] = field(default_factory=list)  # (q, w) GPUs reserved all day
    rent_train: list[tuple[str, str]] = field(default_factory=list)  # (j, q) job on reserved rented GPUs
    configs: dict[tuple, list[str]] = field(default_factory=dict)  # (s, g, c, w) -> rack configs of g with racks there
    busy: list[tuple] = field(default_factory=list)  # (s, g, c, w, h) GPUs busy serving: exact dispatch, only under a carbon cap
    binding_hours: dict[tuple, list[int]] = field(default_factory=dict)  # (s, w) -> hours no other hour dominates
    site_options: dict[tuple, list[tuple[str, str]]] = field(default_factory=dict)  # (s, w) -> [(g, c)] it could serve w with
    share_h: list[tuple[str, str, str, int]] = field(default_factory=list)  # (r, w, s, h): routing per hour (clock.routing hour), else empty
    # Read for every pair and hour while the model is built (120 M times at 500 x 3,000): kept as
    # lookups, not searched for each time (hours.index and the day's sum took 200 of a 258 s build).
    # They follow hours, weight_h and load_share, which are fixed once build_clock has made the sets.
    hour_pos: dict[int, int] = field(init=False, repr=False, compare=False)  # represented hour -> its position in `hours`
    _day_share: dict[tuple[str, str], float] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.hour_pos = {h: i for i, h in enumerate(self.hours)}

    @property
    def hourly_routing(self) -> bool:
        """True when each represented hour has its own shares (clock.routing: hour)."""
        return bool(self.share_h)

    def p(self, r: str, w: str, h: int) -> float:
        return float(self.load_share[r, w][self.hour_pos[h]]) if (r, w) in self.load_share else 1.0

    def profile(self, r: str, w: str) -> np.ndarray:
        """p[r,w,h] over `hours`, in their order (all 1 for a pair with no profile); read-only."""
        share = self.load_share.get((r, w))
        return share if share is not None else np.ones(len(self.hours))

    def day_share(self, r: str, w: str) -> float:
        """sum_h w_h p[r,w,h]: the hours of the day at peak load that (r, w)'s day amounts to."""
        if (r, w) not in self._day_share:
            self._day_share[r, w] = sum(self.weight_h[h] * self.p(r, w, h) for h in self.hours)
        return self._day_share[r, w]

    def days_per_year(self, scenario: Scenario) -> float:
        return scenario.economics.hours_per_year / HOURS_PER_DAY


def trough_jobs(ix) -> list[str]:
    """Jobs that may run in the troughs: interruptible, with the clock on."""
    return [j for j, job in ix.jobs.items() if job.interruptible] if ix.scenario.clock.on else []


def build_clock(ix) -> ClockSets:
    """The represented hours, each region's load share per hour, and the sparse hourly sets."""
    scenario = ix.scenario
    clock = scenario.clock
    demanded = [(r.id, w) for r in scenario.regions for w in ix.workloads if r.demand_tok_s.get(w, 0.0) > 0]
    if not clock.on:
        sets = ClockSets(False, [0], {0: float(HOURS_PER_DAY)}, {0: list(range(HOURS_PER_DAY))}, {}, {})
    else:
        offsets = region_offsets_h(scenario)
        utc = {}
        for r, w in demanded:
            local = local_profile(scenario, w, r)
            utc[r, w] = utc_profile(local, offsets[r][0])
        keys = list(utc)
        matrix = np.array([utc[key] * ix.demand(*key) for key in keys]).T if keys else np.zeros((HOURS_PER_DAY, 1))
        blocks = best_blocks(matrix, clock.hours)
        hours = [b[0] for b in blocks]
        share = {key: np.array([max(utc[key][h] for h in b) for b in blocks]) for key in keys}
        for profile in share.values():
            profile.setflags(write=False)  # ClockSets.profile hands these out
        served = float(matrix.sum())
        over = float(sum((matrix[b].max(axis=0) * len(b) - matrix[b].sum(axis=0)).sum() for b in blocks))
        sets = ClockSets(True, hours, {b[0]: float(len(b)) for b in blocks}, {b[0]: b for b in blocks}, share, offsets,
                         block_overstatement=over / served if served else 0.0)
    _dispatch_groups(ix, sets)
    for s, k, c, w in ix.inf_racks:
        sets.configs.setdefault((s, sets.energy_group[k], c, w), []).append(k)
    for s, g, c, w in sets.configs:
        sets.site_options.setdefault((s, w), []).append((g, c))
    if sets.on:
        sets.backfill = _backfill_keys(ix, sets)
        if clock.routing == "hour":  # every serving pair x every represented hour (the pairs are pruned already)
            sets.share_h = [(r, w, s, h) for r, w, s in ix.serve for h in sets.hours]
            # no hour is implied by another: each hour's load comes from its own shares
            sets.binding_hours = {(s, w): list(sets.hours) for s, w in ix.inf_by_sw}
        else:
            sets.binding_hours = _undominated_hours(ix, sets)
        if scenario.policies.carbon_cap_t_per_year is not None:  # exact dispatch: the cap must hold for the plan's own
            sets.busy = [(s, g, c, w, h) for (s, g, c, w) in sorted(sets.configs) for h in sets.hours]
    _rentals(ix, sets)
    return sets


def _dispatch_groups(ix, sets: ClockSets) -> None:
    """Configs of one chip with the same kW per GPU dispatch as one group (the chip id);
    a chip whose configs differ in kW per GPU keeps one group per config."""
    per_gpu = {k: rack.kw_per_rack / rack.gpus_per_rack for k, rack in ix.racks.items()}
    by_chip: dict[str, set[float]] = {}
    for k, rack in ix.racks.items():
        by_chip.setdefault(rack.chip, set()).add(round(per_gpu[k], 9))
    for k, rack in ix.racks.items():
        g = rack.chip if len(by_chip[rack.chip]) == 1 else k
        sets.energy_group[k] = g
        sets.group_chip[g] = rack.chip
        sets.group_kw_per_gpu[g] = per_gpu[k]


def _undominated_hours(ix, sets: ClockSets) -> dict[tuple, list[int]]:
    """(s, w) -> the represented hours whose capacity row is not implied by another's.

    Hour h is dominated at (s, w) when another hour h' has p[r,w,h] <= p[r,w,h'] for every
    region r that may be served from s (ties: the earlier hour stays). Then every plan's load
    at h is at most its load at h', and the rows' capacity sides are the same racks, so the
    row of h' implies the row of h (the lent GPUs of interruptible jobs differ by hour, so
    (s, w) with any backfill keep every hour). Computed over every eligible pair, so that
    pairs priced in later (optimizer.pairs) cannot undo it. On the default at 24 hours it
    keeps about a fifth of the rows; the checker still checks every hour.
    """
    lent = {(s, w) for (_, s, _, w, _) in sets.backfill}
    site_ids = [site.id for site in ix.scenario.sites]
    region_ids = [r.id for r in ix.scenario.regions]
    out: dict[tuple, list[int]] = {}
    for w, mask in ix.eligible.items():
        for j in np.flatnonzero(mask.any(axis=0)):
            s = site_ids[j]
            if (s, w) in lent:
                out[s, w] = list(sets.hours)
                continue
            loads = np.array([sets.load_share[region_ids[i], w] for i in np.flatnonzero(mask[:, j])])
            keep = []
            for a, h in enumerate(sets.hours):
                above = np.all(loads[:, a][:, None] <= loads + 1e-12, axis=0)  # hours at least as loaded for every region
                strictly = np.any(loads > loads[:, a][:, None] + 1e-12, axis=0)
                above[a] = False
                if not np.any(above & (strictly | (np.arange(len(sets.hours)) < a))):
                    keep.append(h)
            out[s, w] = keep
    return out


def _backfill_keys(ix, sets: ClockSets) -> list[tuple]:
    tier = ix.scenario.clock.inference_fabric_tier
    groups = sorted({(s, sets.energy_group[k], w) for s, k, _, w in ix.inf_racks})
    out = []
    for j in trough_jobs(ix):
        job = ix.jobs[j]
        if job.min_fabric_tier > tier:
            continue
        chips = set(job.eligible_chips) or {x for x, chip in ix.chips.items() if chip.h100_equiv > 0}
        for s, g, w in groups:
            if sets.group_chip[g] in chips and ix.chips[sets.group_chip[g]].h100_equiv > 0 and \
                    (not job.allowed_countries or ix.sites[s].country in job.allowed_countries):
                out += [(j, s, g, w, h) for h in sets.hours]
    return out


def cloud_rtt_matrix_ms(scenario: Scenario) -> np.ndarray:
    """Round-trip ms, regions x cloud regions, by great circle x route factor (the backbone
    graph, if any, holds sites, not cloud regions)."""
    if not scenario.cloud_regions:
        return np.zeros((len(scenario.regions), 0))
    lat = scenario.latency
    km = great_circle_km(np.array([r.lat for r in scenario.regions])[:, None], np.array([r.lon for r in scenario.regions])[:, None],
                         np.array([q.lat for q in scenario.cloud_regions])[None, :], np.array([q.lon for q in scenario.cloud_regions])[None, :])
    return 2.0 * km * lat.route_factor / lat.fiber_km_per_ms + lat.overhead_ms


def _rentals(ix, sets: ClockSets) -> None:
    scenario = ix.scenario
    clouds = scenario.cloud_regions
    sets.cloud_rtt_ms = cloud_rtt_matrix_ms(scenario)
    if not clouds:
        return
    tok = tok_s_at_target(scenario.catalog)
    for i, region in enumerate(scenario.regions):
        for w in ix.workloads:
            if region.demand_tok_s.get(w, 0.0) <= 0:
                continue
            for j, q in enumerate(clouds):
                if (q.chip, w) in tok and sets.cloud_rtt_ms[i, j] <= region.rtt_budget_ms[w] + 1e-9 and \
                        (not region.allowed_countries or q.country in region.allowed_countries):
                    sets.rent_serve.append((region.id, w, q.id))
    served = sorted({(q, w) for _, w, q in sets.rent_serve})
    by_id = {q.id: q for q in clouds}
    sets.rent_on_demand = [(q, w, h) for q, w in served if by_id[q].usd_per_gpu_hour_on_demand is not None for h in sets.hours]
    sets.rent_reserved = [(q, w) for q, w in served if by_id[q].usd_per_gpu_hour_reserved is not None]
    for j, job in ix.jobs.items():
        chips = set(job.eligible_chips) or {x for x, chip in ix.chips.items() if chip.h100_equiv > 0}
        for q in clouds:
            if q.chip in chips and ix.chips[q.chip].h100_equiv > 0 and q.usd_per_gpu_hour_reserved is not None and \
                    q.fabric_tier >= job.min_fabric_tier and (not job.allowed_countries or q.country in job.allowed_countries) and \
                    (q.cap_gpus is None or rented_training_gpus(ix, j, q.chip) <= q.cap_gpus + 1e-9):
                sets.rent_train.append((j, q.id))


def serving_options(ix) -> list[tuple[tuple[str, str], list[str], list[str]]]:
    """((r, w), owned sites, cloud regions) for every (region, class) that some site or cloud
    region may serve: the columns of its demand row (demand_met, hourly_demand_met)."""
    rented: dict[tuple[str, str], list[str]] = {}
    for r, w, q in ix.clock.rent_serve:
        rented.setdefault((r, w), []).append(q)
    owned = ix.serve_by_rw
    return [(key, owned.get(key, []), rented.get(key, [])) for key in [*owned, *(k for k in rented if k not in owned)]]


def rented_training_gpus(ix, j: str, chip: str) -> float:
    """Physical GPUs a job rents: its H100-equivalents over the chip's equivalence (the
    provider's cluster fabric is taken at full efficiency: its price includes it)."""
    return ix.jobs[j].gpus_h100_equiv / ix.chips[chip].h100_equiv


def tok_s_per_gpu(ix, chip: str, w: str) -> float:
    """A GPU's tokens/s on class w at the target utilization (0 if it cannot serve w)."""
    return tok_s_at_target(ix.scenario.catalog).get((chip, w), 0.0) * ix.scenario.economics.inference_target_utilization


# ------------------------------------------------------------------ per GPU, per share


def busy_kw_per_gpu(ix, s: str, g: str, c: str) -> float:
    """Facility kW one busy GPU of group g in a c zone at s draws above the idle share its
    rack pays for all year."""
    return ix.clock.group_kw_per_gpu[g] * ix.sites[s].pue(ix.cooling[c]) * (1.0 - ix.scenario.clock.idle_power_share)


def lent_kw_per_gpu(ix, s: str, g: str, w: str, pick=min) -> float:
    """kW one lent GPU of group g (from class-w racks) at s draws, at the `pick` of its coolings' PUE."""
    return pick(busy_kw_per_gpu(ix, s, g, c) for g2, c in ix.clock.site_options.get((s, w), []) if g2 == g)


def hourly_load(ix, r: str, w: str) -> np.ndarray:
    """tok/s of (r, w) at each represented hour per unit share: demand x p[r,w,h] over `hours`, in their order
    (a share's coefficient in hourly_serving and busy_serves_load; optimizer.solvers.pairs prices with it)."""
    return ix.demand(r, w) * ix.clock.profile(r, w)


def day_weighted_load(ix, r: str, w: str) -> float:
    """Token-hours per day of (r, w) per unit share: demand x sum_h w_h p[r,w,h]."""
    return ix.demand(r, w) * ix.clock.day_share(r, w)


# ------------------------------------------------------------------------ dispatch


def dispatch(ix, installed: dict[tuple, float], lent: dict[tuple, float], load: dict[tuple, float]) -> dict[tuple, tuple[float, float]]:
    """Merit-order dispatch of one represented hour's load over the racks a plan builds.

    installed[(s, g, c, w)] GPUs, lent[(s, g, w, h)] GPUs lent to training, load[(s, w, h)]
    tok/s. Returns (s, g, c, w, h) -> (GPUs serving, GPUs lent). A group's lent GPUs take its
    lowest-PUE zones first, then the load fills the remaining GPUs cheapest kW per token
    first. Optimal: each group's busy power is convex in its busy GPUs (zones in PUE order),
    so filling the cheapest marginal kW per token first minimises the total.
    """
    ck = ix.clock
    by_sw: dict[tuple, list] = {}
    for (s, g, c, w), n in installed.items():
        if n > 0:
            by_sw.setdefault((s, w), []).append((g, c, n))
    out: dict[tuple, tuple[float, float]] = {}
    hours_with_work = set(load) | {(s, w, h) for s, _, w, h in lent}  # racks may lend in an hour they serve nothing
    for s, w, h in sorted(hours_with_work):
        tok_s = load.get((s, w, h), 0.0)
        zones = sorted(by_sw.get((s, w), []), key=lambda z: (ix.sites[s].pue(ix.cooling[z[1]]), z[1]))
        free, lent_at = {}, {}
        for g in {z[0] for z in zones}:
            owe = lent.get((s, g, w, h), 0.0)
            for g2, c, n in zones:
                if g2 == g:
                    take = min(n, owe)
                    lent_at[g, c], free[g, c] = take, n - take
                    owe -= take
        need = tok_s
        for g, c, n in sorted(zones, key=lambda z: (busy_kw_per_gpu(ix, s, z[0], z[1]) / tok_s_per_gpu(ix, ck.group_chip[z[0]], w), z[0], z[1])):
            per_gpu = tok_s_per_gpu(ix, ck.group_chip[g], w)
            serve = min(free[g, c], max(need, 0.0) / per_gpu) if per_gpu > 0 else 0.0
            need -= serve * per_gpu
            if serve > 0 or lent_at[g, c] > 0:
                out[s, g, c, w, h] = (serve, lent_at[g, c])
    return out
