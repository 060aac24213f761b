"""Why a scenario has no plan, in the user's words.

After an infeasible solve, `diagnose` rebuilds the model in elastic mode: each relaxable
constraint family gets a named, non-negative slack, and the model minimises the total
slack, each measured against its own limit (a power overage as a share of the site's
power, a carbon excess as a share of the cap, ...); unserved demand and unplaced jobs
weigh a million times more, so they are named only when no limit can make room. When
several limits move together, each is re-solved alone, and one that can make room by
itself is named first, with the least it needs. The slacks that stay
positive are the limits that must move, and by how much:

    region Lagos 'chat' demand 768,000 tok/s is short by 412,000 tok/s within 40 ms
    site Frankfurt power 80.0 MW is over by 12.4 MW

HiGHS's irreducible infeasible subset of the LP relaxation, where the installed highspy
has one and the LP relaxation is itself infeasible, is appended: the smallest set of
rows that cannot hold together, by constraint name.

The elastic model is the formulation's own LinearModel with a slack column added to each
relaxable row, family by family, as the registry (optimizer.model.families) says: which
families are relaxed, in which direction, against what magnitude, and in what words. It is
solved by highspy under the caller's deadline (optimizer.solvers.lp, under highs_model.run_until), like every other run:
a diagnosis that runs out of time returns what it found, and never leaves the process's
output redirected (Pyomo's HiGHS interface captures file descriptors 1 and 2 for the length
of a solve, which swallowed a caller's output when a diagnosis was left behind).
"""

from __future__ import annotations

import dataclasses
import math
import time

from dcplace.optimizer.model.families import relaxable
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import HighsAbandoned
from dcplace.optimizer.solvers.lp import LpSession, iis_available, solve_lp

SLACK_TOL = 1e-7  # on t, the violation relative to the row's own magnitude
ALONE_TRIES = 3  # when several limits move together, how many are re-solved alone


def elastic_model(ix: IndexSets, only: set | None = None) -> tuple[LinearModel, list[tuple[str, object, int, float]]]:
    """The model with every relaxable family (families.relaxable(); `only`: just these
    (family, key) rows) given slack, and (family, key, slack column, magnitude) per slack;
    the objective is the total weighted relative slack (the cost categories are replaced).

    Row (family, key) gets slack magnitude * t, t >= 0 dimensionless, penalised weight * t:
    a budget's slack is measured against the budget, a site's power against its limit. (A
    slack in dollars weighted 1 / budget had a cost of ~1e-8 per dollar, under HiGHS's dual
    tolerance: the solver took it as free and reported billions where millions were short.)
    An equality or a "short" row gains +magnitude * t (it may fall short of its lower
    limit), an "over" row -magnitude * t (it may exceed its upper one); the other side of a
    ranged row stays as it was.
    """
    # racks are bounded by what a site's power and floor admit (the tightest big-M); in
    # elastic mode those limits may move, so the bounds widen to what any slack could need
    roomy = max((site.floor_racks for site in ix.sites.values()), default=0) * 10 + 1000
    # the objective is the moves, not cost: a row that only holds for a cheapest plan tightens nothing here
    lm = build_model(dataclasses.replace(ix, rack_limit={key: roomy for key in ix.rack_limit}), cheapest=False)
    lower, upper = lm.row_bounds()
    chosen = []
    for family, relax in relaxable().items():
        if family not in lm.families:
            continue
        for key, row in lm.families[family].rows().items():
            if only is None or (family, key) in only:
                chosen.append((family, key, row, relax))
    block = lm.add_block("elastic_slack", [(family, key) for family, key, _, _ in chosen], 0.0, math.inf, "continuous")
    lm.costs = {"elastic_slack": {}}
    slacks = []
    for i, (family, key, row, relax) in enumerate(chosen):
        magnitude = float(relax.magnitude(ix, key))
        shortfall = lower[row] == upper[row] or relax.direction == "short"
        lm.add_to_row(row, block.start + i, magnitude if shortfall else -magnitude)
        lm.add_cost("elastic_slack", block.start + i, relax.weight)
        slacks.append((family, key, block.start + i, magnitude))
    return lm, slacks


@dataclasses.dataclass(frozen=True)
class ElasticResult:
    """The rows an elastic solve moved: (family, key, amount in the family's unit, relative t)
    each; and the solve's proven lower bound on the total weighted move (`objective_bound`),
    equal to the moves' own total when the solve finished within its gap."""

    moved: list[tuple[str, object, float, float]]
    objective: float
    objective_bound: float

    @property
    def proven(self) -> bool:
        return self.objective - self.objective_bound <= 1e-4 * max(abs(self.objective), 1e-9)

    def bound_note(self) -> str:
        """Where the search stopped short of proof with one limit moved: the share of its move
        that the bound proves is needed (no plan moving that limit alone needs less)."""
        if self.proven or len(self.moved) != 1 or self.objective <= 0:
            return ""
        # floored, not rounded: a proven share shown as 100.0 % would claim the proof it lacks
        share_pct = math.floor(max(self.objective_bound, 0.0) / self.objective * 10_000) / 100
        return (f" (the least found by the time limit; at least {share_pct:.2f} % of it is proven needed: "
                "more time gives the exact amount)")

    def combined_note(self) -> str:
        """Where the search stopped short of proof with several limits moved: the amounts are one
        combination found by the time limit, not the least any limit needs."""
        if self.proven or len(self.moved) < 2:
            return ""
        return " (one combination found by the time limit with other limits moved too, not proven least: more time gives the exact amounts)"


def _solve_elastic(ix: IndexSets, deadline: float, only: set | None = None) -> ElasticResult | None:
    """The elastic model's solution by `deadline` (a time.perf_counter() instant); None if
    no solution was found by then."""
    lm, slacks = elastic_model(ix, only)
    try:
        result = solve_lp(lm, deadline, relax=False, options={"mip_rel_gap": 1e-6})
        x, objective = result.x, result.objective
        # an LP (no integer column) or a MIP proved within its gap: the plan's own cost bounds it
        bound = objective if result.optimal or not len(lm.integer_columns()) else result.mip_dual_bound
    except HighsAbandoned as left:
        x, objective = (left.best[0], left.best[1]) if left.best is not None else (None, math.inf)
        bound = left.dual_bound
    if x is None:
        return None
    moved = [(family, key, x[col] * magnitude, x[col]) for family, key, col, magnitude in slacks if x[col] > SLACK_TOL]
    return ElasticResult(moved, float(objective), float(bound))


def elastic_findings(ix: IndexSets, time_limit_s: float, deadline: float | None = None) -> list[str]:
    """The limits that must move, and by how much.

    The elastic model minimises the sum of relative moves. When it moves one limit only,
    that move is the least that limit alone needs (or, when the search stopped at its time
    limit, the least found, with the share of it the solver's bound proves needed). When it
    moves several, each of them (the largest relative moves first, up to ALONE_TRIES) is
    re-solved alone with every other limit held: a limit that can make room by itself is
    named first, least relative change first, with the amount it alone needs; the
    combination follows.
    """
    started = time.perf_counter()
    end = min(deadline, started + time_limit_s) if deadline is not None else started + time_limit_s
    relax = relaxable()
    result = _solve_elastic(ix, end)
    if result is None or not result.moved:
        return []
    moved = result.moved
    lines = [relax[f].describe(ix, key, amount) for f, key, amount, _ in moved]
    limits = [(f, key, t) for f, key, _, t in moved if relax[f].weight == 1.0]
    lines = [line + result.combined_note() for line in lines]
    if len(moved) == 1 or not limits:
        return [lines[0] + result.bound_note()] if len(moved) == 1 else lines
    alone = []
    for f, key, _ in sorted(limits, key=lambda item: -item[2])[:ALONE_TRIES]:
        left = end - time.perf_counter()
        if left <= 1.0:
            break
        single = _solve_elastic(ix, end, only={(f, key)})
        if single is not None and len(single.moved) == 1:
            _, _, amount, t = single.moved[0]
            alone.append((t, relax[f].describe(ix, key, amount) + single.bound_note()
                          + " (this change alone makes a plan possible)"))
    if not alone:
        return lines
    return [line for _, line in sorted(alone, key=lambda item: item[0])] + ["or, together: " + line for line in lines]


def highs_iis(lm: LinearModel, deadline: float, limit: int = 12) -> list[str]:
    """Constraint names in HiGHS's infeasible subset of the LP relaxation (empty if none,
    or if the LP relaxation is not solved by `deadline`)."""
    if not iis_available():
        return []
    session = LpSession(lm, relax=True)
    try:
        result = session.solve(deadline)
    except HighsAbandoned:
        return []
    if not result.infeasible:
        return []
    iis = session.infeasible_rows()
    if iis is None:
        return []
    names = sorted({lm.row_name(i) for i in iis if 0 <= i < lm.n_rows})
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return [f"HiGHS infeasible subset of the LP relaxation ({len(names)} rows): {shown}"] if names else []


def diagnose(ix: IndexSets, lm: LinearModel, options, deadline: float | None = None) -> list[str]:
    """What must change for the scenario to have a plan (`deadline`: a time.perf_counter()
    instant by which the elastic re-solves and the IIS stop; the time limit of `options` otherwise)."""
    end = deadline if deadline is not None else time.perf_counter() + options.time_limit_s
    findings = elastic_findings(ix, options.time_limit_s, end)
    return findings + highs_iis(lm, end)
