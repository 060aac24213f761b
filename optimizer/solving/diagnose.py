"""Why a scenario has no plan, in the user's words.

After an infeasible solve, `diagnose` rebuilds the model in elastic mode: each relaxable
constraint family gets a named, non-negative slack, and the model minimises the total
slack, each measured against its own limit (a power overage as a share of the site's
power, a carbon excess as a share of the cap, ...); unserved demand and unplaced jobs
weigh a million times more, so they are named only when no limit can make room. The slacks that stay
positive are the limits that must move, and by how much:

    region Lagos 'chat' demand 768,000 tok/s is short by 412,000 tok/s within 40 ms
    site Frankfurt power 80.0 MW is over by 12.4 MW

HiGHS's irreducible infeasible subset of the LP relaxation, where the installed highspy
has one and the LP relaxation is itself infeasible, is appended: the smallest set of
rows that cannot hold together, by constraint name.

The elastic model is the Pyomo form of the formulation (optimizer.linear.to_pyomo) with
slack added by name, family by family; infeasible scenarios are small enough for it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import highspy
import pyomo.environ as pyo
from pyomo.contrib.solver.common.factory import SolverFactory

from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs, use_threads
from dcplace.optimizer.solvers.pyomo_model import to_pyomo

SLACK_TOL = 1e-6


def _mission_scale(ix: IndexSets, index) -> float:
    """Unserved demand and unplaced jobs are the last resort: any limit moves first."""
    return 1e-6


def _count_scale(ix: IndexSets, index) -> float:
    return 1.0


def _power_scale(ix: IndexSets, s) -> float:
    return ix.sites[s].power_limit_kw


def _space_scale(ix: IndexSets, s) -> float:
    return max(ix.sites[s].floor_racks, 1)


def _policy_scale(value, floor: float) -> Callable[[IndexSets, object], float]:
    """Relative to the limit itself; `floor` keeps a zero limit from making any excess infinite."""
    return lambda ix, _: max(value(ix) or 0.0, floor)


# family -> (direction of the slack, its scale: slack / scale is what is minimised)
ELASTIC: dict[str, tuple[str, Callable[[IndexSets, object], float]]] = {
    "demand_met": ("short", _mission_scale),
    "job_placed_once": ("short", _mission_scale),
    "site_power": ("over", _power_scale),
    "site_space": ("over", _space_scale),
    "carbon_cap": ("over", _policy_scale(lambda ix: ix.scenario.policies.carbon_cap_t_per_year, 1000.0)),
    "capex_budget": ("over", _policy_scale(lambda ix: ix.scenario.policies.capex_budget_usd, 1e6)),
    "min_sites": ("short", _count_scale),
    "max_sites": ("over", _count_scale),
}


def _power(kw: float) -> str:
    return f"{kw / 1000:,.1f} MW" if kw >= 1000 else f"{kw:,.1f} kW"


def _describe(ix: IndexSets, family: str, index, slack: float) -> str:
    pol = ix.scenario.policies
    if family == "demand_met":
        r, w = index
        region = ix.regions[r]
        demand = region.demand_tok_s[w]
        return (
            f"region {region.name} '{w}' demand {demand:,.0f} tok/s is short by {slack * demand:,.0f} tok/s "
            f"within {region.rtt_budget_ms[w]:g} ms: add power or floor space at a site within reach, or widen the budget"
        )
    if family == "job_placed_once":
        job = ix.jobs[index]
        return f"training job {job.name} ({job.gpus_h100_equiv:,.0f} H100-equivalent GPUs) cannot be placed whole at any site"
    if family == "site_power":
        site = ix.sites[index]
        return f"site {site.name} power {_power(site.power_limit_kw)} is over by {_power(slack)}"
    if family == "site_space":
        site = ix.sites[index]
        return f"site {site.name} floor space {site.floor_racks:,} racks is over by {slack:,.0f} racks"
    if family == "carbon_cap":
        return f"carbon cap {pol.carbon_cap_t_per_year:,.0f} t CO2/yr is exceeded by {slack:,.0f} t CO2/yr"
    if family == "capex_budget":
        return f"capex budget ${pol.capex_budget_usd:,.0f} is exceeded by ${slack:,.0f}"
    if family == "min_sites":
        return f"min_sites {pol.min_sites} cannot be met: {slack:.0f} candidate site(s) short"
    return f"max_sites {pol.max_sites} is exceeded by {slack:.0f} site(s)"


def elastic_model(ix: IndexSets) -> tuple[pyo.ConcreteModel, list[tuple[str, object, pyo.Var]]]:
    """The model with every relaxable family given slack; the objective is total scaled slack."""
    # racks are bounded by what a site's power and floor admit (the tightest big-M); in
    # elastic mode those limits may move, so the bounds widen to what any slack could need
    roomy = max((site.floor_racks for site in ix.sites.values()), default=0) * 10 + 1000
    m = to_pyomo(build_model(dataclasses.replace(ix, rack_limit={key: roomy for key in ix.rack_limit})))
    m.total_cost.deactivate()
    m.ELASTIC_ROWS = pyo.ConstraintList()
    slacks = []
    penalty = 0
    for family, (direction, scale) in ELASTIC.items():
        component = getattr(m, family, None)
        if component is None:
            continue
        for index, con in list(component.items()):
            slack = pyo.Var(domain=pyo.NonNegativeReals)
            m.add_component(f"slack_{family}_{len(slacks)}", slack)
            con.deactivate()
            if con.equality or direction == "short":
                # under-serving only: body + slack reaches the lower limit (or the equality)
                bound = con.upper if con.equality else con.lower
                m.ELASTIC_ROWS.add(con.body + slack == bound if con.equality else con.body + slack >= bound)
            else:
                m.ELASTIC_ROWS.add(con.body - slack <= con.upper)
            slacks.append((family, index, slack))
            penalty = penalty + slack / scale(ix, index)
    m.total_slack = pyo.Objective(expr=penalty, sense=pyo.minimize)
    return m, slacks


def elastic_findings(ix: IndexSets, time_limit_s: float) -> list[str]:
    m, slacks = elastic_model(ix)
    use_threads(1)
    results = SolverFactory("highs").solve(
        m, time_limit=time_limit_s, threads=1, load_solutions=False, raise_exception_on_nonoptimal_result=False,
        solver_options={"output_flag": False, "mip_rel_gap": 1e-6},
    )
    if results.incumbent_objective is None:
        return []
    results.solution_loader.load_vars()
    return [_describe(ix, family, index, var.value) for family, index, var in slacks if (var.value or 0.0) > SLACK_TOL]


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


def diagnose(ix: IndexSets, lm: LinearModel, options) -> list[str]:
    """What must change for the scenario to have a plan."""
    findings = elastic_findings(ix, options.time_limit_s)
    return findings + highs_iis(lm)
