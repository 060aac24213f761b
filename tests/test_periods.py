"""Multi-period plans (docs/periods.md): hand-derived optima, the independent schedule checker
against plans broken on purpose, and every tie family shown to hold something.

The tiny catalog (tests/helpers.py) at discount rate 0 keeps the arithmetic by hand: a
server-air rack is 16 GPUs x $2,000 = $32,000 of chips, 4 kW, serving 16 x 50 = 800 tok/s; a
trainer-dense rack is 48 GPUs, 60 kW (liquid only).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

from helpers import TINY_CATALOG, job, make_scenario, region, site
from dcplace.models import load_scenario
from dcplace.models.plan import write_manifest
from dcplace.models.schedule import write_schedule_folder
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.checker import check_schedule_folder
from dcplace.optimizer.model.families import REGISTRY
from dcplace.optimizer.solving.periods import solve_periods

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)
TWO = [{"year": 2026, "years": 2}, {"year": 2028, "years": 2}]


def catalog(chip_life: float = 5, ready: float = 0.0, retrofit: float = 0.0, air_zone: float = 0.0, liquid_zone: float = 5000) -> dict:
    cat = copy.deepcopy(TINY_CATALOG)
    for chip in cat["chips"]:
        chip["life_years"] = chip_life
    for row in cat["cooling"]:
        if row["id"] == "liquid":
            row.update(ready_usd_per_kw=ready, retrofit_usd_per_kw=retrofit, zone_fixed_usd_per_year=liquid_zone)
        else:
            row.update(ready_usd_per_kw=0, retrofit_usd_per_kw=0, zone_fixed_usd_per_year=air_zone)
    return cat


def years(tmp_path: Path, periods=TWO, **kw) -> Path:
    kw.setdefault("economics", {"discount_rate": 0.0})
    return make_scenario(tmp_path, sections={"periods": periods}, **kw)


def solved(path: Path, out: Path, without: tuple[str, ...] = ()) -> Path:
    schedule, plans = solve_periods(load_scenario(path), OPTIONS, without=without)
    return write_schedule_folder(schedule, load_scenario(path), plans, out)


def families(folder: Path) -> set[str]:
    return check_schedule_folder(folder).families_violated()


# --------------------------------------------------------------------------- the cases

TWO_SITES = dict(sites=[site("old", 0, 0, power_price_usd_per_mwh=300), site("new", 0, 0.02, power_price_usd_per_mwh=10)],
                 regions=[region("town", 0, 0.01)])


def time_to_power(tmp_path: Path) -> Path:
    """'new' is cheap but has no power until 2028; 'old' is dear. Chips live 2 years: nothing carries over."""
    kw = copy.deepcopy(TWO_SITES)
    kw["sites"][0]["power_from_year"], kw["sites"][1]["power_from_year"] = "", 2028
    return years(tmp_path, catalog=catalog(chip_life=2, air_zone=500), **kw)


def dense_later(tmp_path: Path, ready: float, retrofit: float, rate: float = 0.0) -> Path:
    """One hub: chat from 2026 on air racks; a training job (dense, liquid only) from 2028. A liquid zone
    costs $200,000 a year, so building it empty in 2026 to dodge the retrofit never pays."""
    return years(tmp_path, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)],
                 jobs=[job("big", 96, from_year=2028)], economics={"discount_rate": rate},
                 catalog=catalog(ready=ready, retrofit=retrofit, liquid_zone=200000))


def dense_last(tmp_path: Path) -> Path:
    """As dense_later, over three periods with the dense job in the last and money worth 10 %/yr: readiness
    bought in 2028 would be cheaper than in 2026, but only a site being built can be built ready."""
    return years(tmp_path, periods=[{"year": 2026, "years": 2}, {"year": 2028, "years": 2}, {"year": 2030, "years": 2}],
                 sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)], jobs=[job("big", 96, from_year=2030)],
                 economics={"discount_rate": 0.1}, catalog=catalog(ready=1000, retrofit=2000, liquid_zone=200000))


def chips_age(tmp_path: Path, life: float) -> Path:
    return years(tmp_path, periods=[{"year": 2026, "years": 2}, {"year": 2028, "years": 2}, {"year": 2030, "years": 2}],
                 sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)], catalog=catalog(chip_life=life))


# ---------------------------------------------------------------- one period is today

@pytest.mark.parametrize("rate", [0.0, 0.08])
def test_one_period_of_one_year_is_todays_model(tmp_path, rate):
    kw = dict(sites=[site("west", 0, 0), site("east", 0, 10, power_price_usd_per_mwh=40)],
              regions=[region("wtown", 0, 0.1, budget=5), region("etown", 0, 10.1, budget=5)], jobs=[job("j", 96)],
              economics={"discount_rate": rate})
    today = solve(load_scenario(make_scenario(tmp_path / "today", **kw)), OPTIONS)
    path = years(tmp_path / "years", periods=[{"year": 2026, "years": 1}], **kw)
    schedule, plans = solve_periods(load_scenario(path), OPTIONS)
    assert schedule.npv_usd == pytest.approx(today.objective_usd_per_year, rel=1e-9)
    assert plans[0][0].objective_usd_per_year == pytest.approx(today.objective_usd_per_year, rel=1e-9)
    folder = write_schedule_folder(schedule, load_scenario(path), plans, tmp_path / "out")
    assert check_schedule_folder(folder).ok


# ---------------------------------------------------------------------- hand-derived

def test_power_that_arrives_later_serves_nothing_before(tmp_path):
    path = time_to_power(tmp_path / "in")
    schedule, plans = solve_periods(load_scenario(path), OPTIONS)
    first, second = (p for p, _ in plans)
    racks = {(p.scenario, s.id): s.racks_total for p in (first, second) for s in p.sites}
    assert (first.scenario, "new") not in racks  # no power: not a candidate in 2026 at all
    assert racks[first.scenario, "old"] == 1  # 800 tok/s: one rack, at old
    assert racks[second.scenario, "new"] == 1 and racks[second.scenario, "old"] == 0  # power arrives: the cheap site serves
    # what each period costs alone: 2026 with 'new' forbidden, 2028 with 'old' forbidden; a site once
    # open stays open, so 'old' pays its $1,000/yr fixed cost and its $500/yr air zone in 2028 as well
    def alone(forbidden: str) -> float:
        one_year = make_scenario(tmp_path / forbidden, catalog=catalog(chip_life=2, air_zone=500), policies={"forbidden_sites": [forbidden]},
                                 **TWO_SITES)
        return solve(load_scenario(one_year), OPTIONS).objective_usd_per_year

    alone_2026, alone_2028 = alone("new"), alone("old")
    expected = 2 * alone_2026 + 2 * (alone_2028 + 1000 + 500)
    assert schedule.npv_usd == pytest.approx(expected, rel=1e-9)
    assert check_schedule_folder(write_schedule_folder(schedule, load_scenario(path), plans, tmp_path / "out")).ok


@pytest.mark.parametrize("ready, retrofit, rate, bought", [
    (1000, 2000, 0.0, "ready"),      # ready $1,000/kW now < retrofit $2,000/kW later
    (3000, 2000, 0.0, "retrofit"),   # readiness dearer than the retrofit it saves
    (1000, 2000, 0.5, "retrofit"),   # $2,000 two years later at 50 %/yr is $889 today: the retrofit wins
])
def test_liquid_ready_is_bought_exactly_when_the_later_dense_rack_repays_it(tmp_path, ready, retrofit, rate, bought):
    path = dense_later(tmp_path / "in", ready, retrofit, rate)
    schedule, plans = solve_periods(load_scenario(path), OPTIONS)
    dense_kw = 2 * 60.0  # 96 H100-equivalent GPUs on 48-GPU trainer racks: 2 racks of 60 kW, liquid only
    halls = {(h.year, h.cooling): h for h in schedule.halls}
    if bought == "ready":
        assert halls[2026, "liquid"].ready_kw == pytest.approx(dense_kw) and halls[2026, "liquid"].it_kw == 0
        assert (2028, "liquid") not in halls  # nothing left to convert
        expected = dense_kw * ready
    else:
        assert (2026, "liquid") not in halls
        assert halls[2028, "liquid"].retrofit_kw == pytest.approx(dense_kw) and halls[2028, "liquid"].it_kw == pytest.approx(dense_kw)
        expected = dense_kw * retrofit / (1 + rate) ** 2
    assert schedule.npv_breakdown_usd["halls"] == pytest.approx(expected, rel=1e-9)
    assert check_schedule_folder(write_schedule_folder(schedule, load_scenario(path), plans, tmp_path / "out")).ok


def test_a_chip_past_its_life_is_replaced_and_paid_for_again(tmp_path):
    schedule, _ = solve_periods(load_scenario(chips_age(tmp_path / "four", life=4)), OPTIONS)
    racks = sorted((b.year, b.count, b.serves_through_year) for b in schedule.builds if b.kind == "racks")
    assert racks == [(2026, 1, 2029), (2030, 1, 2031)]  # a 4-year chip serves 2026-29, then is bought again
    # $32,000 of chips over 4 years at 0 %: $8,000 a year, for every year of the six
    assert schedule.npv_breakdown_usd["chips"] == pytest.approx(6 * 8000.0, rel=1e-9)
    schedule, _ = solve_periods(load_scenario(chips_age(tmp_path / "six", life=6)), OPTIONS)
    assert [(b.year, b.count) for b in schedule.builds if b.kind == "racks"] == [(2026, 1)]  # bought once, serves all three
    assert schedule.npv_breakdown_usd["chips"] == pytest.approx(6 * 32000.0 / 6, rel=1e-9)


def test_demand_growth_and_training_growth_reach_each_period(tmp_path):
    periods = [{"year": 2026, "years": 1}, {"year": 2027, "years": 1, "demand": {"chat": 3, "training": 2}}]
    path = years(tmp_path / "in", periods=periods, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)], jobs=[job("j", 48)])
    schedule, plans = solve_periods(load_scenario(path), OPTIONS)
    assert [line.demand_tok_s for line in schedule.periods] == [800.0, 2400.0]
    inference = [sum(r.racks for s in p.sites for r in s.racks if r.purpose == "inference") for p, _ in plans]
    training = [sum(r.racks for s in p.sites for r in s.racks if r.purpose == "training") for p, _ in plans]
    assert inference == [1, 3] and training == [1, 2]  # 800 tok/s per rack; 48 then 96 GPUs on 48-GPU racks


# ------------------------------------------------------------- each family holds something

PERIOD_CASES = {  # family -> (case, the checker family that sees it broken)
    "rack_stock": (lambda p: chips_age(p, life=4), "periods"),
    "fabric_stock": (lambda p: dense_later(p, 1000, 2000), "periods"),
    "zone_persists": (time_to_power, "periods"),
    "ready_at_opening": (dense_last, "periods"),
    "retrofit_needed": (lambda p: dense_later(p, 3000, 2000), "periods"),
}
PERIOD_TIGHTENING = {  # never cheaper to break at an optimum; kept so that what is reported is consistent
    # a site with a zone stays open through zone_persists and zone_needs_open; this row also holds
    # a site open without any zone (min_sites), and tightens the LP
    "open_persists": time_to_power,
}


def test_every_period_family_is_covered():
    periods = {name for name, fam in REGISTRY.items() if fam.section == "periods"}
    assert periods == set(PERIOD_CASES) | set(PERIOD_TIGHTENING)


@pytest.mark.parametrize("name", sorted(PERIOD_CASES))
def test_leaving_a_period_family_out_breaks_exactly_it(name, tmp_path):
    case, family = PERIOD_CASES[name]
    path = case(tmp_path / "in")
    assert families(solved(path, tmp_path / "full")) == set()
    report = check_schedule_folder(solved(path, tmp_path / "broken", without=(name,)))
    assert family in report.families_violated(), f"leaving out {name} let nothing break that the schedule checker sees"
    assert name in report.registry_families_violated(), report.violations  # reported under the registry's name


@pytest.mark.parametrize("name", sorted(PERIOD_TIGHTENING))
def test_period_tightening_families_keep_the_optimum(name, tmp_path):
    path = PERIOD_TIGHTENING[name](tmp_path / "in")
    full, _ = solve_periods(load_scenario(path), OPTIONS)
    loose, _ = solve_periods(load_scenario(path), OPTIONS, without=(name,))
    assert loose.npv_usd == pytest.approx(full.npv_usd, rel=1e-9)


# ------------------------------------------------------------ the checker, on purpose broken

def _reseal(folder: Path) -> None:
    """Rewrite the manifests after an edit, as a consistent but wrong folder would be."""
    for sub in sorted((folder / "periods").iterdir()):
        write_manifest(sub, json.loads((sub / "manifest.json").read_text())["scenario_hash"])
    write_manifest(folder, json.loads((folder / "manifest.json").read_text())["scenario_hash"])


def test_the_checker_rejects_a_rack_bought_too_few(tmp_path):
    folder = solved(chips_age(tmp_path / "in", life=4), tmp_path / "out")
    frame = pd.read_csv(folder / "builds.csv", keep_default_na=False, dtype=str)
    frame.loc[(frame.kind == "racks") & (frame.year == "2030"), "count"] = "0"
    frame.to_csv(folder / "builds.csv", index=False)
    _reseal(folder)
    report = check_schedule_folder(folder)
    assert any(v.family == "periods" and "2030" in v.message and "within their life" in v.message for v in report.violations)


def test_the_checker_rejects_a_rack_kept_past_its_life(tmp_path):
    folder = solved(chips_age(tmp_path / "in", life=4), tmp_path / "out")
    frame = pd.read_csv(folder / "builds.csv", keep_default_na=False, dtype=str)
    racks = frame.kind == "racks"
    frame.loc[racks & (frame.year == "2026"), "count"] = "2"  # two bought in 2026 ...
    frame = frame[~(racks & (frame.year == "2030"))]  # ... and none in 2030: a 4-year chip cannot serve 2030-31
    frame.to_csv(folder / "builds.csv", index=False)
    _reseal(folder)
    assert "periods" in families(folder)


def test_the_checker_rejects_an_unpaid_retrofit_and_unpaid_readiness(tmp_path):
    for ready, retrofit, column in ((3000, 2000, "retrofit_kw"), (1000, 2000, "ready_kw")):
        folder = solved(dense_later(tmp_path / f"in-{column}", ready, retrofit), tmp_path / f"out-{column}")
        frame = pd.read_csv(folder / "halls.csv", keep_default_na=False, dtype=str)
        frame[column] = "0"
        frame.to_csv(folder / "halls.csv", index=False)
        _reseal(folder)
        report = check_schedule_folder(folder)
        assert any(v.family == "periods" and "must be paid as a retrofit" in v.message for v in report.violations), column


def test_the_checker_rejects_readiness_bought_after_opening(tmp_path):
    folder = solved(dense_later(tmp_path / "in", 1000, 2000), tmp_path / "out")
    frame = pd.read_csv(folder / "halls.csv", keep_default_na=False, dtype=str)
    frame["year"] = "2028"
    frame.to_csv(folder / "halls.csv", index=False)
    _reseal(folder)
    report = check_schedule_folder(folder)
    assert any("does not open in this period" in v.message for v in report.violations)


def test_the_checker_rejects_a_wrong_npv_and_a_wrong_period_input(tmp_path):
    folder = solved(time_to_power(tmp_path / "in"), tmp_path / "out")
    doc = json.loads((folder / "schedule.json").read_text())
    doc["npv_usd"] *= 0.99
    (folder / "schedule.json").write_text(json.dumps(doc))
    _reseal(folder)
    assert "npv" in families(folder)
    folder = solved(time_to_power(tmp_path / "in2"), tmp_path / "out2")
    regions = folder / "periods" / "2028" / "inputs" / "regions.csv"
    frame = pd.read_csv(regions, keep_default_na=False, dtype=str)
    frame["demand_chat_tok_s"] = "400"
    frame.to_csv(regions, index=False)
    _reseal(folder)
    assert "period_inputs" in families(folder)


def test_the_checker_rejects_a_site_closed_after_it_opened(tmp_path):
    folder = solved(time_to_power(tmp_path / "in"), tmp_path / "out")
    plan_path = folder / "periods" / "2028" / "plan.json"
    plan = json.loads(plan_path.read_text())
    for s in plan["sites"]:
        if s["id"] == "old":
            s["open"] = False
    plan_path.write_text(json.dumps(plan))
    _reseal(folder)
    report = check_schedule_folder(folder)
    assert any(v.family == "periods" and "stays open" in v.message for v in report.violations)


def test_the_checker_rejects_a_chip_bought_before_it_exists(tmp_path):
    folder = solved(chips_age(tmp_path / "in", life=4), tmp_path / "out")
    chips = folder / "inputs" / "catalog" / "chips.csv"
    frame = pd.read_csv(chips, keep_default_na=False, dtype=str)
    frame["available_from_year"] = ["2030" if c == "server" else "" for c in frame["id"]]
    frame.to_csv(chips, index=False)
    _reseal(folder)
    report = check_schedule_folder(folder)
    assert any("before chip server is available" in v.message for v in report.violations)


# ------------------------------------------------------------------------- bad inputs

def test_periods_that_do_not_meet_are_named(tmp_path):
    from dcplace.models import ScenarioError

    path = years(tmp_path / "in", periods=[{"year": 2026, "years": 2}, {"year": 2029, "years": 2}], sites=[site("hub", 0, 0)],
                 regions=[region("town", 0, 0.01)])
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "period 2029 does not start where period 2026 (2 years) ends (2028)" in str(err.value)


def test_a_forced_site_without_power_is_named_with_its_period(tmp_path):
    from dcplace.models import ScenarioError
    from dcplace.models.periods import period_scenarios

    path = years(tmp_path / "in", sites=[site("hub", 0, 0, power_from_year=2028)], regions=[region("town", 0, 0.01)],
                 policies={"forced_sites": ["hub"]})
    with pytest.raises(ScenarioError) as err:
        period_scenarios(load_scenario(path))
    assert "site 'hub' is forced open but has no power in period 2026" in str(err.value)


def test_bad_power_steps_name_the_row_and_field(tmp_path):
    from dcplace.models import ScenarioError

    path = years(tmp_path / "in", sites=[site("hub", 0, 0, power_steps_mw="2028=30")], regions=[region("town", 0, 0.01)])
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "row 2" in str(err.value) and "power_steps_mw" in str(err.value) and "YEAR:MW" in str(err.value)


@pytest.fixture
def few_candidates(monkeypatch):
    """Start each (region, class) from 2 sites so that a period has pairs to price."""
    from dcplace.optimizer.model import candidates

    monkeypatch.setattr(candidates, "CHEAPEST", 1)
    monkeypatch.setattr(candidates, "NEAREST", 1)
    monkeypatch.setattr(candidates, "CLEARED", 0)


FOUR_SITES = dict(sites=[site("a", 0, 0, power_price_usd_per_mwh=90), site("b", 0, 0.05, power_price_usd_per_mwh=20),
                         site("c", 0, 0.1, power_price_usd_per_mwh=60), site("d", 0, 0.15, power_price_usd_per_mwh=120)],
                  regions=[region("town", 0, 0.01)])


def test_periods_with_more_pairs_than_a_model_holds_in_full_are_priced_period_by_period(tmp_path, few_candidates):
    """Beyond --max-full-pairs each period is priced and planned alone (its plan the start, the
    sum of the periods' bounds the bound): four sites on a line, one town. The schedule is the
    full model's optimum, its bound is at most that optimum, and the CLI writes and checks it."""
    from typer.testing import CliRunner

    from dcplace.cli import app
    from dcplace.optimizer.solving.periods import PERIOD_SUM

    path = years(tmp_path / "in", **copy.deepcopy(FOUR_SITES))
    full, _ = solve_periods(load_scenario(path), OPTIONS)
    assert not full.solve.pairs
    priced, _ = solve_periods(load_scenario(path), SolveOptions(mip_gap=0.0, time_limit_s=60, max_full_pairs=1))
    pairs = priced.solve.pairs
    assert pairs["bound_kind"] == PERIOD_SUM and pairs["pairs_in_model"] < pairs["pairs_eligible"]
    assert priced.npv_usd == pytest.approx(full.npv_usd, rel=1e-9)
    assert priced.solve.best_bound_usd_per_year <= full.npv_usd * (1 + 1e-9)
    assert priced.solve.gap == pytest.approx(1 - priced.solve.best_bound_usd_per_year / priced.npv_usd, abs=1e-12)
    result = CliRunner().invoke(app, ["solve", str(path), "--max-full-pairs", "1", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "schedule.json").is_file() and "Traceback" not in result.output


def test_the_periods_sum_bound_holds_on_a_synthetic_world(tmp_path, few_candidates):
    """The 12 x 60 synthetic world over the default's three periods, from candidate pairs: the
    schedule passes the independent checker, costs no less than the full model's bound, and its
    bound (the periods' sum) is no more than the full model's best schedule."""
    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.optimizer.solving.periods import PERIOD_SUM, period_indexes
    from dcplace.optimizer.solving.pipeline import solve_schedule_to_folder

    scenario = synthetic_scenario(2, n_sites=12, n_regions=60, n_jobs=1, box_deg=(25.0, 45.0))
    scenario = scenario.model_copy(update={"periods": load_scenario("years").periods})
    options = dict(mip_gap=0.01, time_limit_s=120, threads=1)  # the bounds below hold at any gap: 1 % keeps it quick
    full, _ = solve_periods(scenario, SolveOptions(**options))
    _, _, candidates = period_indexes(scenario, SolveOptions(max_full_pairs=0))
    priced, _, report = solve_schedule_to_folder(scenario, tmp_path / "priced", SolveOptions(**options, max_full_pairs=0))
    assert report.ok
    assert priced.solve.pairs["bound_kind"] == PERIOD_SUM
    assert priced.solve.pairs["pairs_in_model"] > sum(len(ix.serve) for ix in candidates)  # pricing brought pairs in
    assert priced.solve.best_bound_usd_per_year > 0.8 * full.solve.best_bound_usd_per_year
    assert priced.npv_usd >= full.solve.best_bound_usd_per_year * (1 - 1e-9)
    assert priced.solve.best_bound_usd_per_year <= full.npv_usd * (1 + 1e-9)


def test_a_capex_that_rises_between_periods_voids_the_periods_sum_bound(tmp_path, few_candidates, monkeypatch):
    """The periods' sum bounds the schedule only if no asset bought earlier is cheaper a year than
    the same asset bought in a later period it still serves. No input can break that today (the
    discount rate is the horizon's, and the catalog's prices are every period's), so the guard is
    shown on annuities patched to rise with the period: no bound is claimed, the reason is named,
    and the schedule is still made."""
    from dcplace.optimizer.model import periods as periods_model
    from dcplace.optimizer.model.periods import build_period_sets, capex_rise
    from dcplace.optimizer.solving.periods import period_indexes

    scenario = load_scenario(years(tmp_path / "in", catalog=catalog(chip_life=5), **copy.deepcopy(FOUR_SITES)))
    found, singles, ixs = period_indexes(scenario, OPTIONS)
    assert capex_rise(build_period_sets(tuple(found), singles, ixs, scenario.economics.discount_rate)) is None
    from dcplace.optimizer.solving import periods as periods_solving

    flat = periods_model.annuities

    def rising(ps, t, key, categories):
        return {c: usd * (1 + t) for c, usd in flat(ps, t, key, categories).items()}
    for module in (periods_model, periods_solving):  # the model's build costs and the schedule's accounting alike
        monkeypatch.setattr(module, "annuities", rising)
    why = capex_rise(build_period_sets(tuple(found), singles, ixs, scenario.economics.discount_rate))
    assert why is not None and "bought in 2026" in why and "2028" in why
    schedule, _ = solve_periods(scenario, SolveOptions(mip_gap=0.0, time_limit_s=60, max_full_pairs=1))
    assert schedule.solve.best_bound_usd_per_year is None and schedule.solve.gap is None
    assert "bought in 2026" in schedule.solve.pairs["bound_kind"] and schedule.npv_usd > 0


def test_the_periods_sum_bound_is_not_claimed_when_its_capex_is_not_the_builds(tmp_path, few_candidates, monkeypatch):
    """The other two guards: capex on a rack that differs from what the multi-period model charges
    its build (the schedule's annuities patched, the model's not), and the stock ties left out."""
    from dcplace.optimizer.solving import periods as periods_solving

    scenario = load_scenario(years(tmp_path / "in", catalog=catalog(chip_life=5), **copy.deepcopy(FOUR_SITES)))
    options = SolveOptions(mip_gap=0.0, time_limit_s=60, max_full_pairs=1)
    schedule, _ = solve_periods(scenario, options, without=("rack_stock",))
    assert schedule.solve.best_bound_usd_per_year is None and "rack_stock left out" in schedule.solve.pairs["bound_kind"]
    flat = periods_solving.annuities
    monkeypatch.setattr(periods_solving, "annuities", lambda ps, t, key, categories: {
        c: 2 * usd for c, usd in flat(ps, t, key, categories).items()})
    schedule, _ = solve_periods(scenario, options)
    assert schedule.solve.best_bound_usd_per_year is None and "on its build" in schedule.solve.pairs["bound_kind"]


# ------------------------------------------------------------- batch, compare, pareto, CLI

def test_a_batch_of_schedules_reports_each_npv_and_resumes(tmp_path):
    from dcplace.models.sweep import Member, Sweep
    from dcplace.optimizer.studies.batch import run_batch

    path = time_to_power(tmp_path / "in")
    sweep = Sweep("prices", path, [Member("base", {}), Member("dear", {"sites.power_price_usd_per_mwh": "*2"})],
                  {"mip_gap": 0.0, "time_limit_s": 60})
    results = {r.name: r for r in run_batch(sweep, tmp_path / "runs").results}
    alone, _ = solve_periods(load_scenario(path), OPTIONS)
    assert results["base"].status == "optimal" and results["base"].objective_usd_per_year == pytest.approx(alone.npv_usd, rel=1e-9)
    assert results["dear"].objective_usd_per_year > results["base"].objective_usd_per_year
    assert "net present value" in results["base"].message and "emissions_t_per_year" in results["base"].kpis
    assert check_schedule_folder(tmp_path / "runs" / "dear").ok
    again = {r.name: r for r in run_batch(sweep, tmp_path / "runs").results}
    assert again["base"].skipped and again["base"].objective_usd_per_year == results["base"].objective_usd_per_year


def test_a_carbon_frontier_of_schedules_costs_npv(tmp_path):
    from dcplace.optimizer.studies.pareto import trace_pareto

    kw = copy.deepcopy(TWO_SITES)
    kw["sites"][0].update(grid_carbon_g_per_kwh=50)  # 'old' is dear and clean, 'new' cheap and dirty
    path = years(tmp_path / "in", catalog=catalog(chip_life=2), **kw)
    frontier = trace_pareto(load_scenario(path), tmp_path / "pareto", points=3, options={"mip_gap": 0.0, "time_limit_s": 60})
    least = frontier[0]
    schedule, _ = solve_periods(load_scenario(path), OPTIONS)
    assert least.cost_usd_per_year == pytest.approx(schedule.npv_usd, rel=1e-9)
    assert frontier[-1].emissions_t_per_year < least.emissions_t_per_year
    assert frontier[-1].cost_usd_per_year > least.cost_usd_per_year


def test_compare_reads_a_schedule_as_its_periods(tmp_path):
    from dcplace.reports.compare import collect_plans

    folder = solved(time_to_power(tmp_path / "in"), tmp_path / "years")
    assert [p.label for p in collect_plans([folder])] == ["years@2026", "years@2028"]


def test_cli_solves_checks_and_reports_a_schedule(tmp_path):
    from typer.testing import CliRunner

    from dcplace.cli import app

    path = dense_later(tmp_path / "in", 1000, 2000)
    out = tmp_path / "years"
    result = CliRunner().invoke(app, ["solve", str(path), "-o", str(out), "--gap", "0"])
    assert result.exit_code == 0, result.output
    assert "NPV" in result.output and "(checked)" in result.output
    result = CliRunner().invoke(app, ["check", str(out)])
    assert result.exit_code == 0 and "PASS" in result.output
    result = CliRunner().invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    html = (out / "report" / "report.html").read_text()
    assert "What is built when" in html and "A map per period" in html and 'src="data:image/png' in html
    assert (out / "report" / "report.pdf").stat().st_size > 10_000
    assert check_schedule_folder(out).ok  # the report beside it does not break the folder's manifest


def test_splitting_a_period_in_two_keeps_the_npv(tmp_path):
    """Metamorphic: with nothing changing between them and money at 0 %, two one-year periods cost
    what one two-year period does (the same plan persists; nothing retires in between)."""
    kw = dict(sites=[site("west", 0, 0), site("east", 0, 10, power_price_usd_per_mwh=40)],
              regions=[region("wtown", 0, 0.1, budget=5), region("etown", 0, 10.1, budget=5)], jobs=[job("j", 96)])
    one, _ = solve_periods(load_scenario(years(tmp_path / "one", periods=[{"year": 2026, "years": 2}], **kw)), OPTIONS)
    two, _ = solve_periods(load_scenario(years(tmp_path / "two", periods=[{"year": 2026, "years": 1}, {"year": 2027, "years": 1}],
                                               **kw)), OPTIONS)
    assert two.npv_usd == pytest.approx(one.npv_usd, rel=1e-9)
    assert [b.year for b in two.builds] == [2026] * len(two.builds)  # everything is bought once, in the first year


def test_a_new_generation_enters_in_its_period_with_its_price(tmp_path):
    cat = catalog(chip_life=2)
    cat["chips"].append({"id": "server2", "name": "Next GPU", "vendor": "X", "capex_usd_per_gpu": 1000, "life_years": 2,
                         "h100_equiv": 0, "available_from_year": 2028})
    for chip in cat["chips"][:2]:
        chip["available_from_year"] = ""
    cat["rack_configs"].append({"id": "server2-air", "chip": "server2", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 2,
                                "rack_overhead_kw": 0})
    cat["throughput"].append({"chip": "server2", "workload": "chat", "tok_s_per_gpu": 50})
    path = years(tmp_path / "in", sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)], catalog=cat)
    schedule, _ = solve_periods(load_scenario(path), OPTIONS)
    assert sorted((b.year, b.chip) for b in schedule.builds) == [(2026, "server"), (2028, "server2")]
    # half the price, the same power: its chips cost half as much a year (0 %: $16,000 / 2 years)
    assert {b.year: b.annuity_usd_per_year["chips"] for b in schedule.builds} == pytest.approx({2026: 16000.0, 2028: 8000.0})


def test_the_embedded_years_scenario_loads_and_every_period_prechecks():
    from dcplace.optimizer.solving.periods import period_indexes

    scenario = load_scenario("years")
    assert [(p.year, p.years) for p in scenario.periods] == [(2026, 2), (2028, 2), (2030, 2)]
    periods, singles, ixs = period_indexes(scenario, OPTIONS)
    base = sum(sum(r.demand_tok_s.values()) for r in scenario.regions)
    grown = [sum(sum(r.demand_tok_s.values()) for r in s.regions) / base for s in singles]
    assert grown == pytest.approx([1.0, 1.754, 3.065], rel=1e-6)  # every inference class grows alike (data/README.md)
    # EirGrid: no new Dublin connections before 2028 (power_from_year); then below CRU's 10 MVA threshold
    assert ["dublin" in single.policies.forbidden_sites for single in singles] == [True, False, False]
    dublin = [next(s for s in single.sites if s.id == "dublin").power_limit_kw for single in singles]
    assert dublin[1:] == pytest.approx([10_000, 10_000])
    assert all("montreal" in single.policies.forbidden_sites for single in singles)  # Quebec: no end date published
    assert all(len(ix.serve) > 0 for ix in ixs)


def test_a_plan_only_command_on_a_schedule_names_its_periods(tmp_path):
    from typer.testing import CliRunner

    from dcplace.cli import app

    folder = solved(time_to_power(tmp_path / "in"), tmp_path / "years")
    result = CliRunner().invoke(app, ["map", str(folder)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "multi-period schedule folder" in result.output and "periods/2026" in result.output


def test_bad_period_inputs_are_named_not_crashed(tmp_path):
    from dcplace.models import ScenarioError

    cases = {
        "years0": ([{"year": 2026, "years": 0}], "periods[0].years"),
        "unknown": ([{"year": 2026, "foo": 1}], "periods[0].foo"),
        "econ": ([{"year": 2026, "economics": {"nonsense": 1}}], "periods[0].economics.nonsense"),
        "rate": ([{"year": 2026, "economics": {"discount_rate": 0.1}}], "the discount rate is the horizon's"),
        "long": ([{"year": 2026, "years": 10}], "no chip lives that long"),
        "demand": ([{"year": 2026, "demand": {"chat": -1}}], "periods[0].demand.chat"),
    }
    for name, (periods, text) in cases.items():
        path = years(tmp_path / name, periods=periods, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)])
        with pytest.raises(ScenarioError) as err:
            load_scenario(path)
        assert text in str(err.value), name
    path = years(tmp_path / "str", periods=[{"year": 2026, "economics": {"carbon_price_usd_per_t": "80"}}], sites=[site("hub", 0, 0)],
                 regions=[region("town", 0, 0.01)])
    assert load_scenario(path).periods[0].economics == {"carbon_price_usd_per_t": 80.0}  # typed as Economics types it
    path = years(tmp_path / "job", sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.01)], jobs=[job("j", 48, from_year=2030, to_year=2026)])
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert "row 2" in str(err.value) and "to_year" in str(err.value)


def test_a_zone_kept_from_an_earlier_period_keeps_its_cost(tmp_path):
    """A liquid zone built for a job that ends stays built (and paid) in the periods after it."""
    path = years(tmp_path / "in", sites=[site("hub", 0, 0, cooling_allowed="air"), site("far", 0, 50)], regions=[region("town", 0, 0.01)],
                 jobs=[job("big", 96, to_year=2026)])
    schedule, plans = solve_periods(load_scenario(path), OPTIONS)
    later = next(s for s in plans[1][0].sites if s.id == "far")
    assert later.open and "liquid" in later.zones and later.racks_total == 0
    assert later.cost_usd_per_year["cooling_zones"] == 5000.0  # the liquid zone's fixed cost, still paid
    assert check_schedule_folder(write_schedule_folder(schedule, load_scenario(path), plans, tmp_path / "out")).ok
