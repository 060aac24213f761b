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


@needs_orlib
def test_orlib_only_quick_writes_its_section_and_nothing_else(tmp_path):
    """`python benchmarks/run.py --orlib-only --quick` as CI would run it, into a copy of a
    RESULTS.md: only the `orlib` section changes (an unmarked legacy table is replaced where it
    stands), the engine and the Pyomo peer match the published optima, and spopt's verdict is
    stated. No timing is asserted."""
    import subprocess

    from benchmarks.results import marked_sections

    out = tmp_path / "RESULTS.md"
    head = "# Benchmark results\n\n## OR-Library capacitated facility location (through the engine)\n\nold table\n\n## Synthetic scales\n\nkept\n"
    other = "<!-- section:other -->\n## Other\n\nx\n<!-- /section:other -->\n"
    out.write_text(head + "\n" + other)
    for _ in range(2):  # the second run replaces the section the first one wrote
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"),
                               "--orlib-only", "--quick", "--out", str(out)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        text = out.read_text()
        sections = marked_sections(text)
        assert [s.splitlines()[0] for s in sections] == ["<!-- section:orlib -->", "<!-- section:other -->"]
        assert "old table" not in text and "## Synthetic scales\n\nkept\n" in text and sections[1] == other
        orlib = sections[0]
        for name in ("cap41", "cap131"):
            assert f"| {name} |" in orlib
        assert "engine 2 of 2, bare highspy 2 of 2, Pyomo 2 of 2" in orlib
        assert "spopt:" in orlib and "fixed cost" in orlib
    assert not list(tmp_path.glob(".RESULTS.md.*"))  # no temporary file left behind


@needs_orlib
def test_pyomo_peer_matches_the_published_optimum():
    from benchmarks.orlib import pyomo_highs

    [(_, path, capacity)] = instances(["cap41"])
    objective, seconds = pyomo_highs(parse_cap(path, capacity))
    assert objective == pytest.approx(optima()["cap41"], rel=1e-6) and seconds > 0


def test_synthetic_50_by_200_gives_a_checked_plan(tmp_path):
    """The benchmark's smallest scale, as benchmarks/run.py builds it: within a minute the warm
    start gives a plan of the full model, and that plan must pass the independent checker."""
    scenario = synthetic_scenario(SEED, 50, 200, N_JOBS, box_deg=(25.0, 45.0))
    plan, report = solve_to_folder(scenario, tmp_path / "plan", SolveOptions(mip_gap=0.05, time_limit_s=60, threads=2))
    assert report.ok, report.violations
    assert plan.solve.status in ("optimal", "feasible") and plan.solve.gap is not None
    assert plan.solve.model["rows"] > 15_000  # the full-size model, not a shrunken one
    assert len(plan.jobs) == N_JOBS


def test_features_at_scale_gives_checked_plans_and_its_section(tmp_path):
    """benchmarks/features_at_scale.py on a tiny world: each feature's scenario extends the
    written synthetic world and turns exactly its feature on, and the section it writes holds
    one row per run and nothing else of the file changes."""
    from benchmarks import features_at_scale as bench
    from dcplace.models import load_scenario
    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.models.writing import write_scenario

    world = tmp_path / "world"
    write_scenario(synthetic_scenario(bench.SEED, 6, 20, 1, box_deg=(25.0, 45.0)), world)
    loaded = {f: load_scenario(bench.feature_yaml(world / "scenario.yaml", f, tmp_path)) for f in bench.FEATURES}
    assert [f for f, s in loaded.items() if s.clock.on] == ["clock 24 h"]
    assert [f for f, s in loaded.items() if s.policies.survive_site_loss] == ["N-1"]
    assert [f for f, s in loaded.items() if s.periods] == ["periods"] and len(loaded["periods"].periods) == 3
    assert len(loaded["base"].sites) == 6 and loaded["clock 24 h"].profiles
    # features joined by "+" are all on at once, on top of the world's own policies
    combined = load_scenario(bench.feature_yaml(world / "scenario.yaml", "clock 24 h+N-1+carbon cap", tmp_path))
    assert combined.clock.on and combined.policies.survive_site_loss and combined.policies.carbon_cap_t_per_year == bench.CARBON_CAP_T
    with pytest.raises(ValueError, match="unknown feature"):
        bench.feature_yaml(world / "scenario.yaml", "clock+typo", tmp_path)
    rows = [bench.one_run(6, 20, f, 20.0) for f in ("base", "clock 24 h")]
    assert [r["checked"] for r in rows] == [True, True] and all(r["objective"] > 0 for r in rows)
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nkept\n")
    from benchmarks.results import replace_section

    replace_section(results, bench.SECTION, bench.render(rows, "test"))
    text = results.read_text()
    assert "kept" in text and text.count("| 6 x 20 |") == 2
