"""LP relaxations that hold the rows of lazy families back until a solution breaks them.

Some families only tighten the LP relaxation: in the MIP other rows imply them (a family
registered with `lp_lazy=True`, optimizer.model.families). `share_needs_open`, one row
per serving pair, is one. On the synthetic 500 sites x 3,000 regions world (65,768
candidate pairs, 2026-12-05) the candidate LP took 13.3 s with its rows in, 0.8 s with
them held back, and 3.9 s in all to reach the same optimum when the rows its solutions
broke were put back and the LP solved again from the last basis (benchmarks/RESULTS.md
"Synthetic scales" measures the whole path).

`LazyRows.hold` makes those rows free in the HiGHS instance (bounds -inf..inf, so they keep
their numbers and every other row's dual is unchanged); `solve_lazily` solves, puts back
the rows the solution breaks, with the rest of their family's `lp_lazy_group` (a site's
links: put back one at a time, the LP moved its load to the next fractionally open site
for 30 re-solves), and solves again from the last basis (dual simplex: a row put back
breaks primal, not dual, feasibility) until none is broken. The result is the LP
relaxation of the whole model: every row holds at the end. If the deadline comes first,
`pending` is set: the last solution is then the optimum of a relaxation of that LP, so its
objective is still a valid lower bound, but its point may break held rows. `release` puts
every held row back (before the instance is used for the MIP).
"""

from __future__ import annotations

import logging
import time

import highspy
import numpy as np

from dcplace.optimizer.model.families import REGISTRY
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import run_until

log = logging.getLogger(__name__)

BROKEN_TOLERANCE = 1e-7  # HiGHS's primal feasibility tolerance: a row broken by less holds for HiGHS too


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

    def add_held(self, family: str, keys: list, index: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Rows of lazy `family` (with `keys`) that the caller appended to the instance free
        (bounds -inf..inf) at row numbers `index`; their own bounds are `lower`..`upper`."""
        self.index = np.concatenate([self.index, np.asarray(index, dtype=np.int32)])
        self.group = np.concatenate([self.group, self._groups(family, keys)])
        self.lower, self.upper = np.concatenate([self.lower, lower]), np.concatenate([self.upper, upper])
        self.held = np.concatenate([self.held, np.ones(len(index), dtype=bool)])
        self.back = np.concatenate([self.back, np.zeros(len(index), dtype=bool)])

    def restore_broken(self, h: highspy.Highs) -> int:
        """Put back the held rows that the solution in `h` breaks, with the rest of their groups; how many."""
        held = np.flatnonzero(self.held)
        if not held.size:
            return 0
        activity = np.asarray(h.getSolution().row_value)[self.index[held]]
        broken = (activity > self.upper[held] + BROKEN_TOLERANCE) | (activity < self.lower[held] - BROKEN_TOLERANCE)
        if not broken.any():
            return 0
        back = held[np.isin(self.group[held], np.unique(self.group[held[broken]]))]
        _set_bounds(h, self.index[back], self.lower[back], self.upper[back])
        self.held[back] = False
        self.back[back] = True
        self.restored += int(back.size)
        return int(back.size)

    def release(self, h: highspy.Highs) -> None:
        """Put every held row back; the next `hold` holds every lazy row again."""
        held = np.flatnonzero(self.held)
        if held.size:
            _set_bounds(h, self.index[held], self.lower[held], self.upper[held])
        self.held[:] = False
        self.back[:] = False


def solve_lazily(h: highspy.Highs, lazy: LazyRows, deadline: float) -> bool:
    """Solve the LP in `h` (its lazy rows held) until no held row is broken or `deadline`;
    True if the last solve reached an optimum (check `lazy.pending` for broken rows left).
    Raises HighsAbandoned as run_until does. HiGHS's presolve and simplex strategy are
    as they were when it returns."""
    lazy.hold(h)
    presolve, strategy = (_option(h, name) for name in ("presolve", "simplex_strategy"))
    try:
        while True:
            started = time.perf_counter()
            run_until(h, deadline)
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                return False
            back = lazy.restore_broken(h)
            log.debug("LP %.2f s; %d held rows put back", time.perf_counter() - started, back)
            lazy.pending = back > 0
            if not lazy.pending or time.perf_counter() >= deadline:
                return True
            h.setOptionValue("presolve", "off")  # keep the basis: rows put back only break primal feasibility
            h.setOptionValue("simplex_strategy", 1)  # dual simplex
    finally:
        h.setOptionValue("presolve", presolve)
        h.setOptionValue("simplex_strategy", strategy)


def _option(h: highspy.Highs, name: str):
    value = h.getOptionValue(name)
    return value[1] if isinstance(value, tuple) else value  # highspy returns (status, value)


def _set_bounds(h: highspy.Highs, index: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
    h.changeRowsBounds(len(index), np.ascontiguousarray(index, dtype=np.int32), np.ascontiguousarray(lower, dtype=np.float64),
                       np.ascontiguousarray(upper, dtype=np.float64))
