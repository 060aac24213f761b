"""Every constraint family is registered once, checked by a named checker method, documented
in the generated docs/formulation.md, and shown to hold something.

The rule for "shown to hold something" (tests/test_registry.py is where it is enforced):
every registered family has a case in CASES, a tiny scenario where the family binds. The
case is solved twice: with every family, the plan passes the family's checker method; with
the family left out (build_model(ix, without=(name,))), the solver takes the cheaper plan
that breaks exactly that constraint, and the family's checker method reports it under the
family's name (Violation.registry_families; tests/test_checker_families.py). Families
that are implied in the MIP by others and only tighten the LP relaxation are listed in
TIGHTENING with the families that imply them: for them the test shows that leaving them out
keeps the optimum and the plan still passes their checker (their rows must still exist). A
family registered without a case (or a checker method that does not exist) fails
test_every_family_is_covered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import TINY_CATALOG, job, make_scenario, region, site, solved_lp
from dcplace.models import load_scenario
from dcplace.models.plan import write_plan_folder
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.checker import PlanChecker
from dcplace.optimizer.checker import ScheduleChecker
from dcplace.optimizer.model import formulation
from dcplace.optimizer.model.families import BOUNDS, REGISTRY, ROWS, family, flagged, render_markdown
from dcplace.optimizer.model.failover import spread_rows
from dcplace.optimizer.model.index import build_index

DOC = Path(__file__).resolve().parent.parent / "docs" / "formulation.md"
OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)


def two_towns(tmp_path, **kw):
    args = dict(sites=[site("west", 0, 0), site("east", 0, 10)],
                regions=[region("wtown", 0, 0.1, budget=5), region("etown", 0, 10.1, budget=5)])
    args.update(kw)
    return make_scenario(tmp_path, **args)


def two_backups(tmp_path):
    return make_scenario(
        tmp_path, sites=[site("mid", 0, 0, power_price_usd_per_mwh=10), site("west", 0, -1.2, power_price_usd_per_mwh=300),
                         site("east", 0, 1.2, power_price_usd_per_mwh=100)],
        regions=[region("wtown", 0, -0.5, budget=0.6), region("etown", 0, 0.5, budget=0.6)],
        policies={"survive_site_loss": {"chat": 1.0}, "failover_rtt_ms": {"chat": 1.0}})


def day(loads: dict[int, float], default: float) -> list[dict]:
    return [{"workload": "chat", "local_hour": h, "load": loads.get(h, default), "region": ""} for h in range(24)]


def clocked(tmp_path, regions, loads, default, catalog=None, jobs=None, clouds=None, policies=None):
    """One site, the clock on (docs/clock.md)."""
    tables = {"profiles": day(loads, default), **({"cloud_regions": clouds} if clouds else {})}
    return make_scenario(tmp_path, sites=[site("hub", 0, 0)], regions=regions, jobs=jobs, catalog=catalog, tables=tables,
                         sections={"clock": {"hours": 24}}, policies=policies)


# trainer GPUs that serve chat on a fifth of a server GPU's power per token, but cost five times as much
EFFICIENT_TRAINER = {**TINY_CATALOG, "rack_configs": [
    {"id": "trainer-dense", "chip": "trainer", "gpus_per_server": 8, "servers_per_rack": 6, "server_kw": 2, "rack_overhead_kw": 0},
    {"id": "server-air", "chip": "server", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 2, "rack_overhead_kw": 0}]}


def cloud(price: float, cap="") -> list[dict]:
    return [{"id": "cloud", "name": "Cloud", "provider": "x", "lat": 0, "lon": 0.05, "country": "US", "chip": "server",
             "usd_per_gpu_hour_on_demand": price, "usd_per_gpu_hour_reserved": "", "cap_gpus": cap, "fabric_tier": 0}]


DAYTIME = {h: 1.0 for h in range(8, 20)}


def TWELVE_HOURS_APART(tmp_path):
    """Two towns twelve hours apart share one site: 3 racks for the coincident peak, not 4 for the sum."""
    return clocked(tmp_path, [region("west", 0, 0.1, chat=1600, utc_offset_h=0), region("east", 0, -0.1, chat=1600, utc_offset_h=12)],
                   {12: 1.0}, 0.5)


def routed_per_hour(tmp_path, transport: float = 0.0):
    """Routing per hour (clock.routing hour, docs/clock.md): towns twelve hours apart, two sites, the second holding
    two racks and alone within reach of 'east' (tests/test_clock_routing.py derives the optimum by hand)."""
    return make_scenario(tmp_path, sites=[site("a", 0, 0), site("b", 0, 2, floor_racks=2)],
                         regions=[region("west", 0, 1, chat=1600, budget=50, utc_offset_h=0),
                                  region("east", 0, 4, chat=1600, budget=3, utc_offset_h=12)],
                         tables={"profiles": day({12: 1.0}, 0.5)}, sections={"clock": {"hours": 24, "routing": "hour"}},
                         economics={"transport_usd_per_tok_s_1000km_year": transport})


def with_job(tmp_path):
    return two_towns(tmp_path, jobs=[job("pretrain", 48)])


def campus(tmp_path, min_campus_mw: float):
    """One site, one 60 kW training rack; building at $6 M/MW (CRF(0, 10 y) = 0.1: $600/kW-yr) saves $600/kW-yr
    against colocation's $1,200, $36,000 a year, against a $10,000 campus."""
    return make_scenario(tmp_path, sites=[site("hub", 0, 0)], regions=[region("nobody", 0, 0, chat=0)], jobs=[job("pretrain", 48)],
                         economics={"build_usd_per_mw": 6_000_000, "build_life_years": 10, "min_campus_mw": min_campus_mw,
                                    "campus_fixed_usd_per_year": 10_000})


CASES = {
    "demand_met": two_towns,
    "inference_capacity": two_towns,
    "training_capacity": with_job,
    "job_placed_once": with_job,
    # the 60 kW inference racks need a liquid zone ($5,000/yr); with a job in the troughs no zone_racks_within_reach
    # row stands in for it (a job's own racks have place_needs_zone)
    "density_needs_zone": lambda p: dense_inference(p, clock=True, trough_job=True),
    # 'west' (cheaper power, 70 kW) could hold the job's rack (66 kW) or its town's 3 racks (13.2 kW), not both
    "site_power": lambda p: two_towns(p, sites=[site("west", 0, 0, power_limit_kw=70, power_price_usd_per_mwh=50), site("east", 0, 10)],
                                      regions=[region("wtown", 0, 0.1, chat=2400, budget=5), region("etown", 0, 10.1, budget=5)],
                                      jobs=[job("pretrain", 48)]),
    # 6,000 tok/s: 8 cheap air racks, or 2 dense ones on a 2-rack floor
    "site_space": lambda p: two_towns(p, sites=[site("west", 0, 0, floor_racks=2), site("east", 0, 10)],
                                      regions=[region("wtown", 0, 0.1, chat=6000, budget=5), region("etown", 0, 10.1, budget=5)]),
    "carbon_cap": lambda p: make_scenario(
        p, sites=[site("dirty", 0, 0, grid_carbon_g_per_kwh=800, power_price_usd_per_mwh=50),
                  site("clean", 0, 0.2, grid_carbon_g_per_kwh=10, power_price_usd_per_mwh=200)],
        regions=[region("town", 0, 0.1, budget=5)], policies={"carbon_cap_t_per_year": 1.0}),
    # liquid-only site with cheap power costs $4,000 more up front than the air site
    "capex_budget": lambda p: make_scenario(
        p, sites=[site("cheap", 0, 0, power_price_usd_per_mwh=10, cooling_allowed="liquid"),
                  site("air", 0, 0.2, power_price_usd_per_mwh=300, cooling_allowed="air")],
        regions=[region("town", 0, 0.1, budget=5)], policies={"capex_budget_usd": 33000}),
    "min_sites": lambda p: two_towns(p, regions=[region("wtown", 0, 0.1, budget=5)], policies={"min_sites": 2}),
    # one dear site in the middle reaches both towns; the two cheap ones reach one each
    "max_sites": lambda p: make_scenario(
        p, sites=[site("a", 0, 0), site("e", 0, 2), site("m", 0, 1, power_price_usd_per_mwh=300)],
        regions=[region("wtown", 0, 0, budget=2), region("etown", 0, 2, budget=2)], policies={"max_sites": 1}),
    "forced_sites": lambda p: two_towns(p, regions=[region("wtown", 0, 0.1, budget=5)], policies={"forced_sites": ["east"]}),
    # today's footprint (the as-is baseline, docs/as-is.md): 3 chat racks at west where 1 serves its town, held as they are
    "as_is_footprint": lambda p: two_towns(p, regions=[region("wtown", 0, 0.1, budget=5)], tables={"footprint": [
        {"site": "west", "config": "server-air", "cooling": "air", "workload": "chat", "fabric": "", "racks": 3}]}),
    # the job needs the only liquid site, whose cheaper power would also win the town
    "single_purpose_sites": lambda p: make_scenario(
        p, sites=[site("liq", 0, 0, power_price_usd_per_mwh=10), site("air", 0, 0.2, cooling_allowed="air")],
        regions=[region("town", 0, 0.1, budget=5)], jobs=[job("pretrain", 48)], policies={"single_purpose_sites": True}),
    # N-1 (docs/resilience.md): 'mid' is cheapest and the only site within reach of either town; a town reaches its own
    # backup only ('west' or the cheaper 'east') within its failover budget, so the aggregate alone would put all the
    # spare capacity at 'east'
    "failover_reserve": lambda p: two_backups(p),
    "failover_capacity": lambda p: two_backups(p),
    "training_standby": lambda p: two_towns(p, jobs=[job("pretrain", 48, standby_required=True)]),
    # the clock (docs/clock.md): towns twelve hours apart share a site; without the hourly rows nothing need be built
    # a peaky day (a tenth of the peak off it): without the hourly rows, the energy bound's
    # 24-hour capacity (busy_energy_within_racks) would size the site for the day's mean
    "hourly_serving": lambda p: clocked(p, [region("west", 0, 0.1, chat=1600, utc_offset_h=0),
                                            region("east", 0, -0.1, chat=1600, utc_offset_h=12)], {12: 1.0}, 0.1),
    # a daytime town on cheap 'server' racks; the job can use only 'trainer' GPUs, which the site need not have
    # without the row: the server racks' idle night would carry phantom trainer GPUs
    "trough_fits_idle": lambda p: clocked(p, [region("town", 0, 0.1, chat=800, utc_offset_h=0)], DAYTIME, 0.0,
                                          jobs=[job("tune", 2, interruptible=True, gpu_hours_per_day=40, eligible_chips="trainer")]),
    "trough_job_hours": lambda p: clocked(p, [region("town", 0, 0.1, chat=4800, utc_offset_h=0)], DAYTIME, 0.0,
                                          catalog={**TINY_CATALOG, "throughput": [{"chip": "trainer", "workload": "chat", "tok_s_per_gpu": 100}]},
                                          jobs=[job("tune", 30, interruptible=True, gpu_hours_per_day=500)]),
    # under a carbon cap the dispatch is exact (busy GPUs are variables): without the row nothing need be busy
    "busy_serves_load": lambda p: clocked(p, [region("town", 0, 0.1, chat=800, utc_offset_h=0)], DAYTIME, 0.1,
                                          policies={"carbon_cap_t_per_year": 1e6}),
    # ...and without this one the busy GPUs could be trainer GPUs (least power per token) that were never bought
    "busy_within_racks": lambda p: clocked(p, [region("town", 0, 0.1, chat=800, utc_offset_h=0)], DAYTIME, 0.1,
                                           catalog=EFFICIENT_TRAINER, policies={"carbon_cap_t_per_year": 1e6}),
    # renting at $2/GPU-hour beats owning one rack for a one-hour peak (tests/test_clock.py)
    "rental_capacity": lambda p: clocked(p, [region("town", 0, 0.1, chat=800, utc_offset_h=0)], {12: 1.0}, 0.0, clouds=cloud(2.0)),
    # ...but the region rents 8 GPUs at most, half of what the peak needs
    # self-build (docs/formulation.md): without the row the campus 'builds' more kW than the racks hold, for the credit
    "self_build_within_training": lambda p: campus(p, 0.05),
    # ...without this one the colocation credit comes without the campus and its fixed cost
    "self_build_needs_campus": lambda p: campus(p, 0.05),
    # ...and without this one a 60 kW campus is built under a 100 kW minimum
    "self_build_min_campus": lambda p: campus(p, 0.1),
    "rental_cap": lambda p: clocked(p, [region("town", 0, 0.1, chat=800, utc_offset_h=0)], {12: 1.0}, 0.0, clouds=cloud(2.0, 8)),
    # routing per hour: without the hourly rows (demand_met is left out with them) nobody need be served at all
    "hourly_demand_met": routed_per_hour,
}
BOUND_ONLY = {  # rows that bound the objective (the clock's busy energy, docs/clock.md) and limit no plan
    "busy_energy_split": TWELVE_HOURS_APART,
    "busy_energy_within_racks": TWELVE_HOURS_APART,
    # routing per hour: the day's share carries the transport cost; left out, the model pays none (the plan, whose
    # assignments are the hours' mean, pays it all the same)
    "hourly_share_mean": lambda p: routed_per_hour(p, transport=10.0),
}
TIGHTENING = {  # implied in the MIP by the families named; kept for the LP bound
    "share_needs_open": (two_towns, ("inference_capacity", "density_needs_zone", "zone_needs_open", "site_power")),
    "zone_needs_open": (with_job, ("density_needs_zone", "site_power")),
    "place_needs_zone": (with_job, ("training_capacity", "density_needs_zone")),
    "failover_aggregate": (lambda p: two_backups(p), ("failover_reserve", "failover_capacity")),
    # holds for every secure plan with whole opens (optimality=True: a plan judged as it is, the diagnosis, periods)
    "failover_open_spread": (lambda p: two_backups(p), ("failover_aggregate", "failover_reserve", "failover_capacity")),
    # a cheapest plan closes a site it puts no rack in (optimality=True: left out by build_model(ix, cheapest=False))
    "open_site_has_zone": (with_job, ("density_needs_zone", "inference_capacity", "training_capacity")),
    # a cheapest plan builds no rack beyond the load a site can reach (optimality=True)
    "zone_racks_within_reach": (lambda p: dense_inference(p), ("density_needs_zone", "inference_capacity")),
}


def solved_folder(path: Path, out: Path, monkeypatch, without: tuple[str, ...] = ()) -> Path:
    if without:
        monkeypatch.setattr("dcplace.optimizer.solving.solve.build_model", lambda ix: formulation.build_model(ix, without=without))
    scenario = load_scenario(path)
    plan = solve(scenario, OPTIONS)
    monkeypatch.undo()
    return write_plan_folder(plan, scenario, out)


def violations(folder: Path, method: str) -> list[str]:
    return [str(v) for v in run_method(folder, method).violations]


def run_method(folder: Path, method: str):
    checker = PlanChecker(folder)
    getattr(checker, method)()
    return checker.report


def test_every_family_is_covered():
    """A registered family needs a PlanChecker method that exists and a case here."""
    problems = uncovered(REGISTRY)
    assert not problems, problems


def uncovered(registry) -> list[str]:
    out = []
    for name, fam in registry.items():
        if fam.section == "periods":  # the ties between periods: checked by ScheduleChecker, cases in tests/test_periods.py
            if not callable(getattr(ScheduleChecker, fam.checker, None)):
                out.append(f"{name}: ScheduleChecker has no method {fam.checker}")
            continue
        if not callable(getattr(PlanChecker, fam.checker, None)):
            out.append(f"{name}: PlanChecker has no method {fam.checker}")
        if name not in CASES and name not in TIGHTENING and name not in BOUND_ONLY:
            out.append(f"{name}: no case in tests/test_registry.py shows what it holds")
    return out


def test_a_family_without_checker_or_case_is_caught(monkeypatch):
    registry = dict(REGISTRY)
    monkeypatch.setattr("dcplace.optimizer.model.families.REGISTRY", registry)

    @family(checker="check_nothing_like_this", not_relaxed="a test dummy")
    def dummy_family(lm, ix):
        """0 <= 1."""

    assert uncovered(registry) == ["dummy_family: PlanChecker has no method check_nothing_like_this",
                                   "dummy_family: no case in tests/test_registry.py shows what it holds"]
    with pytest.raises(ValueError, match="registered twice"):
        family(name="dummy_family", checker="check_demand", not_relaxed="again")(lambda lm, ix: None)
    with pytest.raises(ValueError, match="either relax"):
        family(name="other", checker="check_demand")(dummy_family)
    with pytest.raises(ValueError, match="a lazy family writes rows"):
        family(name="lazy_bounds", checker="check_demand", not_relaxed="a test dummy", writes=BOUNDS, lp_lazy=True)(dummy_family)
    with pytest.raises(ValueError, match="lp_lazy_group needs lp_lazy"):
        family(name="grouped", checker="check_demand", not_relaxed="a test dummy", lp_lazy_group=lambda key: key)(dummy_family)


def test_lazy_families_are_tightening():
    """LP relaxations hold a lazy family's rows back (optimizer.solvers.lazy_rows): the MIP
    must imply them, which TIGHTENING's case shows (leaving them out keeps the optimum)."""
    lazy = {name for name, fam in REGISTRY.items() if fam.lp_lazy}
    assert lazy and lazy <= set(TIGHTENING), lazy - set(TIGHTENING)


def test_row_names_are_family_names(tmp_path):
    """Every row family in a model is a registered family of the same name."""
    for name, case in list(CASES.items()) + [(n, c) for n, (c, _) in TIGHTENING.items()] + list(BOUND_ONLY.items()):
        lm = formulation.build_model(build_index(load_scenario(case(tmp_path / name))))
        assert set(lm.families) <= set(REGISTRY), set(lm.families) - set(REGISTRY)
        if REGISTRY[name].writes == ROWS:
            assert name in lm.families, f"the case for {name} builds no row of it"


@pytest.mark.parametrize("name", sorted(CASES))
def test_leaving_a_family_out_breaks_exactly_it(name, tmp_path, monkeypatch):
    method = REGISTRY[name].checker
    path = CASES[name](tmp_path / "in")
    full = solved_folder(path, tmp_path / "full", monkeypatch)
    assert violations(full, method) == []
    broken = run_method(solved_folder(path, tmp_path / "broken", monkeypatch, without=(name,)), method)
    assert broken.violations, f"leaving out {name} let nothing break that {method} sees"
    assert name in broken.registry_families_violated(), broken.violations  # reported under the registry's name


@pytest.mark.parametrize("name", sorted(TIGHTENING))
def test_tightening_families_keep_the_optimum(name, tmp_path, monkeypatch):
    case, implied_by = TIGHTENING[name]
    assert set(implied_by) <= set(REGISTRY)
    path = case(tmp_path / "in")
    full = solve(load_scenario(path), OPTIONS)
    monkeypatch.setattr("dcplace.optimizer.solving.solve.build_model", lambda ix: formulation.build_model(ix, without=(name,)))
    loose = solve(load_scenario(path), OPTIONS)
    monkeypatch.undo()
    assert loose.objective_usd_per_year == pytest.approx(full.objective_usd_per_year, rel=1e-9)
    folder = write_plan_folder(loose, load_scenario(path), tmp_path / "loose")
    assert violations(folder, REGISTRY[name].checker) == []


def lp_value(path: Path, without: tuple[str, ...] = ()) -> float:
    return solved_lp(formulation.build_model(build_index(load_scenario(path)), without=without)).getInfo().objective_function_value


def test_open_site_has_zone_closes_the_zone_gap_by_hand(tmp_path):
    """One liquid-only site, one town of 800 tok/s: one server-air rack (16 GPUs x 50 tok/s). Its zone costs
    $5,000 a year and holds M = 100 racks (the floor; power allows 10,000 / (4 x 1.1) = 2,272). The LP without
    the row builds 1/100 of the zone; with it the open site (open >= share / max_share = 1) pays the whole
    zone: $5,000 x 99/100 = $4,950 more, and the LP is the MIP's optimum."""
    path = make_scenario(tmp_path / "in", sites=[site("hub", 0, 0, cooling_allowed="liquid")], regions=[region("town", 0, 0.1)],
                         policies={"max_share_per_site": 1.0})
    reach = ("zone_racks_within_reach",)  # left out on both sides: it makes the LP's racks pay for part of the zone too
    with_row, without_row = lp_value(path, without=reach), lp_value(path, without=("open_site_has_zone", *reach))
    assert with_row - without_row == pytest.approx(4950.0, rel=1e-9)
    assert solve(load_scenario(path), OPTIONS).objective_usd_per_year == pytest.approx(with_row, rel=1e-9)


def dense_inference(tmp_path, clock: bool = False, trough_job: bool = False):
    """One site (air zone $0, liquid $5,000 a year), one town of 4,800 tok/s of chat. Inference GPUs cost
    $20,000 here, so one 60 kW trainer-dense rack (48 x 100 tok/s = 4,800 tok/s, liquid only, $96,000 a year)
    serves the town for less than six server-air racks (6 x 16 x $4,000 a year = $384,000)."""
    catalog = {**TINY_CATALOG, "chips": [dict(c, capex_usd_per_gpu=20000) if c["id"] == "server" else c for c in TINY_CATALOG["chips"]]}
    return make_scenario(tmp_path, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1, chat=4800)], catalog=catalog,
                         policies={"max_share_per_site": 1.0}, sections={"clock": {"hours": 24}} if clock else None,
                         tables={"profiles": day({12: 1.0}, 0.1)} if clock else None,
                         jobs=[job("tune", 1, interruptible=True, gpu_hours_per_day=8, eligible_chips="trainer")] if trough_job else None)


@pytest.mark.parametrize("clock", [False, True], ids=["peak", "clock"])
def test_zone_racks_within_reach_makes_the_rack_pay_its_share_of_the_zone_by_hand(clock, tmp_path):
    """dense_inference: the LP builds the 4,800 tok/s on one trainer-dense rack. Without the row its liquid zone
    is built 1/100 (M = the floor's 100 racks; power allows 151); with it the zone holds at most
    U + T = 4,800 (all the load the site can reach, at its peak hour with the clock) + 4,800 (one rack)
    tok/s a whole zone, so the rack's 4,800 pay half the zone: $5,000 x (1/2 - 1/100) = $2,450 more."""
    path = dense_inference(tmp_path / "in", clock)
    with_row, without_row = lp_value(path), lp_value(path, without=("zone_racks_within_reach",))
    assert with_row - without_row == pytest.approx(2450.0, rel=1e-9)
    plan = solve(load_scenario(path), OPTIONS)
    assert [(ln.config, ln.cooling) for s in plan.sites for ln in s.racks] == [("trainer-dense", "liquid")]


def test_zone_racks_within_reach_leaves_out_racks_that_lend_and_classes_that_survive(tmp_path):
    """Racks may be built to lend GPUs to a job in the troughs, and to hold spare for a lost site: those get no row.
    In dense_inference with a job that may borrow trainer GPUs, the trainer-dense racks leave the liquid zone's row
    and the server-air racks (which no job can use) stay in both zones' rows; with chat survivable, no row is left."""
    import numpy as np

    def rows(path) -> dict[tuple, set[str]]:
        """Row key -> the rack configs in it."""
        lm = formulation.build_model(build_index(load_scenario(path)))
        if "zone_racks_within_reach" not in lm.families:
            return {}
        start, index, _ = lm.matrix()
        column_of_entry = np.repeat(np.arange(lm.n_cols), np.diff(start))
        racks = lm.blocks["racks_inf"]
        return {key: {racks.keys[j - racks.start][1] for j in column_of_entry[index == row] if racks.start <= j < racks.stop}
                for key, row in lm.families["zone_racks_within_reach"].rows().items()}

    both = {"server-air", "trainer-dense"}
    assert rows(dense_inference(tmp_path / "plain")) == {("hub", "air", "chat"): {"server-air"}, ("hub", "liquid", "chat"): both}
    assert rows(dense_inference(tmp_path / "lends", clock=True, trough_job=True)) == {
        ("hub", "air", "chat"): {"server-air"}, ("hub", "liquid", "chat"): {"server-air"}}
    survive = make_scenario(tmp_path / "n1", sites=[site("hub", 0, 0), site("spare", 0, 0.2)], regions=[region("town", 0, 0.1)],
                            policies={"survive_site_loss": {"chat": 1.0}})
    assert rows(survive) == {}


def test_place_needs_zone_makes_a_job_pay_its_zone_by_hand(tmp_path):
    """One site, one town of 800 tok/s on one server-air rack (air zone, $0) and one 48-GPU job on one
    60 kW trainer-dense rack, which only a liquid zone holds ($5,000 a year, M = 100 racks: the floor; power
    allows 10,000 / (60 x 1.1) = 151). The LP without the row builds 1/100 of the liquid zone for the job; with
    it the placed job pays the whole zone: $5,000 x 99/100 = $4,950 more, and the LP is the MIP's optimum."""
    path = make_scenario(tmp_path / "in", sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1)], jobs=[job("pretrain", 48)],
                         policies={"max_share_per_site": 1.0})
    reach = ("zone_racks_within_reach",)  # left out on both sides: it makes the LP's inference racks in the zone pay too
    with_row, without_row = lp_value(path, without=reach), lp_value(path, without=("place_needs_zone", *reach))
    assert with_row - without_row == pytest.approx(4950.0, rel=1e-9)
    assert solve(load_scenario(path), OPTIONS).objective_usd_per_year == pytest.approx(with_row, rel=1e-9)


@pytest.mark.parametrize("policies", [{"forced_sites": ["east"]}, {"min_sites": 2}], ids=["forced", "min_sites"])
def test_open_site_has_zone_spares_a_site_the_policies_open_idle(policies, tmp_path, monkeypatch):
    """A forced site, or one min_sites opens, may stay idle: the row would make it pay a liquid zone for nothing
    (east has no air), so it is not written there and the optimum is the one without the family."""
    path = two_towns(tmp_path / "in", sites=[site("west", 0, 0), site("east", 0, 10, cooling_allowed="liquid")],
                     regions=[region("wtown", 0, 0.1, budget=5)], policies=policies)
    lm = formulation.build_model(build_index(load_scenario(path)))
    assert "open_site_has_zone" not in lm.families or "east" not in lm.families["open_site_has_zone"].rows()
    full = solve(load_scenario(path), OPTIONS)
    assert {s.id for s in full.sites if s.open} == {"west", "east"}
    assert not next(s for s in full.sites if s.id == "east").zones
    monkeypatch.setattr("dcplace.optimizer.solving.solve.build_model",
                        lambda ix: formulation.build_model(ix, without=("open_site_has_zone",)))
    assert solve(load_scenario(path), OPTIONS).objective_usd_per_year == pytest.approx(full.objective_usd_per_year, rel=1e-9)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("row", flagged("optimality"))
def test_optimality_rows_keep_every_cases_optimum(row, name, tmp_path, monkeypatch):
    """These rows are no law of the model: on every family's case (N-1, standby, the clock's backfill and rentals,
    single-purpose sites, self-build, the policies) the optimum with the row is the optimum without it."""
    path = CASES[name](tmp_path / "in")
    if row not in formulation.build_model(build_index(load_scenario(path))).families:
        return  # the case writes no row of it (failover_open_spread: no class survives a site loss there)
    full = solve(load_scenario(path), OPTIONS)
    monkeypatch.setattr("dcplace.optimizer.solving.solve.build_model",
                        lambda ix: formulation.build_model(ix, without=(row,)))
    loose = solve(load_scenario(path), OPTIONS)
    assert loose.objective_usd_per_year == pytest.approx(full.objective_usd_per_year, rel=1e-9)


def three_air_sites(tmp_path, survive: float = 1.0):
    """One town of 4,800 tok/s that three air-only sites reach, all within each other's failover budget."""
    return make_scenario(tmp_path, sites=[site(s, lat, lon, cooling_allowed="air") for s, lat, lon in (("a", 0, 0), ("b", 0, 0.2), ("c", 0.2, 0))],
                         regions=[region("town", 0.1, 0.1, chat=4800, budget=50)], policies={"survive_site_loss": {"chat": survive}})


def test_failover_open_spread_makes_the_lp_open_whole_sites_by_hand(tmp_path):
    """Three air-only sites, one town of 4,800 tok/s that must survive any loss; a server-air rack serves 800 tok/s
    for $13,828 a year, a site costs $1,000 (tests/test_resilience.py). The loss rows ask each site's load to fit in
    the others' spare; summed over the three sites, 4,800 <= 2 x spare: 2,400 tok/s of spare, 9 racks ($124,452)
    whatever the opens. The LP without the row opens each site a third (share <= open, max share 1): $1,000 of
    opens, $125,452. With it, lo = 4,800 / 3 = 1,600 and the row of site f reads load_f + 1,600 (1 - open_f) <=
    spare of the other two; at loads of 1,600 and spare of 800 a site, open_f must be 1: $3,000 of opens,
    $127,452, which is the MIP's optimum (3 racks at each of the three sites)."""
    path = three_air_sites(tmp_path / "in")
    assert [(f, lo) for f, _, lo, _ in spread_rows(build_index(load_scenario(path)))] == [("a", 1600.0), ("b", 1600.0), ("c", 1600.0)]
    without_row = lp_value(path, without=("failover_open_spread",))
    with_row = lp_value(path)
    assert without_row == pytest.approx(9 * 13828 + 1000, rel=1e-9)
    assert with_row == pytest.approx(9 * 13828 + 3 * 1000, rel=1e-9)
    assert solve(load_scenario(path), OPTIONS).objective_usd_per_year == pytest.approx(with_row, rel=1e-9)


@pytest.mark.parametrize("survive, lo", [(0.8, 4800 / 3 - 0.2 * 4800), (0.5, None)])
def test_failover_open_spread_takes_off_what_may_be_lost(survive, lo, tmp_path):
    """With a share a < 1 surviving, a site's loss may cost (1 - a) x the demand it may serve: lo falls by as much
    (80 %: 1,600 - 960 = 640 tok/s); where nothing is left (50 %: 1,600 - 2,400 < 0) no row is written."""
    rows = spread_rows(build_index(load_scenario(three_air_sites(tmp_path / "in", survive))))
    assert [r[2] for r in rows] == ([pytest.approx(lo)] * 3 if lo is not None else [])


@pytest.mark.parametrize("name", sorted(BOUND_ONLY))
def test_bound_families_raise_the_bound_and_limit_no_plan(name, tmp_path, monkeypatch):
    """Left out, the model charges less energy than any dispatch draws: its bound falls (the
    plan's cost, always the dispatch's, cannot fall below the bound with the rows in), and
    the plan is still a plan the checker accepts."""
    path = BOUND_ONLY[name](tmp_path / "in")
    full = solve(load_scenario(path), OPTIONS)
    monkeypatch.setattr("dcplace.optimizer.solving.solve.build_model", lambda ix: formulation.build_model(ix, without=(name,)))
    loose = solve(load_scenario(path), OPTIONS)
    monkeypatch.undo()
    assert loose.solve.best_bound_usd_per_year < full.solve.best_bound_usd_per_year - 1.0
    assert full.solve.best_bound_usd_per_year <= full.objective_usd_per_year + 1e-6
    folder = write_plan_folder(loose, load_scenario(path), tmp_path / "loose")
    assert violations(folder, REGISTRY[name].checker) == []


def test_formulation_doc_is_current():
    """docs/formulation.md is generated: python -m dcplace.optimizer.model.formulation_doc --write docs/formulation.md"""
    assert DOC.read_text() == render_markdown(), "docs/formulation.md is stale: regenerate it (see its first lines)"


def test_family_lists_come_from_the_registry(tmp_path):
    """The lists of family names that used to be kept by hand (pairs.PRICED_FAMILIES, lazy_rows.N1_FAMILIES,
    formulation.OPTIMALITY_ROWS) are the registry's flags now: the same names, every one registered; build_model(ix,
    cheapest=False) leaves out exactly the optimality ones."""
    old = {"priced": {"demand_met", "share_needs_open", "inference_capacity", "hourly_serving", "busy_serves_load",
                      "busy_energy_split"},
           "n1": {"failover_aggregate"},
           "optimality": {"open_site_has_zone", "zone_racks_within_reach", "failover_open_spread"}}
    for flag, names in old.items():
        assert set(flagged(flag)) == names, flag
        assert names <= set(REGISTRY), flag
    assert not hasattr(formulation, "OPTIMALITY_ROWS")
    ix = build_index(load_scenario(TIGHTENING["failover_open_spread"][0](tmp_path / "in")))
    everything, judged = formulation.build_model(ix), formulation.build_model(ix, cheapest=False)
    left_out = set(everything.families) - set(judged.families)
    assert left_out == set(flagged("optimality")) & set(everything.families) and "failover_open_spread" in left_out
    with pytest.raises(ValueError):
        flagged("cheap")
