"""The race (optimizer.solving.race): SCIP in a child process on the full model beside HiGHS.

Checked here: the MPS the child reads is the model (SCIP's optimum from it equals HiGHS's
on the LinearModel, for every kind of row, bound and column); a raced solve returns the
brute-force optimum of small facility-location instances and records both engines; the
loser is stopped and leaves no process and no folder; a solve over candidate pairs goes on
over the full model instead of returning with its time and its gap unused; a power limit far
above what a site's floor can draw does not change the optimum (it once made HiGHS call a
plan 3e-5 above the optimum proven)."""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from dcplace.models.costmatrix import scenario_from_cost_matrix
from dcplace.models.synthetic import cflp_instance, synthetic_scenario
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import PruningRules
from dcplace.optimizer.model.linear import LinearModel
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solvers.scip_racer import ScipRacer, write_mps
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.race import RACE_MIN_COLUMNS, race_skipped

TWO_CORES = (os.cpu_count() or 1) >= 2


def _highs_optimum(lm: LinearModel) -> float:
    h = to_highs(lm)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 0.0)
    h.run()
    return h.getInfo().objective_function_value


def _scip_optimum_from_mps(lm: LinearModel, folder: Path) -> tuple[float, np.ndarray]:
    from ortools.linear_solver.python import model_builder as mb

    write_mps(lm, folder / "m.mps")
    model = mb.Model()
    assert model.import_from_mps_file(str(folder / "m.mps"))
    assert model.num_variables == lm.n_cols
    solver = mb.Solver("scip")
    solver.set_solver_specific_parameters("limits/gap = 0")
    assert solver.solve(model) == mb.SolveStatus.OPTIMAL
    return solver.objective_value, solver.values(model.get_variables()).to_numpy(dtype=float)


def test_mps_holds_every_kind_of_row_bound_and_column(tmp_path):
    """Equality, <=, >=, ranged and free rows; fixed, free, negative and infinite bounds;
    integer columns in runs and alone, an empty integer column followed by a continuous one
    (where HiGHS's own writer closed the integer marker a column late)."""
    lm = LinearModel("kinds")
    lm.add_block("a", [0, 1], 0, 7, "integer")
    lm.add_block("empty_int", [0], 0, 3, "integer")  # no matrix entry, cost -1: must be 3, and integer
    lm.add_block("x", [0, 1, 2], [-np.inf, -2.0, 0.5], [np.inf, 4.0, 0.5], "continuous")
    lm.add_block("b", [0], 0, 1, "binary")
    lm.add_block("tail", [0], 0, 2.5, "continuous")  # empty continuous column after a binary one: 2.5, not 2
    lm.add_costs("c", np.arange(lm.n_cols), np.array([1.0, 2.0, -1.0, 1.0, -1.0, 0.0, 3.0, -1.0]))
    lm.add_row("eq", 0, [(0, 1.0), (1, 1.0), (3, 1.0)], 5.5, 5.5)
    lm.add_row("le", 0, [(3, 1.0), (4, 1.0)], upper=3.0)
    lm.add_row("ge", 0, [(3, 1.0), (6, -10.0)], lower=-8.0)
    lm.add_row("range", 0, [(0, 2.0), (4, 1.0), (5, 1.0)], lower=1.0, upper=6.0)
    lm.add_row("free", 0, [(0, 1.0), (1, 1.0)])
    expected = _highs_optimum(lm)
    found, x = _scip_optimum_from_mps(lm, tmp_path)
    assert found == pytest.approx(expected, abs=1e-6)
    assert lm.is_feasible(x) and float(lm.objective() @ x) == pytest.approx(expected, abs=1e-6)
    assert x[lm.col("empty_int", 0)] == pytest.approx(3.0) and x[lm.col("tail", 0)] == pytest.approx(2.5)


@pytest.mark.parametrize("seed", range(4))
def test_mps_of_engine_models_gives_the_same_optimum(tmp_path, seed):
    """SCIP reading the MPS of a synthetic world's model finds HiGHS's optimum of the model."""
    lm = build_model(checked_index(synthetic_scenario(seed, n_sites=5, n_regions=12, n_jobs=2), 10**9, PruningRules()))
    found, x = _scip_optimum_from_mps(lm, tmp_path)
    assert found == pytest.approx(_highs_optimum(lm), rel=1e-6)
    assert lm.is_feasible(x)


def _brute_force_cflp(data: dict) -> float:
    """The optimum by enumeration: every set of open facilities, each served by a transport LP."""
    import highspy

    m, n = data["m"], data["n"]
    d, s, f, c = np.array(data["d"]), np.array(data["s"]), np.array(data["f"]), np.asarray(data["c"])
    best = np.inf
    for opened in itertools.product([0, 1], repeat=m):
        sites = [i for i in range(m) if opened[i]]
        if not sites or s[sites].sum() < d.sum():
            continue
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        k = len(sites)
        h.addVars(k * n, np.zeros(k * n), np.ones(k * n))
        h.changeColsCost(k * n, np.arange(k * n, dtype=np.int32), np.concatenate([c[i] for i in sites]))
        for j in range(n):
            h.addRow(1.0, 1.0, k, np.arange(k, dtype=np.int32) * n + j, np.ones(k))
        for a, i in enumerate(sites):
            h.addRow(-highspy.kHighsInf, float(s[i]), n, a * n + np.arange(n, dtype=np.int32), d)
        h.run()
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            best = min(best, f[sites].sum() + h.getInfo().objective_function_value)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_huge_power_limits_keep_the_optimum(seed):
    """A cost-matrix instance gives every site 1e9 kW; the engine's optimum is the brute-force one
    (the site_power row it then leaves out had made HiGHS prove a plan 3e-5 above it)."""
    data = cflp_instance(seed, 5, 12, 1.3)
    scenario = scenario_from_cost_matrix(data["f"], data["d"], data["c"], capacities=data["s"])
    plan = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=60))
    assert plan.solve.status == "optimal"
    assert plan.objective_usd_per_year == pytest.approx(_brute_force_cflp(data), rel=1e-7)


def _cflp_scenario(seed: int, m: int, n: int, ratio: float):
    data = cflp_instance(seed, m, n, ratio)
    return data, scenario_from_cost_matrix(data["f"], data["d"], data["c"], capacities=data["s"], name=f"cflp-{seed}")


def _scip_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("dcplace-scip-*")}


@pytest.mark.skipif(not TWO_CORES, reason="a race needs two cores")
def test_a_raced_solve_records_both_engines_and_leaves_nothing_behind(tmp_path, monkeypatch):
    """A model over RACE_MIN_COLUMNS columns is raced; the plan is checked against the same
    instance solved by HiGHS alone at gap 0; the child is gone and so is its folder."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this test's racer folders, not other runs'
    data, scenario = _cflp_scenario(3, 12, 500, 2.0)
    before = _scip_folders()
    plan = solve(scenario, SolveOptions(mip_gap=1e-6, time_limit_s=120, max_full_pairs=10**6))
    race = plan.solve.race
    assert plan.solve.model["columns"] >= RACE_MIN_COLUMNS
    assert race["engines"] == ["highs", "ortools-scip"] and race["winner"] in race["engines"]
    assert plan.solve.solver == race["winner"]
    assert set(race["ortools-scip"]) >= {"status", "seconds", "plan"}
    alone = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=120, max_full_pairs=10**6, race=False))
    assert alone.solve.race == {"skipped": "off (SolveOptions.race)"}
    assert plan.objective_usd_per_year == pytest.approx(alone.objective_usd_per_year, rel=2e-6)
    assert plan.solve.status == "optimal"
    assert _scip_folders() <= before  # the child's folder went with it
    assert "--no-race" in alone.provenance["rerun"] and "--no-race" not in plan.provenance["rerun"]


def test_small_models_and_n1_models_are_not_raced():
    data, scenario = _cflp_scenario(0, 4, 10, 2.0)
    plan = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=30))
    assert plan.solve.race["skipped"].startswith("off")
    ix = checked_index(scenario, 10**9, PruningRules())
    assert "N-1" in race_skipped(SolveOptions(), ix, n1=True)
    assert "solver 'ortools'" in race_skipped(SolveOptions(solver="ortools"), ix, n1=False)


def test_an_orphaned_racer_folder_is_removed_by_the_next_race(tmp_path, monkeypatch):
    """A solve killed outright leaves its racer folder (its child dies with it): the next race removes it."""
    from dcplace.optimizer.solvers import scip_racer

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{scip_racer.FOLDER_PREFIX}999999999-abc"
    alive = tmp_path / f"{scip_racer.FOLDER_PREFIX}{os.getpid()}-abc"
    dead.mkdir(), alive.mkdir()
    scip_racer._remove_orphans()
    assert not dead.exists() and alive.exists()


def test_a_stopped_racer_leaves_no_process(tmp_path):
    lm = build_model(checked_index(synthetic_scenario(1, n_sites=5, n_regions=12), 10**9, PruningRules()))
    racer = ScipRacer(lm, time.perf_counter() + 60, 0.0, 0).start()
    folder = racer.folder
    racer.stop()
    answer = racer.answer()
    assert answer.status == "no_solution" and "stopped" in answer.termination
    assert racer.process.poll() is not None and not folder.exists()


def test_candidate_search_goes_on_over_the_full_model():
    """Forced onto candidate pairs (max_full_pairs below the instance's pairs) with no race, a
    solve that has not proven its gap goes on over the full model: it returns the optimum of
    the full model, its plan's columns are the full model's, and the record says so."""
    data, scenario = _cflp_scenario(5, 10, 120, 1.4)
    full = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=60, race=False))
    priced = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=60, max_full_pairs=200, race=False))
    assert priced.solve.pairs, "the candidate path ran"
    assert priced.solve.status == "optimal", priced.solve.termination
    assert priced.objective_usd_per_year == pytest.approx(full.objective_usd_per_year, rel=1e-6)
    assert "then searched on the full model" in priced.solve.termination
    assert priced.solve.model["columns"] == full.solve.model["columns"]
