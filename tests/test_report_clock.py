"""The reports of the clock (issue 15): "The day" section, the summary's sentences, the map's
hour slider and the lines for the terminal, checked against the plan's own figures.

The clocked plan: two owned sites (hostile names) in New York and Amsterdam, New York also
serving a nearby region whose day is shifted by twelve hours (so the clock saves capacity
there), Singapore's demand served from a cheap cloud region (a hostile name too), and an
interruptible job that runs in the troughs.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess

import pytest
from helpers import HOSTILE_IMG, HOSTILE_SITE, TINY_CATALOG, job, make_scenario, region, site

from dcplace.models.plan import read_plan
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import load_plan_layers, save_html_map, save_report
from dcplace.reports.day import place_days  # importing reports.day registers its section (save_report does this itself)
from dcplace.reports.htmlmap import plan_figure
from dcplace.reports.report import Table, report_content
from dcplace.reports.style import money, tok_s_text
from dcplace.reports.economics import clock_facts, workload_costs
from dcplace.reports.summary import clock_terminal_lines

HOSTILE_CLOUD = "<b>Cloud</b> & $1$"
HOSTILE_JOB = "<script>tune</script>"
CATALOG = {**TINY_CATALOG, "throughput": [{"chip": "trainer", "workload": "chat", "tok_s_per_gpu": 100}]}
PROFILE = [{"workload": "chat", "local_hour": h, "load": 1.0 if 9 <= h <= 20 else 0.15, "region": ""} for h in range(24)]


@pytest.fixture(scope="module")
def clocked(tmp_path_factory):
    root = tmp_path_factory.mktemp("clock")
    clouds = [{"id": "cl-sg", "name": HOSTILE_CLOUD, "provider": "x", "lat": 1.3, "lon": 103.85, "country": "SG", "chip": "trainer",
               "usd_per_gpu_hour_on_demand": 1.0, "usd_per_gpu_hour_reserved": "", "cap_gpus": "", "fabric_tier": 0}]
    sites = [site("nyc", 40.7, -74.0, name=HOSTILE_SITE), site("ams", 52.4, 4.9, name=HOSTILE_IMG, country="NL"),
             site("sin", 1.35, 103.8, name="Singapore", country="SG", fixed_cost_usd_per_year=2_000_000)]
    regions = [region("ny", 40.8, -73.9, chat=9600, budget=30, utc_offset_h=-5),
               region("bos", 42.4, -71.1, chat=4800, budget=30, utc_offset_h=7),
               region("lon", 51.5, -0.1, chat=9600, budget=30, country="GB", utc_offset_h=0),
               region("sg", 1.3, 103.9, chat=4800, budget=30, country="SG", utc_offset_h=8)]
    jobs = [job("tune", 30, name=HOSTILE_JOB, interruptible=True, gpu_hours_per_day=500, min_fabric_tier=0)]
    path = make_scenario(root / "in", sites, regions, jobs=jobs, catalog=CATALOG, tables={"profiles": PROFILE, "cloud_regions": clouds},
                         sections={"clock": {"hours": 24}})
    solve_to_folder(path, root / "plan")
    return root / "plan"


@pytest.fixture(scope="module")
def unclocked(tmp_path_factory):
    root = tmp_path_factory.mktemp("noclock")
    path = make_scenario(root / "in", [site("hub", 0, 0, name=HOSTILE_SITE)], [region("town", 0, 0.1, chat=1600)])
    solve_to_folder(path, root / "plan")
    return root / "plan"


def _table(section, id: str) -> Table:
    return next(b for b in section.blocks if isinstance(b, Table) and b.id == id)


def _text(section) -> str:
    return " ".join(t for b in section.blocks for t in getattr(b, "texts", []))


def test_the_plan_has_what_the_reports_need(clocked):
    plan = read_plan(clocked)
    assert plan.clock["on"] and plan.rentals and plan.backfill and plan.rent_assignments
    assert plan.kpis["owned_coincident_peak_tok_s"] < sum(a.served_tok_s for a in plan.assignments)  # the clock saves here


def test_day_section_states_the_plans_figures(clocked):
    layers = load_plan_layers(clocked)
    plan, k = layers.plan, layers.plan.kpis
    content = report_content(layers)
    day = content.section("day")
    assert day.title == "The day"
    # What is rented where: the total is the plan's rented spend, as every money figure is written.
    rent = content.section("rent")
    rentals = _table(rent, "day-rentals")
    assert rentals.rows[-1][0] == "Total" and rentals.rows[-1][-1] == money(k["rental_usd_per_year"])
    assert sum(float(r[-1].strip("$ M").replace(",", "")) for r in rentals.rows[:-1]) == pytest.approx(k["rental_usd_per_year"] / 1e6, abs=0.01)
    assert rentals.rows[0][0] == HOSTILE_CLOUD  # the cloud region's name, as text
    # Training in the troughs: per job and site, adding up to the KPI.
    troughs = _table(content.section("troughs"), "day-troughs")
    assert troughs.rows[-1][-2] == f"{k['trough_h100_gpu_hours_per_day']:,.0f}" == "500"
    assert {r[0] for r in troughs.rows[:-1]} == {HOSTILE_JOB}
    assert sum(float(r[-2].replace(",", "")) for r in troughs.rows[:-1]) == pytest.approx(500, abs=len(troughs.rows))
    assert sum(int(r[-1].rstrip("%")) for r in troughs.rows[:-1]) == pytest.approx(100, abs=len(troughs.rows))
    # Build or rent: the rented column is the rented spend, owned + rented the classes' cost.
    bor = _table(rent, "day-build-or-rent")
    assert bor.rows[-1][4] == money(k["rental_usd_per_year"])
    # Utilisation by hour: one row per owned site with inference and per cloud region.
    use = _table(day, "day-use")
    places = {(ln.kind, ln.place) for ln in plan.hourly}
    assert len(use.rows) == len(places) == 3
    # The argument: coincident load against the peak sum, the rented spend, the troughs.
    facts = clock_facts(plan, layers.scenario)
    peak_sum = sum(a.served_tok_s for a in plan.assignments)
    assert facts.peak_sum_tok_s == pytest.approx(peak_sum)
    text = _text(day)
    assert tok_s_text(k["owned_coincident_peak_tok_s"]) in text and tok_s_text(peak_sum) in text
    assert f"{1 - k['owned_coincident_peak_tok_s'] / peak_sum:.1%} less" in text
    # The saving in GPUs: New York serves two regions twelve hours apart.
    assert facts.saved_gpus > 0 and f"about {facts.saved_gpus:,.0f} more GPUs" in text
    assert money(k["rental_usd_per_year"]) in text and "500 H100-equivalent GPU-hours" in text
    assert money(k["rental_usd_per_year"]) in _text(rent) and "500 H100-equivalent GPU-hours" in _text(content.section("troughs"))
    # The figure is the section's own.
    image = next(b for b in day.blocks if getattr(b, "key", "") == "day")
    assert image.png and image.png[:4] == b"\x89PNG"


def test_the_busiest_hour_and_the_days_load_match_the_hourly_lines(clocked):
    layers = load_plan_layers(clocked)
    plan = layers.plan
    for d in place_days(plan, layers.scenario):
        lines = [ln for ln in plan.hourly if ln.place == d.id]
        assert d.load_tok_s.sum() == pytest.approx(sum(ln.load_tok_s * ln.weight_h for ln in lines))
        assert d.peak_tok_s == pytest.approx(max(ln.load_tok_s for ln in lines))
        assert d.lent_gpu_hours_per_day == pytest.approx(sum(ln.lent_gpus * ln.weight_h for ln in lines))


def test_executive_summary_and_terminal_say_it_only_when_present(clocked, unclocked):
    layers = load_plan_layers(clocked)
    k = layers.plan.kpis
    def lead_of(content) -> str:  # page 1's lead paragraphs (the recommendation and the risks come first: issue 49)
        return " ".join(t for sec in ("summary", "argument") for b in content.section(sec).blocks
                        if getattr(b, "style", "") == "lead" for t in b.texts)

    lead = lead_of(report_content(layers))
    assert money(k["rental_usd_per_year"]) in lead and "troughs absorb 500" in lead
    lines = clock_terminal_lines(layers.plan, layers.scenario)
    assert any(money(k["rental_usd_per_year"]) in line for line in lines) and any("500 H100-equivalent" in line for line in lines)
    off = load_plan_layers(unclocked)
    assert clock_terminal_lines(off.plan, off.scenario) == []
    content = report_content(off)
    assert not {"day", "rent", "troughs"} & {s.id for s in content.sections}
    assert "clock" not in lead_of(content)


def test_costs_by_use_add_up_to_the_plan_with_the_clock(clocked):
    layers = load_plan_layers(clocked)
    uses = workload_costs(layers.plan, layers.scenario)
    assert sum(u.total_usd_per_year for u in uses) == pytest.approx(layers.plan.objective_usd_per_year, rel=1e-9)
    by_use = {u.use: u for u in uses}
    k = layers.plan.kpis
    assert by_use["chat"].direct_usd_per_year == pytest.approx(k["inference_cost_usd_per_year"], rel=1e-6)
    assert by_use["training"].direct_usd_per_year == pytest.approx(k["training_cost_usd_per_year"], rel=1e-6)


def test_html_map_has_an_hour_slider_and_escapes_names(clocked, unclocked, tmp_path):
    layers = load_plan_layers(clocked)
    fig = plan_figure(layers)
    layer = {t.meta["layer"]: t for t in fig.data}
    assert len(layer["day-owned"].lon) == 2 and len(layer["day-rented"].lon) == 1
    slider = fig.layout.sliders[0]
    assert len(slider.steps) == 24
    # the slider and the colour bar sit in a band of their own under the map, not over land
    band = fig.layout.geo.domain.y[0]
    assert band > 0 and slider.y == 0 and slider.yanchor == "bottom"
    assert layer["day-owned"].marker.colorbar.y < band
    # Each hour restyles the two day traces, with the loads of that hour.
    days = {d.id: d for d in place_days(layers.plan, layers.scenario)}
    step = slider.steps[13]
    owned_text = step.args[0]["text"][0]
    assert any(tok_s_text(days["nyc"].load_tok_s[13]) in t for t in owned_text)
    assert html.escape(HOSTILE_SITE) in json.dumps(owned_text)
    assert html.escape(HOSTILE_CLOUD) in json.dumps(step.args[0]["text"][1])
    save_html_map(layers, tmp_path / "on")
    page = (tmp_path / "on" / "map.html").read_text()
    for hostile in (HOSTILE_SITE, HOSTILE_IMG, HOSTILE_CLOUD):
        assert hostile not in page
    off = plan_figure(load_plan_layers(unclocked))
    assert not off.layout.sliders and not any(t.meta["layer"].startswith("day") for t in off.data)
    assert not off.layout.geo.domain.y or off.layout.geo.domain.y[0] == 0, "without the clock the map keeps the whole height"


def test_report_html_and_pdf_carry_the_day(clocked, tmp_path):
    layers = load_plan_layers(clocked)
    save_report(layers, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "The day" in page and money(layers.plan.kpis["rental_usd_per_year"]) in page
    for hostile in (HOSTILE_SITE, HOSTILE_IMG, HOSTILE_CLOUD, HOSTILE_JOB):
        assert hostile not in page
    assert html.escape(HOSTILE_CLOUD, quote=False) in page.replace("&#34;", '"').replace("&#39;", "'")
    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils not installed: the PDF's text is not read")
    text = subprocess.run(["pdftotext", "-layout", str(tmp_path / "report.pdf"), "-"], capture_output=True, text=True, check=True).stdout
    assert "The day" in text and "Build or rent" in text and HOSTILE_CLOUD in text and "Training in the troughs" in text
    pages = text.count("\f")
    assert all(f"page {n} of" in text for n in range(1, pages + 1))


def _scenario(root, hours: int, interruptible: bool = True):
    clouds = [{"id": "cl-sg", "name": HOSTILE_CLOUD, "provider": "x", "lat": 1.3, "lon": 103.85, "country": "SG", "chip": "trainer",
               "usd_per_gpu_hour_on_demand": 1.0, "usd_per_gpu_hour_reserved": "", "cap_gpus": "", "fabric_tier": 0}]
    sites = [site("nyc", 40.7, -74.0), site("sin", 1.35, 103.8, country="SG", fixed_cost_usd_per_year=2_000_000)]
    regions = [region("ny", 40.8, -73.9, chat=9600, budget=30, utc_offset_h=-5), region("sg", 1.3, 103.9, chat=4800, budget=30, country="SG")]
    extra = {"interruptible": True, "gpu_hours_per_day": 300} if interruptible else {}
    return make_scenario(root, sites, regions, jobs=[job("tune", 30, **extra)], catalog=CATALOG,
                         tables={"profiles": PROFILE, "cloud_regions": clouds}, sections={"clock": {"hours": hours}})


def test_represented_blocks_are_drawn_over_the_hours_they_stand_for(tmp_path):
    solve_to_folder(_scenario(tmp_path / "in", 4), tmp_path / "plan")
    layers = load_plan_layers(tmp_path / "plan")
    blocks = {int(h): b for h, b in layers.plan.clock["blocks_utc"].items()}
    assert sorted(x for b in blocks.values() for x in b) == list(range(24))
    for d in place_days(layers.plan, layers.scenario):
        for ln in (ln for ln in layers.plan.hourly if ln.place == d.id):
            assert all(d.load_tok_s[x] == pytest.approx(ln.load_tok_s) for x in blocks[ln.hour_utc])
    day = report_content(layers).section("day")
    assert "4 represented blocks" in _text(day)


def test_rented_capacity_without_the_clock_is_reported_without_a_day(tmp_path):
    solve_to_folder(_scenario(tmp_path / "in", 0, interruptible=False), tmp_path / "plan")
    layers = load_plan_layers(tmp_path / "plan")
    k = layers.plan.kpis
    assert layers.plan.rentals and not layers.plan.clock["on"]
    content = report_content(layers)
    assert "day" not in {s.id for s in content.sections}  # no day to draw: every hour is the peak
    section = content.section("rent")
    assert section.title == "Build or rent"
    assert _table(section, "day-rentals").rows[-1][-1] == money(k["rental_usd_per_year"])
    assert not plan_figure(layers).layout.sliders


def test_the_outage_table_counts_a_job_that_runs_in_the_troughs(tmp_path):
    """An interruptible job run on a site's idle inference GPUs stalls when that site is lost:
    the outage table names it, with the share of its GPU-hours the site gave it."""
    from test_clock import OPTIONS, trough_scenario

    from dcplace.models import load_scenario
    from dcplace.optimizer.solving.solve import solve
    from dcplace.optimizer.studies.outages import outages_of
    from dcplace.reports.outages import site_rows

    scenario = load_scenario(trough_scenario(tmp_path / "in", 500))
    plan = solve(scenario, OPTIONS)
    assert plan.jobs == [] and plan.backfill, "the job runs in the troughs"
    table = outages_of(plan, scenario)
    (outage,) = [o for o in table.outages if o.jobs]
    (job,) = outage.jobs
    # the whole job ran at the one site: its share is 1, its job-days the outage's days
    assert (job.job, job.troughs_share, job.days_at_risk) == ("tune", pytest.approx(1.0), pytest.approx(scenario.policies.site_outage_days))
    assert job.gpus_h100_equiv == pytest.approx(500 / 24)
    columns, rows, _ = site_rows(table)
    assert "in its troughs: 100% of its GPU-hours" in rows[0][columns.index("Training jobs stalled")]
    assert "Training job-days at risk" in columns


def test_local_time_is_the_time_zones_standard_time():
    import numpy as np

    from dcplace.optimizer.model.clock import standard_offset_h
    from dcplace.reports.economics import PlaceDay

    zero = np.zeros(24)
    mumbai = PlaceDay("mumbai", "Mumbai", "owned", 72.88, zero, zero, zero, zero, 8.0, standard_offset_h(19.08, 72.88)[0])
    lisbon = PlaceDay("lisbon", "Lisbon", "owned", -9.14, zero, zero, zero, zero, 8.0, standard_offset_h(38.72, -9.14)[0])
    assert mumbai.local_time(10) == "15:30"  # India is UTC+5:30 (solar time, lon / 15, said 15:00)
    assert lisbon.local_time(15) == "15:00"  # Lisbon is on UTC (solar time said 14:00)


def test_the_outage_summary_says_which_load_at_risk_the_policy_does_not_cover():
    from dcplace.optimizer.studies.outages import OutageTable, SiteOutage
    from dcplace.reports.outages import summary_lines

    lost = SiteOutage("hk", "Hong Kong", {"chat": 100.0, "chat_small": 300.0}, {"chat": 100.0, "chat_small": 0.0},
                      {"chat": 0.0, "chat_small": 300.0}, [], [], True)
    table = OutageTable("plan", "s", {"chat": 1.0}, 14.0, 1.0, [lost], {"chat": "Chat", "chat_small": "Small-model chat"})
    text = " ".join(summary_lines(table))
    assert "the classes Chat 100%" in text and "every single-site loss keeps it" in text
    assert "100% of the load at risk over all losses is Small-model chat, which the policy does not ask to survive" in text


def test_the_assumptions_state_the_clocks_token_basis(tmp_path):
    """A clock plan's tokens a year follow the hourly profiles, not the catalog's load factors: the
    assumptions say so, with the day's mean per class measured from the plan."""
    from test_clock import OPTIONS, trough_scenario

    from dcplace.models import load_scenario
    from dcplace.optimizer.solving.solve import solve
    from dcplace.reports.report import _load_factor_text

    scenario = load_scenario(trough_scenario(tmp_path / "in", 500))
    plan = solve(scenario, OPTIONS)
    text = _load_factor_text(plan, scenario)
    # 4,800 tok/s for 12 of 24 hours: the day's mean over the peak is 50 %
    assert "follow the hourly profiles, not the catalog's load factors" in text and "Chat 50% (catalog 50%)" in text, text  # the tiny catalog says 50 % too
    flat = plan.model_copy(update={"clock": {}, "hourly": []})
    assert "average / peak use: energy and tokens a year" in _load_factor_text(flat, scenario)
