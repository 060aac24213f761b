"""Sparse index sets, built once before any model exists.

Only combinations that can be non-zero in some feasible plan become variables. Two kinds
of rule decide that, and they must not be confused:

*Constraints enforced by pruning* (the model has no other row for them; the checker
verifies each): cooling c allowed at s and kw_per_rack(k) <= max_kw(c) (density); serve
(r, w, s) only where rtt(r, s) <= budget(r, w) and s is in r's allowed countries
(latency, residency); a placement (j, s, f, x) only on an eligible chip x, a fabric of
tier >= j's minimum whose largest cluster holds the job's physical GPUs, at a site in j's
allowed countries; forbidden sites get no variables.

*Pruning rules* drop variables that some optimal plan never needs. Each is switchable in
`PruningRules` so that tests/test_pruning.py can solve small instances with and without
it and find the same optimum; each one's proof of validity is in `PruningRules`' docstring
and holds for every constraint the model can carry (power, floor, carbon cap, capex
budget, site counts, forced sites, single purpose, max share).

Serving pairs are decided in numpy: `eligible[w]` is a regions x sites boolean matrix of
every pair the rules above allow, and `serve` lists the pairs the model is built over, all
of the eligible ones unless `restrict_serve` narrowed them to a candidate subset (the large
scale path of optimizer.pairs). Round-trip times and distances are matrices too: at 2,000 x
10,000 a dict per pair would take gigabytes.

Everything downstream (the linear model, extraction, the warm start) reads these lists
and groupings; nothing rebuilds them.
"""


from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import numpy as np

from dcplace.models import Chip, Cooling, Fabric, InputProblem, RackConfig, Region, Scenario, ScenarioError, Site, TrainingJob, Workload
from dcplace.models.interactivity import tok_s_at_target
from dcplace.models.limits import size_problem
from dcplace.optimizer.model.candidates import candidate_mask
from dcplace.optimizer.model.clock import ClockSets, build_clock
from dcplace.optimizer.model.costs import RackEconomics, build_usd_per_kw_year, crf, rack_economics, site_build_usd_per_mw
from dcplace.optimizer.model.latency import allowed_mask, distance_matrix_km, rtt_matrix_ms
from dcplace.optimizer.model.resilience import failover_masks, seed_reroutings


@dataclass
class IndexSets:
    scenario: Scenario
    sites: dict[str, Site]
    regions: dict[str, Region]
    racks: dict[str, RackConfig]
    chips: dict[str, Chip]
    cooling: dict[str, Cooling]
    fabrics: dict[str, Fabric]
    workloads: dict[str, Workload]
    jobs: dict[str, TrainingJob]
    rtt_ms: np.ndarray  # regions x scenario sites, in scenario order
    distance_km: np.ndarray
    region_pos: dict[str, int]
    site_pos: dict[str, int]
    eligible: dict[str, np.ndarray] = field(default_factory=dict)  # class -> regions x scenario sites
    failover: dict[str, np.ndarray] = field(default_factory=dict)  # survivable class -> pairs that may re-serve a lost site (model.resilience)
    failover_lost: list[tuple[str, str, str]] = field(default_factory=list)  # (lost site, region, class) re-routings in the model (optimizer.solving.failover)
    clock: ClockSets | None = None  # hours, hourly sets and rentals (optimizer.model.clock)

    serve: list[tuple[str, str, str]] = field(default_factory=list)
    zones: list[tuple[str, str]] = field(default_factory=list)
    inf_racks: list[tuple[str, str, str, str]] = field(default_factory=list)
    trn_racks: list[tuple[str, str, str, str]] = field(default_factory=list)
    place: list[tuple[str, str, str, str]] = field(default_factory=list)
    # Every placement and training rack option the rules allow; `place` and `trn_racks` hold all of them
    # unless restrict_training narrowed them to candidates (optimizer.solvers.pairs prices the rest in).
    place_all: list[tuple[str, str, str, str]] = field(default_factory=list)
    trn_racks_all: list[tuple[str, str, str, str]] = field(default_factory=list)
    trn_econ_all: dict[tuple[str, str, str, str], RackEconomics] = field(default_factory=dict)
    holdable_limit: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (s, k, c) -> most racks that fit

    tok_s_per_rack: dict[tuple[str, str], float] = field(default_factory=dict)
    inf_econ: dict[tuple[str, str, str, str], RackEconomics] = field(default_factory=dict)
    trn_econ: dict[tuple[str, str, str, str], RackEconomics] = field(default_factory=dict)
    rack_limit: dict[tuple[str, str, str], int] = field(default_factory=dict)
    pair_cost: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # self-build (model.formulation self_build_*): site -> annual build cost per kW of IT, and the most training IT kW it can hold
    build_usd_per_kw_year: dict[str, float] = field(default_factory=dict)
    build_limit_kw: dict[str, float] = field(default_factory=dict)
    min_campus_kw: float = 0.0

    @property
    def build(self) -> list[str]:
        """Sites that may self-build a training campus (sparse: see build_index)."""
        return sorted(self.build_usd_per_kw_year)

    def demand(self, r: str, w: str) -> float:
        return self.regions[r].demand_tok_s.get(w, 0.0)

    def rtt(self, r: str, s: str) -> float:
        return float(self.rtt_ms[self.region_pos[r], self.site_pos[s]])

    def km(self, r: str, s: str) -> float:
        return float(self.distance_km[self.region_pos[r], self.site_pos[s]])

    def serve_demand_tok_s(self) -> np.ndarray:
        """demand(r, w) of each serving pair (r, w, s), in the order of `serve` (read-only; kept
        with the groupings, so restrict_serve renews it)."""
        if "serve_demand" not in self._groups:
            by_region = np.array([[self.demand(r, w) for w in self.workloads] for r in self.region_pos],
                                 dtype=float).reshape(len(self.region_pos), len(self.workloads))
            region_pos, _, class_pos = self.serve_positions()
            demand = by_region[region_pos, class_pos]
            demand.flags.writeable = False
            self._groups["serve_demand"] = demand
        return self._groups["serve_demand"]

    def serve_positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(region_pos, site_pos, class position in `workloads`) of each serving pair, in the
        order of `serve` (kept with the groupings, as serve_demand_tok_s; _serve_list leaves
        them there as it makes `serve`)."""
        if "serve_positions" not in self._groups:
            class_pos = {w: i for i, w in enumerate(self.workloads)}
            n = len(self.serve)
            self._groups["serve_positions"] = (
                np.fromiter((self.region_pos[r] for r, _, _ in self.serve), dtype=np.int64, count=n),
                np.fromiter((self.site_pos[s] for _, _, s in self.serve), dtype=np.int64, count=n),
                np.fromiter((class_pos[w] for _, w, _ in self.serve), dtype=np.int64, count=n))
        return self._groups["serve_positions"]

    def eligible_pairs(self) -> int:
        return int(sum(int(mask.sum()) for mask in self.eligible.values()))

    def restrict_serve(self, keep: dict[str, np.ndarray]) -> None:
        """Build the model over the eligible pairs in `keep` (class -> regions x sites mask) only."""
        for name in [n for n in self._groups if n.startswith("serve_")]:  # serve_demand and serve_positions too
            del self._groups[name]
        self.serve = _serve_list(self, {w: self.eligible[w] & keep[w] for w in self.eligible})

    def restrict_training(self, keep) -> None:
        """Build the model over the placements in `keep` (a set of (j, s, f, x)) only, with the
        training racks, zones, rack limits and self-build sites they need (candidate_placements)."""
        keep = set(keep)
        self.place = [p for p in self.place_all if p in keep]
        _training_racks(self)
        self._groups.clear()

    def with_every_placement(self) -> "IndexSets":
        """A copy over every placement and no serving pair: the full model's training side
        (what pricing and the capacity-cost bound read when the model holds candidates)."""
        full = replace(self, serve=[])
        full.restrict_training(full.place_all)
        return full

    def training_restricted(self) -> bool:
        return len(self.place) < len(self.place_all)

    def add_zones(self, zones) -> None:
        """Give the model these (site, cooling) zones too (a zone an earlier period built, optimizer.model.periods)."""
        self.zones = sorted(set(self.zones) | set(zones))
        self._groups.pop("zones_by_site", None)

    def h100_per_rack(self, k: str, f: str) -> float:
        """Effective H100-equivalent GPUs one rack of k contributes on fabric f."""
        rack = self.racks[k]
        return self.fabrics[f].training_efficiency * self.chips[rack.chip].h100_equiv * rack.gpus_per_rack

    # Groupings of the pairs, each computed once on first use and kept in `_groups` by name:
    # restrict_serve drops the serve_* ones, restrict_training every one, add_zones zones_by_site.
    def __post_init__(self) -> None:
        self._groups: dict[str, Any] = {}

    def _grouped(self, name: str, build: Callable[[], dict]) -> dict:
        if name not in self._groups:
            self._groups[name] = build()
        return self._groups[name]

    @property
    def serve_by_rw(self) -> dict[tuple[str, str], list[str]]:
        """(region, class) -> the sites that may serve it."""
        return self._grouped("serve_by_rw", lambda: _grouping(((r, w), s) for r, w, s in self.serve))

    @property
    def serve_by_fw(self) -> dict[str, list[tuple[str, str]]]:
        """site -> the (region, class) it may serve, of the survivable classes."""
        return self._grouped("serve_by_fw", lambda: _grouping((s, (r, w)) for r, w, s in self.serve if w in self.failover))

    @property
    def serve_by_sw(self) -> dict[tuple[str, str], list[str]]:
        """(site, class) -> the regions it may serve."""
        return self._grouped("serve_by_sw", lambda: _grouping(((s, w), r) for r, w, s in self.serve))

    @property
    def inf_by_sw(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """(site, class) -> its inference rack options (rack config, cooling)."""
        return self._grouped("inf_by_sw", lambda: _grouping(((s, w), (k, c)) for s, k, c, w in self.inf_racks))

    @property
    def trn_by_sfchip(self) -> dict[tuple[str, str, str], list[tuple[str, str]]]:
        """(site, fabric, chip) -> its training rack options (rack config, cooling)."""
        return self._grouped("trn_by_sfchip", lambda: _grouping(((s, f, self.racks[k].chip), (k, c)) for s, k, c, f in self.trn_racks))

    @property
    def place_by_job(self) -> dict[str, list[tuple[str, str, str]]]:
        """job -> its placements (site, fabric, chip)."""
        return self._grouped("place_by_job", lambda: _grouping((j, (s, f, chip)) for j, s, f, chip in self.place))

    @property
    def place_by_sfchip(self) -> dict[tuple[str, str, str], list[str]]:
        """(site, fabric, chip) -> the jobs that may be placed there."""
        return self._grouped("place_by_sfchip", lambda: _grouping(((s, f, chip), j) for j, s, f, chip in self.place))

    @property
    def inf_by_skc(self) -> dict[tuple[str, str, str], list[str]]:
        """(site, rack config, cooling) -> the classes its inference racks may serve."""
        return self._grouped("inf_by_skc", lambda: _grouping(((s, k, c), w) for s, k, c, w in self.inf_racks))

    @property
    def trn_by_skc(self) -> dict[tuple[str, str, str], list[str]]:
        """(site, rack config, cooling) -> the fabrics its training racks may use."""
        return self._grouped("trn_by_skc", lambda: _grouping(((s, k, c), f) for s, k, c, f in self.trn_racks))

    @property
    def inf_by_site(self) -> dict[str, list[tuple[str, str, str, str]]]:
        """site -> its inference rack keys (s, k, c, w)."""
        return self._grouped("inf_by_site", lambda: _grouping((key[0], key) for key in self.inf_racks))

    @property
    def trn_by_site(self) -> dict[str, list[tuple[str, str, str, str]]]:
        """site -> its training rack keys (s, k, c, f)."""
        return self._grouped("trn_by_site", lambda: _grouping((key[0], key) for key in self.trn_racks))

    @property
    def zones_by_site(self) -> dict[str, list[str]]:
        """site -> the cooling types of its zones."""
        return self._grouped("zones_by_site", lambda: _grouping((s, c) for s, c in self.zones))


def _grouping(items: Iterable[tuple[Any, Any]]) -> dict:
    """key -> the values given with it, in the order given."""
    out: dict = defaultdict(list)
    for key, value in items:
        out[key].append(value)
    return dict(out)


MAX_FULL_PAIRS = 60_000  # above this many eligible (region, class, site) pairs the model starts from candidates


@dataclass(frozen=True)
class PruningRules:
    """Rules that drop variables no optimal plan needs; each can be switched off.

    * `dominated_fabrics`: fabric g is dropped when another fabric f has tier, training
      efficiency and largest cluster at least g's, and costs no more per GPU both up front
      (`cost_usd_per_gpu`, what the capex budget counts) and per year (cost x CRF(life), what
      the objective counts); among equals the lower id survives. Proof: take any plan that
      puts a job on g; move the job and g's racks at that site to f, rack for rack. The
      racks' GPUs, kW, floor, energy, emissions, chips and cooling are unchanged, so power,
      floor, carbon cap, site counts, single purpose and every non-fabric cost are too; the
      fabric's annual cost and its upfront capex do not rise, so the objective and the capex
      budget hold; capacity eff(f) x racks >= eff(g) x racks, the tier is still >= the job's
      minimum and the job's physical GPUs (which fall as efficiency rises) still fit f's
      largest cluster. The moved plan is feasible and no dearer, so an optimum without g
      exists. (Comparing only the annual cost, as before, was wrong: a fabric dearer per
      year but cheaper up front can be the only one a capex budget admits.)
    * `job_fits_site`: placement (j, s, f, x) is dropped when even the LP relaxation of the
      site's floor and power, filled with nothing but x's racks in every allowed cooling,
      holds fewer physical GPUs than the job needs (`most_per_site`). Proof: any feasible
      plan's x racks at s satisfy the site's floor and power rows, so they are a feasible
      point of that LP and hold at most its optimum; other racks at s only reduce what is
      left. (One rack configuration alone is not a valid bound: when floor and power both
      bind, a mix of sparse and dense racks holds more GPUs than either.)
    * `idle_inference_racks`: inference racks of class w at s are dropped when no region
      can be served by s for w, nor re-served from s while another site is down (a
      survivable class's failover pairs, model.resilience). Proof: such racks appear in no
      capacity row that has demand, and every cost is >= 0, so setting them to zero keeps a plan feasible (it
      only lowers power, floor, emissions and capex) and no dearer.
    * `dominated_racks`: inference option (s, k, c, w) is dropped when another rack k' in the
      same zone type c at the same site s, for the same class w, serves at least as many tok/s
      and costs no more per year, draws no more facility kW, uses no more energy, emits no
      more and costs no more up front (among equals the lower id survives). Proof: in any
      plan, replace each rack of k there by one rack of k', one for one. Capacity for w
      (and any failover re-serving, which counts the same tok/s) does not fall; the floor
      count is the same; power, energy, emissions, capex and the objective do not rise; the
      zone c is the one already built; the k' racks at (s, c) still fit their bound
      rack_limit[s, k', c] = the most k' racks the floor and power admit, because the power
      row holds with no more kW per rack. Only one for one is exact: a rack that is merely
      cheaper *per tok/s* (k' serves twice the tok/s at 1.9 times the cost) is not, because a
      site that needs one rack's worth of capacity pays 1.9 racks' cost for k' (integer
      racks). Off with the clock (its hourly energy, idle power and backfilled training
      depend on more than these figures) and in multi-period models (a chip's life and year
      of availability tie its racks across periods; optimizer.solving.periods switches it off).
    """

    dominated_fabrics: bool = True
    job_fits_site: bool = True
    idle_inference_racks: bool = True
    dominated_racks: bool = True
    # ...applied only to scenarios with more eligible serving pairs than this, where the model's
    # size bounds the solve: on the default (13,978 pairs) it removed 1,121 of 29,994 columns and
    # HiGHS then took 23 s instead of 15 s to the same gap (2 threads, two runs each, one machine)
    dominated_racks_above_pairs: int = MAX_FULL_PAIRS

    @classmethod
    def none(cls) -> "PruningRules":
        return cls(dominated_fabrics=False, job_fits_site=False, idle_inference_racks=False, dominated_racks=False)


def undominated_fabrics(fabrics: dict[str, Fabric], rate: float) -> set[str]:
    """Fabrics no other fabric dominates (PruningRules.dominated_fabrics; ties broken by id)."""

    def key(f: Fabric) -> tuple:
        return (f.tier, f.training_efficiency, f.max_cluster_gpus, -f.cost_usd_per_gpu * crf(rate, f.life_years), -f.cost_usd_per_gpu)

    def dominates(a: Fabric, b: Fabric) -> bool:
        ka, kb = key(a), key(b)
        return all(x >= y for x, y in zip(ka, kb)) and (ka != kb or a.id < b.id)

    return {f.id for f in fabrics.values() if not any(dominates(g, f) for g in fabrics.values() if g.id != f.id)}


def undominated_inference_racks(ix: IndexSets) -> set[tuple[str, str, str, str]]:
    """The inference options (s, k, c, w) no other rack of the same (s, c, w) dominates one for
    one (PruningRules.dominated_racks; ties broken by rack id)."""

    def key(option: tuple[str, str, str, str]) -> tuple[float, ...]:
        s, k, c, w = option
        e = ix.inf_econ[option]
        return (ix.tok_s_per_rack[k, w], -e.total_usd_per_year, -e.facility_kw, -e.energy_mwh_per_year, -e.emissions_t_per_year,
                -e.upfront_capex_usd)

    groups: dict[tuple[str, str, str], list] = defaultdict(list)
    for option in ix.inf_racks:
        s, k, c, w = option
        groups[s, c, w].append((option, key(option)))
    kept = set()
    for options in groups.values():
        for option, mine in options:
            if not any(other != option and all(a >= b for a, b in zip(theirs, mine)) and (theirs != mine or other[1] < option[1])
                       for other, theirs in options):
                kept.add(option)
    return kept


def most_per_site(options: list[tuple[float, float]], floor_racks: float, power_kw: float) -> float:
    """max sum_i value_i * x_i  s.t.  sum_i x_i <= floor_racks, sum_i facility_kw_i * x_i <= power_kw, x >= 0.

    `options` are (value per rack, facility kW per rack). This LP has two rows, so an
    optimal vertex has at most two racks types non-zero: enumerating every single option
    (at the tighter of its two limits) and every pair with both rows tight is exact. It is
    an upper bound on any integer mix, which is what a pruning rule may use.
    """
    best = 0.0
    for value, kw in options:
        best = max(best, value * min(floor_racks, power_kw / kw))
    for i, (v1, p1) in enumerate(options):
        for v2, p2 in options[i + 1:]:
            if abs(p1 - p2) < 1e-12:
                continue
            x1 = (power_kw - p2 * floor_racks) / (p1 - p2)
            x2 = floor_racks - x1
            if x1 >= -1e-12 and x2 >= -1e-12:
                best = max(best, v1 * x1 + v2 * x2)
    return best


def _racks_that_fit(site: Site, rack: RackConfig, cooling: Cooling) -> int:
    """Most racks of this config a site could hold in a zone of this cooling (floor and power)."""
    by_power = math.floor(site.power_limit_kw / (rack.kw_per_rack * site.pue(cooling)) + 1e-9)
    return max(0, min(site.floor_racks, by_power))


def build_index(scenario: Scenario, max_full_pairs: int = MAX_FULL_PAIRS, pruning: PruningRules = PruningRules()) -> IndexSets:
    """Prune every variable that cannot be non-zero, and precompute its coefficients. With
    more than `max_full_pairs` eligible serving pairs, `serve` starts from candidates."""
    # the tables below are dense over regions x sites: refuse what memory cannot hold (a scenario
    # built in memory, e.g. from a cost matrix, has not met models.limits at load)
    too_large = size_problem(len(scenario.regions), len(scenario.sites), scenario.files.get("sites") or "sites")
    if too_large is not None:
        raise ScenarioError([too_large])
    cat = scenario.catalog
    forbidden = set(scenario.policies.forbidden_sites)
    dist = distance_matrix_km(scenario)
    rtt = rtt_matrix_ms(scenario, dist)
    sites = {s.id: s for s in scenario.sites if s.id not in forbidden}

    ix = IndexSets(
        scenario=scenario,
        sites=sites,
        regions={r.id: r for r in scenario.regions},
        racks={k.id: k for k in cat.rack_configs},
        chips={c.id: c for c in cat.chips},
        cooling={c.id: c for c in cat.cooling},
        fabrics={f.id: f for f in cat.fabrics},
        workloads={w.id: w for w in cat.workloads},
        jobs={j.id: j for j in scenario.jobs},
        rtt_ms=rtt,
        distance_km=dist,
        region_pos={r.id: i for i, r in enumerate(scenario.regions)},
        site_pos={s.id: j for j, s in enumerate(scenario.sites)},
    )
    econ = scenario.economics
    tok_s = tok_s_at_target(cat)
    for k, rack in ix.racks.items():
        for w in ix.workloads:
            if (rack.chip, w) in tok_s:
                ix.tok_s_per_rack[k, w] = rack.gpus_per_rack * tok_s[rack.chip, w] * econ.inference_target_utilization

    # (s, k, c) combinations a site can physically hold at least one rack of
    holdable: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for s, site in sites.items():
        for c in site.cooling_allowed:
            cooling = ix.cooling[c]
            for k, rack in ix.racks.items():
                if rack.kw_per_rack <= cooling.max_kw_per_rack + 1e-9:
                    limit = _racks_that_fit(site, rack, cooling)
                    if limit >= 1:
                        holdable[s].append((k, c, limit))

    # as-is (docs/as-is.md): today's racks are the only racks, so only their sites serve, and only their classes;
    # the pruning rules' proofs (an optimum exists without ...) do not hold for decisions held fixed
    held_inf, held_trn = footprint_keys(scenario)
    if scenario.footprint:
        pruning = PruningRules.none()
    # inference: which classes each site can serve at all, then every allowed pair
    serves_class = {(s, w) for s in sites for (k, c, _) in holdable[s] for w in ix.workloads if (k, w) in ix.tok_s_per_rack}
    if scenario.footprint:
        serves_class &= {(s, w) for s, _, _, w in held_inf}
    ix.eligible = _eligible_pairs(ix, serves_class)
    site_ids = [site.id for site in scenario.sites]
    ix.failover = failover_masks(ix, serves_class)
    # a site may hold racks of w to serve a region, or to re-serve one while another site is down
    served_at = {(site_ids[j], w) for masks in (ix.eligible, ix.failover) for w, mask in masks.items()
                 for j in np.flatnonzero(mask.any(axis=0))}
    ix.pair_cost = {(p.region, p.workload, p.site): p.usd_per_year for p in scenario.pair_costs}
    for s, site in sites.items():
        for k, c, limit in holdable[s]:
            for w in ix.workloads:
                if scenario.footprint and (s, k, c, w) not in held_inf:
                    continue
                if (k, w) in ix.tok_s_per_rack and ((s, w) in served_at or not pruning.idle_inference_racks):
                    ix.inf_racks.append((s, k, c, w))
                    ix.inf_econ[s, k, c, w] = rack_economics(
                        site, ix.racks[k], ix.chips[ix.racks[k].chip], ix.cooling[c], inference_load_factor(scenario, ix.workloads[w]), econ
                    )

    if pruning.dominated_racks and not scenario.clock.on and ix.eligible_pairs() > pruning.dominated_racks_above_pairs:
        kept = undominated_inference_racks(ix)
        ix.inf_racks = [key for key in ix.inf_racks if key in kept]
        ix.inf_econ = {key: ix.inf_econ[key] for key in ix.inf_racks}

    # training: placements first, then only the rack options some placement can use
    training_chips = {c for c, chip in ix.chips.items() if chip.h100_equiv > 0}
    fabrics = undominated_fabrics(ix.fabrics, econ.discount_rate) if pruning.dominated_fabrics else set(ix.fabrics)
    most_gpus = {
        (s, chip): most_per_site(
            [(ix.racks[k].gpus_per_rack, ix.racks[k].kw_per_rack * site.pue(ix.cooling[c])) for k, c, _ in holdable[s] if ix.racks[k].chip == chip],
            site.floor_racks, site.power_limit_kw,
        )
        for s, site in sites.items() for chip in training_chips
    }
    held_trn_chips = {(s, f, ix.racks[k].chip) for s, k, _, f in held_trn}  # as-is: a job runs on today's training racks only
    for j, job in ix.jobs.items():
        chips = [c for c in (job.eligible_chips or sorted(training_chips)) if c in training_chips]
        for s, site in sites.items():
            if job.allowed_countries and site.country not in job.allowed_countries:
                continue
            for f, fabric in ix.fabrics.items():
                if f not in fabrics or fabric.tier < job.min_fabric_tier:
                    continue
                for chip in chips:
                    gpus_needed = job.gpus_h100_equiv / (fabric.training_efficiency * ix.chips[chip].h100_equiv)
                    if gpus_needed > fabric.max_cluster_gpus:
                        continue
                    if scenario.footprint and (s, f, chip) not in held_trn_chips:
                        continue
                    if not pruning.job_fits_site or most_gpus[s, chip] >= gpus_needed * (1 - 1e-9):
                        ix.place.append((j, s, f, chip))
    used = {(s, f, chip) for (_, s, f, chip) in ix.place}
    for s, site in sites.items():
        for k, c, limit in holdable[s]:
            ix.holdable_limit[s, k, c] = limit
            chip = ix.racks[k].chip
            for f in ix.fabrics:
                if (s, k, c, f) in held_trn if scenario.footprint else (s, f, chip) in used:  # today's idle racks cost too
                    ix.trn_racks_all.append((s, k, c, f))
                    ix.trn_econ_all[s, k, c, f] = rack_economics(
                        site, ix.racks[k], ix.chips[chip], ix.cooling[c], econ.training_load_factor, econ, ix.fabrics[f]
                    )
    ix.place_all = list(ix.place)
    _training_racks(ix)

    # The candidate path prices pairs with the duals of the capacity rows (optimizer.solvers.pairs.ServingRows);
    # routing per hour has a share per hour and pair, which it does not price: every pair is built.
    if ix.eligible_pairs() <= max_full_pairs or (scenario.clock.on and scenario.clock.routing == "hour"):
        ix.serve = _serve_list(ix, ix.eligible)
    else:  # the large-scale path: candidates now, the rest priced in by optimizer.solvers.pairs
        ix.serve = _serve_list(ix, candidate_mask(ix))
    _refuse_footprint_beyond(ix, held_inf | held_trn)
    ix.failover_lost = seed_reroutings(ix)  # N-1: losses certain to need re-routing (model.resilience)
    _refuse_hourly_routing_beyond(ix, max_full_pairs)
    ix.clock = build_clock(ix)
    return ix


def footprint_keys(scenario: Scenario) -> tuple[set[tuple[str, str, str, str]], set[tuple[str, str, str, str]]]:
    """Today's racks (docs/as-is.md) as the keys of racks_inf (site, config, cooling, class) and
    racks_trn (site, config, cooling, fabric); both empty without a footprint."""
    inference = {(ln.site, ln.config, ln.cooling, ln.workload) for ln in scenario.footprint if ln.purpose == "inference"}
    training = {(ln.site, ln.config, ln.cooling, ln.fabric) for ln in scenario.footprint if ln.purpose == "training"}
    return inference, training


def _refuse_footprint_beyond(ix: IndexSets, held: set[tuple[str, str, str, str]]) -> None:
    """Every line of today's footprint is a rack the site can physically hold (models.references checked
    the names): a line whose site's power or floor cannot hold one such rack is refused by name."""
    built = set(ix.inf_racks) | set(ix.trn_racks)
    missing = sorted(key for key in held if key not in built)
    if missing:
        raise ScenarioError([InputProblem(
            ix.scenario.files.get("footprint") or "footprint.csv", None, "racks",
            f"site '{s}' cannot hold one rack of '{k}' in '{c}' (for '{w}'): its power_limit_kw or floor_racks is below "
            "one such rack with its cooling overhead.",
            "correct the site's power or floor in the sites table, or the line's configuration or cooling.") for s, k, c, w in missing])


def _refuse_hourly_routing_beyond(ix: IndexSets, max_full_pairs: int) -> None:
    """Routing per hour has a share column per eligible pair and represented hour (pricing
    covers routing by the day only): beyond 24 x max_full_pairs of them, the size of
    a 24-hour model over max_full_pairs pairs, the scenario is refused by name instead of
    running the machine out of memory (at 500 x 3,000, 24 hours: 57 M columns)."""
    clock = ix.scenario.clock
    if clock.routing != "hour" or not clock.on:
        return
    columns = ix.eligible_pairs() * clock.hours
    if columns > 24 * max_full_pairs:
        from dcplace.models import ScenarioError
        from dcplace.models.errors import InputProblem

        raise ScenarioError([InputProblem(
            ix.scenario.source_path or ix.scenario.name, None, "clock.routing",
            f"routing per hour would need {columns:,} hourly shares ({ix.eligible_pairs():,} eligible (region, class, site) "
            f"pairs x {clock.hours} represented hours), above the {24 * max_full_pairs:,} a model holds "
            f"(24 x --max-full-pairs {max_full_pairs:,}); pairs are not priced in with hourly routing.",
            "use fewer representative hours (clock.hours), route by the day (clock.routing: day), narrow the regions' rtt "
            "budgets, or raise --max-full-pairs to build it anyway.")])


def _training_racks(ix: IndexSets) -> None:
    """trn_racks: the options of trn_racks_all that some placement in `place` can use; then the
    rack limits, zones and self-build sites of the racks in the model."""
    used = {(s, f, chip) for (_, s, f, chip) in ix.place}
    held = footprint_keys(ix.scenario)[1]
    ix.trn_racks = [(s, k, c, f) for s, k, c, f in ix.trn_racks_all if (s, f, ix.racks[k].chip) in used or (s, k, c, f) in held]
    ix.trn_econ = {key: ix.trn_econ_all[key] for key in ix.trn_racks}
    ix._groups.clear()
    ix.build_usd_per_kw_year, ix.build_limit_kw = {}, {}
    add_build_sites(ix)
    needed = {(s, k, c) for (s, k, c, _) in ix.inf_racks} | {(s, k, c) for (s, k, c, _) in ix.trn_racks}
    ix.rack_limit = {key: limit for key, limit in ix.holdable_limit.items() if key in needed}
    ix.zones = sorted({(s, c) for (s, _, c) in needed})


def add_build_sites(ix: IndexSets) -> None:
    """Sites where a training campus may be self-built: the site (or economics) gives a build
    cost, it can hold training racks, and building is cheaper per kW-year than colocation.

    The last two are pruning, valid because built_kw[s] <= the training IT kW at s (so a site
    with no training racks builds nothing) and a campus whose annual cost per kW is at least
    colocation's only adds cost (campus_fixed >= 0): build[s] = built_kw[s] = 0 is as good.
    A site whose most training IT kW (build_limit_kw, the tightest valid M of
    self_build_needs_campus) is below min_campus_kw can never reach the campus size: no variable.
    """
    econ = ix.scenario.economics
    ix.min_campus_kw = econ.min_campus_mw * 1000.0
    options = ix.trn_by_site
    for s in sorted(options):
        site = ix.sites[s]
        usd_per_mw = site_build_usd_per_mw(site, econ)
        if usd_per_mw is None:
            continue
        annual = build_usd_per_kw_year(usd_per_mw, econ)
        if annual >= site.colocation_usd_per_kw_month * 12.0:
            continue
        racks = [(ix.racks[k], ix.cooling[c]) for (_, k, c, _) in options[s]]
        by_power = site.power_limit_kw / min(site.pue(c) for _, c in racks)
        by_floor = site.floor_racks * max(k.kw_per_rack for k, _ in racks)
        limit = min(by_power, by_floor)
        if limit + 1e-9 < ix.min_campus_kw:
            continue
        ix.build_usd_per_kw_year[s] = annual
        ix.build_limit_kw[s] = limit


def inference_load_factor(scenario: Scenario, workload: Workload) -> float:
    """Share of rated power an inference rack draws all year: the class's load factor, or with
    the clock on only the idle share (busy GPUs pay the rest by the hour, optimizer.model.clock)."""
    return scenario.clock.idle_power_share if scenario.clock.on else workload.load_factor


def _eligible_pairs(ix: IndexSets, serves_class: set[tuple[str, str]]) -> dict[str, np.ndarray]:
    """Class -> regions x scenario-sites mask: demand > 0, rtt within budget, site allowed
    for the region and able to host a rack that serves the class."""
    scenario = ix.scenario
    allowed = allowed_mask(scenario)
    out = {}
    for w in ix.workloads:
        hosts = np.array([(s.id, w) in serves_class for s in scenario.sites], dtype=bool)  # forbidden sites are not in it
        demand = np.array([r.demand_tok_s.get(w, 0.0) for r in scenario.regions])
        budget = np.array([r.rtt_budget_ms.get(w, -np.inf) for r in scenario.regions])
        within = ix.rtt_ms <= budget[:, None] + 1e-9
        out[w] = within & allowed & hosts[None, :] & (demand > 0)[:, None]
    return out


def _serve_list(ix: IndexSets, masks: dict[str, np.ndarray]) -> list[tuple[str, str, str]]:
    """(r, w, s) for every True entry, ordered by region, then site, then class."""
    region_ids = [r.id for r in ix.scenario.regions]
    site_ids = [s.id for s in ix.scenario.sites]
    classes = list(ix.workloads)
    parts = [(*np.nonzero(masks[w]), np.full(int(masks[w].sum()), c)) for c, w in enumerate(classes)]
    if not parts:
        return []
    i = np.concatenate([p[0] for p in parts])
    j = np.concatenate([p[1] for p in parts])
    c = np.concatenate([p[2] for p in parts])
    order = np.lexsort((c, j, i))
    i, j, c = i[order], j[order], c[order]
    serve = [(region_ids[a], classes[b], site_ids[d]) for a, d, b in zip(i.tolist(), j.tolist(), c.tolist())]
    if region_ids == list(ix.region_pos) and site_ids == list(ix.site_pos):  # positions as serve_positions states them
        ix._groups["serve_positions"] = (i.astype(np.int64), j.astype(np.int64), c.astype(np.int64))
    return serve
