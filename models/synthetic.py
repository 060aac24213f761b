"""Seeded synthetic scenarios: the same seed gives the same scenario on every machine.

Used by the solver cross-check tests and by the scale benchmarks. Sites are scattered in
a box the size of a continent; every region is placed within a few hundred km of some
site so that it has one inside its latency budget; prices, carbon and power are drawn
from the ranges of the embedded default's sourced figures.
"""

from __future__ import annotations

import random

from dcplace.models.files import default_scenario_path, load_scenario, scenario_hash
from dcplace.models.records import Catalog, Policies, Region, Scenario, Site, TrainingJob


def synthetic_scenario(
    seed: int,
    n_sites: int,
    n_regions: int,
    n_jobs: int = 2,
    catalog: Catalog | None = None,
    policies: Policies | None = None,
    box_deg: tuple[float, float] = (12.0, 18.0),
) -> Scenario:
    """A random but reproducible scenario of the given size."""
    rng = random.Random(seed)
    base = load_scenario(default_scenario_path())
    catalog = catalog or base.catalog
    cooling_ids = [c.id for c in catalog.cooling]
    lat0, lon0 = 40.0, -100.0
    sites = []
    for i in range(n_sites):
        power_mw = rng.choice([20, 50, 100, 200])
        sites.append(
            Site(
                id=f"s{i}", name=f"Site {i}", lat=lat0 + rng.uniform(0, box_deg[0]), lon=lon0 + rng.uniform(0, box_deg[1]),
                country=rng.choice(["US", "CA"]), power_price_usd_per_mwh=rng.uniform(50, 200),
                grid_carbon_g_per_kwh=rng.uniform(30, 700), power_limit_kw=power_mw * 1000.0, floor_racks=int(power_mw * 1000 / 15),
                fixed_cost_usd_per_year=rng.choice([0.5e6, 1e6, 2e6]), colocation_usd_per_kw_month=rng.uniform(100, 250),
                cooling_allowed=tuple(c for c in cooling_ids if c == "air" or rng.random() < 0.7),
                pue_climate_factor=rng.uniform(0.8, 1.3),
            )
        )
    workloads = [w.id for w in catalog.workloads]
    regions = []
    for i in range(n_regions):
        anchor = rng.choice(sites)
        population = int(rng.uniform(0.5e6, 5e6))
        regions.append(
            Region(
                id=f"r{i}", name=f"Region {i}", lat=anchor.lat + rng.uniform(-3, 3), lon=anchor.lon + rng.uniform(-3, 3),
                country=anchor.country, population=population,
                demand_tok_s={w: population * (0.05 if j == 0 else 0.005) * rng.uniform(0.5, 1.5) for j, w in enumerate(workloads)},
                rtt_budget_ms={w: 40.0 if j == 0 else 120.0 for j, w in enumerate(workloads)},
            )
        )
    jobs = [
        TrainingJob(id=f"j{i}", name=f"Job {i}", gpus_h100_equiv=float(rng.choice([256, 1024, 4096])), min_fabric_tier=rng.choice([1, 2, 3]))
        for i in range(n_jobs)
    ]
    scenario = Scenario(
        name=f"synthetic-{seed}-{n_sites}x{n_regions}", sites=tuple(sites), regions=tuple(regions), catalog=catalog,
        jobs=tuple(jobs), economics=base.economics, latency=base.latency, policies=policies or Policies(),
    )
    return scenario.model_copy(update={"content_hash": scenario_hash(scenario)})


def cflp_instance(seed: int, n_facilities: int, n_customers: int, capacity_ratio: float) -> dict:
    """A capacitated facility location instance of the kind Cornuejols, Sridharan & Thizy
    (1991) generated, as the arguments of scenario_from_cost_matrix: facilities and customers
    uniform in the unit square; demand U[5, 35] (whole units); capacity U[10, 160] scaled so that
    total capacity / total demand = `capacity_ratio` (whole units, rounded down); fixed cost
    U[0, 90] + U[100, 110] x sqrt(capacity); serving all of customer j from facility i costs
    10 x distance x demand_j. Keys m, n, f, d, s, c (c an m x n array)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    facilities, customers = rng.random((n_facilities, 2)), rng.random((n_customers, 2))
    demand = np.round(rng.uniform(5, 35, n_customers))
    capacity = rng.uniform(10, 160, n_facilities)
    capacity = np.floor(capacity * capacity_ratio * demand.sum() / capacity.sum())
    fixed = rng.uniform(0, 90, n_facilities) + rng.uniform(100, 110, n_facilities) * np.sqrt(capacity)
    distance = np.sqrt(((facilities[:, None, :] - customers[None, :, :]) ** 2).sum(axis=2))
    return {"m": n_facilities, "n": n_customers, "f": fixed.tolist(), "d": demand.tolist(), "s": capacity.tolist(),
            "c": 10 * distance * demand[None, :]}
