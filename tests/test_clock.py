"""The clock (issue 15, docs/clock.md): hourly demand by local time, coincident sizing, energy
that follows the load, training in the troughs, rented GPU-hours, and the checker's rules.

Hand-derived figures use the tiny catalog of tests/helpers.py with discount rate 0 and target
utilization 1. A 'server-air' rack is 16 GPUs x 50 tok/s = 800 tok/s of chat, 4 kW IT
(0.25 kW a GPU) at PUE 1.5, and pays chips 16 x $2,000 / 5 = $6,400 and colocation 4 kW x
$100 x 12 = $4,800 a year. With the clock on a rack draws the idle share 0.3 of its power
all year, 0.3 x 4 x 1.5 x 8,760 / 1000 MWh x $100 = $1,576.80, and each busy GPU-hour adds
0.25 kW x 1.5 x 0.7 = 0.2625 kWh, $0.02625 at $100/MWh. A site costs $1,000 a year.
"""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import TINY_CATALOG, job, make_scenario, region, site
from dcplace.models import ScenarioError, load_scenario
from dcplace.models.plan import write_plan_folder
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.model.clock import best_blocks, utc_profile

import numpy as np

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)
RACK_CAPEX_USD = 6400 + 4800  # chips + colocation of one server-air rack a year
RACK_IDLE_USD = 0.3 * 4 * 1.5 * 8760 / 1000 * 100  # $1,576.80
BUSY_USD_PER_GPU_HOUR = 0.25 * 1.5 * 0.7 / 1000 * 100  # $0.02625
SITE_USD = 1000


def profile(loads: dict[int, float], default: float, workload: str = "chat") -> list[dict]:
    return [{"workload": workload, "local_hour": h, "load": loads.get(h, default), "region": ""} for h in range(24)]


def clocked(tmp_path, regions, *, loads, default, sites=None, hours=24, catalog=None, jobs=None, clouds=None, **clock):
    tables = {"profiles": profile(loads, default)}
    if clouds:
        tables["cloud_regions"] = clouds
    return make_scenario(tmp_path, sites=sites or [site("hub", 0, 0)], regions=regions, jobs=jobs, catalog=catalog,
                         tables=tables, sections={"clock": {"hours": hours, **clock}})


def racks(plan, purpose="inference") -> int:
    return sum(ln.racks for s in plan.sites for ln in s.racks if ln.purpose == purpose)


def checked(plan, scenario, tmp_path):
    folder = write_plan_folder(plan, scenario, tmp_path / "plan")
    report = check_plan_folder(folder)
    assert report.ok, report.violations
    return folder


def tampered(good, folder, edit) -> set[str]:
    """The families the checker finds broken in a copy of plan folder `good` whose plan.json `edit` changed."""
    shutil.copytree(good, folder)
    data = json.loads((good / "plan.json").read_text())
    edit(data)
    (folder / "plan.json").write_text(json.dumps(data))
    return check_plan_folder(folder).families_violated()


def test_two_regions_twelve_hours_apart_need_the_larger_peak_not_the_sum(tmp_path):
    """Each region peaks at 1,600 tok/s at local noon and runs at half that otherwise; twelve
    hours apart, the site's load is 1,600 + 800 = 2,400 tok/s at either peak (3 racks), where
    the peak sum is 3,200 (4 racks). Busy GPU-hours a day: 2 x 2,400 / 50 + 22 x 1,600 / 50 = 800."""
    regions = [region("west", 0, 0.1, chat=1600, budget=50, utc_offset_h=0), region("east", 0, -0.1, chat=1600, budget=50, utc_offset_h=12)]
    path = clocked(tmp_path / "in", regions, loads={12: 1.0}, default=0.5)
    scenario = load_scenario(path)
    plan = solve(scenario, OPTIONS)
    assert racks(plan) == 3
    busy_usd = 800 * 365 * BUSY_USD_PER_GPU_HOUR  # $7,665
    assert plan.objective_usd_per_year == pytest.approx(3 * (RACK_CAPEX_USD + RACK_IDLE_USD) + busy_usd + SITE_USD)  # $46,995.40
    assert plan.kpis["owned_coincident_peak_tok_s"] == pytest.approx(2400)
    checked(plan, scenario, tmp_path)
    peak_sum = solve(load_scenario(clocked(tmp_path / "off", regions, loads={12: 1.0}, default=0.5, hours=0)), OPTIONS)
    assert racks(peak_sum) == 4


def test_a_flat_profile_gives_todays_model_exactly(tmp_path):
    """Every hour at the peak, and racks drawing their full power whenever they exist (idle
    share 1): the clock's rows and costs are today's with load factor 1, so the optimum is."""
    catalog = {**TINY_CATALOG, "workloads": [{"id": "chat", "name": "Chat", "load_factor": 1.0}]}
    sites = [site("a", 0, 0), site("b", 0, 0.3, colocation_usd_per_kw_month=90), site("c", 0.3, 0, power_price_usd_per_mwh=60)]
    regions = [region("r1", 0, 0.1, chat=2000), region("r2", 0.2, 0.1, chat=1300), region("r3", 0.1, 0.2, chat=700)]
    jobs = [job("train", 40, min_fabric_tier=1)]
    today = solve(load_scenario(make_scenario(tmp_path / "off", sites, regions, jobs=jobs, catalog=catalog)), OPTIONS)
    for hours in (24, 3):
        path = clocked(tmp_path / f"on{hours}", regions, loads={}, default=1.0, sites=sites, catalog=catalog, jobs=jobs,
                       hours=hours, idle_power_share=1.0)
        plan = solve(load_scenario(path), OPTIONS)
        assert plan.objective_usd_per_year == pytest.approx(today.objective_usd_per_year, rel=1e-9)
        assert {(s.id, ln.config, ln.racks) for s in plan.sites for ln in s.racks} == \
               {(s.id, ln.config, ln.racks) for s in today.sites for ln in s.racks}


@pytest.mark.parametrize("price, rents", [(2.0, True), (2.6, False)])
def test_renting_wins_exactly_when_peak_gpu_hours_cost_less_than_the_rack(tmp_path, price, rents):
    """800 tok/s for one hour a day, nothing otherwise. Owning: a site ($1,000) and one rack,
    $11,200 + $1,576.80 idle + 16 GPU-hours x 365 x $0.02625 = $153.30 busy, $13,930.10 in all.
    Renting: 16 GPUs for one hour a day, 5,840 GPU-hours a year: it wins below $2.3853/GPU-h."""
    owned_usd = RACK_CAPEX_USD + RACK_IDLE_USD + 16 * 365 * BUSY_USD_PER_GPU_HOUR + SITE_USD
    clouds = [{"id": "cloud", "name": "Cloud", "provider": "x", "lat": 0, "lon": 0.05, "country": "US", "chip": "server",
               "usd_per_gpu_hour_on_demand": price, "usd_per_gpu_hour_reserved": "", "cap_gpus": "", "fabric_tier": 0}]
    path = clocked(tmp_path / "in", [region("town", 0, 0.1, chat=800, utc_offset_h=0)], loads={12: 1.0}, default=0.0, clouds=clouds)
    scenario = load_scenario(path)
    plan = solve(scenario, OPTIONS)
    rented_usd = 16 * 365 * price
    assert (rented_usd < owned_usd) == rents
    assert plan.objective_usd_per_year == pytest.approx(min(rented_usd, owned_usd))
    assert (racks(plan) == 0) == rents
    if rents:
        assert [(ln.kind, ln.gpus, ln.hour_utc) for ln in plan.rentals] == [("on_demand", pytest.approx(16), 12)]
        assert plan.rent_assignments[0].share == pytest.approx(1.0)
    checked(plan, scenario, tmp_path)


TRAINER_ONLY = {**TINY_CATALOG, "throughput": [{"chip": "trainer", "workload": "chat", "tok_s_per_gpu": 100}]}


def trough_scenario(tmp_path, gpu_hours: float, tier: int = 0):
    """4,800 tok/s for twelve local hours (one trainer-dense rack: 48 GPUs x 100 tok/s), none at
    night: the rack's 48 GPUs idle twelve hours a day, 576 H100-equivalent GPU-hours."""
    jobs = [job("tune", 30, interruptible=True, gpu_hours_per_day=gpu_hours, min_fabric_tier=tier)]
    return clocked(tmp_path, [region("town", 0, 0.1, chat=4800, utc_offset_h=0)], loads={h: 1.0 for h in range(8, 20)}, default=0.0,
                   catalog=TRAINER_ONLY, jobs=jobs)


def test_an_interruptible_job_that_fits_the_troughs_needs_no_rack_of_its_own(tmp_path):
    scenario = load_scenario(trough_scenario(tmp_path / "in", 500))
    plan = solve(scenario, OPTIONS)
    assert racks(plan) == 1 and racks(plan, "training") == 0 and plan.jobs == []
    assert sum(b.h100_gpu_hours_per_day for b in plan.backfill) == pytest.approx(500)
    assert {b.hour_utc for b in plan.backfill} <= set(range(0, 8)) | set(range(20, 24))  # only the night is idle
    assert plan.kpis["trough_h100_gpu_hours_per_day"] == pytest.approx(500)
    checked(plan, scenario, tmp_path)


def test_one_that_does_not_fit_gets_capacity_of_its_own(tmp_path):
    """700 GPU-hours do not fit the 576 idle ones: a second rack's GPUs run the job (on the
    inference network, tier 1, which the job accepts); needing tier 2 it gets a training rack."""
    plan = solve(load_scenario(trough_scenario(tmp_path / "a", 700)), OPTIONS)
    assert racks(plan) == 2 and sum(b.h100_gpu_hours_per_day for b in plan.backfill) == pytest.approx(700)
    scenario = load_scenario(trough_scenario(tmp_path / "b", 500, tier=2))
    plan = solve(scenario, OPTIONS)
    assert plan.backfill == [] and racks(plan, "training") == 1 and [p.job for p in plan.jobs] == ["tune"]
    checked(plan, scenario, tmp_path / "b")


def _rounded_start(path):
    """(ix, lm, the LP relaxation, the warm start): warmstart.rounded_lp_start on the scenario
    at `path`, its plan completed by the LP over its racks where it is not yet (as run_highs does)."""
    import time

    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.solvers.highs_model import to_highs
    from dcplace.optimizer.solvers.warmstart import complete_start, rounded_lp_start, solve_relaxation
    from dcplace.optimizer.solving.precheck import checked_index

    ix = checked_index(load_scenario(path))
    lm = build_model(ix)
    h = to_highs(lm)
    relaxed, _ = solve_relaxation(h, lm.integer_columns(), [], time.perf_counter() + 60)
    _, x = rounded_lp_start(h, lm, ix, 60)
    if x is not None and not lm.is_feasible(x):
        x = complete_start(h, lm, x, time.perf_counter() + 60)
    return ix, lm, relaxed, x


def _total(lm, x, block: str) -> float:
    return float(x[lm.blocks[block].start:lm.blocks[block].stop].sum())


@pytest.mark.parametrize("gpu_hours, inference_racks", [(500, 1), (700, 2), (1000, 2)])
def test_the_rounded_start_leaves_a_job_the_lp_runs_in_the_troughs_there(tmp_path, gpu_hours, inference_racks):
    """The warm start rounds the LP relaxation. The LP runs the job on idle inference GPUs
    (576 GPU-hours a night on the one rack the load needs), so the rounding must too: no
    training rack, and the racks sized for the load and the GPUs lent beside it. 500
    GPU-hours fit the night; 700 and 1,000 need a second rack, whose 48 GPUs idle all day
    (576 + 1,152 GPU-hours). The start, completed by the LP over its racks, gets every
    GPU-hour from the troughs (the trainer chip counts 1 H100-equivalent per GPU)."""
    ix, lm, relaxed, x = _rounded_start(trough_scenario(tmp_path / "in", gpu_hours))
    assert _total(lm, relaxed, "place") < 0.5  # the LP runs the job mostly in the troughs (at 1,000 GPU-hours 0.424 on racks)
    assert x is not None and lm.is_feasible(x)
    assert (_total(lm, x, "racks_inf"), _total(lm, x, "racks_trn"), _total(lm, x, "place")) == \
           (pytest.approx(inference_racks), 0.0, 0.0)
    lent = lm.blocks["backfill"]
    assert sum(x[lent.start + i] * ix.clock.weight_h[key[4]] for i, key in enumerate(lent.keys)) == pytest.approx(gpu_hours)


def test_the_rounded_start_lends_from_racks_of_a_chip_the_job_may_use(tmp_path):
    """Two chips serve chat: 'server' racks (16 GPUs, 800 tok/s) cost less per token than
    'trainer-dense' ones (48 GPUs, 4,800 tok/s) but count no H100-equivalents, so the job
    cannot borrow them. Sized for tok/s alone the rounding buys only server racks and no LP
    completes that start; the warm start then adds the trainer racks the LP lends from."""
    catalog = {**TINY_CATALOG}
    jobs = [job("tune", 30, interruptible=True, gpu_hours_per_day=500)]
    path = clocked(tmp_path / "in", [region("town", 0, 0.1, chat=4800, utc_offset_h=0)], loads={h: 1.0 for h in range(8, 20)},
                   default=0.0, sites=[site("hub", 0, 0), site("hub2", 0, 0.05)], catalog=catalog, jobs=jobs)
    ix, lm, relaxed, x = _rounded_start(path)
    assert x is not None and lm.is_feasible(x)
    assert _total(lm, x, "racks_trn") == 0.0 and _total(lm, x, "place") == 0.0
    racks = lm.blocks["racks_inf"]
    trainer = sum(x[racks.start + i] for i, key in enumerate(racks.keys) if ix.racks[key[1]].chip == "trainer")
    assert trainer >= 1


def test_the_rounded_start_rents_a_job_the_lp_rents(tmp_path):
    """Reserved trainer GPUs at $0.10 an hour beat racks of the job's own: the LP rents the
    job whole, and so does the rounded start (it placed every job on racks before, $261,432
    a year against the LP's $49,056). Completed, the start costs what the LP does."""
    clouds = [{"id": "cloud", "name": "Cloud", "provider": "x", "lat": 0, "lon": 0.05, "country": "CA", "chip": "trainer",
               "usd_per_gpu_hour_on_demand": "", "usd_per_gpu_hour_reserved": 0.1, "cap_gpus": "", "fabric_tier": 2}]
    path = clocked(tmp_path / "in", [region("town", 0, 0.1, chat=1600, utc_offset_h=0)], loads={h: 1.0 for h in range(8, 20)},
                   default=0.2, jobs=[job("train", 40, min_fabric_tier=1)], clouds=clouds)
    ix, lm, relaxed, x = _rounded_start(path)
    assert relaxed[lm.col("rent_trn", ("train", "cloud"))] == pytest.approx(1.0)
    assert x is not None and lm.is_feasible(x)
    assert x[lm.col("rent_trn", ("train", "cloud"))] == 1.0 and _total(lm, x, "racks_trn") == 0.0
    assert lm.objective() @ x == pytest.approx(lm.objective() @ relaxed)


def test_the_dispatch_lends_gpus_in_an_hour_their_racks_serve_nothing(tmp_path):
    """Racks may lend GPUs to a job at a site that serves none of their class (no region is
    routed there: the racks were built for the job's troughs): the merit order still hands the
    job its GPUs in every hour, which the checker compares with backfill.csv."""
    from dcplace.optimizer.model.clock import dispatch
    from dcplace.optimizer.solving.precheck import checked_index

    ix = checked_index(load_scenario(trough_scenario(tmp_path / "in", 500)))
    _, s, g, w, _ = ix.clock.backfill[0]
    (c,) = [c for site, c in ix.zones if site == s]
    out = dispatch(ix, {(s, g, c, w): 48.0}, {(s, g, w, 3): 20.0}, {(s, w, 12): 4800.0})
    assert out[s, g, c, w, 3] == (0.0, 20.0)
    assert out[s, g, c, w, 12] == (pytest.approx(48.0), 0.0)


def test_local_time_and_representative_blocks():
    """UTC hour h is local hour h + offset; India's +5.5 reads halfway between two local hours.
    Blocks of a one-peak day keep the peak whole: the block holding it carries its maximum."""
    local = np.arange(24, dtype=float)
    assert utc_profile(local, 2.0)[0] == 2.0 and utc_profile(local, 5.5)[1] == pytest.approx(6.5)
    loads = np.zeros((24, 1))
    loads[12] = 1.0
    blocks = best_blocks(loads, 3)
    assert sorted(h for b in blocks for h in b) == list(range(24))
    assert [12] in blocks  # the peak alone: no hour is overstated


@pytest.mark.parametrize("lat, lon, standard_h", [
    (53.35, -6.26, 0.0),     # Dublin: its zone data calls winter time a negative DST; standard time is UTC+0, not +1
    (51.51, -0.13, 0.0),     # London
    (-33.87, 151.21, 10.0),  # Sydney: daylight saving in January, standard time in July
    (-33.45, -70.67, -4.0),  # Santiago de Chile
    (19.08, 72.88, 5.5),     # Mumbai
    (40.71, -74.01, -5.0),   # New York
])
def test_standard_time_is_the_zones_offset_without_daylight_saving(lat, lon, standard_h):
    from dcplace.optimizer.model.clock import standard_offset_h

    assert standard_offset_h(lat, lon)[0] == standard_h


def test_each_checker_rule_rejects_a_plan_broken_on_purpose(tmp_path):
    clouds = [{"id": "cloud", "name": "Cloud", "provider": "x", "lat": 0, "lon": 0.05, "country": "US", "chip": "server",
               "usd_per_gpu_hour_on_demand": 2.0, "usd_per_gpu_hour_reserved": 3.0, "cap_gpus": "", "fabric_tier": 0}]
    regions = [region("west", 0, 0.1, chat=1600, utc_offset_h=0), region("east", 0, -0.1, chat=1600, utc_offset_h=12)]
    scenario = load_scenario(clocked(tmp_path / "in", regions, loads={12: 1.0}, default=0.5, clouds=clouds))
    plan = solve(scenario, OPTIONS)
    good = checked(plan, scenario, tmp_path)
    doc = json.loads((good / "plan.json").read_text())

    def broken(name, edit) -> set[str]:
        return tampered(good, tmp_path / name, edit)

    def starve(d):  # the dispatch keeps too few GPUs busy for the load
        for line in d["dispatch"]:
            line["serving_gpus"] *= 0.5

    def overfill(d):  # more GPUs busy than installed
        d["dispatch"][0]["serving_gpus"] += 1000

    def skew_blocks(d):
        d["clock"]["weight_h"]["0"] = 2.0

    assert "clock" in broken("starve", starve)
    assert "clock" in broken("overfill", overfill)
    assert "clock" in broken("blocks", skew_blocks)
    if doc["rentals"]:
        def underrent(d):
            for line in d["rentals"]:
                line["gpus"] *= 0.5
        assert "clock" in broken("rent", underrent)


def test_bad_clock_inputs_name_file_row_and_field(tmp_path):
    rows = profile({12: 1.0}, 0.5)[:-1]  # hour 23 missing
    rows[3]["load"] = 1.0
    rows[5]["workload"] = "chatt"
    path = make_scenario(tmp_path, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1)], tables={"profiles": rows},
                         sections={"clock": {"hours": 24}})
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    text = str(err.value)
    assert "profiles.csv" in text and "unknown workload class 'chatt'" in text and "hour(s) 5, 23" in text


def test_the_clock_runs_through_batch_compare_and_pareto(tmp_path):
    """A sweep over clock.hours, the comparison of its two plans, and a carbon frontier with the clock on."""
    import yaml
    from typer.testing import CliRunner

    from dcplace.cli import app
    from dcplace.optimizer.studies.batch import read_batch

    regions = [region("west", 0, 0.1, chat=1600, utc_offset_h=0), region("east", 0, -0.1, chat=1600, utc_offset_h=12)]
    base = clocked(tmp_path / "in", regions, loads={12: 1.0}, default=0.5, hours=0)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "day", "base": str(base), "options": {"mip_gap": 0, "time_limit_s": 60},
                                     "grid": {"clock.hours": [0, 24]}}))
    runner = CliRunner()
    result = runner.invoke(app, ["batch", str(sweep), "--out", str(tmp_path / "runs"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    cost = {m["name"]: m["objective_usd_per_year"] for m in read_batch(tmp_path / "runs")["members"]}
    assert cost["hours=24"] < cost["hours=0"]
    result = runner.invoke(app, ["compare", str(tmp_path / "runs"), "--baseline", "hours=0", "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cmp" / "compare.csv").exists()
    on = clocked(tmp_path / "on", regions, loads={12: 1.0}, default=0.5, hours=24)
    result = runner.invoke(app, ["pareto", str(on), "--points", "3", "--out", str(tmp_path / "pareto"), "--quiet"])
    assert result.exit_code == 0, result.output
    for folder in (tmp_path / "pareto" / "points").iterdir():
        if (folder / "plan.json").exists() and json.loads((folder / "plan.json").read_text())["solve"]["status"] in ("optimal", "feasible"):
            assert check_plan_folder(folder).ok


def test_a_carbon_cap_at_the_plans_own_emissions_keeps_the_plan(tmp_path):
    """Metamorphic: cap the emissions at what the clock's optimum emits; the optimum is still
    feasible (the model carries the exact dispatch under a cap) and nothing cheaper appears."""
    regions = [region("west", 0, 0.1, chat=1600, utc_offset_h=0), region("east", 0, -0.1, chat=1600, utc_offset_h=12)]
    sites = [site("hub", 0, 0), site("green", 0, 0.05, grid_carbon_g_per_kwh=50, power_price_usd_per_mwh=140)]
    free = solve(load_scenario(clocked(tmp_path / "free", regions, loads={12: 1.0}, default=0.5, sites=sites)), OPTIONS)
    emitted = free.kpis["emissions_t_per_year"]
    path = make_scenario(tmp_path / "capped", sites=sites, regions=regions, tables={"profiles": profile({12: 1.0}, 0.5)},
                         sections={"clock": {"hours": 24}}, policies={"carbon_cap_t_per_year": emitted * (1 + 1e-9)})
    scenario = load_scenario(path)
    capped = solve(scenario, OPTIONS)
    assert capped.kpis["emissions_t_per_year"] <= emitted * (1 + 1e-6)
    assert capped.objective_usd_per_year == pytest.approx(free.objective_usd_per_year, rel=1e-6)
    checked(capped, scenario, tmp_path)
    tighter = solve(load_scenario(make_scenario(tmp_path / "tight", sites=sites, regions=regions, tables={"profiles": profile({12: 1.0}, 0.5)},
                                                sections={"clock": {"hours": 24}}, policies={"carbon_cap_t_per_year": emitted * 0.5})), OPTIONS)
    assert tighter.kpis["emissions_t_per_year"] <= emitted * 0.5 * (1 + 1e-6)
    assert tighter.objective_usd_per_year >= free.objective_usd_per_year - 1e-6


def test_the_checker_rejects_troughs_that_do_not_add_up(tmp_path):
    scenario = load_scenario(trough_scenario(tmp_path / "in", 500))
    good = checked(solve(scenario, OPTIONS), scenario, tmp_path)

    def broken(name, edit) -> set[str]:
        return tampered(good, tmp_path / name, edit)

    def short_hours(d):  # the job borrows fewer GPUs than its day needs (dispatch and backfill agree)
        for b in d["backfill"]:
            b["gpus"] *= 0.5
            b["h100_gpu_hours_per_day"] *= 0.5
        for line in d["dispatch"]:
            line["lent_gpus"] *= 0.5

    def busy_daytime(d):  # lent in an hour the load keeps every GPU busy
        d["backfill"][0]["hour_utc"] = 12

    assert "clock" in broken("short", short_hours)
    assert "clock" in broken("daytime", busy_daytime)
