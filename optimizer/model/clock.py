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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache

import numpy as np

from dcplace.models import Scenario
from dcplace.models.geo import great_circle_km
from dcplace.optimizer.model.families import Relax, family
from dcplace.optimizer.model.linear import LinearModel

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
    tok = {(t.chip, t.workload) for t in scenario.catalog.throughput}
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
    for t in ix.scenario.catalog.throughput:
        if t.chip == chip and t.workload == w:
            return t.tok_s_per_gpu * ix.scenario.economics.inference_target_utilization
    return 0.0


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
