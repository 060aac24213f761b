"""The multi-period MIP: each period's single-year model side by side, tied by what persists
(docs/periods.md).

Period t is today's model over its own scenario (models.periods.period_scenario), its
columns and rows copied in as `name@year` (LinearModel.append). What ties the periods:

* racks persist: `build_racks[t,(s,k,c)]` racks of configuration k in cooling c are bought
  at the start of period t; they serve every period that ends within the chip's life, and
  the racks in use in a period (any purpose) are at most those alive (`rack_stock`);
* fabric persists in the same way per (s,k,c,f) with the fabric's life (`fabric_stock`);
* a site once open stays open, a cooling zone once built stays built (`open_persists`,
  `zone_persists`);
* halls: a zone of a cooling with a retrofit cost (liquid) added to a site that already
  operated without one converts its floor: the zone's IT kW pay cooling.retrofit_usd_per_kw,
  less the kW the site was built ready for when it opened (cooling.ready_usd_per_kw)
  (`ready_at_opening`, `retrofit_needed`). A zone built when its site opens, or grown
  later, is new construction: its cooling capex is in the racks' own cost, as today.

The objective is the net present value at the first period's first year, rate r =
economics.discount_rate, of: every period's annual costs except the capex annuities,
times W_t = sum over the period's years y of (1+r)^-(y - y0); the annuities of every build
(chips and cooling capex per rack, fabric per rack) over the periods it serves; one-time
ready and retrofit costs (per kW) at (1+r)^-(start_t - y0). The salvage rule is the annuity
method's: an asset is charged its annuity only for the years of the periods it serves; what
remains of its life after the last of them (a stub shorter than the next period, or years
past the horizon) is taken to be worth its remaining annuities, so it is not charged.
One period of one year is today's model exactly: W = 1, builds = racks in use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dcplace.models import Scenario
from dcplace.models.records import Period
from dcplace.optimizer.model.costs import COST_CATEGORIES, RackEconomics
from dcplace.optimizer.model.families import REGISTRY, family
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel

CAPEX_CATEGORIES = ("chips", "cooling_capex", "fabric")  # annuities that move from racks in use to builds
PERIOD_CATEGORIES = COST_CATEGORIES + ("halls",)  # halls: one-time ready and retrofit costs


@dataclass
class PeriodSets:
    """The periods, their single-year index sets and the sparse sets that tie them."""

    periods: tuple[Period, ...]
    scenarios: list[Scenario]
    ixs: list[IndexSets]
    rate: float
    rack_keys: list[tuple[int, tuple]] = field(default_factory=list)  # (t, (s,k,c)): racks buyable in t
    fabric_keys: list[tuple[int, tuple]] = field(default_factory=list)  # (t, (s,k,c,f))
    halls: list[tuple[int, str, str]] = field(default_factory=list)  # (t, s, c): hall capacity of a cooling with a retrofit cost
    hall_limit_kw: dict[tuple[str, str], float] = field(default_factory=dict)  # M[s,c] over every period
    rack_econ: list[dict[tuple, RackEconomics]] = field(default_factory=list)  # per period: (s,k,c) -> a rack's economics

    @property
    def years(self) -> list[int]:
        return [p.year for p in self.periods]

    def discount(self, year: float) -> float:
        return (1.0 + self.rate) ** -(year - self.periods[0].year)

    def weight(self, t: int) -> float:
        """W_t: the present value of one dollar a year through period t."""
        p = self.periods[t]
        return sum(self.discount(y) for y in range(p.year, p.year + p.years))

    def serves(self, built: int, t: int, life_years: float) -> bool:
        """An asset bought at the start of period `built` serves period t when t ends within its life."""
        p = self.periods[t]
        return built <= t and p.year + p.years <= self.periods[built].year + life_years + 1e-9

    def served_weight(self, built: int, life_years: float) -> float:
        """Sum of W_t over the periods an asset bought in `built` serves (what its annuity is charged on)."""
        return sum(self.weight(t) for t in range(built, len(self.periods)) if self.serves(built, t, life_years))

    def rack_life(self, t: int, key: tuple) -> float:
        ix = self.ixs[t]
        return ix.chips[ix.racks[key[1]].chip].life_years

    def fabric_life(self, t: int, key: tuple) -> float:
        return self.ixs[t].fabrics[key[3]].life_years


def build_period_sets(periods: tuple[Period, ...], scenarios: list[Scenario], ixs: list[IndexSets], rate: float) -> PeriodSets:
    """The tie sets, once, sparse: a build key wherever a period's model has racks of it."""
    ps = PeriodSets(tuple(periods), scenarios, ixs, rate)
    for before, ix in zip(ixs, ixs[1:]):  # a zone built stays built: it keeps its column (and fixed cost) in later periods
        ix.add_zones((s, c) for s, c in before.zones if s in ix.sites and c in ix.sites[s].cooling_allowed)
    for t, ix in enumerate(ixs):
        ps.rack_keys += [(t, key) for key in sorted(ix.rack_limit)]
        ps.fabric_keys += [(t, key) for key in sorted(ix.trn_econ)]
        # a rack's capex annuities depend on (s,k,c) only: any of its purposes' economics gives them
        ps.rack_econ.append({key[:3]: econ for table in (ix.trn_econ, ix.inf_econ) for key, econ in table.items()})
        ps.halls += [(t, s, c) for s, c in ix.zones if ix.cooling[c].retrofit_usd_per_kw > 0]
    for t, s, c in ps.halls:  # M[s,c]: a hall may be built ready for what the site holds in any period
        ps.hall_limit_kw[s, c] = max(ps.hall_limit_kw.get((s, c), 0.0), zone_kw_limit(ixs[t], s, c))
    return ps


# -------------------------------------------------------------------------- the model


@dataclass
class PeriodModel:
    """The combined model and where each period's own model sits in it."""

    lm: LinearModel
    sets: PeriodSets
    models: list[LinearModel]  # each period's single-year model (its own column numbers)
    offsets: list[int]  # period t's column j is lm's column offsets[t] + j

    def col(self, t: int, block: str, key) -> int | None:
        """lm's column of period t's `block[key]`, None when the period has no such column."""
        b = self.models[t].blocks.get(block)
        if b is None or key not in b.pos:
            return None
        return self.offsets[t] + b.start + b.pos[key]

    def period_x(self, x: np.ndarray, t: int) -> np.ndarray:
        return x[self.offsets[t]:self.offsets[t] + self.models[t].n_cols]


def _users(pm: PeriodModel, t: int) -> tuple[dict, dict]:
    """Racks in use in period t: (s,k,c) -> columns, and (s,k,c,f) -> columns."""
    ix = pm.sets.ixs[t]
    racks: dict[tuple, list[int]] = {}
    fabric: dict[tuple, list[int]] = {}
    for key in ix.inf_econ:
        racks.setdefault(key[:3], []).append(pm.col(t, "racks_inf", key))
    for key in ix.trn_econ:
        racks.setdefault(key[:3], []).append(pm.col(t, "racks_trn", key))
        fabric.setdefault(key, []).append(pm.col(t, "racks_trn", key))
    return racks, fabric


def _stock(pm: PeriodModel, name: str, block: str, which: int, life) -> None:
    lm, ps = pm.lm, pm.sets
    builds: dict[tuple, list[int]] = {}
    for t, key in lm.blocks[block].keys:
        builds.setdefault(key, []).append(t)
    for t in range(len(ps.periods)):
        users = _users(pm, t)[which]
        for key, cols in users.items():
            alive = [(lm.col(block, (b, key)), -1.0) for b in builds.get(key, []) if ps.serves(b, t, life(b, key))]
            lm.add_row(name, (ps.years[t], key), [(j, 1.0) for j in cols] + alive, upper=0.0)


@family(checker="check_periods", section="periods", not_relaxed="a law of the model: racks in use are racks "
        "bought and still alive; buying more is always possible, the limits behind it (power, floor) are relaxed per period")
def rack_stock(pm: PeriodModel) -> None:
    """sum_w racks_inf[t,s,k,c,w] + sum_f racks_trn[t,s,k,c,f] - sum_{b <= t: serves(b,t)} build_racks[b,s,k,c] <= 0,
    serves(b,t): year_t + years_t <= year_b + life_years(chip of k)   (the rack retires with its chips)."""
    _stock(pm, "rack_stock", "build_racks", 0, pm.sets.rack_life)


@family(checker="check_periods", section="periods", not_relaxed="a law of the model: fabric in use is fabric "
        "bought and still alive; buying more is always possible")
def fabric_stock(pm: PeriodModel) -> None:
    """racks_trn[t,s,k,c,f] - sum_{b <= t: serves(b,t)} build_fabric[b,s,k,c,f] <= 0,
    serves(b,t): year_t + years_t <= year_b + life_years(fabric f)."""
    _stock(pm, "fabric_stock", "build_fabric", 1, pm.sets.fabric_life)


def _consecutive(pm: PeriodModel, block: str, keys_of) -> list[tuple[int, object, int, int]]:
    out = []
    for t in range(1, len(pm.sets.periods)):
        for key in keys_of(pm.sets.ixs[t - 1]):
            before, after = pm.col(t - 1, block, key), pm.col(t, block, key)
            if before is not None and after is not None:
                out.append((t, key, before, after))
    return out


@family(checker="check_periods", section="periods", not_relaxed="a site once built is not unbuilt; "
        "nothing a user sets loosens it")
def open_persists(pm: PeriodModel) -> None:
    """open[t-1,s] - open[t,s] <= 0   for consecutive periods where s has power in both."""
    for t, s, before, after in _consecutive(pm, "open", lambda ix: sorted(ix.sites)):
        pm.lm.add_row("open_persists", (pm.sets.years[t], s), [(before, 1.0), (after, -1.0)], upper=0.0)


@family(checker="check_periods", section="periods", not_relaxed="a cooling zone once built stays; "
        "nothing a user sets loosens it")
def zone_persists(pm: PeriodModel) -> None:
    """zone[t-1,s,c] - zone[t,s,c] <= 0   for consecutive periods where the zone exists in both."""
    for t, key, before, after in _consecutive(pm, "zone", lambda ix: ix.zones):
        pm.lm.add_row("zone_persists", (pm.sets.years[t], key), [(before, 1.0), (after, -1.0)], upper=0.0)


def zone_kw_limit(ix: IndexSets, s: str, c: str) -> float:
    """M[s,c]: at least the IT kW any mix of racks of cooling c at site s can draw in a period:
    min(power_limit_kw / PUE(s,c), floor_racks x the densest rack of c there)."""
    site, cooling = ix.sites[s], ix.cooling[c]
    densest = max((ix.racks[k].kw_per_rack for (s2, k, c2) in ix.rack_limit if s2 == s and c2 == c), default=0.0)
    return min(site.power_limit_kw / site.pue(cooling), site.floor_racks * densest)


def zone_it_kw(pm: PeriodModel, t: int, s: str, c: str) -> list[tuple[int, float]]:
    ix = pm.sets.ixs[t]
    out = []
    for block, table in (("racks_inf", ix.inf_econ), ("racks_trn", ix.trn_econ)):
        out += [(pm.col(t, block, key), ix.racks[key[1]].kw_per_rack) for key in table if key[0] == s and key[2] == c]
    return out


def _hall(pm: PeriodModel, block: str, t: int, s: str, c: str) -> int | None:
    b = pm.lm.blocks[block]
    key = (pm.sets.years[t], s, c)
    return b.start + b.pos[key] if key in b.pos else None


def _open_before(pm: PeriodModel, t: int, s: str) -> int | None:
    return pm.col(t - 1, "open", s) if t > 0 else None


@family(checker="check_periods", section="periods", not_relaxed="readiness is bought when a site is built; "
        "it only removes a cost, so it never makes a plan infeasible")
def ready_at_opening(pm: PeriodModel) -> None:
    """ready_kw[t,s,c] - M[s,c] * (open[t,s] - open[t-1,s]) <= 0   (open[t-1,s] = 0 when s had no power in t-1):
    a site is built ready for kW of cooling c (at cooling.ready_usd_per_kw) only in the period it first opens;
    M[s,c] = the most IT kW of c the site holds in any period (power, floor, density)."""
    lm, ps = pm.lm, pm.sets
    for t, s, c in ps.halls:
        limit = ps.hall_limit_kw[s, c]
        row = [(_hall(pm, "ready_kw", t, s, c), 1.0), (pm.col(t, "open", s), -limit)]
        before = _open_before(pm, t, s)
        if before is not None:
            row.append((before, limit))
        lm.add_row("ready_at_opening", (ps.years[t], s, c), row, upper=0.0)


@family(checker="check_periods", section="periods", not_relaxed="a retrofit can always be bought; "
        "it is a cost, never a limit")
def retrofit_needed(pm: PeriodModel) -> None:
    """retrofit_kw[t,s,c] >= it_kw[t,s,c] - sum_{b<t} ready_kw[b,s,c] - M[s,c] * (1 - open[t-1,s]) - M[s,c] * zone[t-1,s,c]:
    the IT kW of a c zone added at t to a site that operated at t-1 without one is converted floor, a retrofit at
    cooling.retrofit_usd_per_kw, less what the site was built ready for (it_kw = racks of c at s in t x kw_per_rack;
    a zone that already existed grows as new construction)."""
    lm, ps = pm.lm, pm.sets
    for t, s, c in ps.halls:
        before = _open_before(pm, t, s)
        if before is None:
            continue
        limit = ps.hall_limit_kw[s, c]
        row = [(_hall(pm, "retrofit_kw", t, s, c), 1.0), (before, -limit)] + [(j, -kw) for j, kw in zone_it_kw(pm, t, s, c)]
        row += [(_hall(pm, "ready_kw", b, s, c), 1.0) for b in range(t) if _hall(pm, "ready_kw", b, s, c) is not None]
        earlier = pm.col(t - 1, "zone", (s, c))
        if earlier is not None:
            row.append((earlier, limit))
        lm.add_row("retrofit_needed", (ps.years[t], s, c), row, lower=-limit)


def annuities(ps: PeriodSets, t: int, key: tuple, categories: tuple[str, ...]) -> dict[str, float]:
    """Capex annuity per rack of a build key in period t, by category, from period t's rack economics."""
    econ = ps.ixs[t].trn_econ.get(key) if len(key) == 4 else ps.rack_econ[t].get(key)
    return {c: econ.cost_usd_per_year.get(c, 0.0) for c in categories} if econ else {}


def capex_rise(ps: PeriodSets) -> str | None:
    """None when no asset bought in a period is cheaper a year than the same asset bought in a
    later period it still serves; else the first such asset, in words. When none is, the sum
    over periods of W_t times a lower bound of period t's single-year model bounds the multi-period
    optimum (optimizer.solving.periods, PERIOD_SUM): give rack_stock[t,s,k,c] the Lagrange
    multiplier W_t a_t[s,k,c] (a_t: the annuity per rack in period t's economics, chips and
    cooling capex) and fabric_stock its fabric annuity alike; a build bought in b then has reduced
    cost a_b sum_{t served} W_t - sum_{t served} W_t a_t >= 0, the racks in use of period t carry
    exactly the capex of period t's own model, and the other ties (opens and zones persist, halls)
    only add cost, so the relaxation with those multipliers is the sum of the periods' own models."""
    for block, keys, categories, life in (("racks", ps.rack_keys, ("chips", "cooling_capex"), ps.rack_life),
                                           ("fabric", ps.fabric_keys, ("fabric",), ps.fabric_life)):
        bought: dict[tuple, list[tuple[int, float]]] = {}
        for t, key in keys:
            bought.setdefault(key, []).append((t, sum(annuities(ps, t, key, categories).values())))
        for key, prices in bought.items():
            for b, early in prices:
                for t, late in prices:
                    if b < t and ps.serves(b, t, life(b, key)) and early < late * (1 - 1e-9):
                        return (f"{block} {key} bought in {ps.years[b]} cost ${early:,.0f} a year, less than bought in "
                                f"{ps.years[t]} (${late:,.0f}), and still serve {ps.years[t]}")
    return None


def build_periods_model(ps: PeriodSets, build_model, without: tuple[str, ...] | frozenset = ()) -> PeriodModel:
    """The multi-period MIP over `ps` (module docstring); `build_model(ix)` builds each period's model."""
    lm = LinearModel("periods")
    lm.cost_categories = PERIOD_CATEGORIES
    models, offsets = [], []
    for t, ix in enumerate(ps.ixs):
        model = build_model(ix)
        models.append(model)
        offsets.append(lm.append(model, str(ps.years[t]), ps.weight(t), CAPEX_CATEGORIES))
    pm = PeriodModel(lm, ps, models, offsets)
    rack_upper = [ps.ixs[t].rack_limit[key] for t, key in ps.rack_keys]
    lm.add_block("build_racks", [(t, key) for t, key in ps.rack_keys], 0.0, rack_upper, "integer")
    fabric_upper = [ps.ixs[t].rack_limit[key[:3]] for t, key in ps.fabric_keys]
    lm.add_block("build_fabric", [(t, key) for t, key in ps.fabric_keys], 0.0, fabric_upper, "integer")
    hall_keys = [(ps.years[t], s, c) for t, s, c in ps.halls]
    hall_upper = [ps.hall_limit_kw[s, c] for t, s, c in ps.halls]
    for block in ("ready_kw", "retrofit_kw"):
        lm.add_block(block, hall_keys, 0.0, hall_upper, "continuous")
    for name, fam in REGISTRY.items():  # the ties, in registration order (build_model skips this section)
        if fam.section == "periods" and name not in without:
            fam.builder(pm)
    for block, keys, categories, life in (("build_racks", ps.rack_keys, ("chips", "cooling_capex"), ps.rack_life),
                                           ("build_fabric", ps.fabric_keys, ("fabric",), ps.fabric_life)):
        for t, key in keys:
            charged = ps.served_weight(t, life(t, key))
            for category, usd in annuities(ps, t, key, categories).items():
                lm.add_cost(category, lm.col(block, (t, key)), usd * charged)
    for block, attr in (("ready_kw", "ready_usd_per_kw"), ("retrofit_kw", "retrofit_usd_per_kw")):
        for t, s, c in ps.halls:
            lm.add_cost("halls", lm.col(block, (ps.years[t], s, c)), getattr(ps.ixs[t].cooling[c], attr) * ps.discount(ps.years[t]))
    return pm


def start_from_periods(pm: PeriodModel, xs: list[np.ndarray | None]) -> np.ndarray | None:
    """A first plan for the multi-period model from each period's own plan (`xs[t]`, column values of
    pm.models[t]): sites and zones kept open once open, racks and fabric bought when the racks alive
    fall short, hall capacity grown to the racks and paid as readiness or retrofit. Myopic, so
    rarely optimal, but feasible whenever the period plans are (the back-end checks it) and policies
    over sites allow keeping earlier sites open. None when a period has no plan."""
    if any(x is None for x in xs):
        return None
    lm, ps = pm.lm, pm.sets
    x = np.zeros(lm.n_cols)
    for t, xt in enumerate(xs):
        x[pm.offsets[t]:pm.offsets[t] + len(xt)] = xt
    for t in range(1, len(ps.periods)):
        for block, keys in (("open", sorted(ps.ixs[t].sites)), ("zone", ps.ixs[t].zones)):
            for key in keys:
                before, now = pm.col(t - 1, block, key), pm.col(t, block, key)
                if before is not None and x[before] > 0.5:
                    x[now] = 1.0
    for block, which, life in (("build_racks", 0, ps.rack_life), ("build_fabric", 1, ps.fabric_life)):
        bought: dict[tuple, list[tuple[int, int]]] = {}
        for t in range(len(ps.periods)):
            for key, cols in _users(pm, t)[which].items():
                use = int(round(sum(x[j] for j in cols)))
                alive = sum(n for b, n in bought.get(key, []) if ps.serves(b, t, life(b, key)))
                if use > alive:
                    x[lm.col(block, (t, key))] = use - alive
                    bought.setdefault(key, []).append((t, use - alive))
    by_hall: dict[tuple[str, str], list[int]] = {}
    for t, s, c in ps.halls:
        by_hall.setdefault((s, c), []).append(t)
    for (s, c), periods in by_hall.items():
        cooling = ps.ixs[periods[0]].cooling[c]
        opened = next((t for t in range(len(ps.periods)) if pm.col(t, "open", s) is not None and x[pm.col(t, "open", s)] > 0.5), None)
        owed = {}  # period -> kW a new c zone at an operating site converts
        for t in periods:
            before = _open_before(pm, t, s)
            zone_before = pm.col(t - 1, "zone", (s, c)) if t > 0 else None
            if before is not None and x[before] > 0.5 and (zone_before is None or x[zone_before] < 0.5):
                owed[t] = sum(x[j] * kw for j, kw in zone_it_kw(pm, t, s, c))
        ready = 0.0
        if opened is not None and _hall(pm, "ready_kw", opened, s, c) is not None:
            ready = sum(kw for t, kw in owed.items() if cooling.ready_usd_per_kw * ps.discount(ps.years[opened])
                        < cooling.retrofit_usd_per_kw * ps.discount(ps.years[t]))
            x[_hall(pm, "ready_kw", opened, s, c)] = ready
        for t, kw in owed.items():
            x[_hall(pm, "retrofit_kw", t, s, c)] = max(0.0, kw - ready)
    return x


__all__ = ["capex_rise", "start_from_periods", "PeriodModel", "PeriodSets", "build_period_sets", "build_periods_model", "CAPEX_CATEGORIES"]
