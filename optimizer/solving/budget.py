"""One time budget for a solve, handed to every phase.

A solve is given `time_limit_s` for everything it does. Phases used to rebuild their own
deadlines by arithmetic (`started + SHARE * limit`, `replace(options, time_limit_s=left)`);
a Budget says it once: when the solve started, when it must end, what is left, and the
deadline of a share of what is left. A phase that returns with time left must have proven
what was asked (the gap, or infeasibility): what is left goes to the next phase.
"""

from __future__ import annotations

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
