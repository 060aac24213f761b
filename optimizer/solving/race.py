"""The full model raced by two engines: HiGHS here, OR-Tools' SCIP in a child process.

Neither engine dominates on facility-location MIPs, and which one wins cannot be told from
the model beforehand (docs/solvers.md has the measurements). With two cores the solve
therefore runs both on the same full matrix, one thread each: the first to prove the asked
gap (or infeasibility) ends the other, and otherwise the plan is the cheaper of the two and
the bound the higher of their two proven bounds, both of the same full model. What ran and
who won is recorded in the plan (`solve.race`).

A race runs when (`race_skipped` says why not otherwise):
  * SolveOptions.race is on and the solver is `highs` (an explicit `ortools` runs alone);
  * the machine has at least RACE_MIN_CORES cores;
  * the model is not an N-1 model (its single-site losses are generated lazily: the model
    SCIP would get is not the full model) and not a search over fewer pairs than the full model
    when that model is over RACE_MAX_PAIRS eligible serving pairs (SCIP would need it whole);
  * the full model has at least RACE_MIN_COLUMNS columns (below that HiGHS alone proves the
    gap in well under a second: OR-Library cap41-cap134, and starting a process costs more).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace

import numpy as np

from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.backends import RunResult, gap_status, relative_gap
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solvers.scip_racer import ScipAnswer, ScipRacer
from dcplace.optimizer.solvers.warmstart import complete_start
from dcplace.optimizer.solving.budget import Budget

RACE_MIN_CORES = 2
RACE_MIN_COLUMNS = 5_000  # as backends.WARM_START_MIN_COLUMNS: below it HiGHS alone is done before a process starts
RACE_MAX_PAIRS = 400_000  # eligible serving pairs; above, the full model is not built for SCIP (memory, build time)
COMPLETE_MIN_S = 2.0  # an LP completing SCIP's plan (it broke a row by more than our tolerance) gets at least this long
SCIP = "ortools-scip"


def race_skipped(options, ix: IndexSets, n1: bool, full_columns: int | None = None) -> str | None:
    """Why this solve runs no race (None: it races)."""
    if not options.race:
        return "off (SolveOptions.race)"
    if options.solver != "highs":
        return f"off: the solver '{options.solver}' was asked for"
    if (os.cpu_count() or 1) < RACE_MIN_CORES:
        return f"off: {os.cpu_count()} core(s), a race needs {RACE_MIN_CORES}"
    if n1:
        return "off: N-1 losses are generated lazily, so no full model exists to race on"
    if ix.eligible_pairs() > RACE_MAX_PAIRS:
        return f"off: {ix.eligible_pairs():,} eligible serving pairs, over the {RACE_MAX_PAIRS:,} a full model is built for"
    if full_columns is not None and full_columns < RACE_MIN_COLUMNS:
        return f"off: a small model ({full_columns:,} columns, under {RACE_MIN_COLUMNS:,}), solved by HiGHS alone"
    return None


class Race:
    """SCIP on `lm` (the full model) from now until the budget's deadline, watched from a
    thread: `stop_event` is set the moment SCIP ends with a proof (the asked gap reached, or
    infeasibility), which stops every HiGHS instance made under highs_model.stopped_by(it)."""

    def __init__(self, lm: LinearModel, budget: Budget, mip_gap: float, seed: int):
        self.lm, self.mip_gap = lm, mip_gap
        self.stop_event = threading.Event()
        self.racer = ScipRacer(lm, budget.deadline, mip_gap, seed).start()
        self.answer: ScipAnswer | None = None
        self._watcher = threading.Thread(target=self._watch, name="scip-race", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        """HiGHS is stopped only by a proof that stands: infeasibility, or a plan that meets every
        row of the model to its tolerance and is within the gap of SCIP's bound by our definition.
        A plan that needs completing by an LP is completed after the search, not here: HiGHS
        instances are not to be made from a second thread while one runs (highs_model.use_threads)."""
        self.answer = answer = self.racer.answer()
        if answer.status == "infeasible":
            self.stop_event.set()
        elif answer.status == "optimal" and answer.x is not None and self.lm.is_feasible(answer.x):
            gap = relative_gap(float(self.lm.objective() @ answer.x), answer.best_bound_usd_per_year)
            if gap_status(gap, self.mip_gap) == "optimal":
                self.stop_event.set()

    def proven(self) -> bool:
        return self.stop_event.is_set()

    def finish(self, highs_proven: bool) -> ScipAnswer:
        """SCIP's answer: ended at once when HiGHS has proven the gap, else awaited (to the deadline)."""
        if highs_proven and not self.racer.done():
            self.racer.stop()
        self._watcher.join()
        return self.answer


def transfer_by_keys(x: np.ndarray, source: LinearModel, target: LinearModel) -> np.ndarray:
    """Column values of `source` carried to the same variables (block and key) of `target`;
    variables `source` lacks are 0 (a model over candidate pairs into the full model)."""
    out = np.zeros(target.n_cols)
    for name, block in source.blocks.items():
        into = target.blocks.get(name)
        if into is None:
            continue
        for i, key in enumerate(block.keys):
            j = into.pos.get(key)
            if j is not None:
                out[into.start + j] = x[block.start + i]
    return out


def scip_plan(lm: LinearModel, answer: ScipAnswer, deadline: float) -> tuple[np.ndarray | None, str]:
    """SCIP's plan as column values that meet every row of `lm` to its tolerance, and how it
    was taken: as returned, completed by an LP over its integer columns (SCIP's tolerances
    differ from ours), or dropped."""
    if answer.x is None:
        return None, "no plan"
    if lm.is_feasible(answer.x):
        return answer.x, "as returned"
    completed = complete_start(to_highs(lm), lm, answer.x, max(deadline, time.perf_counter() + COMPLETE_MIN_S))
    return (completed, "completed by an LP over its integer columns") if completed is not None else (None, "dropped: broke a row")


def combine(lm: LinearModel, highs: RunResult, x_highs: np.ndarray | None, answer: ScipAnswer, mip_gap: float,
            deadline: float) -> tuple[RunResult, np.ndarray | None, dict]:
    """One result from the two racers on the same full model `lm`: the cheaper plan, the
    higher proven bound, and the status and gap they make together; with the race's record."""
    x_scip, taken = scip_plan(lm, answer, deadline)
    plans = []
    if highs.has_plan and x_highs is not None:
        plans.append(("highs", x_highs, float(lm.objective() @ x_highs)))
    if x_scip is not None:
        plans.append((SCIP, x_scip, float(lm.objective() @ x_scip)))
    bounds = {name: b for name, b in (("highs", highs.best_bound_usd_per_year), (SCIP, answer.best_bound_usd_per_year))
              if b is not None and np.isfinite(b)}
    record = {
        "engines": ["highs", SCIP],
        "highs": {"status": highs.status, "objective_usd_per_year": highs.objective_usd_per_year,
                  "best_bound_usd_per_year": highs.best_bound_usd_per_year, "seconds": round(highs.solve_time_s, 3)},
        SCIP: {"status": answer.status, "termination": answer.termination, "objective_usd_per_year": answer.objective_usd_per_year,
               "best_bound_usd_per_year": answer.best_bound_usd_per_year, "seconds": round(answer.seconds, 3),
               "version": answer.version, "plan": taken},
    }
    if not plans:
        infeasible = highs.status == "infeasible" or answer.status == "infeasible"
        record.update(winner=("highs" if highs.status == "infeasible" else SCIP) if infeasible else None, bound_from=None)
        if answer.status == "infeasible" and highs.status != "infeasible":
            return replace(highs, solver=SCIP, solver_version=answer.version, status="infeasible",
                           termination=f"{answer.termination}: infeasibility proven by SCIP"), None, record
        return highs, None, record
    winner, x, objective = min(plans, key=lambda plan: plan[2])
    bound_from = max(bounds, key=bounds.get) if bounds else None
    bound = min(bounds[bound_from], objective) if bound_from else None
    gap = relative_gap(objective, bound)
    status = gap_status(gap, mip_gap)
    record.update(winner=winner, bound_from=bound_from)
    if winner == "highs":
        termination = highs.termination
    else:
        termination = f"{answer.termination} (plan {taken})"
    termination += f"; raced: plan from {winner}, bound from {bound_from or 'neither'}"
    return RunResult(solver=winner, solver_version=highs.solver_version if winner == "highs" else answer.version, status=status,
                     termination=termination, objective_usd_per_year=objective, best_bound_usd_per_year=bound, gap=gap,
                     solve_time_s=max(highs.solve_time_s, answer.seconds), warm_start=highs.warm_start, notes=highs.notes), x, record
