"""LP relaxations that hold lazy rows back (optimizer.solvers.lazy_rows) and the clearing
price that picks candidate pairs (optimizer.model.candidates.clearing_unit_cost).

Held back and put back where broken, the LP must reach exactly the LP with every row in,
at a point that meets every row, and the instance must be left as it was built.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import highspy
import numpy as np
import pytest

from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer.model import candidates
from dcplace.optimizer.model.families import REGISTRY, lp_lazy_families
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solvers.lazy_rows import BROKEN_TOLERANCE, LazyRows, solve_lazily


def _relaxed(lm: LinearModel) -> highspy.Highs:
    h = to_highs(lm, 1)
    cols = lm.integer_columns()
    h.changeColsIntegrality(len(cols), cols, [highspy.HighsVarType.kContinuous] * len(cols))
    return h


def _model(seed: int) -> LinearModel:
    return build_model(build_index(synthetic_scenario(seed, n_sites=12, n_regions=60, n_jobs=1, box_deg=(25.0, 45.0))))


def _row_bounds(h: highspy.Highs) -> tuple[np.ndarray, np.ndarray]:
    lp = h.getLp()
    return np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lazy_lp_reaches_the_lp_with_every_row(seed):
    lm = _model(seed)
    full = _relaxed(lm)
    full.run()
    assert full.getModelStatus() == highspy.HighsModelStatus.kOptimal

    h = _relaxed(lm)
    built = _row_bounds(h)
    lazy = LazyRows(lm)
    assert len(lazy.index) == len(lm.families["share_needs_open"].keys) > 0
    assert solve_lazily(h, lazy, time.perf_counter() + 60) and not lazy.pending
    assert h.getInfo().objective_function_value == pytest.approx(full.getInfo().objective_function_value, rel=1e-7)
    x = np.asarray(h.getSolution().col_value)
    activity = lm.row_activity(x)
    lower, upper = lm.row_bounds()
    slack = 1e-6 * np.maximum(1.0, np.abs(activity))
    assert np.all(activity <= upper + slack) and np.all(activity >= lower - slack), "the lazy LP's point breaks a row"
    assert 0 < lazy.restored <= len(lazy.index), "the held LP should break some row (else the test shows nothing)"
    lazy.release(h)
    for now, then in zip(_row_bounds(h), built):
        assert np.array_equal(now, then)
    assert not lazy.held.any() and not lazy.back.any()


def test_a_broken_row_puts_back_its_whole_group_and_nothing_else():
    lm = _model(1)
    h = _relaxed(lm)
    lazy = LazyRows(lm)
    lazy.hold(h)
    h.run()
    keys = lm.families["share_needs_open"].keys
    row_of = dict(zip(lazy.index.tolist(), range(len(lazy.index))))
    activity = np.asarray(h.getSolution().row_value)[lazy.index]
    broken_sites = {keys[i][2] for i in np.flatnonzero(activity > lazy.upper + BROKEN_TOLERANCE)}
    assert broken_sites, "with its link rows held the LP should open some site by a fraction"
    assert lazy.restore_broken(h) == int(lazy.back.sum())
    back_sites = {keys[i][2] for i in np.flatnonzero(lazy.back)}
    assert back_sites == broken_sites
    assert all(lazy.back[row_of[lazy.index[i]]] for i, key in enumerate(keys) if key[2] in broken_sites)
    lower, upper = _row_bounds(h)
    assert np.all(upper[lazy.index[lazy.back]] == 0.0) and np.all(np.isinf(upper[lazy.index[lazy.held]]))


def test_a_lazy_lp_cut_short_is_flagged_and_leaves_the_model_whole():
    lm = _model(2)
    h = _relaxed(lm)
    built = _row_bounds(h)
    lazy = LazyRows(lm)
    finished = solve_lazily(h, lazy, time.perf_counter() - 1.0)  # the deadline has passed: HiGHS stops at once
    # either no optimum at all, or the optimum of the LP with rows held that the deadline left broken
    assert not finished or lazy.pending
    lazy.release(h)
    for now, then in zip(_row_bounds(h), built):
        assert np.array_equal(now, then)


def test_lazy_rows_of_a_multi_period_model_are_found_by_their_family():
    lm = _model(3)
    both = LinearModel("periods")
    both.append(lm, "2026")
    both.append(lm, "2028")
    lazy = LazyRows(both)
    assert len(lazy.index) == 2 * len(lm.families["share_needs_open"].keys)
    assert len(np.unique(lazy.group)) == 2 * len({key[2] for key in lm.families["share_needs_open"].keys})


def test_only_rows_the_mip_implies_are_held_back():
    """A lazy family may not be relaxed by the diagnosis and must write rows (the registry
    refuses otherwise); tests/test_registry.py TIGHTENING shows each keeps the optimum."""
    assert lp_lazy_families() == {"share_needs_open"}
    for name in lp_lazy_families():
        assert REGISTRY[name].relax is None and REGISTRY[name].writes == "rows"


def _world(units, kw_per_tok_s, tok_s_per_rack, power_kw, floor_racks, demand_tok_s):
    """Sites with the given cheapest racks for one class 'w', and one region of `demand_tok_s`."""
    sites = [SimpleNamespace(power_limit_kw=p, floor_racks=f) for p, f in zip(power_kw, floor_racks)]
    regions = [SimpleNamespace(demand_tok_s={"w": demand_tok_s})]
    ix = SimpleNamespace(workloads={"w": None}, scenario=SimpleNamespace(sites=sites, regions=regions))
    racks = {"w": (np.array(units, float), np.array(kw_per_tok_s, float), np.array(tok_s_per_rack, float))}
    return ix, racks


@pytest.mark.parametrize("floor, price", [
    # each site holds 1,000 kW / 0.001 kW per tok/s = 1e6 tok/s; 1.5 x 1.2e6 = 1.8e6 is reached at the
    # second cheapest site (cost 2): the cheaper one is lifted to 2
    (10_000, 2.0),
    # 500 racks x 1,000 tok/s = 5e5 tok/s at the cheapest site: 5e5 + 1e6 < 1.8e6, so the third (cost 3) clears
    (500, 3.0),
])
def test_clearing_price_by_hand(monkeypatch, floor, price):
    ix, racks = _world(units=[3.0, 1.0, 2.0, 4.0], kw_per_tok_s=[0.001] * 4, tok_s_per_rack=[1000.0] * 4,
                       power_kw=[1000.0] * 4, floor_racks=[10_000, floor, 10_000, 10_000], demand_tok_s=1.2e6)
    monkeypatch.setattr(candidates, "_cheapest_racks", lambda ix: racks)
    cleared = candidates.clearing_unit_cost(ix, margin=1.5)["w"]
    assert cleared.tolist() == [max(u, price) for u in (3.0, 1.0, 2.0, 4.0)]


def test_clearing_price_with_too_little_capacity_is_the_dearest_site(monkeypatch):
    ix, racks = _world(units=[3.0, 1.0, np.inf], kw_per_tok_s=[0.001, 0.001, np.inf], tok_s_per_rack=[1000.0, 1000.0, 0.0],
                       power_kw=[1000.0] * 3, floor_racks=[10_000] * 3, demand_tok_s=1e7)
    monkeypatch.setattr(candidates, "_cheapest_racks", lambda ix: racks)
    cleared = candidates.clearing_unit_cost(ix, margin=1.5)["w"]
    assert cleared[:2].tolist() == [3.0, 3.0] and np.isinf(cleared[2])  # a site that hosts nothing stays out
