"""The benchmark set as a CI smoke check of correctness, not speed: OR-Library cap41-cap74
against their published optima, and the synthetic 50 x 200 scale through the checker
(benchmarks/run.py does all 37 instances and the larger scales, timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.orlib import as_scenario, bare_highs, instances, optima, orlib_dir, parse_cap  # noqa: E402
from benchmarks.run import N_JOBS, QUICK_CAPS, SEED  # noqa: E402
from dcplace.models.synthetic import synthetic_scenario  # noqa: E402
from dcplace.optimizer import SolveOptions  # noqa: E402
from dcplace.optimizer.solving.pipeline import solve_to_folder  # noqa: E402

needs_orlib = pytest.mark.skipif(not orlib_dir().exists(), reason="OR-Library files are not beside the repository")


@needs_orlib
@pytest.mark.parametrize("name", QUICK_CAPS + ["cap104", "cap131"])
def test_engine_matches_the_published_optimum(tmp_path, name):
    [(_, path, capacity)] = instances([name])
    data = parse_cap(path, capacity)
    plan, report = solve_to_folder(as_scenario(name, data), tmp_path / "plan", SolveOptions(mip_gap=0.0))
    assert report.ok, report.violations
    assert plan.objective_usd_per_year == pytest.approx(optima()[name], rel=1e-6)
    bare_objective, _ = bare_highs(data)
    assert bare_objective == pytest.approx(optima()[name], rel=1e-6)


@needs_orlib
def test_parser_reads_the_capacity_sets():
    [(_, path, capacity)] = instances(["capb_6000"])
    data = parse_cap(path, capacity)
    assert (data["m"], data["n"]) == (100, 1000)
    assert set(data["s"]) == {6000.0}
    assert data["c"].shape == (100, 1000)


def test_synthetic_50_by_200_gives_a_checked_plan(tmp_path):
    """The benchmark's smallest scale, as benchmarks/run.py builds it: within a minute the warm
    start gives a plan of the full model, and that plan must pass the independent checker."""
    scenario = synthetic_scenario(SEED, 50, 200, N_JOBS, box_deg=(25.0, 45.0))
    plan, report = solve_to_folder(scenario, tmp_path / "plan", SolveOptions(mip_gap=0.05, time_limit_s=60, threads=2))
    assert report.ok, report.violations
    assert plan.solve.status in ("optimal", "feasible") and plan.solve.gap is not None
    assert plan.solve.model["rows"] > 15_000  # the full-size model, not a shrunken one
    assert len(plan.jobs) == N_JOBS
