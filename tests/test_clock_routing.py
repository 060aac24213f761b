"""Routing per hour (issue 15, item 2; docs/clock.md): `clock.routing: hour` gives every represented hour its
own shares, so load can move between sites over the day; `day` (the default) keeps one share per region, class
and site. Hand-derived figures use the tiny catalog of tests/helpers.py as tests/test_clock.py does: a
'server-air' rack serves 800 tok/s of chat and costs $11,200 a year (chips and colocation) plus $1,576.80 of
idle power; a busy GPU-hour costs $0.02625; a site $1,000 a year.
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from helpers import TINY_CATALOG, job, make_scenario, region, site
from test_clock import BUSY_USD_PER_GPU_HOUR, OPTIONS, RACK_CAPEX_USD, RACK_IDLE_USD, SITE_USD, checked, clocked, profile, racks
from dcplace.models import ScenarioError, load_scenario
from dcplace.optimizer import solve
from dcplace.optimizer.checker import check_plan_folder

RACK_USD = RACK_CAPEX_USD + RACK_IDLE_USD  # $12,776.80 a year


def site_racks(plan) -> dict[str, int]:
    return {s.id: sum(ln.racks for ln in s.racks) for s in plan.sites if s.racks}


def shifting(tmp_path, routing: str, hours: int = 24):
    """West (UTC+0) and east (UTC+12) each peak at 1,600 tok/s at local noon and run at 800 otherwise. West may be
    served from site a or b, east only from b (the tiny scenarios' round trip is km / 100 ms: a is 4.45 ms
    from east, over its 3 ms budget, b 2.22 ms), and b holds at
    most two racks (1,600 tok/s).

    At 0:00 UTC east's peak fills b; at 12:00 UTC west peaks while east runs at 800. Per hour, west goes wholly to
    a at 0:00 (800 tok/s: one rack) and puts 800 of its 1,600 on b at 12:00: a needs 1 rack, b 2, three racks for
    the coincident peak of 2,400. By the day, west's share at b must be 0 (b is full at 0:00 with east alone), so
    a carries west's whole 1,600 peak: 2 racks there, four in all. Busy GPU-hours a day are the same either way:
    (1,600 + 23 x 800) x 2 / 50 = 800.
    """
    sites = [site("a", 0, 0), site("b", 0, 2, floor_racks=2)]
    regions = [region("west", 0, 1, chat=1600, budget=50, utc_offset_h=0), region("east", 0, 4, chat=1600, budget=3, utc_offset_h=12)]
    return load_scenario(clocked(tmp_path, regions, loads={12: 1.0}, default=0.5, sites=sites, hours=hours, routing=routing))


def test_routing_per_hour_moves_load_between_sites_and_needs_less_capacity(tmp_path):
    busy_usd = 800 * 365 * BUSY_USD_PER_GPU_HOUR  # $7,665
    day_scenario = shifting(tmp_path / "day", "day")
    day = solve(day_scenario, OPTIONS)
    assert site_racks(day) == {"a": 2, "b": 2}
    assert day.objective_usd_per_year == pytest.approx(2 * SITE_USD + 4 * RACK_USD + busy_usd)  # $60,772.20
    assert day.routing == [] and day.clock["routing"] == "day"
    checked(day, day_scenario, tmp_path / "day-plan")

    scenario = shifting(tmp_path / "hour", "hour")
    plan = solve(scenario, OPTIONS)
    assert site_racks(plan) == {"a": 1, "b": 2}
    assert plan.objective_usd_per_year == pytest.approx(2 * SITE_USD + 3 * RACK_USD + busy_usd)  # $47,995.40
    assert plan.clock["routing"] == "hour"
    west = {(ln.site, ln.hour_utc): ln.share for ln in plan.routing if ln.region == "west"}
    assert west.get(("a", 0)) == pytest.approx(1.0) and west.get(("b", 0), 0.0) == pytest.approx(0.0)
    assert west.get(("b", 12)) == pytest.approx(0.5) and west.get(("a", 12)) == pytest.approx(0.5)
    # assignments.csv keeps one line per pair: the hours' weighted mean share, which sums to 1 per region
    mean = {(a.region, a.site): a.share for a in plan.assignments}
    assert mean[("east", "b")] == pytest.approx(1.0)
    assert mean[("west", "a")] + mean[("west", "b")] == pytest.approx(1.0)
    assert mean[("west", "a")] == pytest.approx(sum(ln.share for ln in plan.routing if (ln.region, ln.site) == ("west", "a")) / 24)
    assert plan.kpis["tokens_per_year"] == pytest.approx(day.kpis["tokens_per_year"])  # the same tokens, served elsewhere
    folder = checked(plan, scenario, tmp_path / "plan")
    rows = list(csv.DictReader((folder / "routing.csv").open()))
    assert len(rows) == len(plan.routing) and set(rows[0]) == {"region", "workload", "site", "hour_utc", "weight_h", "share", "served_tok_s"}
    assert not (checked(day, day_scenario, tmp_path / "day-again") / "routing.csv").exists()


def test_routing_per_hour_with_a_flat_profile_is_routing_by_the_day(tmp_path):
    """Every hour at the peak: no hour differs from another, so one share per hour is one share per day, and the
    optimum is the same, with 24 hours and with 3 blocks."""
    catalog = {**TINY_CATALOG, "workloads": [{"id": "chat", "name": "Chat", "load_factor": 1.0}]}
    sites = [site("a", 0, 0), site("b", 0, 0.3, colocation_usd_per_kw_month=90), site("c", 0.3, 0, power_price_usd_per_mwh=60)]
    regions = [region("r1", 0, 0.1, chat=2000), region("r2", 0.2, 0.1, chat=1300), region("r3", 0.1, 0.2, chat=700)]
    jobs = [job("train", 40, min_fabric_tier=1)]
    for hours in (24, 3):
        cost = {}
        for routing in ("day", "hour"):
            path = clocked(tmp_path / f"{routing}{hours}", regions, loads={}, default=1.0, sites=sites, catalog=catalog, jobs=jobs,
                           hours=hours, idle_power_share=1.0, routing=routing)
            scenario = load_scenario(path)
            plan = solve(scenario, OPTIONS)
            cost[routing] = plan.objective_usd_per_year
            checked(plan, scenario, tmp_path / f"plan-{routing}{hours}")
        assert cost["hour"] == pytest.approx(cost["day"], rel=1e-9)


def tampered(good, folder, edit) -> set[str]:
    """Families the checker finds broken in a copy of `good` whose plan.json and routing.csv `edit` changed alike."""
    shutil.copytree(good, folder)
    data = json.loads((good / "plan.json").read_text())
    edit(data)
    (folder / "plan.json").write_text(json.dumps(data))
    with (folder / "routing.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(data["routing"][0]))
        writer.writeheader()
        writer.writerows(data["routing"])
    return check_plan_folder(folder).families_violated()


def test_the_checker_rejects_hourly_routing_that_leaves_an_hour_short_or_overloads_a_site(tmp_path):
    scenario = shifting(tmp_path / "in", "hour")
    good = checked(solve(scenario, OPTIONS), scenario, tmp_path / "plan")

    def short_hour(d):  # west's 12:00 share at b dropped: 800 tok/s of that hour unserved
        d["routing"] = [ln for ln in d["routing"] if (ln["region"], ln["site"], ln["hour_utc"]) != ("west", "b", 12)]

    def overload(d):  # west's 0:00 load moved from a to b, where east's peak already fills the two racks
        for ln in d["routing"]:
            if (ln["region"], ln["site"], ln["hour_utc"]) == ("west", "a", 0):
                ln["site"] = "b"

    def out_of_reach(d):  # east served from a, 4.45 ms away on a 3 ms budget
        for ln in d["routing"]:
            if (ln["region"], ln["hour_utc"]) == ("east", 5):
                ln["site"] = "a"

    assert "hourly_routing" in tampered(good, tmp_path / "short", short_hour)
    broken = tampered(good, tmp_path / "overload", overload)
    assert "clock" in broken  # b's 0:00 load (2,400 tok/s) exceeds what its dispatch serves
    assert "hourly_routing" in broken  # the assignments' day shares no longer are the hours' mean
    assert "hourly_routing" in tampered(good, tmp_path / "reach", out_of_reach)

    def over_cap(d):  # one hour's share above max_share_per_site (1): 150 % of west's load sent to a
        for ln in d["routing"]:
            if (ln["region"], ln["site"], ln["hour_utc"]) == ("west", "a", 3):
                ln["share"] = 1.5

    assert "hourly_routing" in tampered(good, tmp_path / "cap", over_cap)

    def no_routing(d):  # a plan routed per hour that lists no routing
        d["routing"] = []

    folder = tmp_path / "gone"
    shutil.copytree(good, folder)
    data = json.loads((good / "plan.json").read_text())
    no_routing(data)
    (folder / "plan.json").write_text(json.dumps(data))
    assert "hourly_routing" in check_plan_folder(folder).families_violated()


def test_bad_routing_is_named_with_its_fix(tmp_path):
    path = make_scenario(tmp_path, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1)], tables={"profiles": profile({12: 1.0}, 0.5)},
                         sections={"clock": {"hours": 24}})
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, overrides={"clock.routing": "minute"})
    assert "clock.routing" in str(err.value) and "'day' or 'hour'" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, overrides={"clock.routing": "hour", "clock.hours": 0})
    assert "clock.routing" in str(err.value) and "set clock.hours to 24" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path, overrides={"clock.routing": "hour", "policies.survive_site_loss": {"chat": 1.0}})
    assert "survive_site_loss" in str(err.value) and "clock.routing to day" in str(err.value)
    assert load_scenario(path, overrides={"clock.routing": "hour"}).clock.routing == "hour"
    from test_periods import years

    with pytest.raises(ScenarioError) as err:
        load_scenario(years(tmp_path / "years", sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1)]),
                      overrides={"clock.hours": 24, "clock.routing": "hour"})
    assert "routing per hour is not combined with periods" in str(err.value) and "plan one period at a time" in str(err.value)


def test_routing_per_hour_beyond_what_a_model_holds_is_refused_by_name(tmp_path):
    """Three eligible pairs (west at a and b, east at b) x 24 hours = 72 hourly shares: refused at
    --max-full-pairs 1 (24 x 1 = 24 a model holds), solved at 3 (72), and 2 representative blocks (6 shares)
    pass at 1; the CLI exits 2 with the message."""
    from typer.testing import CliRunner

    from dcplace.cli import app
    from dcplace.optimizer import SolveOptions

    scenario = shifting(tmp_path / "in", "hour")
    with pytest.raises(ScenarioError) as err:
        solve(scenario, SolveOptions(max_full_pairs=1, time_limit_s=30))
    text = str(err.value)
    assert "field 'clock.routing'" in text and "72 hourly shares (3 eligible" in text and "above the 24" in text
    assert "fewer representative hours" in text
    assert solve(scenario, SolveOptions(max_full_pairs=3, mip_gap=0.0, time_limit_s=30)).objective_usd_per_year > 0
    blocks = shifting(tmp_path / "blocks", "hour", hours=2)
    assert solve(blocks, SolveOptions(max_full_pairs=1, mip_gap=0.0, time_limit_s=30)).objective_usd_per_year > 0
    result = CliRunner().invoke(app, ["solve", scenario.source_path, "--max-full-pairs", "1", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "Traceback" not in result.output and "hourly shares" in result.output


def test_routing_per_hour_runs_through_batch_compare_and_pareto(tmp_path):
    """A sweep over clock.routing and the comparison of its two plans, and a carbon frontier routed per hour (its
    exact dispatch under each cap reads the hour's shares); every folder passes the checker."""
    import yaml
    from typer.testing import CliRunner

    from dcplace.cli import app
    from dcplace.optimizer.studies.batch import read_batch

    base = tmp_path / "in"
    shifting(base, "day")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "route", "base": str(base / "scenario.yaml"), "options": {"mip_gap": 0, "time_limit_s": 60},
                                     "grid": {"clock.routing": ["day", "hour"]}}))
    runner = CliRunner()
    result = runner.invoke(app, ["batch", str(sweep), "--out", str(tmp_path / "runs"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    members = read_batch(tmp_path / "runs")["members"]
    cost = {m["name"]: m["objective_usd_per_year"] for m in members}
    assert cost["routing=day"] - cost["routing=hour"] == pytest.approx(RACK_USD)
    result = runner.invoke(app, ["compare", str(tmp_path / "runs"), "--baseline", "routing=day", "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    for m in members:
        assert check_plan_folder(tmp_path / "runs" / m["name"]).ok
    shifting(tmp_path / "hourly", "hour")
    result = runner.invoke(app, ["pareto", str(tmp_path / "hourly" / "scenario.yaml"), "--points", "3", "--gap", "0",
                                 "--out", str(tmp_path / "pareto"), "--quiet"])
    assert result.exit_code == 0, result.output
    solved = 0
    for folder in (tmp_path / "pareto" / "points").iterdir():
        if (folder / "plan.json").exists() and json.loads((folder / "plan.json").read_text())["solve"]["status"] in ("optimal", "feasible"):
            assert json.loads((folder / "plan.json").read_text())["clock"]["routing"] == "hour"
            assert check_plan_folder(folder).ok
            solved += 1
    assert solved >= 2


def test_the_max_share_price_is_not_stated_with_routing_per_hour(tmp_path):
    """With routing per hour the cap bounds the day's share, each hour's and share_needs_open at once, and the
    plan LP's duals split its price among them arbitrarily (docs in optimizer/studies/duals.py): the limit-price
    study states it routed by the day only."""
    from dcplace.optimizer import SolveOptions
    from dcplace.optimizer.studies.duals import limit_prices

    stated = {}
    for routing in ("day", "hour"):
        path = make_scenario(tmp_path / routing, sites=[site("a", 0, 0), site("b", 0, 0.05, power_price_usd_per_mwh=300)],
                             regions=[region("town", 0, 0.01)], policies={"max_share_per_site": 0.5},
                             tables={"profiles": profile({12: 1.0}, 0.5)}, sections={"clock": {"hours": 24, "routing": routing}})
        scenario = load_scenario(path)
        plan = solve(scenario, SolveOptions(mip_gap=0.0))
        stated[routing] = [p for p in limit_prices(scenario, plan, latency=False).prices if p.limit == "max share per site"]
    assert len(stated["day"]) == 1 and stated["day"][0].value_usd_per_year_per_unit > 0
    assert stated["hour"] == []
