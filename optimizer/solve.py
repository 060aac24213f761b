"""Solve a scenario: precheck, index, build, HiGHS, extract -> Plan.

    from models import load_scenario
    from optimizer import solve, SolveOptions
    plan = solve(load_scenario(), SolveOptions(time_limit_s=60))

A time-limited solve returns its incumbent with status "feasible" and the gap it reached,
never "optimal". An infeasible scenario raises InfeasibleScenario; inputs that the
prechecks can already tell will not work raise ScenarioError before any model is built.
"""

from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

import highspy
import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import TerminationCondition

from models import Scenario, ScenarioError
from models.plan import Plan, SolveRecord
from optimizer.extract import extract
from optimizer.formulation import build_model, model_size
from optimizer.index import IndexSets, build_index
from optimizer.precheck import precheck
from optimizer.warmstart import offer_rounded_lp_start

PACKAGES = ("dcplace", "pyomo", "highspy", "ortools", "geopandas", "shapely", "networkx", "pandas", "numpy", "pydantic")


@dataclass(frozen=True)
class SolveOptions:
    """Solver settings, recorded in every plan."""

    solver: str = "highs"
    time_limit_s: float = 300.0
    mip_gap: float = 5e-3  # strategic inputs are uncertain by far more; --gap 1e-4 for a tight proof
    threads: int = 1
    seed: int = 0
    warm_start: bool = True

    def __post_init__(self) -> None:
        if self.solver != "highs":
            raise ValueError(f"unknown solver '{self.solver}': this version supports 'highs'")
        if self.time_limit_s <= 0 or self.mip_gap < 0 or self.threads < 1:
            raise ValueError("time_limit_s > 0, mip_gap >= 0 and threads >= 1 are required")


class InfeasibleScenario(Exception):
    """The model has no feasible plan; `record` holds the solve that proved it."""

    def __init__(self, scenario: Scenario, record: SolveRecord):
        self.scenario = scenario
        self.record = record
        super().__init__(
            f"scenario '{scenario.name}' has no feasible plan ({record.termination}): the limits together "
            "cannot all hold. Loosen a policy (carbon cap, capex budget, max sites, redundancy share), "
            "add power or floor space, or widen latency budgets."
        )


def _versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


_STATUS = {
    TerminationCondition.convergenceCriteriaSatisfied: "optimal",
    TerminationCondition.provenInfeasible: "infeasible",
    TerminationCondition.locallyInfeasible: "infeasible",
    TerminationCondition.infeasibleOrUnbounded: "infeasible",
    TerminationCondition.unbounded: "unbounded",
}


_scheduler_threads: int | None = None


def _use_threads(threads: int) -> None:
    """HiGHS sizes its task scheduler once per process thread and then rejects any other
    `threads` value (HiGHS issue #715, HiGHS.jl #130); reset it when the count changes."""
    global _scheduler_threads
    if _scheduler_threads is not None and _scheduler_threads != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _scheduler_threads = threads


def run_highs(m: pyo.ConcreteModel, options: SolveOptions, ix: IndexSets | None = None) -> tuple[dict[str, Any], Any]:
    """Solve `m` with HiGHS through Pyomo; returns (facts about the solve, the raw results)."""
    solver = SolverFactory("highs")
    _use_threads(options.threads)
    started = time.perf_counter()
    warm_start = "off"
    if options.warm_start and ix is not None:
        solver.set_instance(m)
        warm_start = offer_rounded_lp_start(solver, m, ix, options.threads, options.time_limit_s)
    results = solver.solve(
        m,
        time_limit=options.time_limit_s,
        rel_gap=options.mip_gap,
        threads=options.threads,
        load_solutions=False,
        raise_exception_on_nonoptimal_result=False,
        solver_options={"random_seed": options.seed, "mip_rel_gap": options.mip_gap, "output_flag": False},
    )
    elapsed = time.perf_counter() - started
    has_solution = results.incumbent_objective is not None
    status = _STATUS.get(results.termination_condition)
    if status is None:
        status = "feasible" if has_solution else "no_solution"
    if status == "optimal" and not has_solution:
        status = "no_solution"
    if has_solution:
        results.solution_loader.load_vars()
    objective = results.incumbent_objective
    bound = results.objective_bound
    gap = None
    if objective is not None and bound is not None:
        gap = abs(objective - bound) / max(abs(objective), 1e-9)
    version = ".".join(str(v) for v in solver.version())
    facts = {
        "solver": "highs",
        "solver_version": version,
        "status": status,
        "termination": results.termination_condition.name,
        "objective_usd_per_year": objective,
        "best_bound_usd_per_year": bound,
        "gap": gap,
        "solve_time_s": elapsed,
        "warm_start": warm_start,
    }
    return facts, results


def solve(scenario: Scenario, options: SolveOptions | None = None) -> Plan:
    """The least-cost plan for `scenario`."""
    options = options or SolveOptions()
    started = time.perf_counter()
    ix = build_index(scenario)
    problems = precheck(ix)
    if problems:
        raise ScenarioError(problems)
    m = build_model(ix)
    build_time = time.perf_counter() - started
    facts, _ = run_highs(m, options, ix)
    record_args = dict(facts, build_time_s=build_time, options=asdict(options), model=model_size(m))
    if facts["status"] in ("infeasible", "unbounded", "no_solution", "error"):
        raise InfeasibleScenario(scenario, SolveRecord(**record_args))
    extract_start = time.perf_counter()
    parts = extract(m, ix)
    record = SolveRecord(**record_args, extract_time_s=time.perf_counter() - extract_start)
    return Plan(
        scenario=scenario.name,
        scenario_hash=scenario.content_hash,
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        solve=record,
        objective_usd_per_year=parts["objective"],
        cost_breakdown_usd_per_year=parts["breakdown"],
        kpis=parts["kpis"],
        sites=parts["sites"],
        assignments=parts["assignments"],
        jobs=parts["jobs"],
        provenance={
            "scenario_name": scenario.name,
            "scenario_hash": scenario.content_hash,
            "scenario_source": scenario.source_path,
            "options": asdict(options),
            "seed": options.seed,
            "solver": {"name": "highs", "version": facts["solver_version"]},
            "packages": _versions(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "rerun": "dcplace solve inputs/scenario.yaml "
            f"--time-limit {options.time_limit_s:g} --gap {options.mip_gap:g} --threads {options.threads} --seed {options.seed}",
        },
    )


def index_for(scenario: Scenario) -> IndexSets:
    """The sparse index sets of a scenario, for inspection in a notebook."""
    return build_index(scenario)
