"""Live progress of one solve, for a display: which phase it is in and, during the search,
the best plan's cost (incumbent), the best bound and the gap.

    def show(p: SolveProgress) -> None:
        print(f"{p.elapsed_s:5.1f} s  {p.phase:12}  {p.incumbent_usd_per_year}  {p.gap}")

    plan = solve(scenario, options, progress=show)       # or solve_to_folder(..., progress=show)

Phases, in order (some are skipped): `load`, `index`, `pricing` (candidate serving pairs
priced in, large scenarios only), `build`, `warm start`, `search`, `diagnose` (an
infeasible scenario), `extract`, `write`, `check`. Every change of phase is reported; within
a phase, updates (from HiGHS's MIP callbacks, in HiGHS's thread) are throttled to one per
`interval_s` (1 s). Calls are serialised by a lock, so the callback is never entered twice at
once and `elapsed_s` never decreases from one call to the next. An exception raised by the
callback is swallowed: a broken display never stops a solve. After the solve returns, a
HiGHS run left behind at its deadline can no longer call it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

PHASES = ("load", "index", "pricing", "build", "warm start", "search", "diagnose", "extract", "write", "check")
PHASE_LABELS = {
    "load": "loading the scenario", "index": "indexing sites and regions", "pricing": "pricing in serving pairs",
    "build": "building the model", "warm start": "warm start (rounding the LP)", "search": "search",
    "diagnose": "diagnosing infeasibility", "extract": "extracting the plan", "write": "writing the plan folder",
    "check": "checking the plan",
}
PROGRESS_INTERVAL_S = 1.0


@dataclass(frozen=True)
class SolveProgress:
    """One progress report. Money in USD per year; None when not known (yet)."""

    phase: str
    elapsed_s: float
    time_limit_s: float | None = None
    incumbent_usd_per_year: float | None = None  # the best plan found so far
    bound_usd_per_year: float | None = None  # no plan can cost less (a valid bound only)

    @property
    def gap(self) -> float | None:
        if self.incumbent_usd_per_year is None or self.bound_usd_per_year is None:
            return None
        return max(0.0, self.incumbent_usd_per_year - self.bound_usd_per_year) / max(abs(self.incumbent_usd_per_year), 1e-9)

    @property
    def label(self) -> str:
        return PHASE_LABELS.get(self.phase, self.phase)


ProgressCallback = Callable[[SolveProgress], None]


log = logging.getLogger(__name__)


class ProgressFeed:
    """Turns phase changes and solver updates into throttled, serialised SolveProgress calls."""

    def __init__(self, callback: ProgressCallback | None, time_limit_s: float | None = None,
                 interval_s: float = PROGRESS_INTERVAL_S):
        self.callback = callback
        self.time_limit_s = time_limit_s
        self.interval_s = interval_s
        self.started = time.perf_counter()
        self._lock = threading.Lock()
        self._phase = ""
        self._incumbent: float | None = None
        self._bound: float | None = None
        self._bound_fixed = False
        self._last_sent = -float("inf")
        self._last_elapsed = 0.0
        self.closed = False

    def __bool__(self) -> bool:
        return self.callback is not None and not self.closed

    def phase(self, name: str) -> None:
        """A new phase: always reported (and logged at INFO: `dcplace --verbose`)."""
        log.info("phase %s at %.1f s", name, time.perf_counter() - self.started)
        if not self:
            return
        with self._lock:
            self._phase = name
            self._send()

    def update(self, incumbent: float | None = None, bound: float | None = None, phase: str | None = None) -> None:
        """The best plan's cost and/or the bound (either may be None: unchanged); at most one
        report per interval_s unless the phase changes. Safe from any thread."""
        if phase is not None:
            log.info("phase %s at %.1f s (best $%s/yr, bound $%s/yr)", phase, time.perf_counter() - self.started,
                     "-" if incumbent is None else f"{incumbent:,.0f}", "-" if bound is None else f"{bound:,.0f}")
        if not self:
            return
        now = time.perf_counter()
        if phase is None and now - self._last_sent < self.interval_s:  # cheap check first: HiGHS calls often
            with self._lock:
                self._keep(incumbent, bound)
            return
        with self._lock:
            self._keep(incumbent, bound)
            if phase is not None and phase != self._phase:
                self._phase = phase
            elif now - self._last_sent < self.interval_s:
                return
            self._send()

    def close(self) -> None:
        """No more calls (a HiGHS run left behind may still try)."""
        with self._lock:
            self.closed = True

    def _keep(self, incumbent: float | None, bound: float | None) -> None:
        import math

        if incumbent is not None and math.isfinite(incumbent):
            self._incumbent = incumbent if self._incumbent is None else min(self._incumbent, incumbent)
        if bound is not None and math.isfinite(bound) and not self._bound_fixed:
            self._bound = bound if self._bound is None else max(self._bound, bound)
        if self._incumbent is not None and self._bound is not None and self._bound > self._incumbent:
            self._bound = self._incumbent  # rounding in HiGHS's tolerances

    def fix_bound(self, bound: float | None) -> None:
        """The one valid bound (the full model's LP bound when the MIP holds only candidate
        pairs, whose own bound proves nothing about the full model): solver bounds are ignored."""
        with self._lock:
            self._bound, self._bound_fixed = bound, True

    def _send(self) -> None:
        if self.closed:
            return
        elapsed = max(time.perf_counter() - self.started, self._last_elapsed)
        self._last_elapsed = elapsed
        self._last_sent = time.perf_counter()
        try:
            self.callback(SolveProgress(self._phase, elapsed, self.time_limit_s, self._incumbent, self._bound))
        except Exception:  # noqa: BLE001 - a display's failure must not stop the solve
            pass


def as_feed(progress: ProgressCallback | ProgressFeed | None, time_limit_s: float | None = None) -> tuple[ProgressFeed, bool]:
    """(feed, owned): the caller's feed when it passes one on (solve_to_folder to solve),
    else a new one that the callee owns and closes."""
    if isinstance(progress, ProgressFeed):
        if progress.time_limit_s is None:
            progress.time_limit_s = time_limit_s
        return progress, False
    return ProgressFeed(progress, time_limit_s), True
