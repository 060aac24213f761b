"""Constraint families of resilience: re-serving a lost site's load (N-1) and training standby.

Notation as in optimizer.model.formulation, plus (docs/resilience.md):
  a[w]            share of class-w demand that must survive the loss of any one site
                  (policies.survive_site_loss; classes not named have no rows here);
  L               the (lost site f, region r, class w) re-routings the model holds
                  (ix.failover_lost), generated lazily by optimizer.solving.failover:
                  solve, re-route every single-site loss in an LP, add the regions of the
                  losses that break, re-solve;
  reroute[f,r,w,s] in [0, 1]: the share of region r's class-w demand that s takes over
                  when f is down, for s != f within r's failover budget (model.resilience);
  standby[j,s,f,x] in {0, 1}: job j can resume at site s on fabric f and chip x.

A (f, r, w) not in L has no rows: the model is a relaxation of the full N-1 model, and the
plan it returns is N-1-secure once every loss re-routes (the proof is in
optimizer/solving/failover.py).
"""

from __future__ import annotations

import numpy as np

from dcplace.optimizer.model.families import Relax, family
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.model.resilience import failover_budget_ms, reroute_pairs, survivable

MISSION = 1e6  # as unserved demand in the diagnosis: every limit moves before demand is left unserved


def reroute_keys(ix: IndexSets) -> list[tuple[str, str, str, str]]:
    """(f, r, w, s) for every re-routing (f, r, w) in ix.failover_lost and every site s that may re-serve it."""
    return [(f, r, w, s) for f, r, w in ix.failover_lost for s in reroute_pairs(ix, f, r, w)]


def _reroute_block(lm: LinearModel, ix: IndexSets):
    """The reroute columns, created by whichever failover family runs first."""
    if "reroute" not in lm.blocks:
        lm.add_block("reroute", reroute_keys(ix), 0.0, 1.0, "continuous")
    return lm.blocks["reroute"]


def hall_cuts(ix: IndexSets) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...]]]:
    """(f, w, regions, sites) for every site f, survivable w and region r that f may serve: the
    regions of f whose every backup (other than f) lies within r's backups, and those backups;
    then the min cuts the lazy loop found (ix.failover_cuts). Duplicates are dropped, and so is a
    cut whose every region has its re-routing of f in the model (L): the exact rows hold there."""
    alpha = survivable(ix.scenario)
    by_sw = ix.serve_by_sw
    has = {key for key in ix.inf_by_sw if key[1] in alpha}
    site_ids = [site.id for site in ix.scenario.sites]
    lost = set(ix.failover_lost)
    out, seen = [], set()
    for f, w in sorted(key for key in by_sw if key[1] in alpha):
        regions = by_sw[f, w]
        # reach[i, j]: site cols[j] (not f, with racks for w) is a backup of regions[i]
        reach = ix.failover[w][[ix.region_pos[r] for r in regions]]
        reach &= np.array([(s, w) in has and s != f for s in site_ids])
        cols = np.flatnonzero(reach.any(axis=0))
        reach = reach[:, cols]
        for i, members in _distinct_cuts(reach):
            inside = tuple(sorted(regions[q] for q in members))
            if (f, w, inside) not in seen and any((f, q, w) not in lost for q in inside):
                seen.add((f, w, inside))
                out.append((f, w, inside, tuple(sorted(site_ids[j] for j in cols[reach[i]]))))
    for f, w, inside, sites in getattr(ix, "failover_cuts", []):
        if (f, w, inside) not in seen and any((f, q, w) not in lost for q in inside):
            seen.add((f, w, inside))
            out.append((f, w, inside, tuple(s for s in sites if (s, w) in has)))
    return out


CUT_BLOCK = 2048  # regions per block of hall_cuts' product: at most R x 2,048 float32 (80 MB at 10,000 regions)


def _distinct_cuts(reach: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(i, the regions inside region i's cut) for the first region i of each distinct cut, in
    region order. Region q is inside i's cut when |reach[q] minus reach[i]| = 0: one matrix
    product instead of a subset test per pair of regions (those took 285 s at 500 x 3,000), taken
    CUT_BLOCK columns at a time and kept as bits, so that memory stays O(R x CUT_BLOCK) rather
    than O(R x R) (0.5 GB of floats at 10,000 regions per site)."""
    as_float = reach.astype(np.float32)  # counts up to the sites' number: exact in float32
    outside = 1.0 - as_float
    n = len(reach)
    if not n:
        return []
    firsts, packed = [], []
    for lo in range(0, n, CUT_BLOCK):
        inside_of = (as_float @ outside[lo:lo + CUT_BLOCK].T) < 0.5  # column k: the cut of region lo + k
        bits = np.ascontiguousarray(np.packbits(inside_of, axis=0).T)
        _, first = np.unique(bits, axis=0, return_index=True)  # alike cuts once per block
        firsts.append(lo + first)
        packed.append(bits[first])
    firsts, packed = np.concatenate(firsts), np.concatenate(packed)
    order = np.argsort(firsts, kind="stable")
    _, keep = np.unique(packed[order], axis=0, return_index=True)  # ... and across blocks: the first region
    return [(int(firsts[order[k]]), np.flatnonzero(np.unpackbits(packed[order[k]])[:n])) for k in sorted(keep)]


def _reserve_fields(ix: IndexSets, key, share: float) -> dict:
    f, r, w = key
    region = ix.regions[r]
    return dict(site=ix.sites[f].name, region=region.name, w=w, short=f"{share * region.demand_tok_s[w]:,.0f}",
                budget=f"{failover_budget_ms(ix.scenario, region, w):g}")


@family(checker="check_failover", section="resilience", relax=Relax(
    "short", "share of the region's demand", lambda ix, key: 1.0,
    "when site {site} is down, region {region} '{w}' loses {short} tok/s more than policies.survive_site_loss allows: "
    "no spare capacity within its failover budget of {budget} ms", _reserve_fields,
    "policies.survive_site_loss or failover_rtt_ms, regions.csv failover_rtt_<class>_ms, or sites.csv power_limit_kw near the region",
    weight=MISSION))
def failover_reserve(lm: LinearModel, ix: IndexSets) -> None:
    """sum_{s != f} reroute[f,r,w,s] - share[r,w,f] >= -(1 - a[w])   for every (f, r, w) in L.

    What region r loses when f is down beyond the share 1 - a[w] it may lose is re-served
    elsewhere; with no pair within the failover budget the row reads share[r,w,f] <= 1 - a[w].
    """
    if not ix.failover_lost:
        return
    block = _reroute_block(lm, ix)
    alpha = survivable(ix.scenario)
    by_lost: dict[tuple[str, str, str], list[int]] = {}
    for i, (f, r, w, s) in enumerate(block.keys):
        by_lost.setdefault((f, r, w), []).append(block.start + i)
    for f, r, w in ix.failover_lost:
        terms = [(j, 1.0) for j in by_lost.get((f, r, w), [])] + [(lm.col("share", (r, w, f)), -1.0)]
        lm.add_row("failover_reserve", (f, r, w), terms, lower=-(1.0 - alpha[w]))


@family(checker="check_failover", section="resilience", not_relaxed="a law of the model like inference_capacity: "
        "what a surviving site re-serves comes out of its racks; the limits behind it (power, floor, failover budgets) are relaxed instead")
def failover_capacity(lm: LinearModel, ix: IndexSets) -> None:
    """sum_r share[r,w,s] * demand[r,w] + sum_r reroute[f,r,w,s] * demand[r,w] - sum_{k,c} racks_inf[s,k,c,w] * tok_s[k,w] <= 0
    for every lost site f of L and every (s, w) that may re-serve its load.

    A surviving site keeps its own load and takes over what it re-serves from its spare
    capacity: nobody else's users are moved.
    """
    if not ix.failover_lost:
        return
    block = _reroute_block(lm, ix)
    into: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for i, (f, r, w, s) in enumerate(block.keys):
        into.setdefault((f, s, w), []).append((block.start + i, ix.demand(r, w)))
    by_sw = ix.serve_by_sw
    racks = ix.inf_by_sw
    for (f, s, w), rerouted in into.items():
        own = [(lm.col("share", (r, w, s)), ix.demand(r, w)) for r in by_sw.get((s, w), [])]
        capacity = [(lm.col("racks_inf", (s, k, c, w)), -ix.tok_s_per_rack[k, w]) for k, c in racks.get((s, w), [])]
        lm.add_row("failover_capacity", (f, s, w), own + rerouted + capacity, upper=0.0)


@family(n1=True, checker="check_failover", section="resilience", not_relaxed="implied, for every loss, by failover_reserve and "
         "failover_capacity of the full N-1 model; it only makes the lazily generated model anticipate losses not yet generated")
def failover_aggregate(lm: LinearModel, ix: IndexSets) -> None:
    """spare[s,w] - sum_{k,c} racks_inf[s,k,c,w] * tok_s[k,w] + sum_r share[r,w,s] * demand[r,w] = 0   key (spare, s, w);
    sum_{r in R(f,w)} share[r,w,f] * demand[r,w] - sum_{s in N(f,w)} spare[s,w] <= (1 - a[w]) * sum_{r in R(f,w)} demand[r,w]
                                                                                            key (loss, f, w);
    for every site f and survivable w, where R(f,w) = the regions f may serve and N(f,w) = the
    sites other than f within the failover budget of some region of R(f,w).

    sum_{q in Q} share[q,w,f] * demand[q,w] - sum_{s in N} spare[s,w] <= (1 - a[w]) * sum_{q in Q} demand[q,w]
                                                                                            key (cut f, w, Q)
    for every site f, survivable w and region r that f may serve, with N = r's backups other
    than f and Q = the regions of f with no backup outside N; and for every min cut (Q, N) of
    a broken loss the lazy loop found (optimizer.solving.failover). A cut whose regions all
    have their re-routing of f in L is left out (the exact rows hold there).

    The aggregate of the full N-1 rows of loss f: what f's regions lose beyond 1 - a must
    fit in the spare capacity of the sites that could take any of it; a cut row is the same
    sum over regions Q that reach no backup outside N (the Hall condition of the re-route:
    with a = 1, a plan meeting every cut is secure). They hold for every loss from the first
    solve on, so the lazy loop adds cuts instead of re-routings and the model stays small.
    """
    alpha = survivable(ix.scenario)
    if not alpha:
        return
    inf = ix.inf_by_sw
    by_sw = ix.serve_by_sw
    keys = sorted(key for key in inf if key[1] in alpha)
    lm.add_block("spare", keys, 0.0, float("inf"), "continuous")
    for s, w in keys:
        terms = [(lm.col("spare", (s, w)), 1.0)]
        terms += [(lm.col("racks_inf", (s, k, c, w)), -ix.tok_s_per_rack[k, w]) for k, c in inf[s, w]]
        terms += [(lm.col("share", (r, w, s)), ix.demand(r, w)) for r in by_sw.get((s, w), [])]
        lm.add_row("failover_aggregate", ("spare", s, w), terms, lower=0.0, upper=0.0)
    has_spare = set(keys)
    site_ids = [site.id for site in ix.scenario.sites]
    for f, w in sorted(key for key in by_sw if key[1] in alpha):
        regions = by_sw[f, w]
        reach = ix.failover[w][[ix.region_pos[r] for r in regions]].any(axis=0)
        backups = [site_ids[j] for j in np.flatnonzero(reach) if site_ids[j] != f and (site_ids[j], w) in has_spare]
        terms = [(lm.col("share", (r, w, f)), ix.demand(r, w)) for r in regions]
        terms += [(lm.col("spare", (s, w)), -1.0) for s in backups]
        lm.add_row("failover_aggregate", ("loss", f, w), terms, upper=(1.0 - alpha[w]) * sum(ix.demand(r, w) for r in regions))
    for f, w, inside, near in hall_cuts(ix):
        terms, upper = cut_row(lm, ix, f, w, inside, near)
        lm.add_row("failover_aggregate", (f"cut {f}", w, ",".join(inside)), terms, upper=upper)


SPREAD_BLOCK = 1024  # regions per block of spread_rows' product: R x 1,024 floats at most


def spread_rows(ix: IndexSets) -> list[tuple[str, str, float, tuple[str, ...]]]:
    """(f, w, lo, N) for every site f and survivable w of failover_open_spread whose lo is positive.

    For each region r, F(r) = the sites that may serve r, R_F = the regions every one of whose
    serving sites lies in F(r), lo(r) = sum_{R_F} demand / |F(r)| - (1 - a) x the most any
    site of F(r) may serve; per site f, the region r of f with the largest lo(r), and N = every
    site other than f within the failover budget of a region some site of F(r) serves, or of a region of f."""
    alpha = survivable(ix.scenario)
    if not alpha or ix.clock.on:  # the clock's hourly serving and its rentals (cloud regions serve only with the clock on)
        return []
    by_rw, by_sw = ix.serve_by_rw, ix.serve_by_sw
    has = {key for key in ix.inf_by_sw if key[1] in alpha}
    site_ids = [site.id for site in ix.scenario.sites]
    out = []
    for w, a in sorted(alpha.items()):
        regions = [r for r in ix.regions if ix.demand(r, w) > 0 and by_rw.get((r, w))]
        if not regions:
            continue
        serves = np.zeros((len(regions), len(site_ids)), dtype=bool)  # serves[i, j]: site j may serve regions[i]
        for i, r in enumerate(regions):
            serves[i, [ix.site_pos[s] for s in by_rw[r, w]]] = True
        demand = np.array([ix.demand(r, w) for r in regions])
        region_load = {s: sum(ix.demand(r, w) for r in by_sw.get((s, w), [])) for s in site_ids}
        as_float, outside = serves.astype(np.float32), (~serves).astype(np.float32)
        lo = np.zeros(len(regions))
        for start in range(0, len(regions), SPREAD_BLOCK):  # inside[q, k]: every site of q serves region start + k
            inside = (as_float @ outside[start:start + SPREAD_BLOCK].T) < 0.5
            lo[start:start + SPREAD_BLOCK] = demand @ inside
        lo /= np.maximum(serves.sum(axis=1), 1)
        if a < 1.0:
            lo -= (1.0 - a) * np.array([max(region_load[site_ids[j]] for j in np.flatnonzero(row)) for row in serves])
        reach = ix.failover[w][[ix.region_pos[r] for r in regions]]
        for f in sorted(s for s in ix.sites if (s, w) in has and by_sw.get((s, w))):
            mine = np.flatnonzero(serves[:, ix.site_pos[f]])
            best = mine[np.argmax(lo[mine])]
            if lo[best] <= 0:
                continue
            served = serves[:, serves[best]].any(axis=1) | serves[:, ix.site_pos[f]]
            near = tuple(site_ids[j] for j in np.flatnonzero(reach[served].any(axis=0)) if (site_ids[j], w) in has and site_ids[j] != f)
            out.append((f, w, float(lo[best]), near))
    return out


@family(optimality=True, checker="check_failover", section="resilience", not_relaxed="holds for every N-1-secure plan with whole "
        "sites (an open site's loss row, and for a closed one the loss of the busiest site of F); it only tightens the LP "
        "relaxation, and a multi-period or elastic model is built without it (build_model(..., cheapest=False))")
def failover_open_spread(lm: LinearModel, ix: IndexSets) -> None:
    """sum_{r in R(f)} share[r,w,f] * demand[r,w] + lo[f,w] * (1 - open[f]) - sum_{s in N} spare[s,w] <= (1 - a[w]) * sum_{r in R(f)} demand[r,w]
    for every site f and survivable w with lo[f,w] > 0 (spread_rows: F a set of sites holding f, R_F the regions
    only F may serve, lo = sum_{R_F} demand / |F| - (1 - a[w]) x the most a site of F may serve, N the backups
    other than f of every region a site of F or f serves). No row with the clock on (hourly serving, rentals).

    Why it holds, for a plan with whole opens that survives every loss: if f is open the row is
    f's loss row of failover_aggregate over more backups. If f is closed its load and spare are
    0, and R_F is served by F's open sites only, so the busiest of them, g, carries at least
    sum_{R_F} demand / |F|; g's own loss row (its backups lie in N, or are f, with no spare)
    then gives sum_N spare >= load[g] - (1 - a) x demand of g's regions >= lo. What it buys is the LP
    bound: there a site opened a tenth carries a whole site's load (share_needs_open only
    keeps each region's share below the open), so the LP spreads load, and with it the spare
    every loss needs, over many sites it pays a fraction of; here a site opened a fraction
    asks for lo x the rest in spare. Default world, chat and reasoning survivable: the LP
    rises $4.7 M (2026-12-06, docs/resilience.md).
    """
    rows = spread_rows(ix)
    if not rows or "spare" not in lm.blocks:  # spare[s,w] is failover_aggregate's: built without it, no row here
        return
    alpha = survivable(ix.scenario)
    spare = lm.blocks["spare"]
    by_sw = ix.serve_by_sw
    for f, w, lo, near in rows:
        regions = by_sw[f, w]
        total = sum(ix.demand(r, w) for r in regions)  # the row divided by it: coefficients near 1, as the cut rows'
        terms = [(lm.col("share", (r, w, f)), ix.demand(r, w) / total) for r in regions]
        terms += [(lm.col("open", f), -lo / total)] + [(spare.start + spare.pos[s, w], -1.0 / total) for s in near]
        lm.add_row("failover_open_spread", (f, w), terms, upper=(1.0 - alpha[w]) - lo / total)


def cut_row(lm: LinearModel, ix: IndexSets, f: str, w: str, inside, near) -> tuple[list[tuple[int, float]], float]:
    """(terms, upper bound) of the cut row of failover_aggregate for lost site f, class w, regions
    `inside` (Q) and backups `near` (N): sum_Q share[q,w,f] * demand[q,w] - sum_N spare[s,w] <=
    (1 - a[w]) * sum_Q demand[q,w], divided by sum_Q demand[q,w] so that its coefficients are near
    1, as the shares' (a backup without a spare column, one that cannot host w, is left out).
    The one place the row is written: the model's build and the LP cut rounds of
    benchmarks/n1_bound.py both take it from here."""
    alpha = survivable(ix.scenario)[w]
    spare = lm.blocks["spare"]
    total = sum(ix.demand(q, w) for q in inside)
    terms = [(lm.col("share", (q, w, f)), ix.demand(q, w) / total) for q in inside]
    terms += [(spare.start + spare.pos[s, w], -1.0 / total) for s in near if (s, w) in spare.pos]
    return terms, 1.0 - alpha


def standby_keys(ix: IndexSets) -> list[tuple[str, str, str, str]]:
    """(j, s, f, x): every placement option of a job that requires a standby site."""
    return [key for key in ix.place if ix.jobs[key[0]].standby_required]


@family(checker="check_standby", section="resilience", not_relaxed="a yes/no requirement per job with no amount "
        "to move; a job no second site can hold is named before solving (optimizer.solving.failover.standby_reachable)")
def training_standby(lm: LinearModel, ix: IndexSets) -> None:
    """sum_{s,f,x} standby[j,s,f,x] = 1                                           key (once, j);
    sum_{f,x} place[j,s,f,x] + sum_{f,x} standby[j,s,f,x] <= 1                     key (apart, j, s);
    sum_j (place[j,s,f,x] + standby[j,s,f,x]) * gpus_h100[j] - eff[f] * h100_equiv[x] * sum racks_trn[s,k,c,f] * gpus[k] <= 0
                                                                                   key (capacity, s, f, x).

    For every job with standby_required: a second site with an eligible fabric and chip and
    the capacity to resume it, reserved for it (standby capacity is not pooled between
    jobs, so it holds whichever single site is lost). Options are those of `place`.
    """
    keys = standby_keys(ix)
    if not keys:
        return
    lm.add_block("standby", keys, 0.0, 1.0, "binary")
    name = "training_standby"
    by_job: dict[str, list] = {}
    for key in keys:
        by_job.setdefault(key[0], []).append(key)
    for j, options in by_job.items():
        lm.add_row(name, ("once", j), [(lm.col("standby", key), 1.0) for key in options], lower=1.0, upper=1.0)
    place = ix.place_by_job
    for j, options in by_job.items():
        for s in sorted({key[1] for key in options}):
            terms = [(lm.col("place", (j, s2, f, x)), 1.0) for s2, f, x in place.get(j, []) if s2 == s]
            terms += [(lm.col("standby", key), 1.0) for key in options if key[1] == s]
            lm.add_row(name, ("apart", j, s), terms, upper=1.0)
    standby_at: dict[tuple[str, str, str], list[str]] = {}
    for j, s, f, x in keys:
        standby_at.setdefault((s, f, x), []).append(j)
    racks = ix.trn_by_sfchip
    placed = ix.place_by_sfchip
    for (s, f, x), jobs in sorted(standby_at.items()):
        need = [(lm.col("place", (j, s, f, x)), ix.jobs[j].gpus_h100_equiv) for j in placed.get((s, f, x), [])]
        need += [(lm.col("standby", (j, s, f, x)), ix.jobs[j].gpus_h100_equiv) for j in jobs]
        have = [(lm.col("racks_trn", (s, k, c, f)), -ix.h100_per_rack(k, f)) for k, c in racks.get((s, f, x), [])]
        lm.add_row(name, ("capacity", s, f, x), need + have, upper=0.0)


__all__ = ["hall_cuts", "cut_row", "spread_rows", "failover_open_spread", "failover_reserve", "failover_capacity", "failover_aggregate", "training_standby", "reroute_keys", "standby_keys"]
