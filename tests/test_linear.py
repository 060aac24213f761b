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


def test_add_entries_gives_the_rows_add_row_gives():
    """Rows of any length at once (add_entries) are the rows add_row makes one key at a time:
    same order, bounds, names and matrix, zero coefficients left out."""
    rng = np.random.default_rng(3)
    keys = [("k", i) for i in range(7)]
    terms = {key: [(int(j), float(v)) for j, v in zip(rng.choice(12, rng.integers(0, 5), replace=False), rng.integers(-2, 3, 5))]
             for key in keys}
    one, many = LinearModel("one"), LinearModel("many")
    for lm in (one, many):
        lm.add_block("x", list(range(12)), 0.0, 1.0, "continuous")
        lm.add_row("before", None, [(0, 1.0)], upper=1.0)
    for key in keys:
        one.add_row("fam", key, terms[key], lower=-1.0, upper=2.0)
    entries = [(i, j, v) for i, key in enumerate(keys) for j, v in terms[key]]
    many.add_entries("fam", keys, [i for i, _, _ in entries], [j for _, j, _ in entries], [v for *_, v in entries], lower=-1.0, upper=2.0)
    for a, b in zip(one.matrix(), many.matrix()):
        assert np.array_equal(a, b)
    assert [one.row_name(i) for i in range(one.n_rows)] == [many.row_name(i) for i in range(many.n_rows)]
    assert all(np.array_equal(a, b) for a, b in zip(one.row_bounds(), many.row_bounds()))
    with pytest.raises(IndexError):
        many.add_entries("later", [("a",)], [1], [0], [1.0])


def test_serve_positions_follow_serve_through_restriction():
    """The positions _serve_list leaves with the index are those serve states, and a restriction
    renews them (the builders read them instead of looking every pair up)."""
    ix = build_index(synthetic_scenario(5, n_sites=6, n_regions=9, n_jobs=1))
    classes = list(ix.workloads)

    def recomputed():
        return (np.array([ix.region_pos[r] for r, _, _ in ix.serve]), np.array([ix.site_pos[s] for _, _, s in ix.serve]),
                np.array([classes.index(w) for _, w, _ in ix.serve]))

    assert all(np.array_equal(a, b) for a, b in zip(ix.serve_positions(), recomputed()))
    assert np.array_equal(ix.serve_demand_tok_s(), [ix.demand(r, w) for r, w, _ in ix.serve])
    keep = {w: np.zeros_like(mask) for w, mask in ix.eligible.items()}
    w = classes[0]
    keep[w][:, ::2] = True  # every other site, one class
    ix.restrict_serve(keep)
    assert ix.serve and all(c == w for _, c, _ in ix.serve)
    assert all(np.array_equal(a, b) for a, b in zip(ix.serve_positions(), recomputed()))
    assert np.array_equal(ix.serve_demand_tok_s(), [ix.demand(r, w) for r, w, _ in ix.serve])


def test_groupings_follow_the_pairs_through_restriction():
    """The index's groupings (typed properties, cached) state the pairs they group, and are renewed
    when the pairs are restricted: restrict_serve renews the serve_* ones, restrict_training every
    one, add_zones zones_by_site; a grouping not touched by a change is kept (the same object)."""
    ix = build_index(synthetic_scenario(5, n_sites=6, n_regions=9, n_jobs=2))

    def grouped(pairs, key, value):
        out = {}
        for p in pairs:
            out.setdefault(key(p), []).append(value(p))
        return out

    def check():
        assert ix.serve_by_rw == grouped(ix.serve, lambda p: (p[0], p[1]), lambda p: p[2])
        assert ix.serve_by_sw == grouped(ix.serve, lambda p: (p[2], p[1]), lambda p: p[0])
        assert ix.serve_by_fw == grouped([p for p in ix.serve if p[1] in ix.failover], lambda p: p[2], lambda p: (p[0], p[1]))
        assert ix.inf_by_sw == grouped(ix.inf_racks, lambda p: (p[0], p[3]), lambda p: (p[1], p[2]))
        assert ix.inf_by_skc == grouped(ix.inf_racks, lambda p: p[:3], lambda p: p[3])
        assert ix.inf_by_site == grouped(ix.inf_racks, lambda p: p[0], lambda p: p)
        assert ix.trn_by_sfchip == grouped(ix.trn_racks, lambda p: (p[0], p[3], ix.racks[p[1]].chip), lambda p: (p[1], p[2]))
        assert ix.trn_by_skc == grouped(ix.trn_racks, lambda p: p[:3], lambda p: p[3])
        assert ix.trn_by_site == grouped(ix.trn_racks, lambda p: p[0], lambda p: p)
        assert ix.place_by_job == grouped(ix.place, lambda p: p[0], lambda p: p[1:])
        assert ix.place_by_sfchip == grouped(ix.place, lambda p: p[1:], lambda p: p[0])
        assert ix.zones_by_site == grouped(ix.zones, lambda p: p[0], lambda p: p[1])

    check()
    assert ix.serve_by_sw is ix.serve_by_sw  # computed once
    place_by_job = ix.place_by_job
    keep = {w: np.zeros_like(mask) for w, mask in ix.eligible.items()}
    keep[list(ix.workloads)[0]][:, ::2] = True
    ix.restrict_serve(keep)
    assert ix.place_by_job is place_by_job  # not a serving grouping: kept
    check()
    ix.restrict_training(ix.place_all[:1])
    assert ix.place_by_job is not place_by_job
    check()
    zones = ix.zones_by_site
    ix.add_zones([(s, c) for s in list(ix.sites)[:2] for c in ix.cooling])
    assert ix.zones_by_site is not zones
    check()
    assert not hasattr(ix, "group")  # the string API is gone


def test_to_highs_passes_integrality_bounds_and_costs():
    lm = build_model(build_index(synthetic_scenario(5, n_sites=3, n_regions=4, n_jobs=1)))
    lp = to_highs(lm).getLp()
    integer = np.array([v == highspy.HighsVarType.kInteger for v in lp.integrality_])
    assert np.array_equal(np.flatnonzero(integer), lm.integer_columns())
    assert np.array_equal(np.asarray(lp.col_cost_), lm.objective())
    assert np.array_equal(np.asarray(lp.col_upper_), lm.bounds()[1])
    assert np.array_equal(np.asarray(lp.row_lower_), lm.row_bounds()[0])
