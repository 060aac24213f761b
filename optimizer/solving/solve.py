"""Solve a scenario: precheck, index, build, solve (HiGHS or OR-Tools), extract -> Plan.

    from dcplace.models import load_scenario
    from dcplace.optimizer import solve, SolveOptions
    plan = solve(load_scenario(), SolveOptions(time_limit_s=60))

The time limit covers the whole solve (model build, warm start, branch and bound, and the
diagnosis of an infeasible scenario, which gets only the time left); a time-limited solve
returns its incumbent with status "feasible" and the gap it reached, never "optimal".
solve() returns within deadline_margin_s(limit) = max(3 s, 5 %) of the limit: HiGHS runs
in a worker thread that is left behind if it does not stop at the deadline
(optimizer.solvers.highs_model.run_until). Not covered: the index and model build, which
are checked only between phases (seconds at 500 x 3,000), and the OR-Tools back-ends'
Pyomo/MPS hand-off. An infeasible scenario raises InfeasibleScenario; inputs that the
prechecks can already tell will not work raise ScenarioError before any model is built.
"""

from __future__ import annotations

import logging
import math
import platform
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Callable

import numpy as np

from dcplace.models import Scenario
from dcplace.models.plan import HAS_PLAN, Plan, SolveRecord
from dcplace.models.versions import package_versions
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.solvers.backends import RunResult, gap_status, get_backend, relative_gap, run_backend
from dcplace.optimizer.solving.diagnose import diagnose
from dcplace.optimizer.solving.failover import ROUND_SHARE as N1_ROUND_SHARE, needs_n1, secure
from dcplace.optimizer.solving.failover_sites import HELD_SHARE, secure_on_sites
from dcplace.optimizer.model.index import MAX_FULL_PAIRS, IndexSets, PruningRules
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.pairs import BOUND_TOLERANCE, GAP_SHARE, PricedLP, solve_priced_lp
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.budget import Budget
from dcplace.optimizer.solving.race import RACE_MAX_PAIRS, Race, combine, race_skipped, transfer_by_keys
from dcplace.optimizer.solvers.highs_model import stopped_by
from dcplace.optimizer.solving.progress import ProgressCallback, ProgressFeed, SolveProgress, as_feed  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

PRICING_SHARE = 0.5  # of the time limit, at most, for pricing in serving pairs (optimizer.pairs)
# The deadline guarantee: solve() returns within max(DEADLINE_MARGIN_S, DEADLINE_MARGIN_SHARE x limit) of the
# limit, whatever phase it is in (tests/test_deadlines.py, benchmarks/deadlines.py).
DEADLINE_MARGIN_S = 3.0
DEADLINE_MARGIN_SHARE = 0.05
POST_SOLVE_RESERVE_S = 1.5  # at most, of the time left, kept back from the back-end for extraction and the record
POST_SOLVE_RESERVE_SHARE = 0.02  # of the limit
DIAGNOSIS_MIN_S = 1.0  # less time left than this after an infeasible search: the diagnosis is not started
NO_DIAGNOSIS = "infeasible; the diagnosis did not run in the time limit"
UNFINISHED_DIAGNOSIS = "infeasible; the diagnosis did not finish in the time limit"


def deadline_margin_s(time_limit_s: float) -> float:
    """How far past its time limit a solve may return: the stated margin."""
    return max(DEADLINE_MARGIN_S, DEADLINE_MARGIN_SHARE * time_limit_s)


@dataclass(frozen=True)
class SolveOptions:
    """Solver settings, recorded in every plan."""

    solver: str = "highs"
    time_limit_s: float = 300.0
    mip_gap: float = 5e-3  # strategic inputs are uncertain by far more; --gap 1e-4 for a tight proof
    threads: int = 1
    seed: int = 0
    warm_start: bool = True
    max_full_pairs: int = MAX_FULL_PAIRS  # above this many eligible serving pairs, candidates + pricing (optimizer.pairs)
    pruning: PruningRules = PruningRules()  # switchable only to test that each rule keeps the optimum
    race: bool = True  # with solver 'highs' on 2+ cores: OR-Tools' SCIP races HiGHS on the full model (optimizer.solving.race)

    def __post_init__(self) -> None:
        get_backend(self.solver)  # ValueError listing the registry
        if self.time_limit_s <= 0 or self.mip_gap < 0 or self.threads < 1 or self.max_full_pairs < 0:
            raise ValueError("time_limit_s > 0, mip_gap >= 0, threads >= 1 and max_full_pairs >= 0 are required")


class InfeasibleScenario(Exception):
    """No plan satisfies every limit. `diagnosis` says which limits must move and by how
    much; `plan` is the record of the failed solve (status "infeasible", no sites)."""

    def __init__(self, scenario: Scenario, plan: Plan):
        self.scenario = scenario
        self.plan = plan
        self.diagnosis = plan.diagnosis
        lines = "\n".join(f"  - {d}" for d in plan.diagnosis) or "  (no single limit could be named)"
        super().__init__(f"scenario '{scenario.name}' has no feasible plan; to make one possible:\n{lines}")


class NoPlanFound(Exception):
    """The solver stopped (time limit) before finding any plan; nothing is known infeasible."""

    def __init__(self, scenario: Scenario, plan: Plan):
        self.scenario = scenario
        self.plan = plan
        super().__init__(
            f"no plan found for '{scenario.name}' within {plan.solve.options['time_limit_s']:g} s "
            f"({plan.solve.termination}); raise --time-limit or loosen --gap."
        )


AS_IS_RULE = ("today's sites, cooling zones and racks are held as they are (inputs/footprint.csv): nothing is added or "
              "removed; the optimizer only routes demand to today's racks and places training jobs on today's training racks")


def as_is_record(scenario: Scenario) -> dict:
    """What plan.json says of an as-is plan (docs/as-is.md); empty when the scenario holds no footprint."""
    if not scenario.footprint:
        return {}
    return {"footprint": scenario.files.get("footprint") or "footprint.csv", "sites": len({ln.site for ln in scenario.footprint}),
            "racks": sum(ln.racks for ln in scenario.footprint), "rule": AS_IS_RULE}


def plan_record(scenario: Scenario, options: SolveOptions, record: SolveRecord, parts: dict | None, diagnosis: list[str]) -> Plan:
    """The Plan record of a solve: decisions (`parts`, from extract) or none, with provenance."""
    parts = parts or {"objective": None, "breakdown": {}, "kpis": {}, "sites": [], "assignments": [], "jobs": []}
    return Plan(
        scenario=scenario.name,
        scenario_hash=scenario.content_hash,
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        solve=record,
        objective_usd_per_year=parts["objective"],
        cost_breakdown_usd_per_year=parts["breakdown"],
        kpis=parts["kpis"],
        sites=parts["sites"],
        assignments=parts["assignments"],
        jobs=parts["jobs"],
        **{key: parts[key] for key in ("clock", "hourly", "dispatch", "backfill", "rentals", "rent_assignments", "routing") if key in parts},
        as_is=as_is_record(scenario),
        diagnosis=diagnosis,
        provenance={
            "scenario_name": scenario.name,
            "scenario_hash": scenario.content_hash,
            "scenario_source": scenario.source_path,
            "options": asdict(options),
            "seed": options.seed,
            "solver": {"name": record.solver, "version": record.solver_version},
            "packages": package_versions(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "rerun": f"dcplace solve inputs/scenario.yaml --solver {options.solver} --time-limit {options.time_limit_s:g} "
            f"--gap {options.mip_gap:g} --threads {options.threads} --seed {options.seed} --max-full-pairs {options.max_full_pairs}"
            + ("" if options.race else " --no-race"),
        },
    )


def solve(scenario: Scenario, options: SolveOptions | None = None,
          start: Callable[[LinearModel, IndexSets], np.ndarray | None] | None = None,
          progress: ProgressCallback | ProgressFeed | None = None, budget: Budget | None = None) -> Plan:
    """The least-cost plan for `scenario`.

    `start(lm, ix)`, if given, returns column values of a plan the caller already has (or
    None); when they meet every row of the model they are handed to the back-end as a first
    incumbent (a trade-off curve starts each point from a solved neighbour this way).
    Raises ScenarioError (prechecks), InfeasibleScenario (with a diagnosis) or NoPlanFound.
    `progress(SolveProgress)`, if given, hears each phase and, during the search, the
    incumbent, bound and gap about once a second (optimizer.solving.progress); None changes nothing.
    `budget` (optimizer.solving.budget), if given, is the solve's time instead of `options.time_limit_s`
    from now: a job that writes and checks a folder after the solve, or was started earlier, hands its own.
    """
    options = options or SolveOptions()
    feed, owned = as_feed(progress, options.time_limit_s)
    try:
        return _solve(scenario, options, start, feed, budget)
    finally:
        if owned:
            feed.close()


def _solve(scenario: Scenario, options: SolveOptions, start, feed: ProgressFeed, budget: Budget | None = None) -> Plan:
    budget = budget or Budget.of(options.time_limit_s)
    started, deadline = time.perf_counter(), budget.deadline  # the record's times count from here; the budget may be older
    reserve = min(POST_SOLVE_RESERVE_S, POST_SOLVE_RESERVE_SHARE * budget.seconds)  # extraction and the record
    feed.phase("index")
    ix = checked_index(scenario, options.max_full_pairs, options.pruning)
    n1 = needs_n1(ix)
    candidates_only = len(ix.serve) < ix.eligible_pairs()
    race_note = race_skipped(options, ix, n1)
    full: tuple[IndexSets, LinearModel] | None = None  # the full model, when it is built beside a candidate one
    race: Race | None = None
    if race_note is None:
        feed.phase("build")
        full_ix = checked_index(scenario, ix.eligible_pairs(), options.pruning) if candidates_only else ix
        full = (full_ix, build_model(full_ix))
        race_note = race_skipped(options, ix, n1, full[1].n_cols)
        if race_note is None:  # SCIP starts first, on the other core, and races everything that follows
            race = Race(full[1], budget.until(deadline - reserve), options.mip_gap, options.seed)
    try:
        with stopped_by(race.stop_event) if race else nullcontext():
            lm, ix, result, x, priced, build_time, failover = _search(scenario, options, start, feed, budget, ix, full, reserve,
                                                                      race.proven if race else lambda: False, started)
        if race is not None:
            proven = result.status in ("infeasible", "unbounded") or (result.status == "optimal" and not race.proven())
            answer = race.finish(highs_proven=proven)
            if lm is not full[1] and proven:  # HiGHS proved the gap over candidate pairs: its plan stands on its model
                answer = replace(answer, x=None)
            elif lm is not full[1]:  # HiGHS's plan carried over to the full model, on which SCIP's plan is
                x = transfer_by_keys(x, lm, full[1]) if x is not None else None
                ix, lm = full
            result, x, race_record = combine(lm, result, x, answer, options.mip_gap, deadline)
        else:
            race_record = {"skipped": race_note}
    finally:
        if race is not None:
            race.finish(highs_proven=True)  # a failure above leaves no SCIP running on
    record_args = dict(result.record(), build_time_s=build_time, options=asdict(options), model=lm.size(),
                       pairs=priced.record() if priced else {}, failover=failover, race=race_record)
    record_args["solve_time_s"] = max(time.perf_counter() - started - build_time, 0.0)  # wall time, every phase after the build
    if result.status in ("infeasible", "unbounded"):
        feed.phase("diagnose")
        plan = plan_record(scenario, options, SolveRecord(**record_args), None, _diagnosis(ix, lm, options, deadline))
        raise InfeasibleScenario(scenario, plan)
    if not result.has_plan or x is None:
        raise NoPlanFound(scenario, plan_record(scenario, options, SolveRecord(**record_args), None, []))
    feed.update(result.objective_usd_per_year, result.best_bound_usd_per_year, phase="extract")
    extract_start = time.perf_counter()
    parts = extract(x, lm, ix)
    if ix.clock.on:
        record_args.update(_against_dispatch(record_args, parts["objective"], options.mip_gap))
        if record_args["status"] != "optimal" and result.status == "optimal":
            x, parts, record_args = _tighten_for_dispatch(lm, ix, options, feed, budget, reserve, x, parts, record_args)
        record_args["solve_time_s"] = max(time.perf_counter() - started - build_time, 0.0)
    record = SolveRecord(**record_args, extract_time_s=time.perf_counter() - extract_start)
    log.info("%s: %s by %s, $%s/yr, gap %s, %d rows, %d columns, %.1f s", scenario.name, record.status, record.solver,
             f"{parts['objective']:,.0f}", "n/a" if record.gap is None else f"{record.gap:.3%}", record.model.get("rows", 0),
             record.model.get("columns", 0), record.build_time_s + record.solve_time_s)
    return plan_record(scenario, options, record, parts, [])


DISPATCH_ROUNDS = 3  # searches at a tighter gap, at most, when the dispatch's cost lifts a proven plan's gap over the asked


def _tighten_for_dispatch(lm, ix, options, feed, budget: Budget, reserve: float, x, parts, record_args):
    """The stop rule proves the model's gap; the plan's cost is the merit-order dispatch of its
    racks, a little above the model's (clock_costs charges a lower bound of busy energy). When
    that lifts the gap over the asked one (0.5003 % at 0.5 % asked, measured on the clock
    default), the search goes on with the time left at the gap that leaves room for it, from
    the plan in hand, so that one definition of the gap, the reported one, is what stops the
    solve. Returns the plan's columns, its parts and the record as they then are."""
    best_bound = record_args.get("best_bound_usd_per_year")
    for _ in range(DISPATCH_ROUNDS):
        left = budget.left() - reserve
        if record_args["status"] == "optimal" or left <= CONTINUE_MIN_S or best_bound is None:
            break
        excess = max(parts["objective"] - float(lm.objective() @ x), 0.0) / max(abs(parts["objective"]), 1e-9)
        target = max(options.mip_gap - 2 * excess, options.mip_gap / 4)
        again, x_again = run_backend(lm, ix, replace(options, mip_gap=target, time_limit_s=left, warm_start=False),
                                     incumbent=x, progress=feed if feed else None)
        if not again.has_plan or x_again is None:
            break
        best_bound = max(best_bound, again.best_bound_usd_per_year or best_bound)
        candidate = extract(x_again, lm, ix)
        record_args = dict(record_args, termination=f"{record_args['termination']}; searched again at gap {target:.4%} "
                           f"for the dispatch's cost: {again.termination}")
        if candidate["objective"] < parts["objective"]:
            x, parts = x_again, candidate
            record_args.update(solver=again.solver, solver_version=again.solver_version)
            if record_args.get("race", {}).get("winner"):
                record_args["race"] = dict(record_args["race"], winner=again.solver)
        best_bound = min(best_bound, parts["objective"])
        gap = max(0.0, parts["objective"] - best_bound) / max(abs(parts["objective"]), 1e-9)
        record_args.update(objective_usd_per_year=parts["objective"], best_bound_usd_per_year=best_bound, gap=gap,
                           status=gap_status(gap, options.mip_gap))
        if again.status != "optimal":
            break
    return x, parts, record_args


def _search(scenario: Scenario, options: SolveOptions, start, feed: ProgressFeed, budget: Budget, ix: IndexSets,
            full: tuple[IndexSets, LinearModel] | None, reserve: float, race_proven: Callable[[], bool], started: float):
    """The HiGHS side of a solve: pricing (above max_full_pairs), the search, the N-1 loop, and
    then, while the gap is not proven and time is left, the search on the full model from the
    best plan so far. Returns (model, index, result, plan, priced, build seconds, N-1 record)
    of the model the plan's columns belong to."""
    deadline = budget.deadline  # `started`: when the solve began (build times count from it; the budget may be older)
    priced = None
    if len(ix.serve) < ix.eligible_pairs():
        # too many pairs to build: candidates, priced in by the LP (optimizer.pairs)
        index_s = time.perf_counter() - started
        feed.phase("pricing")
        lm, priced = solve_priced_lp(ix, build_model, budget.started + PRICING_SHARE * budget.seconds, options.threads,
                                     max(BOUND_TOLERANCE, GAP_SHARE * options.mip_gap))
        build_time = index_s + priced.build_s
        if feed:
            feed.fix_bound(priced.full_lp_bound)  # the candidate MIP's own bound proves nothing about the full model
    elif full is not None:
        lm = full[1]
        build_time = time.perf_counter() - started
    else:
        feed.phase("build")
        lm = build_model(ix)
        build_time = time.perf_counter() - started
    # One deadline for the whole solve: what the build used is not given to the solver again.
    if budget.left() <= 0:
        record = SolveRecord(solver=options.solver, solver_version="", status="no_solution", termination="timeLimitDuringModelBuild",
                             objective_usd_per_year=None, best_bound_usd_per_year=None, gap=None, build_time_s=build_time,
                             solve_time_s=0.0, options=asdict(options), model=lm.size())
        raise NoPlanFound(scenario, plan_record(scenario, options, record, None, []))
    relaxation = (priced.x, priced.objective) if priced and priced.x is not None else None
    good_enough = priced.full_lp_bound * (1 + options.mip_gap) if relaxation and priced.full_lp_bound is not None else None
    # the back-end stops a little early: extraction and the plan record come after it
    remaining_s = max(budget.left() - reserve, 1e-3)
    incumbent = start(lm, ix) if start is not None else None
    if needs_n1(ix):  # the first round of the N-1 loop gets a share of the time: later rounds follow
        remaining_s = max(remaining_s * N1_ROUND_SHARE, 1e-3)
        good_enough = math.inf  # ... and ends at its warm start, whose sites the search held to them starts from
    result, x = run_backend(lm, ix, replace(options, time_limit_s=remaining_s), relaxation, good_enough, incumbent,
                            progress=feed if feed else None)
    if needs_n1(ix) and not result.has_plan and result.status not in ("infeasible", "unbounded") \
            and budget.left() - reserve > CONTINUE_MIN_S:
        # the first round found no plan in its share of the time: it is given the rest, not the user an early "no plan"
        result, x = run_backend(lm, ix, replace(options, time_limit_s=budget.left() - reserve), relaxation, good_enough,
                                incumbent, progress=feed if feed else None)
    failover: dict = {}
    if needs_n1(ix) and result.has_plan and x is not None:  # N-1: losses generated lazily (optimizer.solving.failover)

        def solve_again(model: LinearModel, start_plan, final: bool = False, keep_s: float = 0.0):
            feed.phase("build")
            left = max((deadline - reserve - keep_s - time.perf_counter()) * (1.0 if final else N1_ROUND_SHARE), 1e-3)
            return run_backend(model, ix, replace(options, time_limit_s=left), incumbent=start_plan, progress=feed if feed else None)

        def solve_held(model: LinearModel, held: IndexSets, start_plan):
            feed.phase("search")  # its own bound holds for its sites only: the feed keeps the whole model's
            left = max((deadline - reserve - time.perf_counter()) * HELD_SHARE, 1e-3)
            return run_backend(model, held, replace(options, time_limit_s=left), incumbent=start_plan)

        def on_sites(model: LinearModel, sites: list[str], start_plan):
            return secure_on_sites(ix, model, sites, start_plan, build_model, solve_held, deadline - reserve, options.threads)

        lm, result, x, failover = secure(ix, lm, result, x, build_model, solve_again, deadline - reserve, options.threads,
                                         options.mip_gap, on_sites)
        if result.has_plan and not failover["secure"] and failover["stopped"] == "time limit":
            result = replace(result, status="no_solution", termination=f"{result.termination}; the time limit ended before "
                             f"every single-site loss could be re-routed ({failover['scenarios_generated']} generated)")
            x = None
    if priced is not None:
        result = against_full_bound(result, priced, options.mip_gap)
        if not race_proven() and _search_on(result, budget, reserve, ix):
            lm, ix, result, x = _continue_on_full(scenario, options, feed, budget, reserve, ix, lm, result, x, full)
    return lm, ix, result, x, priced, build_time, failover


CONTINUE_MIN_S = 1.0  # less time left than this after the search over candidate pairs: it is not continued


def _search_on(result: RunResult, budget: Budget, reserve: float, ix: IndexSets) -> bool:
    """Does the search over candidate pairs go on over the full model? Only while the asked gap is
    not proven, time is left and the full model is one a race would build (RACE_MAX_PAIRS)."""
    if result.status in ("optimal", "infeasible", "unbounded") or needs_n1(ix) or ix.eligible_pairs() > RACE_MAX_PAIRS:
        return False
    return budget.left() - reserve > CONTINUE_MIN_S


def _continue_on_full(scenario, options, feed, budget, reserve, ix, lm, result, x, full):
    """The search over the full model for the time left, from the candidate search's plan
    (carried over by variable), with no warm start (the plan is the start). Its bound and the
    pricing bound both bound the full model: the higher is kept."""
    if full is None:
        feed.phase("build")
        full_ix = checked_index(scenario, ix.eligible_pairs(), options.pruning)
        full = (full_ix, build_model(full_ix))
    full_ix, full_lm = full
    incumbent = transfer_by_keys(x, lm, full_lm) if x is not None else None
    left = max(budget.left() - reserve, 1e-3)
    again, x_full = run_backend(full_lm, full_ix, replace(options, time_limit_s=left, warm_start=False), incumbent=incumbent,
                                progress=feed if feed else None)
    if not again.has_plan or x_full is None:
        return lm, ix, result, x  # nothing better: the candidate plan stands, on its own model
    bounds = [b for b in (result.best_bound_usd_per_year, again.best_bound_usd_per_year) if b is not None]
    objective = again.objective_usd_per_year
    bound = min(max(bounds), objective) if bounds else None
    gap = relative_gap(objective, bound)
    merged = replace(again, best_bound_usd_per_year=bound, gap=gap,
                     status=gap_status(gap, options.mip_gap),
                     termination=f"{result.termination}; then searched on the full model: {again.termination}")
    return full_lm, full_ix, merged, x_full


def _diagnosis(ix, lm, options: SolveOptions, deadline: float) -> list[str]:
    """diagnose() given only the time left to the deadline: it is not started when less
    than DIAGNOSIS_MIN_S is left, and left behind (in a daemon thread) if it has not
    returned by the deadline."""
    left = deadline - time.perf_counter()
    if left < DIAGNOSIS_MIN_S:
        return [NO_DIAGNOSIS]
    found: list[list[str]] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            # its solver gets the time left less a second for the model build and the IIS
            found.append(diagnose(ix, lm, replace(options, time_limit_s=max(left - 1.0, 0.5 * left))))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=target, name="diagnose", daemon=True)
    worker.start()
    worker.join(max(deadline - time.perf_counter(), 0.0) + 0.5)
    if failed:
        raise failed[0]
    return found[0] if found else [UNFINISHED_DIAGNOSIS]


def _against_dispatch(record: dict, plan_objective: float, mip_gap: float) -> dict:
    """With the clock on the model charges served load a lower bound of its busy energy
    (optimizer.model.clock_families.clock_costs); the plan's cost uses the merit-order dispatch of the
    racks it builds. Its objective, gap and status are restated against the solver's bound,
    which bounds the exact cost of every plan too."""
    bound = record.get("best_bound_usd_per_year")
    update = {"objective_usd_per_year": plan_objective}
    if bound is not None:
        gap = max(0.0, plan_objective - bound) / max(abs(plan_objective), 1e-9)
        update.update(gap=gap, status=gap_status(gap, mip_gap))
    update["termination"] = f"{record['termination']}; energy by merit-order dispatch, gap against the model's bound"
    return update


def against_full_bound(result: RunResult, priced: PricedLP, mip_gap: float) -> RunResult:
    """A MIP over candidate pairs and placements proves nothing about the full model by its own
    bound; the bound pricing states for the full model does (its LP bound, a Lagrangian bound
    of it when pricing stopped early, or the capacity-cost bound when no LP finished:
    priced.bound_kind). Status and gap are restated against it, and the record names it."""
    result = replace(result, solve_time_s=result.solve_time_s + priced.seconds - priced.build_s)
    objective = result.objective_usd_per_year
    if result.status not in HAS_PLAN or objective is None:
        # no plan: the record states pricing's bound of the full model, not the candidate MIP's own
        # (often HiGHS's 0 before its root). An infeasible or unbounded verdict is passed on as
        # the candidate model's: the diagnosis that follows runs on that model.
        if result.status in ("infeasible", "unbounded"):
            return result
        return replace(result, best_bound_usd_per_year=priced.full_lp_bound, gap=None,
                       termination=f"{result.termination}; bound: {priced.bound_kind}" if priced.full_lp_bound is not None
                       else result.termination)
    if priced.full_lp_bound is None:
        return replace(result, best_bound_usd_per_year=None, gap=None, status="feasible",
                       termination=f"{result.termination}; {priced.bound_kind}")
    bound = priced.full_lp_bound
    gap = max(0.0, objective - bound) / max(abs(objective), 1e-9)
    return replace(result, best_bound_usd_per_year=bound, gap=gap, status=gap_status(gap, mip_gap),
                   termination=f"{result.termination}; gap against {priced.bound_kind}")
