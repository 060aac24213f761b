"""Every exact back-end of the registry agrees with HiGHS on the optimum of random small
scenarios, and every plan passes the independent checker. The back-ends and what each
honours come from optimizer.solvers.backends.REGISTRY, not from a list here."""

from __future__ import annotations

import pytest

from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solvers.backends import CAPABILITIES, REGISTRY, Backend, RunResult, get_backend, run_backend
from dcplace.optimizer.solving.pipeline import solve_to_folder

SEEDS = range(20)
REFERENCE = "highs"
# exact back-ends (continuous columns as floating point) that are installed; CP-SAT scales them to integers
CROSS_CHECKED = [name for name, b in REGISTRY.items() if name != REFERENCE and b.capabilities.exact_continuous and b.available()]


def options_for(backend: Backend, **kw) -> SolveOptions:
    """Options the back-end honours: warm start only where it has one."""
    return SolveOptions(solver=backend.name, warm_start=backend.capabilities.warm_start, **kw)


@pytest.mark.parametrize("solver", CROSS_CHECKED)
@pytest.mark.parametrize("seed", SEEDS)
def test_backends_agree_with_highs(tmp_path, seed, solver):
    scenario = synthetic_scenario(seed, n_sites=4, n_regions=6, n_jobs=1)
    plans = {}
    for name in (REFERENCE, solver):
        plan, report = solve_to_folder(scenario, tmp_path / name, options_for(REGISTRY[name], mip_gap=0.0, time_limit_s=120))
        assert report.ok, (name, report.violations)
        assert plan.solve.status == "optimal", (name, plan.solve.termination)
        plans[name] = plan
    # both proved optimal at gap 0: equal up to the solvers' feasibility tolerance (1e-6)
    assert plans[REFERENCE].objective_usd_per_year == pytest.approx(plans[solver].objective_usd_per_year, rel=1e-6)


def test_registry_holds_every_backend_with_its_capabilities_and_runner():
    assert set(REGISTRY) == {"highs", "ortools", "ortools-sat"}
    assert CROSS_CHECKED == ["ortools"]
    assert CAPABILITIES == {name: b.capabilities for name, b in REGISTRY.items()}  # the alias cli.py reads
    for name, backend in REGISTRY.items():
        assert backend.name == name and callable(backend.runner)
        assert backend.capabilities.time_limit and backend.capabilities.mip_gap
    assert REGISTRY["highs"].capabilities.warm_start and not REGISTRY["ortools"].capabilities.warm_start
    assert REGISTRY["highs"].capabilities.deadline_watchdog


def test_unknown_solver_is_refused_with_the_registry_listed():
    with pytest.raises(ValueError, match="unknown solver 'gurobi': choose one of highs, ortools, ortools-sat"):
        SolveOptions(solver="gurobi")
    with pytest.raises(ValueError, match="choose one of highs, ortools, ortools-sat"):
        get_backend("cplex")


def test_dispatch_reads_the_registry_and_notes_what_a_backend_does_not_honour(monkeypatch):
    """run_backend calls the registry entry's runner (no branching on names); an option the
    back-end cannot honour is noted in words and ends up in the plan's termination."""
    from dataclasses import replace

    import dcplace.optimizer.solvers.backends as backends

    calls = []

    def fake_runner(lm, ix, options, relaxation=None, good_enough_usd=None, incumbent=None):
        calls.append(options.solver)
        return RunResult(solver="fake", solver_version="0", status="no_solution", termination="fake"), None

    monkeypatch.setitem(backends.REGISTRY, "ortools", replace(REGISTRY["ortools"], runner=fake_runner))
    result, x = run_backend(None, None, SolveOptions(solver="ortools", warm_start=True))
    assert calls == ["ortools"] and x is None
    assert result.notes == ("warm_start=True is not honoured by 'ortools': solved without it",)
    assert result.record()["termination"] == "fake; warm_start=True is not honoured by 'ortools': solved without it"
    result, _ = run_backend(None, None, SolveOptions(solver="ortools", warm_start=False))
    assert result.notes == ()


def test_an_option_a_backend_cannot_go_without_is_refused(monkeypatch):
    from dataclasses import replace

    import dcplace.optimizer.solvers.backends as backends

    no_gap = replace(REGISTRY["ortools"].capabilities, mip_gap=False)
    monkeypatch.setitem(backends.REGISTRY, "ortools", replace(REGISTRY["ortools"], capabilities=no_gap))
    with pytest.raises(ValueError, match="cannot honour mip_gap=0.005"):
        run_backend(None, None, SolveOptions(solver="ortools"))


def test_ortools_plan_records_the_warm_start_note(tmp_path):
    scenario = synthetic_scenario(0, n_sites=4, n_regions=6, n_jobs=1)
    plan, report = solve_to_folder(scenario, tmp_path / "o", SolveOptions(solver="ortools", time_limit_s=60))
    assert report.ok and plan.solve.solver == "ortools-scip"
    assert "warm_start=True is not honoured by 'ortools'" in plan.solve.termination
    assert plan.solve.warm_start == "off"


def test_run_result_is_typed_and_states_whether_it_has_a_plan():
    from dcplace.models.plan import HAS_PLAN

    assert HAS_PLAN == frozenset({"optimal", "feasible"})
    r = RunResult(solver="highs", solver_version="1", status="feasible", termination="t", objective_usd_per_year=1.0)
    assert r.has_plan and r["status"] == "feasible"
    assert not RunResult(solver="highs", solver_version="1", status="no_solution", termination="t").has_plan
