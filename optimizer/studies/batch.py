"""Run every member of a sweep into its own plan folder: in parallel, resumable, isolated.

    from dcplace.models.sweep import load_sweep
    from dcplace.optimizer.studies.batch import run_batch
    result = run_batch(load_sweep("whatifs.yaml"), "runs/", workers=2)

- Each member is solved by `solve_to_folder`, so its folder appears only complete and
  checked (an infeasible member gets its folder with the diagnosis).
- A member that is infeasible, has bad input or raises is recorded with its status and
  message; the others go on.
- Re-running skips a member whose folder holds a plan of the same scenario hash (the
  resolved inputs, overrides applied) solved with the same options; anything else is
  solved again. A run killed with -9 loses no finished member: folders are renamed into
  place only when complete, and the staging folders it leaves are removed at the next start.
- `batch.json` and `batch.csv` in the output folder list every member's status and KPIs,
  rewritten atomically after each member.
- Local runs use a process pool; `scheduler="tcp://host:8786"` runs the same function on
  a Dask distributed cluster (its workers need dcplace installed and this folder and
  the scenario files at the same paths).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from dcplace.models import ScenarioError, load_scenario
from dcplace.models.outputs import claim_folder, remove_stale_staging
from dcplace.models.plan import read_plan
from dcplace.models.sweep import Member, Sweep
from dcplace.optimizer.solving.pipeline import PlanCheckFailed, solve_to_folder
from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions

FINISHED = ("optimal", "feasible", "infeasible")  # a result, to keep on resume
FAILED = ("bad_input", "no_plan", "check_failed", "error", "crashed")  # retried on resume
KPI_COLUMNS = ("total_cost_usd_per_year", "usd_per_m_tokens", "mean_rtt_ms", "demand_within_budget_share",
               "emissions_t_per_year", "sites_open", "it_mw_inference", "it_mw_training", "upfront_capex_usd")


class BatchBusy(RuntimeError):
    """Another batch is writing into the same output folder."""


@dataclass
class MemberResult:
    name: str
    status: str
    overrides: dict[str, Any]
    skipped: bool = False
    scenario_hash: str = ""
    objective_usd_per_year: float | None = None
    gap: float | None = None
    kpis: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    message: str = ""
    folder: str = ""


    @classmethod
    def crashed(cls, member: Member, message: str) -> "MemberResult":
        """A member whose worker died or was lost: no result came back; a re-run retries it."""
        return cls(member.name, "crashed", dict(member.overrides), message=f"{message}; re-run to retry")


@dataclass
class BatchResult:
    out_dir: Path
    results: list[MemberResult]

    def by_status(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts

    @property
    def ok(self) -> bool:
        return all(r.status in FINISHED for r in self.results)


@dataclass
class Progress:
    """What a progress display needs after each event."""

    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    running: int = 0
    started: float = field(default_factory=time.perf_counter)
    last: MemberResult | None = None

    @property
    def eta_s(self) -> float | None:
        solved = self.done - self.skipped
        if solved <= 0:
            return None
        wall_per_member = (time.perf_counter() - self.started) / solved  # already reflects the parallelism
        return wall_per_member * (self.total - self.done)


# ------------------------------------------------------------------------------ one member


def run_member(base: str, member: Member, options: dict[str, Any], out_dir: str) -> MemberResult:
    """Solve one member into out_dir/member.name; never raises (the batch must go on)."""
    started = time.perf_counter()
    folder = Path(out_dir) / member.name
    result = MemberResult(member.name, "error", dict(member.overrides), folder=str(folder))
    try:
        solve_options = SolveOptions(**options)
        scenario = load_scenario(base, overrides={"name": member.name, **member.overrides})
        result.scenario_hash = scenario.content_hash
        previous = _finished_plan(folder, scenario.content_hash, solve_options)
        if previous is not None:
            return _from_plan(result, previous, skipped=True, seconds=time.perf_counter() - started)
        try:
            plan, _ = solve_to_folder(scenario, folder, solve_options)
        except InfeasibleScenario as exc:
            result.status, result.message = "infeasible", "; ".join(exc.diagnosis)
        else:
            _from_plan(result, plan, skipped=False)
    except ScenarioError as exc:
        result.status, result.message = "bad_input", "; ".join(str(p) for p in exc.problems[:5])
    except NoPlanFound as exc:
        result.status, result.message = "no_plan", str(exc)
    except PlanCheckFailed as exc:
        result.status, result.message = "check_failed", str(exc)
    except Exception as exc:  # noqa: BLE001 - isolate every failure to its member
        result.status = "error"
        result.message = f"{type(exc).__name__}: {exc} | " + traceback.format_exc(limit=3).replace("\n", " ")[-600:]
    result.seconds = time.perf_counter() - started
    return result


def _finished_plan(folder: Path, scenario_hash: str, options: SolveOptions):
    """The plan already in `folder` if it is of this scenario hash and these options."""
    if not (folder / "plan.json").is_file():
        return None
    try:
        plan = read_plan(folder)
    except (OSError, ValueError):
        return None
    wanted = asdict(options)
    same_options = {k: plan.solve.options.get(k) for k in wanted} == wanted
    if plan.scenario_hash == scenario_hash and same_options and plan.solve.status in FINISHED:
        return plan
    return None


def _from_plan(result: MemberResult, plan, skipped: bool, seconds: float | None = None) -> MemberResult:
    result.status = plan.solve.status
    result.skipped = skipped
    result.scenario_hash = plan.scenario_hash
    result.objective_usd_per_year = plan.objective_usd_per_year
    result.gap = plan.solve.gap
    result.kpis = {k: plan.kpis[k] for k in KPI_COLUMNS if k in plan.kpis}
    if plan.solve.status == "infeasible":
        result.message = "; ".join(plan.diagnosis)
    if seconds is not None:
        result.seconds = seconds
    return result


# ------------------------------------------------------------------------------ the batch


def batch_options(sweep: Sweep) -> dict[str, Any]:
    """The sweep's solver options (one thread per member unless it says otherwise).

    Raises ValueError naming the bad option, once, before any member runs.
    """
    options = {"threads": 1, **sweep.options}
    try:
        SolveOptions(**options)
    except TypeError as exc:
        known = ", ".join(SolveOptions.__dataclass_fields__)
        raise ValueError(f"options: {exc}; known options: {known}") from None
    return options


def run_batch(
    sweep: Sweep,
    out_dir: str | Path,
    workers: int = 1,
    scheduler: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> BatchResult:
    """Run every member of `sweep` into `out_dir`; see the module docstring."""
    options = batch_options(sweep)
    out_dir = claim_folder(out_dir, "batch")
    with _exclusive(out_dir):
        remove_stale_staging(out_dir)
        progress = Progress(total=len(sweep.members))
        results: dict[str, MemberResult] = {}
        runner = _run_dask if scheduler else _run_local
        for result in runner(sweep, options, out_dir, workers, scheduler, progress, on_progress):
            results[result.name] = result
            progress.done += 1
            progress.failed += result.status in FAILED
            progress.skipped += result.skipped
            progress.last = result
            _write_index(out_dir, sweep, options, [results[m.name] for m in sweep.members if m.name in results])
            if on_progress:
                on_progress(progress)
    ordered = [results[m.name] for m in sweep.members]
    return BatchResult(out_dir, ordered)


def _run_local(sweep, options, out_dir, workers, _scheduler, progress, on_progress) -> Iterator[MemberResult]:
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(run_member, str(sweep.base), m, options, str(out_dir)): m for m in sweep.members}
        progress.running = min(workers, len(futures))
        if on_progress:
            on_progress(progress)
        for future in as_completed(futures):
            member = futures[future]
            try:
                result = future.result()
            except BrokenProcessPool as exc:
                result = MemberResult.crashed(member, f"a worker process died ({exc})")
            progress.running = min(workers, len(futures) - progress.done - 1)
            yield result


def _run_dask(sweep, options, out_dir, workers, scheduler, progress, on_progress) -> Iterator[MemberResult]:
    from distributed import Client
    from distributed import as_completed as dask_completed

    with Client(scheduler) as client:
        futures = {
            client.submit(run_member, str(sweep.base), m, options, str(out_dir), key=f"dcplace-{sweep.name}-{m.name}-{time.time_ns()}", pure=False): m
            for m in sweep.members
        }
        slots = sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()) or 1
        progress.running = min(slots, len(futures))
        if on_progress:
            on_progress(progress)
        for future in dask_completed(list(futures)):
            member = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - a killed worker, a lost connection
                result = MemberResult.crashed(member, f"{type(exc).__name__}: {exc}")
            progress.running = min(slots, len(futures) - progress.done - 1)
            yield result


class _exclusive:
    """An flock on out_dir/.batch.lock: one batch per folder (released even on kill -9)."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / ".batch.lock"

    def __enter__(self):
        self.handle = self.path.open("w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            raise BatchBusy(f"another batch is running in {self.path.parent}; wait for it or choose another --out") from None
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _write_index(out_dir: Path, sweep: Sweep, options: dict[str, Any], results: list[MemberResult]) -> None:
    """batch.json and batch.csv, each replaced atomically."""
    doc = {
        "sweep": sweep.name, "base": str(sweep.base), "source": str(sweep.source or ""), "options": options,
        "updated_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "members": [asdict(r) for r in results],
    }
    _atomic_write(out_dir / "batch.json", json.dumps(doc, indent=2))
    rows = []
    for r in results:
        row = {"name": r.name, "status": r.status, "skipped": r.skipped, "objective_usd_per_year": r.objective_usd_per_year,
               "gap": r.gap, **{k: r.kpis.get(k) for k in KPI_COLUMNS}, "seconds": round(r.seconds, 3),
               "overrides": json.dumps(r.overrides), "scenario_hash": r.scenario_hash, "message": r.message}
        rows.append(row)
    _atomic_write(out_dir / "batch.csv", pd.DataFrame(rows).to_csv(index=False))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_batch(out_dir: str | Path) -> dict[str, Any]:
    """The batch.json of a batch folder."""
    return json.loads((Path(out_dir) / "batch.json").read_text())
