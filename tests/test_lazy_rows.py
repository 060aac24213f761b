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
from dcplace.optimizer.model.families import REGISTRY
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solvers import lazy_rows
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
    options = [h.getOptionValue(name) for name in ("presolve", "simplex_strategy")]
    lazy = LazyRows(lm)
    assert len(lazy.index) == len(lm.families["share_needs_open"].keys) > 0
    relaxed = solve_lazily(h, lazy, time.perf_counter() + 60)
    assert relaxed is not None and not relaxed.pending and not lazy.pending
    assert relaxed.objective == pytest.approx(full.getInfo().objective_function_value, rel=1e-7)
    assert [h.getOptionValue(name) for name in ("presolve", "simplex_strategy")] == options
    x = relaxed.col_value
    activity = lm.row_activity(x)
    lower, upper = lm.row_bounds()
    slack = 1e-6 * np.maximum(1.0, np.abs(activity))
    assert np.all(activity <= upper + slack) and np.all(activity >= lower - slack), "the lazy LP's point breaks a row"
    assert 0 < lazy.restored <= len(lazy.index), "the held LP should break some row (else the test shows nothing)"
    lazy.release(h)
    for now, then in zip(_row_bounds(h), built):
        assert np.array_equal(now, then)
    assert not lazy.held.any() and not lazy.back.any()


def _held_lp(seed: int) -> tuple[LinearModel, highspy.Highs, LazyRows]:
    """The LP of a small model solved once with every lazy row held."""
    lm = _model(seed)
    h = _relaxed(lm)
    lazy = LazyRows(lm)
    lazy.hold(h)
    h.run()
    return lm, h, lazy


def test_a_broken_row_puts_back_its_whole_group_and_nothing_else():
    lm, h, lazy = _held_lp(1)
    keys = lm.families["share_needs_open"].keys
    row_of = dict(zip(lazy.index.tolist(), range(len(lazy.index))))
    activity = np.asarray(h.getSolution().row_value)[lazy.index]
    broken_sites = {keys[i][2] for i in np.flatnonzero(activity > lazy.upper + BROKEN_TOLERANCE)}
    assert broken_sites, "with its link rows held the LP should open some site by a fraction"
    rows = lazy.broken(np.asarray(h.getSolution().row_value))
    lazy.put_back(h, rows)
    assert rows.size == int(lazy.back.sum()) == lazy.restored
    back_sites = {keys[i][2] for i in np.flatnonzero(lazy.back)}
    assert back_sites == broken_sites
    assert all(lazy.back[row_of[lazy.index[i]]] for i, key in enumerate(keys) if key[2] in broken_sites)
    lower, upper = _row_bounds(h)
    assert np.all(upper[lazy.index[lazy.back]] == 0.0) and np.all(np.isinf(upper[lazy.index[lazy.held]]))


def test_a_lazy_lp_past_its_deadline_gives_no_optimum_and_leaves_the_model_whole():
    lm = _model(2)
    h = _relaxed(lm)
    built = _row_bounds(h)
    lazy = LazyRows(lm)
    assert solve_lazily(h, lazy, time.perf_counter() - 1.0) is None  # HiGHS stops at once: no optimum to give
    lazy.release(h)
    for now, then in zip(_row_bounds(h), built):
        assert np.array_equal(now, then)


def test_a_lazy_lp_cut_short_after_a_solve_returns_that_relaxation_and_a_valid_bound(monkeypatch):
    """The deadline comes after the first solve, with rows broken: the result is that solve's
    optimum (the LP with every lazy row held), flagged pending, its objective a lower bound."""
    lm, held, _ = _held_lp(2)
    full = _relaxed(lm)
    full.run()

    h = _relaxed(lm)
    lazy = LazyRows(lm)
    deadline = time.perf_counter() + 60.0
    # only solve_lazily's clock jumps past the deadline (run_until's keeps the real one)
    monkeypatch.setattr(lazy_rows, "time", SimpleNamespace(perf_counter=lambda: deadline + 1.0))
    relaxed = solve_lazily(h, lazy, deadline)
    monkeypatch.undo()
    assert relaxed is not None and relaxed.pending and lazy.pending and lazy.restored == 0
    assert relaxed.objective == pytest.approx(held.getInfo().objective_function_value, rel=1e-9)
    assert 0 < relaxed.objective <= full.getInfo().objective_function_value * (1 + 1e-9)
    assert h.getInfo().objective_function_value == pytest.approx(relaxed.objective, rel=1e-12)  # bounds untouched


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
    lazy = {name for name, fam in REGISTRY.items() if fam.lp_lazy}
    assert lazy == {"share_needs_open"}
    for name in lazy:
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


def test_rows_added_at_a_site_whose_links_are_back_join_them_at_once():
    lm, h, lazy = _held_lp(1)
    lazy.put_back(h, lazy.broken(np.asarray(h.getSolution().row_value)))
    keys = lm.families["share_needs_open"].keys
    back_site = next(keys[i][2] for i in np.flatnonzero(lazy.back))
    held_site = next((keys[i][2] for i in np.flatnonzero(lazy.held) if keys[i][2] != back_site), None)
    new_keys = [("r-new", "chat", back_site)] + ([("r-new", "chat", held_site)] if held_site else [])
    first = h.getNumRow()
    n = len(new_keys)
    h.addRows(n, np.full(n, -highspy.kHighsInf), np.full(n, highspy.kHighsInf), 0, np.zeros(n, dtype=np.int32),
              np.zeros(0, dtype=np.int32), np.zeros(0))
    lazy.add_held(h, "share_needs_open", new_keys, np.arange(first, first + n), np.full(n, -np.inf), np.zeros(n))
    lower, upper = _row_bounds(h)
    assert upper[first] == 0.0 and lazy.back[-n]  # its site's links are back: so is it
    if held_site:
        assert np.isinf(upper[first + 1]) and lazy.held[-1]  # a held site's new link waits to be broken


def test_models_with_n1_rows_keep_every_row_in_unless_the_lazy_rows_are_many(monkeypatch):
    """lazy_rows: the warm start holds share_needs_open back, except in a model with N-1's aggregate rows (their
    cut rows make each re-solve nearly a whole solve: 27 s against 15 s on the default world) and fewer than
    N1_HOLD_MIN_ROWS lazy rows (a large candidate model's warm start only finished with them held back)."""
    scenario = synthetic_scenario(1, 6, 20)
    plain = build_model(build_index(scenario))
    assert isinstance(lazy_rows.lazy_rows(plain), LazyRows) and len(lazy_rows.lazy_rows(plain).index)
    survive = scenario.model_copy(update={"policies": scenario.policies.model_copy(update={"survive_site_loss": {"chat": 1.0}})})
    n1 = build_model(build_index(survive))
    assert "failover_aggregate" in n1.families
    assert lazy_rows.lazy_rows(n1) is None
    monkeypatch.setattr(lazy_rows, "N1_HOLD_MIN_ROWS", len(LazyRows(n1).index))
    assert isinstance(lazy_rows.lazy_rows(n1), LazyRows)
