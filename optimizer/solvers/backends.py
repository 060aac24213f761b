"""Solver back-ends behind one interface, and what each can do.

Both back-ends solve the LinearModel built by optimizer.formulation and return the facts
of the run and the column values of the best plan (None when there is none):

* `highs` — the matrix handed straight to highspy (the default), with the LP-rounding
  warm start of optimizer.warmstart;
* `ortools` — the model turned into Pyomo (optimizer.linear.to_pyomo), written as MPS by
  Pyomo and read by OR-Tools' model_builder, solved with SCIP (OR-Tools' bundled MIP
  solver). CP-SAT is reachable as `ortools-sat`: model_builder hands it the MIP with every
  constraint scaled to integer coefficients (CP-SAT's `mip_wanted_precision`, 1e-6 by
  default) and continuous variables such as demand shares kept at that precision; see
  docs/solvers.md for the measurements that made SCIP the `ortools` default.

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
import numpy as np

from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solvers.pyomo_model import pyomo_values, to_pyomo
from dcplace.optimizer.solvers.warmstart import offer_rounded_lp_start, set_deadline


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


def run_ortools(lm: LinearModel, options, engine: str = "scip") -> tuple[dict[str, Any], np.ndarray | None]:
    """Solve `lm` with OR-Tools (SCIP or CP-SAT), by way of its Pyomo model written as MPS."""
    from ortools import __version__ as ortools_version
    from ortools.linear_solver.python import model_builder as mb

    started = time.perf_counter()
    m = to_pyomo(lm)
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
    x = pyomo_values(m) if objective is not None else None
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
    }, x


_STATUS = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnboundedOrInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnbounded: "unbounded",
}


def run_highs(lm: LinearModel, options, ix: IndexSets | None = None, relaxation: tuple[np.ndarray, float] | None = None,
              good_enough_usd: float | None = None) -> tuple[dict[str, Any], np.ndarray | None]:
    """Solve `lm` with HiGHS. `options.time_limit_s` bounds the hand-off, the warm start and
    the MIP together; `relaxation` is an LP solution the caller already has, for the warm
    start. A warm start that is feasible and costs at most `good_enough_usd` (the caller's
    bound plus its gap) is returned without a search, which could only confirm it."""
    started = time.perf_counter()
    deadline = started + options.time_limit_s
    h = to_highs(lm, options.threads)
    h.setOptionValue("random_seed", options.seed)
    warm_start, start = "off", None
    if options.warm_start and ix is not None:
        warm_start, start = offer_rounded_lp_start(h, lm, ix, deadline - time.perf_counter(), options.mip_gap, relaxation)
    if start is not None and good_enough_usd is not None and lm.objective() @ start <= good_enough_usd and lm.is_feasible(start):
        return {
            "solver": "highs", "solver_version": h.version(), "status": "feasible",
            "termination": "warm start within the gap of the caller's bound; search skipped",
            "objective_usd_per_year": float(lm.objective() @ start), "best_bound_usd_per_year": None, "gap": None,
            "solve_time_s": time.perf_counter() - started, "warm_start": warm_start,
        }, start
    if warm_start == "none: the LP relaxation did not finish in time":
        # The search would begin with that same LP: it cannot reach a plan in the time left,
        # and HiGHS's presolve of a model this large overran the limit by minutes when tried.
        return {
            "solver": "highs", "solver_version": h.version(), "status": "no_solution",
            "termination": "time limit: the LP relaxation did not finish", "objective_usd_per_year": None,
            "best_bound_usd_per_year": None, "gap": None, "solve_time_s": time.perf_counter() - started, "warm_start": warm_start,
        }, None
    h.setOptionValue("mip_rel_gap", options.mip_gap)
    set_deadline(h, deadline)
    h.run()
    model_status = h.getModelStatus()
    retried = ""
    if model_status == highspy.HighsModelStatus.kSolveError and time.perf_counter() < deadline:
        # HiGHS's presolve can postsolve to a point that breaks a row by more than its
        # tolerance and then gives up ("untransformed violations"; seen on tiny models in
        # tests/test_pruning.py). The model is fine: solve it again without presolve.
        h.setOptionValue("presolve", "off")
        h.clearSolver()
        set_deadline(h, deadline)
        h.run()
        model_status = h.getModelStatus()
        retried = " (after HiGHS's presolve failed, re-solved without presolve)"
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    status = _STATUS.get(model_status)
    if status is None or (status == "optimal" and not has_solution):
        status = "feasible" if has_solution else "no_solution"
    objective = info.objective_function_value if has_solution else None
    bound = info.mip_dual_bound if lm.integer_columns().size else objective
    gap = None
    if objective is not None and bound is not None and np.isfinite(bound):
        gap = abs(objective - bound) / max(abs(objective), 1e-9)
    else:
        bound = None
    facts = {
        "solver": "highs",
        "solver_version": h.version(),
        "status": status,
        "termination": h.modelStatusToString(model_status) + retried,
        "objective_usd_per_year": objective,
        "best_bound_usd_per_year": bound,
        "gap": gap,
        "solve_time_s": time.perf_counter() - started,
        "warm_start": warm_start,
    }
    return facts, (np.array(h.getSolution().col_value) if has_solution else None)


def run_backend(lm: LinearModel, ix: IndexSets, options, relaxation=None, good_enough_usd=None
                ) -> tuple[dict[str, Any], np.ndarray | None]:
    """Solve `lm` with the back-end `options.solver` names: (facts, column values or None)."""
    if options.solver == "highs":
        return run_highs(lm, options, ix, relaxation, good_enough_usd)
    return run_ortools(lm, options, engine="sat" if options.solver == "ortools-sat" else "scip")
