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
- One batch at a time writes a folder: `.batch.lock` (an flock, released by the kernel
  even on kill -9) records its owner's pid and host. Pool workers never hold it (they
  close their copy at start) and die with the batch process (Linux PR_SET_PDEATHSIG, and a
  watchdog that exits when the parent pid changes), so `kill -9` of the batch process
  alone, not its process group, leaves nothing that blocks the next run; a lock file whose
  recorded owner is dead is taken over.
- A member may be given `starts`: folders of plans already solved that may meet its
  limits (a trade-off curve's end points). After its own solve, the cheapest start that
  meets every limit of the member's scenario (re-costed for it) is reported instead when
  the solve found no plan or a dearer one: status `feasible` (or `optimal` if the solve's
  bound proves it within the gap), with the solve's bound when it has one, never a
  claimed proof. So a member with a feasible start never ends without a plan.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from dcplace.models import ScenarioError
from dcplace.models.csvtext import spreadsheet_frame
from dcplace.models.outputs import ExclusiveLock, check_destination, claim_folder, remove_stale_staging
from dcplace.models.plan import HAS_PLAN, Plan, SolveRecord, read_plan, write_plan_folder
from dcplace.models.schedule import read_schedule, schedule_kpis
from dcplace.models.sweep import Member, Sweep, load_member
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import PruningRules
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.solving.pipeline import PlanCheckFailed, solve_schedule_to_folder, solve_to_folder
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions, plan_record, solve

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


def run_member(base: str, member: Member, options: dict[str, Any], out_dir: str, starts: tuple[str, ...] = (),
               start: Callable | None = None) -> MemberResult:
    """Solve one member into out_dir/member.name; never raises (the batch must go on).

    `starts`: plan folders that may meet the member's limits (see the module docstring);
    `start(lm, ix)`: a picklable function giving a first incumbent, as for solve()."""
    started = time.perf_counter()
    folder = Path(out_dir) / member.name
    result = MemberResult(member.name, "error", dict(member.overrides), folder=str(folder))
    try:
        solve_options = SolveOptions(**options)
        scenario = load_member(base, member)
        result.scenario_hash = scenario.content_hash
        if scenario.periods:  # a build schedule (docs/periods.md): objective = NPV in USD, figures from its periods
            return _run_schedule(result, scenario, folder, solve_options, started)
        previous = _finished_plan(folder, scenario.content_hash, solve_options)
        if previous is not None:
            return _from_plan(result, previous, skipped=True, seconds=time.perf_counter() - started)
        try:
            if starts:
                plan = solve_from_starts(scenario, folder, solve_options, [Path(p) for p in starts])
            elif start is not None:
                plan, _ = solve_to_folder(scenario, folder, solve_options, start=start)
            else:
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


def _run_schedule(result: MemberResult, scenario, folder: Path, options: SolveOptions, started: float) -> MemberResult:
    """A member with periods: solved into a schedule folder (kept on resume when its hash and
    options match); its objective is the schedule's NPV, its figures schedule_kpis'."""
    done = None
    if (folder / "schedule.json").is_file():
        try:
            done = read_schedule(folder)
        except (OSError, ValueError):
            done = None
    same = done is not None and done.scenario_hash == scenario.content_hash and \
        {k: done.solve.options.get(k) for k in asdict(options)} == asdict(options)
    try:
        if not same:
            done, _, _ = solve_schedule_to_folder(scenario, folder, options)
    except InfeasibleScenario as exc:
        result.status, result.message = "infeasible", "; ".join(exc.diagnosis)
        result.seconds = time.perf_counter() - started
        return result
    result.status, result.skipped, result.scenario_hash = done.solve.status, same, done.scenario_hash
    result.objective_usd_per_year, result.gap = done.npv_usd, done.solve.gap
    result.kpis = {k: v for k, v in schedule_kpis(folder).items() if k in KPI_COLUMNS}
    result.message = f"net present value over {len(done.periods)} periods (USD, not per year)"
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
    wanted = {k: v for k, v in asdict(options).items() if k != "race"}  # who races changes how, not what is proven
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


# ------------------------------------------------------------------------------ start plans


def start_columns(plan: Plan, lm, ix) -> np.ndarray | None:
    """The column values of `lm` (built for another scenario's `ix`) that make `plan`'s
    decisions, or None when the model has no column for one of them."""
    x = np.zeros(lm.n_cols)
    try:
        for s in plan.sites:
            if s.open:
                x[lm.col("open", s.id)] = 1.0
            for c in s.zones:
                x[lm.col("zone", (s.id, c))] = 1.0
            for ln in s.racks:
                if ln.purpose == "inference":
                    x[lm.col("racks_inf", (s.id, ln.config, ln.cooling, ln.workload))] += ln.racks
                else:
                    x[lm.col("racks_trn", (s.id, ln.config, ln.cooling, ln.fabric))] += ln.racks
            if "hosts_inf" in lm.blocks and s.open:
                purposes = {ln.purpose for ln in s.racks}
                x[lm.col("hosts_inf", s.id)] = float("inference" in purposes)
                x[lm.col("hosts_trn", s.id)] = float("training" in purposes)
            if s.tenure == "build":  # a self-built campus (a model without self-build has no column: None)
                x[lm.col("build", s.id)] = 1.0
                x[lm.col("built_kw", s.id)] = float(s.built_kw or 0.0)
        for a in plan.assignments:
            x[lm.col("share", (a.region, a.workload, a.site))] = a.share
        if "share_h" in lm.blocks:  # routing per hour: each hour's own shares (routing.csv)
            for ln in plan.routing:
                x[lm.col("share_h", (ln.region, ln.workload, ln.site, ln.hour_utc))] = ln.share
        for j in plan.jobs:
            x[lm.col("place", (j.job, j.site, j.fabric, j.chip))] = 1.0
    except KeyError:
        return None
    return x


def _feasible_starts(folders: list[Path], lm, ix) -> list[tuple[float, str, np.ndarray]]:
    """(cost in `lm`, folder, columns) of every start plan that meets every row of `lm`, cheapest first."""
    found = []
    for folder in folders:
        try:
            plan = read_plan(folder)
        except (OSError, ValueError):
            continue
        if plan.solve.status not in HAS_PLAN:
            continue
        x = start_columns(plan, lm, ix)
        if x is not None and lm.is_feasible(x):
            found.append((float(lm.objective() @ x), str(folder), x))
    return sorted(found, key=lambda t: t[0])


def solve_from_starts(scenario, folder: Path, options: SolveOptions, starts: list[Path]) -> Plan:
    """Solve `scenario` into `folder` (written whole and checked, like solve_to_folder); when
    the solve ends without a plan or with one dearer than the cheapest start that meets every
    limit of `scenario`, that start is reported instead, re-costed for `scenario`.

    The back-end is handed the cheapest start that meets the model's rows as its first
    incumbent; the fallback covers a start the solve's pruned model cannot express.
    """
    check_destination(folder, "plan")
    began = time.perf_counter()
    solved, failure = None, None
    try:
        solved = solve(scenario, options, start=lambda lm, ix: next((x for _, _, x in _feasible_starts(starts, lm, ix)), None))
    except InfeasibleScenario as exc:
        write_plan_folder(exc.plan, scenario, folder)
        raise
    except NoPlanFound as exc:
        failure = exc
    record = solved.solve if solved is not None else failure.plan.solve
    if solved is not None and solved.solve.status == "optimal":
        _write_checked(solved, scenario, folder)  # proven within the gap: no start can matter
        return solved
    # The start is judged on the scenario's full model (every pair, nothing pruned), so that
    # a decision the solve's model leaves out for being unneeded can still be evaluated.
    eval_started = time.perf_counter()
    ix = checked_index(scenario, options.max_full_pairs, PruningRules.none())  # no bigger than the solve's own model
    lm = build_model(ix, cheapest=False)  # a start is judged by the scenario's limits, not by a cheapest plan's rows
    candidates = _feasible_starts(starts, lm, ix)
    if candidates and (solved is None or candidates[0][0] < solved.objective_usd_per_year * (1 - 1e-9) - 1e-6):
        cost, start_folder, x = candidates[0]
        parts = extract(x, lm, ix)
        objective = parts["objective"]
        bound = record.best_bound_usd_per_year
        gap = None
        if bound is not None:
            bound = min(bound, objective)  # the solve's bound holds for every plan of the scenario
            gap = max(0.0, objective - bound) / max(abs(objective), 1e-9)
        own = "no plan of its own" if solved is None else f"a dearer plan of its own (${solved.objective_usd_per_year:,.2f}/yr)"
        new_record = SolveRecord(
            solver=record.solver, solver_version=record.solver_version,
            status="optimal" if gap is not None and gap <= options.mip_gap else "feasible",
            termination=f"{record.termination}: the solve ended with {own}; reported: start plan {Path(start_folder).name} "
                        f"({start_folder}), which meets every limit of this scenario, re-costed for it"
                        + ("" if bound is not None else "; no bound, so nothing proves how far it is from the optimum"),
            objective_usd_per_year=objective, best_bound_usd_per_year=bound, gap=gap,
            build_time_s=record.build_time_s, solve_time_s=record.solve_time_s,
            extract_time_s=time.perf_counter() - eval_started,
            warm_start=f"start plan {Path(start_folder).name}", options=asdict(options), model=lm.size(),
            failover=failover_record(ix, lm, x, objective),
        )
        plan = plan_record(scenario, options, new_record, parts, [])
    elif solved is not None:
        plan = solved
    else:
        raise failure
    _write_checked(plan, scenario, folder)
    return plan


def failover_record(ix, lm, x: np.ndarray, objective: float) -> dict:
    """solve.failover of a plan found without the N-1 loop (a start plan re-costed, an MGA alternative): with
    policies.survive_site_loss, its own re-routing of every single-site loss, recorded as the loop's one round
    (docs/resilience.md; the checker requires the record and recomputes its verdict); {} without the policy."""
    from dcplace.optimizer.model.resilience import survivable
    from dcplace.optimizer.solving.failover import Round, broken, check_losses, needs_n1, state_from_columns

    if not needs_n1(ix):
        return {}
    state = state_from_columns(x, lm, ix)
    losses = check_losses(ix, state)
    bad = broken(losses)
    lost = getattr(ix, "failover_lost", [])
    return {"classes": dict(survivable(ix.scenario)), "secure": not bad,
            "stopped": f"found without the N-1 loop; the losses of {', '.join(sorted(bad))} break it" if bad else "",
            "scenarios_generated": len({f for f, _, _ in lost}), "losses_in_model": sorted({f for f, _, _ in lost}),
            "reroutings_in_model": len(lost), "open_sites_checked": len(state.open_sites),
            "rounds": [vars(Round(objective, 0.0, len(losses), sorted(bad), 0, sum(bad.values())))]}


def _write_checked(plan: Plan, scenario, folder: Path) -> None:
    def verify(staged: Path) -> None:
        report = check_plan_folder(staged)
        if not report.ok:
            raise PlanCheckFailed(report)

    write_plan_folder(plan, scenario, folder, verify=verify)


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
    starts: dict[str, list[str | Path]] | None = None,
    start_fns: dict[str, Callable] | None = None,
) -> BatchResult:
    """Run every member of `sweep` into `out_dir`; see the module docstring.

    `starts` maps a member's name to plan folders that may meet its limits; `start_fns` to a
    picklable `start(lm, ix)` function (a first incumbent, as for solve())."""
    options = batch_options(sweep)
    if workers > 1 or scheduler:  # the members already share the cores: no member races a second engine
        options.setdefault("race", False)
    out_dir = claim_folder(out_dir, "batch")
    member_starts = {name: tuple(str(p) for p in folders) for name, folders in (starts or {}).items()}
    with _exclusive(out_dir) as lock:
        remove_stale_staging(out_dir)
        progress = Progress(total=len(sweep.members))
        results: dict[str, MemberResult] = {}
        runner = _run_dask if scheduler else _run_local
        jobs = [(m, member_starts.get(m.name, ()), (start_fns or {}).get(m.name)) for m in sweep.members]
        for result in runner(sweep, jobs, options, out_dir, workers, scheduler, progress, on_progress, lock):
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


def _run_local(sweep, jobs, options, out_dir, workers, _scheduler, progress, on_progress, lock) -> Iterator[MemberResult]:
    init_args = (os.getpid(), lock.handle.fileno())
    with ProcessPoolExecutor(max_workers=max(1, workers), initializer=_worker_init, initargs=init_args) as pool:
        futures = {pool.submit(run_member, str(sweep.base), m, options, str(out_dir), st, fn): m for m, st, fn in jobs}
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


def _run_dask(sweep, jobs, options, out_dir, workers, scheduler, progress, on_progress, _lock) -> Iterator[MemberResult]:
    from distributed import Client
    from distributed import as_completed as dask_completed

    with Client(scheduler) as client:
        futures = {
            client.submit(run_member, str(sweep.base), m, options, str(out_dir), st, fn, key=f"dcplace-{sweep.name}-{m.name}-{time.time_ns()}", pure=False): m
            for m, st, fn in jobs
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


PR_SET_PDEATHSIG = 1


def _worker_init(parent_pid: int, lock_fd: int) -> None:
    """In each pool worker: drop the inherited copy of the batch lock (a forked child shares
    the parent's open file, so the flock would outlive the parent), and die with the parent."""
    try:
        os.close(lock_fd)
    except OSError:
        pass
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:  # where prctl is missing: leave within a second of the parent
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="dcplace-parent-watch", daemon=True).start()


def _exclusive(out_dir: Path) -> ExclusiveLock:
    """An flock on out_dir/.batch.lock: one batch per folder (models.outputs.ExclusiveLock, which
    takes over a lock whose recorded owner is dead), under a short flock on `.batch.lock.guard`."""
    return ExclusiveLock(out_dir / ".batch.lock", out_dir / ".batch.lock.guard", lambda who: BatchBusy(
        f"another batch is running in {out_dir} ({who}); wait for it or choose another --out"))


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
    _atomic_write(out_dir / "batch.csv", spreadsheet_frame(pd.DataFrame(rows)).to_csv(index=False))  # for spreadsheets (models.csvtext)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_batch(out_dir: str | Path) -> dict[str, Any]:
    """The batch.json of a batch folder."""
    return json.loads((Path(out_dir) / "batch.json").read_text())
