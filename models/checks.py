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
  those coolings can hold): the site can never host anything.
"""

from __future__ import annotations

import functools
import math
from importlib import resources
from pathlib import Path

import numpy as np

from dcplace.models.errors import InputProblem
from dcplace.models.records import Scenario

TOLERANCE_KM = 50.0
SEA_TOLERANCE_KM = 300.0  # a point at sea: 1:110m drops small islands (Batam is 110 km from Indonesia's polygons)
EARTH_RADIUS_KM = 6371.0088

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


def _haversine_km(lat1, lon1, lat2, lon2):
    lat1, lon1, lat2, lon2 = map(np.radians, (lat1, lon1, lat2, lon2))
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0, 1)))


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
        out[far] = _haversine_km(lat[far], lon[far], ends[:, 1], ends[:, 0])
    return out


def _country_at(lat: float, lon: float) -> str | None:
    import shapely

    layer = country_layer()
    hits = layer.index[shapely.contains(layer.geometry.values, shapely.points(lon, lat))]
    return f"{layer.loc[hits[0], 'name']} ({hits[0]})" if len(hits) else None


def first_row(file: str) -> int:
    """Row number of a table's first record: 2 in a CSV (line 1 is the header), else 1."""
    return 2 if file.lower().endswith(".csv") else 1


def country_warnings(scenario: Scenario) -> list[InputProblem]:
    """Sites and regions that lie outside their own country (beyond TOLERANCE_KM)."""
    out: list[InputProblem] = []
    for table, noun in (("sites", "site"), ("regions", "region")):
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
        if site.power_limit_kw < need - 1e-9:
            out.append(InputProblem(
                file, row, "power_limit_kw",
                f"site '{site.id}' has {site.power_limit_kw:,.6g} kW, less than the smallest rack it could hold needs: "
                f"{need:,.6g} kW of facility power (rack config '{rc.id}', {rc.kw_per_rack:,.6g} kW per rack, in '{c.id}' cooling at PUE "
                f"{site.pue(c):.3g}); the site can never host anything.",
                "raise power_limit_kw (a value meant in MW belongs in a power_limit_mw column), or drop the site."))
    return out


def scenario_warnings(scenario: Scenario) -> list[InputProblem]:
    """Everything allowed but probably a mistake, as InputProblems; never blocks a solve."""
    return country_warnings(scenario) + power_warnings(scenario)
