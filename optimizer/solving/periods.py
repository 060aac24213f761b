"""Solve a multi-period scenario: one MIP over every period (optimizer.model.periods), then
each period's plan and the build schedule with its net present value (docs/periods.md).

    from dcplace.models import load_scenario
    from dcplace.optimizer.solving.periods import solve_periods
    schedule, plans = solve_periods(load_scenario("years.yaml"), SolveOptions(time_limit_s=120))

The NPV the schedule reports is recomputed from the period plans (each period's annual cost
less its capex annuities, times the period's discount weight) plus the builds' annuities
and the one-time hall costs, which is what the independent checker recomputes; the gap is
stated against the solver's bound of the whole multi-period model.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from datetime import datetime, timezone

import numpy as np

from dcplace.models import Scenario, ScenarioError
from dcplace.models.errors import InputProblem
from dcplace.models.periods import period_scenarios
from dcplace.models.plan import HAS_PLAN, Plan, SolveRecord
from dcplace.models.schedule import BuildLine, HallLine, PeriodLine, Schedule
from dcplace.optimizer.model.formulation import OPTIMALITY_ROWS, build_model
from dcplace.optimizer.model.periods import (CAPEX_CATEGORIES, PeriodModel, annuities, build_period_sets, build_periods_model,
                                             start_from_periods, zone_it_kw)
from dcplace.optimizer.solvers.backends import run_backend
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.progress import ProgressCallback, as_feed
from dcplace.optimizer.solving.solve import (POST_SOLVE_RESERVE_S, POST_SOLVE_RESERVE_SHARE, InfeasibleScenario, NoPlanFound,
                                             SolveOptions, plan_record, solve)

START_SHARE = 0.4  # of the time limit, at most, for each period's own plan: the first incumbent (start_from_periods)
START_GAP = 0.01  # the gap each period's own plan is solved to
ALL_PAIRS = 10**12  # a multi-period model is built over every eligible pair (no candidate pricing across periods yet)


def _in_period(problem: InputProblem, year: int) -> InputProblem:
    return replace(problem, message=f"in period {year}: {problem.message}")


def period_indexes(scenario: Scenario, options: SolveOptions):
    """(periods, single-year scenarios, index sets), with every period's precheck problems at once."""
    pairs = period_scenarios(scenario)
    ixs, problems = [], []
    for period, single in pairs:
        try:
            # rack dominance compares one period's economics; a rack bought now serves later periods too
            ixs.append(checked_index(single, ALL_PAIRS, replace(options.pruning, dominated_racks=False)))
        except ScenarioError as exc:
            problems += [_in_period(p, period.year) for p in exc.problems]
    if problems:
        raise ScenarioError(problems)
    too_many = [(period.year, ix.eligible_pairs()) for (period, _), ix in zip(pairs, ixs) if ix.eligible_pairs() > options.max_full_pairs]
    if too_many:
        # every pair of every period would be a column and two rows: at 500 x 3,000 that is 2.4 M pairs a period
        raise ScenarioError([InputProblem(
            scenario.source_path or scenario.name, None, "periods",
            f"period {year} has {n:,} eligible (region, class, site) serving pairs, above the {options.max_full_pairs:,} "
            "a model holds in full (--max-full-pairs); a multi-period model holds every pair of every period, because "
            "candidate pricing does not yet reach across periods (docs/periods.md).",
            "raise --max-full-pairs to build it anyway, solve the periods one at a time (each single-year solve prices "
            "its pairs in), or narrow the regions' rtt budgets.") for year, n in too_many])
    return [p for p, _ in pairs], [s for _, s in pairs], ixs


def solve_periods(scenario: Scenario, options: SolveOptions | None = None, progress: ProgressCallback | None = None,
                  without: tuple[str, ...] = ()) -> tuple[Schedule, list[tuple[Plan, Scenario]]]:
    """The least-NPV build schedule of a scenario with periods, and each period's plan with its
    single-year scenario. Raises ScenarioError, InfeasibleScenario (the first period that has no
    plan even alone, with its diagnosis) or NoPlanFound. `without` leaves tie families out (tests)."""
    if not scenario.periods:
        raise ValueError("the scenario has no periods: use solve()")
    options = options or SolveOptions()
    feed, owned = as_feed(progress, options.time_limit_s)
    try:
        started = time.perf_counter()
        deadline = started + options.time_limit_s
        feed.phase("index")
        periods, singles, ixs = period_indexes(scenario, options)
        feed.phase("build")
        ps = build_period_sets(tuple(periods), singles, ixs, scenario.economics.discount_rate)
        pm = build_periods_model(ps, lambda ix: build_model(ix, without=OPTIMALITY_ROWS), without)
        build_time = time.perf_counter() - started
        reserve = min(POST_SOLVE_RESERVE_S, POST_SOLVE_RESERVE_SHARE * options.time_limit_s)
        feed.phase("warm start")
        start_began = time.perf_counter()
        start = start_from_periods(pm, _period_plans(pm, options, started + START_SHARE * options.time_limit_s))
        start_s = time.perf_counter() - start_began
        feed.phase("search")
        remaining = max(deadline - time.perf_counter() - reserve, 1e-3)
        result, x = run_backend(pm.lm, None, replace(options, time_limit_s=remaining), incumbent=start,
                                progress=feed if feed else None)
        result = replace(result, solve_time_s=result.solve_time_s + start_s)  # the periods' own plans are part of the solve
        if start is None:
            result = replace(result, warm_start="none: a period had no plan of its own in the time for the start")
        elif result.warm_start.startswith("the caller's start plan"):  # in the schedule's words and units
            how = "held back from HiGHS" if " held " in result.warm_start else "offered to HiGHS"
            result = replace(result, warm_start=f"each period's own plan, kept open and bought forward (NPV "
                             f"${float(pm.lm.objective() @ start):,.0f}), {how}")
        else:
            result = replace(result, warm_start=f"each period's own plan was not a feasible start ({result.warm_start})")
        record = dict(result.record(), build_time_s=build_time, options=asdict(options), model=pm.lm.size())
        if result.status in ("infeasible", "unbounded"):
            raise _infeasible(scenario, singles, options, record, deadline)
        if result.status not in HAS_PLAN or x is None:
            raise NoPlanFound(scenario, plan_record(scenario, options, SolveRecord(**record), None, []))
        feed.phase("extract")
        return _schedule(scenario, options, pm, x, record)
    finally:
        if owned:
            feed.close()


def _period_plans(pm: PeriodModel, options: SolveOptions, until: float) -> list[np.ndarray | None]:
    """Each period's own plan (its single-year model alone, at a loose gap) within the time to `until`,
    the time shared by model size; a period without a plan by then gives None (and no start)."""
    sizes = [m.n_cols for m in pm.models]
    xs: list[np.ndarray | None] = []
    for t, (model, ix) in enumerate(zip(pm.models, pm.sets.ixs)):
        left = until - time.perf_counter()
        if left <= 0.5:
            return xs + [None] * (len(sizes) - t)
        share = left * sizes[t] / sum(sizes[t:])
        result, x = run_backend(model, ix, replace(options, time_limit_s=share, mip_gap=max(options.mip_gap, START_GAP)))
        xs.append(x if result.status in HAS_PLAN else None)
    return xs


def _infeasible(scenario: Scenario, singles: list[Scenario], options: SolveOptions, record: dict, deadline: float) -> Exception:
    """The first period with no plan even on its own, with its diagnosis; else the ties are to blame."""
    for single in singles:
        left = deadline - time.perf_counter()
        if left < 1.0:
            break
        try:
            solve(single, replace(options, time_limit_s=left))
        except InfeasibleScenario as exc:
            return exc
        except NoPlanFound:
            break
    note = ("every period has a plan on its own but not together: what persists (sites, zones, racks within their "
            "life) or a policy over the periods cannot be met; solve the periods one by one to compare")
    return InfeasibleScenario(scenario, plan_record(scenario, options, SolveRecord(**record), None, [note]))


def _schedule(scenario: Scenario, options: SolveOptions, pm: PeriodModel, x: np.ndarray, record: dict):
    ps = pm.sets
    extract_start = time.perf_counter()
    plans: list[tuple[Plan, Scenario]] = []
    lines: list[PeriodLine] = []
    breakdown: dict[str, float] = {}
    for t, (period, single, ix) in enumerate(zip(ps.periods, ps.scenarios, ps.ixs)):
        parts = extract(pm.period_x(x, t), pm.models[t], ix)
        # "feasible": the period's plan is part of the schedule's optimum, not the optimum of its year alone
        own = SolveRecord(**{**record, "objective_usd_per_year": parts["objective"], "best_bound_usd_per_year": None, "gap": None,
                             "status": "feasible",
                             "termination": f"period {period.year} of a multi-period schedule ({record['termination']}); "
                                            "the gap is the schedule's (schedule.json)", "model": pm.models[t].size()})
        plan = plan_record(single, options, own, parts, [])
        rerun = plan_record(scenario, options, own, None, []).provenance["rerun"].replace("inputs/scenario.yaml", "../../inputs/scenario.yaml")
        plan = plan.model_copy(update={"provenance": {**plan.provenance, "rerun": rerun, "part_of": "the schedule in ../../ "
                                                      "(docs/periods.md): re-running this period alone gives its single-year optimum"}})
        plans.append((plan, single))
        capex = sum(plan.cost_breakdown_usd_per_year.get(c, 0.0) for c in CAPEX_CATEGORIES)
        weight = ps.weight(t)
        for category, usd in plan.cost_breakdown_usd_per_year.items():
            if category not in CAPEX_CATEGORIES and usd:
                breakdown[category] = breakdown.get(category, 0.0) + usd * weight
        it_kw = {"inference": 0.0, "training": 0.0}
        for site in plan.sites:
            for line in site.racks:
                it_kw[line.purpose] += line.it_kw
        lines.append(PeriodLine(
            year=period.year, years=period.years, weight=weight, discount_at_start=ps.discount(period.year),
            annual_usd_per_year=plan.objective_usd_per_year, capex_annuities_usd_per_year=capex,
            operating_npv_usd=(plan.objective_usd_per_year - capex) * weight, sites_open=sum(s.open for s in plan.sites),
            it_mw=sum(it_kw.values()) / 1000.0, inference_it_mw=it_kw["inference"] / 1000.0, training_it_mw=it_kw["training"] / 1000.0,
            demand_tok_s=sum(ix.demand(r, w) for r in ix.regions for w in ix.workloads)))
    builds = _builds(pm, x, breakdown)
    halls = _halls(pm, x, breakdown)
    npv = sum(line.operating_npv_usd for line in lines) + sum(b.npv_usd for b in builds) + sum(h.npv_usd for h in halls)
    bound = record.get("best_bound_usd_per_year")
    gap = max(0.0, npv - bound) / max(abs(npv), 1e-9) if bound is not None else None
    status = "optimal" if gap is not None and gap <= options.mip_gap + 1e-12 else "feasible"
    solve_record = SolveRecord(**{**record, "objective_usd_per_year": npv, "gap": gap, "status": status,
                                  "extract_time_s": time.perf_counter() - extract_start,
                                  "termination": f"{record['termination']}; objective and bound are net present values in USD"})
    schedule = Schedule(
        scenario=scenario.name, scenario_hash=scenario.content_hash, created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        solve=solve_record, npv_usd=npv, npv_breakdown_usd={c: v for c, v in breakdown.items() if v}, discount_rate=ps.rate,
        base_year=ps.periods[0].year, periods=lines, builds=builds, halls=halls,
        provenance=plan_record(scenario, options, solve_record, None, []).provenance)
    return schedule, plans


def _builds(pm: PeriodModel, x: np.ndarray, breakdown: dict[str, float]) -> list[BuildLine]:
    ps, lm = pm.sets, pm.lm
    out = []
    for block, kind, categories, life_of in (("build_racks", "racks", ("chips", "cooling_capex"), ps.rack_life),
                                              ("build_fabric", "fabric", ("fabric",), ps.fabric_life)):
        b = lm.blocks[block]
        for i, (t, key) in enumerate(b.keys):
            count = int(round(x[b.start + i]))
            if count <= 0:
                continue
            life = life_of(t, key)
            served = [u for u in range(t, len(ps.periods)) if ps.serves(t, u, life)]
            last = ps.periods[served[-1]] if served else ps.periods[t]
            annuity = annuities(ps, t, key, categories)
            weight = ps.served_weight(t, life)
            for category, usd in annuity.items():
                breakdown[category] = breakdown.get(category, 0.0) + count * usd * weight
            rack = ps.ixs[t].racks[key[1]]
            out.append(BuildLine(year=ps.years[t], site=key[0], kind=kind, config=key[1], chip=rack.chip, cooling=key[2],
                                 fabric=key[3] if kind == "fabric" else None, count=count,
                                 gpus_per_rack=rack.gpus_per_rack, life_years=life,
                                 serves_through_year=last.year + last.years - 1 if served else ps.years[t] - 1,
                                 annuity_usd_per_year=annuity, charged_weight=weight, npv_usd=count * sum(annuity.values()) * weight))
    return out


def _halls(pm: PeriodModel, x: np.ndarray, breakdown: dict[str, float]) -> list[HallLine]:
    ps, lm = pm.sets, pm.lm
    out = []
    value = {block: lm.blocks[block] for block in ("ready_kw", "retrofit_kw")}
    for i, (year, s, c) in enumerate(value["ready_kw"].keys):
        ready, retrofit = (float(x[b.start + i]) for b in value.values())
        if max(ready, retrofit) <= 1e-6:
            continue
        t = ps.years.index(year)
        cooling = ps.ixs[t].cooling[c]
        it_kw = sum(x[j] * kw for j, kw in zone_it_kw(pm, t, s, c))
        npv = (ready * cooling.ready_usd_per_kw + retrofit * cooling.retrofit_usd_per_kw) * ps.discount(year)
        breakdown["halls"] = breakdown.get("halls", 0.0) + npv
        out.append(HallLine(year=year, site=s, cooling=c, it_kw=it_kw, ready_kw=ready, retrofit_kw=retrofit,
                            ready_usd_per_kw=cooling.ready_usd_per_kw, retrofit_usd_per_kw=cooling.retrofit_usd_per_kw, npv_usd=npv))
    return out
