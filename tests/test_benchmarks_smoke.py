"""OR-Library optima through the engine: a few instances in CI (benchmarks/run.py does all 37)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.orlib import as_scenario, bare_highs, instances, optima, orlib_dir, parse_cap  # noqa: E402
from optimizer import SolveOptions  # noqa: E402
from optimizer.pipeline import solve_to_folder  # noqa: E402

pytestmark = pytest.mark.skipif(not orlib_dir().exists(), reason="OR-Library files are not beside the repository")


@pytest.mark.parametrize("name", ["cap41", "cap64", "cap74", "cap104", "cap131"])
def test_engine_matches_the_published_optimum(tmp_path, name):
    [(_, path, capacity)] = instances([name])
    data = parse_cap(path, capacity)
    plan, report = solve_to_folder(as_scenario(name, data), tmp_path / "plan", SolveOptions(mip_gap=0.0))
    assert report.ok, report.violations
    assert plan.objective_usd_per_year == pytest.approx(optima()[name], rel=1e-6)
    bare_objective, _ = bare_highs(data)
    assert bare_objective == pytest.approx(optima()[name], rel=1e-6)


def test_parser_reads_the_capacity_sets():
    [(_, path, capacity)] = instances(["capb_6000"])
    data = parse_cap(path, capacity)
    assert (data["m"], data["n"]) == (100, 1000)
    assert set(data["s"]) == {6000.0}
    assert data["c"].shape == (100, 1000)
