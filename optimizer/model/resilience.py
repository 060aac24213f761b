"""Resilience policy, resolved for the model: which classes must survive the loss of any one
open site, how much of their demand, and within which failover round-trip budget
(docs/resilience.md). No solver import; index.py reads `failover_masks` while it prunes.

* `survive_site_loss[w]` = a in (0, 1]: after the loss of any one open site f, at least the
  share a of every region's class-w demand is still served. Sites other than f keep their
  own load; f's load is re-served from their spare capacity, each region r needs
  max(0, share[r,w,f] - (1 - a)) x demand[r,w] of it re-served.
* The failover budget of (r, w): the region's `failover_rtt_<w>_ms` cell, else
  `policies.failover_rtt_ms[w]`, else FAILOVER_RTT_FACTOR x the region's own
  `rtt_budget_<w>_ms` (the stated default: users accept twice their normal round trip
  while a site is down).
* A re-served pair (r, w, s) must have rtt(r, s) <= failover budget, s in r's allowed
  countries and s able to host a rack that serves w.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dcplace.optimizer.model.latency import allowed_mask

if TYPE_CHECKING:  # type names only: index.py imports this module
    from dcplace.models import Region, Scenario
    from dcplace.optimizer.model.index import IndexSets

FAILOVER_RTT_FACTOR = 2.0  # default failover budget = this x the region's normal budget for the class


def survivable(scenario: Scenario) -> dict[str, float]:
    """Class -> share of demand that must survive the loss of any one site (only classes named)."""
    return dict(scenario.policies.survive_site_loss)


def failover_budget_ms(scenario: Scenario, region: Region, w: str) -> float:
    """The round-trip budget region `region` accepts for class w while a site is down."""
    if w in region.failover_rtt_ms:
        return float(region.failover_rtt_ms[w])
    if w in scenario.policies.failover_rtt_ms:
        return float(scenario.policies.failover_rtt_ms[w])
    return FAILOVER_RTT_FACTOR * float(region.rtt_budget_ms.get(w, 0.0))


def failover_masks(ix: IndexSets, serves_class: set[tuple[str, str]]) -> dict[str, np.ndarray]:
    """Survivable class -> regions x scenario-sites mask of pairs that may re-serve a lost
    site's load: demand > 0, rtt within the failover budget, site allowed for the region
    and able to host a rack that serves the class (forbidden sites are not in `serves_class`)."""
    scenario = ix.scenario
    allowed = allowed_mask(scenario)
    out = {}
    for w in survivable(scenario):
        hosts = np.array([(s.id, w) in serves_class for s in scenario.sites], dtype=bool)
        out[w] = reach_mask(ix, w, allowed) & hosts[None, :]
    return out


def reach_mask(ix: IndexSets, w: str, allowed: np.ndarray | None = None) -> np.ndarray:
    """Regions x scenario-sites: demand for w > 0, rtt within the failover budget, site in the
    region's allowed countries (whether the site hosts w is left to the caller)."""
    scenario = ix.scenario
    if allowed is None:
        countries = np.array([s.country for s in scenario.sites], dtype=object)
        allowed = np.ones((len(scenario.regions), len(scenario.sites)), dtype=bool)
        for i, region in enumerate(scenario.regions):
            if region.allowed_countries:
                allowed[i] = np.isin(countries, list(region.allowed_countries))
    demand = np.array([r.demand_tok_s.get(w, 0.0) for r in scenario.regions])
    budget = np.array([failover_budget_ms(scenario, r, w) for r in scenario.regions])
    return (ix.rtt_ms <= budget[:, None] + 1e-9) & allowed & (demand > 0)[:, None]


def reroute_pairs(ix: IndexSets, f: str, r: str, w: str) -> list[str]:
    """Every site s != f that may re-serve region r's class-w load when f is lost: within
    r's failover budget, allowed for r, able to host w (the mask of `failover_masks`)."""
    mask = ix.failover.get(w)
    if mask is None:
        return []
    site_ids = [s.id for s in ix.scenario.sites]
    return [site_ids[j] for j in np.flatnonzero(mask[ix.region_pos[r]]) if site_ids[j] != f]


def seed_reroutings(ix: IndexSets) -> list[tuple[str, str, str]]:
    """(f, r, w) for every survivable (r, w) that only one site f may serve: f must carry all
    of it, so its loss is sure to need re-routing; the lazy loop starts with these."""
    site_ids = [s.id for s in ix.scenario.sites]
    serve = set(ix.serve)
    out = []
    for w in ix.failover:
        mask = ix.eligible[w]
        for i in np.flatnonzero(mask.sum(axis=1) == 1):
            r, f = ix.scenario.regions[i].id, site_ids[int(np.flatnonzero(mask[i])[0])]
            if (r, w, f) in serve:
                out.append((f, r, w))
    return sorted(out)


__all__ = ["seed_reroutings", "FAILOVER_RTT_FACTOR", "survivable", "failover_budget_ms", "failover_masks", "reach_mask", "reroute_pairs"]
