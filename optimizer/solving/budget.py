"""One time budget for a solve, handed to every phase.

A solve is given `time_limit_s` for everything it does. Phases used to rebuild their own
deadlines by arithmetic (`started + SHARE * limit`, `replace(options, time_limit_s=left)`);
a Budget says it once: when the solve started, when it must end, what is left, and the
deadline of a share of what is left. A phase that returns with time left must have proven
what was asked (the gap, or infeasibility): what is left goes to the next phase.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """`started` and `deadline` are time.perf_counter() values."""

    started: float
    deadline: float

    @classmethod
    def of(cls, seconds: float) -> "Budget":
        now = time.perf_counter()
        return cls(now, now + seconds)

    @property
    def seconds(self) -> float:
        """The whole budget."""
        return self.deadline - self.started

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float:
        """Seconds to the deadline, never below 0."""
        return max(self.deadline - time.perf_counter(), 0.0)

    def share(self, fraction: float) -> float:
        """The deadline (a perf_counter value) of `fraction` of what is left now."""
        return time.perf_counter() + fraction * self.left()

    def until(self, deadline: float) -> "Budget":
        """This budget ending earlier, at `deadline` (never later than its own)."""
        return Budget(self.started, min(deadline, self.deadline))


FINISH_RESERVE_S = 1.0  # of a whole job's time limit, kept from the solve for writing and checking its folder ...
FINISH_RESERVE_SHARE = 0.01  # ... plus this share of the limit (the default's write and check: about 1.5 s on 2 quiet cores)


def process_started() -> float:
    """When this process was started, as a time.perf_counter() value (Linux: from /proc; elsewhere: now).
    A scheduler times a job from its exec; the interpreter and the imports before the solve count too."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of stat(5): start time in clock ticks after boot
        age_s = time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.perf_counter()
    return time.perf_counter() - max(age_s, 0.0)


def job_budget(time_limit_s: float, started: float | None = None, finish_factor: float = 1.0) -> Budget:
    """The solve's share of a whole job (solve, write, check) limited to `time_limit_s` from `started`
    (a perf_counter value; None: now): it ends `finish_factor` x (FINISH_RESERVE_S + FINISH_RESERVE_SHARE x
    the limit) early, never more than half the limit."""
    started = time.perf_counter() if started is None else started
    reserve = min(finish_factor * (FINISH_RESERVE_S + FINISH_RESERVE_SHARE * time_limit_s), 0.5 * time_limit_s)
    return Budget(started, started + time_limit_s - reserve)
