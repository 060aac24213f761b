"""LP relaxations that hold the rows of lazy families back until a solution breaks them.

Some families only tighten the LP relaxation: in the MIP other rows imply them (a family
registered with `lp_lazy=True`, optimizer.model.families). `share_needs_open`, one row
per serving pair, is one. On the synthetic 500 sites x 3,000 regions world (65,768
candidate pairs, 2026-12-05) the candidate LP took 13.3 s with its rows in, 0.8 s with
them held back, and 3.9 s in all to reach the same optimum when the rows its solutions
broke were put back and the LP solved again from the last basis (benchmarks/RESULTS.md
"Synthetic scales" measures the whole path).

`LazyRows.hold` makes those rows free in the HiGHS instance (bounds -inf..inf: every row
keeps its number, and a held row's dual is 0); `solve_lazily` solves, puts back
the rows the solution breaks, with the rest of their family's `lp_lazy_group` (a site's
links: put back one at a time, the LP moved its load to the next fractionally open site
for 30 re-solves), and solves again from the last basis (dual simplex: a row put back
breaks primal, not dual, feasibility) until none is broken. The result is the LP
relaxation of the whole model: every row holds at the end. It returns a `Relaxed`: the
solution, duals and objective of the last solve that reached an optimum (a copy: putting
rows back resets what HiGHS holds). If the deadline comes first, `pending` is set: that
solution is then the optimum of a relaxation of the LP, so its objective is still a valid
lower bound, but its point may break held rows. `release` puts every held row back
(before the instance is used for the MIP).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import highspy
import numpy as np

from dcplace.optimizer.model.families import REGISTRY, flagged
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import HighsAbandoned, run_until

log = logging.getLogger(__name__)

BROKEN_TOLERANCE = 1e-7  # HiGHS's primal feasibility tolerance: a row broken by less holds for HiGHS too


@dataclass(frozen=True)
class Relaxed:
    """The last optimum of a lazily solved LP (see the module docstring)."""

    col_value: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray
    objective: float
    pending: bool  # the deadline left held rows that this solution breaks: the LP of a relaxation
    iterations: int  # simplex iterations of all its solves


class LazyRows:
    """The rows of `lm`'s lazy families while an LP relaxation is solved in a HiGHS instance."""

    def __init__(self, lm: LinearModel):
        self._group_ids: dict = {}
        index, groups = [], []
        for name, rows in lm.families.items():
            family = REGISTRY.get(name.split("@")[0])  # name@period in a multi-period model (LinearModel.append)
            if family is not None and family.lp_lazy:
                index.append(np.arange(rows.start, rows.start + len(rows.keys), dtype=np.int32))
                groups.append(self._groups(name, rows.keys))
        self.index = np.concatenate(index) if index else np.zeros(0, dtype=np.int32)
        self.group = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
        lower, upper = lm.row_bounds()
        self.lower, self.upper = lower[self.index], upper[self.index]
        self.held = np.zeros(len(self.index), dtype=bool)
        self.back = np.zeros(len(self.index), dtype=bool)  # put back by restore_broken: stays in until release
        self.pending = False  # the last solve broke held rows and the deadline came before they were solved
        self.restored = 0  # rows put back because a solution broke them (or one of their group)

    def _groups(self, family: str, keys: list) -> np.ndarray:
        """A group number per row of `family` (its lp_lazy_group of the key; one group per row without)."""
        grouping = REGISTRY[family.split("@")[0]].lp_lazy_group
        ids = self._group_ids
        if grouping is None:
            return np.array([ids.setdefault((family, "row", key), len(ids)) for key in keys], dtype=np.int64)
        return np.array([ids.setdefault((family, grouping(key)), len(ids)) for key in keys], dtype=np.int64)

    def hold(self, h: highspy.Highs) -> None:
        """Make every lazy row free in `h` that is neither held nor put back since the last release."""
        free = np.flatnonzero(~self.held & ~self.back)
        if free.size:
            _set_bounds(h, self.index[free], np.full(free.size, -highspy.kHighsInf), np.full(free.size, highspy.kHighsInf))
            self.held[free] = True

    def add_held(self, h: highspy.Highs, family: str, keys: list, index: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Rows of lazy `family` (with `keys`) that the caller appended to `h` free (bounds
        -inf..inf) at row numbers `index`; their own bounds are `lower`..`upper`. Rows of a
        group already put back are put back at once (a site's links go together)."""
        groups = self._groups(family, keys)
        joins = np.isin(groups, np.unique(self.group[self.back]))
        self.index = np.concatenate([self.index, np.asarray(index, dtype=np.int32)])
        self.group = np.concatenate([self.group, groups])
        self.lower, self.upper = np.concatenate([self.lower, lower]), np.concatenate([self.upper, upper])
        self.held = np.concatenate([self.held, ~joins])
        self.back = np.concatenate([self.back, joins])
        if joins.any():
            _set_bounds(h, np.asarray(index, dtype=np.int32)[joins], np.asarray(lower)[joins], np.asarray(upper)[joins])

    def broken(self, row_value: np.ndarray) -> np.ndarray:
        """Positions (in self.index) of the held rows that `row_value` breaks, with the rest of their groups."""
        held = np.flatnonzero(self.held)
        if not held.size:
            return held
        activity = row_value[self.index[held]]
        broken = (activity > self.upper[held] + BROKEN_TOLERANCE) | (activity < self.lower[held] - BROKEN_TOLERANCE)
        if not broken.any():
            return held[:0]
        return held[np.isin(self.group[held], np.unique(self.group[held[broken]]))]

    def put_back(self, h: highspy.Highs, rows: np.ndarray) -> None:
        """Put back the held rows at positions `rows` (from `broken`)."""
        _set_bounds(h, self.index[rows], self.lower[rows], self.upper[rows])
        self.held[rows] = False
        self.back[rows] = True
        self.restored += int(rows.size)

    def release(self, h: highspy.Highs) -> None:
        """Put every held row back; the next `hold` holds every lazy row again."""
        held = np.flatnonzero(self.held)
        if held.size:
            _set_bounds(h, self.index[held], self.lower[held], self.upper[held])
        self.held[:] = False
        self.back[:] = False


N1_HOLD_MIN_ROWS = 40_000  # with N-1 rows, lazy rows are held back only when at least this many


def lazy_rows(lm: LinearModel) -> LazyRows | None:
    """The lazy rows of `lm` to hold back in its LP relaxations, or None to solve with every row
    in. With N-1's aggregate and cut rows most of each solve is theirs and every re-solve after
    rows are put back costs nearly a whole one, so they are held back only where there are many
    (N1_HOLD_MIN_ROWS), as on large candidate models. Measured 2026-12-06: the default world with
    chat and reasoning survivable (13,978 rows of share_needs_open) took 27 s held back and 15 s
    with every row in; the synthetic 500 x 3,000 world's N-1 model (65,768 candidate pairs) did
    not finish its warm start's LPs in a 120 s solve with every row in, and held back it did."""
    lazy = LazyRows(lm)
    n1 = flagged("n1")  # N-1's aggregate and cut rows (optimizer.model.failover, registered n1=True)
    if len(lazy.index) < N1_HOLD_MIN_ROWS and any(name.split("@")[0] in n1 for name in lm.families):
        return None
    return lazy


def solve_lazily(h: highspy.Highs, lazy: LazyRows, deadline: float) -> Relaxed | None:
    """Solve the LP in `h` (its lazy rows held) until no held row is broken or `deadline`:
    the last optimum reached (None if none was). Raises HighsAbandoned as run_until does
    (the instance is then left to HiGHS's thread, untouched). Otherwise HiGHS's presolve
    and simplex strategy are as they were when it returns."""
    lazy.hold(h)
    lazy.pending = False
    presolve, strategy = (_option(h, name) for name in ("presolve", "simplex_strategy"))
    last, iterations, abandoned = None, 0, False
    try:
        while True:
            started = time.perf_counter()
            try:
                run_until(h, deadline)
            except HighsAbandoned:
                abandoned = True
                raise
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                if h.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
                    return None  # with the rows put back the LP itself is infeasible, whatever the relaxation said
                if last is not None:
                    lazy.pending = True  # the re-solve ran out of time: the last optimum, rows broken
                    last = Relaxed(last.col_value, last.row_dual, last.col_dual, last.objective, True, iterations)
                return last
            solution, info = h.getSolution(), h.getInfo()
            iterations += max(info.simplex_iteration_count, 0)
            rows = lazy.broken(np.asarray(solution.row_value))
            lazy.pending = bool(rows.size)
            last = Relaxed(np.array(solution.col_value), np.array(solution.row_dual), np.array(solution.col_dual),
                           info.objective_function_value, lazy.pending, iterations)
            log.debug("LP %.2f s; %d held rows broken or in their groups", time.perf_counter() - started, rows.size)
            if not lazy.pending or time.perf_counter() >= deadline:
                return last  # bounds untouched: h still holds this optimum
            lazy.put_back(h, rows)
            h.setOptionValue("presolve", "off")  # keep the basis: rows put back only break primal feasibility
            h.setOptionValue("simplex_strategy", 1)  # dual simplex
    finally:
        if not abandoned:  # an abandoned instance is still HiGHS's: nothing may touch it
            h.setOptionValue("presolve", presolve)
            h.setOptionValue("simplex_strategy", strategy)


def _option(h: highspy.Highs, name: str):
    value = h.getOptionValue(name)
    return value[1] if isinstance(value, tuple) else value  # highspy returns (status, value)


def _set_bounds(h: highspy.Highs, index: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
    h.changeRowsBounds(len(index), np.ascontiguousarray(index, dtype=np.int32), np.ascontiguousarray(lower, dtype=np.float64),
                       np.ascontiguousarray(upper, dtype=np.float64))
