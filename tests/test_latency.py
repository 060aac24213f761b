"""Latency against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import make_scenario, region, site, write_csv
from dcplace.models import ScenarioError, load_scenario
from dcplace.optimizer.model.index import build_index
from dcplace.models.geo import great_circle_km
from dcplace.optimizer.model.latency import rtt_matrix_ms
from dcplace.optimizer.solving.precheck import precheck

R = 6371.0088


def test_great_circle_hand_values():
    assert great_circle_km(0, 0, 0, 1) == pytest.approx(2 * math.pi * R / 360, rel=1e-12)
    assert great_circle_km(0, 0, 90, 0) == pytest.approx(math.pi / 2 * R, rel=1e-12)
    assert great_circle_km(10, 170, 10, -170) == pytest.approx(great_circle_km(10, -10, 10, 10), rel=1e-12)
    assert great_circle_km(45, 7, 45, 7) == 0


def test_rtt_uses_route_factor_speed_and_overhead(tmp_path):
    path = make_scenario(
        tmp_path, [site("s", 0, 1)], [region("r", 0, 0)],
        latency={"route_factor": 2.1, "fiber_km_per_ms": 204.0, "overhead_ms": 5.0},
    )
    rtt = rtt_matrix_ms(load_scenario(path))
    assert rtt.shape == (1, 1)
    assert rtt[0, 0] == pytest.approx(2 * (2 * math.pi * R / 360) * 2.1 / 204 + 5, rel=1e-12)


def test_backbone_shortest_path(tmp_path):
    path = make_scenario(
        tmp_path, [site("near", 0, 1), site("island", 0, 2)], [region("r", 0, 0)],
        latency={"backbone": "backbone.csv", "overhead_ms": 1.0},
    )
    write_csv(tmp_path / "backbone.csv", [
        {"from": "r", "to": "hub", "km": 100},
        {"from": "hub", "to": "near", "km": 50},
        {"from": "r", "to": "near", "km": 400},
    ])
    scenario = load_scenario(path)
    rtt = rtt_matrix_ms(scenario)
    assert rtt[0, 0] == pytest.approx(2 * 150 / 200 + 1.0)
    assert np.isinf(rtt[0, 1])


def test_backbone_that_misses_a_region_is_an_input_problem(tmp_path):
    path = make_scenario(tmp_path, [site("s", 0, 1)], [region("r", 0, 0)], latency={"backbone": "backbone.csv"})
    write_csv(tmp_path / "backbone.csv", [{"from": "x", "to": "s", "km": 10}])
    problems = precheck(build_index(load_scenario(path)))
    assert problems and "no site within" in problems[0].message


def test_backbone_bad_distance(tmp_path):
    path = make_scenario(tmp_path, [site("s", 0, 1)], [region("r", 0, 0)], latency={"backbone": "backbone.csv"})
    write_csv(tmp_path / "backbone.csv", [{"from": "r", "to": "s", "km": "-3"}])
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    [problem] = info.value.problems
    assert (problem.file, problem.row, problem.field) == ("backbone.csv", 2, "km")


def test_a_plans_inputs_reload_to_the_same_hash_whatever_the_backbone_file_was_called(tmp_path):
    """inputs/ renames the backbone to backbone.csv; the hash is of content, so it must not change."""
    from dcplace.optimizer.checker import check_plan_folder
    from dcplace.optimizer.solving.pipeline import solve_to_folder
    from dcplace.optimizer.solving.solve import SolveOptions

    path = make_scenario(tmp_path / "in", [site("near", 0, 1)], [region("r", 0, 0)], latency={"backbone": "my_fibre_map.csv"})
    write_csv(tmp_path / "in" / "my_fibre_map.csv", [{"from": "r", "to": "near", "km": 120}])
    scenario = load_scenario(path)
    plan, report = solve_to_folder(scenario, tmp_path / "plan", SolveOptions(mip_gap=0, time_limit_s=60))
    assert report.ok, report.violations
    again = load_scenario(tmp_path / "plan" / "inputs" / "scenario.yaml")
    assert again.content_hash == scenario.content_hash == plan.scenario_hash
    assert check_plan_folder(tmp_path / "plan").ok
