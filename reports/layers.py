"""A plan folder as geodata: sites, regions and assignment lines in EPSG:4326.

Every report (exports, maps, the executive report) starts from `load_plan_layers`, so
the three layers are built in one place and every output shows the same numbers. Only
the plan folder is read: plan.json and the resolved scenario in inputs/.

Sites carry, beside what the plan decided, the inputs that drove the decision (prices,
grid carbon, colocation, power and floor limits, fixed cost, climate factor) as they are
in inputs/sites.csv; regions carry demand, service and RTT per workload class; assignment
lines are geodesics on WGS84 (about one vertex per 100 km), split at the antimeridian into
a MultiLineString so that no segment crosses the whole map. `FIELDS` gives the unit and
meaning of every column (the GeoPackage stores it as its `dcplace_fields` table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
from pyproj import Geod
from shapely.geometry import LineString, MultiLineString, Point
from shapely.geometry.base import BaseGeometry

from dcplace.models import ScenarioError, load_scenario
from dcplace.models.geo import great_circle_km
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.models.records import Scenario
from dcplace.models.provenance import IMPUTED, Provenance, basis, input_provenance

CRS = "EPSG:4326"
ROLES = ("training", "inference", "mixed", "idle", "closed")
REGIONAL_MAX_SPAN_DEG = (100.0, 60.0)  # lon, lat spans under which a plan is drawn as a region

GEOD = Geod(ellps="WGS84")
LINE_STEP_KM = 100.0  # about one vertex of an assignment line per 100 km ...
LINE_MIN_POINTS = 8  # ... and never fewer than 8, so a short line is still a curve where it bends

# The site inputs (inputs/sites.csv, in dcplace units) that drive where the plan builds.
SITE_INPUTS = ("power_price_usd_per_mwh", "grid_carbon_g_per_kwh", "colocation_usd_per_kw_month", "power_limit_kw",
               "floor_racks", "fixed_cost_usd_per_year", "pue_climate_factor")


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
    provenance: Provenance = Provenance({}, "")  # of the input cells (models.provenance)

    display: bool = False  # names already as outputs show them (for_display)

    def layers(self) -> dict[str, gpd.GeoDataFrame]:
        """The layers `dcplace export` writes: the sites carry their row of the outage table (`outage_fields`)."""
        return {"sites": self.sites_with_outages, "regions": self.regions, "assignments": self.assignments}

    @cached_property
    def sites_with_outages(self) -> gpd.GeoDataFrame:
        return outage_fields(self.sites, self.outages, _classes(self.scenario))

    def for_display(self) -> "PlanLayers":
        """These layers with every name from the inputs (sites, regions, jobs, cloud regions,
        catalog entries, the scenario) as reports, maps and terminal show it
        (reports.style.display_name: cut to 80 characters, control characters as escapes).
        The report and the maps draw these; exports keep the exact names. Made once per plan
        read, so the outputs drawn from one read share it (and its outage table)."""
        return self if self.display else self._display_copy

    @cached_property
    def _display_copy(self) -> "PlanLayers":
        from dcplace.reports.style import display_name

        def named(records):
            return [r.model_copy(update={"name": display_name(r.name)}) for r in records]

        def joined(text):  # a ';'-joined list of names (training_jobs, served_by)
            return ";".join(display_name(part) for part in text.split(";")) if isinstance(text, str) and text else text

        plan, scenario, catalog = self.plan, self.scenario, self.scenario.catalog
        plan = plan.model_copy(update={
            "scenario": display_name(plan.scenario), "sites": named(plan.sites), "jobs": named(plan.jobs),
            "assignments": [a.model_copy(update={"region_name": display_name(a.region_name)}) for a in plan.assignments],
            "rent_assignments": [a.model_copy(update={"region_name": display_name(a.region_name)}) for a in plan.rent_assignments]})
        catalog = catalog.model_copy(update={k: tuple(named(getattr(catalog, k))) for k in ("chips", "cooling", "fabrics", "workloads")})
        scenario = scenario.model_copy(update={
            "name": display_name(scenario.name), "sites": tuple(named(scenario.sites)), "regions": tuple(named(scenario.regions)),
            "jobs": tuple(named(scenario.jobs)), "cloud_regions": tuple(named(scenario.cloud_regions)), "catalog": catalog})
        frames = {}
        for key, columns in (("sites", ("name", "training_jobs")), ("regions", ("name", "served_by")),
                             ("assignments", ("region_name", "site_name"))):
            frame = getattr(self, key).copy()
            for column in columns:
                if column in frame:
                    frame[column] = frame[column].map(display_name if column.endswith("name") else joined)
            frames[key] = frame
        return PlanLayers(self.folder, plan, scenario, frames["sites"], frames["regions"], frames["assignments"], self.provenance,
                          display=True)

    @cached_property
    def outages(self):
        """What losing each open site costs (optimizer.studies.outages.OutageTable), computed once
        for the maps and the report's section that all show it (on the display copy: its names
        are the ones they show, and both copies share it)."""
        if not self.display:
            return self.for_display().outages
        from dcplace.optimizer.studies.outages import outages_of  # a re-route LP per open site: only when asked

        return outages_of(self.plan, self.scenario, str(self.folder))


def load_plan_layers(folder: str | Path) -> PlanLayers:
    """Read a plan folder written by `dcplace solve` into `PlanLayers`.

    Raises NotAPlanFolder with what is wrong and what would fix it.
    """
    folder = Path(folder)
    if (folder / "schedule.json").is_file() and (folder / "periods").is_dir():
        years = sorted(p.name for p in (folder / "periods").iterdir() if p.name.isdigit())
        raise NotAPlanFolder(
            f"{folder}: a multi-period schedule folder, whose plans are one per period ({', '.join(years)}). "
            f"Fix: give one period's folder, e.g. {folder / 'periods' / (years[0] if years else 'YEAR')}; "
            f"`dcplace report {folder}` writes the schedule's own report (docs/periods.md)."
        )
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
    provenance = input_provenance(scenario, folder)
    return PlanLayers(folder, plan, scenario, site_layer(plan, scenario, provenance, robustness_labels(folder, plan)),
                      region_layer(plan, scenario), assignment_layer(plan, scenario), provenance)


def robustness_labels(folder: Path, plan: Plan) -> dict[str, str] | None:
    """Site id -> its robustness label from this plan's saved `dcplace why robustness` study
    (closed sites: empty), or None when no study explains this plan. Read here, at the one
    place every output's site table is made, so the export's sites.csv, the GeoPackage and the
    maps all carry it; the plan folder's own sites.csv, written by the solve, is left as it is."""
    from dcplace.optimizer.studies.explain import saved_analysis  # reports read studies, never the other way

    doc = saved_analysis(folder, "robustness", "robustness.json", plan)
    if not doc:
        return None
    return {x["id"]: x["label"] for x in doc.get("labels", []) if x.get("kind") == "site"}


def plan_layers(plan: Plan, scenario: Scenario) -> dict[str, gpd.GeoDataFrame]:
    """A plan in memory as GeoDataFrames in EPSG:4326, with no folder: `sites` (points, with the
    site inputs that drove the decision), `regions` (points: demand, service and RTT per class)
    and `assignments` (great-circle lines), exactly the layers `dcplace export` writes.
    `scenario` is the one the plan was solved from (`dcplace.solve(scenario)`); for a plan
    folder, `load_plan_layers(folder).layers()` gives the same from the folder's own inputs."""
    from dcplace.optimizer.studies.outages import outages_of  # a re-route LP per open site

    provenance = input_provenance(scenario, None)
    table = outages_of(plan, scenario) if plan.solve.status in HAS_PLAN else None
    return {"sites": outage_fields(site_layer(plan, scenario, provenance), table, _classes(scenario)),
            "regions": region_layer(plan, scenario), "assignments": assignment_layer(plan, scenario)}


def robustness_legend(sites: gpd.GeoDataFrame, limit: int = 4) -> list[str]:
    """The maps' legend lines on robustness (both maps say the same): how many open sites are
    robust and which depend on the inputs; [] without a `robustness` column."""
    if "robustness" not in sites:
        return []
    opened = sites[sites["open"] & (sites["robustness"] != "")]
    shaky = list(opened.loc[opened["robustness"] != "robust", "name"])
    lines = [f"{len(opened) - len(shaky)} of {len(opened)} open sites robust"]
    if shaky:
        lines.append("fill-dependent: " + ", ".join(shaky[:limit]) + (f" and {len(shaky) - limit} more" if len(shaky) > limit else ""))
    return lines


def site_layer(plan: Plan, scenario: Scenario | None = None, provenance: Provenance | None = None,
               robustness: dict[str, str] | None = None) -> gpd.GeoDataFrame:
    """One point per candidate site: role, racks, GPUs, MW, cost, chips, cooling, fabric,
    tok/s served per class and (given the scenario) the site inputs of `SITE_INPUTS`, each
    with its provenance kind in `<input>_basis` and the filled-in ones listed in `imputed_inputs`;
    given `robustness` (robustness_labels), a `robustness` column."""
    provenance = provenance or Provenance({}, "")
    classes = _classes(scenario) if scenario is not None else sorted({c for s in plan.sites for c in s.served_tok_s})
    inputs = {s.id: s for s in scenario.sites} if scenario is not None else {}
    rows = []
    for s in plan.sites:
        chips = sorted({line.chip for line in s.racks})
        row = {
            "id": s.id, "name": s.name, "country": s.country, "role": s.role, "open": s.open,
            "racks": s.racks_total, "gpus": s.gpus, "chips": ";".join(chips), "cooling": ";".join(s.zones),
            "fabrics": ";".join(s.fabrics), "it_mw": s.it_kw / 1000, "facility_mw": s.facility_kw / 1000,
            "power_limit_mw": s.power_limit_kw / 1000,
            "inference_tok_s": sum(s.served_tok_s.values()),
            "training_jobs": ";".join(j.name for j in plan.jobs if j.site == s.id),
            "emissions_t_per_year": s.emissions_t_per_year, "upfront_capex_usd": s.upfront_capex_usd,
            "cost_usd_per_year": s.total_cost_usd_per_year,
        }
        for c in classes:
            row[f"served_{c}_tok_s"] = float(s.served_tok_s.get(c, 0.0))
        if scenario is not None:
            given = inputs[s.id]
            kinds = {column: basis(provenance, "sites", s.id, column) for column in SITE_INPUTS}
            for column in SITE_INPUTS:
                row[column] = getattr(given, column)
                row[f"{column}_basis"] = kinds[column]
            row["imputed_inputs"] = ";".join(c for c in SITE_INPUTS if kinds[c] in IMPUTED)
        if robustness is not None:
            row["robustness"] = robustness.get(s.id, "")
        row["geometry"] = Point(s.lon, s.lat)
        rows.append(row)
    return gpd.GeoDataFrame(rows, geometry="geometry", crs=CRS)


# What `outage_policy` says of each site: the loss keeps the plan's N-1 policy (survive_site_loss) or not, the
# scenario states none, or the site is not open (a closed site's loss costs nothing: its figures are 0).
OUTAGE_POLICY = {True: "covered", False: "not covered", None: "no policy", "closed": "not open"}


def outage_fields(sites: gpd.GeoDataFrame, table, classes: list[str]) -> gpd.GeoDataFrame:
    """`sites` with each site's row of the outage table (optimizer.studies.outages.OutageTable, or None
    for a plan with no sites to lose) as `outage_*` fields: what losing the site alone puts at risk,
    the same figures as `dcplace outages`, for N-1 plans and ordinary plans alike."""
    by_site = {o.site: o for o in table.outages} if table is not None else {}
    peak = table.served_tok_s if table is not None else 0.0
    rows = []
    for site_id in sites["id"]:
        o = by_site.get(site_id)
        at_risk = o.at_risk_total_tok_s if o else 0.0
        row = {
            "outage_served_tok_s": o.lost_total_tok_s if o else 0.0,
            "outage_reserved_tok_s": sum(o.reserved_tok_s.values()) if o else 0.0,
            "outage_at_risk_tok_s": at_risk,
            "outage_at_risk_share_of_peak": at_risk / peak if peak > 0 else 0.0,
        }
        for c in classes:
            row[f"outage_at_risk_{c}_tok_s"] = float(o.at_risk_tok_s.get(c, 0.0)) if o else 0.0
        fallback = o.fallback_rtt_ms if o else None
        row.update({
            "outage_regions_at_risk": len(o.regions_at_risk()) if o else 0,
            "outage_fallback_rtt_ms": float("nan") if fallback is None else fallback,
            "outage_jobs_stalled": len(o.jobs) if o else 0,
            "outage_training_job_days": o.training_days_at_risk if o else 0.0,
            "outage_policy": OUTAGE_POLICY[o.meets_policy if o else "closed"],
        })
        rows.append(row)
    fields = pd.DataFrame(rows, index=sites.index, columns=list(rows[0]) if rows else None)
    return gpd.GeoDataFrame(pd.concat([sites.drop(columns=sites.geometry.name), fields, sites[[sites.geometry.name]]], axis=1),
                            geometry=sites.geometry.name, crs=sites.crs)


def _classes(scenario: Scenario) -> list[str]:
    """Workload classes in catalog order, then any other class a region names."""
    classes = [w.id for w in scenario.catalog.workloads]
    for r in scenario.regions:
        classes += [c for c in r.demand_tok_s if c not in classes]
    return classes


def region_layer(plan: Plan, scenario: Scenario) -> gpd.GeoDataFrame:
    """One point per demand region: demand, who serves it, demand-weighted RTT, in total and
    per workload class (`demand_<class>_tok_s`, `served_<class>_tok_s`, `mean_rtt_<class>_ms`,
    `rtt_budget_<class>_ms`; a class the region has no demand for has 0 tok/s and no RTT)."""
    by_region: dict[str, list] = {}
    for a in [*plan.assignments, *plan.rent_assignments]:  # the clock: demand served from cloud regions counts as served
        by_region.setdefault(a.region, []).append(a)
    site_names = {q.id: q.name for q in scenario.cloud_regions} | {s.id: s.name for s in plan.sites}
    classes = _classes(scenario)
    rows = []
    for r in scenario.regions:
        lines = by_region.get(r.id, [])
        served = sum(a.served_tok_s for a in lines)
        demand = sum(r.demand_tok_s.values())
        row = {
            "id": r.id, "name": r.name, "country": r.country, "population": r.population,
            "demand_tok_s": demand, "served_tok_s": served,
            "mean_rtt_ms": _weighted_rtt(lines),
            "max_rtt_ms": max((a.rtt_ms for a in lines), default=float("nan")),
            "served_by": ";".join(sorted({site_names[a.site] for a in lines})),
        }
        for c in classes:
            of_class = [a for a in lines if a.workload == c]
            row[f"demand_{c}_tok_s"] = float(r.demand_tok_s.get(c, 0.0))
            row[f"served_{c}_tok_s"] = float(sum(a.served_tok_s for a in of_class))
            row[f"mean_rtt_{c}_ms"] = _weighted_rtt(of_class)
            row[f"rtt_budget_{c}_ms"] = float(r.rtt_budget_ms.get(c, float("nan")))
        row["geometry"] = Point(r.lon, r.lat)
        rows.append(row)
    return gpd.GeoDataFrame(rows, geometry="geometry", crs=CRS)


def _weighted_rtt(lines: list) -> float:
    served = sum(a.served_tok_s for a in lines)
    return sum(a.served_tok_s * a.rtt_ms for a in lines) / served if served > 0 else float("nan")


def assignment_layer(plan: Plan, scenario: Scenario) -> gpd.GeoDataFrame:
    """One line per (region, workload, site) with a positive share, from region to site:
    the WGS84 geodesic (`great_circle`), drawn on the ellipsoid; `distance_km` is the model's great-circle
    distance (models.geo.great_circle_km, on the sphere the latency is computed from: rtt_ms follows from it
    without a backbone), not the ellipsoid length of the drawn line, which differs by under 0.6 %."""
    region_xy = {r.id: (r.lon, r.lat) for r in scenario.regions}
    site_xy = {s.id: (s.lon, s.lat) for s in plan.sites}
    site_names = {s.id: s.name for s in plan.sites}
    rows = []
    for a in plan.assignments:
        (lon1, lat1), (lon2, lat2) = region_xy[a.region], site_xy[a.site]
        rows.append({
            "region": a.region, "region_name": a.region_name, "workload": a.workload, "site": a.site,
            "site_name": site_names[a.site], "share": a.share, "served_tok_s": a.served_tok_s,
            "rtt_ms": a.rtt_ms, "rtt_budget_ms": a.rtt_budget_ms,
            "distance_km": float(great_circle_km(lat1, lon1, lat2, lon2)),
            "geometry": great_circle(lon1, lat1, lon2, lat2),
        })
    columns = ["region", "region_name", "workload", "site", "site_name", "share", "served_tok_s", "rtt_ms", "rtt_budget_ms",
               "distance_km", "geometry"]
    return gpd.GeoDataFrame(pd.DataFrame(rows, columns=columns), geometry="geometry", crs=CRS)


def zero_length(lines: gpd.GeoDataFrame) -> pd.Series:
    """Assignment lines from a region to a site at the same place (distance 0: a metro area served
    by its own market). Their two-point line has no length, which GIS tools call invalid; the
    exports write these rows with an empty geometry (the row, its share and tok/s are kept)."""
    return lines["distance_km"].eq(0) & lines.geometry.map(lambda g: g is not None and g.length == 0)


def great_circle(lon1: float, lat1: float, lon2: float, lat2: float) -> LineString | MultiLineString:
    """The WGS84 geodesic from (lon1, lat1) to (lon2, lat2): a LineString with a vertex about
    every `LINE_STEP_KM` (at least `LINE_MIN_POINTS`), starting and ending exactly at the two
    points; a MultiLineString, split at ±180° (both parts end on the antimeridian at the same
    latitude), when it crosses the antimeridian. Every part stays within [-180, 180]."""
    distance_km = GEOD.inv(lon1, lat1, lon2, lat2)[2] / 1000
    if distance_km == 0:
        return LineString([(lon1, lat1), (lon2, lat2)])
    n = max(LINE_MIN_POINTS, math.ceil(distance_km / LINE_STEP_KM) + 1)
    inner = GEOD.npts(lon1, lat1, lon2, lat2, n - 2)
    lons = [lon1] + [p[0] for p in inner] + [lon2]
    lats = [lat1] + [p[1] for p in inner] + [lat2]
    parts = _split_at_antimeridian(lons, lats)
    return LineString(parts[0]) if len(parts) == 1 else MultiLineString(parts)


def _split_at_antimeridian(lons: list[float], lats: list[float]) -> list[list[tuple[float, float]]]:
    """Cut a polyline wherever a step jumps more than 180° of longitude (it crosses ±180°):
    each cut adds the crossing point, by linear interpolation in unwrapped longitude, as the
    end of one part (at +180 or -180) and the start of the next (at the other)."""
    parts = [[(lons[0], lats[0])]]
    for i in range(1, len(lons)):
        lon_a, lat_a, lon_b, lat_b = lons[i - 1], lats[i - 1], lons[i], lats[i]
        step = lon_b - lon_a
        if abs(step) > 180:
            east = step < 0  # e.g. 179 -> -179: heading east across +180
            unwrapped_b = lon_b + 360 if east else lon_b - 360
            edge = 180.0 if east else -180.0
            t = (edge - lon_a) / (unwrapped_b - lon_a)
            lat_x = lat_a + t * (lat_b - lat_a)
            if (lon_a, lat_a) != (edge, lat_x):
                parts[-1].append((edge, lat_x))
            parts.append([] if (lon_b, lat_b) == (-edge, lat_x) else [(-edge, lat_x)])
        parts[-1].append((lon_b, lat_b))
    return [part for part in parts if len(part) >= 2]


def line_parts(geometry: BaseGeometry) -> list[tuple[list[float], list[float]]]:
    """(lons, lats) of each part of an assignment line, for drawing: one for a LineString,
    one per side of the antimeridian for a MultiLineString."""
    lines = geometry.geoms if isinstance(geometry, MultiLineString) else [geometry]
    return [([x for x, _ in line.coords], [y for _, y in line.coords]) for line in lines]


def line_ends(geometry: BaseGeometry) -> tuple[tuple[float, float], tuple[float, float]]:
    """The region end and the site end of an assignment line."""
    lines = list(geometry.geoms) if isinstance(geometry, MultiLineString) else [geometry]
    return tuple(lines[0].coords[0]), tuple(lines[-1].coords[-1])


# Unit and meaning of every column; per-class columns match a pattern (`<class>` = a workload id).
FIELDS: dict[str, dict[str, tuple[str, str]]] = {
    "sites": {
        "id": ("", "site id (inputs/sites.csv)"), "name": ("", "site name"), "country": ("", "ISO 3166-1 alpha-2"),
        "role": ("", "training, inference, mixed, idle or closed"), "open": ("", "the plan opens the site"),
        "racks": ("racks", "racks installed"), "gpus": ("GPUs", "physical GPUs installed"),
        "chips": ("", "chip ids, ';'-separated"), "cooling": ("", "cooling zones built, ';'-separated"),
        "fabrics": ("", "training fabrics, ';'-separated"), "it_mw": ("MW", "IT power"),
        "facility_mw": ("MW", "facility power (IT x climate-adjusted PUE)"), "power_limit_mw": ("MW", "facility power available"),
        "inference_tok_s": ("tok/s", "peak inference served, all classes"),
        "served_<class>_tok_s": ("tok/s", "peak inference of the class served"),
        "training_jobs": ("", "training jobs placed here, ';'-separated"),
        "emissions_t_per_year": ("t CO2/yr", "emissions of the energy used"),
        "upfront_capex_usd": ("USD", "upfront capital expenditure (chips, cooling, fabric)"),
        "cost_usd_per_year": ("USD/yr", "annualized total cost of the site"),
        "power_price_usd_per_mwh": ("USD/MWh", "input: energy price"),
        "grid_carbon_g_per_kwh": ("g CO2/kWh", "input: grid carbon intensity"),
        "colocation_usd_per_kw_month": ("USD/kW/month", "input: colocation or build cost per kW of IT"),
        "power_limit_kw": ("kW", "input: facility power available"),
        "floor_racks": ("racks", "input: floor space in rack positions"),
        "fixed_cost_usd_per_year": ("USD/yr", "input: annual fixed cost of opening the site"),
        "pue_climate_factor": ("", "input: multiplier on the cooling overhead (PUE - 1)"),
        "<input>_basis": ("", "provenance kind of the input: source, derived, rule, assumption, or 'as given' (no record: "
                               "changed by an override or given by the user)"),
        "imputed_inputs": ("", "the inputs filled in by a rule or an assumption, ';'-separated"),
        "outage_served_tok_s": ("tok/s", "if this site alone is lost: the peak inference it serves, all classes"),
        "outage_reserved_tok_s": ("tok/s", "if lost: what the other sites' spare capacity re-serves within the failover budgets"),
        "outage_at_risk_tok_s": ("tok/s", "if lost: what nothing re-serves (at risk), all classes"),
        "outage_at_risk_share_of_peak": ("fraction", "if lost: tok/s at risk over the plan's peak inference served"),
        "outage_at_risk_<class>_tok_s": ("tok/s", "if lost: tok/s of the class at risk"),
        "outage_regions_at_risk": ("regions", "if lost: (region, class) pairs left with demand at risk"),
        "outage_fallback_rtt_ms": ("ms", "if lost: round trip of what is re-served, weighted by tok/s (empty: nothing is)"),
        "outage_jobs_stalled": ("jobs", "if lost: training jobs that stall"),
        "outage_training_job_days": ("job-days", "if lost: training job-days at risk, summed over the jobs that stall"),
        "outage_policy": ("", "covered: the loss keeps the plan's N-1 policy (policies.survive_site_loss); not covered: it "
                              "breaks it; no policy: the scenario asks no class to survive; not open: the site is closed"),
        "robustness": ("", "with `dcplace why robustness` run on the plan: 'robust' if every sampled world keeps the site open "
                           "in its role, else 'depends on <input groups>' (docs/why.md); empty for a closed site"),
    },
    "regions": {
        "id": ("", "region id (inputs/regions.csv)"), "name": ("", "region name"), "country": ("", "ISO 3166-1 alpha-2"),
        "population": ("people", "population"), "demand_tok_s": ("tok/s", "peak inference demand, all classes"),
        "served_tok_s": ("tok/s", "peak inference served, all classes"),
        "mean_rtt_ms": ("ms", "round-trip time weighted by tok/s served"), "max_rtt_ms": ("ms", "largest round-trip time of any assignment"),
        "served_by": ("", "names of the serving sites, ';'-separated"),
        "demand_<class>_tok_s": ("tok/s", "input: peak demand of the class"),
        "served_<class>_tok_s": ("tok/s", "peak demand of the class served"),
        "mean_rtt_<class>_ms": ("ms", "round-trip time of the class weighted by tok/s served"),
        "rtt_budget_<class>_ms": ("ms", "input: round-trip budget of the class"),
    },
    "assignments": {
        "region": ("", "region id"), "region_name": ("", "region name"), "workload": ("", "workload class id"),
        "site": ("", "site id"), "site_name": ("", "site name"), "share": ("fraction", "share of the region's class demand"),
        "served_tok_s": ("tok/s", "peak tok/s served over this line"), "rtt_ms": ("ms", "round-trip time"),
        "rtt_budget_ms": ("ms", "round-trip budget of the class"),
        "distance_km": ("km", "great-circle distance on the model's sphere (the one its latency uses)"),
    },
}


def field_rows(layers: PlanLayers) -> list[tuple[str, str, str, str]]:
    """(layer, column, unit, description) for every attribute column of the three layers."""
    rows = []
    for name, frame in layers.layers().items():
        known = FIELDS[name]
        for column in frame.columns:
            if column == frame.geometry.name:
                continue
            unit, text = known.get(column) or next(
                (v for k, v in known.items() if "<" in k and _matches(k, column)), ("", ""))
            rows.append((name, column, unit, text))
    return rows


def _matches(pattern: str, column: str) -> bool:
    """`served_<class>_tok_s` matches `served_chat_tok_s`; `<input>_basis` matches `floor_racks_basis`."""
    head, tail = pattern.split(">", 1)
    head = head.split("<", 1)[0]
    return column.startswith(head) and column.endswith(tail) and len(column) > len(head) + len(tail)


def window_outline(window: tuple[float, float, float, float], points: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """(lons, lats) along every edge of a lon/lat window: in an azimuthal projection a wide
    window's edges bulge out between its corners, so its projected frame needs them all."""
    lon_min, lat_min, lon_max, lat_max = window
    along_lon, along_lat = np.linspace(lon_min, lon_max, points), np.linspace(lat_min, lat_max, points)
    lons = np.concatenate([along_lon, along_lon, np.full(points, lon_min), np.full(points, lon_max)])
    lats = np.concatenate([np.full(points, lat_min), np.full(points, lat_max), along_lat, along_lat])
    return lons, lats


def plan_extent(layers: PlanLayers) -> tuple[float, float, float, float] | None:
    """(lon_min, lat_min, lon_max, lat_max) of the open sites, served regions and cloud regions
    with rented capacity, with a 10 % margin, or None when the plan spans more than a regional window (draw the world)."""
    open_sites = layers.sites[layers.sites["open"]]
    served = layers.regions[layers.regions["served_tok_s"] > 0]
    points = list(open_sites.geometry) + list(served.geometry)
    rented = {ln.cloud for ln in layers.plan.rentals} | {a.site for a in layers.plan.rent_assignments}  # the clock: cloud regions used
    points += [Point(q.lon, q.lat) for q in layers.scenario.cloud_regions if q.id in rented]
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
