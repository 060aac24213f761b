"""N-1 over one plan's open sites: every loss's re-routing in the model, the sites held.

The lazy loop (optimizer.solving.failover) searches over every site, and at the size of the
default world its rounds return the warm start's rounded LP plan: it breaks losses, and the
greedy repair makes it secure by adding racks where they break ($1,902 M -> $1,927 M,
measured 2026-12-06). Held to the open sites O of that plan, the full N-1 model is small
enough to build whole:

* open[s] = 1 for s in O, 0 elsewhere (bounds, not rows);
* L = every (f, r, w) with f in O and r a region f may serve, and the re-serving pairs
  restricted to sites of O (the others are closed and hold no spare).

Every plan of that model meets the re-route rows of every loss exactly, so it is N-1-secure
for the full model too (a closed site's loss needs nothing, and more backups only help). It
is a restriction, not a relaxation: its bound proves nothing about the full model and is
never reported as one. What it buys is the plan: a search over racks, zones and routing with
the spare sized for every loss at once, where the repair could only add racks to a plan
routed without it (docs/resilience.md).
"""

from __future__ import annotations

import copy
import time
from typing import Callable

import numpy as np

from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.model.resilience import survivable
from dcplace.optimizer.solving.failover import broken, check_losses, open_sites, state_from_columns, transfer

HELD_SHARE = 0.85  # of the time left, for the model held to the plan's sites: the lazy loop's next round gets the rest
HELD_MIN_S = 10.0  # time left below which it is not tried (its LP alone takes about 5 s on the default world)
HELD_MAX_REROUTES = 500_000  # re-routing columns above which it is not tried (the default world's: about 100,000)


def held_index(ix: IndexSets, sites: list[str]) -> IndexSets:
    """A copy of `ix` whose N-1 model is the full one over `sites`: every loss of a site of
    `sites` re-routed region by region, to sites of `sites` only. The rest is shared with `ix`."""
    held = copy.copy(ix)
    chosen = set(sites)
    inside = np.array([s.id in chosen for s in ix.scenario.sites], dtype=bool)
    held.failover = {w: mask & inside[None, :] for w, mask in ix.failover.items()}
    alpha = survivable(ix.scenario)
    by_sw = ix.serve_by_sw
    held.failover_lost = sorted({(f, r, w) for f in sites for w in alpha for r in by_sw.get((f, w), [])})
    held.failover_cuts = []
    held._groups = dict(ix._groups)  # groups computed for the copy stay with it
    return held


def reroute_count(held: IndexSets) -> int:
    """How many reroute columns the model of `held` would hold (optimizer.model.failover.reroute_keys), counted
    without building them."""
    rows: dict[tuple[str, str], list[int]] = {}
    for f, r, w in held.failover_lost:
        rows.setdefault((f, w), []).append(held.region_pos[r])
    count = 0
    for (f, w), positions in rows.items():
        mask = held.failover[w][positions]
        count += int(mask.sum()) - int(mask[:, held.site_pos[f]].sum())
    return count


def held_model(held: IndexSets, build: Callable[[IndexSets], LinearModel], sites: list[str]) -> LinearModel:
    """The model of `held_index`, with the sites of `sites` open and every other site closed."""
    lm = build(held)
    inside = set(sites)
    for s in lm.blocks["open"].keys:
        lm.fix("open", s, 1.0 if s in inside else 0.0)
    return lm


def close_idle(x: np.ndarray, lm: LinearModel, ix: IndexSets) -> np.ndarray:
    """`x` with every open site that holds no rack, job or standby closed, with its zones (and
    its single-purpose flags): it serves, trains and backs up nothing, and its fixed costs go.
    Held open, the restricted model may leave such a site with a zone it did not need."""
    y = x.copy()
    busy = set()
    for block in ("racks_inf", "racks_trn", "place", "standby"):
        if block in lm.blocks:
            b = lm.blocks[block]
            site_at = 1 if block in ("place", "standby") else 0
            busy |= {key[site_at] for i, key in enumerate(b.keys) if abs(y[b.start + i]) > 1e-9}
    for s in open_sites(y, lm):
        if s in busy:
            continue
        y[lm.col("open", s)] = 0.0
        for c in ix.zones_by_site.get(s, []):
            y[lm.col("zone", (s, c))] = 0.0
        for flag in ("hosts_inf", "hosts_trn"):
            if flag in lm.blocks and s in lm.blocks[flag].pos:
                y[lm.col(flag, s)] = 0.0
    return y


def secure_on_sites(ix: IndexSets, lm: LinearModel, sites: list[str], start: np.ndarray | None,
                    build: Callable[[IndexSets], LinearModel], solve_held: Callable[..., tuple], deadline: float,
                    threads: int = 1) -> tuple[np.ndarray | None, dict]:
    """A secure plan over `sites` as columns of `lm`, or None, and a record of what was held
    and found. The restricted full N-1 model (module docstring) is solved by
    `solve_held(model, index, start)` from `start` (a secure plan of `lm` over those sites, if
    any); its plan is checked again by the re-route LP of every loss of the full index, and
    its idle sites are closed. Not tried with less than HELD_MIN_S left before `deadline`, or
    above HELD_MAX_REROUTES re-routing columns (the record says `skipped`)."""
    started = time.perf_counter()
    if deadline - started < HELD_MIN_S:
        return None, {"skipped": f"{deadline - started:.1f} s left, under {HELD_MIN_S:g} s"}
    sites = sorted(sites)
    held = held_index(ix, sites)
    columns = reroute_count(held)
    if columns > HELD_MAX_REROUTES:
        return None, {"sites": len(sites), "skipped": f"{columns:,} re-routing columns, over {HELD_MAX_REROUTES:,}"}
    model = held_model(held, build, sites)
    offered = None
    if start is not None:
        offered = transfer(start, lm, model, held, check_losses(held, state_from_columns(start, lm, held), threads))
        offered = offered if model.is_feasible(offered) else None
    result, y = solve_held(model, held, offered)
    plan = None
    if result.has_plan and y is not None:
        losses = check_losses(ix, state_from_columns(y, model, held), threads)
        if not broken(losses):
            as_is = transfer(y, model, lm, ix, losses)
            plan = next((p for p in (close_idle(as_is, lm, ix), as_is) if lm.is_feasible(p)), None)
    return plan, {"sites": len(sites), "reroutings": len(held.failover_lost), "columns": model.n_cols,
                  "objective_usd_per_year": float(lm.objective() @ plan) if plan is not None else result.objective_usd_per_year,
                  "s": time.perf_counter() - started, "secure": plan is not None}


__all__ = ["HELD_SHARE", "HELD_MIN_S", "HELD_MAX_REROUTES", "reroute_count", "held_index", "held_model", "close_idle",
           "secure_on_sites"]
