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

`REGISTRY` holds one `Backend` per `--solver` name: its capabilities (which options it
honours) and its runner. Dispatch (`run_backend`) reads the registry and never branches on
a solver's name; an option a back-end does not honour is refused (ValueError) or, where
the solve can go on without it, noted in words in the result (`RunResult.notes`, which
the plan records in `solve.termination`). `CAPABILITIES` is the same table, capabilities
only. Every runner returns a `RunResult` and the column values of its best plan.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import highspy
import numpy as np

from dcplace.models.plan import HAS_PLAN
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import GRACE_S, HighsAbandoned, run_until, to_highs
from dcplace.optimizer.solvers.pyomo_model import pyomo_values, to_pyomo
from dcplace.optimizer.solvers.warmstart import _solution, complete_start, rounded_lp_start


@dataclass(frozen=True)
class RunResult:
    """What one back-end run returns (besides the column values of its plan)."""

    solver: str
    solver_version: str
    status: str  # one of models.plan.SolveRecord's statuses
    termination: str
    objective_usd_per_year: float | None = None
    best_bound_usd_per_year: float | None = None
    gap: float | None = None
    solve_time_s: float = 0.0
    warm_start: str = "off"
    notes: tuple[str, ...] = ()  # options not honoured, deadline events: recorded in the plan's termination

    def __getitem__(self, key: str) -> Any:  # the dict this replaced was read as facts["status"]
        return getattr(self, key)

    @property
    def has_plan(self) -> bool:
        return self.status in HAS_PLAN

    def record(self) -> dict[str, Any]:
        """The SolveRecord fields of this run (notes appended to the termination)."""
        termination = "; ".join([self.termination, *self.notes])
        return dict(solver=self.solver, solver_version=self.solver_version, status=self.status, termination=termination,
                    objective_usd_per_year=self.objective_usd_per_year, best_bound_usd_per_year=self.best_bound_usd_per_year,
                    gap=self.gap, solve_time_s=self.solve_time_s, warm_start=self.warm_start)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    if objective is None or bound is None or not np.isfinite(bound):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-9)


def gap_status(gap: float | None, mip_gap: float) -> str:
    """"optimal" when `gap` is proven within the asked `mip_gap` (to rounding), else "feasible": the one
    rule by which every phase of a solve (race, N-1, periods, dispatch) names a plan it has a bound for."""
    return "optimal" if gap is not None and gap <= mip_gap + 1e-12 else "feasible"


@dataclass(frozen=True)
class Capabilities:
    time_limit: bool
    mip_gap: bool
    threads: bool
    seed: bool
    mip_bound: bool
    warm_start: bool
    infeasible_subset: bool
    exact_continuous: bool = True  # continuous columns kept as floating point (CP-SAT scales them to integers)
    deadline_watchdog: bool = False  # returns at the deadline even where the engine does not check its clock


Runner = Callable[..., tuple[RunResult, "np.ndarray | None"]]


@dataclass(frozen=True)
class Backend:
    """One `--solver` choice: what it is, what it honours, and how to run it."""

    name: str
    engine: str
    capabilities: Capabilities
    runner: Runner
    module: str  # the Python package it needs
    notes: tuple[str, ...] = field(default=())

    def available(self) -> bool:
        import importlib.util

        return importlib.util.find_spec(self.module) is not None


# option -> (capability, is it asked for?, "refuse" or "warn")
_OPTION_NEEDS: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    "time_limit_s": ("time_limit", lambda o: math.isfinite(o.time_limit_s), "refuse"),
    "mip_gap": ("mip_gap", lambda o: o.mip_gap > 0, "refuse"),
    "threads": ("threads", lambda o: o.threads > 1, "warn"),
    "seed": ("seed", lambda o: o.seed != 0, "warn"),
    "warm_start": ("warm_start", lambda o: o.warm_start, "warn"),
}


def get_backend(name: str) -> Backend:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown solver '{name}': choose one of {', '.join(REGISTRY)}") from None


def unhonoured(backend: Backend, options) -> list[str]:
    """Words for each option `backend` cannot honour and the solve can go on without;
    ValueError for one it cannot go on without."""
    notes = []
    for option, (capability, asked, action) in _OPTION_NEEDS.items():
        if getattr(backend.capabilities, capability) or not asked(options):
            continue
        if action == "refuse":
            raise ValueError(f"solver '{backend.name}' cannot honour {option}={getattr(options, option)!r}")
        notes.append(f"{option}={getattr(options, option)!r} is not honoured by '{backend.name}': solved without it")
    return notes


def _ortools_parameters(engine: str, mip_gap: float, threads: int, seed: int) -> str:
    if engine == "scip":
        return "\n".join([f"limits/gap = {mip_gap}", f"randomization/randomseedshift = {seed}", f"parallel/maxnthreads = {threads}"])
    return f"relative_gap_limit:{mip_gap},num_workers:{max(threads, 1)},random_seed:{seed}"


def run_ortools(lm: LinearModel, ix: IndexSets | None, options, relaxation=None, good_enough_usd=None,
                engine: str = "scip") -> tuple[RunResult, np.ndarray | None]:
    """Solve `lm` with OR-Tools (SCIP or CP-SAT), by way of its Pyomo model written as MPS.
    `relaxation` and `good_enough_usd` are not used (no warm start)."""
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
    objective = bound = None
    if status in HAS_PLAN:
        objective = solver.objective_value
        bound = solver.best_objective_bound
        for i in range(model.num_variables):
            var = model.var_from_index(i)
            target = symbols.get(var.name)
            if target is not None and not target.fixed:
                target.set_value(solver.value(var), skip_validation=True)
    x = pyomo_values(m) if objective is not None else None
    return RunResult(solver=f"ortools-{engine}", solver_version=ortools_version, status=status, termination=result.name,
                     objective_usd_per_year=objective, best_bound_usd_per_year=bound, gap=relative_gap(objective, bound),
                     solve_time_s=elapsed), x


HOLD_BACK_START = True  # see run_highs
HELD_OFFER_SHARE = 0.25  # of the search's time, after which the held start is handed to HiGHS if its root is not over
# Below this many columns the warm start is skipped: on OR-Library cap41-cap134 (2,650 columns at most) its two LPs,
# rounding and polish cost more than the whole HiGHS search they precede (engine time 0.107 s median with it, 0.063 s
# without, at equal optima: measured for issue 20). Models this small are solved to the gap by HiGHS in well under a
# second; the warm start is for the models whose root LP and search take minutes, where a plan in hand matters.
WARM_START_MIN_COLUMNS = 5_000

_STATUS = {
    highspy.HighsModelStatus.kOptimal: "optimal",
    highspy.HighsModelStatus.kInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnboundedOrInfeasible: "infeasible",
    highspy.HighsModelStatus.kUnbounded: "unbounded",
}


def run_highs(lm: LinearModel, options, ix: IndexSets | None = None, relaxation: tuple[np.ndarray, float] | None = None,
              good_enough_usd: float | None = None, incumbent: np.ndarray | None = None,
              progress=None) -> tuple[RunResult, np.ndarray | None]:
    """Solve `lm` with HiGHS. `options.time_limit_s` bounds the hand-off, the warm start and
    the MIP together, and every HiGHS run returns by it plus highs_model.GRACE_S whatever
    phase HiGHS is in (highs_model.run_until); `relaxation` is an LP solution the caller
    already has, for the warm start. A warm start that is feasible and costs at most
    `good_enough_usd` (the caller's bound plus its gap) is returned without a search,
    which could only confirm it; `good_enough_usd = inf` takes any warm start so, unimproved,
    with the LP's bound (the N-1 loop's first round: it wants a plan's sites and the bound,
    then searches over those sites). `incumbent` is a plan the caller already has (column
    values, e.g. a solved plan that meets this scenario's limits): kept when it is feasible and
    cheaper than the warm start, so the search never ends with less.

    The start (the warm start's plan or the caller's) is held back from HiGHS, and HiGHS's
    feasibility jump is off (HOLD_BACK_START): with any incumbent known before its root's
    cut loop (ours, or one from its own feasibility jump), HiGHS 1.16 spent 40-90 s in the
    first separation round of the world default, against 1-5 s without one; handing it a
    plan made the whole solve several times slower (benchmarks/start.py measures both ways:
    benchmarks/RESULTS.md, "The start"). The held plan still counts: the
    search stops as soon as HiGHS's dual bound proves it within the gap (highs_model's
    MIP interrupt), it is handed to HiGHS once the root is over (HELD_OFFER_SHARE,
    highs_model._offer_held), and the run returns whichever of it and HiGHS's best plan
    costs less. A start that breaks a row is completed by an LP over its integer columns
    (warmstart.complete_start), as HiGHS completed a start it was offered.
    A model of fewer than WARM_START_MIN_COLUMNS columns gets no warm start (HiGHS alone
    is faster there); a caller's `incumbent` is still held as above.
    `progress` (optimizer.solving.progress.ProgressFeed, optional) hears the phases (warm
    start, search) and, from HiGHS's thread, the search's incumbent and bound."""
    started = time.perf_counter()
    deadline = started + options.time_limit_s
    h = to_highs(lm, options.threads)
    version = h.version()
    h.setOptionValue("random_seed", options.seed)
    warm_start, start = "off", None
    takes_any = good_enough_usd is not None and math.isinf(good_enough_usd)  # the N-1 loop's first round

    def result(status, termination, x=None, objective=None, bound=None, notes=()) -> tuple[RunResult, np.ndarray | None]:
        return RunResult(solver="highs", solver_version=version, status=status, termination=termination,
                         objective_usd_per_year=objective, best_bound_usd_per_year=bound, gap=relative_gap(objective, bound),
                         solve_time_s=time.perf_counter() - started, warm_start=warm_start, notes=tuple(notes)), x

    def abandoned(exc: HighsAbandoned, phase: str) -> tuple[RunResult, np.ndarray | None]:
        # HiGHS is still busy in its thread: the best plan seen (its callbacks' or the warm
        # start's) is the answer. In the search, the dual bound its callbacks last stated
        # bounds the model; a bound from the warm start's restricted MIP bounds nothing.
        note = f"time limit: HiGHS did not stop at the deadline ({phase}); its run was abandoned"
        bound = max(exc.dual_bound if phase == "search" else -math.inf, getattr(h, "relaxation_bound", -math.inf))
        bound = bound if np.isfinite(bound) else None
        candidates = [exc.best[0]] if exc.best is not None else []
        candidates += [start] if start is not None else []
        plans = [np.asarray(x, dtype=float) for x in candidates]
        plans = [x for x in plans if x.shape == (lm.n_cols,) and lm.is_feasible(x)]
        if not plans:
            return result("no_solution", note)
        x = min(plans, key=lambda x: float(lm.objective() @ x))
        objective = float(lm.objective() @ x)
        return result("feasible", note, x, objective, min(bound, objective) if bound is not None else None)

    if options.warm_start and ix is not None and relaxation is None and lm.n_cols < WARM_START_MIN_COLUMNS:
        warm_start = f"skipped: a small model ({lm.n_cols:,} columns, under {WARM_START_MIN_COLUMNS:,}), searched by HiGHS alone"
    elif options.warm_start and ix is not None:
        if progress:
            progress.phase("warm start")
        try:
            warm_start, start = rounded_lp_start(h, lm, ix, deadline - time.perf_counter(), options.mip_gap, relaxation,
                                                   improve=not takes_any)
            if start is not None:
                warm_start = f"{warm_start} {'held back' if HOLD_BACK_START else 'offered'}"
        except HighsAbandoned as exc:
            # the instance stays with its thread; the search goes on in a fresh one, from the best plan seen
            if deadline - time.perf_counter() < 2 * GRACE_S:
                warm_start = ("its best plan so far, kept: HiGHS did not stop at the warm start's deadline" if exc.best is not None
                              else "none: HiGHS did not stop at the warm start's deadline")
                return abandoned(exc, "warm start")
            relaxation_bound = getattr(h, "relaxation_bound", -math.inf)
            h = to_highs(lm, options.threads)
            h.setOptionValue("random_seed", options.seed)
            h.relaxation_bound = relaxation_bound
            best = exc.best[0] if exc.best is not None else None
            if best is not None and np.shape(best) == (lm.n_cols,) and lm.is_feasible(np.asarray(best)):
                start = np.asarray(best, dtype=float)
                warm_start = "best plan of the warm start (left behind at its deadline) kept for a fresh HiGHS instance"
            else:
                warm_start = "none: HiGHS did not stop at the warm start's deadline; search on a fresh instance"
    if start is not None and not lm.is_feasible(start):
        # the rounding sets the integer columns and only roughly the continuous ones (HiGHS completed an offered start itself)
        try:
            start = complete_start(h, lm, start, deadline)
        except HighsAbandoned:
            h, start = to_highs(lm, options.threads), None
            h.setOptionValue("random_seed", options.seed)
        warm_start = f"{warm_start}; {'continuous columns completed by an LP' if start is not None else 'dropped: no LP completes it'}"
    if incumbent is not None and np.shape(incumbent) == (lm.n_cols,) and lm.is_feasible(np.asarray(incumbent, dtype=float)):
        incumbent = np.asarray(incumbent, dtype=float)
        if start is None or lm.objective() @ incumbent < lm.objective() @ start:
            start = incumbent
            warm_start = f"the caller's start plan {'held' if HOLD_BACK_START else 'offered'} " \
                         f"(${float(lm.objective() @ start):,.0f}/yr); {warm_start}"
    if start is not None and good_enough_usd is not None and lm.objective() @ start <= good_enough_usd and lm.is_feasible(start):
        if takes_any:  # the LP relaxation's optimum bounds this very model
            lp_bound = getattr(h, "relaxation_bound", -math.inf)
            return result("feasible", "the caller takes the warm start's plan; search skipped", start,
                          float(lm.objective() @ start), lp_bound if np.isfinite(lp_bound) else None)
        return result("feasible", "warm start within the gap of the caller's bound; search skipped", start,
                      float(lm.objective() @ start))
    lp_bound = getattr(h, "relaxation_bound", -math.inf)
    if start is not None and good_enough_usd is None and np.isfinite(lp_bound) and lm.is_feasible(start) \
            and relative_gap(float(lm.objective() @ start), lp_bound) <= options.mip_gap:
        # The warm start's LP relaxation bounds this very model, so the start is already proven within
        # the gap: the search would begin by solving that LP again (85 s of a 124 s solve on 200 x 1,000
        # with the clock, which then ran on to its 300 s limit without a better plan).
        return result("optimal", "the warm start is within the gap of the LP relaxation's bound; search skipped", start,
                      float(lm.objective() @ start), lp_bound)
    if warm_start == "none: the LP relaxation did not finish in time":
        # The search would begin with that same LP: it cannot reach a plan in the time left,
        # and HiGHS's presolve of a model this large overran the limit by minutes when tried.
        return result("no_solution", "time limit: the LP relaxation did not finish")
    h.setOptionValue("mip_rel_gap", options.mip_gap)
    if not HOLD_BACK_START:
        if start is not None:
            h.setSolution(_solution(start))
    else:
        h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
        if start is not None:
            h.held_objective, h.held_gap, h.held_x = float(lm.objective() @ start), options.mip_gap, start
            h.held_offer_at = time.perf_counter() + HELD_OFFER_SHARE * max(deadline - time.perf_counter(), 0.0)
    on_mip = None
    if progress:
        # the warm start's plan and its LP relaxation's optimum (a bound of this very model) are known at once
        progress.update(float(lm.objective() @ start) if start is not None else None,
                        getattr(h, "relaxation_bound", None), phase="search")
        on_mip = progress.update
    try:
        _run_until(h, deadline, on_mip)
        model_status = h.getModelStatus()
        retried = ""
        if model_status == highspy.HighsModelStatus.kSolveError and time.perf_counter() < deadline:
            # HiGHS's presolve can postsolve to a point that breaks a row by more than its
            # tolerance and then gives up ("untransformed violations"; seen on tiny models in
            # tests/test_pruning.py). The model is fine: solve it again without presolve.
            h.setOptionValue("presolve", "off")
            h.clearSolver()
            _run_until(h, deadline, on_mip)
            model_status = h.getModelStatus()
            retried = " (after HiGHS's presolve failed, re-solved without presolve)"
    except HighsAbandoned as exc:
        return abandoned(exc, "search")
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    if has_solution and not _cost_agrees(lm, h, info.objective_function_value) and time.perf_counter() < deadline:
        # HiGHS's objective is not the cost of the plan it returns: seen after the warm start's
        # restricted MIP (tests/test_batch.py, a synthetic scenario at 1.3 x power prices), where
        # the instance then stopped on a plan it valued below its cost. That instance's state is
        # not to be trusted: solve again on a fresh one, without the start.
        h = to_highs(lm, options.threads)
        h.setOptionValue("random_seed", options.seed)
        h.setOptionValue("mip_rel_gap", options.mip_gap)
        warm_start = f"{warm_start}; discarded: HiGHS's objective disagreed with its plan's cost, solved again without it"
        try:
            _run_until(h, deadline, on_mip)
        except HighsAbandoned as exc:
            return abandoned(exc, "search")
        model_status = h.getModelStatus()
        info = h.getInfo()
        has_solution = info.primal_solution_status == 2
    status = _STATUS.get(model_status)
    if status is None or (status == "optimal" and not has_solution):
        status = "feasible" if has_solution else "no_solution"
    x = np.array(h.getSolution().col_value) if has_solution else None
    objective = info.objective_function_value if has_solution else None
    bound = info.mip_dual_bound if lm.integer_columns().size else objective
    bound = max(bound, h.dual_bound) if bound is not None else bound
    termination = h.modelStatusToString(model_status) + retried
    if model_status == highspy.HighsModelStatus.kInterrupt and time.perf_counter() >= deadline:
        termination = "time limit (HiGHS interrupted at the deadline by its callback)" + retried
    if start is not None and status not in ("infeasible", "unbounded") and (objective is None or lm.objective() @ start < objective):
        # the held-back start is the better plan (HOLD_BACK_START)
        x, objective = start, float(lm.objective() @ start)
        status = status if status == "optimal" else "feasible"
    if h.held_proven and objective is not None:
        status, termination = "optimal", "the start held back from HiGHS is within the gap of HiGHS's dual bound" + retried
    bound = bound if bound is not None and np.isfinite(bound) else None
    return result(status, termination, x, objective, min(bound, objective) if bound is not None and objective is not None else bound)


def _cost_agrees(lm: LinearModel, h, objective: float) -> bool:
    """HiGHS's objective equals the model's cost of HiGHS's solution, to 1e-6 relative."""
    cost = float(lm.objective() @ np.array(h.getSolution().col_value))
    return abs(cost - objective) <= 1e-6 * max(1.0, abs(cost))


def _run_until(h, deadline: float, on_mip) -> None:
    """run_until, handed the progress hook only when there is one."""
    if on_mip is None:
        run_until(h, deadline)
    else:
        run_until(h, deadline, on_mip)


def _run_highs(lm, ix, options, relaxation=None, good_enough_usd=None, incumbent=None, progress=None):
    return run_highs(lm, options, ix, relaxation, good_enough_usd, incumbent, progress)


def _run_scip(lm, ix, options, relaxation=None, good_enough_usd=None, incumbent=None):
    return run_ortools(lm, ix, options, engine="scip")


def _run_cp_sat(lm, ix, options, relaxation=None, good_enough_usd=None, incumbent=None):
    return run_ortools(lm, ix, options, engine="sat")


_LP_SOLVER = Capabilities(time_limit=True, mip_gap=True, threads=True, seed=True, mip_bound=True, warm_start=False,
                          infeasible_subset=False)

REGISTRY: dict[str, Backend] = {
    "highs": Backend("highs", "HiGHS (highspy), the matrix handed over directly", replace(
        _LP_SOLVER, warm_start=True, infeasible_subset=True, deadline_watchdog=True), _run_highs, "highspy"),
    "ortools": Backend("ortools", "SCIP as bundled with OR-Tools, by way of Pyomo's MPS", _LP_SOLVER, _run_scip, "ortools"),
    "ortools-sat": Backend("ortools-sat", "OR-Tools CP-SAT, by way of Pyomo's MPS (coefficients scaled to integers)",
                           replace(_LP_SOLVER, exact_continuous=False), _run_cp_sat, "ortools"),
}

CAPABILITIES: dict[str, Capabilities] = {name: backend.capabilities for name, backend in REGISTRY.items()}  # cli.py reads this


def run_backend(lm: LinearModel, ix: IndexSets, options, relaxation=None, good_enough_usd=None, incumbent=None,
                progress=None) -> tuple[RunResult, np.ndarray | None]:
    """Solve `lm` with the back-end `options.solver` names (looked up in REGISTRY):
    (result, column values or None). Options it does not honour are refused or noted; a
    back-end without warm starts ignores `incumbent` (and says so). `progress` (a
    ProgressFeed, optional) is handed to a back-end that reports progress (HiGHS); the
    others are reported as one `search` phase."""
    backend = get_backend(options.solver)
    notes = unhonoured(backend, options)
    if incumbent is not None and not backend.capabilities.warm_start:
        notes = [*notes, f"the start plan was not offered: '{backend.name}' takes no warm start"]
    if progress and backend.runner is _run_highs:
        result, x = backend.runner(lm, ix, options, relaxation, good_enough_usd, incumbent, progress=progress)
    else:
        if progress:
            progress.phase("search")
        result, x = backend.runner(lm, ix, options, relaxation, good_enough_usd, incumbent)
    return (replace(result, notes=result.notes + tuple(notes)) if notes else result), x
