"""The serving pairs and training placements a large model starts from (the rest are priced
in by optimizer.solvers.pairs).

Each (region, class) keeps its CHEAPEST sites by an estimated delivered cost per tok/s
(the cheapest rack's annual cost per tok/s there, plus transport) and its NEAREST sites;
pure numpy over the index's matrices, no solver. Each training job keeps every placement
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

CHEAPEST = 6  # candidates per (region, class) by estimated cost per tok/s
NEAREST = 2  # and by distance
TRAINING_SITES = 4  # sites per training job by estimated cost per effective H100-equivalent
REGION_CHUNK = 2048  # regions priced at once (bounds the size of the dense blocks)


def _unit_cost_usd_per_tok_s(ix: IndexSets) -> dict[str, np.ndarray]:
    """Class -> per scenario site, the cheapest rack's annual cost per tok/s it serves (inf where none)."""
    out = {w: np.full(len(ix.scenario.sites), np.inf) for w in ix.workloads}
    for (s, k, c, w), econ in ix.inf_econ.items():
        j = ix.site_pos[s]
        out[w][j] = min(out[w][j], econ.total_usd_per_year / ix.tok_s_per_rack[k, w])
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
    unit = _unit_cost_usd_per_tok_s(ix)
    n_regions = len(ix.scenario.regions)
    out = {}
    for w, eligible in ix.eligible.items():
        keep = np.zeros_like(eligible)
        demand = _demand(ix, w)
        for a in range(0, n_regions, REGION_CHUNK):
            rows = slice(a, min(a + REGION_CHUNK, n_regions))
            ok = eligible[rows]
            score = unit[w][None, :] + transport_usd_per_year(1.0, ix.distance_km[rows], ix.scenario.economics)
            extra = _pair_cost_matrix(ix, w, rows)
            if extra is not None:
                score = score + extra / np.maximum(demand[rows], 1e-12)[:, None]
            _keep_smallest(keep[rows], np.where(ok, score, np.inf), cheapest)
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
