"""A robust plan: among candidate plans, the one whose worst annual cost over the sampled inputs
of a robustness study is least (optimizer/studies/robustness.py, docs/why.md).

    study = robustness("plan/", samples=20, robust_plan=True)     # PLAN/why/robustness/robust-plan/
    study.robust_plan["premium_usd_per_year"], study.robust_plan["worst_usd_per_year"]

**Candidates.** The recommended plan and each sample's least-cost plan (their first-stage
decisions: open sites, cooling zones, racks by chip, configuration and cooling, training
placements, self-built campuses; candidates with the same decisions count once).

**Re-costing.** Each candidate is priced in every sample with its first-stage decisions held
and its serving as it is. That is the cost of the best serving for those decisions whenever
the sampled inputs are prices of first-stage decisions only (power, colocation, fixed and build
cost, grid carbon, the discount rate and the campus economics: `FIRST_STAGE_PRICES`) and the
sample's model prices every serving column as the nominal model does (checked column by column):
the serving LP given the decisions (demand, capacity, latency, transport cost) is then the same
LP in every sample, so the serving optimal for the candidate's own inputs stays optimal in all
of them. Otherwise (a user range on demand, a limit or a transport price, the clock's hourly
energy) the serving is re-solved per candidate and sample: an LP with the first-stage columns
fixed. A candidate that breaks a limit of a sample (possible only when a range moves a limit)
has no cost there and an unbounded worst case.

**Choice.** The candidate with the least worst case over the samples (`criterion="worst"`), or
the least `quantile` (`criterion="quantile"`); the other figure is reported too. The robust
plan is written as an ordinary plan folder at the nominal inputs (its decisions held, serving
as re-costed) and passed through the independent checker; its premium is its nominal cost
minus the recommended plan's.

This is a min-max over a candidate set, not the exact two-stage robust optimum. The exact one
is a single MIP over the first-stage decisions with one copy of the serving (and a cost row)
per sample, min t with t >= cost_m(first stage, serving_m) for every sample m (or a
quantile's CVaR), solved whole or by Benders over the samples (docs/formulation.md's
master/subproblem split); it may open a combination no sample's own optimum opens.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from dcplace.models import Scenario
from dcplace.models.plan import HAS_PLAN, Plan, SolveRecord, read_plan
from dcplace.models.sweep import Member, load_member
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import PruningRules
from dcplace.optimizer.solvers.lp import LpSession
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.solve import SolveOptions, plan_record
from dcplace.optimizer.studies.batch import _write_checked, failover_record, start_columns

FIRST_STAGE = ("open", "zone", "racks_inf", "racks_trn", "hosts_inf", "hosts_trn", "place", "build", "built_kw")
FIRST_STAGE_PRICES = re.compile(
    r"^(sites(\[[^\]]*\])?\.(power_price_usd_per_mwh|colocation_usd_per_kw_month|fixed_cost_usd_per_year|grid_carbon_g_per_kwh"
    r"|build_usd_per_mw)|economics\.(discount_rate|build_usd_per_mw|build_om_share_per_year|build_life_years"
    r"|campus_fixed_usd_per_year|carbon_price_usd_per_t))$")
DEFAULT_QUANTILE = 0.9
PLAN = "plan"  # the recommended plan's name among the candidates
FOLDER = "robust-plan"


@dataclass
class Candidate:
    name: str  # PLAN or the sample whose least-cost plan it is
    costs_usd_per_year: list[float | None]  # in each sample (None: it breaks a limit there)
    same_as: list[str] = field(default_factory=list)  # other samples whose plan makes the same decisions
    nominal_usd_per_year: float | None = None  # at the nominal inputs

    @property
    def worst_usd_per_year(self) -> float:
        return max((np.inf if c is None else c for c in self.costs_usd_per_year), default=np.inf)

    def quantile_usd_per_year(self, q: float) -> float:
        costs = [np.inf if c is None else c for c in self.costs_usd_per_year]
        return float(np.quantile(costs, q, method="inverted_cdf")) if costs else np.inf


@dataclass
class RobustPlan:
    criterion: str  # "worst" or "quantile"
    quantile: float
    chosen: str  # the candidate chosen
    quantile_choice: str  # the candidate the other criterion would choose
    folder: str  # the robust plan's checked plan folder
    nominal_usd_per_year: float  # the robust plan at the nominal inputs
    plan_usd_per_year: float  # the recommended plan at the nominal inputs
    premium_usd_per_year: float
    worst_usd_per_year: float
    plan_worst_usd_per_year: float
    quantile_usd_per_year: float
    plan_quantile_usd_per_year: float
    method: str  # "re-costed" or "serving re-solved"
    candidates: list[Candidate]
    roles: dict[str, str]  # the robust plan's open sites and roles
    jobs: dict[str, str]  # job id -> site in the robust plan
    seconds: float

    def to_dict(self) -> dict:
        doc = asdict(self)
        for c, d in zip(self.candidates, doc["candidates"]):
            d["worst_usd_per_year"] = _finite(c.worst_usd_per_year)
        return {k: _finite(v) if isinstance(v, float) else v for k, v in doc.items()}


def _finite(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def signature(plan: Plan) -> tuple:
    """A plan's first-stage decisions (what a candidate holds fixed)."""
    racks = sorted((s.id, ln.purpose, ln.config, ln.cooling, ln.workload or "", ln.fabric or "", ln.racks)
                   for s in plan.sites for ln in s.racks)
    return (tuple(sorted(s.id for s in plan.sites if s.open)), tuple(sorted((s.id, tuple(s.zones)) for s in plan.sites if s.zones)),
            tuple(racks), tuple(sorted((j.job, j.site, j.fabric, j.chip) for j in plan.jobs)),
            tuple(sorted((s.id, s.tenure or "", round(s.built_kw or 0.0, 6)) for s in plan.sites if s.tenure == "build")))


def _serving_costs(lm) -> dict:
    cost = lm.objective()
    return {(name, key): cost[b.start + i] for name, b in lm.blocks.items() if name not in FIRST_STAGE
            for i, key in enumerate(b.keys) if cost[b.start + i] != 0.0}


def recosting_exact(paths: list[str], nominal_serving: dict, sample_lm) -> bool:
    """Whether holding a candidate's serving prices it exactly in the sample (module docstring);
    `nominal_serving`: the nominal model's serving costs (_serving_costs)."""
    return all(FIRST_STAGE_PRICES.match(p) for p in paths) and nominal_serving == _serving_costs(sample_lm)


def fixed_first_stage(lm, x: np.ndarray, threads: int = 1) -> np.ndarray | None:
    """The least-cost columns of `lm` with the first-stage columns held at `x` (serving free), or
    None when no serving meets every limit with those decisions."""
    lower, upper = lm.bounds()
    lower, upper = lower.copy(), upper.copy()
    for name in FIRST_STAGE:
        if name in lm.blocks:
            b = lm.blocks[name]
            lower[b.start:b.stop] = upper[b.start:b.stop] = x[b.start:b.stop]
    result = LpSession(lm, threads, relax=False, col_lower=lower, col_upper=upper).solve()
    if not result.optimal or result.x is None:
        return None
    out = result.x.copy()
    cols = lm.integer_columns()
    out[cols] = np.round(out[cols])
    return out


def _model(scenario: Scenario, max_full_pairs: int):
    """The scenario's full model (nothing pruned, as batch starts are judged: a candidate may use a
    decision the scenario's own solve would prune) without the cheapest-plan-only rows."""
    ix = checked_index(scenario, max_full_pairs, PruningRules.none())
    return ix, build_model(ix, cheapest=False)


def _cost(plan: Plan, lm, ix, exact: bool) -> tuple[float | None, np.ndarray | None]:
    x = start_columns(plan, lm, ix)
    if x is None:
        return None, None
    if not exact:
        x = fixed_first_stage(lm, x)
        if x is None:
            return None, None
    if not lm.is_feasible(x):
        return None, None
    return float(lm.objective() @ x), x


@dataclass
class CostMatrix:
    """The candidates and what each costs in each sample and at the nominal inputs."""

    names: list[str]  # PLAN, then the samples whose plans make new decisions
    plans: list[Plan]
    same: list[list[str]]  # per candidate, the other samples whose plan makes the same decisions
    costs: list[list[float | None]]  # per candidate, per sample (None: it breaks a limit there)
    nominal: list[float | None]
    exact: bool  # re-costing was exact in every sample (else the serving was re-solved)


def cost_matrix(plan: Plan, folder: Path | None, base: Path, members: list[Member], paths: list[str], nominal: Scenario,
                max_full_pairs: int) -> CostMatrix:
    """The candidates (`plan` alone when `folder` is None, else also the samples' plans in it) priced
    in each sample and at the nominal inputs: one model per sample, shared by every candidate."""
    names, plans, same = candidates_of(plan, folder, members) if folder is not None else ([PLAN], [plan], [[]])
    ix0, lm0 = _model(nominal, max_full_pairs)
    serving = _serving_costs(lm0)
    out: list[list[float | None]] = [[] for _ in plans]
    exact_everywhere = True
    for member in members:
        ix, lm = _model(load_member(str(base), member), max_full_pairs)
        exact = recosting_exact(paths, serving, lm)
        exact_everywhere &= exact
        for row, p in zip(out, plans):
            row.append(_cost(p, lm, ix, exact)[0])
    return CostMatrix(names, plans, same, out, [_cost(p, lm0, ix0, exact_everywhere)[0] for p in plans], exact_everywhere)


def candidates_of(plan: Plan, folder: Path, members: list[Member]) -> tuple[list[str], list[Plan], list[list[str]]]:
    """(names, plans, the samples each one stands for too): the recommended plan and every sample's
    least-cost plan with decisions not seen before, in that order."""
    names, plans, seen = [PLAN], [plan], {signature(plan): 0}
    same: list[list[str]] = [[]]
    for m in members:
        path = folder / m.name
        if not (path / "plan.json").is_file():
            continue
        p = read_plan(path)
        if p.solve.status not in HAS_PLAN:
            continue
        sig = signature(p)
        if sig in seen:
            same[seen[sig]].append(m.name)
            continue
        seen[sig] = len(plans)
        same.append([])
        names.append(m.name)
        plans.append(p)
    return names, plans, same


def choose(candidates: list[Candidate], criterion: str, quantile: float) -> tuple[Candidate, Candidate]:
    """(the candidate chosen by `criterion`, the one the other criterion picks); ties go to the
    earlier candidate (the recommended plan first) and then the cheaper at nominal inputs."""
    def key_worst(c):
        return (c.worst_usd_per_year, c.quantile_usd_per_year(quantile), c.nominal_usd_per_year or np.inf)

    def key_quantile(c):
        return (c.quantile_usd_per_year(quantile), c.worst_usd_per_year, c.nominal_usd_per_year or np.inf)

    by_worst = min(candidates, key=key_worst)
    by_quantile = min(candidates, key=key_quantile)
    return (by_worst, by_quantile) if criterion == "worst" else (by_quantile, by_worst)


def robust_plan(plan: Plan, scenario: Scenario, matrix: CostMatrix, folder: Path, criterion: str = "worst",
                quantile: float = DEFAULT_QUANTILE) -> RobustPlan:
    """Choose among the candidates of `matrix` (cost_matrix) and write the robust plan to
    folder/robust-plan (module docstring)."""
    if criterion not in ("worst", "quantile") or not 0 < quantile <= 1:
        raise ValueError("criterion 'worst' or 'quantile' and 0 < quantile <= 1 are required")
    started = time.perf_counter()
    cands = [Candidate(n, row, s, c) for n, row, s, c in zip(matrix.names, matrix.costs, matrix.same, matrix.nominal)]
    chosen, other = choose([c for c in cands if c.nominal_usd_per_year is not None], criterion, quantile)
    if not np.isfinite(chosen.worst_usd_per_year) and criterion == "worst":
        raise ValueError("no candidate plan meets every limit of every sample: no robust plan among them "
                         "(a range moves a limit; narrow it or add samples)")
    mine = cands[0]
    robust = matrix.plans[matrix.names.index(chosen.name)]
    max_pairs = int(plan.solve.options.get("max_full_pairs", 60_000))
    written = _write(robust, scenario, plan, folder / FOLDER, max_pairs, matrix.exact, chosen, criterion, quantile, len(cands))
    cost = float(written.objective_usd_per_year)
    return RobustPlan(criterion, quantile, chosen.name, other.name, str(folder / FOLDER), cost, float(plan.objective_usd_per_year),
                      cost - float(plan.objective_usd_per_year), chosen.worst_usd_per_year, mine.worst_usd_per_year,
                      chosen.quantile_usd_per_year(quantile), mine.quantile_usd_per_year(quantile),
                      "re-costed" if matrix.exact else "serving re-solved", cands,
                      {s.id: s.role for s in written.sites if s.open}, {j.job: j.site for j in written.jobs},
                      time.perf_counter() - started)


def _write(robust: Plan, scenario: Scenario, plan: Plan, folder: Path, max_pairs: int, exact: bool, chosen: Candidate,
           criterion: str, quantile: float, n: int) -> Plan:
    """The robust plan at the nominal inputs, as a checked plan folder."""
    t = time.perf_counter()
    ix, lm = _model(scenario, max_pairs)
    build_s = time.perf_counter() - t
    cost, x = _cost(robust, lm, ix, exact)
    if x is None:
        raise ValueError(f"candidate {chosen.name} breaks a limit of the nominal scenario")
    parts = extract(x, lm, ix)
    objective = parts["objective"]
    bound = plan.solve.best_bound_usd_per_year  # the recommended plan's bound holds for every plan of the scenario
    gap = None if bound is None else max(0.0, objective - bound) / max(abs(objective), 1e-9)
    options = SolveOptions(**{k: plan.solve.options[k] for k in ("solver", "mip_gap", "time_limit_s", "seed", "max_full_pairs")
                              if k in plan.solve.options})
    what = "worst case" if criterion == "worst" else f"{quantile:.0%} quantile"
    record = SolveRecord(
        solver=plan.solve.solver, solver_version=plan.solve.solver_version, status="feasible",
        termination=f"robust plan: the least {what} of cost over the sampled inputs among {n} candidate plans "
                    f"(candidate {chosen.name}; docs/why.md, a min-max over candidates, not the exact two-stage optimum)",
        objective_usd_per_year=objective, best_bound_usd_per_year=bound, gap=gap, build_time_s=build_s,
        solve_time_s=time.perf_counter() - t, warm_start=f"candidate {chosen.name}, decisions held", options=asdict(options),
        model=lm.size(), failover=failover_record(ix, lm, x, objective))
    out = plan_record(scenario, options, record, parts, [])
    _write_checked(out, scenario, folder)
    return out


__all__ = ["Candidate", "CostMatrix", "DEFAULT_QUANTILE", "FIRST_STAGE", "FIRST_STAGE_PRICES", "RobustPlan", "candidates_of", "choose",
           "cost_matrix", "fixed_first_stage", "recosting_exact", "robust_plan", "signature"]
