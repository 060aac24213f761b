"""HiGHS and OR-Tools (SCIP) agree on the optimum of random small scenarios, and both
plans pass the independent checker."""

from __future__ import annotations

import pytest

from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solvers.backends import CAPABILITIES
from dcplace.optimizer.solving.pipeline import solve_to_folder

SEEDS = range(20)


@pytest.mark.parametrize("seed", SEEDS)
def test_highs_and_ortools_agree(tmp_path, seed):
    scenario = synthetic_scenario(seed, n_sites=4, n_regions=6, n_jobs=1)
    plans = {}
    for solver in ("highs", "ortools"):
        plan, report = solve_to_folder(scenario, tmp_path / solver, SolveOptions(solver=solver, mip_gap=0.0, time_limit_s=120))
        assert report.ok, (solver, report.violations)
        assert plan.solve.status == "optimal", (solver, plan.solve.termination)
        plans[solver] = plan
    highs, ortools = plans["highs"], plans["ortools"]
    assert ortools.solve.solver == "ortools-scip"
    # both proved optimal at gap 0: equal up to the solvers' feasibility tolerance (1e-6)
    assert highs.objective_usd_per_year == pytest.approx(ortools.objective_usd_per_year, rel=1e-6)


def test_capability_table_drives_the_options():
    assert set(CAPABILITIES) == {"highs", "ortools", "ortools-sat"}
    assert all(c.time_limit and c.mip_gap for c in CAPABILITIES.values())
    assert CAPABILITIES["highs"].warm_start and not CAPABILITIES["ortools"].warm_start
    with pytest.raises(ValueError, match="unknown solver"):
        SolveOptions(solver="gurobi")
