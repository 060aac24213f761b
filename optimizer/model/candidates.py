"""The serving pairs and training placements a large model starts from (the rest are priced
in by optimizer.solvers.pairs).

Each (region, class) keeps its CHEAPEST sites by an estimated delivered cost per tok/s
(the cheapest rack's annual cost per tok/s there, plus transport), its NEAREST sites, and
its CLEARED sites: the cheapest by delivered cost once every site is priced at least at an
estimated clearing price (`clearing_unit_cost`). Pure numpy over the index's matrices, no
solver.

Why the clearing price: sites have power and floor limits, so the cheapest sites fill up
and the LP's capacity duals raise their price to that of the marginal site. Every site
below the margin then costs the same per tok/s, and a region is served from the NEAREST
of those, which its own cheapest-by-cost list often misses (on the synthetic 500 x 3,000
world the LP optimum served regions from their 5th to 17th cheapest site; by the cleared
cost, every served pair was among each region's two cheapest). The estimate only chooses
where pricing starts: optimizer.solvers.pairs prices every other pair with the LP's own
duals, so a poor estimate costs rounds, never correctness. Each training job keeps every placement
(fabric, chip) at its TRAINING_SITES cheapest sites by delivered cost per effective
H100-equivalent (the cheapest rack's annual cost, fabric included, per H100-equivalent it
contributes on that fabric).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dcplace.optimizer.model.costs import transport_usd_per_year

if TYPE_CHECKING:  # type names only: index.py imports this module
    from dcplace.optimizer.model.index import IndexSets

CHEAPEST = 1  # candidates per (region, class) by estimated cost per tok/s
NEAREST = 1  # and by distance
CLEARED = 5  # and by estimated cost at the clearing price (clearing_unit_cost)
CLEARING_MARGIN = 1.5  # capacity counted below the clearing price, as a multiple of the demand
TRAINING_SITES = 4  # sites per training job by estimated cost per effective H100-equivalent
REGION_CHUNK = 2048  # regions priced at once (bounds the size of the dense blocks)


def _cheapest_racks(ix: IndexSets) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Class -> per scenario site, the cheapest rack's annual cost per tok/s it serves, its
    facility kW per tok/s and its tok/s per rack (inf, inf, 0 where the site hosts none)."""
    n_sites = len(ix.scenario.sites)
    out = {w: (np.full(n_sites, np.inf), np.full(n_sites, np.inf), np.zeros(n_sites)) for w in ix.workloads}
    for (s, k, c, w), econ in ix.inf_econ.items():
        unit, kw, tok_s = out[w]
        j = ix.site_pos[s]
        per_rack = ix.tok_s_per_rack[k, w]
        if econ.total_usd_per_year / per_rack < unit[j]:
            unit[j], kw[j], tok_s[j] = econ.total_usd_per_year / per_rack, econ.facility_kw / per_rack, per_rack
    return out


def clearing_unit_cost(ix: IndexSets, margin: float = CLEARING_MARGIN,
                       racks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None) -> dict[str, np.ndarray]:
    """Class -> per scenario site, max(its cheapest cost per tok/s, the class's clearing price).

    The clearing price of class w is the cost per tok/s of the site at which the sites,
    taken cheapest first, hold `margin` times w's demand (a merit order): each site's
    power is split between the classes in proportion to the power their demand needs
    (the median site's kW per tok/s), and a site holds min(its share of power_limit_kw /
    kW per tok/s, floor_racks x tok/s per rack) of w. Sites below the clearing price are
    the ones the LP fills; their capacity dual lifts them to it. An estimate: latency
    budgets, training and the other families are left out. `racks`: _cheapest_racks(ix), if
    the caller has it."""
    racks = _cheapest_racks(ix) if racks is None else racks
    power_kw = np.array([site.power_limit_kw for site in ix.scenario.sites], dtype=float)
    floor = np.array([site.floor_racks for site in ix.scenario.sites], dtype=float)
    needs_kw = {}
    for w, (unit, kw, _) in racks.items():
        hosted = np.isfinite(kw)
        needs_kw[w] = float(_demand(ix, w).sum() * np.median(kw[hosted])) if hosted.any() else 0.0
    total_kw = sum(needs_kw.values())
    out = {}
    for w, (unit, kw, tok_s) in racks.items():
        hosted = np.isfinite(unit)
        demand = float(_demand(ix, w).sum())
        if not hosted.any() or demand <= 0 or total_kw <= 0:
            out[w] = unit
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            holds = np.where(hosted, np.minimum(power_kw * needs_kw[w] / total_kw / kw, floor * tok_s), 0.0)
        order = np.argsort(unit, kind="stable")
        at = min(int(np.searchsorted(np.cumsum(holds[order]), margin * demand)), int(hosted.sum()) - 1)
        out[w] = np.maximum(unit, unit[order[at]])
    return out


def _demand(ix: IndexSets, w: str) -> np.ndarray:
    return np.array([r.demand_tok_s.get(w, 0.0) for r in ix.scenario.regions])


def _pair_cost_matrix(ix: IndexSets, w: str, rows: slice) -> np.ndarray | None:
    """The given per-pair costs (USD/yr) of class w for the regions in `rows`, or None if there are none."""
    if not ix.pair_cost:
        return None
    out = np.zeros((rows.stop - rows.start, len(ix.scenario.sites)))
    for (r, ww, s), usd in ix.pair_cost.items():
        i = ix.region_pos[r]
        if ww == w and rows.start <= i < rows.stop:
            out[i - rows.start, ix.site_pos[s]] = usd
    return out


def candidate_mask(ix: IndexSets) -> dict[str, np.ndarray]:
    """Class -> regions x sites mask of the pairs a large model starts from."""
    per_pair_needed = math.ceil(1.0 / ix.scenario.policies.max_share_per_site - 1e-9) + 1
    cheapest = max(CHEAPEST, per_pair_needed)
    racks = _cheapest_racks(ix)
    unit = {w: cheapest for w, (cheapest, _, _) in racks.items()}  # per site, the cheapest rack's cost per tok/s
    cleared = clearing_unit_cost(ix, racks=racks)
    max_km = max(float(ix.distance_km.max()), 1.0)
    n_regions = len(ix.scenario.regions)
    out = {}
    for w, eligible in ix.eligible.items():
        keep = np.zeros_like(eligible)
        demand = _demand(ix, w)
        for a in range(0, n_regions, REGION_CHUNK):
            rows = slice(a, min(a + REGION_CHUNK, n_regions))
            ok = eligible[rows]
            delivery = transport_usd_per_year(1.0, ix.distance_km[rows], ix.scenario.economics)
            extra = _pair_cost_matrix(ix, w, rows)
            if extra is not None:
                delivery = delivery + extra / np.maximum(demand[rows], 1e-12)[:, None]
            _keep_smallest(keep[rows], np.where(ok, unit[w][None, :] + delivery, np.inf), cheapest)
            at_clearing = cleared[w][None, :] + delivery
            # sites at the clearing price tie (exactly, where transport is free): the nearest of them
            finite = at_clearing[np.isfinite(at_clearing)]
            nudge = 1e-7 * (np.abs(finite).max() if finite.size else 1.0) / max_km
            _keep_smallest(keep[rows], np.where(ok, at_clearing + nudge * ix.distance_km[rows], np.inf), CLEARED)
            _keep_smallest(keep[rows], np.where(ok, ix.distance_km[rows], np.inf), NEAREST)
        out[w] = keep & eligible
    return out


def _keep_smallest(keep: np.ndarray, score: np.ndarray, k: int) -> None:
    """Mark in `keep` (in place) the k finite smallest entries of each row of `score`."""
    k = min(k, score.shape[1])
    if k <= 0:
        return
    idx = np.argpartition(score, k - 1, axis=1)[:, :k]
    finite = np.isfinite(np.take_along_axis(score, idx, axis=1))
    rows = np.broadcast_to(np.arange(score.shape[0])[:, None], idx.shape)
    keep[rows[finite], idx[finite]] = True


def placement_unit_cost(ix: IndexSets) -> dict[tuple[str, str, str], float]:
    """(s, f, x) -> the cheapest annual cost (USD/yr) of one effective H100-equivalent of chip x on fabric f at s."""
    out: dict[tuple[str, str, str], float] = {}
    for (s, k, c, f), econ in ix.trn_econ_all.items():
        key = (s, f, ix.racks[k].chip)
        out[key] = min(out.get(key, math.inf), econ.total_usd_per_year / ix.h100_per_rack(k, f))
    return out


def candidate_placements(ix: IndexSets) -> set[tuple[str, str, str, str]]:
    """The placements (j, s, f, x) a large model starts from: every option of each job at its
    TRAINING_SITES cheapest sites by estimated delivered cost per effective H100-equivalent."""
    unit = placement_unit_cost(ix)
    best: dict[str, dict[str, float]] = {}  # job -> site -> its cheapest option there
    for j, s, f, x in ix.place_all:
        sites = best.setdefault(j, {})
        sites[s] = min(sites.get(s, math.inf), unit.get((s, f, x), math.inf))
    chosen = {j: set(sorted(sites, key=lambda s: (sites[s], s))[:TRAINING_SITES]) for j, sites in best.items()}
    return {p for p in ix.place_all if p[1] in chosen[p[0]]}
