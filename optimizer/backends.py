"""Solver back-ends behind one interface, and what each can do.

Both back-ends solve the same Pyomo model built by optimizer.formulation:

* `highs` — HiGHS through Pyomo's persistent interface (the default), with the
  LP-rounding warm start of optimizer.warmstart;
* `ortools` — the model written as MPS by Pyomo and read by OR-Tools' model_builder,
  solved with SCIP (OR-Tools' bundled MIP solver). CP-SAT is reachable as `ortools-sat`:
  model_builder hands it the MIP with every constraint scaled to integer coefficients
  (CP-SAT's `mip_wanted_precision`, 1e-6 by default) and continuous variables such as
  demand shares kept at that precision; see docs/solvers.md for the measurements that
  made SCIP the `ortools` default.

`CAPABILITIES` tells which options a back-end honours, so option handling and tests read
one table instead of branching on names.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import highspy
import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.contrib.solver.common.results import TerminationCondition

from optimizer.index import IndexSets
from optimizer.warmstart import offer_rounded_lp_start


@dataclass(frozen=True)
class Capabilities:
    time_limit: bool
    mip_gap: bool
    threads: bool
    seed: bool
    mip_bound: bool
    warm_start: bool
    infeasible_subset: bool


CAPABILITIES: dict[str, Capabilities] = {
    "highs": Capabilities(time_limit=True, mip_gap=True, threads=True, seed=True, mip_bound=True, warm_start=True, infeasible_subset=True),
    "ortools": Capabilities(time_limit=True, mip_gap=True, threads=True, seed=True, mip_bound=True, warm_start=False, infeasible_subset=False),
    "ortools-sat": Capabilities(time_limit=True, mip_gap=True, threads=True, seed=True, mip_bound=True, warm_start=False, infeasible_subset=False),
}


def _ortools_parameters(engine: str, mip_gap: float, threads: int, seed: int) -> str:
    if engine == "scip":
        return "\n".join([f"limits/gap = {mip_gap}", f"randomization/randomseedshift = {seed}", f"parallel/maxnthreads = {threads}"])
    return f"relative_gap_limit:{mip_gap},num_workers:{max(threads, 1)},random_seed:{seed}"


def run_ortools(m: pyo.ConcreteModel, options, engine: str = "scip") -> dict[str, Any]:
    """Solve `m` with OR-Tools (SCIP or CP-SAT) and load the solution into its variables."""
    from ortools import __version__ as ortools_version
    from ortools.linear_solver.python import model_builder as mb

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.mps"
        _, smap_id = m.write(str(path), format="mps", io_options={"symbolic_solver_labels": True})
        symbols = m.solutions.symbol_map[smap_id].bySymbol
        model = mb.Model()
        if not model.import_from_mps_file(str(path)):
            raise RuntimeError("OR-Tools could not read the model")
    m.solutions.delete_symbol_map(smap_id)
    solver = mb.Solver(engine)
    solver.set_time_limit_in_seconds(max(options.time_limit_s - (time.perf_counter() - started), 1e-3))  # MPS hand-off included
    solver.set_solver_specific_parameters(_ortools_parameters(engine, options.mip_gap, options.threads, options.seed))
    result = solver.solve(model)
    elapsed = time.perf_counter() - started
    status = {
        mb.SolveStatus.OPTIMAL: "optimal",
        mb.SolveStatus.FEASIBLE: "feasible",
        mb.SolveStatus.INFEASIBLE: "infeasible",
        mb.SolveStatus.UNBOUNDED: "unbounded",
    }.get(result, "no_solution")
    objective = bound = gap = None
    if status in ("optimal", "feasible"):
        objective = solver.objective_value
        bound = solver.best_objective_bound
        gap = abs(objective - bound) / max(abs(objective), 1e-9)
        for i in range(model.num_variables):
            var = model.var_from_index(i)
            target = symbols.get(var.name)
            if target is not None and not target.fixed:
                target.set_value(solver.value(var), skip_validation=True)
    return {
        "solver": f"ortools-{engine}",
        "solver_version": ortools_version,
        "status": status,
        "termination": result.name,
        "objective_usd_per_year": objective,
        "best_bound_usd_per_year": bound,
        "gap": gap,
        "solve_time_s": elapsed,
        "warm_start": "off",
    }


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


def run_highs(m: pyo.ConcreteModel, options, ix: IndexSets | None = None) -> dict[str, Any]:
    """Solve `m` with HiGHS through Pyomo and load the solution into its variables.

    `options.time_limit_s` bounds the warm start and the MIP together.
    """
    solver = SolverFactory("highs")
    _use_threads(options.threads)
    started = time.perf_counter()
    deadline = started + options.time_limit_s
    warm_start = "off"
    used_s = 0.0
    if options.warm_start and ix is not None:
        solver.set_instance(m)
        warm_start = offer_rounded_lp_start(solver, m, ix, options.threads, options.time_limit_s, options.mip_gap)
        # HiGHS compares its limit with the instance's cumulative run time, warm-start runs included.
        used_s = solver._solver_model.getRunTime()
    results = solver.solve(
        m,
        time_limit=used_s + max(deadline - time.perf_counter(), 1e-3),
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
    return facts


def run_backend(m: pyo.ConcreteModel, ix: IndexSets, options) -> dict[str, Any]:
    """Solve `m` with the back-end `options.solver` names; the solution is loaded into `m`."""
    if options.solver == "highs":
        return run_highs(m, options, ix)
    return run_ortools(m, options, engine="sat" if options.solver == "ortools-sat" else "scip")
