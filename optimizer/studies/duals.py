"""Prices of the limits: what one more unit of each binding limit is worth to this plan.

    from dcplace.optimizer.studies.duals import limit_prices
    prices = limit_prices(scenario, plan)          # or prices_of_plan("plan/")
    for p in prices.binding(): print(p.limit, p.name, p.value, p.unit)

These are **LP duals with the plan's integer decisions fixed**: which sites are open, which
cooling zones are built and where each training job runs (the binaries) are held at the
plan's values; rack counts and demand shares become continuous and may move. On that LP
(the "plan LP"):

* `site_power` rows give $ per MW-year of site power (raising power_limit_kw of an open site
  raises its row's limit one for one);
* `site_space` rows give $ per rack-year of floor space;
* `carbon_cap` and `capex_budget` rows give $ a year per t CO2 and per $ of upfront budget;
* max share per site: the duals of the share_needs_open rows plus the reduced costs of the
  shares at their upper bound, $ a year per percentage point (only when the limit is < 100 %;
  not stated with routing per hour, where the cap bounds the day's share, every hour's share and
  share_needs_open at once and the LP's duals split its price among them arbitrarily: on one
  region and two sites they gave $830 and, counting the hours' shares too, $1,591 a point
  against $70 routed by the day);
* latency budgets act by pruning (a region-site pair beyond the budget has no variable), so
  they have no row and no dual: their price is a finite difference of the same LP, re-solved
  with the class's budget 1 ms wider (saving) and 1 ms tighter (cost) in every region.

Two changes make the duals mean what they say: the density_needs_zone rows are left out and
racks in a built zone get no upper bound (with zones fixed, a rack can only be in a built
zone, which bounds of 0 enforce; their big-M and the rack bounds are floor(limit / kW per
rack), which would otherwise bind a hair before the power row and take its dual). Site
counts (min/max sites) and forced sites involve only integer decisions: with those fixed
they have no LP price; what a site is worth is measured by re-solving
(optimizer/studies/worth.py). A dual is a marginal value: it holds for small changes only,
until the LP's basis changes. Each power price is spot-checked by re-solving the LP with
the limit raised by FD_SHARE of itself (`fd_check`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from dcplace.models import Scenario, ScenarioError
from dcplace.models.plan import Plan
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import INF, LinearModel
from dcplace.optimizer.solvers.lp import LpResult, LpSession
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.studies.explain import analysis_folder, plan_and_scenario, stamp, write_json

FIXED_BLOCKS = ("open", "zone", "place", "hosts_inf", "hosts_trn")  # the plan's binaries, held at its values
RACK_BLOCKS = ("racks_inf", "racks_trn")
FD_SHARE = 1e-3  # the power finite difference raises the limit by this share of itself
BINDING = 1e-6  # |dual| in $ per unit above which a limit counts as binding
EVERY_PAIR = 10**12  # the plan LP holds every eligible serving pair (no candidate restriction)
BASIS = ("LP duals with the plan's integer decisions fixed (open sites, cooling zones, job placements); rack counts and "
         "demand shares continuous. Marginal values: they hold for small changes of one limit at a time.")


class PlanLPError(RuntimeError):
    """The plan LP could not be built or solved (the plan does not fit the scenario's model)."""


@dataclass
class LimitPrice:
    """The value of one more unit of a limit to this plan (USD a year per unit)."""

    limit: str  # site power | floor space | carbon cap | capex budget | max share per site | latency budget
    key: str  # site id, class id, or "" for a single limit
    name: str
    unit: str  # what one unit is, e.g. "MW" (value in $ a year per MW)
    value_usd_per_year_per_unit: float  # the saving from one more unit (>= 0 for a limit that binds)
    limit_value: float  # the limit, in units
    used: float  # the plan LP's use of it, in units
    method: str  # "LP dual" or "finite difference"
    check_usd_per_year_per_unit: float | None = None  # a finite difference of the plan LP, where computed
    cost_of_one_less_usd_per_year: float | None = None  # latency: the cost of 1 ms less (None: no plan with these sites)

    @property
    def binding(self) -> bool:
        return abs(self.value_usd_per_year_per_unit) > BINDING


@dataclass
class LimitPrices:
    plan: dict
    plan_objective_usd_per_year: float
    lp_objective_usd_per_year: float  # the plan LP: <= the plan's cost (rack counts continuous)
    prices: list[LimitPrice] = field(default_factory=list)
    basis: str = BASIS
    seconds: float = 0.0

    def binding(self) -> list[LimitPrice]:
        """The limits that bind, dearest first (per unit value times the limit's size)."""
        return sorted((p for p in self.prices if p.binding), key=lambda p: -abs(p.value_usd_per_year_per_unit) * max(abs(p.limit_value), 1.0))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> "LimitPrices":
        return cls(**{**doc, "prices": [LimitPrice(**p) for p in doc["prices"]]})


class PlanLP:
    """The plan LP of `plan` for `scenario` held by the engine (optimizer.solvers.lp; see the module docstring)."""

    def __init__(self, scenario: Scenario, plan: Plan):
        self.ix: IndexSets = checked_index(scenario, EVERY_PAIR)
        self.lm: LinearModel = build_model(self.ix, without=("density_needs_zone",), cheapest=False)
        x = plan_binaries(plan, self.lm)
        if x is None:
            raise PlanLPError("the plan uses a decision the scenario's model has no variable for (a forbidden site, a pruned "
                              "option); explain a plan with the scenario it was solved for (its folder's inputs/)")
        lm = self.lm
        lower, upper = lm.bounds()
        for name in FIXED_BLOCKS:
            if name in lm.blocks:
                b = lm.blocks[name]
                lower[b.start:b.stop] = upper[b.start:b.stop] = np.round(x[b.start:b.stop])
        for name in RACK_BLOCKS:
            b = lm.blocks[name]
            for i, key in enumerate(b.keys):
                built = x[lm.col("zone", (key[0], key[2]))] > 0.5
                upper[b.start + i] = INF if built else 0.0
        self.lower, self.upper = lower, upper
        self.session = LpSession(lm, threads=1, relax=True, col_lower=lower, col_upper=upper)
        self.last: LpResult | None = None  # the last solve's values and duals
        self.row_upper = lm.row_bounds()[1]

    def solve(self) -> float | None:
        """The LP's optimum (None when it has none: the fixed decisions cannot meet the limits)."""
        self.last = self.session.solve()
        if not self.last.optimal:
            return None
        return self.last.objective

    def row(self, family: str, key) -> int | None:
        fam = self.lm.families.get(family)
        if fam is None:
            return None
        return fam.rows().get(key)

    def with_row_upper(self, row: int, upper: float) -> float | None:
        """The LP's optimum with one row's upper limit moved (restored afterwards)."""
        lower = self.lm.row_bounds()[0][row]
        self.session.change_row_bounds(row, lower, upper)
        try:
            return self.solve()
        finally:
            self.session.change_row_bounds(row, lower, self.row_upper[row])


def plan_binaries(plan: Plan, lm: LinearModel) -> np.ndarray | None:
    """Column values holding the plan's binary decisions (open, zones, job placements, hosts),
    zero elsewhere; None when the model has no column for one of them."""
    x = np.zeros(lm.n_cols)
    try:
        for s in plan.sites:
            if not s.open:
                continue
            x[lm.col("open", s.id)] = 1.0
            for c in s.zones:
                x[lm.col("zone", (s.id, c))] = 1.0
            if "hosts_inf" in lm.blocks:
                purposes = {ln.purpose for ln in s.racks}
                x[lm.col("hosts_inf", s.id)] = float("inference" in purposes)
                x[lm.col("hosts_trn", s.id)] = float("training" in purposes)
        for j in plan.jobs:
            x[lm.col("place", (j.job, j.site, j.fabric, j.chip))] = 1.0
    except KeyError:
        return None
    return x


def limit_prices(scenario: Scenario, plan: Plan, latency: bool = True, fd_checks: int = 3) -> LimitPrices:
    """The price of every limit of the plan (see the module docstring); `fd_checks` of the dearest
    power prices are re-solved with the limit raised, `latency` adds the budgets' finite differences."""
    started = time.perf_counter()
    model = PlanLP(scenario, plan)
    objective = model.solve()
    if objective is None:
        raise PlanLPError("the plan LP has no optimum: the plan's sites, zones and job placements cannot meet this "
                          "scenario's limits (was the plan solved for another scenario?)")
    ix, lm, solution = model.ix, model.lm, model.last
    row_dual, col_dual = solution.row_dual, solution.col_dual
    col_value, row_value = solution.x, solution.row_value
    prices: list[LimitPrice] = []
    opened = {s.id for s in plan.sites if s.open}

    for family, limit, unit, scale, size in (
        ("site_power", "site power", "MW", 1000.0, lambda s: ix.sites[s].power_limit_kw / 1000.0),
        ("site_space", "floor space", "rack", 1.0, lambda s: float(ix.sites[s].floor_racks)),
    ):
        rows = lm.families.get(family, _Empty()).rows()
        for s in sorted(opened & set(ix.sites)):
            row = rows.get(s)
            if row is None:  # site_power leaves out a row its floor implies (formulation.site_power): never binding
                if family == "site_power":
                    used = next(x.facility_kw for x in plan.sites if x.id == s) / 1000.0
                    prices.append(LimitPrice(limit, s, ix.sites[s].name, unit, 0.0, size(s), used, "implied by the floor"))
                continue
            used = (row_value[row] + size(s) * (1000.0 if family == "site_power" else 1.0)) / (1000.0 if family == "site_power" else 1.0)
            prices.append(LimitPrice(limit, s, ix.sites[s].name, unit, -row_dual[row] * scale, size(s), used, "LP dual"))
    pol = scenario.policies
    for family, limit, unit, cap in (("carbon_cap", "carbon cap", "t CO2 a year", pol.carbon_cap_t_per_year),
                                     ("capex_budget", "capex budget", "USD of upfront capex", pol.capex_budget_usd)):
        row = model.row(family, None)
        if row is not None:
            prices.append(LimitPrice(limit, "", limit, unit, -row_dual[row], float(cap), float(row_value[row]), "LP dual"))
    if pol.max_share_per_site < 1.0 - 1e-12 and "share_h" not in lm.blocks:
        value = -sum(row_dual[r] for r in lm.families["share_needs_open"].rows().values())
        share = lm.blocks["share"]
        at_upper = col_value[share.start:share.stop] >= pol.max_share_per_site - 1e-9
        value -= float(col_dual[share.start:share.stop][at_upper].sum())
        prices.append(LimitPrice("max share per site", "", "max share per site", "percentage point", value / 100.0,
                                 pol.max_share_per_site * 100.0, pol.max_share_per_site * 100.0, "LP dual"))

    # spot checks: the dearest power prices against a re-solve with the limit raised
    power = sorted((p for p in prices if p.limit == "site power" and p.binding), key=lambda p: -p.value_usd_per_year_per_unit)
    for p in power[:fd_checks]:
        p.check_usd_per_year_per_unit = power_finite_difference(model, p.key, objective)

    if latency:
        prices += latency_prices(scenario, plan, objective)
    return LimitPrices(stamp(plan), float(plan.objective_usd_per_year), objective, prices, seconds=time.perf_counter() - started)


class _Empty:
    @staticmethod
    def rows() -> dict:
        return {}


def power_finite_difference(model: PlanLP, site: str, objective: float) -> float | None:
    """$ a year per MW from re-solving the plan LP with the site's power limit raised by FD_SHARE of it."""
    row = model.row("site_power", site)
    if row is None:
        return None
    delta_kw = max(FD_SHARE * model.ix.sites[site].power_limit_kw, 1e-3)
    raised = model.with_row_upper(row, model.row_upper[row] + delta_kw)  # open fixed at 1: the limit is the row's room
    return None if raised is None else (objective - raised) / delta_kw * 1000.0


def latency_prices(scenario: Scenario, plan: Plan, objective: float) -> list[LimitPrice]:
    """Per class: the plan LP's saving with every region's budget 1 ms wider, and its cost 1 ms tighter."""
    out = []
    for w in scenario.catalog.workloads:
        budgets = [r.rtt_budget_ms[w.id] for r in scenario.regions if r.demand_tok_s.get(w.id, 0) > 0 and w.id in r.rtt_budget_ms]
        if not budgets:
            continue
        wider = _lp_with_budget_shift(scenario, plan, w.id, +1.0)
        tighter = _lp_with_budget_shift(scenario, plan, w.id, -1.0)
        saving = None if wider is None else objective - wider
        out.append(LimitPrice(
            "latency budget", w.id, w.name, "ms in every region", saving if saving is not None else 0.0,
            float(np.median(budgets)), float(np.median(budgets)), "finite difference",
            cost_of_one_less_usd_per_year=None if tighter is None else tighter - objective))
    return out


def _lp_with_budget_shift(scenario: Scenario, plan: Plan, workload: str, ms: float) -> float | None:
    regions = tuple(r.model_copy(update={"rtt_budget_ms": {**r.rtt_budget_ms, workload: max(r.rtt_budget_ms[workload] + ms, 1e-3)}})
                    if workload in r.rtt_budget_ms else r for r in scenario.regions)
    shifted = scenario.model_copy(update={"regions": regions})
    try:
        return PlanLP(shifted, plan).solve()
    except (PlanLPError, ScenarioError, ValueError):
        return None  # a tighter budget that leaves a region with no reachable site, or a plan pair now out of budget


def prices_of_plan(plan_folder: str | Path, out_dir: str | Path | None = None, latency: bool = True) -> LimitPrices:
    """limit_prices for a plan folder, saved as PLAN/why/prices/prices.json (or out_dir/prices.json)."""
    plan, scenario = plan_and_scenario(plan_folder)
    result = limit_prices(scenario, plan, latency=latency)
    folder = analysis_folder(plan_folder, "prices", out_dir)
    write_json(folder / "prices.json", result.to_dict())
    return result


__all__ = ["BASIS", "LimitPrice", "LimitPrices", "PlanLP", "PlanLPError", "limit_prices", "power_finite_difference", "prices_of_plan"]
