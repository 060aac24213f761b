"""A plan folder as geodata: sites, regions and assignment lines in EPSG:4326.

Every report (exports, maps, the executive report) starts from `load_plan_layers`, so
the three layers are built in one place and every output shows the same numbers. Only
the plan folder is read: plan.json and the resolved scenario in inputs/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
from shapely.geometry import LineString, Point

from dcplace.models import ScenarioError, load_scenario
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.models.records import Scenario

CRS = "EPSG:4326"
ROLES = ("training", "inference", "mixed", "idle", "closed")
REGIONAL_MAX_SPAN_DEG = (100.0, 60.0)  # lon, lat spans under which a plan is drawn as a region


class NotAPlanFolder(ValueError):
    """The folder is not a plan folder, or it is damaged."""


class NoPlanToReport(NotAPlanFolder):
    """The folder records an infeasible (or failed) solve: there is nothing to draw."""


@dataclass(frozen=True)
class PlanLayers:
    """The plan record plus its three layers; `folder` is where it was read from."""

    folder: Path
    plan: Plan
    scenario: Scenario
    sites: gpd.GeoDataFrame
    regions: gpd.GeoDataFrame
    assignments: gpd.GeoDataFrame

    def layers(self) -> dict[str, gpd.GeoDataFrame]:
        return {"sites": self.sites, "regions": self.regions, "assignments": self.assignments}


def load_plan_layers(folder: str | Path) -> PlanLayers:
    """Read a plan folder written by `dcplace solve` into `PlanLayers`.

    Raises NotAPlanFolder with what is wrong and what would fix it.
    """
    folder = Path(folder)
    if not (folder / "plan.json").is_file() or not (folder / "inputs" / "scenario.yaml").is_file():
        raise NotAPlanFolder(
            f"{folder}: not a plan folder (plan.json and inputs/scenario.yaml are needed). "
            "Fix: give a folder written by `dcplace solve`."
        )
    try:
        plan = read_plan(folder)
        scenario = load_scenario(folder / "inputs" / "scenario.yaml")
    except (ValueError, ScenarioError) as exc:
        raise NotAPlanFolder(f"{folder}: the plan folder is damaged ({exc}). Fix: re-run `dcplace solve`.") from exc
    if plan.solve.status not in HAS_PLAN:
        reasons = "; ".join(plan.diagnosis) or "no diagnosis recorded"
        raise NoPlanToReport(
            f"{folder}: the scenario was {plan.solve.status}, so there is no plan to draw ({reasons}). "
            "Fix: loosen the limits named, re-solve, then report on the new folder."
        )
    return PlanLayers(folder, plan, scenario, site_layer(plan), region_layer(plan, scenario), assignment_layer(plan, scenario))


def site_layer(plan: Plan) -> gpd.GeoDataFrame:
    """One point per candidate site: role, racks, GPUs, MW, cost, chips, cooling, fabric."""
    rows = []
    for s in plan.sites:
        chips = sorted({line.chip for line in s.racks})
        rows.append({
            "id": s.id, "name": s.name, "country": s.country, "role": s.role, "open": s.open,
            "racks": s.racks_total, "gpus": s.gpus, "chips": ";".join(chips), "cooling": ";".join(s.zones),
            "fabrics": ";".join(s.fabrics), "it_mw": s.it_kw / 1000, "facility_mw": s.facility_kw / 1000,
            "power_limit_mw": s.power_limit_kw / 1000,
            "inference_tok_s": sum(s.served_tok_s.values()),
            "training_jobs": ";".join(j.name for j in plan.jobs if j.site == s.id),
            "emissions_t_per_year": s.emissions_t_per_year, "upfront_capex_usd": s.upfront_capex_usd,
            "cost_usd_per_year": s.total_cost_usd_per_year,
            "geometry": Point(s.lon, s.lat),
        })
    return gpd.GeoDataFrame(rows, geometry="geometry", crs=CRS)


def region_layer(plan: Plan, scenario: Scenario) -> gpd.GeoDataFrame:
    """One point per demand region: demand, who serves it, demand-weighted RTT."""
    by_region: dict[str, list] = {}
    for a in plan.assignments:
        by_region.setdefault(a.region, []).append(a)
    site_names = {s.id: s.name for s in plan.sites}
    rows = []
    for r in scenario.regions:
        lines = by_region.get(r.id, [])
        served = sum(a.served_tok_s for a in lines)
        demand = sum(r.demand_tok_s.values())
        weighted_rtt = sum(a.served_tok_s * a.rtt_ms for a in lines)
        rows.append({
            "id": r.id, "name": r.name, "country": r.country, "population": r.population,
            "demand_tok_s": demand, "served_tok_s": served,
            "mean_rtt_ms": weighted_rtt / served if served > 0 else float("nan"),
            "max_rtt_ms": max((a.rtt_ms for a in lines), default=float("nan")),
            "served_by": ";".join(sorted({site_names[a.site] for a in lines})),
            "geometry": Point(r.lon, r.lat),
        })
    return gpd.GeoDataFrame(rows, geometry="geometry", crs=CRS)


def assignment_layer(plan: Plan, scenario: Scenario) -> gpd.GeoDataFrame:
    """One line per (region, workload, site) with a positive share, from region to site."""
    region_xy = {r.id: (r.lon, r.lat) for r in scenario.regions}
    site_xy = {s.id: (s.lon, s.lat) for s in plan.sites}
    site_names = {s.id: s.name for s in plan.sites}
    rows = [
        {
            "region": a.region, "region_name": a.region_name, "workload": a.workload, "site": a.site,
            "site_name": site_names[a.site], "share": a.share, "served_tok_s": a.served_tok_s,
            "rtt_ms": a.rtt_ms, "rtt_budget_ms": a.rtt_budget_ms,
            "geometry": LineString([region_xy[a.region], site_xy[a.site]]),
        }
        for a in plan.assignments
    ]
    columns = ["region", "region_name", "workload", "site", "site_name", "share", "served_tok_s", "rtt_ms", "rtt_budget_ms", "geometry"]
    return gpd.GeoDataFrame(pd.DataFrame(rows, columns=columns), geometry="geometry", crs=CRS)


def plan_extent(layers: PlanLayers) -> tuple[float, float, float, float] | None:
    """(lon_min, lat_min, lon_max, lat_max) of the open sites and served regions with a
    10 % margin, or None when the plan spans more than a regional window (draw the world)."""
    open_sites = layers.sites[layers.sites["open"]]
    served = layers.regions[layers.regions["served_tok_s"] > 0]
    points = list(open_sites.geometry) + list(served.geometry)
    if not points:
        points = list(layers.sites.geometry)
    lons = np.array([p.x for p in points])
    lats = np.array([p.y for p in points])
    lon_span, lat_span = np.ptp(lons), np.ptp(lats)
    if lon_span > REGIONAL_MAX_SPAN_DEG[0] or lat_span > REGIONAL_MAX_SPAN_DEG[1]:
        return None
    pad_lon, pad_lat = max(2.0, 0.1 * lon_span), max(1.5, 0.1 * lat_span)
    return (
        max(-180.0, lons.min() - pad_lon), max(-89.0, lats.min() - pad_lat),
        min(180.0, lons.max() + pad_lon), min(89.0, lats.max() + pad_lat),
    )
