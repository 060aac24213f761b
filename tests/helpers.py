"""Tiny scenarios written to disk, small enough to solve by hand.

The tiny catalog uses round numbers so that expected costs can be written out in the
tests as arithmetic, not read back from the code under test.
"""

from __future__ import annotations

import copy
import csv
from pathlib import Path
from typing import Any

import highspy
import yaml

TINY_CATALOG: dict[str, list[dict[str, Any]]] = {
    "chips": [
        {"id": "trainer", "name": "Trainer GPU", "vendor": "X", "capex_usd_per_gpu": 10000, "life_years": 5, "h100_equiv": 1.0},
        {"id": "server", "name": "Inference GPU", "vendor": "X", "capex_usd_per_gpu": 2000, "life_years": 5, "h100_equiv": 0},
    ],
    "rack_configs": [
        # 8 GPUs/server x 6 servers x 10 kW = 60 kW, 48 GPUs: needs liquid
        {"id": "trainer-dense", "chip": "trainer", "gpus_per_server": 8, "servers_per_rack": 6, "server_kw": 10, "rack_overhead_kw": 0},
        # 8 x 2 x 2 kW = 4 kW, 16 GPUs
        {"id": "server-air", "chip": "server", "gpus_per_server": 8, "servers_per_rack": 2, "server_kw": 2, "rack_overhead_kw": 0},
    ],
    "cooling": [
        {"id": "air", "name": "Air", "max_kw_per_rack": 30, "pue": 1.5, "capex_usd_per_kw": 0, "life_years": 10, "zone_fixed_usd_per_year": 0},
        {"id": "liquid", "name": "Liquid", "max_kw_per_rack": 100, "pue": 1.1, "capex_usd_per_kw": 1000, "life_years": 10, "zone_fixed_usd_per_year": 5000},
    ],
    "fabrics": [
        {"id": "ib", "name": "InfiniBand", "tier": 2, "cost_usd_per_gpu": 1000, "life_years": 5, "training_efficiency": 1.0, "max_cluster_gpus": 100000},
    ],
    "workloads": [{"id": "chat", "name": "Chat", "load_factor": 0.5}],
    "throughput": [
        {"chip": "server", "workload": "chat", "tok_s_per_gpu": 50},
        {"chip": "trainer", "workload": "chat", "tok_s_per_gpu": 100},
    ],
}


def catalog_with_class(workload: str, name: str, load_factor: float, server_tok_s: float, trainer_tok_s: float) -> dict:
    """TINY_CATALOG with one more inference class, served by both chips at the given tok/s per GPU."""
    catalog = copy.deepcopy(TINY_CATALOG)
    catalog["workloads"].append({"id": workload, "name": name, "load_factor": load_factor})
    catalog["throughput"] += [{"chip": "server", "workload": workload, "tok_s_per_gpu": server_tok_s},
                              {"chip": "trainer", "workload": workload, "tok_s_per_gpu": trainer_tok_s}]
    return catalog


def site(id: str, lat: float, lon: float, **overrides: Any) -> dict[str, Any]:
    row = {
        "id": id, "name": id.title(), "lat": lat, "lon": lon, "country": "US",
        "power_price_usd_per_mwh": 100, "grid_carbon_g_per_kwh": 400, "power_limit_kw": 10000, "floor_racks": 100,
        "fixed_cost_usd_per_year": 1000, "colocation_usd_per_kw_month": 100, "cooling_allowed": "air;liquid",
        "pue_climate_factor": 1.0,
    }
    row.update(overrides)
    return row


def region(id: str, lat: float, lon: float, chat: float = 800, budget: float = 50, **overrides: Any) -> dict[str, Any]:
    row = {
        "id": id, "name": id.title(), "lat": lat, "lon": lon, "country": "US", "population": 1000,
        "demand_chat_tok_s": chat, "rtt_budget_chat_ms": budget, "allowed_countries": "",
    }
    row.update(overrides)
    return row


def job(id: str, gpus: float, **overrides: Any) -> dict[str, Any]:
    row = {"id": id, "name": id.title(), "gpus_h100_equiv": gpus, "eligible_chips": "", "min_fabric_tier": 0, "allowed_countries": ""}
    row.update(overrides)
    return row


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    columns = columns or (list(rows[0]) if rows else [])
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def make_scenario(
    folder: Path,
    sites: list[dict[str, Any]],
    regions: list[dict[str, Any]],
    jobs: list[dict[str, Any]] | None = None,
    catalog: dict[str, list[dict[str, Any]]] | None = None,
    economics: dict[str, Any] | None = None,
    latency: dict[str, Any] | None = None,
    policies: dict[str, Any] | None = None,
    name: str = "tiny",
    tables: dict[str, list[dict[str, Any]]] | None = None,
    sections: dict[str, Any] | None = None,
) -> Path:
    """Write a scenario folder and return the path of its YAML file. `tables` are further
    tables by scenario key (profiles, cloud_regions, pair_costs), `sections` further
    top-level keys (clock)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "catalog").mkdir(exist_ok=True)
    for table, rows in (catalog or TINY_CATALOG).items():
        write_csv(folder / "catalog" / f"{table}.csv", rows)
    write_csv(folder / "sites.csv", sites)
    write_csv(folder / "regions.csv", regions)
    spec: dict[str, Any] = {
        "name": name, "sites": "sites.csv", "regions": "regions.csv", "catalog": "catalog",
        "economics": {"discount_rate": 0.0, "inference_target_utilization": 1.0, "training_load_factor": 1.0, **(economics or {})},
        "latency": {"route_factor": 1.0, "fiber_km_per_ms": 200.0, "overhead_ms": 0.0, **(latency or {})},
        "policies": policies or {},
    }
    if jobs is not None:
        write_csv(folder / "jobs.csv", jobs, list(dict.fromkeys([*job("x", 1), *(key for j in jobs for key in j)])))
        spec["jobs"] = "jobs.csv"
    for key, rows in (tables or {}).items():
        write_csv(folder / f"{key}.csv", rows)
        spec[key] = f"{key}.csv"
    spec.update(sections or {})
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# Names that would run script if any output put them into HTML unescaped.
HOSTILE_SITE = "<script>alert(1)</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.title='PWNED'\">"
HOSTILE_SCENARIO = "<script>document.title='PWNED'</script> <b>$x$</b> & co"  # plotly would make <b> bold


def hostile_world_scenario(folder: Path, name: str = HOSTILE_SCENARIO) -> Path:
    """Sites on three continents (a world plan); two sites and a region carry hostile names."""
    sites = [
        site("nyc", 40.7, -74.0, name=HOSTILE_SITE),
        site("ams", 52.4, 4.9, name=HOSTILE_IMG, country="NL"),
        site("sin", 1.35, 103.8, name="Singapore $1$ & <b>bold</b>", country="SG"),
        site("far", -33.9, 151.2, name="Sydney (not needed)", country="AU", fixed_cost_usd_per_year=10_000_000),
    ]
    regions = [
        region("ny", 40.8, -73.9, chat=1600, name="<script>document.title='PWNED'</script>"),
        region("bos", 42.4, -71.1, chat=800),
        region("lon", 51.5, -0.1, chat=1600, country="GB"),
        region("par", 48.9, 2.35, chat=800, country="FR"),
        region("sg", 1.3, 103.9, chat=800, country="SG"),
        region("kl", 3.1, 101.7, chat=400, country="MY"),
    ]
    return make_scenario(folder, sites, regions, jobs=[job("big", 96)], name=name)


def europe_scenario(folder: Path, n_sites: int = 6) -> Path:
    """A regional plan: every site and region within Europe."""
    cities = [("fra", 50.1, 8.7, "DE"), ("ams", 52.4, 4.9, "NL"), ("par", 48.9, 2.35, "FR"), ("mad", 40.4, -3.7, "ES"),
              ("mil", 45.5, 9.2, "IT"), ("waw", 52.2, 21.0, "PL"), ("sto", 59.3, 18.1, "SE"), ("dub", 53.3, -6.3, "IE")]
    sites = [site(c, lat, lon, country=cc, name=f"{c.upper()} campus") for c, lat, lon, cc in cities[:n_sites]]
    regions = [region(f"r{c}", lat + 0.3, lon + 0.3, chat=800, budget=12, country=cc) for c, lat, lon, cc in cities]
    return make_scenario(folder, sites, regions, name="europe")


def solved_lp(lm) -> highspy.Highs:
    """The LP relaxation of the LinearModel `lm` (every integer column made continuous), solved to its optimum."""
    from dcplace.optimizer.solvers.highs_model import to_highs

    h = to_highs(lm)
    cols = lm.integer_columns()
    h.changeColsIntegrality(len(cols), cols, [highspy.HighsVarType.kContinuous] * len(cols))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h
