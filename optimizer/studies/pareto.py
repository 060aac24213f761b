"""Trade-off curves: annual cost against carbon (epsilon constraint) or mean latency (weight).

- **carbon**: solve at least cost (emissions E0), then at a carbon price so high that
  emissions dominate (the least emissions E_min reachable), then with the carbon cap
  `policies.carbon_cap_t_per_year` at evenly spaced levels from E0 down to E_min. Each capped
  solve is the cheapest plan within its cap, so the points lie on the true frontier,
  including its non-convex parts.
- **latency**: mean RTT is not a constraint of the model, so it is traded by weight: a
  transport charge per tok/s per 1,000 km (`economics.transport_usd_per_tok_s_1000km_year`),
  raised geometrically (0, then 1/1000 of the top weight up to the top) where at the top
  moving traffic 1,000 km costs 4x the average serving cost. Distance is linear in RTT, so this is a weighted sum of cost and mean RTT;
  its points are the supported (convex-hull) points of that frontier. The cost reported
  is the plan's cost without the added charge.

Every point is an ordinary sweep member (optimizer/studies/batch.py): its own checked plan
folder under `points/`, solved in parallel, resumable.

Both ends are listed and drawn: `least-cost` and, for carbon, `least-carbon` (the solve
that finds the least emissions, its cost shown without the dominant carbon price). Every
point starts from the solved end plans that meet its limits (batch `starts`): the
least-carbon plan meets every cap and the least-cost plan meets every latency weight, so a
point that finds no plan of its own in its time limit (or a dearer one) reports the
cheapest of them, re-costed for its scenario and marked `feasible` with no claimed proof.
A point can still fail (an error, a crash); `failed_points` lists those, and the CLI exits 5.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from dcplace.models import Scenario, load_scenario
from dcplace.models.plan import HAS_PLAN, read_plan
from dcplace.models.schedule import read_schedule, schedule_kpis
from dcplace.models.outputs import claim_folder
from dcplace.models.records import CARBON_PRICE_USD_PER_T_MAX
from dcplace.models.sweep import Member, Sweep
from dcplace.optimizer.studies.batch import Progress, run_batch

TRADEOFFS = ("carbon", "latency")
DOMINANT_CARBON_FACTOR = 50.0  # carbon weighs 50x the whole cost: least emissions, cost as tie-break
LATENCY_WEIGHT_FACTOR = 4.0  # top weight: 1,000 km costs 4x the average serving cost per tok/s
LATENCY_WEIGHT_RANGE = 1000.0  # the smallest non-zero weight is the top one / 1000


class NoFrontier(RuntimeError):
    """The least-cost plan itself could not be found (infeasible scenario, bad input)."""


@dataclass
class FrontierPoint:
    name: str
    parameter: str  # what was set: "cap 12,345 t" or "weight 0.5 $/(tok/s·1000 km·yr)"
    status: str
    cost_usd_per_year: float | None
    mean_rtt_ms: float | None
    emissions_t_per_year: float | None
    efficient: bool = False
    folder: str = ""
    message: str = ""


def trace_pareto(
    scenario: Scenario | str | Path | None,
    out_dir: str | Path,
    tradeoff: str = "carbon",
    points: int = 6,
    workers: int = 1,
    options: dict[str, Any] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_stage: Callable[[list[str]], None] | None = None,
) -> list[FrontierPoint]:
    """Solve the points of the `tradeoff` curve into out_dir/points/; return them, cheapest first.

    `scenario` is a Scenario loaded from a file, a YAML path or None (the embedded default).
    `on_progress` hears each batch of points as run_batch reports it; `on_stage`, before each
    batch, the names of the points it solves (least-cost, then least-carbon, then the rest).
    """
    if tradeoff not in TRADEOFFS:
        raise ValueError(f"tradeoff must be one of {', '.join(TRADEOFFS)}, not {tradeoff!r}")
    if points < 2:
        raise ValueError("a frontier needs at least 2 points")
    loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)  # bad input fails before any solve
    steering = "carbon_price_usd_per_t" if tradeoff == "carbon" else "transport_usd_per_tok_s_1000km_year"
    overridden = [p.year for p in loaded.periods if steering in p.economics]
    if overridden:  # the curve steers the top-level price; a period's own price would not follow it
        raise ValueError(f"periods {', '.join(map(str, overridden))} set their own economics.{steering}, which the {tradeoff} "
                         f"trade-off steers at the top level: remove it from those periods to trace the curve")
    if not loaded.source_path:
        raise ValueError("the points are solved from the scenario's file: give a scenario loaded from a YAML file (write_scenario one made in memory)")
    base_path = Path(loaded.source_path)
    runs = claim_folder(out_dir, "pareto") / "points"

    def solve_members(members: list[Member], starts: dict[str, list[Path]] | None = None):
        sweep = Sweep(f"pareto-{tradeoff}", base_path, members, dict(options or {}))
        if on_stage is not None:
            on_stage([m.name for m in members])
        return {r.name: r for r in run_batch(sweep, runs, workers=workers, on_progress=on_progress, starts=starts).results}

    first = solve_members([Member("least-cost", {})])["least-cost"]
    if first.status not in HAS_PLAN:
        raise NoFrontier(f"the least-cost plan could not be found ({first.status}: {first.message}); fix the scenario first")
    cost0 = first.objective_usd_per_year
    ends = [(Member("least-cost", {}), "least cost", first)]
    if tradeoff == "carbon":
        members, labels, anchor = _carbon_members(loaded, runs, cost0, first.kpis["emissions_t_per_year"], points, solve_members)
        ends.append(anchor)
    else:
        members, labels = _latency_members(loaded, cost0, points)
    # Every point may start from the solved end plans; each keeps only those meeting its limits.
    end_folders = [runs / m.name for m, _, r in ends if r.status in HAS_PLAN]
    results = solve_members(members, {m.name: end_folders for m in members})
    frontier = [_point(runs / m.name, m, labels[m.name], results[m.name], loaded, tradeoff) for m in members]
    frontier.insert(0, _point(runs / "least-cost", ends[0][0], ends[0][1], first, loaded, tradeoff))
    if len(ends) > 1:
        frontier.append(_point(runs / ends[1][0].name, *ends[1], loaded, tradeoff))
    _mark_efficient(frontier, "emissions_t_per_year" if tradeoff == "carbon" else "mean_rtt_ms")
    return frontier


def failed_points(frontier: list[FrontierPoint]) -> list[FrontierPoint]:
    """The points that ended without a plan."""
    return [p for p in frontier if p.cost_usd_per_year is None]


def _carbon_members(scenario, runs: Path, cost0: float, emissions0: float, points: int, solve_members):
    base_price = scenario.economics.carbon_price_usd_per_t
    # within the input's range: a plan emitting next to nothing needs no higher price to reach its least
    dominant_price = min(base_price + DOMINANT_CARBON_FACTOR * cost0 / max(emissions0, 1e-9), CARBON_PRICE_USD_PER_T_MAX)
    anchor = solve_members([Member("least-carbon", {"economics.carbon_price_usd_per_t": round(dominant_price, 6)})])["least-carbon"]
    if anchor.status not in HAS_PLAN:
        raise NoFrontier(f"the least-carbon plan could not be found ({anchor.status}: {anchor.message})")
    emissions_min = anchor.kpis["emissions_t_per_year"]
    anchor_end = (Member("least-carbon", {"economics.carbon_price_usd_per_t": round(dominant_price, 6)}),
                  f"least emissions (carbon price {dominant_price:,.0f} $/t, not counted in the cost)", anchor)
    members, labels = [], {}
    for k in range(1, points):
        cap = emissions0 - (emissions0 - emissions_min) * k / (points - 1)
        cap = max(cap, emissions_min) * (1 + 1e-9)  # the anchor's own emissions must stay within the last cap
        name = f"cap-{k:02d}"
        members.append(Member(name, {"policies.carbon_cap_t_per_year": round(cap, 6)}))
        labels[name] = f"cap {cap:,.0f} t CO₂/yr"
    return members, labels, anchor_end


def _latency_members(scenario, cost0: float, points: int):
    base_rate = scenario.economics.transport_usd_per_tok_s_1000km_year
    demand = sum(sum(r.demand_tok_s.values()) for r in scenario.regions)
    top = LATENCY_WEIGHT_FACTOR * cost0 / max(demand, 1e-9)
    members, labels = [], {}
    for k in range(1, points):
        weight = top * LATENCY_WEIGHT_RANGE ** (-(points - 1 - k) / max(points - 2, 1))
        name = f"weight-{k:02d}"
        members.append(Member(name, {"economics.transport_usd_per_tok_s_1000km_year": round(base_rate + weight, 9)}))
        labels[name] = f"weight {weight:,.4g} $/(tok/s·1000 km·yr)"
    return members, labels


def _point(folder: Path, member: Member, label: str, result, scenario, tradeoff: str) -> FrontierPoint:
    point = FrontierPoint(member.name, label, result.status, None, None, None, folder=str(folder), message=result.message)
    if result.status not in HAS_PLAN:
        return point
    if (folder / "schedule.json").is_file():
        return _schedule_point(point, folder, member, scenario)
    plan = read_plan(folder)
    cost = plan.objective_usd_per_year
    if "economics.carbon_price_usd_per_t" in member.overrides:
        # The least-carbon anchor: remove the dominant price's share of its carbon line.
        price = member.overrides["economics.carbon_price_usd_per_t"]
        base_price = scenario.economics.carbon_price_usd_per_t
        cost -= plan.cost_breakdown_usd_per_year.get("carbon", 0.0) * (price - base_price) / price
    if plan.solve.warm_start.startswith("start plan"):
        point.message = plan.solve.termination
    if tradeoff == "latency" and member.overrides:
        # Remove the added weight: the plan's transport line at (base + weight) minus the base's share.
        rate = member.overrides["economics.transport_usd_per_tok_s_1000km_year"]
        base_rate = scenario.economics.transport_usd_per_tok_s_1000km_year
        cost -= plan.cost_breakdown_usd_per_year.get("transport", 0.0) * (rate - base_rate) / rate
    point.cost_usd_per_year = cost
    point.mean_rtt_ms = plan.kpis["mean_rtt_ms"]
    point.emissions_t_per_year = plan.kpis["emissions_t_per_year"]
    return point


def _schedule_point(point: FrontierPoint, folder: Path, member: Member, scenario) -> FrontierPoint:
    """A point of a scenario with periods: its cost is the schedule's NPV (less the same steering
    shares as a plan's), its emissions the largest annual emissions of any period (what the per-year
    cap bounds), its RTT the demand-weighted mean over the periods (models.schedule.schedule_kpis)."""
    schedule = read_schedule(folder)
    cost = schedule.npv_usd
    for key, category, base in (("economics.carbon_price_usd_per_t", "carbon", scenario.economics.carbon_price_usd_per_t),
                                ("economics.transport_usd_per_tok_s_1000km_year", "transport",
                                 scenario.economics.transport_usd_per_tok_s_1000km_year)):
        if key in member.overrides and member.overrides[key]:
            cost -= schedule.npv_breakdown_usd.get(category, 0.0) * (member.overrides[key] - base) / member.overrides[key]
    kpis = schedule_kpis(folder)
    point.cost_usd_per_year, point.mean_rtt_ms, point.emissions_t_per_year = cost, kpis["mean_rtt_ms"], kpis["emissions_t_per_year"]
    point.message = f"cost is the net present value over {len(schedule.periods)} periods (USD, not per year)"
    return point


def _mark_efficient(frontier: list[FrontierPoint], measure: str, rel_tol: float = 1e-6) -> None:
    """A point is efficient unless another is no worse in cost and in `measure` and better in one
    (differences within rel_tol of the value count as ties, so twin plans are both efficient)."""
    solved = [p for p in frontier if p.cost_usd_per_year is not None]

    def better(a: float, b: float) -> bool:
        return a < b - rel_tol * max(abs(a), abs(b), 1.0)

    def no_worse(a: float, b: float) -> bool:
        return not better(b, a)

    for p in solved:
        p.efficient = not any(
            no_worse(q.cost_usd_per_year, p.cost_usd_per_year) and no_worse(getattr(q, measure), getattr(p, measure))
            and (better(q.cost_usd_per_year, p.cost_usd_per_year) or better(getattr(q, measure), getattr(p, measure)))
            for q in solved if q is not p
        )


def frontier_table(frontier: list[FrontierPoint]) -> pd.DataFrame:
    return pd.DataFrame([asdict(p) for p in frontier])
