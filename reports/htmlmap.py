"""The interactive map: one self-contained HTML file that works with no network.

plotly.js is inlined, and the Natural Earth base map (data/geo/world_110m.json) is handed
to it through `window.PlotlyGeoAssets` before it loads, so it never fetches its topojson
from a CDN. Every layer is a legend entry (click to hide or show it); three buttons switch
common layer sets. Every name from the inputs is HTML-escaped before it reaches plotly,
whose labels understand a few tags: a site called `<b>x</b>` shows those characters.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from dcplace.reports.layers import PlanLayers, plan_extent
from dcplace.reports.output import check_destination, staged_files
from dcplace.reports.style import CLOSED_COLOUR, LAND_COLOUR, OCEAN_COLOUR, REGION_COLOUR, ROLE_COLOURS, geo_path, money, mw_text

SITE_ROLES = ("training", "inference", "mixed", "idle")
MAX_MARKER_PX = 46


def esc(value: object) -> str:
    """Text from the inputs, safe for HTML and for plotly's label markup."""
    return html.escape(str(value), quote=True)


def plan_figure(layers: PlanLayers) -> go.Figure:
    """The plotly figure: assignment lines, regions, candidate and open sites."""
    fig = go.Figure()
    for role in SITE_ROLES:
        _add_lines(fig, layers, role)
    _add_regions(fig, layers)
    _add_closed_sites(fig, layers)
    mw_max = max(float(layers.sites["it_mw"].max()), 1.0)
    for role in SITE_ROLES:
        _add_sites(fig, layers, role, mw_max)
    _layout(fig, layers)
    return fig


def _add_lines(fig: go.Figure, layers: PlanLayers, role: str) -> None:
    roles = dict(zip(layers.sites["id"], layers.sites["role"]))
    lines = layers.assignments[[roles[s] == role for s in layers.assignments["site"]]]
    if lines.empty:
        return
    lons: list[float | None] = []
    lats: list[float | None] = []
    for geometry in lines.geometry:
        (lon1, lat1), (lon2, lat2) = geometry.coords
        lons += [lon1, lon2, None]
        lats += [lat1, lat2, None]
    fig.add_trace(go.Scattergeo(
        lon=lons, lat=lats, mode="lines", line={"width": 0.7, "color": ROLE_COLOURS[role]}, opacity=0.35,
        hoverinfo="skip", name=f"lines to {role} sites", legendgroup="lines", legendgrouptitle_text="Region → site",
        meta={"layer": "assignments", "role": role},
    ))


def _add_regions(fig: go.Figure, layers: PlanLayers) -> None:
    regions = layers.regions
    demand = regions["demand_tok_s"].to_numpy()
    sizes = 3 + 14 * np.sqrt(demand / max(demand.max(), 1.0))
    hover = [
        f"<b>{esc(r.name)}</b> ({esc(r.country)})<br>population {r.population:,}<br>"
        f"demand {r.demand_tok_s:,.0f} tok/s at peak<br>"
        + (f"served by {esc(r.served_by.replace(';', ', '))}<br>mean RTT {r.mean_rtt_ms:.1f} ms"
           if r.served_tok_s > 0 else "not served")
        for r in regions.itertuples()
    ]
    fig.add_trace(go.Scattergeo(
        lon=regions.geometry.x, lat=regions.geometry.y, mode="markers", name="demand regions",
        marker={"size": sizes, "color": REGION_COLOUR, "opacity": 0.5, "line": {"width": 0}},
        text=hover, hovertemplate="%{text}<extra></extra>", legendgroup="regions", legendgrouptitle_text="Demand",
        meta={"layer": "regions"},
    ))


def _site_hover(row) -> str:
    jobs = f"<br>training jobs: {esc(row.training_jobs.replace(';', ', '))}" if row.training_jobs else ""
    serves = f"<br>inference {row.inference_tok_s:,.0f} tok/s at peak" if row.inference_tok_s > 0 else ""
    return (
        f"<b>{esc(row.name)}</b> ({esc(row.country)}) — {esc(row.role)}<br>"
        f"{row.racks:,} racks, {row.gpus:,} GPUs: {esc(row.chips.replace(';', ', '))}<br>"
        f"cooling {esc(row.cooling.replace(';', ', '))}; fabric {esc(row.fabrics.replace(';', ', ') or '—')}<br>"
        f"IT {mw_text(row.it_mw)}, facility {mw_text(row.facility_mw)} of {mw_text(row.power_limit_mw)}"
        f"{serves}{jobs}<br>cost {money(row.cost_usd_per_year)}/yr, {row.emissions_t_per_year:,.0f} t CO₂/yr"
    )


def _add_sites(fig: go.Figure, layers: PlanLayers, role: str, mw_max: float) -> None:
    sites = layers.sites[layers.sites["role"] == role]
    if sites.empty:
        return
    sizes = np.maximum(6.0, MAX_MARKER_PX * np.sqrt(sites["it_mw"].to_numpy() / mw_max))
    fig.add_trace(go.Scattergeo(
        lon=sites.geometry.x, lat=sites.geometry.y, mode="markers", name=f"{role} sites",
        marker={"size": sizes, "color": ROLE_COLOURS[role], "opacity": 0.9, "line": {"width": 1, "color": "white"}},
        text=[_site_hover(r) for r in sites.itertuples()], hovertemplate="%{text}<extra></extra>",
        customdata=list(sites["id"]), legendgroup="sites", legendgrouptitle_text="Sites (size: IT MW)",
        meta={"layer": "sites", "role": role},
    ))


def _add_closed_sites(fig: go.Figure, layers: PlanLayers) -> None:
    closed = layers.sites[~layers.sites["open"]]
    if closed.empty:
        return
    fig.add_trace(go.Scattergeo(
        lon=closed.geometry.x, lat=closed.geometry.y, mode="markers", name="candidates not opened",
        marker={"size": 6, "color": "rgba(0,0,0,0)", "line": {"width": 1, "color": CLOSED_COLOUR}},
        text=[f"<b>{esc(r.name)}</b> ({esc(r.country)}) — not opened" for r in closed.itertuples()],
        hovertemplate="%{text}<extra></extra>", legendgroup="sites", meta={"layer": "candidates"},
    ))


def _layout(fig: go.Figure, layers: PlanLayers) -> None:
    plan, k = layers.plan, layers.plan.kpis
    window = plan_extent(layers)
    geo = {
        "projection": {"type": "equal earth"}, "showland": True, "landcolor": LAND_COLOUR, "showocean": True,
        "oceancolor": OCEAN_COLOUR, "showcountries": True, "countrycolor": "white", "showcoastlines": False,
        "showframe": False, "resolution": 110,
    }
    if window is not None:
        geo["lonaxis"] = {"range": [window[0], window[2]]}
        geo["lataxis"] = {"range": [window[1], window[3]]}
        geo["projection"] = {"type": "azimuthal equal area"}
    traces = [t.meta["layer"] for t in fig.data]
    buttons = [
        ("All layers", [True] * len(traces)),
        ("Sites and regions", [layer != "assignments" for layer in traces]),
        ("Open sites only", [layer == "sites" for layer in traces]),
    ]
    fig.update_layout(
        title={"text": f"<b>{esc(plan.scenario)}</b> — annual cost {money(plan.objective_usd_per_year)}, "
               f"{int(k['sites_open'])} sites, ${k['usd_per_m_tokens']:.3f} per M tokens, mean RTT {k['mean_rtt_ms']:.1f} ms",
               "x": 0.01, "font": {"size": 16}},
        geo=geo, margin={"l": 0, "r": 0, "t": 50, "b": 0}, height=720,
        legend={"title": {"text": "Layers (click to show or hide)"}, "groupclick": "toggleitem", "itemsizing": "constant", "x": 0.0, "y": 0.02,
                "yanchor": "bottom", "bgcolor": "rgba(255,255,255,0.85)"},
        updatemenus=[{"type": "buttons", "direction": "right", "x": 0.99, "xanchor": "right", "y": 1.0, "yanchor": "bottom",
                      "buttons": [{"label": label, "method": "restyle", "args": [{"visible": visible}]} for label, visible in buttons]}],
        annotations=[{
            "text": f"Solved {plan.created_utc[:10]} with {esc(plan.solve.solver)} {esc(plan.solve.solver_version)} "
                    f"({esc(plan.solve.status)}) · scenario {plan.scenario_hash[:12]} · countries: Natural Earth 1:110m",
            "x": 0.99, "y": 0.0, "xref": "paper", "yref": "paper", "xanchor": "right", "showarrow": False,
            "font": {"size": 10, "color": "#666"},
        }],
        paper_bgcolor="white",
    )


def offline_html(fig: go.Figure, title: str) -> str:
    """A complete HTML page: plotly.js inlined, the base map embedded, no network needed."""
    page = pio.to_html(fig, include_plotlyjs=True, full_html=True, config={"displaylogo": False, "scrollZoom": True})
    topojson = json.loads(geo_path("world_110m.json").read_text())
    # The base map must exist before plotly.js runs; "<\\/" keeps any "</" from closing the script tag.
    base_map = json.dumps(topojson, separators=(",", ":")).replace("</", "<\\/")
    assets = f"<script>window.PlotlyGeoAssets = {{topojson: {{world_110m: {base_map}}}}};</script>"
    head = f'<meta charset="utf-8" /><title>{esc(title)}</title>{assets}'
    if "<head>" not in page:
        raise RuntimeError("plotly's page has no <head>; cannot embed the base map")
    return page.replace("<head>", f"<head>{head}", 1)


def save_html_map(layers: PlanLayers, out_dir: str | Path) -> list[Path]:
    """Write map.html into `out_dir`; returns its path in a list."""
    check_destination(out_dir, "report")  # refuse a bad --out before drawing, not after
    page = offline_html(plan_figure(layers), f"dcplace map — {layers.plan.scenario}")
    with staged_files(out_dir, "report") as stage:
        (stage.dir / "map.html").write_text(page, encoding="utf-8")
    return stage.moved
