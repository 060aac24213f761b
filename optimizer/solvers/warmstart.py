"""A first incumbent for HiGHS by rounding the LP relaxation.

The LP relaxation of the placement model is tight (on the world default its bound is
within 0.4 % of the optimum), but HiGHS's own heuristics can take minutes to find a
plan near it. Rounding the LP gives one in the time of two LP solves:

0. solve the LP relaxation; keep the sites it opens by at least half, the sites its
   largest job placements use, and for any (region, class) left without a kept site the
   site serving most of it (and, should the LP over those be infeasible, every site it opens
   at all); solve the LP again with every other site closed, so that
   demand concentrates on the kept sites instead of spreading thinly over many, and with
   each site's power and floor lowered by what rounding up can add (`_headroom`);
1. every job goes to the (site, fabric, chip) option with the largest LP value, on the
   rack option (config, cooling) the LP uses most there: racks = ceil(need / H100 per rack);
   but an interruptible job the LP runs mostly in the troughs (clock on) stays there, and
   the GPUs the LP lends it are added to the hourly load that sizes step 2's racks;
2. the LP's demand shares are kept as they are (they already meet demand, latency and
   max-share limits); each site then gets the set of cooling zones and per-class rack
   configs that cost least for ceil(load / tok/s per rack) racks, counting the zones'
   fixed costs (`_inference_racks`);
3. sites and zones open where racks or shares need them;
4. where rounding up broke a site's power or floor (the LP fills cheap sites to the
   brim), that site's racks are chosen again for the least facility power instead; where
   even that breaks it, inference racks are taken away there until it fits, and the LP that
   completes the start (complete_start) moves the load they served to sites with room,
   before step 5 starts from the plan;
   plan-wide limits (a family of one row: the carbon cap, the capex budget, max_sites) are not
   rounded around: where the rounded plan goes over one, that row is lowered by 1.25 x the excess
   for the rounding's LPs, the sites to keep are chosen again by the LP so lowered, and steps 0-4
   run again (at most BUDGET_ROUNDS times; `_over_budgets`, `_budgets_lowered`). Single-purpose
   sites hold, in those LPs, the one role the LP gives each site more of (`_roles_held`). The
   default world with a carbon cap at 60 % of its emissions had no plan in 60 s while the
   rounding gave up on caps; with this, a start of $1,844.54 M in 16 s on a loaded machine;
5. polish: when the kept sites are few (at most a quarter of the candidates) and the plan is
   not already within the asked gap of the LP bound, the MIP
   restricted to them (every other site closed) is solved from the rounded plan for a
   short time (POLISH_SHARE of the time left, at most POLISH_MAX_S); it is much smaller
   than the whole MIP, and its plan replaces the rounded one. On the synthetic 50 x 200
   scale the rounded plan is 11 % above the optimum and HiGHS's root takes minutes to
   improve on it; polished, the whole solve is proven within 0.23 % in 37 s (was 219 s).
   On the world default (29 of 76 sites kept) the restricted MIP is nearly the whole one
   and 15 s of it found nothing better, so it is skipped;
6. racks again (`_rack_rens`): when the plan is still not within the asked gap of the LP
   bound, its sites, zones and jobs are kept, the LP over them sizes the inference racks,
   and a MIP chooses whole racks between the floor and ceiling of each LP count (RENS_SHARE
   of the time left, at most POLISH_MAX_S), closing a kept site or zone left without racks. Rounding each (site, class) up on its own leaves
   part of a rack idle at every site; this step moves load between sites to fill racks.
   On the world default at 24 hours the rounded plan cost $1,606.93 M and this step's
   $1,597.18 M, found in under 10 s.

If the rounded plan breaks a site's power or floor limit, or a policy the rounding does
not look at, it is not used (optimizer.solvers.backends.run_highs checks the start against
every row, so a bad start costs nothing but the LP), and the restricted MIP of step 5 runs
without a start. backends.run_highs holds the plan back from HiGHS's search rather than
offering it (backends.HOLD_BACK_START says why).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from contextlib import contextmanager

import highspy
import numpy as np

from dcplace.optimizer.model.clock import tok_s_per_gpu, trough_jobs
from dcplace.optimizer.model.formulation import reach_limits
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import HighsAbandoned, run_until, set_deadline  # noqa: F401 - set_deadline re-exported
from dcplace.optimizer.solvers.lazy_rows import LazyRows, lazy_rows, solve_lazily


KEEP_OPEN_AT = 0.5  # a site the LP opens at least this much is kept for the restricted re-solve
OPEN_AT_ALL = 1e-6  # ... and, when the LP over those is infeasible, every site it opens more than this
POLISH_SHARE = 0.2  # of the time left, for the restricted MIP
POLISH_MAX_S = 60.0
POLISH_MAX_KEPT_SHARE = 0.25  # polish only when the kept sites make a much smaller MIP
POLISH_GAP = 1e-3
RENS_SHARE = 0.8  # of the time left, at most, for step 6: it stops once within POLISH_GAP of its own bound
RACKS = "racks_inf"  # the block whose counts step 6 chooses again
HEADROOM_FLOOR = 0.5  # the rounding LP never lowers a site's power or floor below this share
BUDGET_ROUNDS = 3  # roundings again, at most, with a plan-wide limit the rounding broke lowered (_budgets_lowered)
BUDGET_MARGIN = 1.25  # ... by this multiple of what the rounding went over it

def _inference_racks(ix: IndexSets, s: str, load: dict[str, float], built: set[tuple[str, str]], lean: bool = False) -> dict:
    """Racks serving `load` (tok/s per class) at site s: the set of cooling zones and the
    per-class rack option (config, zone of the set) of least cost, counting each zone's
    fixed cost unless a training zone of that type is already built. Every set of the site's
    zone types is tried (at most 2^4 - 1), each class then taking its cheapest option in the
    set, which is the least-cost choice for these loads: a site that serves chat from air
    racks and reasoning from liquid ones pays for both zones only where that beats one zone
    for all (one zone per site was the rule before; on the default with the clock at 24 hours
    the optimum builds both at 12 of 31 sites, and choosing per class without the zones'
    costs built a zone per class and left the start 2 % above the optimum). `lean` (sites
    whose power or floor the rounding broke) takes each class's option of least facility power
    in any of the site's zones, with no zone's fixed cost counted: those are dollars, and the
    measure is then kW. (Counting them, and keeping to one zone, chose the zone of least fixed
    cost: on 2,000 x 10,000 air racks for reasoning at 382 MW on a 200 MW site whose LP held
    the same load in 196 MW of immersion racks.)"""
    if not load:
        return {}
    options = ix.inf_by_sw
    measure = (lambda e: e.facility_kw) if lean else (lambda e: e.total_usd_per_year)
    coolings = ix.zones_by_site.get(s, [])
    per_zone: dict[str, dict] = {}  # cooling -> class -> (cost, racks, config)
    for c in coolings:
        per_zone[c] = {}
        for w, tok_s in load.items():
            choices = [(math.ceil(tok_s / ix.tok_s_per_rack[k, w] - 1e-9), k) for k, cc in options.get((s, w), []) if cc == c]
            if choices:
                n, k = min(choices, key=lambda nk: nk[0] * measure(ix.inf_econ[s, nk[1], c, w]))
                per_zone[c][w] = (n * measure(ix.inf_econ[s, k, c, w]), n, k)
    sets = [tuple(c for i, c in enumerate(coolings) if mask >> i & 1) for mask in range(1, 1 << len(coolings))]
    best_cost, best = math.inf, {}
    for chosen in sets:
        cost = 0.0 if lean else sum(0.0 if (s, c) in built else ix.cooling[c].zone_fixed_usd_per_year for c in chosen)
        racks = {}
        for w in load:
            offers = [(per_zone[c][w], c) for c in chosen if w in per_zone[c]]
            if not offers:
                cost = math.inf
                break
            (usd, n, k), c = min(offers, key=lambda o: o[0][0])
            cost += usd
            racks[s, k, c, w] = n
        used = {key[2] for key in racks}
        if cost < best_cost - 1e-9 and used == set(chosen):  # a set with an unused zone is another set's plan, dearer
            best_cost, best = cost, racks
    return best


def round_lp(
    x: np.ndarray, lm: LinearModel, ix: IndexSets, broken: set[str] | None = None, lean: set[str] = frozenset(),
    trim: set[str] = frozenset(), lend_room: bool = False,
) -> dict | None:
    """An integer-feasible assignment {column: value} from LP column values `x`, or None;
    sites whose power or floor the rounding broke are added to `broken`.
    At `lean` sites racks are chosen for the least facility power, not the least cost; at
    `trim` sites inference racks are then taken away until the site's limits hold (`_trim`).
    With `lend_room` every site gets the racks of each chip group that the GPUs it lends to the
    jobs kept in the troughs need (`_room_to_lend`)."""
    broken = set() if broken is None else broken
    pol = ix.scenario.policies
    lp = lambda block, key: x[lm.col(block, key)]  # noqa: E731
    col = lm.col
    start: dict = {}
    racks_inf: dict = defaultdict(int)
    racks_trn: dict = defaultdict(int)

    # 1. training; an interruptible job the LP runs mostly in the troughs stays there (its GPU-hours size step 2),
    # and a job the LP rents more than it places anywhere is rented (a rental is a binary: the job whole or not at all)
    options = ix.place_by_job
    trn_options = ix.trn_by_sfchip
    need = defaultdict(float)
    trough_scale = _trough_scale(x, lm, ix)
    rented_at = _rented_jobs(x, lm, ix, trough_scale)
    for j, q in ix.clock.rent_train:
        start[col("rent_trn", (j, q))] = 1.0 if rented_at.get(j) == q else 0.0
    for j, opts in options.items():
        if j in trough_scale or j in rented_at:
            for o in opts:
                start[col("place", (j, *o))] = 0.0
            continue
        s, f, chip = max(opts, key=lambda o: lp("place", (j, *o)))
        for o in opts:
            start[col("place", (j, *o))] = 1.0 if o == (s, f, chip) else 0.0
        need[s, f, chip] += ix.jobs[j].gpus_h100_equiv
    for (s, f, chip), h100 in need.items():
        if s in lean:
            k, c = min(trn_options[s, f, chip], key=lambda kc: ix.trn_econ[(s, *kc, f)].facility_kw / ix.h100_per_rack(kc[0], f))
        else:
            k, c = max(trn_options[s, f, chip], key=lambda kc: lp("racks_trn", (s, *kc, f)) * ix.h100_per_rack(kc[0], f))
        racks_trn[s, k, c, f] += math.ceil(h100 / ix.h100_per_rack(k, f) - 1e-9)

    # 2. inference (with the clock, each site sized for its largest hour: optimizer.model.clock)
    load = defaultdict(float)
    ck = ix.clock
    hourly = defaultdict(float)
    for r, w, s in ix.serve:
        share = min(max(lp("share", (r, w, s)), 0.0), pol.max_share_per_site)
        start[col("share", (r, w, s))] = share
        load[s, w] += share * ix.demand(r, w)
        if ck.hourly_routing:  # routing per hour: each hour's own share (complete_start re-solves them over the racks)
            for h in ck.hours:
                hour_share = min(max(lp("share_h", (r, w, s, h)), 0.0), pol.max_share_per_site)
                start[col("share_h", (r, w, s, h))] = hour_share
                hourly[s, w, h] += hour_share * ix.demand(r, w) * ck.p(r, w, h)
        elif ck.on and share > 0:
            for h in ck.hours:
                hourly[s, w, h] += share * ix.demand(r, w) * ck.p(r, w, h)
    lent = defaultdict(float)  # (s, g, w, h) -> GPUs lent to the jobs kept in the troughs, scaled to their whole need
    for key in ck.backfill:
        j, s, g, w, h = key
        if j in trough_scale:
            lent[s, g, w, h] += max(lp("backfill", key), 0.0) * trough_scale[j]
    for (s, g, w, h), gpus in lent.items():  # lent GPUs serve nothing: the racks must carry the load beside them
        hourly[s, w, h] += gpus * tok_s_per_gpu(ix, ck.group_chip[g], w)
    if ck.on:
        load = defaultdict(float)
        for (s, w, h), v in hourly.items():
            load[s, w] = max(load[s, w], v)
    start.update(_rented(x, lm, ix))
    training_zones = {(key[0], key[2]) for key in racks_trn}
    load_at: dict = defaultdict(dict)
    for (s, w), v in load.items():
        if v > 1e-9:
            load_at[s][w] = v
    n1 = "spare" in lm.blocks or "reroute" in lm.blocks  # N-1 rows (optimizer.model.failover): the LP's capacity, not only its load
    if n1:
        capacity = defaultdict(float)
        for key in ix.inf_racks:
            capacity[key[0], key[3]] += max(lp("racks_inf", key), 0.0) * ix.tok_s_per_rack[key[1], key[3]]
        for (s, w), v in capacity.items():
            if v > load_at[s].get(w, 0.0) + 1e-6:
                load_at[s][w] = v
    for s in ix.sites:
        racks_inf.update(_inference_racks(ix, s, load_at.get(s, {}), training_zones, s in lean))
    if "zone_racks_within_reach" in lm.families:
        _within_reach(ix, racks_inf)
    if lend_room:
        _room_to_lend(x, lm, ix, lent, racks_inf)

    # 3. sites and zones, with the limits the rounding may have broken
    used_sites = {key[0] for key in racks_inf} | {key[0] for key in racks_trn} | {s for (s, _), v in load.items() if v > 1e-9}
    used_sites |= set(pol.forced_sites)
    zones = {(key[0], key[2]) for key in list(racks_inf) + list(racks_trn)}
    keys_at: dict = defaultdict(lambda: ([], []))
    for key in racks_inf:
        keys_at[key[0]][0].append(key)
    for key in racks_trn:
        keys_at[key[0]][1].append(key)
    for s, (keys_inf, keys_trn) in keys_at.items():
        if s in trim:
            _trim(ix, s, keys_inf, keys_trn, racks_inf, racks_trn)
        if _limit_broken(ix, s, keys_inf, keys_trn, racks_inf, racks_trn):
            broken.add(s)
    if broken:
        return None
    n_open = len(used_sites)
    if n_open < pol.min_sites or (pol.max_sites is not None and n_open > pol.max_sites):
        return None
    for s in ix.sites:
        start[col("open", s)] = 1.0 if s in used_sites else 0.0
    for s, c in ix.zones:
        start[col("zone", (s, c))] = 1.0 if (s, c) in zones else 0.0
    for key in ix.inf_racks:
        start[col("racks_inf", key)] = float(racks_inf.get(key, 0))
    for key in ix.trn_racks:
        start[col("racks_trn", key)] = float(racks_trn.get(key, 0))
    start.update(_campuses(lm, ix, racks_trn))
    if "hosts_inf" in lm.blocks:  # single-purpose sites: the roles the rounded racks take
        hosting = {"hosts_inf": {key[0] for key, n in racks_inf.items() if n > 0},
                   "hosts_trn": {key[0] for key, n in racks_trn.items() if n > 0}}
        if not hosting["hosts_inf"].isdisjoint(hosting["hosts_trn"]):
            return None  # a site would host both: the LP's roles were not held apart (rounded_lp_start holds them)
        for block, sites in hosting.items():
            for s in lm.blocks[block].keys:
                start[col(block, s)] = 1.0 if s in sites else 0.0
    if n1 and "spare" in lm.blocks:  # spare = capacity - load, at the rounded capacity (>= the LP's)
        built = defaultdict(float)
        for key, n in racks_inf.items():
            built[key[0], key[3]] += n * ix.tok_s_per_rack[key[1], key[3]]
        for s, w in lm.blocks["spare"].keys:
            start[col("spare", (s, w))] = max(built[s, w] - load.get((s, w), 0.0), 0.0)
    return start


def round_within_limits(x: np.ndarray, lm: LinearModel, ix: IndexSets, lend_room: bool = False) -> dict | None:
    """round_lp of `x`; where rounding up broke a site's power, floor or zone limit, that
    site's racks chosen again for the least facility power; where even that breaks it,
    inference racks taken away there until it fits (`_trim`). None if a limit still breaks."""
    broken: set[str] = set()
    start = round_lp(x, lm, ix, broken=broken, lend_room=lend_room)
    if start is None and broken:
        still: set[str] = set()
        start = round_lp(x, lm, ix, broken=still, lean=broken, lend_room=lend_room)
        if start is None and still:
            start = round_lp(x, lm, ix, lean=broken | still, trim=still, lend_room=lend_room)
    return start


def _trim(ix: IndexSets, s: str, keys_inf: list, keys_trn: list, racks_inf: dict, racks_trn: dict) -> None:
    """Take inference racks away at site s, one at a time, until its floor, power and per-zone
    rack limits hold or none is left: over power, the rack drawing the most kW; over floor or
    a zone's limit, the rack serving the fewest tok/s. The site then serves less than
    the LP put on it; the start's shares are chosen again over the racks of every site by
    complete_start, which moves that load to the sites whose rounding up left room (on
    2,000 x 10,000 the rounding broke a site limit even at the least power, and the search had
    no plan to start from)."""
    while (broken := _limit_broken(ix, s, keys_inf, keys_trn, racks_inf, racks_trn)):
        left = [k for k in keys_inf if racks_inf[k] > 0]
        if not left:
            return
        # over power: the rack drawing most; over floor or a zone's limit: the rack serving least
        worst = max(left, key=lambda k: ix.inf_econ[k].facility_kw) if broken == "power" else \
            min(left, key=lambda k: ix.tok_s_per_rack[k[1], k[3]])
        racks_inf[worst] -= 1


def _limit_broken(ix: IndexSets, s: str, keys_inf: list, keys_trn: list, racks_inf: dict, racks_trn: dict) -> str:
    """Which of site s's limits its rounded racks break: "power", "floor" (its floor, or the most
    racks of a config a zone holds: density_needs_zone's big-M), or "" for none."""
    site = ix.sites[s]
    per_config_zone: dict = defaultdict(int)
    for key in keys_inf:
        per_config_zone[key[:3]] += racks_inf[key]
    for key in keys_trn:
        per_config_zone[key[:3]] += racks_trn[key]
    power = sum(racks_inf[k] * ix.inf_econ[k].facility_kw for k in keys_inf) + \
        sum(racks_trn[k] * ix.trn_econ[k].facility_kw for k in keys_trn)
    if power > site.power_limit_kw * (1 + 1e-9):
        return "power"
    if sum(per_config_zone.values()) > site.floor_racks or any(n > ix.rack_limit[key] for key, n in per_config_zone.items()):
        return "floor"
    return ""


def _rented_jobs(x: np.ndarray, lm: LinearModel, ix: IndexSets, trough_scale: dict[str, float]) -> dict[str, str]:
    """job -> the cloud region the start rents it in: where the LP's rental of the job is larger
    than its largest placement on racks (jobs kept in the troughs are not rented)."""
    options = ix.place_by_job
    best: dict[str, tuple[float, str]] = {}
    for j, q in ix.clock.rent_train:
        value = x[lm.col("rent_trn", (j, q))]
        if j not in trough_scale and value > best.get(j, (1e-9, ""))[0]:
            best[j] = (value, q)
    return {j: q for j, (value, q) in best.items()
            if value > max((x[lm.col("place", (j, *o))] for o in options.get(j, [])), default=0.0)}


def _within_reach(ix: IndexSets, racks_inf: dict) -> None:
    """Take away racks that lend nothing where a zone holds more than zone_racks_within_reach allows
    (the load the site can reach plus one rack): the load is sized with the GPUs lent beside it, and
    racks of a chip no job may borrow cannot carry that. Largest racks go first; what is left holds
    the reachable load (the row's U), so the load itself still fits, and _room_to_lend (or the LP
    that completes the start) provides the lending."""
    limits = reach_limits(ix)
    held: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = defaultdict(list)
    for key, n in racks_inf.items():
        s, k, c, w = key
        if n > 0 and (s, w) in limits and k in limits[s, w][1]:
            held[s, c, w].append(key)
    for (s, c, w), keys in held.items():
        limit = limits[s, w][0]
        capacity = sum(racks_inf[key] * ix.tok_s_per_rack[key[1], w] for key in keys)
        for key in sorted(keys, key=lambda key: -ix.tok_s_per_rack[key[1], w]):
            if capacity <= limit:
                break
            tok = ix.tok_s_per_rack[key[1], w]
            taken = min(racks_inf[key], math.ceil((capacity - limit) / tok))
            racks_inf[key] -= taken
            capacity -= taken * tok
            if racks_inf[key] == 0:
                del racks_inf[key]  # no rack, no zone for it


def _room_to_lend(x: np.ndarray, lm: LinearModel, ix: IndexSets, lent: dict, racks_inf: dict) -> None:
    """Add racks where the rounded ones hold fewer GPUs of a dispatch group than the start lends
    from it in some hour (`lent`: (s, g, w, h) -> GPUs): a job borrows GPUs of the chips it may
    use (trough_fits_idle), and the rack option chosen for the load may be of another chip. The
    racks added are of the group's option the LP uses most there."""
    if not lent:
        return
    ck = ix.clock
    most: dict[tuple, float] = defaultdict(float)
    for (s, g, w, _), gpus in lent.items():
        most[s, g, w] = max(most[s, g, w], gpus)
    options = ix.inf_by_sw
    for (s, g, w), gpus in sorted(most.items()):
        installed = sum(n * ix.racks[key[1]].gpus_per_rack for key, n in racks_inf.items()
                        if key[0] == s and key[3] == w and ck.energy_group[key[1]] == g)
        choices = [(k, c) for k, c in options.get((s, w), []) if ck.energy_group[k] == g]
        if installed >= gpus - 1e-6 or not choices:
            continue
        k, c = max(choices, key=lambda kc: (x[lm.col("racks_inf", (s, *kc, w))], -ix.inf_econ[s, kc[0], kc[1], w].total_usd_per_year))
        racks_inf[s, k, c, w] = racks_inf.get((s, k, c, w), 0) + math.ceil((gpus - installed) / ix.racks[k].gpus_per_rack - 1e-9)


def _trough_scale(x: np.ndarray, lm: LinearModel, ix: IndexSets) -> dict[str, float]:
    """job -> the factor its LP backfill is scaled by, for every interruptible job the LP runs
    mostly in the troughs (own racks and rented GPUs together under one half): it is left
    unplaced, and its troughs must then give all its GPU-hours, 1 / (1 - placed) of the LP's.
    Placing it on racks of its own instead, as every other job, cost the start on the default
    with the clock at 24 hours 5,632 H100-equivalent GPUs that the plan found since does not buy
    (benchmarks/clock.py: $1,657.92 M then, $1,602.78 M now)."""
    ck = ix.clock
    if not ck.on:
        return {}
    options = ix.place_by_job
    rented: dict[str, float] = defaultdict(float)
    for j, q in ck.rent_train:
        rented[j] += max(x[lm.col("rent_trn", (j, q))], 0.0)
    out = {}
    for j in trough_jobs(ix):
        placed = sum(max(x[lm.col("place", (j, *o))], 0.0) for o in options.get(j, [])) + rented[j]
        if placed < 0.5:
            out[j] = 1.0 / (1.0 - placed)
    return out


def _campuses(lm: LinearModel, ix: IndexSets, racks_trn: dict) -> dict:
    """Self-build wherever the rounded training load reaches the campus size: index.add_build_sites
    keeps only sites where a built kW costs less than a leased one, so at a given rack plan a
    campus holding the whole training load (up to its limit) is the cheapest tenure there once
    its saving covers the campus's fixed cost.
    (Rounding the LP's fractional campus decisions instead would close them all: the LP takes
    the campus credit at build[s] = built_kw[s] / M[s], far below one half.)"""
    out: dict = {}
    load_kw: dict = defaultdict(float)
    for (s, k, _c, _f), n in racks_trn.items():
        load_kw[s] += n * ix.racks[k].kw_per_rack
    for s in ix.build:
        built = min(load_kw.get(s, 0.0), ix.build_limit_kw[s])
        saving = built * (12.0 * ix.sites[s].colocation_usd_per_kw_month - ix.build_usd_per_kw_year[s])
        campus = built > 0 and built >= ix.min_campus_kw and saving > ix.scenario.economics.campus_fixed_usd_per_year
        out[lm.col("build", s)] = 1.0 if campus else 0.0
        out[lm.col("built_kw", s)] = built if campus else 0.0
    return out


def _rented(x: np.ndarray, lm: LinearModel, ix: IndexSets) -> dict:
    """The LP's shares served from cloud regions, kept, with the GPUs they need rented on
    demand in each hour (or reserved for the largest hour where on demand is not offered)."""
    ck = ix.clock
    out: dict = {}
    load = defaultdict(float)
    for key in ck.rent_serve:
        share = min(max(x[lm.col("rent_share", key)], 0.0), ix.scenario.policies.max_share_per_site)
        out[lm.col("rent_share", key)] = share
        r, w, q = key
        for h in ck.hours:
            load[q, w, h] += share * ix.demand(r, w) * ck.p(r, w, h)
    chips = {c.id: c.chip for c in ix.scenario.cloud_regions}
    on_demand, reserved = set(ck.rent_on_demand), set(ck.rent_reserved)
    for (q, w, h), v in load.items():
        gpus = v / tok_s_per_gpu(ix, chips[q], w)
        if (q, w, h) in on_demand:
            out[lm.col("rent_od", (q, w, h))] = gpus
        elif (q, w) in reserved:
            out[lm.col("rent_res", (q, w))] = max(out.get(lm.col("rent_res", (q, w)), 0.0), gpus)
    return out


def solve_relaxation(h: highspy.Highs, integer_cols: np.ndarray, closed_cols: list[int], deadline: float = math.inf,
                     lazy: LazyRows | None = None) -> tuple[np.ndarray, float] | None:
    """LP relaxation with `closed_cols` fixed at 0, until `deadline`: (values, objective);
    the model is restored afterwards. With `lazy`, the rows of lazy families are held back
    until broken (optimizer.solvers.lazy_rows); should the deadline leave some broken, the
    objective is that of a relaxation of the LP (still a lower bound). Raises
    HighsAbandoned if HiGHS does not stop in time (the instance is then lost to its worker
    thread)."""
    n = len(integer_cols)
    lp = h.getLp()
    old_upper = [lp.col_upper_[i] for i in closed_cols]
    h.changeColsIntegrality(n, integer_cols, np.full(n, highspy.HighsVarType.kContinuous))
    if closed_cols:
        h.changeColsBounds(len(closed_cols), np.array(closed_cols, dtype=np.int32), np.zeros(len(closed_cols)), np.zeros(len(closed_cols)))

    def restore() -> None:
        if lazy is not None:
            lazy.release(h)
        if closed_cols:
            lower = [lp.col_lower_[i] for i in closed_cols]
            h.changeColsBounds(len(closed_cols), np.array(closed_cols, dtype=np.int32), np.array(lower), np.array(old_upper))
        h.changeColsIntegrality(n, integer_cols, np.full(n, highspy.HighsVarType.kInteger))
        h.clearSolver()

    with _restoring(restore):
        if lazy is None:
            run_until(h, deadline)
            optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
            values = (np.array(h.getSolution().col_value), h.getInfo().objective_function_value) if optimal else None
        else:
            relaxed = solve_lazily(h, lazy, deadline)
            values = (relaxed.col_value, relaxed.objective) if relaxed is not None else None
    return values


@contextmanager
def _restoring(restore):
    """Run the block, then `restore()` the HiGHS instance, whether the block ends or raises;
    but not after HighsAbandoned: the instance then stays with HiGHS's thread, and nothing may
    touch it (changing its bounds would change the model under the run)."""
    try:
        yield
    except HighsAbandoned:
        raise
    except BaseException:
        restore()
        raise
    restore()


def complete_start(h: highspy.Highs, lm: LinearModel, x: np.ndarray, deadline: float) -> np.ndarray | None:
    """`x` with its integer columns kept (rounded) and every continuous column chosen again by
    the LP over them (what HiGHS does with a start it is offered that breaks a row): the
    rounding sets racks, sites and zones and leaves continuous columns such as the clock's
    hourly serving or rentals only roughly right. None if no completion meets every row."""
    integer_cols = lm.integer_columns()
    n = len(integer_cols)
    lower, upper = (bounds[integer_cols] for bounds in lm.bounds())
    fixed = np.clip(np.round(x[integer_cols]), lower, upper)
    h.changeColsBounds(n, integer_cols, fixed, fixed)
    with _restoring(lambda: h.changeColsBounds(n, integer_cols, lower, upper)):
        relaxed = solve_relaxation(h, integer_cols, [], deadline, lazy_rows(lm))
    if relaxed is None or not lm.is_feasible(relaxed[0]):
        return None
    completed = relaxed[0]
    completed[integer_cols] = fixed
    return completed


@contextmanager
def _headroom(h: highspy.Highs, lm: LinearModel, ix: IndexSets):
    """Within the block, each site's power and floor are lowered by what rounding up can add:
    at most one rack per inference class and per training group (fewer than |W| + |J| racks),
    each at most the site's most power-hungry rack. The LP then leaves room for the ceilings
    of step 1-2; without it, on 500 x 3000 every rounding broke some site that the LP had
    filled to the brim. The coefficients are restored on exit."""
    extra_racks = len(ix.workloads) + len(ix.jobs)
    changed = []
    for family, room in (("site_power", _most_kw), ("site_space", lambda ix, s: 1.0)):
        if family not in lm.families:
            continue
        for s, row in lm.families[family].rows().items():
            col = lm.col("open", s)
            limit = ix.sites[s].power_limit_kw if family == "site_power" else float(ix.sites[s].floor_racks)
            lowered = max(limit - extra_racks * room(ix, s), HEADROOM_FLOOR * limit)
            h.changeCoeff(row, col, -lowered)
            changed.append((row, col, -limit))
    try:
        yield
    finally:
        for row, col, value in changed:
            h.changeCoeff(row, col, value)


def _over_budgets(lm: LinearModel, x: np.ndarray) -> dict[int, float]:
    """The plan-wide limits (a family of one row: the carbon cap, the capex budget, max_sites) that
    the rounded point `x` goes over: {row: by how much}. Rounding up racks adds emissions and
    capex that the LP spent to the last tonne and dollar."""
    activity = lm.row_activity(x)
    upper = lm.row_bounds()[1]
    over = {}
    for family in lm.families.values():
        rows = list(family.rows().values())
        if len(rows) == 1 and np.isfinite(upper[rows[0]]):
            excess = activity[rows[0]] - upper[rows[0]]
            if excess > 1e-6 * max(1.0, abs(upper[rows[0]])):
                over[rows[0]] = float(excess)
    return over


@contextmanager
def _budgets_lowered(h: highspy.Highs, lm: LinearModel, lowered: dict[int, float]):
    """Within the block, each row of `lowered` has its upper bound lowered by the amount given, so that
    the LP leaves the room the rounding takes (the carbon cap on the default world at 60 % of its
    unconstrained emissions: the rounded plan went over it and no start was found in 60 s). Restored
    on exit."""
    row_lower, row_upper = lm.row_bounds()
    for row, amount in lowered.items():
        h.changeRowBounds(row, row_lower[row], row_upper[row] - amount)

    def restore() -> None:
        for row in lowered:
            h.changeRowBounds(row, row_lower[row], row_upper[row])

    with _restoring(restore):
        yield


@contextmanager
def _roles_held(h: highspy.Highs, lm: LinearModel, relaxed: np.ndarray):
    """Single-purpose sites: within the block each site the LP point `relaxed` gives a role may take
    only the role it gives more of (inference on a tie), so that the LP rounded next never puts a
    job and inference at one site; sites it leaves idle may take either. Yields whether any role
    is held (nothing without the policy); restored on exit."""
    barred = []
    for s in lm.blocks["hosts_inf"].keys if "hosts_inf" in lm.blocks else []:
        inf, trn = lm.col("hosts_inf", s), lm.col("hosts_trn", s)
        if max(relaxed[inf], relaxed[trn]) > 1e-9:
            barred.append(inf if relaxed[trn] > relaxed[inf] else trn)
    if not barred:
        yield False
        return
    cols = np.array(barred, dtype=np.int32)
    lower, upper = (bounds[cols] for bounds in lm.bounds())
    h.changeColsBounds(len(cols), cols, lower, np.zeros(len(cols)))
    with _restoring(lambda: h.changeColsBounds(len(cols), cols, lower, upper)):
        yield True


def _most_kw(ix: IndexSets, s: str) -> float:
    keys = ix.inf_by_site.get(s, []) + ix.trn_by_site.get(s, [])
    return max((ix.racks[k].kw_per_rack * ix.sites[s].pue(ix.cooling[c]) for _, k, c, _ in keys), default=0.0)


def _sites_to_keep(x: np.ndarray, lm: LinearModel, ix: IndexSets) -> set[str]:
    lp = lambda block, key: x[lm.col(block, key)]  # noqa: E731
    keep = {s for s in ix.sites if lp("open", s) >= KEEP_OPEN_AT} | set(ix.scenario.policies.forced_sites)
    for j, opts in ix.place_by_job.items():
        keep.add(max(opts, key=lambda o: lp("place", (j, *o)))[0])
    for (r, w), sites in ix.serve_by_rw.items():
        if keep.isdisjoint(sites):
            keep.add(max(sites, key=lambda s: lp("share", (r, w, s))))
    return keep


def rounded_lp_start(h: highspy.Highs, lm: LinearModel, ix: IndexSets, time_limit_s: float, mip_gap: float = 0.0,
                     relaxation: tuple[np.ndarray, float] | None = None, improve: bool = True) -> tuple[str, np.ndarray | None]:
    """Round the LP relaxation of `lm` (held by HiGHS instance `h`) into a plan. Returns what
    happened, for the plan record, and the plan's column values (None if there is none); the
    caller decides what HiGHS is told of it (backends.run_highs). `relaxation`, when
    the caller has already solved the LP (the candidate-pair path has), saves solving it again.
    `improve=False` stops after step 4 when the rounding made a plan (the N-1 loop's first round
    wants its sites; the search held to them improves on it, optimizer.solving.failover_sites).
    """
    integer_cols = lm.integer_columns()
    if not len(integer_cols):
        return "none: the model has no integer columns", None
    deadline = time.perf_counter() + time_limit_s  # the LPs and the polish share the caller's remaining time
    lazy = lazy_rows(lm)
    if relaxation is None:
        relaxation = solve_relaxation(h, integer_cols, [], deadline, lazy)
    if relaxation is None:
        if time.perf_counter() >= deadline - 1e-3:
            return "none: the LP relaxation did not finish in time", None
        return "none: the LP relaxation has no optimal solution", None
    first, lp_bound = relaxation
    h.relaxation_bound = lp_bound  # a bound for the MIP held by h, should its search have to be abandoned
    keep, point = _sites_to_keep(first, lm, ix), first
    lowered: dict[int, float] = {}  # budget row -> how far the rounding's LPs lower its upper bound
    for _ in range(BUDGET_ROUNDS + 1):
        with _budgets_lowered(h, lm, lowered), _roles_held(h, lm, point) as roles_held:
            if lowered or roles_held:  # the sites to keep, chosen again by the LP that leaves the room or holds the roles
                again = solve_relaxation(h, integer_cols, [], deadline, lazy)
                if again is None:
                    break
                point = again[0]
                keep = _sites_to_keep(point, lm, ix)
            col_value, rounded_value, keep, closed = _round_once(h, lm, ix, point, keep, deadline, lazy)
        over = _over_budgets(lm, rounded_value) if col_value is None and rounded_value is not None else {}
        if not over or time.perf_counter() >= deadline:
            break
        for row, excess in over.items():  # the rounding added this much: the next LP leaves room for it
            lowered[row] = lowered.get(row, 0.0) + BUDGET_MARGIN * excess
    start = col_value
    rounded = f"rounded LP relaxation (${float(lm.objective() @ start):,.0f}/yr, {len(keep)} sites kept)" if start is not None else ""
    if not improve and start is not None:  # without a rounded plan, step 5's MIP may still find one
        return rounded, start
    polish_s = min(POLISH_SHARE * (deadline - time.perf_counter()), POLISH_MAX_S)
    if len(keep) > POLISH_MAX_KEPT_SHARE * len(ix.sites):
        polish_s = 0.0  # the restricted MIP would be nearly the whole MIP: leave the search to HiGHS
    # Good enough to stop polishing: within the asked gap of the LP bound (HiGHS will stop at its root).
    target = lp_bound + mip_gap * abs(lp_bound)
    if start is not None and float(lm.objective() @ start) <= target:
        polish_s = 0.0  # already within the gap: the restricted MIP could only confirm it
    try:
        polished = _restricted_mip(h, closed, col_value, time.perf_counter() + polish_s, target) if polish_s > 0.5 else None
    except HighsAbandoned as exc:
        _keep_cheaper(exc, lm, col_value)
        raise
    if polished is not None:
        col_value, objective = polished
        how = f"{'rounded LP relaxation polished' if start is not None else 'found'} by the MIP on the {len(keep)} kept sites (${objective:,.0f}/yr)"
    elif start is not None:
        how = rounded
    else:
        return "none: the rounded LP broke a site limit or a policy", None
    if float(lm.objective() @ col_value) > target and RACKS in lm.blocks and lm.blocks[RACKS].keys:
        rens_s = min(RENS_SHARE * (deadline - time.perf_counter()), POLISH_MAX_S)
        try:
            better = _rack_rens(h, lm, col_value, time.perf_counter() + rens_s, deadline, target) if rens_s > 0.5 else None
        except HighsAbandoned as exc:
            _keep_cheaper(exc, lm, col_value)
            raise
        if better is not None and float(lm.objective() @ better) < float(lm.objective() @ col_value):
            how = f"{how}; inference racks chosen again around the LP over its sites and zones (${float(lm.objective() @ better):,.0f}/yr)"
            col_value = better
    return how, col_value


def _round_once(h: highspy.Highs, lm: LinearModel, ix: IndexSets, first: np.ndarray, keep: set[str], deadline: float,
                lazy) -> tuple[np.ndarray | None, np.ndarray | None, set[str], list[int]]:
    """Steps 0-4 once: the LP over the kept sites (with headroom), rounded, completed, or dived
    on its placements. Returns (the plan or None, the rounded point before completion or None,
    the sites kept, the open columns closed)."""
    integer_cols = lm.integer_columns()
    closed = [lm.col("open", s) for s in ix.sites if s not in keep]
    with _headroom(h, lm, ix):
        second = solve_relaxation(h, integer_cols, closed, deadline, lazy)
        if second is None and time.perf_counter() < deadline:
            # No LP over the kept sites: with N-1 the spare that re-serves a lost site sits at sites
            # the LP opens only a little (200 x 1,000: 10 sites open at half or more, 13 at all; the
            # LP over the 10 is infeasible, and rounding the whole LP's point broke a site's limits).
            keep = keep | {s for s in ix.sites if first[lm.col("open", s)] > OPEN_AT_ALL}
            closed = [lm.col("open", s) for s in ix.sites if s not in keep]
            second = solve_relaxation(h, integer_cols, closed, deadline, lazy)
        second = second[0] if second is not None else first
    col_value = _with_values(second, round_within_limits(second, lm, ix))
    rounded_value = col_value
    if col_value is not None and not lm.is_feasible(col_value):
        # The rounding sets the integer columns and only roughly the continuous ones (the clock's
        # hourly serving, rentals; the shares of a site whose racks _trim took away): an LP over
        # the rounded integers chooses them again, before the polish starts from the plan.
        completed = complete_start(h, lm, col_value, deadline)
        if completed is None and ix.clock.backfill:
            # Jobs kept in the troughs borrow GPUs of the chips they may use. The racks sized for tok/s
            # may hold too few of them; adding the LP's lending racks at every site is safe but dear (on the
            # default at 24 hours the plan cost $1,605.38 M with it always on, $1,602.78 M without), so it is
            # the fallback when no LP completes the start.
            col_value = _with_values(second, round_within_limits(second, lm, ix, lend_room=True))
            completed = complete_start(h, lm, col_value, deadline) if col_value is not None else None
        if completed is None and rounded_value is not None:
            completed = _dive_on_placements(h, lm, ix, rounded_value, closed, deadline, lazy)
        col_value = completed
    return col_value, rounded_value, keep, closed


def _keep_cheaper(exc: HighsAbandoned, lm: LinearModel, plan: np.ndarray | None) -> None:
    """A MIP of steps 5-6 was abandoned at its deadline: the plan it set out from (`plan`, if any)
    goes with the exception unless HiGHS's incumbent is a plan that costs no more. Step 6's MIP
    starts from nothing, so its incumbent may cost more than the plan it was to improve; the
    polish's may be missing."""
    if plan is None:
        return
    best = None if exc.best is None else np.asarray(exc.best[0], dtype=float)
    if best is None or best.shape != plan.shape or not lm.is_feasible(best) or float(lm.objective() @ best) > float(lm.objective() @ plan):
        exc.best = (plan, float(lm.objective() @ plan), math.nan)


def _rack_rens(h: highspy.Highs, lm: LinearModel, plan: np.ndarray, deadline: float, complete_by: float,
               objective_target: float) -> np.ndarray | None:
    """Step 6: `plan`'s sites, zones, jobs and every other integer column kept; the LP over them
    sizes the inference racks again, and the MIP with each rack count between the floor and the
    ceiling of its LP value, each kept site and zone free to close (a RENS neighbourhood: Berthold, 2014), chooses the whole racks, the
    routing following them, until `deadline`; a plan HiGHS's tolerances leave just outside a row
    is completed by complete_start until `complete_by`. None without a plan that meets every row;
    the model is restored.

    Rounding each (site, class) up on its own pays for the part of a rack the LP leaves idle at
    every site; the neighbourhood search fills racks by moving load between sites. On the
    default world at 24 hours (57,134 columns) the rounded plan cost $1,606.93 M, this step's
    plan $1,597.18 M in 9.5 s (its LP 2 s); the MIP with the same sites and zones and every rack
    count free took 29 s to find $1,596.80 M."""
    integer_cols = lm.integer_columns()
    block = lm.blocks[RACKS]
    rack_cols = np.arange(block.start, block.start + len(block.keys), dtype=np.int32)
    other = np.setdiff1d(integer_cols, rack_cols).astype(np.int32)
    lower, upper = lm.bounds()
    kept = np.clip(np.round(plan[other]), lower[other], upper[other])
    h.changeColsBounds(len(other), other, kept, kept)

    def restore() -> None:
        h.changeColsBounds(len(rack_cols), rack_cols, lower[rack_cols], upper[rack_cols])
        h.changeColsBounds(len(other), other, lower[other], upper[other])

    with _restoring(restore):
        relaxed = solve_relaxation(h, integer_cols, [], deadline, lazy_rows(lm))
        found = None
        if relaxed is not None:
            sized = relaxed[0][rack_cols]
            low = np.clip(np.floor(sized + 1e-6), lower[rack_cols], upper[rack_cols])
            high = np.clip(np.ceil(sized - 1e-6), low, upper[rack_cols])
            h.changeColsBounds(len(rack_cols), rack_cols, low, high)
            # a kept site or zone the LP left without racks may close (the rounding keeps a site for a
            # region whose load the LP over the kept sites then moves away: open, idle, paying its fixed cost)
            may_close = np.concatenate([np.arange(lm.blocks[b].start, lm.blocks[b].stop, dtype=np.int32) for b in ("open", "zone")])
            h.changeColsBounds(len(may_close), may_close, lower[may_close], np.clip(np.round(plan[may_close]), lower[may_close],
                                                                                      upper[may_close]))
            found = _restricted_mip(h, [], None, deadline, objective_target)
    if found is None:
        return None
    x = found[0]
    x[integer_cols] = np.round(x[integer_cols])
    return x if lm.is_feasible(x) else complete_start(h, lm, x, complete_by)


def _dive_on_placements(h: highspy.Highs, lm: LinearModel, ix: IndexSets, rounded: np.ndarray, closed: list[int],
                        deadline: float, lazy) -> np.ndarray | None:
    """The rounded plan with its training placements kept, its inference chosen again: the LP is
    solved with every job's placement fixed where the rounding put it, and rounded once more.

    Rounding places each job whole at the site the LP gave most of it; where that site's power
    then held the job but not the inference the LP had also put there, _trim took inference racks
    away, and no LP over the other sites' rounded racks could serve what they served (the default
    world with market-sized power limits: Toronto, 32 MW, took the 27 MW frontier job beside 7.5 MW
    of inference). With the placements fixed the LP moves that inference before it is rounded.
    None when that plan breaks a limit too, or no LP completes it."""
    block = lm.blocks.get("place")
    if block is None or not len(block.keys):
        return None
    cols = np.arange(block.start, block.stop, dtype=np.int32)
    lower, upper = (bounds[cols] for bounds in lm.bounds())
    fixed = np.clip(np.round(rounded[cols]), lower, upper)
    h.changeColsBounds(len(cols), cols, fixed, fixed)
    with _restoring(lambda: h.changeColsBounds(len(cols), cols, lower, upper)):
        with _headroom(h, lm, ix):
            third = solve_relaxation(h, lm.integer_columns(), closed, deadline, lazy)
        if third is None:
            return None
        value = _with_values(third[0], round_within_limits(third[0], lm, ix))
        if value is None:
            return None
        return value if lm.is_feasible(value) else complete_start(h, lm, value, deadline)


def _with_values(x: np.ndarray, assigned: dict | None) -> np.ndarray | None:
    """`x` with the columns of `assigned` ({column: value}) set, or None when there is no assignment."""
    if assigned is None:
        return None
    out = x.copy()
    out[list(assigned)] = list(assigned.values())
    return out


def _solution(col_value: list[float]) -> highspy.HighsSolution:
    solution = highspy.HighsSolution()
    solution.col_value = list(col_value)
    solution.value_valid = True
    return solution


def _restricted_mip(h: highspy.Highs, closed_cols: list[int], start: np.ndarray | None, deadline: float,
                    objective_target: float) -> tuple[np.ndarray, float] | None:
    """The MIP with `closed_cols` fixed at 0, from `start` if there is one, until `deadline`,
    its own gap POLISH_GAP, or a plan at objective_target: (values, objective) of its best
    plan, which is never worse than the start; the model and options are restored."""
    lp = h.getLp()
    index = np.array(closed_cols, dtype=np.int32)
    lower = np.array([lp.col_lower_[i] for i in closed_cols])
    upper = np.array([lp.col_upper_[i] for i in closed_cols])
    if len(index):
        h.changeColsBounds(len(index), index, np.zeros(len(index)), np.zeros(len(index)))
    if start is not None:
        h.setSolution(_solution(start))
    h.setOptionValue("mip_rel_gap", POLISH_GAP)
    h.setOptionValue("objective_target", objective_target)
    run_until(h, deadline)
    h.setOptionValue("objective_target", -highspy.kHighsInf)
    info = h.getInfo()
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    result = (np.array(h.getSolution().col_value), info.objective_function_value) if found else None
    if len(index):
        h.changeColsBounds(len(index), index, lower, upper)
    h.clearSolver()
    return result
