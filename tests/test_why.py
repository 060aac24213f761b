"""Why this plan (issue 17): per-workload economics, honest status, prices of limits, site worth,
near-optimal alternatives and robustness, on tiny scenarios whose answers are known by hand."""

from __future__ import annotations

import json

import pytest

from helpers import job, make_scenario, region, site
from dcplace.models import load_scenario
from dcplace.models.plan import read_plan
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.solving.pipeline import solve_to_folder

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=60)
HOURS = 8760
# one 'server-air' rack: 4 kW IT at PUE 1.5 (6 kW facility), load factor 0.5
RACK_MWH = 4 * 1.5 * HOURS * 0.5 / 1000


def two_price_scenario(tmp_path, cheap_kw: float = 7.0, training: bool = False):
    """'cheap' (power $50/MWh) holds one rack (7 kW < 2 x 6 kW); 'dear' ($100/MWh) the rest;
    with `training`, a 48-GPU job at a third site 'lab' (liquid cooling), far from the town."""
    sites = [site("cheap", 0, 0, power_price_usd_per_mwh=50, power_limit_kw=cheap_kw, cooling_allowed="air"),
             site("dear", 0, 1, power_price_usd_per_mwh=100, cooling_allowed="air")]
    if training:
        sites.append(site("lab", 40, 40, power_price_usd_per_mwh=30))
    return make_scenario(tmp_path / "two", sites=sites, regions=[region("town", 0, 0.5, chat=1600, budget=50)],
                         jobs=[job("train", 48)] if training else None)


def three_site_scenario(tmp_path):
    """Region 'west' is reachable from 'a' (cheap) and 'b' (dear); region 'east' only from 'c'."""
    return make_scenario(
        tmp_path / "three",
        sites=[site("a", 0, 0, power_price_usd_per_mwh=50), site("b", 0, 1, power_price_usd_per_mwh=100),
               site("c", 0, 20, power_price_usd_per_mwh=80)],
        regions=[region("west", 0, 0.5, chat=800, budget=10), region("east", 0, 20.2, chat=800, budget=10)],
    )


# ------------------------------------------------------------------ 1. per-workload economics, 6. status


def test_workload_costs_add_up_to_the_plan_total(tmp_path):
    from dcplace.reports.economics import workload_costs

    path = two_price_scenario(tmp_path, training=True)
    scenario = load_scenario(path)
    plan = solve(scenario, EXACT)
    uses = {u.use: u for u in workload_costs(plan, scenario)}
    assert set(uses) == {"chat", "training"}
    assert sum(u.total_usd_per_year for u in uses.values()) == pytest.approx(plan.objective_usd_per_year, rel=1e-12)
    # the fixed costs (three sites at $1,000, one liquid zone at $5,000) are all allocated
    assert sum(u.shared_usd_per_year for u in uses.values()) == pytest.approx(3 * 1000 + 5000, rel=1e-12)
    # training: one 48-GPU H100-equivalent rack on a fabric of efficiency 1, busy all year (load factor 1)
    assert uses["training"].units_per_year == pytest.approx(48 * HOURS)
    assert uses["training"].usd_per_unit == pytest.approx(uses["training"].total_usd_per_year / (48 * HOURS))
    tokens = 1600 * 0.5 * HOURS * 3600
    assert uses["chat"].usd_per_unit == pytest.approx(uses["chat"].total_usd_per_year / (tokens / 1e6))


def test_status_says_how_far_from_the_best_plan(tmp_path):
    from dcplace.reports.summary import status_text

    plan = solve(load_scenario(two_price_scenario(tmp_path)), EXACT)
    assert status_text(plan) == "proven optimal: no cheaper plan exists"
    loose = plan.model_copy(update={"solve": plan.solve.model_copy(update={
        "gap": 0.0048, "best_bound_usd_per_year": plan.objective_usd_per_year - 6.0e6})})
    assert status_text(loose) == "within 0.48% of the best possible plan (at most $6.00 M a year better exists)"
    unbounded = plan.model_copy(update={"solve": plan.solve.model_copy(update={"gap": None, "best_bound_usd_per_year": None})})
    assert "no bound" in status_text(unbounded)


# ------------------------------------------------------------------ 3. prices of the limits


def test_power_price_is_the_hand_value_and_matches_a_finite_difference(tmp_path):
    from dcplace.optimizer.studies.duals import limit_prices

    path = two_price_scenario(tmp_path)
    scenario = load_scenario(path)
    plan = solve(scenario, EXACT)
    racks = {s.id: s.racks_total for s in plan.sites}
    assert racks["cheap"] >= 1 and {s.id for s in plan.sites if s.open} >= {"cheap", "dear"}
    prices = limit_prices(scenario, plan, latency=False)
    power = {p.key: p for p in prices.prices if p.limit == "site power"}
    # one more kW at 'cheap' moves 1/6 of a rack there from 'dear': it saves 1/6 of the energy difference
    by_hand_per_mw = (100 - 50) * RACK_MWH / 6.0 * 1000
    assert power["cheap"].value_usd_per_year_per_unit == pytest.approx(by_hand_per_mw, rel=1e-6)
    assert power["cheap"].binding and not power["dear"].binding
    # a finite difference done independently: the same LP for a scenario whose limit is raised
    delta_kw = 0.07
    raised = load_scenario(path, overrides={"sites[cheap].power_limit_kw": 7.0 + delta_kw})
    after = limit_prices(raised, plan, latency=False).lp_objective_usd_per_year
    fd_per_mw = (prices.lp_objective_usd_per_year - after) / delta_kw * 1000
    assert fd_per_mw == pytest.approx(power["cheap"].value_usd_per_year_per_unit, rel=0.01)
    assert power["cheap"].check_usd_per_year_per_unit == pytest.approx(power["cheap"].value_usd_per_year_per_unit, rel=0.01)
    assert prices.lp_objective_usd_per_year <= plan.objective_usd_per_year + 1e-6


def test_latency_budget_price_is_a_finite_difference_of_the_plan_lp(tmp_path):
    from dcplace.optimizer.studies.duals import limit_prices

    # 'far' is cheap but 0.1 ms beyond the budget: one more ms lets the plan LP use it (both sites forced open)
    path = make_scenario(
        tmp_path / "lat",
        sites=[site("near", 0, 0, power_price_usd_per_mwh=100, cooling_allowed="air"),
               site("far", 0, 0.9, power_price_usd_per_mwh=50, cooling_allowed="air")],
        regions=[region("town", 0, 0, chat=800, budget=1.0), region("there", 0, 0.9, chat=800, budget=1.0)],
    )
    scenario = load_scenario(path)
    plan = solve(scenario, EXACT)
    lat = {p.key: p for p in limit_prices(scenario, plan).prices if p.limit == "latency budget"}
    assert {s.id for s in plan.sites if s.open} == {"near", "far"}  # each region has one site within 1 ms
    # 1 ms more lets 'town' (100 km = 1.0008 ms from 'far') be served by 'far' at half the energy price: one rack's worth
    assert lat["chat"].method == "finite difference"
    assert lat["chat"].value_usd_per_year_per_unit == pytest.approx((100 - 50) * RACK_MWH, rel=1e-6)
    assert lat["chat"].cost_of_one_less_usd_per_year == pytest.approx(0.0, abs=1e-6)  # both regions sit on their site


# ------------------------------------------------------------------ 2. site worth


def test_site_worth_is_the_difference_of_two_solves_by_hand(tmp_path):
    from dcplace.optimizer.studies.explain import saved_analysis
    from dcplace.optimizer.studies.worth import WorthStudy, site_worth

    path = three_site_scenario(tmp_path)
    base, _ = solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    assert {s.id for s in base.sites if s.open} == {"a", "c"}
    study = site_worth(tmp_path / "plan", workers=1, options={"mip_gap": 0.0, "time_limit_s": 60}, closed_candidates=["b"])
    worth = {w.site: w for w in study.items}
    without_a = solve(load_scenario(path, overrides={"policies.forbidden_sites": ["a"]}), EXACT)
    assert worth["a"].worth_usd_per_year == pytest.approx(without_a.objective_usd_per_year - base.objective_usd_per_year, abs=1e-6)
    assert worth["a"].worth_usd_per_year == pytest.approx((100 - 50) * RACK_MWH, rel=1e-9)  # the energy price difference, by hand
    assert worth["a"].opens == ["b"] and not worth["a"].tie
    assert worth["c"].indispensable and worth["c"].worth_usd_per_year is None  # 'east' has no other site within budget
    with_b = solve(load_scenario(path, overrides={"policies.forced_sites": ["b"]}), EXACT)
    assert worth["b"].kind == "closed"
    assert worth["b"].worth_usd_per_year == pytest.approx(with_b.objective_usd_per_year - base.objective_usd_per_year, abs=1e-6)
    assert worth["b"].worth_usd_per_year == pytest.approx(1000, rel=1e-9)  # open and idle: its fixed cost
    saved = saved_analysis(tmp_path / "plan", "worth", "worth.json")
    assert saved is not None and WorthStudy.from_dict(saved).items[0].site == study.items[0].site
    # resumable: a second run re-solves nothing that has a result (a bad_input member is retried, as in any batch)
    again = site_worth(tmp_path / "plan", workers=1, options={"mip_gap": 0.0, "time_limit_s": 60}, closed_candidates=["b"])
    batch = json.loads((tmp_path / "plan" / "why" / "worth" / "batch.json").read_text())
    assert all(m["skipped"] for m in batch["members"] if m["status"] in ("optimal", "feasible"))
    assert sum(m["skipped"] for m in batch["members"]) == 2
    assert [w.worth_usd_per_year for w in again.items] == [w.worth_usd_per_year for w in study.items]


# ------------------------------------------------------------------ 4. near-optimal alternatives


def test_alternatives_are_checked_within_the_slack_and_differ(tmp_path):
    from dcplace.optimizer.checker import check_plan_folder
    from dcplace.optimizer.studies.alternatives import near_optimal_alternatives

    # four sites around one town at $50-$53/MWh: any one of them is within 2 % of the best
    path = make_scenario(tmp_path / "four", sites=[site(f"s{i}", 0, 0.1 * i, power_price_usd_per_mwh=50 + i) for i in range(4)],
                         regions=[region("town", 0, 0.15, chat=800, budget=50), region("farm", 0.3, 0.15, chat=800, budget=50)])
    base, _ = solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    study = near_optimal_alternatives(tmp_path / "plan", k=3, slack=0.02, time_limit_s=30)
    assert len(study.alternatives) == 3
    sets = [set(study.plan_roles)] + [set(a.roles) for a in study.alternatives]
    for a in study.alternatives:
        folder = tmp_path / "plan" / "why" / "alternatives" / a.name
        assert check_plan_folder(folder).ok
        alt = read_plan(folder)
        assert alt.objective_usd_per_year <= 1.02 * base.objective_usd_per_year + 1e-6
        assert a.cost_usd_per_year == pytest.approx(alt.objective_usd_per_year)
        assert a.min_difference >= 1
    assert all(sets[i] != sets[j] for i in range(len(sets)) for j in range(i))  # every plan opens another set of sites
    assert set(study.interchangeable()) | set(study.must_haves()) == set().union(*sets)
    assert set(study.must_haves()) == set.intersection(*sets)


# ------------------------------------------------------------------ 5. robustness


def test_robustness_flips_and_regret_by_hand(tmp_path):
    from dcplace.optimizer.studies.robustness import robustness

    path = three_site_scenario(tmp_path)
    base, _ = solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    study = robustness(tmp_path / "plan", samples=8, workers=2, ranges={"sites[a].power_price_usd_per_mwh": (0.5, 3.0)},
                       options={"mip_gap": 0.0, "time_limit_s": 60})
    assert len(study.solved()) == 8
    for s in study.samples:
        (factor,) = s.factors
        price_a = 50 * factor
        # the recommended plan serves 'west' from 'a'; once 'a' costs more than 'b' ($100/MWh) 'b' takes over
        assert s.regret_usd_per_year == pytest.approx(max(0.0, price_a - 100) * RACK_MWH, abs=1e-6)
        assert s.flips == (["a", "b"] if price_a > 100 + 1e-9 else [])
        assert s.plan_cost_usd_per_year == pytest.approx(base.objective_usd_per_year + (price_a - 50) * RACK_MWH, rel=1e-9)
    flipped = sum(50 * s.factors[0] > 100 for s in study.samples)
    assert 0 < flipped < 8  # the Latin hypercube spreads the draws over the range
    assert study.flip_rates() == {"a": flipped / 8, "b": flipped / 8}
    [bar] = study.tornado()
    assert bar.label == "sites[a].power_price_usd_per_mwh" and bar.cost_swing_usd_per_year > 0 and bar.regret_swing_usd_per_year > 0


def test_robustness_without_provenance_treats_cells_as_assumptions(tmp_path):
    from dcplace.optimizer.studies.robustness import provenance_groups

    # the default's ranges: tests/test_robust.py (those provenance.csv records)
    tiny = provenance_groups(load_scenario(three_site_scenario(tmp_path)))  # no provenance: treated as assumptions
    assert all(g.basis in ("as given", "assumption") for g in tiny)
    for g in tiny:
        for path, (low, high) in zip(g.paths, g.cell_ranges):
            assert high / low == pytest.approx(1.25 / 0.75), path


# ------------------------------------------------------------------ the report sections and the CLI


def test_report_shows_each_analysis_only_for_its_plan(tmp_path):
    from dcplace.optimizer.studies.alternatives import near_optimal_alternatives
    from dcplace.optimizer.studies.duals import prices_of_plan
    from dcplace.optimizer.studies.robustness import robustness
    from dcplace.optimizer.studies.worth import site_worth
    from dcplace.reports import load_plan_layers, save_report
    from dcplace.reports.report import report_content

    path = three_site_scenario(tmp_path)
    solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    ids = lambda: {s.id for s in report_content(load_plan_layers(tmp_path / "plan")).sections}  # noqa: E731
    assert {"prices", "worth", "alternatives", "robustness"}.isdisjoint(ids())
    prices_of_plan(tmp_path / "plan")
    site_worth(tmp_path / "plan", options={"mip_gap": 0.0}, closed_candidates=["b"])
    near_optimal_alternatives(tmp_path / "plan", k=1, slack=0.1, time_limit_s=20)
    robustness(tmp_path / "plan", samples=4, options={"mip_gap": 0.0})
    content = report_content(load_plan_layers(tmp_path / "plan"))
    assert {"prices", "worth", "alternatives", "robustness"} <= {s.id for s in content.sections}
    worth = content.section("worth")
    table = next(b for b in worth.blocks if getattr(b, "id", "") == "worth")
    assert any(row[3] == "indispensable" for row in table.rows)  # 'c' is the only site within 10 ms of 'east'
    # page 1 says it too (issue 49: after `dcplace why worth`, page 1 was unchanged)
    risks = " ".join(content.section("summary").blocks[3].items)
    assert "What each site is worth (`dcplace why worth`):" in risks and "indispensable" in risks, risks
    paths = save_report(load_plan_layers(tmp_path / "plan"), tmp_path / "plan" / "report")
    html = (tmp_path / "plan" / "report" / "report.html").read_text()
    assert "What each site is worth" in html and "Near-optimal alternatives" in html and "data:image/png;base64," in html
    assert any(p.suffix == ".pdf" for p in paths)
    # a new plan in the same folder: the saved analyses no longer explain it and are not shown
    solve_to_folder(load_scenario(path, overrides={"sites[a].power_price_usd_per_mwh": 60}), tmp_path / "plan", EXACT)
    assert {"prices", "worth", "alternatives", "robustness"}.isdisjoint(ids())


def test_cli_why_commands(tmp_path):
    from typer.testing import CliRunner

    from dcplace.cli import app

    runner = CliRunner()
    path = three_site_scenario(tmp_path)
    solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    result = runner.invoke(app, ["why", "prices", str(tmp_path / "plan")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "plan" / "why" / "prices" / "prices.json").is_file()
    result = runner.invoke(app, ["alternatives", str(tmp_path / "plan"), "--k", "1", "--time-limit", "20", "--slack", "0.1"])
    assert result.exit_code == 0, result.output
    assert "1 alternatives within 10%" in " ".join(result.output.split())  # 'b' instead of 'a': +4.6 %
    # what `why` writes under PLAN/why/ is not plan data: the folder still passes its check
    assert runner.invoke(app, ["check", str(tmp_path / "plan")]).exit_code == 0
    result = runner.invoke(app, ["why", "worth", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "not a plan folder" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["alternatives", str(tmp_path / "plan"), "--slack", "2"])
    assert result.exit_code == 2 and "slack" in result.output
    # a plan.json damaged after the solve: every command that reads it says so (exit 2), none calls it a bug
    (tmp_path / "plan" / "plan.json").write_text((tmp_path / "plan" / "plan.json").read_text()[:2000])
    for command in (["why", "prices"], ["report"], ["outages"], ["check"]):
        result = runner.invoke(app, [*command, str(tmp_path / "plan")])
        assert result.exit_code in (1, 2) and "internal error" not in result.output, (command, result.output)


def test_worth_prices_the_substitutes_as_candidates(tmp_path):
    from dcplace.optimizer.studies.worth import site_worth

    solve_to_folder(load_scenario(three_site_scenario(tmp_path)), tmp_path / "plan", EXACT)
    study = site_worth(tmp_path / "plan", options={"mip_gap": 0.0}, closed_candidates=1)
    assert [w.site for w in study.candidates()] == ["b"]  # what the re-solve without 'a' opens instead
    assert study.candidates()[0].worth_usd_per_year == pytest.approx(1000, rel=1e-9)
