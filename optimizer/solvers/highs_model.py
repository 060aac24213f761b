"""The LinearModel handed to highspy as one sparse matrix (the default path)."""

from __future__ import annotations

import highspy
import numpy as np

from dcplace.optimizer.model.linear import LinearModel

class QuietHighs(highspy.Highs):
    """highspy.Highs without the banner its constructor prints: the constructor's first
    HiGHS call (enabling callbacks) already logs unless output is off before it."""

    def enableCallbacks(self):
        self.setOptionValue("output_flag", False)
        return super().enableCallbacks()


_scheduler_threads: int | None = None


def use_threads(threads: int) -> None:
    """HiGHS sizes its task scheduler once per process thread and then rejects any other
    `threads` value (HiGHS issue #715, HiGHS.jl #130); reset it when the count changes, and
    on first use, since a notebook may already have run highspy with its default count (the
    solve then ended with status 'Not Set' and no plan)."""
    global _scheduler_threads
    if _scheduler_threads != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _scheduler_threads = threads


def to_highs(lm: LinearModel, threads: int = 1) -> highspy.Highs:
    """A silent highspy instance holding the model (integrality included)."""
    use_threads(threads)
    h = QuietHighs()
    h.setOptionValue("threads", threads)  # the first run sizes HiGHS's thread pool
    lp = highspy.HighsLp()
    lp.num_col_ = lm.n_cols
    lp.num_row_ = lm.n_rows
    lp.col_cost_ = lm.objective()
    lp.col_lower_, lp.col_upper_ = lm.bounds()
    lp.row_lower_, lp.row_upper_ = lm.row_bounds()
    start, index, value = lm.matrix()
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = start
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    integrality = np.full(lm.n_cols, highspy.HighsVarType.kContinuous)
    integrality[lm.integer_columns()] = highspy.HighsVarType.kInteger
    lp.integrality_ = list(integrality)
    h.passModel(lp)
    return h


