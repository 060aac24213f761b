"""One small service for the layers above to solve a LinearModel without touching the engine.

The studies (prices of limits, site worth, near-optimal alternatives) and the diagnosis
solve models of their own beside the main solve: an LP relaxation, the plan LP with its
binaries fixed, the elastic MIP, the alternatives' MIP with a cost cap and no-good rows.
They do it here, so that highspy is imported only under optimizer/solvers/
(tests/test_layers.py):

    result = solve_lp(lm, relax=True)                  # one solve: status, objective, values, duals
    session = LpSession(lm, col_lower=lo, col_upper=up, relax=True)
    session.solve(); session.change_row_bounds(row, lo, up); session.solve()  # warm from the last basis

`solve(deadline)` runs under run_until (highs_model: HiGHS stops at the deadline wherever
it checks, and HighsAbandoned is raised when it does not); without a deadline HiGHS runs
to its end in the caller's thread. A session whose run was abandoned is never used again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import highspy
import numpy as np

from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import run_until, to_highs

FEASIBLE = 2  # HiGHS's kSolutionStatusFeasible: the run holds a primal solution


@dataclass
class LpResult:
    """What one solve gave. `status` is HiGHS's model status by name ("kOptimal", "kInfeasible",
    "kTimeLimit", ...); `x` (column values) is None when the run holds no primal solution; the
    duals are those of the last LP HiGHS solved (of an LP: its optimum's)."""

    status: str
    objective: float
    mip_dual_bound: float
    x: np.ndarray | None
    row_value: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray

    @property
    def optimal(self) -> bool:
        return self.status == "kOptimal"

    @property
    def infeasible(self) -> bool:
        return self.status == "kInfeasible"


class LpSession:
    """One model held by the engine, to solve, change and solve again (warm from its last basis).

    `relax`: integer columns are solved as continuous (the LP relaxation); `col_lower` /
    `col_upper`: column bounds in place of the model's; `options`: HiGHS options by name."""

    def __init__(self, lm: LinearModel, threads: int = 1, relax: bool = False, col_lower: np.ndarray | None = None,
                 col_upper: np.ndarray | None = None, options: dict | None = None):
        self.lm = lm
        h = to_highs(lm, threads)
        if col_lower is not None or col_upper is not None:
            lower, upper = lm.bounds()
            lower = lower if col_lower is None else col_lower
            upper = upper if col_upper is None else col_upper
            h.changeColsBounds(lm.n_cols, np.arange(lm.n_cols, dtype=np.int32), np.asarray(lower, dtype=float),
                               np.asarray(upper, dtype=float))
        if relax:
            cols = lm.integer_columns()
            if len(cols):
                h.changeColsIntegrality(len(cols), cols, np.full(len(cols), highspy.HighsVarType.kContinuous))
        for name, value in (options or {}).items():
            h.setOptionValue(name, value)
        self._h: highspy.Highs | None = h
        self.version: str = h.version()
        self.last: LpResult | None = None

    @property
    def usable(self) -> bool:
        """False once a run was abandoned at its deadline (the instance is left to finish on its own)."""
        return self._h is not None

    def _engine(self) -> highspy.Highs:
        if self._h is None:
            raise RuntimeError("this LpSession's last run was abandoned at its deadline; it is not used again")
        return self._h

    def solve(self, deadline: float | None = None) -> LpResult:
        """Solve (by `deadline`, a time.perf_counter() instant, if given); raises HighsAbandoned
        (optimizer.solvers.highs_model) when HiGHS did not stop in time."""
        h = self._engine()
        if deadline is None:
            h.run()
        else:
            try:
                run_until(h, deadline)
            except BaseException:
                self._h = None
                raise
        info = h.getInfo()
        solution = h.getSolution()
        found = info.primal_solution_status == FEASIBLE
        self.last = LpResult(
            status=str(h.getModelStatus()).split(".")[-1],
            objective=float(info.objective_function_value),
            mip_dual_bound=float(info.mip_dual_bound),
            x=np.array(solution.col_value) if found else None,
            row_value=np.asarray(solution.row_value),
            row_dual=np.asarray(solution.row_dual),
            col_dual=np.asarray(solution.col_dual),
        )
        return self.last

    def change_row_bounds(self, row: int, lower: float, upper: float) -> None:
        self._engine().changeRowBounds(row, lower, upper)

    def add_row(self, lower: float, upper: float, cols: np.ndarray, coefs: np.ndarray) -> None:
        """A row lower <= coefs . x[cols] <= upper (either side may be +-inf)."""
        self._engine().addRow(_inf(lower), _inf(upper), len(cols), np.asarray(cols, dtype=np.int32), np.asarray(coefs, dtype=float))

    def change_costs(self, costs: np.ndarray) -> None:
        """Every column's objective coefficient."""
        self._engine().changeColsCost(self.lm.n_cols, np.arange(self.lm.n_cols, dtype=np.int32), costs)

    def set_start(self, x: np.ndarray) -> None:
        """Column values for the next run to start from (a MIP's first incumbent)."""
        sol = highspy.HighsSolution()
        sol.col_value = list(x)
        sol.value_valid = True
        self._engine().setSolution(sol)

    def infeasible_rows(self) -> list[int] | None:
        """Row indices of HiGHS's irreducible infeasible subset after a solve found the model
        infeasible; None when this HiGHS cannot give one or gave none valid."""
        if not iis_available():
            return None
        status, iis = self._engine().getIis()
        if status == highspy.HighsStatus.kError or not iis.valid_:
            return None
        return list(iis.row_index_)


def _inf(bound: float) -> float:
    return highspy.kHighsInf if bound == math.inf else -highspy.kHighsInf if bound == -math.inf else bound


def iis_available() -> bool:
    """Whether the installed HiGHS gives an irreducible infeasible subset."""
    return hasattr(highspy.Highs, "getIis")


def solve_lp(lm: LinearModel, deadline: float | None = None, relax: bool = True, threads: int = 1,
             col_lower: np.ndarray | None = None, col_upper: np.ndarray | None = None,
             options: dict | None = None) -> LpResult:
    """Solve `lm` once (its LP relaxation unless relax=False) and return what the solve gave."""
    return LpSession(lm, threads, relax, col_lower, col_upper, options).solve(deadline)


__all__ = ["LpResult", "LpSession", "iis_available", "solve_lp"]
