"""The LinearModel handed to highspy as one sparse matrix (the default path), and HiGHS
runs that end at a deadline whatever HiGHS is doing.

HiGHS compares its `time_limit` with its clock only at certain points. Between them it can
run for minutes: on the world default with a carbon cap at 60 % of the uncapped plan's
emissions, the root node's line-search rounding heuristic
(HighsPrimalHeuristics::linesearchRounding, seen with gdb) ran 100-190 s without a check,
so a 20 s limit ended after 107-199 s. `run_until` therefore runs HiGHS in a worker
thread: the interrupt callbacks (simplex, IPM, MIP) stop it at the deadline at any point
HiGHS checks, every improving MIP plan is copied as it is found, and if HiGHS has not
returned GRACE_S after the deadline the run is left to finish in its (daemon) thread and
`HighsAbandoned` is raised with the best plan seen. An abandoned instance is never used
again; it stops at its next check (its callbacks interrupt it) and is then freed.
"""

from __future__ import annotations

import atexit
import math
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

import highspy
import numpy as np

from dcplace.optimizer.model.linear import LinearModel

GRACE_S = 1.0  # after the deadline, how long a HiGHS run may take to reach its next check
# A race (optimizer.solving.race) sets this event when another engine has proven the answer: every
# HiGHS instance made under `stopped_by(event)` then stops at its next check, as at its deadline.
_stop_event: ContextVar["threading.Event | None"] = ContextVar("dcplace_highs_stop", default=None)


@contextmanager
def stopped_by(event: threading.Event) -> Iterator[None]:
    """HiGHS instances made (to_highs) inside this block stop as soon as `event` is set."""
    token = _stop_event.set(event)
    try:
        yield
    finally:
        _stop_event.reset(token)


class HighsAbandoned(Exception):
    """HiGHS did not return by its deadline plus GRACE_S; `best` is the best plan its
    callbacks saw: (column values, objective, dual bound), or None; `dual_bound` the
    best MIP dual bound its callbacks stated."""

    def __init__(self, best: tuple[np.ndarray, float, float] | None, seconds_over: float, dual_bound: float = -math.inf):
        self.best = best
        self.dual_bound = dual_bound  # the run's best MIP dual bound seen (-inf: none)
        super().__init__(f"HiGHS did not stop within {seconds_over:.1f} s of its deadline; left running in the background")


class QuietHighs(highspy.Highs):
    """highspy.Highs without the banner its constructor prints: the constructor's first
    HiGHS call (enabling callbacks) already logs unless output is off before it."""

    deadline: float = math.inf  # time.perf_counter() value at which the interrupt callbacks stop the run
    best: tuple[np.ndarray, float, float] | None = None  # last improving MIP plan of the current run
    dual_bound: float = -math.inf  # the current run's MIP dual bound, as its last MIP callback stated it
    relaxation_bound: float = -math.inf  # the LP relaxation's optimum, when the warm start solved it
    on_mip: "Callable[[float, float], None] | None" = None  # progress: (incumbent, dual bound), from HiGHS's thread
    held_objective: float = math.inf  # a plan the caller holds back from HiGHS (backends.run_highs): its cost
    held_gap: float = 0.0  # ...and the gap within which HiGHS's dual bound proves it: the search then stops
    held_proven: bool = False  # set from HiGHS's thread when the bound proved the held plan
    held_x: "np.ndarray | None" = None  # the held plan's column values, handed to HiGHS at held_offer_at
    held_offer_at: float = math.inf  # time.perf_counter() value from which the held plan is handed over
    held_offered: bool = False
    stop_event: "threading.Event | None" = None  # set by a race the other engine won: stop as at the deadline
    _watched: bool = False

    def should_stop(self) -> bool:
        return time.perf_counter() >= self.deadline or (self.stop_event is not None and self.stop_event.is_set())

    def enableCallbacks(self):
        self.setOptionValue("output_flag", False)
        return super().enableCallbacks()

    def watch(self) -> None:
        """Subscribe the deadline interrupt and the incumbent copy (once per instance)."""
        if self._watched:
            return
        self._watched = True
        for callback in (self.cbSimplexInterrupt, self.cbIpmInterrupt):
            callback.subscribe(_interrupt_at_deadline, self)
        self.cbMipInterrupt.subscribe(_interrupt_mip, self)
        self.cbMipUserSolution.subscribe(_offer_held, self)
        self.cbMipImprovingSolution.subscribe(_keep_incumbent, self)


def _interrupt_at_deadline(e) -> None:
    # set both ways: HiGHS keeps the flag between runs of an instance, so an interrupt of
    # the warm start's polish at its own deadline would otherwise stop the search at once
    e.interrupt(e.user_data.should_stop())


def _interrupt_mip(e) -> None:
    """The deadline, or a held-back plan within the gap of the dual bound: either ends the search."""
    _keep_dual_bound(e)
    h = e.user_data
    if h.held_objective < math.inf and h.held_objective - h.dual_bound <= h.held_gap * abs(h.held_objective):
        h.held_proven = True
    e.interrupt(h.should_stop() or h.held_proven)


def _offer_held(e) -> None:
    """Hand HiGHS the held plan once its root is over (a node counted) or at held_offer_at."""
    h = e.user_data
    if h.held_x is None or h.held_offered:
        return
    if e.data_out.mip_node_count > 0 or time.perf_counter() >= h.held_offer_at:
        e.data_in.setSolution(np.asarray(h.held_x, dtype=np.float64))
        h.held_offered = True


def _keep_dual_bound(e) -> None:
    bound = float(e.data_out.mip_dual_bound)
    if math.isfinite(bound):
        e.user_data.dual_bound = max(e.user_data.dual_bound, bound)
    on_mip = e.user_data.on_mip
    if on_mip is not None:
        on_mip(min(float(e.data_out.mip_primal_bound), e.user_data.held_objective), bound)  # inf / -inf: not known yet


def _keep_incumbent(e) -> None:
    out = e.data_out
    e.user_data.best = (np.array(out.mip_solution, dtype=float), float(out.objective_function_value), float(out.mip_dual_bound))
    _keep_dual_bound(e)


_scheduler_threads: int | None = None


def use_threads(threads: int) -> int:
    """HiGHS sizes its task scheduler once per process thread and then rejects any other
    `threads` value (HiGHS issue #715, HiGHS.jl #130); reset it when the count changes, and
    on first use, since a notebook may already have run highspy with its default count (the
    solve then ended with status 'Not Set' and no plan). Returns the count to use: while a
    run left behind at its deadline (run_until) is still going, the scheduler under it is
    not reset (waiting for it could take minutes) and the count it was sized for is kept."""
    global _scheduler_threads
    if _scheduler_threads != threads:
        if _scheduler_threads is not None and abandoned_runs():
            return _scheduler_threads
        highspy.Highs.resetGlobalScheduler(True)
    _scheduler_threads = threads
    return threads


def to_highs(lm: LinearModel, threads: int = 1) -> highspy.Highs:
    """A silent highspy instance holding the model (integrality included)."""
    threads = use_threads(threads)
    h = QuietHighs()
    h.stop_event = _stop_event.get()
    h.setOptionValue("threads", threads)  # the first run sizes HiGHS's thread pool
    start, index, value = lm.matrix()
    row_lower, row_upper = lm.row_bounds()
    col_lower, col_upper = lm.bounds()
    integrality = np.zeros(lm.n_cols, dtype=np.int32)  # HighsVarType: 0 continuous, 1 integer
    integrality[lm.integer_columns()] = int(highspy.HighsVarType.kInteger)
    # the arrays go in as they are: a HighsLp's integrality_ is a list of enum objects, built one per column
    h.passModel(lm.n_cols, lm.n_rows, len(value), int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize), 0.0,
                lm.objective(), col_lower, col_upper, row_lower, row_upper, start, index, value, integrality)
    return h




def set_deadline(h: highspy.Highs, deadline: float) -> None:
    """Make HiGHS stop at `deadline` (a time.perf_counter() value) where it checks its clock.

    HiGHS's time_limit is compared with the instance's cumulative run time (getRunTime),
    which keeps counting across runs of the same instance: a second run given the time
    left would lose what the first one used a second time.
    """
    h.setOptionValue("time_limit", h.getRunTime() + max(deadline - time.perf_counter(), 1e-3))
    if isinstance(h, QuietHighs):
        h.deadline = deadline


def run_until(h: highspy.Highs, deadline: float, on_mip: Callable[[float, float], None] | None = None) -> None:
    """h.run(), returning by `deadline` + GRACE_S (see the module docstring); raises
    HighsAbandoned when HiGHS did not stop in time. `h.best` holds the run's last improving
    MIP plan (column values, objective, dual bound) when `h` is a QuietHighs. `on_mip`, if
    given (and `h` is a QuietHighs), is called from HiGHS's thread at each MIP callback with
    the incumbent's objective and the dual bound (inf / -inf while unknown); it must be
    quick and thread-safe, and is not called once the run is abandoned."""
    set_deadline(h, deadline)
    if isinstance(h, QuietHighs):
        h.best, h.dual_bound, h.held_proven, h.held_offered = None, -math.inf, False, False
        h.on_mip = on_mip
        h.watch()
    done = threading.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            h.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failure.append(exc)
        finally:
            done.set()

    _abandoned[:] = [(a, t) for a, t in _abandoned if t.is_alive()]  # finished ones are freed
    worker = threading.Thread(target=target, name="highs-run", daemon=True)
    worker.start()
    # no deadline (or one beyond what Event.wait takes) waits for as long as HiGHS runs: Event.wait
    # raises OverflowError above threading.TIMEOUT_MAX, and would do so with HiGHS's thread running
    wait_s = max(deadline - time.perf_counter(), 0.0) + GRACE_S if math.isfinite(deadline) else math.inf
    wait_s = None if wait_s > threading.TIMEOUT_MAX else wait_s
    if not done.wait(wait_s):
        if isinstance(h, QuietHighs):
            h.on_mip = None  # the caller has moved on: no more progress from this run
        _abandoned.append((h, worker))  # keeps the instance alive until its thread lets go of it
        raise HighsAbandoned(getattr(h, "best", None), time.perf_counter() - deadline, getattr(h, "dual_bound", -math.inf))
    if failure:
        raise failure[0]


_abandoned: list[tuple[highspy.Highs, threading.Thread]] = []


def abandoned_runs() -> int:
    """HiGHS runs left behind at their deadline that have not stopped yet."""
    return sum(t.is_alive() for _, t in _abandoned)


@atexit.register
def _quiet_abandoned_runs() -> None:
    """At interpreter exit, a run left behind must not call back into Python: a thread
    that asks for the GIL during finalization is ended by pthread_exit, which inside HiGHS
    aborts the process ("terminate called without an active exception", seen on 200 x 1000
    at 10 s). Its callbacks are switched off (a flag HiGHS reads before each call); its own
    time_limit, long past, stops it at its next check, or the process's exit does."""
    for h, worker in _abandoned:
        if worker.is_alive() and isinstance(h, highspy.Highs):  # a stand-in (tests) has no callbacks to stop
            for kind in (highspy.cb.HighsCallbackType.kCallbackSimplexInterrupt, highspy.cb.HighsCallbackType.kCallbackIpmInterrupt,
                         highspy.cb.HighsCallbackType.kCallbackMipInterrupt, highspy.cb.HighsCallbackType.kCallbackMipImprovingSolution):
                highspy.Highs.stopCallback(h, kind)  # the C++ method: flips HiGHS's flag, nothing more
    waiting = [worker for _, worker in _abandoned if worker.is_alive()]
    if waiting:
        # A run that returns after finalization has begun aborts the process: wait for it here,
        # where its thread may still take the GIL (its own time limit is long past). The CLI
        # does not get this far: it ends with os._exit once its output is written (cli.main).
        import sys

        print(f"dcplace: waiting up to {EXIT_WAIT_S:.0f} s for {len(waiting)} HiGHS run(s) left behind at their deadline to stop",
              file=sys.stderr, flush=True)
        until = time.perf_counter() + EXIT_WAIT_S
        for worker in waiting:
            worker.join(max(until - time.perf_counter(), 0.0))


EXIT_WAIT_S = 600.0
