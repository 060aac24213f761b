"""Solve a multi-period scenario: one MIP over every period (optimizer.model.periods), then
each period's plan and the build schedule with its net present value (docs/periods.md).

    from dcplace.models import load_scenario
    from dcplace.optimizer.solving.periods import solve_periods
    schedule, plans = solve_periods(load_scenario("years.yaml"), SolveOptions(time_limit_s=120))

The NPV the schedule reports is recomputed from the period plans (each period's annual cost
less its capex annuities, times the period's discount weight) plus the builds' annuities
and the one-time hall costs, which is what the independent checker recomputes; the gap is
stated against the solver's bound of the whole multi-period model, or, when a period has more
eligible pairs than the model holds in full, against the sum of the periods' own bounds
(_price_each_period, _period_sum_bound).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace
from datetime import datetime, timezone

import numpy as np

from dcplace.models import Scenario, ScenarioError
from dcplace.models.errors import InputProblem
from dcplace.models.periods import period_scenarios
from dcplace.models.plan import HAS_PLAN, Plan, SolveRecord
from dcplace.models.schedule import BuildLine, HallLine, PeriodLine, Schedule
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.model.periods import (CAPEX_CATEGORIES, PeriodModel, annuities, build_period_sets, build_periods_model,
                                             capex_rise, start_from_periods, zone_it_kw)
from dcplace.optimizer.solvers.backends import gap_status, run_backend
from dcplace.optimizer.solvers.pairs import BOUND_TOLERANCE, GAP_SHARE, NO_BOUND, PricedLP, in_model_mask, solve_priced_lp
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.solving.budget import Budget
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.progress import ProgressCallback, as_feed
from dcplace.optimizer.solving.solve import (POST_SOLVE_RESERVE_S, POST_SOLVE_RESERVE_SHARE, InfeasibleScenario,
                                             NoPlanFound, SolveOptions, against_full_bound, plan_record, solve)

log = logging.getLogger(__name__)

START_SHARE = 0.4  # of the time limit, at most, for each period's own plan: the first incumbent (start_from_periods)
START_GAP = 0.01  # the gap each period's own plan is solved to
# at scale each period is priced and planned alone (_price_each_period) in this share of the time limit, at most
# (its plans, bought forward, are the start the multi-period search has seldom improved on in the rest) ...
PERIODS_PRICING_SHARE = 0.75
PERIOD_PRICING_SHARE = 0.65  # ... and of a period's own time, pricing its pairs takes at most this share; its plan the rest
PERIOD_SUM = ("the sum over periods of each period's own bound, the ties between periods relaxed (a Lagrangian bound "
              "of the multi-period model, optimizer.model.periods.capex_rise)")


def _in_period(problem: InputProblem, year: int) -> InputProblem:
    return replace(problem, message=f"in period {year}: {problem.message}")


def period_indexes(scenario: Scenario, options: SolveOptions):
    """(periods, single-year scenarios, index sets), with every period's precheck problems at once.
    A period with more than options.max_full_pairs eligible serving pairs starts from candidate
    pairs, as a single-year solve does; solve_periods then prices each period alone
    (_price_each_period) and builds the multi-period model over the pairs they brought in."""
    pairs = period_scenarios(scenario)
    ixs, problems = [], []
    for period, single in pairs:
        try:
            # rack dominance compares one period's economics; a rack bought now serves later periods too
            ixs.append(checked_index(single, options.max_full_pairs, replace(options.pruning, dominated_racks=False)))
        except ScenarioError as exc:
            problems += [_in_period(p, period.year) for p in exc.problems]
    if problems:
        raise ScenarioError(problems)
    return [p for p, _ in pairs], [s for _, s in pairs], ixs


def solve_periods(scenario: Scenario, options: SolveOptions | None = None, progress: ProgressCallback | None = None,
                  without: tuple[str, ...] = (), budget: Budget | None = None) -> tuple[Schedule, list[tuple[Plan, Scenario]]]:
    """The least-NPV build schedule of a scenario with periods, and each period's plan with its
    single-year scenario. Raises ScenarioError, InfeasibleScenario (the first period that has no
    plan even alone, with its diagnosis) or NoPlanFound. `without` leaves tie families out (tests).
    `budget`, if given, is the solve's time instead of options.time_limit_s from now (as for solve())."""
    if not scenario.periods:
        raise ValueError("the scenario has no periods: use solve()")
    options = options or SolveOptions()
    feed, owned = as_feed(progress, options.time_limit_s)
    budget = budget or Budget.of(options.time_limit_s)
    try:
        started, deadline = budget.started, budget.deadline
        feed.phase("index")
        periods, singles, ixs = period_indexes(scenario, options)
        index_s = time.perf_counter() - started

        def build(ixs):
            ps = build_period_sets(tuple(periods), singles, ixs, scenario.economics.discount_rate)
            return build_periods_model(ps, lambda ix: build_model(ix, cheapest=False), without)

        priced = None
        if any(len(ix.serve) < ix.eligible_pairs() for ix in ixs):
            # too many pairs to build: each period priced alone, its plan the start, the bound their sum
            feed.phase("pricing")
            pricing_began = time.perf_counter()
            singles_x, lps = _price_each_period(singles, ixs, options, started + PERIODS_PRICING_SHARE * budget.seconds)
            pricing_s = time.perf_counter() - pricing_began
            pm = build(ixs)
            priced = _period_sum_bound(pm, lps, pricing_s, time.perf_counter() - pricing_began - pricing_s, without)
            if feed:
                feed.fix_bound(priced.full_lp_bound)  # the candidate MIP's own bound proves nothing about the full model
            build_time = index_s + priced.build_s
            feed.phase("warm start")
            start_began = time.perf_counter()  # each period's plan was made in pricing's time
            start = start_from_periods(pm, [None if x is None else _on_columns(lm, x, pm.models[t])
                                            for t, (lm, x) in enumerate(singles_x)])
        else:
            feed.phase("build")
            pm = build(ixs)
            build_time = time.perf_counter() - started
            feed.phase("warm start")
            start_began = time.perf_counter()
            start = start_from_periods(pm, _period_plans(pm, options, started + START_SHARE * budget.seconds))
        reserve = min(POST_SOLVE_RESERVE_S, POST_SOLVE_RESERVE_SHARE * budget.seconds)
        start_s = time.perf_counter() - start_began
        feed.phase("search")
        remaining = max(deadline - time.perf_counter() - reserve, 1e-3)
        result, x = run_backend(pm.lm, None, replace(options, time_limit_s=remaining), incumbent=start,
                                progress=feed if feed else None)
        result = replace(result, solve_time_s=result.solve_time_s + start_s)  # the periods' own plans are part of the solve
        if priced is not None:
            result = against_full_bound(result, priced, options.mip_gap)
        if start is None:
            result = replace(result, warm_start="none: a period had no plan of its own in the time for the start")
        elif result.warm_start.startswith("the caller's start plan"):  # in the schedule's words and units
            how = "held back from HiGHS" if " held " in result.warm_start else "offered to HiGHS"
            result = replace(result, warm_start=f"each period's own plan, kept open and bought forward (NPV "
                             f"${float(pm.lm.objective() @ start):,.0f}), {how}")
        else:
            result = replace(result, warm_start=f"each period's own plan was not a feasible start ({result.warm_start})")
        record = dict(result.record(), build_time_s=build_time, options=asdict(options), model=pm.lm.size(),
                      pairs=priced.record() if priced else {})
        if result.status in ("infeasible", "unbounded"):
            raise _infeasible(scenario, singles, options, record, deadline)
        if result.status not in HAS_PLAN or x is None:
            raise NoPlanFound(scenario, plan_record(scenario, options, SolveRecord(**record), None, []))
        feed.phase("extract")
        return _schedule(scenario, options, pm, x, record)
    finally:
        if owned:
            feed.close()


def _price_each_period(singles: list[Scenario], ixs: list[IndexSets], options: SolveOptions, until: float
                       ) -> tuple[list[tuple[LinearModel, np.ndarray | None]], list[PricedLP]]:
    """Each period's single-year scenario as a single-year solve takes it (its own index, rack
    dominance on, pairs priced in: optimizer.solvers.pairs) and solved at a loose gap, in an equal
    share of the time to `until`: (its model and plan, or None) and its priced LP, per period.
    Dominance is sound here: the bound is of the period's single-year model, whose optimum it keeps.
    A period's plan keeps open the sites and zones the period before opened (they persist in the
    multi-period model: reusing them is what a start should do; its pricing and bound are of the
    model without that). `ixs[t]`, the multi-period model's index of the period, takes the pairs
    its pricing brought in (training placements all stay: they are not priced across periods)."""
    out, priced = [], []
    kept: dict[str, set] = {"open": set(), "zone": set()}
    for t, (single, ix) in enumerate(zip(singles, ixs)):
        share = max(until - time.perf_counter(), 0.0) / (len(ixs) - t)
        began = time.perf_counter()
        own = checked_index(single, options.max_full_pairs, options.pruning)
        lm, lp = solve_priced_lp(own, build_model, began + PERIOD_PRICING_SHARE * share, options.threads,
                                 max(BOUND_TOLERANCE, GAP_SHARE * options.mip_gap))
        for name, keys in kept.items():
            block = lm.blocks[name]
            for key in keys & block.pos.keys():
                i = block.pos[key]
                block.lower[i] = min(1.0, block.upper[i])
        x = None
        if all(plan is not None for _, plan in out):  # a start needs every period's plan: after a miss, price only
            left = max(began + share - time.perf_counter(), 1e-3)
            relaxation = (lp.x, lp.objective) if lp.x is not None else None
            result, x = run_backend(lm, own, replace(options, time_limit_s=left, mip_gap=max(options.mip_gap, START_GAP)),
                                    relaxation)
            x = x if result.status in HAS_PLAN else None
            log.info("period %d: %d pairs priced in %.1f s, its own plan %s after %.1f s (%s)", t, len(own.serve), lp.seconds,
                     result.status, time.perf_counter() - began, result.warm_start)
        out.append((lm, x))
        priced.append(lp)
        if x is not None:
            kept = {name: {key for key, i in lm.blocks[name].pos.items() if x[lm.blocks[name].start + i] > 0.5} for name in kept}
        mine = in_model_mask(own)
        ix.restrict_serve({w: mask | mine[w] if w in mine else mask for w, mask in in_model_mask(ix).items()})
    return out, priced


def _on_columns(source: LinearModel, x: np.ndarray, target: LinearModel) -> np.ndarray:
    """A plan's column values on another model of the same period, column by (block, key); the
    target's columns the source lacks are 0 (placements and racks a priced model left out)."""
    out = np.zeros(target.n_cols)
    for name, block in source.blocks.items():
        into = target.blocks.get(name)
        if into is None:
            continue
        for key, i in block.pos.items():
            j = into.pos.get(key)
            if j is not None:
                out[into.start + j] = x[block.start + i]
    return out


def _period_sum_bound(pm: PeriodModel, priced: list[PricedLP], seconds: float, build_s: float,
                      without: tuple[str, ...] = ()) -> PricedLP:
    """The bound of the whole multi-period model from each period's own (capex_rise's docstring
    has the argument): sum_t W_t x bound_t. It needs every period's bound, the stock ties that
    carry the capex (not left out by `without`), prices that never rise for an asset still alive
    (capex_rise), and the capex of the multi-period model's builds to be exactly the capex its
    periods' own models put on their racks (checked column by column). `seconds` is the time the
    periods' pricing and plans took, `build_s` that of the multi-period model's build."""
    ps = pm.sets
    dropped = sorted({"rack_stock", "fabric_stock"} & set(without))
    why = (f"{', '.join(dropped)} left out" if dropped else None) or capex_rise(ps) or _capex_elsewhere(pm)
    bounds = [lp.full_lp_bound for lp in priced]
    if why is None and any(b is None for b in bounds):
        why = "a period's own pricing gave no bound"
    bound = None if why else sum(ps.weight(t) * b for t, b in enumerate(bounds))
    return PricedLP(x=None, objective=None, full_lp_bound=bound, converged=all(lp.converged for lp in priced),
                    rounds=sum(lp.rounds for lp in priced),
                    pairs_in_model=sum(len(ix.serve) for ix in ps.ixs), pairs_eligible=sum(ix.eligible_pairs() for ix in ps.ixs),
                    seconds=seconds + build_s, build_s=build_s + sum(lp.build_s for lp in priced),
                    placements_in_model=sum(len(ix.place) for ix in ps.ixs), placements_eligible=sum(len(ix.place_all) for ix in ps.ixs),
                    bound_kind=PERIOD_SUM if why is None else f"{NO_BOUND}; the periods' sum does not bound it: {why}")


def _capex_elsewhere(pm: PeriodModel) -> str | None:
    """None when, in every period's own model, capex (CAPEX_CATEGORIES) sits only on racks and equals
    the annuity the multi-period model charges their builds; else the first column where it does not."""
    ps = pm.sets
    for t, model in enumerate(pm.models):
        rack_key = {block.start + i: key for name in ("racks_inf", "racks_trn") if (block := model.blocks.get(name))
                    for i, key in enumerate(block.keys)}
        for category in CAPEX_CATEGORIES:
            for j, usd in model.costs.get(category, {}).items():
                key = rack_key.get(j)
                if key is None:
                    return f"{category} on {model.column_name(j)} in {ps.years[t]}"
                charged = annuities(ps, t, key if category == "fabric" else key[:3], (category,)).get(category, 0.0)
                if abs(charged - usd) > 1e-6 * max(1.0, abs(usd)):
                    return f"{category} of {model.column_name(j)} in {ps.years[t]}: ${usd:,.2f} on the rack, ${charged:,.2f} on its build"
    return None


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
    status = gap_status(gap, options.mip_gap)
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
