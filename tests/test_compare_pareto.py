"""dcplace compare (KPIs against a baseline, site changes) and dcplace pareto (trade-off curves)."""

from __future__ import annotations

import markupsafe
import pandas as pd
import pytest
from helpers import make_scenario, region, site
from typer.testing import CliRunner

from dcplace.cli import app
from dcplace.models import load_scenario
from dcplace.models.plan import read_plan
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.studies.pareto import trace_pareto
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports.compare import collect_plans, comparison_table

runner = CliRunner()

HOURS = 8760.0


@pytest.fixture(scope="module")
def tradeoff_scenario(tmp_path_factory):
    """Cheap dirty site, dear clean site (carbon), cheap far site (latency), two regions."""
    root = tmp_path_factory.mktemp("tradeoff")
    sites = [site("dirty", 40.0, -74.0, power_price_usd_per_mwh=40, grid_carbon_g_per_kwh=800),
             site("clean", 40.2, -74.2, power_price_usd_per_mwh=120, grid_carbon_g_per_kwh=20, name="<b>Clean</b> & co"),
             site("far", 44.0, -74.0, power_price_usd_per_mwh=30, grid_carbon_g_per_kwh=400)]
    regions = [region("r1", 40.1, -74.1, chat=1600, budget=60), region("r2", 40.3, -74.0, chat=800, budget=60)]
    return make_scenario(root / "s", sites, regions)


def test_compare_against_a_baseline(tradeoff_scenario, tmp_path):
    solve_to_folder(tradeoff_scenario, tmp_path / "base")
    # Forbid the site the baseline uses: the alternative plan must open another.
    base_plan = read_plan(tmp_path / "base")
    used = [s.id for s in base_plan.sites if s.open]
    child = tradeoff_scenario.parent / "child.yaml"
    child.write_text(f"name: no-{used[0]}\nextends: scenario.yaml\noverrides:\n  policies.forbidden_sites: [{used[0]}]\n")
    solve_to_folder(child, tmp_path / "alternative")
    result = runner.invoke(app, ["compare", str(tmp_path / "base"), str(tmp_path / "alternative"), "--baseline", "base", "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert list(table["plan"]) == ["base", "alternative"]
    alternative = read_plan(tmp_path / "alternative")
    row = table.iloc[1]
    assert row["cost change, $M/yr"] == pytest.approx((alternative.objective_usd_per_year - base_plan.objective_usd_per_year) / 1e6)
    assert row["cost change, $M/yr"] > 0  # forbidding the cheapest choice costs money
    names = {s.id: s.name for s in base_plan.sites}
    assert names[used[0]] in row["sites closed"]
    opened = {s.id for s in alternative.sites if s.open}
    assert set(row["sites opened"].split("; ")) == {names[s] for s in opened}
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert "<script" not in page and page.count("data:image/svg+xml") == 4  # 3 overview charts + the waterfall
    if "clean" in opened:
        assert str(markupsafe.escape("<b>Clean</b> & co")) in page and "<b>Clean</b>" not in page


def test_compare_expands_a_batch_folder_and_rejects_an_unknown_baseline(tmp_path, tradeoff_scenario):
    solve_to_folder(tradeoff_scenario, tmp_path / "one")
    assert [p.label for p in collect_plans([tmp_path / "one"])] == ["one"]
    with pytest.raises(ValueError, match="baseline 'nope'"):
        comparison_table(collect_plans([tmp_path / "one"]), "nope")
    result = runner.invoke(app, ["compare", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "neither a plan folder" in result.output


def test_carbon_frontier_is_monotone_and_ends_at_the_least_emissions(tradeoff_scenario, tmp_path):
    result = runner.invoke(app, ["pareto", str(tradeoff_scenario), "--tradeoff", "carbon", "--points", "5", "--gap", "0", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "pareto.csv")
    assert list(table["name"]) == ["least-cost", "cap-01", "cap-02", "cap-03", "cap-04", "least-carbon"]
    assert (table["status"] == "optimal").all()
    # Both ends are listed; the least-carbon anchor's cost leaves out its dominant carbon price,
    # so at gap 0 it is the cheapest plan at the least emissions: the tightest cap's plan.
    assert table["emissions_t_per_year"].iloc[-1] == pytest.approx(table["emissions_t_per_year"].iloc[-2], rel=1e-6)
    assert table["cost_usd_per_year"].iloc[-1] == pytest.approx(table["cost_usd_per_year"].iloc[-2], rel=1e-6)
    # Tighter caps: emissions never rise and cost never falls; every point is efficient.
    assert table["emissions_t_per_year"].is_monotonic_decreasing
    assert table["cost_usd_per_year"].is_monotonic_increasing
    assert table["efficient"].all()
    # The least-cost point is the plain solve.
    assert table["cost_usd_per_year"].iloc[0] == pytest.approx(read_plan(tmp_path / "points" / "least-cost").objective_usd_per_year)
    # The last point is all on the clean site: its facility power, run at the chat load factor
    # of the tiny catalog (0.5), at 20 g/kWh.
    last = read_plan(tmp_path / "points" / "cap-04")
    clean = next(s for s in last.sites if s.id == "clean")
    assert [s.id for s in last.sites if s.open] == ["clean"]
    assert table["emissions_t_per_year"].iloc[-1] == pytest.approx(clean.facility_kw * HOURS * 0.5 * 20 / 1e6, rel=1e-9)
    for name in table["name"]:
        assert check_plan_folder(tmp_path / "points" / name).ok
    for name in table["name"][1:-1]:
        plan = read_plan(tmp_path / "points" / name)
        assert plan.kpis["emissions_t_per_year"] <= load_scenario(tmp_path / "points" / name / "inputs" / "scenario.yaml").policies.carbon_cap_t_per_year + 1e-6
    assert (tmp_path / "pareto.png").read_bytes()[:4] == b"\x89PNG"


def test_latency_frontier_trades_cost_for_rtt(tradeoff_scenario, tmp_path):
    frontier = trace_pareto(tradeoff_scenario, tmp_path, "latency", points=5, options={"mip_gap": 0})
    rtts = [p.mean_rtt_ms for p in frontier]
    costs = [p.cost_usd_per_year for p in frontier]
    assert rtts == sorted(rtts, reverse=True)  # heavier weight, nearer sites
    assert costs == sorted(costs)  # ... at a higher real cost
    assert rtts[-1] < rtts[0] and costs[-1] > costs[0]
    # The reported cost leaves out the weight: the base has no transport charge, so it is the
    # plan's objective less its whole transport line.
    last = read_plan(frontier[-1].folder)
    assert costs[-1] == pytest.approx(last.objective_usd_per_year - last.cost_breakdown_usd_per_year["transport"], rel=1e-9)


def test_a_capped_point_without_a_plan_of_its_own_starts_from_the_least_carbon_plan(tradeoff_scenario, tmp_path, monkeypatch):
    """Capped points are hard (simulated: their solve gets a time limit too small to build the
    model, so each ends with no plan of its own). The least-carbon plan meets every cap, so every
    point still has a checked plan, marked feasible, re-costed, proving nothing; both ends are drawn."""
    import dataclasses

    import dcplace.optimizer.studies.batch as batch

    real = batch.solve

    def hard_when_capped(scenario, options, **kw):
        if scenario.policies.carbon_cap_t_per_year is not None:
            options = dataclasses.replace(options, time_limit_s=1e-6)
        return real(scenario, options, **kw)

    monkeypatch.setattr(batch, "solve", hard_when_capped)  # forked pool workers inherit the patch
    result = runner.invoke(app, ["pareto", str(tradeoff_scenario), "--tradeoff", "carbon", "--points", "4", "--gap", "0",
                                 "--workers", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "pareto.csv")
    assert list(table["name"]) == ["least-cost", "cap-01", "cap-02", "cap-03", "least-carbon"]
    assert table["cost_usd_per_year"].notna().all()
    capped = table[table["name"].str.startswith("cap-")]
    assert (capped["status"] == "feasible").all()  # a start plan is never claimed optimal without a bound
    anchor = read_plan(tmp_path / "points" / "least-carbon")
    for name in capped["name"]:
        folder = tmp_path / "points" / name
        plan = read_plan(folder)
        assert check_plan_folder(folder).ok
        assert plan.solve.warm_start == "start plan least-carbon" and plan.solve.gap is None
        assert "least-carbon" in plan.solve.termination
        # the same decisions as the least-carbon plan, costed at the scenario's own (zero) carbon price
        assert [s.id for s in plan.sites if s.open] == [s.id for s in anchor.sites if s.open]
        assert plan.kpis["emissions_t_per_year"] == pytest.approx(anchor.kpis["emissions_t_per_year"], rel=1e-9)
        assert plan.cost_breakdown_usd_per_year["carbon"] == 0.0
        assert plan.objective_usd_per_year == pytest.approx(table["cost_usd_per_year"].iloc[-1], rel=1e-9)
    assert "note: cap-01" in result.output
    # Re-running resumes: the fallback plans are finished results of the same scenario and options.
    again = runner.invoke(app, ["pareto", str(tradeoff_scenario), "--tradeoff", "carbon", "--points", "4", "--gap", "0",
                                "--out", str(tmp_path)])
    assert again.exit_code == 0, again.output
    assert all(m["skipped"] for m in __import__("json").loads((tmp_path / "points" / "batch.json").read_text())["members"])


def test_a_point_that_fails_is_named_and_the_command_exits_5(tradeoff_scenario, tmp_path, monkeypatch):
    import dcplace.optimizer.studies.batch as batch

    real = batch.solve_from_starts

    def broken(scenario, folder, options, starts):
        if scenario.name == "cap-02":
            raise RuntimeError("solver exploded")
        return real(scenario, folder, options, starts)

    monkeypatch.setattr(batch, "solve_from_starts", broken)
    result = runner.invoke(app, ["pareto", str(tradeoff_scenario), "--tradeoff", "carbon", "--points", "4", "--out", str(tmp_path)])
    assert result.exit_code == 5, result.output
    assert "1 of 5 points failed" in result.output and "cap-02" in result.output and "solver exploded" in result.output
    table = pd.read_csv(tmp_path / "pareto.csv")
    assert table.set_index("name").loc["cap-02", "status"] == "error"
    assert table.set_index("name").loc[["least-cost", "least-carbon"], "cost_usd_per_year"].notna().all()  # both ends drawn


def test_solve_offers_a_callers_start_plan(tmp_path):
    """The hook a trade-off point uses: a solved plan, mapped onto the model, is HiGHS's first incumbent."""
    from dataclasses import replace

    from helpers import job, make_scenario, region, site

    from dcplace.models import load_scenario
    from dcplace.optimizer.solving.solve import SolveOptions, solve
    from dcplace.optimizer.studies.batch import start_columns

    scenario = load_scenario(make_scenario(tmp_path, [site("a", 0, 0), site("b", 0, 1, power_price_usd_per_mwh=30)],
                                           [region("town", 0, 0.5, chat=2000)], jobs=[job("pretrain", 48)]))
    exact = SolveOptions(mip_gap=0.0, time_limit_s=60, warm_start=False)
    first = solve(scenario, exact)
    again = solve(scenario, exact, start=lambda lm, ix: start_columns(first, lm, ix))
    assert again.solve.warm_start.startswith("the caller's start plan held")
    assert again.objective_usd_per_year == pytest.approx(first.objective_usd_per_year, rel=1e-9)
    # at a loose gap the held plan is never lost: the run returns it or a cheaper one
    loose = solve(scenario, SolveOptions(mip_gap=0.05, time_limit_s=60, warm_start=False),
                  start=lambda lm, ix: start_columns(first, lm, ix))
    assert loose.solve.status == "optimal"
    assert loose.objective_usd_per_year <= first.objective_usd_per_year * (1 + 1e-9)
    ignored = solve(scenario, exact, start=lambda lm, ix: None)
    assert ignored.solve.warm_start == "off"


def test_a_held_back_start_stops_the_search_once_the_bound_proves_it():
    """The MIP interrupt callback (optimizer.solvers.highs_model) ends HiGHS's search when its
    dual bound comes within the gap of the plan held back from it, and not before."""
    from types import SimpleNamespace

    from dcplace.optimizer.solvers.highs_model import QuietHighs, _interrupt_mip

    h = QuietHighs()
    h.deadline = float("inf")
    h.held_objective, h.held_gap = 100.0, 0.005
    calls = []

    def event(bound):
        e = SimpleNamespace(user_data=h, data_out=SimpleNamespace(mip_dual_bound=bound, mip_primal_bound=float("inf")),
                            interrupt=calls.append)
        _interrupt_mip(e)
        return calls[-1]

    assert event(-float("inf")) is False and event(99.0) is False and not h.held_proven
    assert event(99.6) is True and h.held_proven  # 100 - 99.6 <= 0.005 x 100
    h.held_proven, h.held_objective, h.dual_bound = False, float("inf"), -float("inf")
    assert event(1e9) is False  # nothing held: only HiGHS's own gap or the deadline stop it


def test_the_held_plan_is_handed_to_highs_once_its_root_is_over():
    """highs_model._offer_held: no plan while the root's cut loop runs, the held plan at the
    first user-solution callback that counts a node (or after held_offer_at), and only once."""
    import time
    from types import SimpleNamespace

    import numpy as np

    from dcplace.optimizer.solvers.highs_model import QuietHighs, _offer_held

    h = QuietHighs()
    h.held_x, h.held_offer_at = np.array([1.0, 0.0, 2.0]), time.perf_counter() + 3600
    given = []

    def event(nodes):
        e = SimpleNamespace(user_data=h, data_out=SimpleNamespace(mip_node_count=nodes),
                            data_in=SimpleNamespace(setSolution=given.append))
        _offer_held(e)
        return len(given)

    assert event(0) == 0 and not h.held_offered  # the root: HiGHS is left without it
    assert event(1) == 1 and list(given[0]) == [1.0, 0.0, 2.0]
    assert event(5) == 1  # once
    h.held_offered, h.held_offer_at = False, time.perf_counter() - 1
    assert event(0) == 2  # a root that outlasts its share of the time gets it anyway
