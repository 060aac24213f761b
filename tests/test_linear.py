"""The formulation is written once (optimizer.linear.LinearModel); the direct highspy matrix
and the Pyomo model made from it must be the same model.

The Pyomo side is solved through Pyomo's own HiGHS interface (its own matrix assembly),
so the two objectives agreeing is a check of to_highs against an independent path.
"""

from __future__ import annotations

import highspy
import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.contrib.solver.common.factory import SolverFactory

from dcplace.models.records import Policies
from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solvers.pyomo_model import pyomo_values, to_pyomo

POLICIES = {
    "plain": Policies(),
    "split": Policies(max_share_per_site=0.5),
    "single-purpose": Policies(single_purpose_sites=True, min_sites=2),
    "carbon-capex": Policies(carbon_cap_t_per_year=2e6, capex_budget_usd=5e10, max_sites=4),
}


def _direct(lm: LinearModel) -> tuple[float, np.ndarray]:
    h = to_highs(lm)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h.getInfo().objective_function_value, np.array(h.getSolution().col_value)


@pytest.mark.parametrize("name", POLICIES)
def test_pyomo_model_is_the_same_model(name):
    scenario = synthetic_scenario(5, n_sites=5, n_regions=8, n_jobs=1, policies=POLICIES[name])
    lm = build_model(build_index(scenario))
    m = to_pyomo(lm)

    rows = sum(1 for _ in m.component_data_objects(pyo.Constraint, active=True))
    assert rows == lm.n_rows
    assert sum(1 for _ in m.component_data_objects(pyo.Var)) == lm.n_cols
    for family in lm.families:
        assert isinstance(getattr(m, family), pyo.Constraint)

    objective, x = _direct(lm)
    results = SolverFactory("highs").solve(m, solver_options={"mip_rel_gap": 0.0, "output_flag": False})
    assert results.incumbent_objective == pytest.approx(objective, rel=1e-7)
    # the cost categories of the Pyomo model add up to its objective, and price the direct solution the same
    assert sum(pyo.value(m.cost[c]) for c in m.CATEGORIES) == pytest.approx(results.incumbent_objective, rel=1e-9)
    assert sum(lm.cost_by_category(x).values()) == pytest.approx(objective, rel=1e-9)
    # the Pyomo solution satisfies the direct matrix's rows
    activity = lm.row_activity(pyomo_values(m))
    lower, upper = lm.row_bounds()
    assert np.all(activity >= lower - 1e-6 * np.maximum(1, np.abs(lower)))
    assert np.all(activity <= upper + 1e-6 * np.maximum(1, np.abs(upper)))


def test_rows_and_columns_map_back_to_names():
    lm = build_model(build_index(synthetic_scenario(5, n_sites=3, n_regions=4, n_jobs=1)))
    family = lm.families["demand_met"]
    assert lm.row_name(family.start) == "demand_met[" + ",".join(family.keys[0]) + "]"
    share = lm.blocks["share"]
    assert lm.column_name(share.start) == "share[" + ",".join(share.keys[0]) + "]"
    assert lm.col("share", share.keys[-1]) == share.stop - 1
    with pytest.raises(ValueError, match="added together"):
        lm.add_row("demand_met", ("x", "y"), [])
