"""What each site is worth: the cost of doing without an open site, and what a closed
candidate lacks to enter.

    from dcplace.optimizer.studies.worth import site_worth
    study = site_worth("plan/", workers=2)            # PLAN/why/worth/: one plan folder per re-solve
    for w in study.items: print(w.name, w.worth_usd_per_year, w.tie)

* **An open site's worth** is the increase of the least annual cost when the site is
  forbidden (`policies.forbidden_sites` + the site): a full re-solve, not an estimate. A
  site without which some region has no site within its latency budget, or no plan exists,
  is *indispensable* (no number: there is no plan without it).
* **A closed candidate's entry price** is the increase of the least cost when the site is
  forced open (`policies.forced_sites` + the site): it would enter the plan if its annual
  cost (its fixed cost, say) fell by more than that. The candidates priced are the closed
  sites the open sites' re-solves open most often in their place (the substitutes), then
  those nearest to entering by the LP relaxation (`entry_candidates`).

Every re-solve is a member of an ordinary sweep run by the batch engine
(optimizer/studies/batch.py): parallel over `workers`, each member a checked plan folder,
resumable (a re-run skips members already solved for the same inputs and options). Each
member is offered the plan itself as its first incumbent where the plan meets the member's
limits (a forced-open candidate: the plan with the site opened and idle); a forbidden site's
member cannot start from the plan, which uses the site, and starts from HiGHS's rounded LP
relaxation like any solve.

Both solves stop within their gaps, so a worth is known only within an interval:
[member bound - plan cost, member cost - plan bound]. A worth whose interval holds 0 is a
**tie**: the solver cannot tell the plan with the site from the plan without it.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dcplace.models import Scenario
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.models.sweep import Member, Sweep, member_slug
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.solvers.lp import solve_lp
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.studies.batch import Progress, run_batch, start_columns
from dcplace.optimizer.studies.explain import analysis_folder, plan_and_scenario, stamp, write_json

ENTRY_CANDIDATES = 5


@dataclass
class SiteWorth:
    site: str
    name: str
    kind: str  # "open" (worth: cost if forbidden) or "closed" (entry price: cost if forced open)
    role: str  # the site's role in the plan
    member: str  # the re-solve's folder name
    status: str  # the re-solve's status (optimal, feasible, infeasible, bad_input, ...)
    objective_usd_per_year: float | None = None
    worth_usd_per_year: float | None = None  # re-solve cost - plan cost; None: no plan (indispensable) or failed
    worth_low_usd_per_year: float | None = None  # member bound - plan cost
    worth_high_usd_per_year: float | None = None  # member cost - plan bound
    tie: bool = False  # the interval holds 0: the value is within the solvers' gaps
    opens: list[str] = field(default_factory=list)  # sites the re-solve opens that the plan does not
    closes: list[str] = field(default_factory=list)  # sites the plan opens that the re-solve closes (the site itself left out)
    seconds: float = 0.0
    message: str = ""

    @property
    def indispensable(self) -> bool:
        return self.kind == "open" and self.status in ("infeasible", "bad_input")


@dataclass
class WorthStudy:
    plan: dict
    plan_objective_usd_per_year: float
    plan_bound_usd_per_year: float | None
    items: list[SiteWorth]
    options: dict[str, Any]
    workers: int
    seconds: float
    folder: str = ""

    def open_sites(self) -> list[SiteWorth]:
        return [w for w in self.items if w.kind == "open"]

    def candidates(self) -> list[SiteWorth]:
        return [w for w in self.items if w.kind == "closed"]

    def failed(self) -> list[SiteWorth]:
        """Re-solves that ended without a result for a reason other than the site being indispensable."""
        return [w for w in self.items if w.worth_usd_per_year is None and not w.indispensable]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> "WorthStudy":
        return cls(**{**doc, "items": [SiteWorth(**w) for w in doc["items"]]})


def plan_start(plan_folder: str, also_open: tuple[str, ...], lm, ix) -> np.ndarray | None:
    """The plan's decisions as a first incumbent of a member's model, with `also_open` sites
    opened and idle; None when the plan uses a site the member forbids (batch start_fns)."""
    x = start_columns(read_plan(plan_folder), lm, ix)
    if x is None:
        return None
    for s in also_open:
        if s not in ix.sites:
            return None
        x[lm.col("open", s)] = 1.0
    return x


def entry_candidates(scenario: Scenario, plan: Plan, n: int = ENTRY_CANDIDATES) -> list[str]:
    """The `n` closed candidates nearest to entering by the LP relaxation of the whole model: those it opens most,
    then (among those it leaves closed) those whose `open` column has the least reduced cost."""
    if n <= 0:
        return []
    ix = checked_index(scenario)
    lm = build_model(ix)
    result = solve_lp(lm, relax=True)
    if not result.optimal:
        return []
    x, reduced = result.x, result.col_dual
    opened = {s.id for s in plan.sites if s.open}
    ranked = sorted((s for s in ix.sites if s not in opened),
                    key=lambda s: (-round(x[lm.col("open", s)], 9), round(reduced[lm.col("open", s)], 6), ix.sites[s].fixed_cost_usd_per_year, s))
    return ranked[:n]


def site_worth(plan_folder: str | Path, out_dir: str | Path | None = None, workers: int = 1,
               options: dict[str, Any] | None = None, sites: list[str] | None = None,
               closed_candidates: int | list[str] = ENTRY_CANDIDATES,
               on_progress: Callable[[Progress], None] | None = None) -> WorthStudy:
    """Re-solve the plan's scenario without each open site (all, or `sites`) and with each notable
    closed candidate forced open; saved as PLAN/why/worth/worth.json with one plan folder per re-solve.

    `options`: SolveOptions fields for every re-solve (default: the plan's own time limit and gap,
    one thread each); `closed_candidates`: how many (or which) closed sites to price."""
    started = time.perf_counter()
    plan_folder = Path(plan_folder)
    plan, scenario = plan_and_scenario(plan_folder)
    names = {s.id: s for s in plan.sites}
    opened = [s.id for s in plan.sites if s.open]
    chosen = opened if sites is None else [s for s in sites if s in names]
    unknown = [s for s in (sites or []) if s not in names or not names[s].open]
    if unknown:
        raise ValueError(f"not open in the plan: {', '.join(unknown)}; give ids of open sites (sites.csv of the plan folder)")
    pol = scenario.policies
    solve_options = {"time_limit_s": plan.solve.options.get("time_limit_s", 300.0), "mip_gap": plan.solve.options.get("mip_gap", 5e-3),
                     **(options or {})}
    folder = analysis_folder(plan_folder, "worth", out_dir)
    base = plan_folder.resolve() / "inputs" / "scenario.yaml"
    kinds: dict[str, tuple[str, str]] = {}

    def member(kind: str, s: str) -> Member:
        if kind == "open":
            m = Member(member_slug(f"without-{s}"), {"policies.forbidden_sites": sorted(set(pol.forbidden_sites) | {s})})
        else:
            m = Member(member_slug(f"with-{s}"), {"policies.forced_sites": sorted(set(pol.forced_sites) | {s})})
        kinds[m.name] = (kind, s)
        return m

    def run(members: list[Member]):
        starts = {m.name: functools.partial(plan_start, str(plan_folder.resolve()), (kinds[m.name][1],) if kinds[m.name][0] == "closed" else ())
                  for m in members}
        return run_batch(Sweep("site-worth", base, members, solve_options), folder, workers=workers, on_progress=on_progress,
                         start_fns=starts)

    members = [member("open", s) for s in chosen]
    if isinstance(closed_candidates, int):
        # the substitutes the re-solves open most often, then the LP relaxation's nearest (entry_candidates)
        first = run(members) if closed_candidates > 0 else None
        counts: dict[str, int] = {}
        for r in (first.results if first else []):
            if r.status in HAS_PLAN:
                for x in read_plan(folder / r.name).sites:
                    if x.open and x.id in names and not names[x.id].open:
                        counts[x.id] = counts.get(x.id, 0) + 1
        candidates = sorted(counts, key=lambda s: (-counts[s], s))[:closed_candidates]
        if len(candidates) < closed_candidates:
            candidates += [s for s in entry_candidates(scenario, plan, closed_candidates) if s not in candidates][:closed_candidates - len(candidates)]
    else:
        candidates = [s for s in closed_candidates if s in names and not names[s].open]
    members += [member("closed", s) for s in candidates]
    result = run(members)  # members already solved are skipped (resume): batch.json lists them all
    objective = float(plan.objective_usd_per_year)
    bound = plan.solve.best_bound_usd_per_year
    items = []
    for r in result.results:
        kind, s = kinds[r.name]
        w = SiteWorth(s, names[s].name, kind, names[s].role, r.name, r.status, r.objective_usd_per_year, seconds=r.seconds,
                      message=r.message)
        if r.status in HAS_PLAN and r.objective_usd_per_year is not None:
            other = read_plan(folder / r.name)
            w.worth_usd_per_year = r.objective_usd_per_year - objective
            member_bound = other.solve.best_bound_usd_per_year
            w.worth_low_usd_per_year = None if member_bound is None else member_bound - objective
            w.worth_high_usd_per_year = r.objective_usd_per_year - (bound if bound is not None else objective)
            w.tie = w.worth_low_usd_per_year is None or w.worth_low_usd_per_year <= 0.0
            mine = {x.id for x in other.sites if x.open}
            w.opens = sorted(mine - set(opened) - {s})
            w.closes = sorted(set(opened) - mine - {s})
        items.append(w)
    study = WorthStudy(stamp(plan), objective, bound, items, solve_options, workers, time.perf_counter() - started, str(folder))
    write_json(folder / "worth.json", study.to_dict())
    return study


__all__ = ["ENTRY_CANDIDATES", "SiteWorth", "WorthStudy", "entry_candidates", "plan_start", "site_worth"]
