"""The in-memory front doors: Scenario.from_frames (the same builder as files) and
scenario_from_cost_matrix (a facility location problem as a scenario)."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import dcplace
from helpers import TINY_CATALOG, job, make_scenario, region, site
from dcplace.models import Scenario, ScenarioError, load_scenario, scenario_from_cost_matrix
from dcplace.optimizer import SolveOptions, solve

SITES = [site("a", 0, 0), site("b", 0, 1, cooling_allowed="air")]
REGIONS = [region("town", 0, 0.5), region("city", 0, 0.7, chat=400)]
JOBS = [job("pretrain", 48)]
SECTIONS = dict(economics={"discount_rate": 0.0, "inference_target_utilization": 1.0, "training_load_factor": 1.0},
                latency={"route_factor": 1.0, "fiber_km_per_ms": 200.0, "overhead_ms": 0.0}, policies={})


def frames(sites=SITES, regions=REGIONS, jobs=JOBS, **kw):
    return Scenario.from_frames(sites=pd.DataFrame(sites), regions=pd.DataFrame(regions), jobs=pd.DataFrame(jobs),
                                catalog={k: pd.DataFrame(v) for k, v in TINY_CATALOG.items()}, name="tiny", **{**SECTIONS, **kw})


def test_from_frames_equals_the_same_tables_from_files(tmp_path):
    from_files = load_scenario(make_scenario(tmp_path, SITES, REGIONS, JOBS))
    from_frames = frames()
    assert from_frames.content_hash == from_files.content_hash
    assert from_frames.sites == from_files.sites and from_frames.regions == from_files.regions
    assert from_frames.files["sites"] == "<sites frame>"
    # a catalog folder, and a GeoDataFrame of points, give the same again
    geo = gpd.GeoDataFrame(pd.DataFrame(SITES).drop(columns=["lat", "lon"]), geometry=gpd.points_from_xy([0, 1], [0, 0]), crs=4326)
    again = Scenario.from_frames(sites=geo, regions=pd.DataFrame(REGIONS), jobs=pd.DataFrame(JOBS), catalog=tmp_path / "catalog",
                                 name="tiny", **SECTIONS)
    assert again.content_hash == from_files.content_hash
    assert dcplace.Scenario.from_frames == Scenario.from_frames and dcplace.scenario_from_frames


def test_a_bad_cell_in_a_frame_gives_the_problem_a_file_gives(tmp_path):
    bad_sites = [SITES[0], {**SITES[1], "floor_racks": "lots", "power_price_usd_per_mwh": 0.08}]
    with pytest.raises(ScenarioError) as in_file:
        load_scenario(make_scenario(tmp_path, bad_sites, REGIONS, JOBS))
    with pytest.raises(ScenarioError) as in_frame:
        frames(sites=bad_sites)
    file_problems, frame_problems = in_file.value.problems, in_frame.value.problems
    assert [(p.field, p.message, p.fix) for p in frame_problems] == [(p.field, p.message, p.fix) for p in file_problems]
    assert {p.file for p in frame_problems} == {"<sites frame>"} and {p.row for p in frame_problems} == {2}
    assert len(frame_problems) == 2


def test_an_unknown_section_key_from_frames():
    with pytest.raises(ScenarioError) as info:
        frames(policies={"max_site": 3})
    assert "field 'policies.max_site': unknown key. Fix: did you mean 'max_sites'?" in str(info.value)


def brute_force(f, d, c):
    m, n = c.shape
    best = np.inf
    for k in range(1, m + 1):
        for open_ in itertools.combinations(range(m), k):
            best = min(best, sum(f[i] for i in open_) + sum(min(c[i, j] for i in open_) for j in range(n)))
    return best


def test_cost_matrix_solves_to_the_brute_force_optimum():
    rng = np.random.default_rng(7)
    f = rng.uniform(50, 150, 4)
    d = rng.integers(1, 5, 6).astype(float)
    c = rng.uniform(0, 60, (4, 6))
    scenario = dcplace.scenario_from_cost_matrix(f, d, c, name="tiny-ufl")
    plan = solve(scenario, SolveOptions(mip_gap=0))
    assert plan.objective_usd_per_year == pytest.approx(brute_force(f, d, c), rel=1e-6)


def test_cost_matrix_refuses_a_bad_matrix():
    with pytest.raises(ScenarioError) as info:
        scenario_from_cost_matrix([1, 2], [1, 1, 1], [[0, 1, 2], [0, 1]])
    assert "<cost matrix>, field 'costs': must be 2 x 3 (facilities x customers), got 2 rows of 2 or 3 entries." in str(info.value)
    with pytest.raises(ScenarioError) as info:
        scenario_from_cost_matrix([1], [1], [[float("inf")]])
    assert "costs[0][0]" in str(info.value)


@pytest.mark.parametrize("fixed, demands, costs, named", [
    ([1, 2], [1, 1], np.array([[0.0, 1.0], [-2.0, 1.0]]), "field 'costs[1][0]': must be a finite number >= 0 (got -2.0)"),
    ([1, 2], [1, 1], [[0, "abc"], [1, 1]], "field 'costs[0][1]': must be a finite number >= 0 (got 'abc')"),
    ([1, 2], [1, 1], np.zeros((2, 3)), "must be 2 x 2 (facilities x customers), got an array of shape (2, 3)"),
    ([1, 2], [1, 1], [1, 2], "must be 2 x 2 (facilities x customers), got an array of shape (2,)"),
    ([1, 2], [1, 1], [3, [1, 2]], "must be 2 x 2 (facilities x customers), got 0 rows of 0 entries"),
    (["x", 2], [1, None], [[0, 1], [1, 0]], "field 'fixed_costs[0]': must be a finite number >= 0 (got 'x')"),
    ([1, 2], [1, None], [[0, 1], [1, 0]], "field 'demands[1]': must be a finite number >= 0 (got None)"),
    ([1, 2], [1, 1], pd.DataFrame([[1, "x"], [3, 4]], columns=["a", "b"]), "field 'costs[0][1]': must be a finite number >= 0 (got 'x')"),
    ([1, 2], [1, 1], [[10**400, 1], [1, 1]], "field 'costs[0][0]': must be a finite number >= 0"),
    ([10**400, 2], [1, 1], [[1, 1], [1, 1]], "field 'fixed_costs[0]': must be a finite number >= 0"),
    (None, [1, 1], [[0, 1], [1, 0]], "field 'fixed_costs': must be a sequence of numbers (got NoneType)"),
    ("12", [1, 1], [[0, 1], [1, 0]], "field 'fixed_costs': must be a sequence of numbers (got the text '12')"),
    ([1, 2], [1e308, 1e308], [[0, 1], [1, 0]], "field 'demands': add up to more than a float can hold"),
])
def test_cost_matrix_names_each_bad_entry_without_a_traceback(fixed, demands, costs, named):
    """Non-numbers, negatives and a wrong shape are ScenarioErrors naming the entry, whether the
    matrix is an array (checked at once) or nested lists (checked entry by entry)."""
    with pytest.raises(ScenarioError) as info:
        scenario_from_cost_matrix(fixed, demands, costs)
    assert named in str(info.value)


def test_orlib_uses_the_package_adapter():
    source = (Path(__file__).resolve().parents[1] / "benchmarks" / "orlib.py").read_text()
    tree = ast.parse(source)
    assert "scenario_from_cost_matrix" in source
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("Site", "Region", "PairCost")]


def test_files_split_keeps_every_public_name():
    from dcplace.models import files, scenario_file, tables, writing

    for name in ("load_scenario", "write_scenario", "export_default", "default_scenario_path", "scenario_hash", "ScenarioError",
                 "read_table", "parse_rows", "load_catalog", "Table", "CATALOG_TABLES", "ScenarioFile"):
        assert hasattr(files, name), name
    assert files.load_scenario is scenario_file.load_scenario and files.write_scenario is writing.write_scenario
    assert files.read_table is tables.read_table
    root = Path(files.__file__).parent
    for module in ("files", "tables", "scenario_file", "writing", "yamlio", "frames"):
        assert len((root / f"{module}.py").read_text().splitlines()) < 500, module


def test_scenario_hash_covers_every_pair_cost():
    """Pair costs are hashed apart from the rest (models.scenario_file.scenario_hash): the same
    matrix gives the same hash, any one entry changed gives another."""
    costs = np.arange(12, dtype=float).reshape(3, 4)
    first = scenario_from_cost_matrix([1, 2, 3], [1, 1, 1, 1], costs)
    assert scenario_from_cost_matrix([1, 2, 3], [1, 1, 1, 1], costs.tolist()).content_hash == first.content_hash
    hashes = {first.content_hash}
    for i, j in [(0, 0), (2, 3), (1, 2)]:
        changed = costs.copy()
        changed[i, j] += 0.5
        hashes.add(scenario_from_cost_matrix([1, 2, 3], [1, 1, 1, 1], changed).content_hash)
    assert len(hashes) == 4


@pytest.mark.parametrize("costs", [
    ([1.0, 2.0] for _ in range(2)),  # a generator of rows
    [iter([1, 2]), iter([1, 2])],  # rows that are iterators
    pd.DataFrame([[1, 2], [1, 2]], columns=["a", "b"]),
])
def test_cost_matrix_takes_any_rows_of_numbers(costs):
    """What numpy cannot turn into an array at once is read row by row (these were refused
    with a traceback while one array check stood alone); a Series is read by position."""
    scenario = scenario_from_cost_matrix(pd.Series([5, 6], index=[10, 11]), (d for d in [1, 1]), costs)
    assert [p.usd_per_year for p in scenario.pair_costs] == [1.0, 2.0, 1.0, 2.0]
    assert [s.fixed_cost_usd_per_year for s in scenario.sites] == [5.0, 6.0]
