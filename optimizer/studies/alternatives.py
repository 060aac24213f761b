"""Near-optimal alternatives (modelling to generate alternatives, MGA): plans within a cost
slack of the recommended one that differ from it, and from each other, as much as possible in
which sites open and which host training.

    from dcplace.optimizer.studies.alternatives import near_optimal_alternatives
    study = near_optimal_alternatives("plan/", k=5, slack=0.02)    # PLAN/why/alternatives/alt-1 ... alt-5
    study.must_haves(), study.interchangeable()

The method (Hop-Skip-Jump MGA, Brill et al. 1982, as PyPSA and Calliope use it): the model of
the plan's scenario gets one more row, annual cost <= (1 + slack) x the plan's cost, and
alternatives are found one after another. Alternative i minimises

    sum_s n_open[s] * open[s] + sum_{j,s,f,x} n_train[s] * place[j,s,f,x] + TIE_WEIGHT * cost / plan cost

where n_open[s] counts the plans so far (the recommended one included) that open s and
n_train[s] those that train at s: a site every plan so far opens costs the most to open
again, so the search turns to the sites they left closed. The last term (at most
TIE_WEIGHT x (1 + slack), less than one site) only breaks ties towards the cheaper plan. For
each plan p so far a no-good row, sum_{s not in O_p} open[s] - sum_{s in O_p} open[s] >=
1 - |O_p|, makes the next one open a different set of sites, so every alternative differs
from every other plan by at least one opened or closed site.

Each search is handed a first plan that meets every row: the recommended plan with one more
closed candidate opened and idle (the cheapest fixed cost whose set is new), which is within
the slack whenever that fixed cost is. HiGHS then searches for `time_limit_s`; its best plan
is extracted, written as an ordinary plan folder and passed through the independent checker
(a plan that failed would raise PlanCheckFailed). Its record says `feasible`, with the gap
against the recommended plan's best bound (a bound for every plan of the scenario).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from dcplace.models.plan import Plan, SolveRecord, write_plan_folder
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.solvers.highs_model import HighsAbandoned
from dcplace.optimizer.solvers.lp import LpSession
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.solving.pipeline import PlanCheckFailed
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.solve import SolveOptions, plan_record
from dcplace.optimizer.studies.batch import failover_record, start_columns
from dcplace.optimizer.studies.explain import analysis_folder, plan_and_scenario, stamp, write_json

TIE_WEIGHT = 0.01
DEFAULT_SLACK = 0.02
DEFAULT_K = 5


@dataclass
class Alternative:
    name: str  # its plan folder's name
    cost_usd_per_year: float
    over_plan_share: float  # (cost - plan cost) / plan cost
    roles: dict[str, str]  # open site id -> role (training, inference, mixed, idle)
    differs_from_plan: int  # sites opened or closed against the recommended plan
    min_difference: int  # the fewest sites it differs by from any other plan of the study
    seconds: float
    search: str  # how the search ended
    checked: bool = True


@dataclass
class AlternativesStudy:
    plan: dict
    plan_objective_usd_per_year: float
    slack: float
    plan_roles: dict[str, str]
    alternatives: list[Alternative] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # site id -> name
    seconds: float = 0.0
    folder: str = ""
    note: str = ""

    def _all(self) -> list[dict[str, str]]:
        return [self.plan_roles] + [a.roles for a in self.alternatives]

    def must_haves(self) -> list[str]:
        """Sites every good plan opens (the recommended one and every alternative)."""
        return sorted(set.intersection(*(set(r) for r in self._all())))

    def interchangeable(self) -> list[str]:
        """Sites some good plans open and others do not."""
        every = [set(r) for r in self._all()]
        return sorted(set.union(*every) - set.intersection(*every))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> "AlternativesStudy":
        return cls(**{**doc, "alternatives": [Alternative(**a) for a in doc["alternatives"]]})


def _roles(plan: Plan) -> dict[str, str]:
    return {s.id: s.role for s in plan.sites if s.open}


def near_optimal_alternatives(plan_folder: str | Path, k: int = DEFAULT_K, slack: float = DEFAULT_SLACK,
                              out_dir: str | Path | None = None, time_limit_s: float = 60.0, threads: int = 1,
                              on_alternative=None) -> AlternativesStudy:
    """Up to `k` checked plans within `slack` of the plan's cost, as different as the search finds
    in `time_limit_s` each (see the module docstring); saved under PLAN/why/alternatives/.
    `on_alternative(Alternative)` hears each one as it is written."""
    if k < 1 or not 0 < slack < 1 or time_limit_s <= 0:
        raise ValueError("k >= 1, 0 < slack < 1 and time_limit_s > 0 are required")
    started = time.perf_counter()
    plan_folder = Path(plan_folder)
    plan, scenario = plan_and_scenario(plan_folder)
    folder = analysis_folder(plan_folder, "alternatives", out_dir)
    base_options = SolveOptions(**{key: plan.solve.options[key] for key in ("solver", "mip_gap", "seed", "max_full_pairs")
                                   if key in plan.solve.options}, time_limit_s=time_limit_s, threads=threads)
    build_started = time.perf_counter()
    ix = checked_index(scenario, base_options.max_full_pairs)
    lm = build_model(ix, cheapest=False)  # its objective is diversity under a cost cap, not cost: an idle site counts
    build_s = time.perf_counter() - build_started
    cost = lm.objective()
    base_cost = float(plan.objective_usd_per_year)
    cap = (1 + slack) * base_cost
    x0 = start_columns(plan, lm, ix)
    if x0 is None:
        raise ValueError("the plan uses a decision its scenario's model has no variable for; re-solve the plan first")
    h = LpSession(lm, threads)
    version = h.version
    nz = np.flatnonzero(cost)
    h.add_row(-math.inf, cap, nz.astype(np.int32), cost[nz])
    open_block = lm.blocks["open"]
    sites = list(open_block.keys)
    open_cols = np.arange(open_block.start, open_block.stop, dtype=np.int32)
    place_by_site: dict[str, list[int]] = {}
    for i, (_, s, _, _) in enumerate(lm.blocks["place"].keys):
        place_by_site.setdefault(s, []).append(lm.blocks["place"].start + i)
    found: list[set[str]] = [set(_roles(plan))]
    trains: list[set[str]] = [{j.site for j in plan.jobs}]
    study = AlternativesStudy(stamp(plan), base_cost, slack, _roles(plan), names={s.id: s.name for s in plan.sites},
                              folder=str(folder))
    for i in range(1, k + 1):
        _no_good(h, open_cols, sites, found[-1])
        weights = np.zeros(lm.n_cols)
        for s, col in zip(sites, open_cols):
            weights[col] = sum(s in f for f in found)
            for j in place_by_site.get(s, []):
                weights[j] = sum(s in t for t in trains)
        weights += TIE_WEIGHT * cost / base_cost
        h.change_costs(weights)
        start = _idle_start(x0, lm, ix, found, cap, cost)
        if start is not None:
            h.set_start(start)
        t = time.perf_counter()
        try:
            result = h.solve(t + time_limit_s)
            x, search = result.x, result.status
        except HighsAbandoned as exc:  # HiGHS did not stop at its deadline: its best plan so far
            x = None if exc.best is None else exc.best[0]
            search = "abandoned at the deadline"
            h = None
        seconds = time.perf_counter() - t
        if x is None:
            study.note = f"alternative {i}: no plan within {slack:.0%} that differs from the {len(found)} before it was found in {time_limit_s:g} s"
            break
        cols = lm.integer_columns()
        x[cols] = np.round(x[cols])
        if not lm.is_feasible(x) or cost @ x > cap * (1 + 1e-9):
            study.note = f"alternative {i}: the search's plan broke a limit after rounding; stopped"
            break
        alt = _write(plan, scenario, lm, ix, x, folder / f"alt-{i}", base_options, build_s, seconds, search, i, slack, version)
        roles = _roles(alt)
        a = Alternative(f"alt-{i}", float(alt.objective_usd_per_year), float(alt.objective_usd_per_year) / base_cost - 1, roles,
                        len(set(roles) ^ found[0]), min(len(set(roles) ^ f) for f in found), seconds, search)
        study.alternatives.append(a)
        found.append(set(roles))
        trains.append({j.site for j in alt.jobs})
        if on_alternative is not None:
            on_alternative(a)
        if h is None:  # an abandoned HiGHS instance is never used again
            study.note = f"alternative {i}: HiGHS did not stop at its deadline; the search stopped there"
            break
    for a in study.alternatives:  # against every other plan, the later ones included
        others = [set(study.plan_roles)] + [set(b.roles) for b in study.alternatives if b is not a]
        a.min_difference = min(len(set(a.roles) ^ o) for o in others)
    study.seconds = time.perf_counter() - started
    write_json(folder / "alternatives.json", study.to_dict())
    return study


def _no_good(h: LpSession, open_cols: np.ndarray, sites: list[str], opened: set[str]) -> None:
    """sum_{s not in O} open[s] - sum_{s in O} open[s] >= 1 - |O|: the next plan opens another set of sites."""
    coef = np.array([-1.0 if s in opened else 1.0 for s in sites])
    h.add_row(1.0 - len(opened), math.inf, open_cols, coef)


def _idle_start(x0: np.ndarray, lm, ix, found: list[set[str]], cap: float, cost: np.ndarray) -> np.ndarray | None:
    """The plan with the closed site of least fixed cost opened idle whose open set is new (within the cap)."""
    base = found[0]
    for s in sorted((s for s in ix.sites if s not in base), key=lambda s: (ix.sites[s].fixed_cost_usd_per_year, s)):
        if base | {s} in found:
            continue
        x = x0.copy()
        x[lm.col("open", s)] = 1.0
        if cost @ x <= cap and lm.is_feasible(x):
            return x
        return None
    return None


def _write(plan: Plan, scenario, lm, ix, x, folder: Path, options: SolveOptions, build_s: float, seconds: float, search: str,
           i: int, slack: float, version: str) -> Plan:
    parts = extract(x, lm, ix)
    bound = plan.solve.best_bound_usd_per_year
    objective = parts["objective"]
    gap = None if bound is None else max(0.0, objective - bound) / max(abs(objective), 1e-9)
    record = SolveRecord(
        solver="highs", solver_version=version, status="feasible",
        termination=f"near-optimal alternative {i} (MGA, within {slack:.0%} of the recommended plan's cost); search: {search}",
        objective_usd_per_year=objective, best_bound_usd_per_year=bound, gap=gap, build_time_s=build_s, solve_time_s=seconds,
        warm_start="the recommended plan with one closed site opened idle", options=asdict(options), model=lm.size(),
        failover=failover_record(ix, lm, x, objective),
    )
    alt = plan_record(scenario, options, record, parts, [])

    def verify(staged: Path) -> None:
        report = check_plan_folder(staged)
        if not report.ok:
            raise PlanCheckFailed(report)

    write_plan_folder(alt, scenario, folder, verify=verify)
    return alt


__all__ = ["Alternative", "AlternativesStudy", "DEFAULT_K", "DEFAULT_SLACK", "near_optimal_alternatives"]
