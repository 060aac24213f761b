"""The default plan behaves the way the market does: dense racks sit in liquid, training goes
where an effective H100-year is delivered cheaply, reasoning runs on chips that hold large
models, and every throughput the plan relies on is measured or derived from a measurement.
The default is solved once for the module (about a minute on two cores)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from dcplace.models import load_scenario
from dcplace.optimizer.model.costs import rack_economics

DATA = Path(__file__).resolve().parent.parent / "data"
# A rear-door heat exchanger brings chilled water to the rack (up to ~60 kW): air alone is not
# what cools it, so it counts with direct-to-chip and immersion as liquid cooling here.
LIQUID = {"rdhx", "dlc", "immersion"}
AIR_LIMIT_KW = 40.0  # above ~30-40 kW per rack air is not enough (DESIGN.md: cooling follows density)
# A 405B-class model in FP8 needs ~405 GB of weights: eight GPUs of at least 80 GB (H100 class).
LARGE_MODEL_MIN_MEMORY_GB = 80
# The catalog's chip ids and the chip names of data/reference/chips.csv, whose memory_gb is sourced.
REFERENCE_CHIP = {"gb200": "GB200 (per Blackwell GPU, NVL72)", "b200": "B200 (HGX/DGX B200 SXM)", "h200": "H200 SXM",
                  "h100": "H100 SXM", "mi300x": "MI300X", "gaudi3": "Gaudi 3 (OAM HL-325L)", "l40s": "L40S", "l4": "L4"}


def read(path: Path) -> list[dict]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def default(default_plan_folder):
    from dcplace.models.plan import read_plan

    return load_scenario(), read_plan(default_plan_folder[0])


def test_every_rack_above_40_kw_sits_in_a_liquid_zone(default):
    scenario, plan = default
    kw = {k.id: k.kw_per_rack for k in scenario.catalog.rack_configs}
    dense = [(s.id, r.config, r.cooling) for s in plan.sites for r in s.racks if kw[r.config] > AIR_LIMIT_KW]
    assert dense, "the default should carry some dense racks (GB200 NVL72 is 132 kW)"
    assert all(cooling in LIQUID for _, _, cooling in dense), dense


def delivered_usd_per_h100_year(scenario, site, job) -> float:
    """Least annual cost of one effective H100 of `job` at `site`: chips, energy at the site's
    price and climate-adjusted PUE, colocation, cooling capex and fabric, over GPUs x H100
    equivalents x the fabric's scaling efficiency. Infinite where the site cannot host the job."""
    catalog, economics = scenario.catalog, scenario.economics
    chips = {c.id: c for c in catalog.chips}
    eligible_chips = set(job.eligible_chips) or {c.id for c in catalog.chips if c.h100_equiv > 0}
    fabrics = [f for f in catalog.fabrics if f.tier >= job.min_fabric_tier]
    best = math.inf
    for rack in catalog.rack_configs:
        chip = chips[rack.chip]
        if rack.chip not in eligible_chips or chip.h100_equiv <= 0:
            continue
        for cooling in catalog.cooling:
            if cooling.id not in site.cooling_allowed or rack.kw_per_rack > cooling.max_kw_per_rack:
                continue
            for fabric in fabrics:
                gpus = job.gpus_h100_equiv / (chip.h100_equiv * fabric.training_efficiency)
                racks = math.ceil(gpus / rack.gpus_per_rack)
                if gpus > fabric.max_cluster_gpus or racks * rack.kw_per_rack * site.pue(cooling) > site.power_limit_kw:
                    continue
                cost = rack_economics(site, rack, chip, cooling, economics.training_load_factor, economics, fabric)
                best = min(best, cost.total_usd_per_year / (rack.gpus_per_rack * chip.h100_equiv * fabric.training_efficiency))
    return best


def test_each_training_job_sits_among_the_cheapest_quarter_of_its_eligible_sites(default):
    """Delivered cost per effective H100-year, plus the site's fixed cost spread over the job
    where the plan opens the site for nothing else (a fine-tune beside inference that is there
    anyway does not pay to open a site)."""
    scenario, plan = default
    jobs = {j.id: j for j in scenario.jobs}
    for placed in plan.jobs:
        job = jobs[placed.job]
        open_anyway = {s.id for s in plan.sites if s.open and (any(r.purpose == "inference" for r in s.racks)
                                                                  or any(o.site == s.id and o.job != job.id for o in plan.jobs))}
        sites = [s for s in scenario.sites if not job.allowed_countries or s.country in job.allowed_countries]
        cost = {s.id: delivered_usd_per_h100_year(scenario, s, job)
                + (0.0 if s.id in open_anyway else s.fixed_cost_usd_per_year / job.gpus_h100_equiv) for s in sites}
        eligible = sorted((c, sid) for sid, c in cost.items() if math.isfinite(c))
        quarter = {sid for _, sid in eligible[: max(1, math.ceil(len(eligible) / 4))]}
        assert placed.site in quarter, (
            f"{job.id} runs at {placed.site} ({cost[placed.site]:,.0f} USD per effective H100-year); "
            f"the cheapest quarter of {len(eligible)} eligible sites is {sorted(quarter)}")


def test_reasoning_runs_on_chips_with_the_memory_for_large_models(default):
    _, plan = default
    memory = {row["chip"]: float(row["memory_gb"]) for row in read(DATA / "reference" / "chips.csv") if row["memory_gb"]}
    chips = {r.chip for s in plan.sites for r in s.racks if r.workload == "reasoning"}
    assert chips
    for chip in chips:
        assert memory[REFERENCE_CHIP[chip]] >= LARGE_MODEL_MIN_MEMORY_GB, chip


def test_every_throughput_the_plan_uses_is_measured_or_derived(default):
    """Each (chip, class) the plan's inference racks use is read off its curve at the class's
    interactivity target (models/interactivity.py); the points that figure rests on (the point at
    the target, or the two around it) are published or derived, never a fill."""
    from dcplace.models.interactivity import throughput_at_targets, throughput_id

    scenario, plan = default
    bases = {r["id"]: r for r in read(DATA / "catalog" / "provenance.csv") if r["table"] == "throughput" and r["field"] == "tok_s_per_gpu"}
    read_at = {(t.chip, t.workload): t for t in throughput_at_targets(scenario.catalog)}
    used = {(r.chip, r.workload) for s in plan.sites for r in s.racks if r.purpose == "inference"}
    assert used
    for chip, w in used:
        t = read_at[chip, w]
        users = [u for u, _ in t.points]
        if t.target_tok_s_per_user is None or not users:
            rested = [None]
        elif t.target_tok_s_per_user in users or t.target_tok_s_per_user < users[0]:
            rested = [t.target_tok_s_per_user if t.target_tok_s_per_user in users else users[0]]
        else:
            rested = [u for u0, u1 in zip(users, users[1:]) if u0 < t.target_tok_s_per_user < u1 for u in (u0, u1)]
        for u in rested:
            row = bases[throughput_id(chip, w, u)]
            assert row["basis"] in {"source", "derived"}, (chip, w, u, row["reference"])