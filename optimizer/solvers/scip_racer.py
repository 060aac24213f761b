"""OR-Tools' SCIP on the full model in a process of its own, racing the HiGHS search.

Neither engine dominates on facility-location MIPs (measured on OR-Library capa, 1 thread,
300 s: SCIP proved capa_14000 in 13.5 s where HiGHS took 118.5 s, and stayed 64.7 % above
the optimum of capa_8000 where HiGHS found it; docs/solvers.md). On a machine with two
cores the solve therefore hands the same matrix to both (optimizer.solving.race): HiGHS in
this process, SCIP in a child process (its own core, its own memory, and a kill that
always works, which a thread inside OR-Tools' solve call would not give).

The matrix goes over as free MPS written here from the LinearModel's arrays (`write_mps`),
columns in the model's order, so the child's answer is a vector in that same order. Not
HiGHS's `writeModel`: highspy 1.16 closes an integer marker after the next column when that
column has no matrix entry, so a continuous column became integer in what SCIP read; and
not Pyomo's writer, which took minutes at capa's 100,300 columns. The child writes its answer to one
.npz file, moved into place whole, so a killed child leaves either no answer or all of it.

    _child("MODEL.mps", "ANSWER.npz", "TIME_LIMIT_S", "GAP", "SEED", "PARENT_PID")  # what the child process runs
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dcplace.models.outputs import process_alive
from dcplace.optimizer.model.linear import LinearModel

# SCIP checks its clock between steps: on capa_14000 (100,300 columns) a 30 s limit ended after 32.0 s, in its
# root LP. The child's own limit ends START_RESERVE_S before the racer's deadline, and the child is killed
# KILL_GRACE_S after it: 3.5 s in all for SCIP to stop and write its answer.
START_RESERVE_S = 1.5
KILL_GRACE_S = 2.0


@dataclass(frozen=True)
class ScipAnswer:
    """What the child said: SCIP's status and numbers, and the plan (column values) or None."""

    status: str  # optimal (gap limit reached), feasible, infeasible, unbounded, no_solution, error
    termination: str
    objective_usd_per_year: float | None
    best_bound_usd_per_year: float | None
    x: np.ndarray | None
    seconds: float
    version: str


class ScipRacer:
    """One SCIP run of `lm` in a child process, until `deadline` (time.perf_counter()).

    `start()` writes the model and starts the child; `done()` says whether it has ended;
    `answer()` waits for it (killing it at its deadline plus KILL_GRACE_S) and reads what it
    wrote; `stop()` ends it at once. Always `stop()` or `answer()` it: the temporary folder
    goes with it."""

    def __init__(self, lm: LinearModel, deadline: float, mip_gap: float, seed: int):
        self.lm, self.deadline, self.mip_gap, self.seed = lm, deadline, mip_gap, seed
        self.folder: Path | None = None
        self.process: subprocess.Popen | None = None
        self.started = time.perf_counter()
        self._answer: ScipAnswer | None = None
        self.stopped = False  # ended by stop(): the other engine proved the answer first

    def start(self) -> "ScipRacer":
        _remove_orphans()
        self.folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))
        model = self.folder / "model.mps"
        write_mps(self.lm, model)
        limit_s = max(self.deadline - time.perf_counter() - START_RESERVE_S, 0.1)
        arguments = [str(model), str(self.folder / "answer.npz"), f"{limit_s:.3f}", repr(float(self.mip_gap)), str(int(self.seed)),
                     str(os.getpid())]
        command = [sys.executable, "-c", f"from {__name__} import _child; _child(*{arguments!r})"]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _live.add(self)
        return self

    def done(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def stop(self) -> None:
        """End the child now, if it runs (answer() then reads what it left, and cleans up)."""
        if self.process is not None and self.process.poll() is None:
            self.stopped = True
            self.process.kill()

    def answer(self) -> ScipAnswer:
        """The child's answer, waiting for it until its deadline plus KILL_GRACE_S. Call it once, from one thread."""
        if self._answer is not None:
            return self._answer
        stderr = b""
        try:
            if self.process is not None:
                try:
                    _, stderr = self.process.communicate(timeout=max(self.deadline + KILL_GRACE_S - time.perf_counter(), 0.0))
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    _, stderr = self.process.communicate()
            self._answer = self._read(stderr.decode(errors="replace").strip().splitlines()[-1:] if stderr else [])
        finally:
            _live.discard(self)
            if self.folder is not None:
                shutil.rmtree(self.folder, ignore_errors=True)
        return self._answer

    def _read(self, last_error: list[str]) -> ScipAnswer:
        seconds = time.perf_counter() - self.started
        path = self.folder / "answer.npz" if self.folder else None
        if path is None or not path.exists():
            why = ("stopped: the other engine proved the answer first" if self.stopped else
                   f"SCIP's process ended without an answer ({last_error[0] if last_error else 'stopped at its deadline'})")
            return ScipAnswer("no_solution", why, None, None, None, seconds, "")
        with np.load(path, allow_pickle=False) as data:
            status, termination, version = (str(data[k]) for k in ("status", "termination", "version"))
            objective, bound = float(data["objective"]), float(data["bound"])
            x = np.array(data["x"], dtype=float) if data["x"].size == self.lm.n_cols else None
        return ScipAnswer(status, termination, objective if math.isfinite(objective) else None,
                          bound if math.isfinite(bound) else None, x, seconds, version)



_live: set[ScipRacer] = set()
FOLDER_PREFIX = "dcplace-scip-"  # then the parent's pid: a folder whose parent is gone is an orphan


def _remove_orphans() -> None:
    """Remove racer folders left by a solve that was killed outright (its child died with it)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*-*"):
        pid = folder.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def stop_all() -> None:
    """Kill every child still running and remove its folder: for a process about to end by a
    signal (the CLI's SIGTERM handler), whose racers would otherwise run on to their deadline."""
    for racer in list(_live):
        if racer.process is not None and racer.process.poll() is None:
            racer.process.kill()
        if racer.folder is not None:
            shutil.rmtree(racer.folder, ignore_errors=True)
    _live.clear()


def write_mps(lm: LinearModel, path: Path) -> None:
    """`lm` as free MPS: columns C0.. in the model's order, every column listed (an empty one
    by its objective entry) and every bound written out (an integer column read with no
    bounds would be binary in some readers); rows with no finite bound are left out."""
    start, index, value = lm.matrix()
    row_lower, row_upper = lm.row_bounds()
    col_lower, col_upper = lm.bounds()
    cost = lm.objective()
    free = ~np.isfinite(row_lower) & ~np.isfinite(row_upper)
    kind = np.where(row_lower == row_upper, "E", np.where(np.isfinite(row_lower), "G", "L"))
    lines = ["NAME dcplace", "ROWS", " N OBJ", *(f" {kind[i]} R{i}" for i in np.flatnonzero(~free)), "COLUMNS"]
    # entry lines sorted by column, each column's objective entry first (every column has at least that one)
    entry_col = np.repeat(np.arange(lm.n_cols), np.diff(start))
    keep = ~free[index] & (value != 0)
    has_entry = np.bincount(entry_col[keep], minlength=lm.n_cols) > 0
    objective_cols = np.flatnonzero((cost != 0) | ~has_entry)
    cols = np.concatenate([objective_cols, entry_col[keep]])
    order = np.argsort(cols, kind="stable")
    names = np.concatenate([np.full(objective_cols.size, -1), index[keep]])[order]
    coefs = np.concatenate([cost[objective_cols], value[keep]])[order]
    cols = cols[order]
    text = [f" C{c} {'OBJ' if r < 0 else f'R{r}'} {v:.17g}" for c, r, v in zip(cols.tolist(), names.tolist(), coefs.tolist())]
    # integer columns between markers, one pair per run of consecutive integer columns
    integer = np.zeros(lm.n_cols + 1, dtype=bool)
    integer[lm.integer_columns()] = True
    run_starts = np.flatnonzero(integer[:-1] & ~np.concatenate([[False], integer[:-2]]))
    run_stops = np.flatnonzero(integer[:-1] & ~integer[1:]) + 1
    at = 0
    for k, (a, b) in enumerate(zip(run_starts.tolist(), run_stops.tolist())):
        first, last = np.searchsorted(cols, a, "left"), np.searchsorted(cols, b, "left")
        lines += text[at:first]
        lines += [f" M{k} 'MARKER' 'INTORG'", *text[first:last], f" M{k} 'MARKER' 'INTEND'"]
        at = last
    lines += text[at:]
    lines.append("RHS")
    rhs = np.where(kind == "L", row_upper, row_lower)
    lines += [f" RHS R{i} {rhs[i]:.17g}" for i in np.flatnonzero(~free & (rhs != 0) & np.isfinite(rhs))]
    ranged = np.isfinite(row_lower) & np.isfinite(row_upper) & (row_lower != row_upper)
    if ranged.any():
        lines.append("RANGES")
        lines += [f" RNG R{i} {row_upper[i] - row_lower[i]:.17g}" for i in np.flatnonzero(ranged)]
    lines.append("BOUNDS")
    for j, (lo, hi) in enumerate(zip(col_lower.tolist(), col_upper.tolist())):
        if lo == hi:
            lines.append(f" FX BND C{j} {lo:.17g}")
            continue
        lines.append(f" LO BND C{j} {lo:.17g}" if math.isfinite(lo) else f" MI BND C{j}")
        lines.append(f" UP BND C{j} {hi:.17g}" if math.isfinite(hi) else f" PL BND C{j}")
    lines.append("ENDATA")
    Path(path).write_text("\n".join(lines) + "\n")


def _child(model_path: str, answer_path: str, time_limit_s: str, mip_gap: str, seed: str, parent: str) -> None:
    """The child's whole work: read the MPS, solve it with SCIP, write the answer whole."""
    started = time.perf_counter()
    time_limit_s, mip_gap, seed, parent = float(time_limit_s), float(mip_gap), int(seed), int(parent)
    _die_with_parent(parent)
    from ortools import __version__ as version
    from ortools.linear_solver.python import model_builder as mb

    model = mb.Model()
    if not model.import_from_mps_file(model_path):
        raise SystemExit("OR-Tools could not read the model")
    solver = mb.Solver("scip")
    solver.set_time_limit_in_seconds(max(time_limit_s - (time.perf_counter() - started), 0.05))
    solver.set_solver_specific_parameters("\n".join([
        f"limits/gap = {mip_gap}", f"randomization/randomseedshift = {seed}", "parallel/maxnthreads = 1"]))
    result = solver.solve(model)
    status = {mb.SolveStatus.OPTIMAL: "optimal", mb.SolveStatus.FEASIBLE: "feasible", mb.SolveStatus.INFEASIBLE: "infeasible",
              mb.SolveStatus.UNBOUNDED: "unbounded"}.get(result, "no_solution")
    objective = bound = math.nan
    x = np.zeros(0)
    if status in ("optimal", "feasible"):
        objective, bound = solver.objective_value, solver.best_objective_bound
        x = solver.values(model.get_variables()).to_numpy(dtype=float)
    elif status == "infeasible":
        bound = math.inf
    partial = answer_path + ".partial.npz"
    np.savez(partial, status=status, termination=f"SCIP: {result.name}", version=version, objective=objective, bound=bound, x=x)
    os.replace(partial, answer_path)


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent ends (Linux); elsewhere nothing."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent ended before the call
        os._exit(1)
