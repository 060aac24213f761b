"""N-1: a plan that survives the loss of any one open site, found by lazy generation.

A failure scenario per open site multiplies the routing variables, so the losses are
generated lazily (docs/resilience.md):

1. solve the model with the losses L generated so far (at first none: the plain plan);
2. for every open site f and survivable class w, re-route f's load in an LP
   (`reroute_lp`): each region r needs max(0, share[r,w,f] - (1 - a[w])) x demand[r,w]
   re-served, by sites s != f within its failover budget, from their spare capacity
   (built capacity minus their own load);
3. for every loss f whose LP leaves demand unserved, add its min cut (`min_cut`: the
   regions Q left short and every region sharing a saturated backup with them, and every
   site N they reach; sum_Q need <= sum_N spare is valid for every plan and this plan
   breaks it by the tok/s unserved) to ix.failover_cuts, a row of failover_aggregate; only
   when a broken loss yields no new cut, add (f, r, w) to L for each region r with load to
   re-serve (optimizer.model.failover builds its `reroute` columns and rows); repair the
   plan into a secure one (the best secure plan so far is kept, carried into every new
   model and handed to the solver as its start, and returned if the solver does not beat
   it); re-solve; stop when no loss breaks.

Proof that the final plan is N-1-secure and within the gap of the full N-1 model: the
model with L is the full N-1 model with the rows of the (f, r, w) not in L left out (their
reroute columns then sit at zero in every capacity row) plus cut rows that every plan of
the full model meets (a cut's regions reach no backup outside its sites, so whatever they
re-serve comes out of those sites' spare), so it is a relaxation and its best bound is a lower bound of the full model's optimum. The final
plan passes step 2 for every open site, and a closed site carries no load, so its loss
needs nothing: the plan is feasible for the full model. A feasible plan whose cost is
within the gap of a lower bound of the full model is within that gap of the full model's
optimum. (The LP of step 2 is exactly the full model's rows for f with the plan's
decisions fixed: a max-flow from f's lost load to the surviving sites' spare capacity.)

`SolveRecord.failover` records the rounds, the losses generated and the check of the
final plan; the independent checker re-routes every loss itself (optimizer/checker/resilience.py,
check_failover, a max-flow in networkx).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from dcplace.models import InputProblem
from dcplace.models.checks import record_row
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.failover import hall_cuts
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.model.resilience import failover_budget_ms, survivable
from dcplace.optimizer.solvers.backends import gap_status
from dcplace.optimizer.solvers.highs_model import HighsAbandoned, run_until, set_deadline, to_highs

UNSERVED_MS = 1e5  # the re-route LP's price of a tok/s left unserved, in ms: above any round trip, so the most is re-served first
SHORT_REL, SHORT_ABS = 1e-6, 1e-3  # a loss breaks when it leaves more than REL x its need + ABS tok/s unserved
MAX_ROUNDS = 50


@dataclass
class Reroute:
    """What an LP re-route of one lost site's class load found."""

    need_tok_s: dict[str, float]  # region -> tok/s that must be re-served
    flows: dict[tuple[str, str], float]  # (region, site) -> tok/s re-served
    unserved_tok_s: dict[str, float]  # region -> tok/s that found no spare capacity in budget

    @property
    def short_tok_s(self) -> float:
        return sum(self.unserved_tok_s.values())

    @property
    def breaks(self) -> bool:
        return self.short_tok_s > SHORT_REL * sum(self.need_tok_s.values()) + SHORT_ABS


def reroute_lp(need: dict[str, float], spare: dict[str, float], rtt: dict[tuple[str, str], float], threads: int = 1) -> Reroute:
    """min sum_{r,s} rtt[r,s] * flow[r,s] + UNSERVED_MS * sum_r unserved[r]
    s.t. sum_s flow[r,s] + unserved[r] = need[r]; sum_r flow[r,s] <= spare[s]; flow, unserved >= 0.

    `rtt` holds the pairs (r, s) allowed to carry flow (within the failover budget). The
    most that can be re-served is re-served, over the shortest round trips. Flows are
    scaled by the total need, so the LP's numbers are near 1 whatever the demand.
    """
    need = {r: v for r, v in need.items() if v > 0}
    total = sum(need.values())
    if total <= 0:
        return Reroute({}, {}, {})
    arcs = [(r, s) for (r, s) in rtt if r in need and spare.get(s, 0.0) > 0]
    lm = LinearModel("reroute")
    lm.add_block("flow", arcs, 0.0, math.inf, "continuous")
    regions = sorted(need)
    lm.add_block("unserved", regions, 0.0, math.inf, "continuous")
    by_region, by_site = defaultdict(list), defaultdict(list)
    for i, (r, s) in enumerate(arcs):
        by_region[r].append(i)
        by_site[s].append(i)
    flow = lm.blocks["flow"]
    for r in regions:
        terms = [(flow.start + i, 1.0) for i in by_region[r]] + [(lm.col("unserved", r), 1.0)]
        lm.add_row("need", r, terms, lower=need[r] / total, upper=need[r] / total)
    for s in sorted(by_site):
        lm.add_row("spare", s, [(flow.start + i, 1.0) for i in by_site[s]], upper=spare[s] / total)
    for i, arc in enumerate(arcs):
        lm.add_cost("rtt", flow.start + i, rtt[arc])
    for r in regions:
        lm.add_cost("unserved", lm.col("unserved", r), UNSERVED_MS)
    h = to_highs(lm, threads)
    h.run()
    x = np.asarray(h.getSolution().col_value)
    flows = {arc: float(x[flow.start + i]) * total for i, arc in enumerate(arcs) if x[flow.start + i] * total > 1e-9}
    unserved = {r: float(x[lm.col("unserved", r)]) * total for r in regions}
    return Reroute(need, flows, {r: v for r, v in unserved.items() if v > 1e-9})


# ------------------------------------------------------------------ the plan's serving state


@dataclass
class ServingState:
    """What a plan built and routes, as the re-route needs it."""

    open_sites: set[str]
    capacity: dict[tuple[str, str], float]  # (site, class) -> tok/s the racks serve
    shares: dict[tuple[str, str, str], float]  # (region, class, site) -> share
    load: dict[tuple[str, str], float] = field(default_factory=dict)  # (site, class) -> tok/s served

    def spare(self, w: str) -> dict[str, float]:
        return {s: max(0.0, cap - self.load.get((s, w), 0.0)) for (s, ww), cap in self.capacity.items() if ww == w}


def open_sites(x: np.ndarray, lm: LinearModel, above: float = 0.5) -> list[str]:
    """The sites a model's column values `x` open (open above `above`), in the model's order."""
    block = lm.blocks["open"]
    return [s for i, s in enumerate(block.keys) if x[block.start + i] > above]


def state_from_columns(x: np.ndarray, lm: LinearModel, ix: IndexSets, fractional: bool = False) -> ServingState:
    """The serving state of a solved model's column values (racks rounded as extract does);
    `fractional`: of an LP relaxation's, racks as they are and every site with a share or a
    rack open."""
    capacity: dict[tuple[str, str], float] = defaultdict(float)
    racks = lm.blocks["racks_inf"]
    for i, (s, k, c, w) in enumerate(ix.inf_racks):
        n = float(x[racks.start + i]) if fractional else round(float(x[racks.start + i]))
        if n > 1e-9:
            capacity[s, w] += n * ix.tok_s_per_rack[k, w]
    block = lm.blocks["share"]
    shares = {ix.serve[i]: min(1.0, float(x[block.start + i])) for i in np.flatnonzero(x[block.start:block.stop] > 1e-9)}
    opened = set(open_sites(x, lm, 1e-9 if fractional else 0.5))
    return with_load(ServingState(opened, dict(capacity), shares), ix)


def with_load(state: ServingState, ix: IndexSets) -> ServingState:
    load: dict[tuple[str, str], float] = defaultdict(float)
    for (r, w, s), share in state.shares.items():
        load[s, w] += share * ix.demand(r, w)
    state.load = dict(load)
    return state


def lost_need(state: ServingState, ix: IndexSets, f: str, w: str, alpha: float) -> dict[str, float]:
    """Region -> tok/s of class w that must be re-served when f is lost (share a of demand survives)."""
    out = {}
    for (r, ww, s), share in state.shares.items():
        if s == f and ww == w:
            need = max(0.0, share - (1.0 - alpha)) * ix.demand(r, w)
            if need > 0:
                out[r] = need
    return out


def failover_arcs(ix: IndexSets, regions, w: str, f: str, mask: np.ndarray) -> dict[tuple[str, str], float]:
    """(region, site) -> rtt for every pair of `mask` (regions x scenario sites) from `regions`, site != f."""
    site_ids = [s.id for s in ix.scenario.sites]
    out = {}
    for r in regions:
        i = ix.region_pos[r]
        for j in np.flatnonzero(mask[i]):
            if site_ids[j] != f:
                out[r, site_ids[j]] = float(ix.rtt_ms[i, j])
    return out


def check_losses(ix: IndexSets, state: ServingState, threads: int = 1) -> dict[str, dict[str, Reroute]]:
    """Open site -> survivable class -> its LP re-route, for every loss that needs one."""
    alpha = survivable(ix.scenario)
    out: dict[str, dict[str, Reroute]] = {}
    for f in sorted(state.open_sites):
        for w, a in alpha.items():
            need = lost_need(state, ix, f, w, a)
            if need:
                out.setdefault(f, {})[w] = reroute_lp(need, state.spare(w), failover_arcs(ix, need, w, f, ix.failover[w]), threads)
    return out


def broken(losses: dict[str, dict[str, Reroute]]) -> dict[str, float]:
    """Lost site -> tok/s left unserved, for the losses that break."""
    return {f: sum(r.short_tok_s for r in by_w.values()) for f, by_w in losses.items() if any(r.breaks for r in by_w.values())}


# ------------------------------------------------------------------ repair: a secure plan from an insecure one

REPAIR_ROUNDS = 20
ROUND_SHARE = 0.5  # of the time left, at most, for a round of the lazy loop (the last secure one may then use the rest)
FINISH_MIN_S = 5.0  # time left below which a secure round is not continued


def _site_use(x: np.ndarray, lm: LinearModel, ix: IndexSets, s: str) -> tuple[float, float]:
    """(facility kW, racks) the plan's columns `x` put at site s."""
    kw = racks = 0.0
    for block, keys, econ in (("racks_inf", ix.inf_by_site.get(s, []), ix.inf_econ),
                              ("racks_trn", ix.trn_by_site.get(s, []), ix.trn_econ)):
        for key in keys:
            n = round(float(x[lm.col(block, key)]))
            kw += n * econ[key].facility_kw
            racks += n
    return kw, racks


def _add_capacity(x: np.ndarray, lm: LinearModel, ix: IndexSets, s: str, w: str, tok_s: float) -> float:
    """Add racks of class w at site s (in place) for up to `tok_s`, the cheapest per tok/s that
    power, floor and the rack bounds admit, preferring zones already built; returns tok/s added."""
    if "hosts_inf" in lm.blocks and x[lm.col("hosts_inf", s)] < 0.5 and x[lm.col("open", s)] > 0.5:
        return 0.0  # single_purpose_sites: a training site takes no inference racks here
    site = ix.sites[s]
    options = ix.inf_by_sw.get((s, w), [])
    built = {c for c in ix.zones_by_site.get(s, []) if x[lm.col("zone", (s, c))] > 0.5}
    order = sorted(options, key=lambda kc: (kc[1] not in built, ix.inf_econ[s, kc[0], kc[1], w].total_usd_per_year / ix.tok_s_per_rack[kc[0], w]))
    added = 0.0
    for k, c in order:
        if added >= tok_s - 1e-9:
            break
        econ = ix.inf_econ[s, k, c, w]
        kw, racks = _site_use(x, lm, ix, s)
        j = lm.col("racks_inf", (s, k, c, w))
        room = min(math.floor((site.power_limit_kw - kw) / econ.facility_kw + 1e-9), site.floor_racks - racks,
                   int(lm.blocks["racks_inf"].upper[j - lm.blocks["racks_inf"].start] - round(float(x[j]))))
        n = min(room, math.ceil((tok_s - added) / ix.tok_s_per_rack[k, w] - 1e-9))
        if n <= 0:
            continue
        x[j] = round(float(x[j])) + n
        x[lm.col("zone", (s, c))] = 1.0
        x[lm.col("open", s)] = 1.0
        if "hosts_inf" in lm.blocks:
            x[lm.col("hosts_inf", s)] = 1.0
        added += n * ix.tok_s_per_rack[k, w]
    return added


def _unit_cost(ix: IndexSets, s: str, w: str) -> float:
    """The cheapest annual cost per tok/s of class w at site s (inf where no rack serves it)."""
    return min((ix.inf_econ[s, k, c, w].total_usd_per_year / ix.tok_s_per_rack[k, w] for k, c in ix.inf_by_sw.get((s, w), [])),
               default=math.inf)


def repair(x: np.ndarray, lm: LinearModel, ix: IndexSets, threads: int = 1) -> tuple[np.ndarray, dict] | None:
    """A plan that survives every single-site loss, made from `x` by adding racks where each
    broken loss leaves demand unserved (at open sites first, cheapest per tok/s first), re-checked until
    no loss breaks: (column values of `lm` with racks, zones and opens raised, the last
    re-routes by lost site), or None if power and floor leave no room. Nothing else changes,
    so a plan feasible for the model stays feasible but for the N-1 rows, which now hold."""
    x = x.copy()
    alpha = survivable(ix.scenario)
    site_ids = [t.id for t in ix.scenario.sites]
    for _ in range(REPAIR_ROUNDS):
        losses = check_losses(ix, state_from_columns(x, lm, ix), threads)
        bad = broken(losses)
        if not bad:
            return x, losses
        progress = 0.0
        for f in sorted(bad, key=lambda f: -bad[f]):  # one loss at a time: capacity added for one serves the next
            for w in losses[f]:
                state = state_from_columns(x, lm, ix)
                need = lost_need(state, ix, f, w, alpha[w])
                rr = reroute_lp(need, state.spare(w), failover_arcs(ix, need, w, f, ix.failover[w]), threads) if need else None
                if rr is None or not rr.breaks:
                    continue
                for r, short in sorted(rr.unserved_tok_s.items(), key=lambda kv: -kv[1]):
                    i = ix.region_pos[r]
                    targets = [site_ids[j] for j in np.flatnonzero(ix.failover[w][i]) if site_ids[j] != f]
                    targets.sort(key=lambda t: (t not in state.open_sites, _unit_cost(ix, t, w), float(ix.rtt_ms[i, ix.site_pos[t]])))
                    for t in targets:
                        if short <= 1e-6:
                            break
                        got = _add_capacity(x, lm, ix, t, w, short)
                        short -= got
                        progress += got
        if progress <= 0:
            return None
    return None


REPAIR_MIP_S = 15.0  # at most, for the repair MIP of a round
REPAIR_MIP_GAP = 1e-3


def repair_mip(x: np.ndarray, lm: LinearModel, ix: IndexSets, deadline: float, threads: int = 1) -> np.ndarray | None:
    """The least-cost additions that make the plan `x` (columns of `lm`) meet every row of `lm`:
    a MIP over `lm` with the shares, placements, training racks and standbys fixed at `x`, and
    the inference racks, zones and opens only allowed to rise (re-routes and spare free).
    Small next to the placement MIP (no routing decision is left). Column values of its best
    plan, or None."""
    lower, upper = lm.bounds()
    lower, upper = lower.copy(), upper.copy()
    for name, block in lm.blocks.items():
        part = slice(block.start, block.stop)
        if name in ("share", "place", "racks_trn", "standby", "hosts_inf", "hosts_trn"):
            lower[part] = upper[part] = np.round(x[part]) if block.domain != "continuous" else x[part]
        elif name in ("racks_inf", "zone", "open"):
            lower[part] = np.minimum(np.maximum(lower[part], np.round(x[part])), upper[part])
    h = to_highs(lm, threads)
    h.changeColsBounds(lm.n_cols, np.arange(lm.n_cols, dtype=np.int32), lower, upper)
    h.setOptionValue("mip_rel_gap", REPAIR_MIP_GAP)
    try:
        set_deadline(h, deadline)
        run_until(h, deadline)
    except HighsAbandoned as exc:
        return np.asarray(exc.best[0]) if exc.best is not None else None
    if h.getInfo().primal_solution_status != 2:  # kSolutionStatusFeasible
        return None
    return np.asarray(h.getSolution().col_value)


def transfer(x: np.ndarray, lm: LinearModel, new: LinearModel, ix: IndexSets, losses: dict[str, dict[str, Reroute]]) -> np.ndarray:
    """Column values for the model `new` (more re-routings than `lm`) of the plan `x` of `lm`,
    secure by `losses` (its re-routes): every block by key, reroute from the re-route flows,
    spare = capacity - load."""
    out = np.zeros(new.n_cols)
    for name, block in new.blocks.items():
        if name in ("reroute", "spare") or name not in lm.blocks:
            continue
        old = lm.blocks[name]
        for i, key in enumerate(block.keys):
            if key in old.pos:
                out[block.start + i] = x[old.start + old.pos[key]]
    state = state_from_columns(x, lm, ix)
    if "reroute" in new.blocks:
        block = new.blocks["reroute"]
        for i, (f, r, w, s) in enumerate(block.keys):
            rr = losses.get(f, {}).get(w)
            if rr is not None:
                out[block.start + i] = rr.flows.get((r, s), 0.0) / ix.demand(r, w)
    if "spare" in new.blocks:
        block = new.blocks["spare"]
        for i, (s, w) in enumerate(block.keys):
            out[block.start + i] = max(state.capacity.get((s, w), 0.0) - state.load.get((s, w), 0.0), 0.0)
    return out


@dataclass
class Round:
    objective_usd_per_year: float | None
    solve_s: float
    losses_checked: int  # open sites whose loss was re-routed in an LP
    losses_broken: list[str]  # ... and left demand unserved
    reroutings_added: int  # (lost site, region, class) added to the model
    unserved_tok_s: float
    repaired_usd_per_year: float | None = None  # the secure plan repaired from this round's, handed to the next
    cuts_added: int = 0  # min cuts of broken losses added to the model (failover_aggregate rows "cut f")


def needs_n1(ix: IndexSets) -> bool:
    return bool(ix.failover)


def min_cut(rr: Reroute, arcs: dict[tuple[str, str], float], spare: dict[str, float]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The regions and sites on the source side of a broken re-route's min cut: from the regions
    left short, every site they may reach, and back from a site (all its spare used) to the
    regions whose flow uses it. The regions' need exceeds the sites' spare by the unserved tok/s."""
    out_of: dict[str, list[str]] = defaultdict(list)
    for r, s in arcs:
        out_of[r].append(s)
    into: dict[str, list[str]] = defaultdict(list)
    for (r, s), v in rr.flows.items():
        if v > 1e-9:
            into[s].append(r)
    regions, sites = set(rr.unserved_tok_s), set()
    todo = list(regions)
    while todo:
        r = todo.pop()
        for s in out_of[r]:
            if s in sites:
                continue
            sites.add(s)  # a site with no spare now is in the cut too: another plan may give it some
            for q in into[s]:
                if q not in regions:
                    regions.add(q)
                    todo.append(q)
    return tuple(sorted(regions)), tuple(sorted(sites))


def _new_cuts(ix: IndexSets, state: ServingState, losses: dict[str, dict[str, Reroute]], bad: dict[str, float]) -> list[tuple]:
    """(f, w, regions, sites): the min cut of every broken loss, not yet in the model. Every
    region reaches only sites of the cut, so sum_regions need <= sum_sites spare is valid for
    every plan (the Hall condition of the re-route), and the plan at hand breaks it."""
    have = {cut[:3] for cut in hall_cuts(ix)}
    lost = set(ix.failover_lost)
    out = []
    for f in bad:
        for w, rr in losses[f].items():
            if not rr.breaks:
                continue
            spare = state.spare(w)
            cut = (f, w) + min_cut(rr, failover_arcs(ix, rr.need_tok_s, w, f, ix.failover[w]), spare)
            if cut[:3] not in have and any((f, q, w) not in lost for q in cut[2]):  # else the exact rows hold: re-routings
                have.add(cut[:3])
                out.append(cut)
    return out


def _new_reroutings(ix: IndexSets, losses: dict[str, dict[str, Reroute]], bad: dict[str, float]) -> list[tuple[str, str, str]]:
    """(f, r, w) for every region with load to re-serve in every broken loss, not yet in the model."""
    have = set(ix.failover_lost)
    return sorted({(f, r, w) for f in bad for w, rr in losses[f].items() for r in rr.need_tok_s} - have)


def secure(ix: IndexSets, lm: LinearModel, result, x, build: Callable[[IndexSets], LinearModel],
           solve_again: Callable[..., tuple], deadline: float, threads: int = 1, mip_gap: float = 0.0,
           on_sites: Callable[..., tuple] | None = None):
    """The lazy loop (module docstring): returns (lm, result, x, record). Stops when no loss
    breaks (record["secure"] True), when every region of every broken loss already has its
    re-routing in the model (a family left out, or the solver's tolerance: record["secure"]
    False), or when the deadline leaves no time for another round (record["stopped"] says why).

    `on_sites(lm, sites, start)`, if given, is tried once, at the first round that breaks: a
    secure plan (columns of lm) searched over that round's open sites with every loss in the
    model (optimizer.solving.failover_sites.secure_on_sites), or None, and its record; when it
    beats the repaired plan it is the next round's start and the plan to fall back on."""
    started = time.perf_counter()
    rounds: list[Round] = []
    solve_s = result.solve_time_s
    record = {"classes": dict(survivable(ix.scenario)), "secure": False, "stopped": ""}
    checked = 0
    fallback = None  # (model, objective, columns) of the best repaired secure plan
    bounds = []  # every round's model is a relaxation of the full N-1 model: each round's bound bounds it
    while True:
        if result.best_bound_usd_per_year is not None:
            bounds.append(result.best_bound_usd_per_year)
        state = state_from_columns(x, lm, ix)
        check_started = time.perf_counter()
        losses = check_losses(ix, state, threads)
        check_s = time.perf_counter() - check_started  # the final solve keeps this back for its own check
        bad = broken(losses)
        checked = len(state.open_sites)
        cuts = _new_cuts(ix, state, losses, bad)
        new = [] if cuts else _new_reroutings(ix, losses, bad)  # a cut per broken loss; the re-routings once no new cut is found
        rounds.append(Round(result.objective_usd_per_year, result.solve_time_s, len(losses), sorted(bad), len(new), sum(bad.values()), cuts_added=len(cuts)))
        if not bad:
            record["secure"] = True
            gap = result.gap
            if (gap is None or gap > mip_gap) and deadline - time.perf_counter() - check_s > FINISH_MIN_S:
                # a round stops at ROUND_SHARE of the time left: the secure one may use all of it, from its own
                # plan, but for the check of its plan (at 500 x 3,000 it took 8 s, and the solve overran by as much)
                again, y = solve_again(lm, x, True, check_s)
                solve_s += again.solve_time_s
                if again.has_plan and y is not None and not broken(check_losses(ix, state_from_columns(y, lm, ix), threads)):
                    bound = max(b for b in (again.best_bound_usd_per_year, result.best_bound_usd_per_year, -math.inf) if b is not None)
                    if again.objective_usd_per_year > result.objective_usd_per_year:
                        again, y = replace(again, objective_usd_per_year=result.objective_usd_per_year), x
                    objective = again.objective_usd_per_year
                    gap = max(0.0, objective - bound) / max(abs(objective), 1e-9) if math.isfinite(bound) else None
                    result = replace(again, best_bound_usd_per_year=bound if math.isfinite(bound) else None, gap=gap,
                                     status=gap_status(gap, mip_gap))
                    x = y
                    rounds.append(Round(result.objective_usd_per_year, again.solve_time_s, len(losses), [], 0, 0.0))
            break
        if not new and not cuts:
            record["stopped"] = f"losses of {', '.join(sorted(bad))} still break with their re-routing in the model"
            break
        if len(rounds) > MAX_ROUNDS:
            record["stopped"] = f"more than {MAX_ROUNDS} rounds"
            break
        held_next = on_sites is not None and "held_sites" not in record  # its search starts from the greedy repair
        repaired = None if deadline - time.perf_counter() > 2 * REPAIR_MIP_S and not held_next else repair(x, lm, ix, threads)
        if deadline - time.perf_counter() <= 1.0:
            record["stopped"] = "time limit"
            if repaired is not None:
                start = transfer(repaired[0], lm, lm, ix, repaired[1])
                if lm.is_feasible(start):
                    fallback = (lm, float(lm.objective() @ start), start)
            break
        ix.failover_lost = sorted(set(ix.failover_lost) | set(new))
        ix.failover_cuts = getattr(ix, "failover_cuts", []) + cuts  # read by model.failover.hall_cuts
        old_lm, lm = lm, build(ix)
        start = None
        if repaired is None:  # a secure plan to start the next round from (and to fall back on): least-cost additions first
            y = repair_mip(transfer(x, old_lm, lm, ix, {}), lm, ix, min(deadline, time.perf_counter() + REPAIR_MIP_S), threads)
            repaired = repair(y, lm, ix, threads) if y is not None else None
            if repaired is not None:
                start = transfer(repaired[0], lm, lm, ix, repaired[1])
        else:
            start = transfer(repaired[0], old_lm, lm, ix, repaired[1])
        if start is not None and not lm.is_feasible(start):
            start = None
        if fallback is not None and fallback[0] is old_lm:  # the best secure plan so far stays a start: every row added holds for it
            kept = transfer(fallback[2], old_lm, lm, ix, check_losses(ix, state_from_columns(fallback[2], old_lm, ix), threads))
            if lm.is_feasible(kept):
                fallback = (lm, fallback[1], kept)
                if start is None or fallback[1] < lm.objective() @ start:
                    start = kept
        if on_sites is not None and "held_sites" not in record:
            sites = set(open_sites(x, old_lm)) | (set(open_sites(start, lm)) if start is not None else set())
            held, record["held_sites"] = on_sites(lm, sorted(sites), start)
            if held is not None and (start is None or lm.objective() @ held < lm.objective() @ start):
                start = held
        if start is not None:
            rounds[-1].repaired_usd_per_year = float(lm.objective() @ start)
        if start is not None and (fallback is None or lm.objective() @ start < fallback[1]):
            fallback = (lm, float(lm.objective() @ start), start)
        result, x = solve_again(lm, start)
        solve_s += result.solve_time_s
        if not result.has_plan or x is None:
            record["stopped"] = f"round {len(rounds) + 1}: {result.status}"
            break
    if not record["secure"] and fallback is not None and (result.has_plan or x is None):
        # the loop ended without a secure solver plan: the best repaired plan is secure (the
        # model it was built for holds every re-routing it needs), and the last round's bound
        # is still a lower bound of the full N-1 model
        model, objective, columns = fallback
        bound = result.best_bound_usd_per_year if model is lm else None
        bound = min(bound, objective) if bound is not None else None
        lm, x = model, columns
        result = replace(result, status="feasible", objective_usd_per_year=objective, best_bound_usd_per_year=bound,
                         gap=(objective - bound) / max(abs(objective), 1e-9) if bound is not None else None,
                         termination=f"{result.termination}; the N-1 loop stopped ({record['stopped']}): its best repaired "
                         "secure plan is returned")
        record["secure"] = True
        record["repaired"] = True
    if (record["secure"] and not record.get("repaired") and fallback is not None and fallback[0] is lm and result.has_plan
            and result.objective_usd_per_year is not None and fallback[1] < result.objective_usd_per_year - 1e-6):
        x = fallback[2]  # a repaired secure plan of an earlier round beats the solver's last one
        result = replace(result, objective_usd_per_year=fallback[1])
        record["repaired"] = True
    if result.has_plan and result.objective_usd_per_year is not None and bounds:
        objective = result.objective_usd_per_year
        bound = min(max(bounds + [result.best_bound_usd_per_year or -math.inf]), objective)
        gap = max(0.0, objective - bound) / max(abs(objective), 1e-9)
        result = replace(result, best_bound_usd_per_year=bound, gap=gap,
                         status=gap_status(gap, mip_gap) if record["secure"] else "feasible")
    lost_sites = sorted({f for f, _, _ in ix.failover_lost})
    record.update({
        "scenarios_generated": len(lost_sites),  # single-site losses with a re-routing in the final model
        "losses_in_model": lost_sites,
        "reroutings_in_model": len(ix.failover_lost),
        "cuts_in_model": len(getattr(ix, "failover_cuts", [])),
        "open_sites_checked": checked,
        "rounds": [vars(r) for r in rounds],
        "loop_s": time.perf_counter() - started,
    })
    if result.has_plan:
        result = replace(result, solve_time_s=solve_s)
    return lm, result, x, record


# ------------------------------------------------------------------ prechecks



def failover_reachable(ix: IndexSets) -> list[InputProblem]:
    """A survivable (region, class) whose every serving site lacks a second site within the
    failover budget: no plan can survive the loss of the one that serves it."""
    alpha = survivable(ix.scenario)
    if not alpha:
        return []
    site_ids = [s.id for s in ix.scenario.sites]
    out = []
    for i, region in enumerate(ix.scenario.regions):
        for w, a in alpha.items():
            if region.demand_tok_s.get(w, 0.0) <= 0 or w not in ix.eligible:
                continue
            serving = [site_ids[j] for j in np.flatnonzero(ix.eligible[w][i])]
            backups = {site_ids[j] for j in np.flatnonzero(ix.failover[w][i])}
            if not serving or any(backups - {s} for s in serving):
                continue
            if (1.0 - a) * len(serving) >= 1.0 - 1e-9:  # spread so that no one loss takes more than 1 - a
                continue
            budget = failover_budget_ms(ix.scenario, region, w)
            first = min(serving, key=lambda s: float(ix.rtt_ms[i, ix.site_pos[s]]))  # the site that would serve it
            others = sorted((float(ix.rtt_ms[i, ix.site_pos[s]]), s) for s in ix.sites if s != first
                            and (not region.allowed_countries or ix.sites[s].country in region.allowed_countries))
            nearest = (f"nearest backup {ix.sites[others[0][1]].name} ({others[0][1]}) at {others[0][0]:.1f} ms"
                       if others and math.isfinite(others[0][0]) else "no other site can reach it")
            column = f"failover_rtt_{w}_ms"
            # the fix names where this region's budget comes from: its own cell, the policy, or the default
            source = (column if w in region.failover_rtt_ms else f"policies.failover_rtt_ms.{w} (or this region's {column})"
                      if w in ix.scenario.policies.failover_rtt_ms else f"{column} (default: twice rtt_budget_{w}_ms) or policies.failover_rtt_ms.{w}")
            out.append(InputProblem(
                ix.scenario.files.get("regions", "regions"), record_row(ix.scenario, "regions", i), column,
                f"region {region.name} has no second site within its failover budget of {budget:g} ms for '{w}'; {nearest}.",
                f"raise {source} to at least the backup's round trip, add a site near "
                f"{region.name}, or lower policies.survive_site_loss.{w}."))
    return out


def standby_reachable(ix: IndexSets) -> list[InputProblem]:
    """A job that requires a standby site but can be held by one site only."""
    sites_of: dict[str, set[str]] = defaultdict(set)
    for j, s, _, _ in ix.place:
        sites_of[j].add(s)
    out = []
    for n, job in enumerate(ix.scenario.jobs):
        if job.standby_required and len(sites_of.get(job.id, ())) == 1:
            only = next(iter(sites_of[job.id]))
            out.append(InputProblem(
                ix.scenario.files.get("jobs", "jobs") or "jobs", record_row(ix.scenario, "jobs", n), "standby_required",
                f"job {job.name} requires a standby site, but only {ix.sites[only].name} ({only}) can hold it.",
                "set standby_required to false (accept the delay), or give another site the power, floor, cooling, "
                "fabric and countries the job needs."))
    return out


__all__ = ["Reroute", "reroute_lp", "ServingState", "open_sites", "state_from_columns", "with_load", "lost_need", "failover_arcs",
           "check_losses", "broken", "min_cut", "secure", "needs_n1", "failover_reachable", "standby_reachable", "UNSERVED_MS"]
