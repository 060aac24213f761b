"""Warnings about a loaded scenario: things that are allowed but probably a mistake.

`scenario_warnings(scenario)` lists them as InputProblems (file, row, field, message,
fix); they never block solving, and `dcplace validate` / `dcplace solve` print them.

- a site or region that lies outside its own country (Natural Earth 1:110m polygons,
  data/geo/ne_110m_countries.gpkg; 50 km tolerance for the coarse borders, 300 km for a
  point at sea, as small islands are missing from the polygons; countries
  missing from the layer, such as small island states, are skipped), saying "did you
  swap lat and lon?" when the swapped point is inside the country;
- a site whose power limit is below what the smallest rack it could hold needs (kW per
  rack x climate-adjusted PUE over the coolings it allows and the rack configurations
  those coolings can hold): the site can never host anything;
- a site whose power cannot hold one rack of the densest configuration it allows, or that
  is larger than any campus in operation (2 GW): a unit slip, "looks like kW".
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import numpy as np

from dcplace.models.errors import InputProblem
from dcplace.models.geo import great_circle_km
from dcplace.models.interactivity import interactivity_warnings
from dcplace.models.records import Scenario

TOLERANCE_KM = 50.0
LARGEST_CAMPUS_KW = 2e6  # 2 GW: above every campus in operation (models.records bounds a site at 10 GW)
SEA_TOLERANCE_KM = 300.0  # a point at sea: 1:110m drops small islands (Batam is 110 km from Indonesia's polygons)

# Natural Earth leaves ISO_A2 at -99 for these; ADM0_A3 says who they are (de jure).
_ADM0_TO_ISO2 = {"NOR": "NO", "FRA": "FR", "TWN": "TW", "KOS": "XK", "CYN": "CY", "SOL": "SO"}


def countries_path() -> Path:
    return Path(str(resources.files("dcplace.data") / "geo" / "ne_110m_countries.gpkg"))


@functools.lru_cache(maxsize=1)
def country_layer():
    """Country polygons by ISO 3166-1 alpha-2 code (one MultiPolygon per code), with names. Cached."""
    import geopandas as gpd

    layer = gpd.read_file(countries_path())
    iso = layer["ISO_A2"].where(layer["ISO_A2"].str.len() == 2, layer["ADM0_A3"].map(_ADM0_TO_ISO2))
    iso = iso.where(iso != "CN-TW", "TW")
    layer = layer.assign(code=iso).dropna(subset=["code"])
    names = layer.groupby("code")["ADMIN"].first()
    merged = layer[["code", "geometry"]].dissolve(by="code")
    merged["name"] = names
    return merged


def _km_outside(lat: np.ndarray, lon: np.ndarray, codes: list[str]) -> np.ndarray:
    """Distance in km from each point to its country's polygon (0 inside; NaN if the country is not in the layer)."""
    import shapely

    layer = country_layer()
    out = np.full(len(codes), np.nan)
    known = np.array([c in layer.index for c in codes], dtype=bool)
    if not known.any():
        return out
    idx = np.flatnonzero(known)
    geoms = layer.geometry.loc[[codes[i] for i in idx]].values
    points = shapely.points(lon[idx], lat[idx])
    inside = shapely.contains(geoms, points)
    out[idx[inside]] = 0.0
    far = idx[~inside]
    if len(far):
        lines = shapely.shortest_line(points[~inside], geoms[~inside])  # from the point to the polygon
        ends = shapely.get_coordinates(shapely.get_point(lines, 1))
        out[far] = great_circle_km(lat[far], lon[far], ends[:, 1], ends[:, 0])
    return out


def _country_at(lat: float, lon: float) -> str | None:
    import shapely

    layer = country_layer()
    hits = layer.index[shapely.contains(layer.geometry.values, shapely.points(lon, lat))]
    return f"{layer.loc[hits[0], 'name']} ({hits[0]})" if len(hits) else None


def first_row(file: str) -> int:
    """Row number of a table's first record: 2 in a CSV (line 1 is the header) and in an Excel sheet
    whose header is its row 1 (book.xlsx, book.xlsx#Sheet), else 1."""
    name = file.lower()
    return 2 if name.endswith((".csv", ".xlsx", ".xlsm")) or ".xlsx#" in name or ".xlsm#" in name else 1


def record_row(scenario: Scenario, table: str, position: int) -> int | None:
    """File row of the record at `position` of a scenario table (CSV: header is row 1; geo file:
    feature number); None for a table given in memory (no file)."""
    name = scenario.files.get(table, "")
    return first_row(name) + position if name else None


def country_warnings(scenario: Scenario) -> list[InputProblem]:
    """Sites, regions and cloud regions that lie outside their own country (beyond TOLERANCE_KM):
    a cloud region's country decides where a job restricted to some countries may rent."""
    out: list[InputProblem] = []
    for table, noun in (("sites", "site"), ("regions", "region"), ("cloud_regions", "cloud region")):
        records = getattr(scenario, table)
        if not records:
            continue
        file = scenario.files.get(table) or table
        lat = np.array([r.lat for r in records], dtype=float)
        lon = np.array([r.lon for r in records], dtype=float)
        codes = [r.country.upper() for r in records]
        km = _km_outside(lat, lon, codes)
        bad = np.flatnonzero(km > TOLERANCE_KM)
        if not len(bad):
            continue
        swappable = bad[np.abs(lon[bad]) <= 90]
        swapped_km = np.full(len(records), np.nan)
        if len(swappable):
            swapped_km[swappable] = _km_outside(lon[swappable], lat[swappable], [codes[i] for i in swappable])
        layer = country_layer()
        for i in bad:
            r = records[i]
            where = _country_at(lat[i], lon[i])
            if where is None and km[i] <= SEA_TOLERANCE_KM:
                continue
            lies = f"lies in {where}" if where else "lies in no country (at sea)"
            message = (f"{noun} '{r.id}' at lat {r.lat:g}, lon {r.lon:g} {lies}, {km[i]:,.0f} km outside its country "
                       f"{layer.loc[codes[i], 'name']} ({codes[i]}).")
            if swapped_km[i] <= TOLERANCE_KM:
                fix = f"did you swap lat and lon? lat {r.lon:g}, lon {r.lat:g} is in {codes[i]}."
            else:
                fix = "check lat and lon (decimal degrees, lat first, west and south negative) and the country code."
            out.append(InputProblem(file, first_row(file) + int(i), "lat/lon", message, fix))
    return out


def power_warnings(scenario: Scenario) -> list[InputProblem]:
    """Sites whose power limit holds no rack at all (facility kW of the smallest rack they could hold)."""
    out: list[InputProblem] = []
    cooling = {c.id: c for c in scenario.catalog.cooling}
    file = scenario.files.get("sites") or "sites"
    for i, site in enumerate(scenario.sites):
        options = [
            (rc.kw_per_rack * site.pue(cooling[cid]), rc, cooling[cid])
            for cid in site.cooling_allowed if cid in cooling
            for rc in scenario.catalog.rack_configs if rc.kw_per_rack <= cooling[cid].max_kw_per_rack
        ]
        row = first_row(file) + i
        if not options:
            out.append(InputProblem(file, row, "cooling_allowed", f"site '{site.id}': no rack configuration fits the coolings it allows "
                                    f"({', '.join(site.cooling_allowed)}); the site can hold no rack.",
                                    "allow a cooling type that can hold a rack configuration of the catalog."))
            continue
        need, rc, c = min(options, key=lambda o: o[0])
        densest, big, big_c = max(options, key=lambda o: o[0])
        column = "power_limit_kw"  # or power_limit_mw, converted at load: the messages give both units
        if site.power_limit_kw < need - 1e-9:
            out.append(InputProblem(
                file, row, column,
                f"site '{site.id}' has {site.power_limit_kw:,.6g} kW, less than the smallest rack it could hold needs: "
                f"{need:,.6g} kW of facility power (rack config '{rc.id}', {rc.kw_per_rack:,.6g} kW per rack, in '{c.id}' cooling at PUE "
                f"{site.pue(c):.3g}); the site can never host anything.",
                "raise power_limit_kw (a value meant in MW belongs in a power_limit_mw column), or drop the site."))
        elif site.power_limit_kw < densest - 1e-9:
            # a datacenter that cannot power one rack of the configurations it allows: almost always MW
            # written in a kW column, or kW given as MW / 1000 (the magnitude checks of models.records)
            out.append(InputProblem(
                file, row, column,
                f"site '{site.id}' has {site.power_limit_kw:,.6g} kW ({site.power_limit_kw / 1000:,.6g} MW), less than one rack of '{big.id}' needs ({densest:,.6g} kW of "
                f"facility power at PUE {site.pue(big_c):.3g}); a datacenter this small looks like a unit slip (MW in a kW column?).",
                "give the site's power in kW in power_limit_kw or in MW in power_limit_mw (e.g. power_limit_mw = 20 for 20 MW)."))
        elif site.power_limit_kw > LARGEST_CAMPUS_KW:
            out.append(InputProblem(
                file, row, column,
                f"site '{site.id}' has {site.power_limit_kw / 1000:,.6g} MW ({site.power_limit_kw / 1e6:,.3g} GW), more than any "
                f"datacenter campus in operation (about {LARGEST_CAMPUS_KW / 1e6:g} GW at most); it looks like kW.",
                "if the figure is in kW, give it in power_limit_kw (or divide it by 1000 in power_limit_mw); if the campus is real, "
                "ignore this warning."))
    return out



def rental_warnings(scenario: Scenario) -> list[InputProblem]:
    """Cloud regions on a fabric tier above every catalog fabric (it then meets any job's tier), and
    those whose reserved GPU-hour costs more than the on-demand one: reserving buys a discount for
    paying every hour, so the two prices are probably in each other's column."""
    file = scenario.files.get("cloud_regions") or "cloud_regions"
    out = []
    top = max((f.tier for f in scenario.catalog.fabrics), default=0)
    for i, q in enumerate(scenario.cloud_regions):
        if q.fabric_tier > top:
            out.append(InputProblem(file, first_row(file) + i, "fabric_tier", f"cloud region '{q.id}' puts its GPUs on fabric tier "
                                    f"{q.fabric_tier}, above every fabric of the catalog (the highest is {top}): it meets any job's "
                                    "min_fabric_tier.", f"give the tier of the catalog fabric closest to the cloud's cluster network "
                                    f"(at most {top}), or add that fabric to the catalog."))
        on_demand, reserved = q.usd_per_gpu_hour_on_demand, q.usd_per_gpu_hour_reserved
        if on_demand is not None and reserved is not None and reserved > on_demand:
            out.append(InputProblem(
                file, first_row(file) + i, "usd_per_gpu_hour_reserved",
                f"cloud region '{q.id}' reserves a GPU-hour for ${reserved:g}, more than on demand (${on_demand:g}): reserved "
                "capacity is paid for every hour, so it is normally the cheaper rate.",
                "check that the two prices are not swapped (usd_per_gpu_hour_on_demand, usd_per_gpu_hour_reserved)."))
    return out


def job_warnings(scenario: Scenario) -> list[InputProblem]:
    """Job columns that change nothing as the scenario stands (`gpu_hours_per_day` of a job that
    is not interruptible, `interruptible` with the clock off: the job then gets racks of its own),
    and a trough demand beyond what the job's own GPUs give in a day (allowed: the troughs may
    lend more GPUs than the job's size, but a typo is likelier)."""
    file = scenario.files.get("jobs") or "jobs"
    out = []
    for i, job in enumerate(scenario.jobs):
        row = first_row(file) + i
        if job.gpu_hours_per_day is not None and not job.interruptible:
            out.append(InputProblem(file, row, "gpu_hours_per_day", f"job '{job.id}' is not interruptible, so its gpu_hours_per_day "
                                    f"({job.gpu_hours_per_day:,.6g}) is not read: it runs whole on racks of its own.",
                                    "set interruptible to true if the job may run in the inference troughs, or leave gpu_hours_per_day empty."))
        if job.interruptible and job.gpu_hours_per_day is not None and job.gpu_hours_per_day > 24.0 * job.gpus_h100_equiv * (1 + 1e-9):
            out.append(InputProblem(file, row, "gpu_hours_per_day", f"job '{job.id}' asks the troughs for {job.gpu_hours_per_day:,.0f} "
                                    f"GPU-hours a day, more than its {job.gpus_h100_equiv:,.6g} H100-equivalent GPUs give in 24 hours "
                                    f"({24.0 * job.gpus_h100_equiv:,.0f}), which is all it gets on racks of its own.",
                                    "check the figure (H100-equivalent GPU-hours per day), or raise gpus_h100_equiv to the job's real size."))
        if job.interruptible and not scenario.clock.on:
            out.append(InputProblem(file, row, "interruptible", f"job '{job.id}' is interruptible, but the clock is off "
                                    "(clock.hours 0), so there are no troughs to run in: it gets racks of its own.",
                                    "turn the clock on (clock.hours: 24, docs/clock.md) to let it use idle inference GPUs."))
    return out


def failover_warnings(scenario: Scenario) -> list[InputProblem]:
    """A failover budget (docs/resilience.md) below the region's normal budget asks users to accept
    a better round trip while a site is down than when all are up: allowed, but likely a typo.
    Named at its source: the region's cell, or the policy once (not once per region it reaches)."""
    policies = scenario.policies
    file, label = scenario.files.get("regions") or "regions", scenario.files.get("scenario") or "scenario"
    out, below = [], {}
    for i, region in enumerate(scenario.regions):
        for w, share in policies.survive_site_loss.items():
            normal = region.rtt_budget_ms.get(w)
            if not share or normal is None or region.demand_tok_s.get(w, 0.0) <= 0:
                continue
            if w in region.failover_rtt_ms and region.failover_rtt_ms[w] < normal:
                out.append(InputProblem(file, first_row(file) + i, f"failover_rtt_{w}_ms", f"region {region.name}'s failover budget for "
                                        f"'{w}' ({region.failover_rtt_ms[w]:g} ms) is below its normal budget ({normal:g} ms): users "
                                        "accept a worse round trip while a site is down, not a better one.",
                                        f"give at least {normal:g} ms, or leave it empty (twice the normal budget, or policies.failover_rtt_ms)."))
            elif w not in region.failover_rtt_ms and w in policies.failover_rtt_ms and policies.failover_rtt_ms[w] < normal:
                below.setdefault(w, []).append((region.name, normal))
    for w, names in below.items():
        worst = max(normal for _, normal in names)
        out.append(InputProblem(label, None, f"policies.failover_rtt_ms.{w}", f"the failover budget for '{w}' "
                                f"({policies.failover_rtt_ms[w]:g} ms) is below the normal budget of {len(names)} region(s) (up to "
                                f"{worst:g} ms, e.g. {names[0][0]}): users accept a worse round trip while a site is down, not a better one.",
                                f"give at least {worst:g} ms, or drop it (the default is twice each region's normal budget)."))
    return out


def scenario_warnings(scenario: Scenario) -> list[InputProblem]:
    """Everything allowed but probably a mistake, as InputProblems; never blocks a solve."""
    return country_warnings(scenario) + power_warnings(scenario) + rental_warnings(scenario) + job_warnings(scenario) \
        + failover_warnings(scenario) + interactivity_warnings(scenario.catalog)
