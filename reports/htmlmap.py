"""The interactive map: one self-contained HTML file that works with no network.

plotly.js is inlined, and the Natural Earth base map (data/geo/world_110m.json) is handed
to it through `window.PlotlyGeoAssets` before it loads, so it never fetches its topojson
from a CDN. Every layer is a legend entry (click to hide or show it); a menu switches
common layer sets. Every name from the inputs is HTML-escaped before it reaches plotly,
whose labels understand a few tags: a site called `<b>x</b>` shows those characters.

Flows are drawn as on the static map: colour by workload class, width proportional to
tok/s served (`style.flow_scale`, in pixels, in steps of half a pixel: one trace per class
and width), great circles (plotly draws a line between two points along the great circle
and cuts it at the antimeridian). Hovering a flow (anywhere near its middle half: three
invisible hover points along the layer's geometry) names region -> site, class, tok/s and
RTT. The main open sites carry text labels, placed so that they overlap neither each other
nor a site at the smallest supported window (800 x 600). The page fills the window
(responsive, 100vh) and moves the legend below the map in narrow windows.
"""

from __future__ import annotations

import html
import json
import textwrap
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from pyproj import Transformer

from dcplace.optimizer.studies.outages import AT_RISK_TOL_TOK_S
from dcplace.reports.layers import PlanLayers, line_ends, line_parts, plan_extent, robustness_legend, window_outline
from dcplace.reports.output import check_destination
from dcplace.reports.economics import money_step_usd
from dcplace.reports.summary import money_at, status_word, variant_title
from dcplace.reports.style import (
    RISK_COLOUR, short_name,
    CLOSED_COLOUR, DAY_COLOURS, LAND_COLOUR, OCEAN_COLOUR, REGION_COLOUR, ROLE_COLOURS, ROLE_SYMBOLS, class_colours, flow_scale,
    geo_path, money, mw_text, tok_s_text, without_bidi_controls, workload_classes,
)

SITE_ROLES = ("training", "inference", "mixed", "idle")
MAX_MARKER_PX = 46
FLOW_MAX_PX, FLOW_MIN_PX, FLOW_STEP_PX = 8.0, 0.5, 0.5
FLOW_OPACITY = 0.55
HOVER_FRACTIONS = (0.25, 0.5, 0.75)  # where along a flow its hover points sit
MAX_LABELS = 15
LABEL_FONT_PX = 11
LABEL_CHAR_EM = 0.5  # a label's width per character, in font sizes (Chromium drew 31 characters at 11 px in 151 px: 0.44)
LABEL_POSITIONS = ("middle right", "middle left", "top center", "bottom center", "top right", "top left", "bottom right", "bottom left")
# The map box labels are placed for: the plot area of an 800 x 600 window (the smallest
# supported) once the title and the legend below it are taken (a world map measured 674 x 328 px
# there in Chromium with a three-row legend; a longer legend takes more); larger windows only add room.
LABEL_BOX_PX = (620.0, 300.0)
NARROW_PX = 1000  # below this window width the legend goes under the map
CONFIG = {"displaylogo": False, "scrollZoom": True, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}


def esc(value: object) -> str:
    """Text from the inputs, safe for HTML and for plotly's label markup. A double quote is written
    &#34;: plotly's text decodes numeric entities but shows '&quot;' as it is."""
    return html.escape(without_bidi_controls(str(value)), quote=True).replace("&quot;", "&#34;")


def plan_figure(layers: PlanLayers) -> go.Figure:
    """The plotly figure: flows, regions, flow hover points, candidates, open sites, labels."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    fig = go.Figure()
    names = workload_classes(layers)
    colours = class_colours(names)
    scale = flow_scale(layers.assignments["served_tok_s"], FLOW_MAX_PX, FLOW_MIN_PX)
    for cls in names:
        _add_flows(fig, layers, cls, names[cls], colours[cls], scale)
    _add_width_references(fig, scale)
    _add_regions(fig, layers)
    for cls in names:
        _add_flow_hover(fig, layers, cls, names[cls], colours[cls])
    _add_closed_sites(fig, layers)
    mw_max = max(float(layers.sites["it_mw"].max()), 1e-9)
    labels = site_labels(layers, mw_max)
    losses = outage_hover(layers)
    for role in SITE_ROLES:
        _add_sites(fig, layers, role, mw_max, labels, losses)
    _add_size_key(fig, mw_max)
    _add_loss_rings(fig, layers, mw_max)
    _add_robustness_entry(fig, layers)
    slider = _add_day(fig, layers, mw_max)
    _layout(fig, layers)
    if slider is not None:  # the slider and the colour bar get a band of their own under the map, off the land
        fig.update_layout(sliders=[slider])
        fig.update_geos(domain={"x": [0.0, 1.0], "y": [DAY_BAND, 1.0]})
    return fig


# ----------------------------------------------------------------------------- the day (the clock)

DAY_COLOURSCALE = [[0.0, "#fdd0a2"], [0.5, "#f16913"], [1.0, "#7f2704"]]  # GPUs busy serving / installed, 0 to 100 %
DAY_BAND = 0.16  # share of the figure's height under the map for the hour slider and the colour bar
DAY_RING_GAP_PX = 5  # a fully busy site's ring sits this far outside a symbol of its inference MW


def _day_hover(d, h: int, owned: bool) -> str:
    when = f"{h:02d}:00 UTC ({d.local_time(h)} local standard time)"
    if owned:
        use = f" ({d.serving_gpus[h] / d.installed_gpus:.0%} busy)" if d.installed_gpus > 0 else ""
        return (f"<b>{esc(d.name)}</b> at {when}<br>load {tok_s_text(d.load_tok_s[h])} of {tok_s_text(d.capacity_tok_s[h])} capacity<br>"
                f"GPUs: {d.serving_gpus[h]:,.0f} serving{use}, {d.lent_gpus[h]:,.0f} lent to training, of {d.installed_gpus:,.0f} installed")
    return (f"<b>{esc(d.name)}</b> (cloud region) at {when}<br>{d.serving_gpus[h]:,.0f} GPUs rented, serving "
            f"{tok_s_text(d.load_tok_s[h])}")


def _add_day(fig: go.Figure, layers: PlanLayers, mw_max: float) -> dict | None:
    """With the clock on: each open site's load at one UTC hour as a ring on the sites' own
    size scale (area: the IT MW of its inference GPUs busy serving, so a fully busy inference
    site's ring sits just outside its symbol and shrinks into it in the troughs; colour: the
    share of its inference GPUs busy) and each cloud region's rented GPUs (a star, area by
    GPUs rented), with an hour slider under the map that restyles both traces (no animation
    frames, no network; the page's script is unchanged). GPUs and MW add up across classes;
    tok/s (in the hover) do not weigh them alike."""
    from dcplace.reports.economics import place_days  # numpy only

    plan = layers.plan
    if not plan.clock.get("on") or not plan.hourly:
        return None
    days = place_days(plan, layers.scenario)
    owned = [d for d in days if d.kind == "owned"]
    rented = [d for d in days if d.kind == "rented"]
    inference_mw = {s.id: sum(ln.it_kw for ln in s.racks if ln.purpose == "inference") / 1000 for s in plan.sites}
    rented_top = max((float(d.serving_gpus.max()) for d in rented), default=0.0) or 1.0
    total = sum(d.serving_gpus for d in owned) if owned else sum(d.serving_gpus for d in days)
    start = int(np.argmax(total)) if len(days) else 0

    def busy(d, h: int) -> float:
        return float(d.serving_gpus[h] / d.installed_gpus) if d.installed_gpus > 0 else 0.0  # GPUs add up across classes

    def ring(d, h: int) -> float:
        mw = inference_mw.get(d.id, 0.0) * busy(d, h)
        return round(float(DAY_RING_GAP_PX + MAX_MARKER_PX * np.sqrt(mw / mw_max)), 1) if mw > 0 else 0.0

    def state(h: int) -> dict[str, list]:
        use = [busy(d, h) for d in owned]
        stars = [round(float(6 + 24 * np.sqrt(d.serving_gpus[h] / rented_top)), 1) if d.serving_gpus[h] > 0 else 0.0 for d in rented]
        return {"marker.size": [[ring(d, h) for d in owned], stars],
                "marker.color": [use, [DAY_COLOURS["rented"]] * len(rented)],
                "text": [[_day_hover(d, h, True) for d in owned], [_day_hover(d, h, False) for d in rented]]}

    first = state(start)
    indices = []
    # legend names on short lines: one long line ran past the right edge of a 1366-1920 px window
    for k, (group, name, symbol) in enumerate(((owned, "busy at the slider's hour<br>(ring: MW of GPUs serving;<br>colour: share busy)", "circle-open"),
                                               (rented, "rented at the slider's hour<br>(cloud regions; size: GPUs)", "star"))):
        if k == 0:
            marker = {"size": first["marker.size"][0], "color": first["marker.color"][0], "colorscale": DAY_COLOURSCALE, "cmin": 0.0,
                      "cmax": 1.0, "symbol": symbol, "opacity": 1.0, "line": {"width": 3.5},
                      "colorbar": {"title": {"text": "GPUs busy serving", "side": "top"}, "orientation": "h", "x": 1.0, "xanchor": "right",
                                   "y": 0.02, "yanchor": "bottom", "len": 0.22, "thickness": 9, "tickformat": ".0%",
                                   "tickvals": [0, 0.5, 1], "tickfont": {"size": 10}, "bgcolor": "rgba(255,255,255,0.8)"}}
        else:
            marker = {"size": first["marker.size"][1], "color": first["marker.color"][1], "symbol": symbol, "opacity": 0.9,
                      "line": {"width": 1, "color": "#0b6e79"}}
        fig.add_trace(go.Scattergeo(
            lon=[d.lon for d in group], lat=[_lat(layers, d) for d in group], mode="markers", name=name, marker=marker,
            text=first["text"][k], hovertemplate="%{text}<extra></extra>", customdata=[d.id for d in group],
            legendgroup="day", legendrank=5, visible=True, meta={"layer": "day-owned" if k == 0 else "day-rented"},
        ))
        indices.append(len(fig.data) - 1)
    steps = []
    for h in range(24):
        st = state(h)
        steps.append({"label": f"{h:02d}", "method": "restyle", "args": [st, indices]})
    return {"active": start, "steps": steps, "x": 0.0, "xanchor": "left", "y": 0.0, "yanchor": "bottom", "len": 0.62,
            "pad": {"t": 0, "b": 4, "l": 6}, "currentvalue": {"prefix": "hour of the day, UTC: ", "font": {"size": 12}},
            "font": {"size": 9}, "bgcolor": "#e6eaee", "name": "day"}


def _lat(layers: PlanLayers, d) -> float:
    if d.kind == "owned":
        return float(next(s.lat for s in layers.plan.sites if s.id == d.id))
    return float(next((q.lat for q in layers.scenario.cloud_regions if q.id == d.id), 0.0))


def _marker_px(it_mw, mw_max: float) -> np.ndarray:
    return np.maximum(6.0, MAX_MARKER_PX * np.sqrt(np.asarray(it_mw, dtype=float) / mw_max))


def _add_flows(fig: go.Figure, layers: PlanLayers, cls: str, name: str, colour: str, scale) -> None:
    lines = layers.assignments[layers.assignments["workload"] == cls]
    if lines.empty:
        return
    widths = np.maximum(FLOW_MIN_PX, np.round(scale.width(lines["served_tok_s"].to_numpy()) / FLOW_STEP_PX) * FLOW_STEP_PX)
    for k, width in enumerate(sorted(set(widths))):  # thin first, so big flows draw on top
        lons: list[float | None] = []
        lats: list[float | None] = []
        for geometry in lines.geometry[widths == width]:
            (lon1, lat1), (lon2, lat2) = line_ends(geometry)
            lons += [lon1, lon2, None]
            lats += [lat1, lat2, None]
        fig.add_trace(go.Scattergeo(
            lon=lons, lat=lats, mode="lines", line={"width": float(width), "color": colour}, opacity=FLOW_OPACITY,
            hoverinfo="skip", name=esc(_legend_name(f"{short_name(name)} flows")), legendgroup=f"flows-{cls}", showlegend=k == 0,
            legendrank=100, meta={"layer": "assignments", "workload": cls, "width_px": float(width)},
        ))


LEGEND_LINE_CHARS = 30  # a legend entry's line: the legend column (LEGEND_COLUMN_PX) holds it whole


def _legend_name(text: str) -> str:
    """A legend entry on lines of whole words (never cut mid-word: issue 49); escaped by the caller
    line by line, joined with <br>."""
    import re

    # a figure and its unit stay on one line: their spaces are no-break spaces while wrapping
    text = re.sub(r"\d[\d,.]* (?:M tok/s|k tok/s|tok/s|MW|kW|M|k)\b", lambda m: m.group(0).replace(" ", "\u00a0"), text)
    return "\n".join(textwrap.wrap(text, LEGEND_LINE_CHARS)) or text


def _add_size_key(fig: go.Figure, mw_max: float) -> None:
    """Legend-only symbols of two or three round IT MW sizes on the map's own scale."""
    from dcplace.reports.style import nice_floor  # round reference sizes, as the static map's legend

    for mw in sorted({nice_floor(mw_max), nice_floor(mw_max / 4), nice_floor(mw_max / 20)}, reverse=True):
        if _marker_px([mw], mw_max)[0] <= 6.0:
            continue  # below the smallest symbol every site has the same size
        px = float(_marker_px([mw], mw_max)[0])
        fig.add_trace(go.Scattergeo(
            lon=[None], lat=[None], mode="markers", marker={"size": px, "color": "#b5b5b5", "line": {"width": 1, "color": "white"}},
            # the legend draws symbols at most 16 px wide: the entry says the size on the map
            hoverinfo="skip", name=f"size key: {mw_text(mw)} ({px:.0f} px wide)", legendgroup="size-key", legendrank=15,
            meta={"layer": "size-key"},
        ))


def _add_loss_rings(fig: go.Figure, layers: PlanLayers, mw_max: float) -> None:
    """Red rings around the open sites whose loss breaks the stated N-1 policy (none without a
    policy), and a legend entry that says what a single-site loss costs: the policy's verdict,
    or that no policy is set, and the worst loss (the outage table, as the static map's)."""
    table = layers.outages
    if not table.outages:
        return
    policy = bool(table.survive_site_loss)
    breaking = [o for o in table.outages if policy and table.breaks(o)]
    worst = max(breaking, key=lambda o: o.at_risk_total_tok_s) if breaking else table.worst()
    peak = table.served_tok_s or 1.0
    worst_text = (f"worst loss: {worst.name}, {tok_s_text(worst.at_risk_total_tok_s)} short ({worst.at_risk_total_tok_s / peak:.0%})"
                  if worst is not None and worst.at_risk_total_tok_s > AT_RISK_TOL_TOK_S else "every loss re-served in its budget")
    if breaking:
        head = f"{len(breaking)} ringed: the loss breaks survive_site_loss"
    elif policy:
        head = "N-1: no single-site loss breaks survive_site_loss"
    else:
        head = "no N-1 policy set (survive_site_loss): no rings"
    sites = layers.sites.set_index("id")
    ids = [o.site for o in breaking if o.site in sites.index]
    sizes = [float(_marker_px([sites.at[i, "it_mw"]], mw_max)[0]) + 8 for i in ids]
    fig.add_trace(go.Scattergeo(
        lon=[sites.at[i, "geometry"].x for i in ids] or [None], lat=[sites.at[i, "geometry"].y for i in ids] or [None],
        mode="markers", marker={"size": sizes or 12, "symbol": "circle-open", "color": RISK_COLOUR, "line": {"width": 2}},
        hoverinfo="skip", name="<br>".join(esc(line) for line in _legend_name(f"{head}; {worst_text}").splitlines()),
        legendgroup="losses", legendrank=45, meta={"layer": "losses"},
    ))


def _add_robustness_entry(fig: go.Figure, layers: PlanLayers) -> None:
    """A legend entry, with `dcplace why robustness` run on the plan: how many open sites are robust
    and which depend on the inputs (each site's hover gives its label)."""
    lines = robustness_legend(layers.sites)
    if not lines:
        return
    fig.add_trace(go.Scattergeo(
        lon=[None], lat=[None], mode="markers", marker={"size": 1, "color": "rgba(0,0,0,0)"}, hoverinfo="skip",
        name="<br>".join(esc(line) for line in _legend_name("Under the inputs' ranges: " + "; ".join(lines)).splitlines()),
        legendgroup="robustness", legendrank=46, meta={"layer": "robustness"},
    ))


def _short(text: str, limit: int = 32) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _add_width_references(fig: go.Figure, scale) -> None:
    """Legend-only lines of the reference widths (no data on the map)."""
    for ref in scale.references:
        fig.add_trace(go.Scattergeo(
            lon=[None], lat=[None], mode="lines", line={"width": float(scale.width(ref)), "color": "#555555"},
            opacity=FLOW_OPACITY, hoverinfo="skip", name=f"{tok_s_text(ref)} (width)", legendgroup="width",
            legendrank=200, meta={"layer": "width-reference"},
        ))


def _flow_text(row, name: str) -> str:
    budget = f" (budget {row.rtt_budget_ms:.0f} ms)" if np.isfinite(row.rtt_budget_ms) else ""
    return (
        f"<b>{esc(row.region_name)} → {esc(row.site_name)}</b><br>{esc(name)}<br>"
        f"{row.served_tok_s:,.0f} tok/s at peak ({row.share:.0%} of the region's class demand)<br>"
        f"RTT {row.rtt_ms:.1f} ms{budget}, {row.distance_km:,.0f} km"
    )


def _hover_points(geometry) -> list[tuple[float, float]]:
    points = [(x, y) for lons, lats in line_parts(geometry) for x, y in zip(lons, lats)]
    return [points[min(len(points) - 1, round(f * (len(points) - 1)))] for f in HOVER_FRACTIONS]


def _add_flow_hover(fig: go.Figure, layers: PlanLayers, cls: str, name: str, colour: str) -> None:
    """Invisible points along each flow that carry its hover text."""
    lines = layers.assignments[layers.assignments["workload"] == cls]
    if lines.empty:
        return
    lons, lats, text = [], [], []
    for row in lines.itertuples():
        label = _flow_text(row, name)
        for lon, lat in _hover_points(row.geometry):
            lons.append(lon)
            lats.append(lat)
            text.append(label)
    fig.add_trace(go.Scattergeo(
        lon=lons, lat=lats, mode="markers", marker={"size": 8, "color": colour, "opacity": 0}, text=text,
        hovertemplate="%{text}<extra></extra>", hoverlabel={"bgcolor": colour}, name=f"{esc(name)} flows (hover)",
        legendgroup=f"flows-{cls}", showlegend=False, meta={"layer": "flow-hover", "workload": cls},
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
        text=hover, hovertemplate="%{text}<extra></extra>", legendgroup="regions", legendrank=50,
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
        + (f"<br>under the inputs' ranges: {esc(row.robustness)}" if getattr(row, "robustness", "") else "")
    )


def outage_hover(layers: PlanLayers) -> dict[str, str]:
    """Site id -> what its loss costs, for the site's hover (optimizer.studies.outages, the
    same table as `dcplace outages` and the report's section)."""
    table = layers.outages
    peak = table.served_tok_s or 1.0
    out = {}
    for o in table.outages:
        parts = []
        if o.lost_total_tok_s > 0:
            if o.at_risk_total_tok_s > AT_RISK_TOL_TOK_S:
                regions = o.regions_at_risk()
                named = ", ".join(esc(r.region_name) for r in regions[:3]) + (f" and {len(regions) - 3} more" if len(regions) > 3 else "")
                parts.append(f"{tok_s_text(o.at_risk_total_tok_s)} at risk ({o.at_risk_total_tok_s / peak:.1%} of peak): {named}")
            else:
                parts.append("all its inference re-served within the failover budgets")
            if o.fallback_rtt_ms is not None:
                parts.append(f"fallback RTT {o.fallback_rtt_ms:.1f} ms")
        if o.jobs:
            parts.append(f"{len(o.jobs)} training job(s) stall, {o.training_days_at_risk:,.0f} job-days at risk")
        out[o.site] = "<br><i>if lost:</i> " + "; ".join(parts) if parts else ""
    return out


def _add_sites(fig: go.Figure, layers: PlanLayers, role: str, mw_max: float, labels: dict[str, tuple[str, str]],
               losses: dict[str, str]) -> None:
    sites = layers.sites[layers.sites["role"] == role]
    if sites.empty:
        return
    sizes = _marker_px(sites["it_mw"].to_numpy(), mw_max)
    fig.add_trace(go.Scattergeo(
        lon=sites.geometry.x, lat=sites.geometry.y, mode="markers+text", name=f"{role} sites (size: IT MW)",
        texttemplate=[labels.get(i, ("", ""))[0] for i in sites["id"]],
        textposition=[labels.get(i, ("", "middle right"))[1] for i in sites["id"]],
        textfont={"size": LABEL_FONT_PX, "color": "#1a1a1a", "shadow": "1px 1px 2px white"},
        marker={"size": sizes, "color": ROLE_COLOURS[role], "opacity": 0.9, "symbol": ROLE_SYMBOLS[role],
                "line": {"width": 1, "color": "white"}},
        text=[_site_hover(r) + losses.get(r.id, "") for r in sites.itertuples()], hovertemplate="%{text}<extra></extra>",
        customdata=list(sites["id"]), legendgroup=f"sites-{role}", legendrank=10,
        meta={"layer": "sites", "role": role},
    ))


def _add_closed_sites(fig: go.Figure, layers: PlanLayers) -> None:
    closed = layers.sites[~layers.sites["open"]]
    if closed.empty:
        return
    fig.add_trace(go.Scattergeo(
        lon=closed.geometry.x, lat=closed.geometry.y, mode="markers", name="candidates not opened",
        marker={"size": 7, "color": "white", "line": {"width": 1.3, "color": CLOSED_COLOUR}},
        text=[f"<b>{esc(r.name)}</b> ({esc(r.country)}) — candidate, not opened" for r in closed.itertuples()],
        hovertemplate="%{text}<extra></extra>", legendgroup="candidates", legendrank=40, meta={"layer": "candidates"},
    ))


def _projection(layers: PlanLayers):
    """(plotly geo projection settings, the same projection in pyproj, the lon/lat window or None)."""
    window = plan_extent(layers)
    if window is None:
        return {"type": "equal earth"}, "+proj=eqearth +datum=WGS84", None
    lon0, lat0 = (window[0] + window[2]) / 2, (window[1] + window[3]) / 2
    return ({"type": "azimuthal equal area", "rotation": {"lon": lon0, "lat": lat0}},
            f"+proj=laea +lat_0={lat0:.4f} +lon_0={lon0:.4f} +datum=WGS84", window)


def site_labels(layers: PlanLayers, mw_max: float) -> dict[str, tuple[str, str]]:
    """Site id -> (label, plotly textposition) for the main open sites: text labels of the main open sites, largest first, each at the first of eight positions
    around its marker that overlaps no placed label and no other site at the smallest window
    (`LABEL_BOX_PX`); a site with no free position is left to its hover."""
    sites = layers.sites[layers.sites["open"]].sort_values("it_mw", ascending=False, kind="stable")
    if sites.empty:
        return {}
    to_map, x0, x1, y0, y1 = _frame(layers)
    px = min(LABEL_BOX_PX[0] / (x1 - x0), LABEL_BOX_PX[1] / (y1 - y0))  # pixels per metre
    sx, sy = to_map.transform(sites.geometry.x.to_numpy(), sites.geometry.y.to_numpy())
    cx, cy = (sx - x0) * px, (y1 - sy) * px  # screen: y down
    radius = _marker_px(sites["it_mw"].to_numpy(), mw_max) / 2
    markers = [(cx[i] - radius[i], cy[i] - radius[i], cx[i] + radius[i], cy[i] + radius[i]) for i in range(len(sites))]
    width_px, height_px = (x1 - x0) * px, (y1 - y0) * px
    placed: list[tuple[float, float, float, float]] = []
    chosen, positions, texts = [], [], []
    for i in range(min(len(sites), MAX_LABELS)):
        text = f"{sites['name'].iat[i]} {mw_text(sites['it_mw'].iat[i])}"
        w, h = LABEL_CHAR_EM * LABEL_FONT_PX * len(text) + 4, LABEL_FONT_PX + 4
        for position in LABEL_POSITIONS:
            vertical, horizontal = position.split()
            gap = radius[i] + 2
            left = {"right": cx[i] + (gap if vertical == "middle" else 0), "left": cx[i] - w - (gap if vertical == "middle" else 0),
                    "center": cx[i] - w / 2}[horizontal]
            top = {"middle": cy[i] - h / 2, "top": cy[i] - gap - h, "bottom": cy[i] + gap}[vertical]
            box = (left, top, left + w, top + h)
            inside = box[0] >= 0 and box[1] >= 0 and box[2] <= width_px and box[3] <= height_px
            if inside and not any(_overlap(box, b) for b in placed) and not any(
                    _overlap(box, b) for j, b in enumerate(markers) if j != i):
                placed.append(box)
                chosen.append(i)
                positions.append(position)
                texts.append(esc(text))
                break
    return {sites["id"].iat[i]: (text, position) for i, text, position in zip(chosen, texts, positions)}


def _aspect(layers: PlanLayers) -> float:
    """Width / height of the drawn map (the frame of the world or of the regional window)."""
    x0, x1, y0, y1 = _frame(layers)[1:]
    return float((x1 - x0) / (y1 - y0))


def _frame(layers: PlanLayers):
    """(lon/lat -> map transformer, x0, x1, y0, y1 of the frame drawn, in projected metres)."""
    _, proj, window = _projection(layers)
    to_map = Transformer.from_crs("EPSG:4326", proj, always_xy=True)
    if window is None:
        frame_lon = np.concatenate([np.full(50, -180.0), np.full(50, 180.0)])
        frame_lat = np.concatenate([np.linspace(-90, 90, 50)] * 2)
    else:
        frame_lon, frame_lat = window_outline(window)
    fx, fy = to_map.transform(frame_lon, frame_lat)
    return to_map, np.min(fx), np.max(fx), np.min(fy), np.max(fy)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _layout(fig: go.Figure, layers: PlanLayers) -> None:
    plan, k = layers.plan, layers.plan.kpis
    projection, _, window = _projection(layers)
    geo = {
        "projection": projection, "showland": True, "landcolor": LAND_COLOUR, "showocean": True,
        "oceancolor": OCEAN_COLOUR, "showcountries": True, "countrycolor": "white", "showcoastlines": False,
        "showframe": False, "resolution": 110,
    }
    if window is not None:
        geo["lonaxis"] = {"range": [window[0], window[2]]}
        geo["lataxis"] = {"range": [window[1], window[3]]}
    else:  # the whole globe, as the labels were placed for (plotly's default window for a world is not it)
        geo["lonaxis"] = {"range": [-180.0, 180.0]}
        geo["lataxis"] = {"range": [-90.0, 90.0]}
    aspect = _aspect(layers)
    traces = [t.meta["layer"] for t in fig.data]
    menu = [
        ("All layers", [True] * len(traces)),
        ("Sites and regions", [layer not in ("assignments", "flow-hover", "width-reference") for layer in traces]),
        ("Open sites only", [layer == "sites" for layer in traces]),
    ]
    kpis = (f"annual cost {money_at(plan.objective_usd_per_year, money_step_usd(plan))} · {int(k['sites_open'])} sites · "
            f"${k['usd_per_m_tokens']:.3f} per M tokens · mean RTT {k['mean_rtt_ms']:.1f} ms")
    footnote = (f"solved {plan.created_utc[:10]} with {esc(plan.solve.solver)} {esc(plan.solve.solver_version)} "
                f"({esc(status_word(plan))}) · scenario {plan.scenario_hash[:12]} · countries: Natural Earth 1:110m")
    # Title, KPIs and footnote stack in the top margin, left; the modebar keeps the top right.
    top_lines = [
        {"text": kpis, "yshift": 20, "font": {"size": 12, "color": "#2a3f5f"}, "name": "kpis"},
        {"text": footnote, "yshift": 4, "font": {"size": 10, "color": "#666"}, "name": "footnote"},
    ]
    fig.update_layout(
        title={"text": f"<b>{esc(variant_title(plan))}</b>", "x": 0.0, "xanchor": "left", "xref": "container", "y": 1.0,
               "yanchor": "top", "yref": "container", "pad": {"t": 8, "l": 8}, "font": {"size": 16}},
        annotations=[line | {"x": 0.0, "y": 1.0, "xref": "paper", "yref": "paper", "xanchor": "left", "yanchor": "bottom",
                             "showarrow": False, "align": "left"} for line in top_lines],
        geo=geo, margin={"l": 4, "r": LEGEND_COLUMN_PX, "t": TITLE_PX, "b": 4, "autoexpand": False}, autosize=True,
        legend={"title": {"text": "Layers (click to hide or show)"}, "groupclick": "togglegroup", "orientation": "v",
                "x": 1.005, "xanchor": "left", "y": 1.0, "yanchor": "top", "itemsizing": "trace", "bgcolor": "rgba(255,255,255,0.85)",
                "font": {"size": 11}, "tracegroupgap": 2},
        meta={"aspect": aspect},
        updatemenus=[{"type": "dropdown", "direction": "down", "x": 0.0, "xanchor": "left", "y": 1.0, "yanchor": "top",
                      "showactive": True, "bgcolor": "white", "font": {"size": 11},
                      "buttons": [{"label": label, "method": "restyle", "args": [{"visible": visible}]} for label, visible in menu]}],
        paper_bgcolor="white", hoverlabel={"font": {"size": 12}},
    )


TITLE_PX = 74  # the title, the KPI line and the footnote
LEGEND_COLUMN_PX = 290  # the legend beside the map in a wide window
# Runs after plotly drew the figure. The div fills the window (100vh) and plotly's
# `responsive` config redraws it on resize; this picks where the legend goes so the map is
# as large as it can be: in a column beside the map, or in rows under it (measured, not
# guessed: the horizontal legend is drawn once to learn its height). Margins are fixed,
# so nothing is pushed out of the window.
_FIT_SCRIPT = """
(function () {
  var gd = document.getElementById('{plot_id}');
  var aspect = %(aspect).4f, top = %(top)d, column = %(column)d, busy = false, lastSize = '';
  function side() {
    return {'margin.r': column, 'margin.b': 4, 'legend.orientation': 'v', 'legend.x': 1.005, 'legend.xanchor': 'left',
            'legend.y': 1, 'legend.yanchor': 'top', 'legend.entrywidth': 0, 'legend.title.side': 'top'};
  }
  function below(height) {
    return {'margin.r': 4, 'margin.b': height + 6, 'legend.orientation': 'h', 'legend.x': 0, 'legend.xanchor': 'left',
            'legend.y': 0, 'legend.yanchor': 'top', 'legend.entrywidthmode': 'fraction',
            'legend.entrywidth': window.innerWidth < 720 ? 0.48 : 0.32, 'legend.title.side': 'top'};
  }
  function fit() {
    var W = window.innerWidth, H = window.innerHeight, size = W + 'x' + H;
    if (busy || size === lastSize) { return; }
    busy = true; lastSize = size;
    Plotly.relayout(gd, below(0)).then(function () {
      var legend = gd.querySelector('.legend');
      var height = legend ? legend.getBoundingClientRect().height : 0;
      var mapBeside = Math.min(W - column - 4, (H - top - 8) * aspect);
      var mapBelow = Math.min(W - 8, (H - top - height - 14) * aspect);
      gd.dataset.legend = mapBeside > mapBelow ? 'side' : 'below';
      return Plotly.relayout(gd, mapBeside > mapBelow ? side() : below(height));
    }).then(function () { busy = false; gd.dataset.fitted = size; }, function () { busy = false; });
  }
  fit();
  window.addEventListener('resize', function () { setTimeout(fit, 50); });
})();
"""
_PAGE_STYLE = "<style>html,body{margin:0;padding:0;height:100%;overflow:hidden;background:white}</style>"


def offline_html(fig: go.Figure, title: str) -> str:
    """A complete HTML page: plotly.js inlined, the base map embedded, no network needed;
    the figure fills the window."""
    aspect = (fig.layout.meta or {}).get("aspect", 2.0)
    script = _FIT_SCRIPT % {"aspect": aspect, "top": TITLE_PX, "column": LEGEND_COLUMN_PX}
    page = pio.to_html(fig, include_plotlyjs=True, full_html=True, config=CONFIG, default_width="100%",
                       default_height="100vh", post_script=script)
    topojson = json.loads(geo_path("world_110m.json").read_text())
    # The base map must exist before plotly.js runs; "<\\/" keeps any "</" from closing the script tag.
    base_map = json.dumps(topojson, separators=(",", ":")).replace("</", "<\\/")
    assets = f"<script>window.PlotlyGeoAssets = {{topojson: {{world_110m: {base_map}}}}};</script>"
    head = f'<meta charset="utf-8" /><meta name="viewport" content="width=device-width, initial-scale=1" /><title>{esc(title)}</title>{_PAGE_STYLE}{assets}'
    if "<head>" not in page:
        raise RuntimeError("plotly's page has no <head>; cannot embed the base map")
    return page.replace("<head>", f"<head>{head}", 1)


def save_html_map(layers: PlanLayers, out_dir: str | Path) -> list[Path]:
    """Write map.html into `out_dir`; returns its path in a list."""
    return save_maps(layers, out_dir, png=False, pdf=False, html=True)


def save_maps(layers: PlanLayers, out_dir: str | Path, png: bool = True, pdf: bool = True, html: bool = True,
              extent: str = "auto") -> list[Path]:
    """The maps asked for (map.png, map.pdf, map.html) into `out_dir`, all drawn before any is
    written and moved into place together: a map that cannot be drawn leaves none of them."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    from dcplace.reports.staticmap import static_map_files, write_files

    check_destination(out_dir, "report")  # refuse a bad --out before drawing, not after
    files = static_map_files(layers, png, pdf, extent) if (png or pdf) else {}
    if html:
        files["map.html"] = offline_html(plan_figure(layers), f"dcplace map — {variant_title(layers.plan)}").encode("utf-8")
    return write_files(out_dir, files)
