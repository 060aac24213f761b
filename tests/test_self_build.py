"""Self-build of training campuses (docs/formulation.md, self_build_*): hand-derived optima,
the checker on tampered tenure, and self-build off leaving plans as they were.

The tiny scenario (tests/helpers.py, discount rate 0, training load factor 1): two sites that
differ only in power price and tenure. 'own' pays 100 $/MWh and may self-build at
$6,000,000 per MW of IT; 'rent' pays 90 $/MWh and has no build cost, so it can only lease.
Colocation is 100 $/kW-month at both, $1,200 per kW-year. The job runs on 60 kW,
48-GPU 'trainer-dense' racks in liquid (PUE 1.1), one rack per 48 H100-equivalents.

  build at 'own', per kW-year: 6,000,000 / 1000 x (CRF(0, 10 y) = 0.1 + O&M 0.02) = $720
  so self-building saves 1,200 - 720 = $480 per kW-year, $28,800 per 60 kW rack,
  less the campus fixed cost of $100,000 a year; a campus is at least 0.3 MW = 5 racks.
  'rent''s cheaper power saves 60 x 1.1 x 8760 / 1000 x (100 - 90) = $5,781.60 per rack-year.

  4 racks (192 GPUs, 240 kW < 300 kW): 'own' cannot build; leasing there costs 4 x 5,781.60
  = $23,126.40 more than at 'rent', so the job goes to 'rent', which leases.
  5 racks (240 GPUs, 300 kW = the minimum campus): at 'own' the campus saves
  5 x 28,800 - 100,000 = $44,000 against leasing there, and leasing there is 5 x 5,781.60 =
  $28,908 dearer than 'rent': 'own' self-builds and wins by 44,000 - 28,908 = $15,092.
"""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import job, make_scenario, region, site
from dcplace.models import load_scenario
from dcplace.models.errors import ScenarioError
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.solving.pipeline import solve_to_folder

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=60)
HOURS = 8760
BUILD = {"build_om_share_per_year": 0.02, "build_life_years": 10, "min_campus_mw": 0.3, "campus_fixed_usd_per_year": 100_000}


def rack_usd(price: float) -> float:
    """One 60 kW 'trainer-dense' rack in liquid on 'ib', leased, by hand (tests/test_optima.py)."""
    return 48 * 10000 / 5 + 60 * 1000 / 10 + 60 * 1.1 * HOURS / 1000 * price + 60 * 100 * 12 + 48 * 1000 / 5


def two_sites(folder, gpus: float, economics=None, build_cell=6_000_000):
    sites = [site("own", 0, 0, build_usd_per_mw=build_cell), site("rent", 0, 1, power_price_usd_per_mwh=90, build_usd_per_mw="")]
    return make_scenario(folder, sites=sites, regions=[region("nobody", 0, 0, chat=0)], jobs=[job("pretrain", gpus)],
                         economics={**BUILD, **(economics or {})})


def test_below_the_campus_size_the_job_leases_at_the_cheaper_power(tmp_path):
    plan = solve(load_scenario(two_sites(tmp_path, 192)), EXACT)
    [placement] = plan.jobs
    assert placement.site == "rent"
    sites = {s.id: s for s in plan.sites}
    assert (sites["own"].tenure, sites["own"].built_kw) == ("lease", 0.0)
    assert (sites["rent"].tenure, sites["rent"].built_kw) == (None, None)  # no build cost: it cannot self-build
    assert plan.objective_usd_per_year == pytest.approx(1000 + 5000 + 4 * rack_usd(90), rel=1e-9)
    assert plan.cost_breakdown_usd_per_year["self_build"] == 0.0


def test_at_the_campus_size_self_build_wins(tmp_path):
    plan = solve(load_scenario(two_sites(tmp_path, 240)), EXACT)
    [placement] = plan.jobs
    assert placement.site == "own"
    own = next(s for s in plan.sites if s.id == "own")
    assert (own.tenure, own.built_kw) == ("build", pytest.approx(300.0))
    expected = 1000 + 5000 + 5 * rack_usd(100) + 300 * (720 - 1200) + 100_000
    assert plan.objective_usd_per_year == pytest.approx(expected, rel=1e-9)
    assert plan.objective_usd_per_year == pytest.approx(1000 + 5000 + 5 * rack_usd(90) - 15_092, rel=1e-9)
    breakdown = plan.cost_breakdown_usd_per_year
    assert breakdown["self_build"] == pytest.approx(300 * 720 + 100_000)
    assert breakdown["colocation"] == pytest.approx(0.0, abs=1e-6)  # all of it replaced by the campus
    assert sum(breakdown.values()) == pytest.approx(plan.objective_usd_per_year, rel=1e-12)
    assert plan.kpis["training_cost_usd_per_year"] + plan.kpis["shared_cost_usd_per_year"] == pytest.approx(plan.objective_usd_per_year)


def test_economics_default_applies_where_the_cell_is_blank(tmp_path):
    """Both sites blank, the economics default $6 M/MW: 'rent' (cheaper power) now builds too."""
    plan = solve(load_scenario(two_sites(tmp_path, 240, economics={"build_usd_per_mw": 6_000_000}, build_cell="")), EXACT)
    assert plan.jobs[0].site == "rent"
    assert {s.id: s.tenure for s in plan.sites} == {"own": "lease", "rent": "build"}


def test_self_build_off_reproduces_the_leased_plan(tmp_path):
    """No build cost anywhere: the hand optimum of tests/test_optima.py (cheapest power, leased), no tenure."""
    path = make_scenario(tmp_path, sites=[site("a", 10, 0), site("b", 10, 1, power_price_usd_per_mwh=40)],
                         regions=[region("nobody", 0, 0, chat=0)], jobs=[job("pretrain", 48)])
    plan = solve(load_scenario(path), EXACT)
    assert plan.objective_usd_per_year == pytest.approx(1000 + 5000 + rack_usd(40), rel=1e-9)
    assert all(s.tenure is None and s.built_kw is None for s in plan.sites)
    assert plan.cost_breakdown_usd_per_year["self_build"] == 0.0


@pytest.fixture(scope="module")
def built_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("self-build")
    _, report = solve_to_folder(two_sites(root / "in", 240), root / "plan", EXACT)
    assert report.ok, report.violations
    return root / "plan"


def _tampered(built_folder, tmp_path, change):
    from dcplace.models.plan import write_manifest
    target = tmp_path / "plan"
    shutil.copytree(built_folder, target)
    data = json.loads((target / "plan.json").read_text())
    change(next(s for s in data["sites"] if s["id"] == "own"))
    (target / "plan.json").write_text(json.dumps(data, indent=2))
    write_manifest(target, data["scenario_hash"])  # a tamperer who knows the format: the recomputation must catch it
    return check_plan_folder(target)


def test_the_checker_passes_the_built_plan(built_folder):
    report = check_plan_folder(built_folder)
    assert report.ok, report.violations
    assert "self_build" in report.checked


def test_checker_flags_built_kw_above_the_training_load(built_folder, tmp_path):
    report = _tampered(built_folder, tmp_path, lambda s: s.update(built_kw=360.0))
    assert any(v.family == "self_build" and "more than the 300.0 kW IT" in v.message for v in report.violations), report.violations
    assert "cost" in report.families_violated()  # the campus's cost and credit no longer match the plan's


def test_checker_flags_a_campus_below_the_minimum(built_folder, tmp_path):
    report = _tampered(built_folder, tmp_path, lambda s: s.update(built_kw=240.0))
    assert any(v.family == "self_build" and "below the minimum campus of 300.0 kW" in v.message for v in report.violations)


def test_checker_flags_a_lease_that_lists_built_kw(built_folder, tmp_path):
    report = _tampered(built_folder, tmp_path, lambda s: s.update(tenure="lease"))
    assert any(v.family == "self_build" and "leases but lists" in v.message for v in report.violations)


@pytest.mark.parametrize("where, value, words", [
    ("economics", 11.7, "millions of USD per MW"),
    ("site", 11700, "millions of USD per MW"),
    ("economics_om", 0.9, "build_om_share_per_year"),
])
def test_bad_build_inputs_are_named(tmp_path, where, value, words):
    if where == "site":
        path = two_sites(tmp_path, 240, build_cell=value)
    elif where == "economics":
        path = two_sites(tmp_path, 240, economics={"build_usd_per_mw": value}, build_cell="")
    else:
        path = two_sites(tmp_path, 240, economics={"build_om_share_per_year": value})
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert words in str(err.value)


@pytest.mark.parametrize("racks, fixed, campus", [(5, 100_000, True), (4, 100_000, False), (5, 200_000, False)])
def test_the_warm_start_self_builds_where_the_rounded_training_load_makes_a_campus_pay(tmp_path, racks, fixed, campus):
    """5 racks = 300 kW = the minimum campus, saving 5 x 28,800 = $144,000 a year: a campus at
    $100,000 fixed pays, at $200,000 it does not; 4 racks are below the minimum. (Rounding the
    LP's fractional campus decision instead would leave every campus closed.)"""
    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.solving.precheck import checked_index
    from dcplace.optimizer.solvers.warmstart import _campuses

    ix = checked_index(load_scenario(two_sites(tmp_path, 240, economics={"campus_fixed_usd_per_year": fixed})))
    lm = build_model(ix)
    key = next(k for k in ix.trn_racks if k[0] == "own" and k[1] == "trainer-dense")
    start = _campuses(lm, ix, {key: racks})
    assert start[lm.col("build", "own")] == (1.0 if campus else 0.0)
    assert start[lm.col("built_kw", "own")] == pytest.approx(racks * 60.0 if campus else 0.0)


def test_the_default_ships_build_costs_with_self_build_off_and_one_switch_turns_it_on():
    """data/README.md 'Self-build': off in the default (the search does not settle within its
    limits), every figure kept; `economics.self_build=true` offers campuses where building a
    kW costs less than leasing it."""
    from dcplace.optimizer.model.index import build_index

    off = build_index(load_scenario())
    assert off.build == [] and all(s.build_usd_per_mw for s in off.scenario.sites)
    on = build_index(load_scenario(None, overrides={"economics.self_build": True}))
    assert on.build, "no default site may self-build"
    for s in on.build:
        assert on.build_usd_per_kw_year[s] < 12 * on.sites[s].colocation_usd_per_kw_month


def test_self_build_off_leaves_a_site_with_a_build_cost_leasing_and_the_checker_agrees(tmp_path):
    folder = two_sites(tmp_path / "in", 240, economics={"self_build": False})
    plan, report = solve_to_folder(load_scenario(folder), tmp_path / "plan", EXACT)
    assert report.ok, report
    assert all(s.tenure is None for s in plan.sites)
    assert plan.jobs[0].site == "rent"  # leasing at 'own' is dearer: cheaper power wins
