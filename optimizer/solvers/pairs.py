"""Serving pairs and training placements at scale: start from candidates, price the rest, prove the LP bound.

A (region, class, site) pair is eligible when the rules of optimizer.index allow it; at
2,000 sites x 10,000 regions with a 120 ms budget nearly all of 20 M pairs per class are,
and a share column plus a linking row for each is far more than any MIP solver can take.
Almost all of them are useless: a region is served from a few sites that are cheap for
it. So when a scenario has more than index.MAX_FULL_PAIRS eligible pairs:

1. `candidate_mask`: each (region, class) starts with the CHEAPEST sites by an estimate
   of the cost per tok/s of serving it there (the site's cheapest rack per tok/s plus
   transport), at least ceil(1 / max_share) + 1 of them, its NEAREST sites and its
   CLEARED sites (the cheapest once each site is priced at least at an estimated clearing
   price: optimizer.model.candidates);
2. `price_pairs`: after the LP relaxation of the model over the candidates, every left-out
   pair is priced with the LP's duals, all at once in numpy:

       rc[r,w,s] = cost[r,w,s] - pi[r,w] - demand[r,w] * mu[s,w]

   where pi is the dual of demand_met[r,w], mu that of inference_capacity[s,w] (the new
   linking row share <= max_share * open[s] enters with dual 0); with the clock on, the
   last term is the pair's load at each represented hour times that hour's capacity duals,
   less its day's load times busy_energy_split's (ServingRows). Pairs with rc < 0 join
   the model and the LP is solved again (column generation);
3. each round also gives a valid lower bound on the LP relaxation of the *full* model,
   because the shares of one (region, class) sum to 1 (Lagrangian bound):

       z_LP(full) >= z_LP(candidates) + sum_{r,w} min(0, min_s rc[r,w,s])

   When no pair prices out the two are equal: the full model's LP bound is proven
   without ever building the full model.

4. training placements are restricted the same way (candidates.candidate_placements: every
   option at each job's cheapest sites per effective H100-equivalent) and priced with the
   same duals (PlacementPricer, whose docstring has the bound argument); its term adds to
   the pairs' bound, and placements that price out join a rebuilt model;
5. every LP here holds the pairs' linking rows (share_needs_open) back and puts back those
   its solution breaks, with the rest of their site's (optimizer.solvers.lazy_rows): the LP
   is the same, several times faster. A round that adds more than FRESH_LP_SHARE of the
   pairs solves afresh; a few pairs, by primal simplex from the last basis. Pricing stops
   once the bound is within max(BOUND_TOLERANCE, GAP_SHARE x the asked MIP gap) of the LP;
6. capacity_cost_bound, a Lagrangian bound that needs no LP, is stated instead when it is
   stronger or when no LP finished; a round whose LP runs out of time leaves the last
   finished round's LP, duals and bound standing.

The MIP is then solved over the final pairs and placements. Its plan is feasible for the
full model (a subset of its columns); its gap is reported against a valid bound of the full
model (PricedLP.bound_kind says which), never against the restricted MIP's own bound,
which does not bound the full model.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import highspy
import numpy as np

from dcplace.optimizer.model.candidates import REGION_CHUNK, _demand, _keep_smallest, _pair_cost_matrix, candidate_placements, placement_unit_cost
from dcplace.optimizer.model.clock import day_weighted_load, hourly_load
from dcplace.optimizer.model.costs import transport_usd_per_year
from dcplace.optimizer.model.families import flagged
from dcplace.optimizer.solvers.highs_model import HighsAbandoned, to_highs
from dcplace.optimizer.solvers.lazy_rows import LazyRows, solve_lazily

if TYPE_CHECKING:
    from dcplace.optimizer.model.index import IndexSets
    from dcplace.optimizer.model.linear import LinearModel

log = logging.getLogger(__name__)

ADD_PER_ROUND = 2  # priced-out pairs added per (region, class) and round
ADD_SITES_PER_JOB = 4  # priced-out sites added per training job and pass (PlacementPricer)
# what the bound stated against the full model is (PricedLP.bound_kind)
FULL_LP = "the full model's LP bound"  # pricing converged: the LP relaxation of the full model itself
LAGRANGIAN = "a Lagrangian bound of the full model's LP (pricing stopped early)"
CAPACITY_COST = "a capacity-cost Lagrangian bound of the full model (stronger than pricing's, or no LP finished)"
NO_BOUND = ("no bound of the full model: pricing gave none (no LP finished, or N-1 rows hold the shares) and no "
            "capacity-cost bound holds (the clock on, cloud regions to rent, or it exceeded the LP)")
FRESH_LP_SHARE = 0.05  # pairs added in a round, as a share of those in the LP, above which it is solved afresh
BOUND_TOLERANCE = 1e-4  # stop pricing once the LP is this close (relative) to the full model's bound...
GAP_SHARE = 0.1  # ...or within this share of the asked MIP gap (more rounds could raise the bound by no more)


@dataclass
class _Pass:
    """What solve_priced_lp keeps of its last pass whose LP reached an optimum."""

    x: np.ndarray
    objective: float
    priced: "Pricing"
    placements: "PlacementPricing"
    lagrangian: float
    values: dict  # pair -> its share in the LP
    share: object  # the LP's share ColumnBlock
    placements_in_model: set
    pending: bool  # the LP was that of a relaxation: link rows left broken at the deadline


@dataclass
class Pricing:
    """What one pricing round found."""

    lagrangian_bound: float  # valid lower bound on the full model's LP relaxation
    added: dict[str, np.ndarray] = field(default_factory=dict)  # class -> mask of pairs to add
    n_added: int = 0


def in_model_mask(ix: IndexSets) -> dict[str, np.ndarray]:
    """Class -> mask of the pairs the model is built over now."""
    out = {w: np.zeros_like(mask) for w, mask in ix.eligible.items()}
    for r, w, s in ix.serve:
        out[w][ix.region_pos[r], ix.site_pos[s]] = True
    return out


class ServingRows:
    """The capacity rows a share column enters besides demand_met and its own link row: what
    pricing multiplies by their duals, and what a priced-in column is given.

    Without the clock: inference_capacity[s,w], coefficient demand[r,w] (one "hour").
    With the clock, routed by the day (optimizer.model.clock): hourly_serving[s,w,h] for each
    hour kept at (s,w), and busy_serves_load[s,w,h] under a carbon cap, coefficient
    demand[r,w] x p[r,w,h] (clock.hourly_load); busy_energy_split[s,w], coefficient
    -demand[r,w] x sum_h w_h p[r,w,h] (clock.day_weighted_load). These rows exist for every
    (s,w) with racks whether or not a pair of it is in the model, and the hours kept at (s,w)
    are chosen over every eligible pair (clock._undominated_hours), so a pair priced in finds
    every capacity row the full model gives it. Routing per hour builds every pair
    (index.build_index). Rows of any other family that hold shares (N-1's failover rows) are
    not priced and a priced-in pair gets no entry in them: the LP is then that of a relaxation,
    and `unpriced` names them so that no Lagrangian bound is claimed.

    For class w, with H the represented hours, L[r,h] a unit share's load and MU[h,s] the
    capacity rows' duals summed per (s,h), a pair's entries times the duals are

        a'y = L[r,:] @ MU[:,s] - day[r] * nu[s]        (nu: busy_energy_split's dual)
    """

    def __init__(self, ix: IndexSets, lm: LinearModel):
        self.ix = ix
        self.clock = ix.clock is not None and ix.clock.on
        if self.clock:
            if ix.clock.hourly_routing:
                raise ValueError("pairs are not priced with routing per hour: every pair is built")
            self.hours = list(ix.clock.hours)
            self.hourly = [lm.families[name].rows() for name in ("hourly_serving", "busy_serves_load") if name in lm.families]
            self.split = lm.families["busy_energy_split"].rows() if "busy_energy_split" in lm.families else {}
        else:
            self.hours = [0]
            self.hourly = [{(s, w, 0): row for (s, w), row in lm.families["inference_capacity"].rows().items()}]
            self.split = {}
        self.hour_pos = {h: i for i, h in enumerate(self.hours)}
        self._loads: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # the rows a share column may enter for pricing's reduced costs to be exact are the families registered
        # priced=True; a model whose shares enter any other row (N-1's failover rows) is still priced for its
        # columns, but states no Lagrangian bound
        self.unpriced = _families_holding_shares(lm) - set(flagged("priced"))  # rows whose duals pricing leaves out

    def loads(self, w: str) -> tuple[np.ndarray, np.ndarray]:
        """(L regions x hours, day regions): a unit share's tok/s at each hour and its tok/s-hours a day."""
        if w not in self._loads:
            ix, demand = self.ix, _demand(self.ix, w)
            if not self.clock:
                self._loads[w] = (demand[:, None], np.zeros(len(demand)))
            else:
                ids = [r.id for r in ix.scenario.regions]
                hourly = np.array([hourly_load(ix, r, w) if demand[i] > 0 else np.zeros(len(self.hours)) for i, r in enumerate(ids)])
                day = np.array([day_weighted_load(ix, r, w) if demand[i] > 0 else 0.0 for i, r in enumerate(ids)])
                self._loads[w] = (hourly.reshape(len(ids), len(self.hours)), day)
        return self._loads[w]

    def duals(self, w: str, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(MU hours x sites, nu sites): the capacity rows' duals of class w (0 where a row is absent)."""
        ix = self.ix
        mu = np.zeros((len(self.hours), len(ix.scenario.sites)))
        for rows in self.hourly:
            for (s, ww, h), row in rows.items():
                if ww == w:
                    mu[self.hour_pos[h], ix.site_pos[s]] += y[row]
        nu = np.zeros(len(ix.scenario.sites))
        for (s, ww), row in self.split.items():
            if ww == w:
                nu[ix.site_pos[s]] = y[row]
        return mu, nu

    def entries(self, r: str, w: str, s: str) -> list[tuple[int, float]]:
        """(row, coefficient) of share[r,w,s] in the capacity rows."""
        hourly, day = self.loads(w)
        i = self.ix.region_pos[r]
        out = [(rows[s, w, h], float(hourly[i, a])) for rows in self.hourly for a, h in enumerate(self.hours) if (s, w, h) in rows]
        if (s, w) in self.split:
            out.append((self.split[s, w], -float(day[i])))
        return out

    def lift(self, lm: LinearModel, x: np.ndarray, row_dual: np.ndarray, col_dual: np.ndarray) -> np.ndarray:
        """Row duals with an unused (s,w)'s capacity row lowered as far as its racks allow.

        Where a site serves nothing of class w and installs no rack for it, its capacity rows
        read 0 <= 0 and the simplex may return any dual in a range, often 0: pricing would then
        see free capacity everywhere and pull in pairs that the next LP throws away. Lowering
        one such row's dual by delta = min_k rc_k / tok_s[k,w] (rc_k: a rack's reduced cost,
        tok_s its coefficient in the row) keeps every rack column's reduced cost >= 0, raises
        those of the share columns, and leaves the dual objective (delta x 0) and complementary
        slackness as they were: the duals stay optimal, and now price a new pair at what racks
        there would cost. With the clock the row lowered is hourly_serving at the hour the
        eligible pairs of (s,w) load most, where a pair's peak is likeliest.
        """
        ix = self.ix
        lifted = row_dual.copy()
        serving = self.hourly[0]
        peak_hour: dict[str, np.ndarray] = {}
        for (s, w), racks in ix.inf_by_sw.items():
            cols = [lm.col("racks_inf", (s, k, c, w)) for k, c in racks]
            if np.any(x[cols] > 1e-9):
                continue
            hours = [h for h in self.hours if (s, w, h) in serving]
            if not hours:
                continue
            if len(hours) == 1:
                h = hours[0]
            else:
                if w not in peak_hour:  # sites x hours: the load every eligible pair of (s, w) would bring
                    hourly, _ = self.loads(w)
                    peak_hour[w] = ix.eligible[w].T.astype(np.float64) @ hourly
                at = peak_hour[w][ix.site_pos[s]]
                h = max(hours, key=lambda hh: at[self.hour_pos[hh]])
            tok = np.array([ix.tok_s_per_rack[k, w] for k, _ in racks])
            delta = float(np.min(col_dual[cols] / tok))
            if delta > 0:
                lifted[serving[s, w, h]] -= delta
        return lifted


def _families_holding_shares(lm: LinearModel) -> set[str]:
    """The row families with an entry in a share column of `lm`."""
    share = lm.blocks["share"]
    start, index, _ = lm.matrix()
    rows = np.unique(index[start[share.start]:start[share.stop]])
    return {name for name, fam in lm.families.items() if np.isin(np.fromiter(fam.rows().values(), dtype=np.int64), rows).any()}


def lifted_capacity_duals(ix: IndexSets, lm: LinearModel, x: np.ndarray, row_dual: np.ndarray, col_dual: np.ndarray) -> np.ndarray:
    """ServingRows.lift: the LP's row duals with every unused capacity row's lowered as far as its racks allow."""
    return ServingRows(ix, lm).lift(lm, x, row_dual, col_dual)


def _pair_cost_chunks(ix: IndexSets, w: str, demand: np.ndarray):
    """(region rows, their pairs' cost matrix regions x sites) of class w, REGION_CHUNK regions at a
    time: transport for the whole demand plus any pair_costs (what a share column costs at 1)."""
    n_regions = len(ix.scenario.regions)
    for a in range(0, n_regions, REGION_CHUNK):
        rows = slice(a, min(a + REGION_CHUNK, n_regions))
        cost = transport_usd_per_year(demand[rows][:, None], ix.distance_km[rows], ix.scenario.economics)
        extra = _pair_cost_matrix(ix, w, rows)
        yield rows, (cost + extra if extra is not None else cost)


def price_pairs(ix: IndexSets, lm: LinearModel, row_dual: np.ndarray, lp_objective: float,
                in_model: dict[str, np.ndarray], add_per_round: int = ADD_PER_ROUND, serving: ServingRows | None = None) -> Pricing:
    """Price every eligible pair not in `in_model` with the LP duals of `lm`'s rows (see
    the module docstring; the capacity rows' part is ServingRows')."""
    serving = serving or ServingRows(ix, lm)
    demand_rows = lm.families["demand_met"].rows()
    n_regions = len(ix.scenario.regions)
    tolerance = 1e-9 * max(1.0, abs(lp_objective))
    bound = lp_objective
    result = Pricing(lagrangian_bound=bound)
    for w, eligible in ix.eligible.items():
        pi = np.zeros(n_regions)
        for (r, ww), row in demand_rows.items():
            if ww == w:
                pi[ix.region_pos[r]] = row_dual[row]
        mu, nu = serving.duals(w, row_dual)
        hourly, day = serving.loads(w)
        demand = _demand(ix, w)
        added = np.zeros_like(eligible)
        for rows, cost in _pair_cost_chunks(ix, w, demand):
            rc = cost - pi[rows][:, None] - hourly[rows] @ mu + day[rows][:, None] * nu[None, :]
            rc = np.where(eligible[rows] & ~in_model[w][rows], rc, np.inf)
            best = rc.min(axis=1)
            bound += float(np.minimum(best[np.isfinite(best)], 0.0).sum())
            _keep_smallest(added[rows], np.where(rc < -tolerance, rc, np.inf), add_per_round)
        result.added[w] = added
        result.n_added += int(added.sum())
    # with rows pricing leaves out (serving.unpriced) the reduced costs miss their duals: no bound
    result.lagrangian_bound = -math.inf if serving.unpriced else bound
    return result


def capacity_cost_bound(ix: IndexSets) -> float | None:
    """A valid lower bound on the full model's LP relaxation that needs no LP (None where the
    argument below does not hold: with the clock on, or cloud regions to rent from): the Lagrangian
    bound of the duals

        mu[s,w]   = -min_k cost[s,k,c,w] / tok_s[k,w]        (inference_capacity)
        pi[r,w]   = min_{eligible s} (cost[r,w,s] + demand[r,w] * (-mu[s,w]))   (demand_met)
        nu[s,f,x] = -min_{k of x, c} cost[s,k,c,f] / h100[k,f]    (training_capacity)
        lambda[j] = min_{(s,f,x) of j} gpus[j] * (-nu[s,f,x])    (job_placed_once)

    and 0 for every other row. With them every rack, share and placement column has reduced
    cost >= 0, as have open, zone and the other columns whose cost is >= 0; so (weak duality,
    bounded columns) z_LP(full) >= sum pi + sum lambda + sum_c min(0, cost[c]) * upper[c], the
    last term over the one column with a negative cost (built_kw, the colocation a campus
    replaces). It prices every demand at the cheapest capacity that could serve it and every
    job at the cheapest effective H100s, ignoring fixed, zone and integer costs: weaker than
    the LP, but stated when the LP does not finish in time.

    Not with rentals (optimizer.model.clock): rent_share[r,w,q] enters demand_met at no cost
    of its own (the GPU-hours it needs are paid through rental_capacity, a row whose dual is
    0 here) and rent_trn[j,q] enters job_placed_once at the rental price, so their reduced
    costs -pi[r,w] and price - lambda[j] can be negative and the sum above overstates the
    bound (a cloud region at $0.001 a GPU-hour: $27,054 against an optimum of $280.32).

    Not with the clock: its capacity rows are hourly (hourly_serving), where a share's
    coefficient is demand x p[r,w,h] <= demand, so pricing every demand at its peak overstates
    the bound too, and an interruptible job may leave job_placed_once at 0.
    """
    if ix.clock is not None and (ix.clock.on or ix.clock.rent_serve or ix.clock.rent_train):
        return None
    n_sites = len(ix.scenario.sites)
    unit = {w: np.full(n_sites, np.inf) for w in ix.workloads}  # -mu
    for (s, k, c, w), econ in ix.inf_econ.items():
        j = ix.site_pos[s]
        unit[w][j] = min(unit[w][j], econ.total_usd_per_year / ix.tok_s_per_rack[k, w])
    bound = 0.0
    for w, eligible in ix.eligible.items():
        demand = _demand(ix, w)
        for rows, cost in _pair_cost_chunks(ix, w, demand):
            best = np.where(eligible[rows], cost + demand[rows][:, None] * unit[w][None, :], np.inf).min(axis=1)
            bound += float(best[np.isfinite(best)].sum())
    per_h100 = placement_unit_cost(ix)  # -nu
    for j, job in ix.jobs.items():
        options = [per_h100[p[1:]] for p in ix.place_all if p[0] == j and p[1:] in per_h100]
        if options:
            bound += job.gpus_h100_equiv * min(options)
    full = ix.with_every_placement() if ix.training_restricted() else ix  # the full model's self-build sites
    for s in full.build:
        bound += min(0.0, full.build_usd_per_kw_year[s] - 12.0 * full.sites[s].colocation_usd_per_kw_month) * full.build_limit_kw[s]
    return bound


@dataclass
class PricedLP:
    """The LP relaxation over the candidate pairs once pricing stopped."""

    x: np.ndarray | None  # None: the LP did not reach an optimum (in time)
    objective: float | None
    full_lp_bound: float | None  # valid lower bound on the full model's LP relaxation (equal to it when converged)
    converged: bool
    rounds: int
    pairs_in_model: int
    pairs_eligible: int
    seconds: float
    build_s: float
    placements_in_model: int = 0
    placements_eligible: int = 0
    bound_kind: str = FULL_LP  # which valid bound full_lp_bound is (FULL_LP, LAGRANGIAN or CAPACITY_COST)

    def record(self) -> dict:
        return {
            "pairs_eligible": self.pairs_eligible, "pairs_in_model": self.pairs_in_model, "pricing_rounds": self.rounds,
            "placements_eligible": self.placements_eligible, "placements_in_model": self.placements_in_model,
            "converged": self.converged, "full_lp_bound_usd_per_year": self.full_lp_bound, "bound_kind": self.bound_kind, "pricing_s": round(self.seconds, 3),
            "build_s": round(self.build_s, 3),
        }


@dataclass
class PlacementPricing:
    """What pricing the left-out training placements found (see PlacementPricer)."""

    bound_term: float  # <= 0: what the left-out training columns can lower the full model's LP bound by
    added: set = field(default_factory=set)  # (j, s, f, x) that price out


class PlacementPricer:
    """Prices the training placements (and the racks, zones and rows they bring) that a
    candidate-restricted model leaves out (index.restrict_training).

    Bound argument. Let y be optimal LP duals of the restricted model (z its LP value). Give
    every row of the full model that the restricted one lacks the dual 0, except a new
    training_capacity[s,f,x] row, which gets

        nu[s,f,x] = min(0, -min_k rc0[k] / h[k])

    over its racks k (rc0: a rack's reduced cost with nu = 0, h: the effective H100s it
    adds). Each such new row has right-hand side 0 and holds only new columns (placements
    and racks of (s,f,x), which the restricted model has none of), so the duals of the rows
    the restricted model has still price its own columns exactly as its LP did. For these
    duals, Lagrangian relaxation of every row but job_placed_once, with the columns' bounds
    kept, gives (weak duality, every column bounded):

        z_LP(full) >= z + sum_j min(0, min_{new (s,f,x)} rc[j,s,f,x])
                        + sum_{other new columns c} min(0, rc[c]) * upper[c]

    where rc[j,s,f,x] = -lambda[j] - gpus[j] * nu[s,f,x] (+ the duals of any other row the
    placement is in) and by the choice of nu every new rack has rc >= 0, a new zone (whose
    new rows have dual 0) rc = its cost >= 0. A placement with rc < 0 is worth adding; when
    none has, the restricted LP is the full model's LP on the training side.

    The reduced costs are computed generically from a model built over every placement and
    no serving pair (`pricing`), so every row a training column is in is counted.
    """

    def __init__(self, ix: IndexSets, build):
        full = ix.with_every_placement()
        self.ix_full = full
        self.model = build(full)
        start, index, value = self.model.matrix()
        self.index, self.value = index, value
        self.column_of_entry = np.repeat(np.arange(self.model.n_cols), np.diff(start))
        self.cost = self.model.objective()
        self.upper = self.model.bounds()[1]

    def _reduced_costs(self, y: np.ndarray) -> np.ndarray:
        return self.cost - np.bincount(self.column_of_entry, weights=self.value * y[self.index], minlength=self.model.n_cols)

    def price(self, lm: LinearModel, row_dual: np.ndarray, lp_objective: float, add_sites: int = ADD_SITES_PER_JOB) -> PlacementPricing:
        """Price every placement `lm` leaves out with its LP duals `row_dual` (the class docstring)."""
        pm = self.model
        y = np.zeros(pm.n_rows)
        new_capacity_rows: dict = {}
        for name, fam in pm.families.items():
            have = lm.families[name].rows() if name in lm.families else {}
            for key, row in fam.rows().items():
                if key in have:
                    y[row] = row_dual[have[key]]
                elif name == "training_capacity":
                    new_capacity_rows[key] = row
        rc0 = self._reduced_costs(y)
        racks = self.ix_full.trn_by_sfchip
        for (s, f, x), row in new_capacity_rows.items():
            cols = [pm.col("racks_trn", (s, k, c, f)) for k, c in racks.get((s, f, x), [])]
            if cols:
                h = np.array([self.ix_full.h100_per_rack(k, f) for k, c in racks[s, f, x]])
                y[row] = min(0.0, -float(np.min(rc0[cols] / h)))
        rc = self._reduced_costs(y)
        result = PlacementPricing(bound_term=0.0)
        tolerance = 1e-9 * max(1.0, abs(lp_objective))
        for name, block in pm.blocks.items():
            mine = lm.blocks[name].pos if name in lm.blocks else {}
            new = np.array([block.start + i for i, key in enumerate(block.keys) if key not in mine], dtype=np.int64)
            if not len(new):
                continue
            if name == "place":  # sum_{s,f,x} place[j,s,f,x] = 1 is kept: the job's cheapest new option
                by_job: dict[str, list[tuple[float, tuple]]] = {}
                for col in new:
                    key = block.keys[col - block.start]
                    by_job.setdefault(key[0], []).append((float(rc[col]), key))
                for j, options in by_job.items():
                    result.bound_term += min(0.0, min(r for r, _ in options))
                    site_rc: dict[str, float] = {}
                    for r, key in options:
                        site_rc[key[1]] = min(site_rc.get(key[1], math.inf), r)
                    sites = [s for s in sorted(site_rc, key=lambda s: (site_rc[s], s)) if site_rc[s] < -tolerance][:add_sites]
                    result.added |= {key for r, key in options if key[1] in sites}
            else:
                result.bound_term += float(np.minimum(rc[new], 0.0) @ self.upper[new])
        return result


def solve_priced_lp(ix: IndexSets, build, deadline: float, threads: int, bound_tolerance: float = BOUND_TOLERANCE
                    ) -> tuple[LinearModel, PricedLP | None]:
    """Column generation over the serving pairs and, when index.restrict_training left
    placements out, the training placements; `build(ix)` builds the model
    (optimizer.formulation.build_model). Returns the model over the final pairs and
    placements (ix.serve and ix.place are set to them) and its LP relaxation (`x` None if
    the LP reached no optimum in time).

    One HiGHS instance grows round by round: priced-out pairs join as share columns (cost,
    demand_met and inference_capacity entries as in the formulation) with their linking
    rows, so each LP starts from the last basis. Pricing stops when no pair prices out,
    when the LP is within `bound_tolerance` of the full model's bound, or at `deadline`.
    Then the left-out placements are priced (PlacementPricer) with the same duals; those
    that price out join and the model is built again (a new HiGHS instance), if the time
    left is at least three times what the last round took. The full model's bound is the
    pairs' Lagrangian bound plus the placements' term, both from one set of duals.
    """

    started = time.perf_counter()
    pricer = None
    if not ix.failover and not any(job.standby_required for job in ix.jobs.values()):
        # placements are priced in too (PlacementPricer); N-1 re-solves keep every placement
        ix.restrict_training(candidate_placements(ix))
    if ix.training_restricted():
        pricer_started = time.perf_counter()
        pricer = PlacementPricer(ix, build)
        log.info("placement pricing model: %s (%.1f s)", pricer.model.size(), time.perf_counter() - pricer_started)
    floor_bound = capacity_cost_bound(ix)  # valid whatever the LPs do; kept when stronger than pricing's
    floor = -math.inf if floor_bound is None else floor_bound
    build_s = 0.0
    rounds = 0
    best = -math.inf  # the best bound of any round: each round's duals give one of the full model's LP
    cap = ix.scenario.policies.max_share_per_site
    region_ids = [r.id for r in ix.scenario.regions]
    site_ids = [site.id for site in ix.scenario.sites]
    done = None  # the last pass whose LP reached its optimum: the model is returned over its pairs and placements
    while True:  # one pass per set of placements
        pass_started = time.perf_counter()
        build_started = time.perf_counter()
        lm = build(ix)
        build_s += time.perf_counter() - build_started
        h = to_highs(lm, threads)
        integer = lm.integer_columns()
        h.changeColsIntegrality(len(integer), integer, [highspy.HighsVarType.kContinuous] * len(integer))
        lazy = LazyRows(lm)  # share_needs_open, one row per pair, joins where an LP breaks it
        in_model = in_model_mask(ix)
        share = lm.blocks["share"]
        column_of = {pair: share.start + i for i, pair in enumerate(ix.serve)}  # pair -> column in h
        demand_rows = lm.families["demand_met"].rows()
        serving = ServingRows(ix, lm)
        last = None  # (x, objective, duals, pairs pricing, placements pricing, pending) of this pass's last LP that reached its optimum
        infeasible = False
        while True:
            lp_started = time.perf_counter()
            try:
                relaxed = solve_lazily(h, lazy, deadline)  # returns by the deadline (+ GRACE_S) whatever HiGHS is doing
                infeasible = relaxed is None and h.getModelStatus() == highspy.HighsModelStatus.kInfeasible
            except HighsAbandoned:
                relaxed = None  # the instance stays with its thread
            rounds += 1
            if relaxed is None:
                if last is not None:
                    log.info("pricing round %d: the LP did not finish by the deadline; the last round's LP stands", rounds)
                break  # the pairs added since have no LP value: they start at 0, which keeps the last LP point feasible
            objective, x = relaxed.objective, relaxed.col_value
            if floor > objective + 1e-6 * max(1.0, abs(objective)):
                # a bound of the full model above the LP of a restriction of it: the bound is wrong, not the LP
                log.warning("the capacity-cost bound $%.6g exceeds the candidate LP $%.6g; it is not stated", floor, objective)
                floor, floor_bound = -math.inf, None
            duals = serving.lift(lm, x, relaxed.row_dual, relaxed.col_dual)
            priced = price_pairs(ix, lm, duals, objective, in_model, serving=serving)
            placements = pricer.price(lm, duals, objective) if pricer else PlacementPricing(bound_term=0.0)
            # Lagrangian bounds do not rise round by round (with the clock they swing by 5 %): keep the best
            best = max(best, priced.lagrangian_bound + placements.bound_term)
            last = (x, objective, duals, priced, placements, relaxed.pending)
            log.info("pricing round %d: %d pairs, LP %.1f s (%d iterations, %d of %d held link rows put back%s), $%.6g, "
                     "bound $%.6g (best $%.6g), %d pairs price out (%.1f s in all)", rounds, len(column_of),
                     time.perf_counter() - lp_started, relaxed.iterations, lazy.restored, len(lazy.index),
                     ", some still broken" if relaxed.pending else "", objective, priced.lagrangian_bound + placements.bound_term,
                     best, priced.n_added, time.perf_counter() - started)
            close = objective - max(best, floor) <= bound_tolerance * abs(objective)
            if priced.n_added == 0 or close or relaxed.pending or time.perf_counter() >= deadline:
                break  # (pending: the deadline came while link rows were broken)
            new = [(region_ids[i], w, site_ids[j]) for w, mask in priced.added.items() for i, j in zip(*np.nonzero(mask))]
            in_lp = len(column_of)
            _add_pairs(h, ix, new, column_of, demand_rows, serving, lm.col, cap, lazy)
            if len(new) > FRESH_LP_SHARE * in_lp:
                # From scratch, presolve on: with the link rows held back a fresh LP is quick (4.6 s at
                # 500 x 3,000 after round 1 added 11,430 pairs to 65,768), where primal simplex from the
                # last basis took 10.6 s. The link rows put back stay in.
                h.clearSolver()
                h.setOptionValue("presolve", "choose")
                h.setOptionValue("simplex_strategy", 1)  # dual simplex
            else:  # a few columns: primal simplex from the last basis (they break dual, not primal, feasibility)
                h.setOptionValue("presolve", "off")
                h.setOptionValue("simplex_strategy", 4)
            for w, mask in priced.added.items():
                in_model[w] |= mask

        if last is None:
            if infeasible and ix.training_restricted() and time.perf_counter() < deadline:
                # the candidate placements cannot hold every job (the same cheapest sites for all of them):
                # a restriction's infeasibility says nothing of the full model; price with every placement in
                log.info("pricing: the LP over the candidate placements is infeasible; every placement joins")
                ix.restrict_training(ix.place_all)
                pricer = None
                continue
            if done is None:  # no LP finished: no duals, only the bound that needs none
                return lm, PricedLP(x=None, objective=None, full_lp_bound=floor_bound, converged=False, rounds=rounds,
                                    pairs_in_model=len(ix.serve), pairs_eligible=ix.eligible_pairs(),
                                    seconds=time.perf_counter() - started, build_s=build_s,
                                    bound_kind=CAPACITY_COST if floor_bound is not None else NO_BOUND,
                                    placements_in_model=len(ix.place), placements_eligible=len(ix.place_all))
            log.info("pricing: the LP with the priced-in placements did not finish; the last pass's LP stands")
            ix.restrict_training(done.placements_in_model)
            break
        x, objective, duals, priced, placements, pending = last
        lagrangian = best
        log.info("placements: %d in the model, %d price out, bound term $%.6g, bound $%.6g", len(ix.place),
                 len(placements.added), placements.bound_term, lagrangian)
        values = {pair: (x[j] if j < len(x) else 0.0) for pair, j in column_of.items()}
        ix.restrict_serve(in_model)
        done = _Pass(x, objective, priced, placements, lagrangian, values, share, set(ix.place), pending)
        now = time.perf_counter()
        again = (placements.added and objective - max(lagrangian, floor) > bound_tolerance * abs(objective)
                 and deadline - now >= 3.0 * (now - pass_started))
        if not again:
            break
        ix.restrict_training(set(ix.place) | placements.added)

    x, objective, priced, placements, lagrangian, values, share, pending = (
        done.x, done.objective, done.priced, done.placements, done.lagrangian, done.values, done.share, done.pending)
    build_started = time.perf_counter()
    final = build(ix)
    build_s += time.perf_counter() - build_started
    x_final = np.zeros(final.n_cols)
    x_final[: share.start] = x[: share.start]  # blocks before share do not depend on the pairs
    final_share = final.blocks["share"]
    x_final[final_share.start:final_share.stop] = [values[pair] for pair in ix.serve]
    x_final[final_share.stop:] = x[share.stop: share.stop + final.n_cols - final_share.stop]
    # the full LP is proven when nothing prices out, or when a round's bound reached this LP (bound <= full LP <=
    # this restricted LP); not when the LP was that of a relaxation (pending: link rows left broken)
    reached = objective - lagrangian <= 1e-9 * max(1.0, abs(objective))
    converged = ((priced.n_added == 0 and not placements.added) or reached) and not pending and math.isfinite(lagrangian)
    if converged:
        bound, kind = lagrangian, FULL_LP
    elif math.isfinite(lagrangian) and lagrangian >= floor:
        bound, kind = lagrangian, LAGRANGIAN
    elif floor_bound is not None:
        bound, kind = floor_bound, CAPACITY_COST
    else:
        bound, kind = None, NO_BOUND
    return final, PricedLP(
        x=x_final, objective=objective, full_lp_bound=None if bound is None else min(bound, objective), converged=converged, rounds=rounds,
        pairs_in_model=len(ix.serve), pairs_eligible=ix.eligible_pairs(), seconds=time.perf_counter() - started,
        build_s=build_s, placements_in_model=len(ix.place), placements_eligible=len(ix.place_all), bound_kind=kind,
    )


def _add_pairs(h: highspy.Highs, ix: IndexSets, pairs: list, column_of: dict, demand_rows: dict, serving: ServingRows,
               col, cap: float, lazy: LazyRows) -> None:
    """Append share columns for `pairs` to the LP in `h` (cost, demand_met and the capacity rows'
    entries as in the formulation), with their linking rows (held by `lazy`)."""
    economics = ix.scenario.economics
    n = len(pairs)
    first = h.getNumCol()
    cost = np.array([transport_usd_per_year(ix.demand(r, w), ix.km(r, s), economics, ix.pair_cost.get((r, w, s), 0.0))
                     for r, w, s in pairs])
    entries = [[(demand_rows[r, w], 1.0)] + serving.entries(r, w, s) for r, w, s in pairs]
    start = np.cumsum([0] + [len(e) for e in entries[:-1]]).astype(np.int32)
    index = np.array([row for e in entries for row, _ in e], dtype=np.int32)
    value = np.array([coef for e in entries for _, coef in e])
    h.addCols(n, cost, np.zeros(n), np.full(n, cap), len(index), start, index, value)
    link_index = np.array([[first + i, col("open", s)] for i, (r, w, s) in enumerate(pairs)], dtype=np.int32).ravel()
    link_value = np.tile([1.0, -cap], n)
    first_row = h.getNumRow()
    h.addRows(n, np.full(n, -highspy.kHighsInf), np.full(n, highspy.kHighsInf), 2 * n, np.arange(0, 2 * n, 2, dtype=np.int32),
              link_index, link_value)
    lazy.add_held(h, "share_needs_open", pairs, np.arange(first_row, first_row + n), np.full(n, -np.inf), np.zeros(n))
    for i, pair in enumerate(pairs):
        column_of[pair] = first + i
