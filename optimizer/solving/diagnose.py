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

The elastic model is the Pyomo form of the formulation (optimizer.linear.to_pyomo) with
slack added by name, family by family, as the registry (optimizer.model.families) says:
which families are relaxed, in which direction, against what magnitude, and in what words;
infeasible scenarios are small enough for it.
"""

from __future__ import annotations

import dataclasses
import time

import highspy
import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory

from dcplace.optimizer.model.families import relaxable
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs, use_threads
from dcplace.optimizer.solvers.pyomo_model import to_pyomo

SLACK_TOL = 1e-7  # on t, the violation relative to the row's own magnitude
ALONE_TRIES = 3  # when several limits move together, how many are re-solved alone


def elastic_model(ix: IndexSets, only: set | None = None) -> tuple[pyo.ConcreteModel, list[tuple[str, object, pyo.Var, float]]]:
    """The model with every relaxable family (families.relaxable(); `only`: just these
    (family, key) rows) given slack; the objective is the total weighted relative slack.

    Row (family, key) gets slack magnitude * t, t >= 0 dimensionless, penalised weight * t:
    a budget's slack is measured against the budget, a site's power against its limit. (A
    slack in dollars weighted 1 / budget had a cost of ~1e-8 per dollar, under HiGHS's dual
    tolerance: the solver took it as free and reported billions where millions were short.)
    """
    # racks are bounded by what a site's power and floor admit (the tightest big-M); in
    # elastic mode those limits may move, so the bounds widen to what any slack could need
    roomy = max((site.floor_racks for site in ix.sites.values()), default=0) * 10 + 1000
    m = to_pyomo(build_model(dataclasses.replace(ix, rack_limit={key: roomy for key in ix.rack_limit})))
    m.total_cost.deactivate()
    m.ELASTIC_ROWS = pyo.ConstraintList()
    slacks = []
    penalty = 0
    for family, relax in relaxable().items():
        component = getattr(m, family, None)
        if component is None:
            continue
        for index, con in list(component.items()):
            if only is not None and (family, index) not in only:
                continue
            t = pyo.Var(domain=pyo.NonNegativeReals)
            m.add_component(f"slack_{family}_{len(slacks)}", t)
            magnitude = float(relax.magnitude(ix, index))
            con.deactivate()
            if con.equality or relax.direction == "short":
                # under-serving only: body + slack reaches the lower limit (or the equality)
                bound = con.upper if con.equality else con.lower
                m.ELASTIC_ROWS.add(con.body + magnitude * t == bound if con.equality else con.body + magnitude * t >= bound)
            else:
                m.ELASTIC_ROWS.add(con.body - magnitude * t <= con.upper)
            slacks.append((family, index, t, magnitude))
            penalty = penalty + relax.weight * t
    m.total_slack = pyo.Objective(expr=penalty, sense=pyo.minimize)
    return m, slacks


def _solve_elastic(ix: IndexSets, time_limit_s: float, only: set | None = None) -> list[tuple[str, object, float, float]] | None:
    """(family, key, amount in the family's unit, relative t) of every moved row; None if no solution."""
    m, slacks = elastic_model(ix, only)
    use_threads(1)
    results = SolverFactory("highs").solve(
        m, time_limit=max(time_limit_s, 1.0), threads=1, load_solutions=False, raise_exception_on_nonoptimal_result=False,
        solver_options={"output_flag": False, "mip_rel_gap": 1e-6},
    )
    if results.incumbent_objective is None:
        return None
    results.solution_loader.load_vars()
    return [(family, index, (t.value or 0.0) * magnitude, t.value or 0.0)
            for family, index, t, magnitude in slacks if (t.value or 0.0) > SLACK_TOL]


def elastic_findings(ix: IndexSets, time_limit_s: float, deadline: float | None = None) -> list[str]:
    """The limits that must move, and by how much.

    The elastic model minimises the sum of relative moves. When it moves one limit only,
    that move is the least that limit alone needs. When it moves several, each of them (the
    largest relative moves first, up to ALONE_TRIES) is re-solved alone with every other
    limit held: a limit that can make room by itself is named first, least relative change
    first, with the amount it alone needs; the combination follows.
    """
    started = time.perf_counter()
    end = min(deadline, started + time_limit_s) if deadline is not None else started + time_limit_s
    relax = relaxable()
    moved = _solve_elastic(ix, end - time.perf_counter())
    if not moved:
        return []
    lines = [relax[f].describe(ix, key, amount) for f, key, amount, _ in moved]
    limits = [(f, key, t) for f, key, _, t in moved if relax[f].weight == 1.0]
    if len(moved) == 1 or not limits:
        return lines
    alone = []
    for f, key, _ in sorted(limits, key=lambda item: -item[2])[:ALONE_TRIES]:
        left = end - time.perf_counter()
        if left <= 1.0:
            break
        result = _solve_elastic(ix, left, only={(f, key)})
        if result is not None and len(result) == 1:
            _, _, amount, t = result[0]
            alone.append((t, relax[f].describe(ix, key, amount) + " (this change alone makes a plan possible)"))
    if not alone:
        return lines
    return [line for _, line in sorted(alone, key=lambda item: item[0])] + ["or, together: " + line for line in lines]


def highs_iis(lm: LinearModel, limit: int = 12) -> list[str]:
    """Constraint names in HiGHS's infeasible subset of the LP relaxation (empty if none)."""
    if not hasattr(highspy.Highs, "getIis"):
        return []
    h = to_highs(lm)
    integer_cols = lm.integer_columns()
    if len(integer_cols):
        h.changeColsIntegrality(len(integer_cols), integer_cols, [highspy.HighsVarType.kContinuous] * len(integer_cols))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kInfeasible:
        return []
    status, iis = h.getIis()
    if status == highspy.HighsStatus.kError or not iis.valid_:
        return []
    names = sorted({lm.row_name(i) for i in iis.row_index_ if 0 <= i < lm.n_rows})
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return [f"HiGHS infeasible subset of the LP relaxation ({len(names)} rows): {shown}"] if names else []


def diagnose(ix: IndexSets, lm: LinearModel, options, deadline: float | None = None) -> list[str]:
    """What must change for the scenario to have a plan (`deadline`: a time.perf_counter()
    instant by which the elastic re-solves stop; the time limit of `options` otherwise)."""
    findings = elastic_findings(ix, options.time_limit_s, deadline)
    return findings + highs_iis(lm)
