"""Round-trip time between demand regions and sites.

Two estimates, both data-driven:

* great circle: rtt_ms = 2 * d_km * route_factor / fiber_km_per_ms + overhead_ms, where d
  is the haversine distance on a sphere of radius 6371.0088 km (the IUGG mean radius,
  models.geo.great_circle_km);
* backbone: when the scenario gives a graph of fibre edges (from, to, km), d * route_factor
  is replaced by the shortest path length over it (networkx Dijkstra), since edge lengths
  are already fibre lengths. A region or site the graph cannot reach gets rtt = inf.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from dcplace.models import Scenario
from dcplace.models.geo import great_circle_km


def distance_matrix_km(scenario: Scenario) -> np.ndarray:
    """Great-circle km, regions x sites."""
    r_lat = np.array([r.lat for r in scenario.regions])[:, None]
    r_lon = np.array([r.lon for r in scenario.regions])[:, None]
    s_lat = np.array([s.lat for s in scenario.sites])[None, :]
    s_lon = np.array([s.lon for s in scenario.sites])[None, :]
    return great_circle_km(r_lat, r_lon, s_lat, s_lon)


def backbone_path_km(scenario: Scenario) -> np.ndarray:
    """Shortest fibre path in km over the backbone graph, regions x sites (inf if unreachable)."""
    graph = nx.Graph()
    for a, b, km in scenario.backbone_edges:
        if graph.has_edge(a, b):
            km = min(km, graph[a][b]["km"])
        graph.add_edge(a, b, km=km)
    out = np.full((len(scenario.regions), len(scenario.sites)), np.inf)
    site_col = {s.id: j for j, s in enumerate(scenario.sites)}
    for i, region in enumerate(scenario.regions):
        if region.id not in graph:
            continue
        lengths = nx.single_source_dijkstra_path_length(graph, region.id, weight="km")
        for site_id, j in site_col.items():
            if site_id in lengths:
                out[i, j] = lengths[site_id]
    return out


def rtt_matrix_ms(scenario: Scenario, distance_km: np.ndarray | None = None) -> np.ndarray:
    """Round-trip milliseconds, regions x sites; `distance_km` is distance_matrix_km(scenario)
    when the caller already has it (it takes seconds at 2,000 x 10,000)."""
    lat = scenario.latency
    if scenario.backbone_edges:
        fibre_km = backbone_path_km(scenario)
    else:
        fibre_km = (distance_matrix_km(scenario) if distance_km is None else distance_km) * lat.route_factor
    return 2.0 * fibre_km / lat.fiber_km_per_ms + lat.overhead_ms


def allowed_mask(scenario: Scenario) -> np.ndarray:
    """Regions x scenario-sites: the site lies in one of the region's allowed countries (all
    sites where the region names none)."""
    countries = np.array([s.country for s in scenario.sites], dtype=object)
    allowed = np.ones((len(scenario.regions), len(scenario.sites)), dtype=bool)
    for i, region in enumerate(scenario.regions):
        if region.allowed_countries:
            allowed[i] = np.isin(countries, list(region.allowed_countries))
    return allowed
