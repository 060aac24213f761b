"""The static map (PNG, PDF): an equal-area world or regional map of a plan.

Sites are symbols by role (square training, circle inference, diamond mixed) in the
role's colour, with area proportional to IT MW; regions are neutral dots sized by demand;
unopened candidates are white rings drawn above the regions, so none hides under demand;
flows are the assignment lines (great circles, split at the antimeridian by the layer),
coloured by workload class, with width proportional to tok/s served on a stated scale
(`style.flow_scale`) and big flows drawn on top of small ones. Labels
are placed greedily, largest site first, at the first of eight positions around the
marker that overlaps no placed label and no other marker and lies nearer its own marker's
centre than any other open site's (so a reader pairs it with the right one); a label with
no free position is left out and counted in the footnote rather than drawn over another.
A red ring marks every open site whose loss leaves demand short (its row of the outage table,
optimizer.studies.outages: a class the policy names, or any class when it names none); the
legend says how many and names the worst, as the report's section and the HTML map's hover
say in full.

World plans use Equal Earth (EPSG:8857); a plan whose open sites and served regions fit
in a regional window gets a Lambert azimuthal equal-area projection centred on it.
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from pyproj import CRS, Transformer
from shapely.geometry import box

from dcplace.optimizer.studies.outages import OutageTable
from dcplace.reports.layers import PlanLayers, line_parts, plan_extent, robustness_legend, window_outline
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.output import check_destination, staged_files
from dcplace.reports.style import (
    BORDER_COLOUR, CLOSED_COLOUR, LAND_COLOUR, OCEAN_COLOUR, REGION_COLOUR, RISK_COLOUR, ROLE_COLOURS, ROLE_MARKERS, FlowScale,
    class_colours, countries, flow_scale, mw_text, nice_floor, tok_s_text, workload_classes,
)

WORLD_CRS = CRS("EPSG:8857")  # Equal Earth: equal-area, and a world that still looks like the world
MAX_MARKER_AREA_PT2 = 700.0  # the plan's largest site; area is proportional to IT MW below it
MIN_MARKER_AREA_PT2 = 28.0  # a 100 kW site must still be seen and its colour read
LABEL_FONT_PT = 7
LABEL_OFFSETS_PT = [(6, 0), (-6, 0), (0, 6), (0, -6), (5, 5), (-5, 5), (5, -5), (-5, -5)]
# farther out, joined to the symbol by a leader line (issue 49: a crowded site was left unlabelled)
LEADER_OFFSETS_PT = [(round(d * math.cos(a), 1), round(d * math.sin(a), 1)) for d in (18.0, 30.0, 45.0, 60.0)
                     for a in (math.radians(x) for x in (30, 150, 210, 330, 90, 270, 0, 180))]
FLOW_ALPHA = 0.6
FLOW_MAX_PT, FLOW_MIN_PT = 7.0, 0.3
RING_GAP_PT, RING_WIDTH_PT = 2.0, 1.2  # the outage ring: its stroke this far outside the site's symbol, this thick
Z_LINES, Z_REGIONS, Z_CANDIDATES, Z_SITES, Z_LABELS = 2, 3, 4, 5, 6


@dataclass
class StaticMap:
    """A drawn map: the figure, the labels placed (for tests and callers) and those left out."""

    figure: Figure
    crs: CRS
    regional: bool
    labels: list[Text] = field(default_factory=list)
    unlabelled: list[str] = field(default_factory=list)
    flow_scale: FlowScale | None = None
    flows: dict[str, LineCollection] = field(default_factory=dict)  # workload class -> its lines
    class_colours: dict[str, str] = field(default_factory=dict)
    regions: object = None  # the artists, for tests and callers: the region dots ...
    candidates: object = None  # ... the unopened candidates ...
    sites: dict[str, object] = field(default_factory=dict)  # ... and the open sites by role
    raised: list[str] = field(default_factory=list)  # site ids drawn again on top: another role's larger symbol overlapped them
    legend: object = None
    legend_entries: tuple = ()  # (handles, the headings among them)
    outages: OutageTable | None = None  # what each open site's loss costs ...
    ringed: list[str] = field(default_factory=list)  # ... and the site ids ringed for it, in the sites layer's order
    rings: object = None


@dataclass(frozen=True)
class MapScales:
    """The largest open site's IT MW, flow's tok/s and region's demand the symbols are sized
    against. Maps meant to be compared (a schedule's periods) share one, so that equal sizes
    mean equal MW; a lone map is sized against its own plan (`scales_of`)."""

    site_mw: float
    flow_tok_s: float
    region_tok_s: float


def scales_of(layers: PlanLayers) -> MapScales:
    open_mw = layers.sites.loc[layers.sites["open"], "it_mw"]
    flows = layers.assignments["served_tok_s"] if not layers.assignments.empty else []
    return MapScales(float(open_mw.max()) if len(open_mw) else 0.0, float(max(flows, default=0.0)),
                     float(layers.regions["demand_tok_s"].max()) if len(layers.regions) else 0.0)


def shared_scales(all_layers) -> MapScales:
    """One scale for several plans' maps: the largest of each."""
    each = [scales_of(layers) for layers in all_layers]
    return MapScales(max((m.site_mw for m in each), default=0.0), max((m.flow_tok_s for m in each), default=0.0),
                     max((m.region_tok_s for m in each), default=0.0))


A4_LANDSCAPE_IN = (11.69, 8.27)  # map.pdf is drawn at A4 landscape, so its 7 pt labels print at 7 pt


def draw_static_map(layers: PlanLayers, extent: str = "auto", width_in: float = A4_LANDSCAPE_IN[0],
                    scales: MapScales | None = None) -> StaticMap:
    """Draw the plan. `extent`: "auto" (regional when the plan fits one), "world"; `scales`: what
    symbol sizes are relative to (default: this plan's own largest site, flow and region)."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    if extent not in ("auto", "world"):
        raise ValueError(f"extent must be 'auto' or 'world', not {extent!r}")
    window = plan_extent(layers) if extent == "auto" else None
    if window is None:
        crs = WORLD_CRS
    else:
        lon0, lat0 = (window[0] + window[2]) / 2, (window[1] + window[3]) / 2
        crs = CRS.from_proj4(f"+proj=laea +lat_0={lat0:.4f} +lon_0={lon0:.4f} +datum=WGS84 +units=m +no_defs")
    to_map = Transformer.from_crs("EPSG:4326", crs, always_xy=True)

    height_in = width_in * (0.5 if window is None else 0.7)  # 8.18 in at A4 width: the page holds it
    fig, ax = plt.subplots(figsize=(width_in, height_in), dpi=100)
    fig.subplots_adjust(left=0.01, right=0.84, bottom=0.05, top=0.9)  # the legend sits to the right, never on data
    ax.set_axis_off()
    ax.set_aspect("equal")

    result = StaticMap(fig, crs, window is not None)
    scales = scales or scales_of(layers)
    _draw_base(ax, crs, window, to_map)
    _draw_flows(ax, layers, to_map, result, scales)
    _draw_regions(ax, layers, to_map, result, scales)
    site_xy, site_area = _draw_sites(ax, layers, to_map, result, scales)
    _draw_outage_rings(ax, layers, site_xy, site_area, result)
    _set_view(ax, window, to_map)

    _legend(ax, layers, result, scales)
    _fit_legend(ax, result)  # before the labels: they are placed in the map's final display box
    _raise_covered(ax, layers, site_xy, site_area, result)
    _place_labels(ax, layers, site_xy, site_area, result)
    _title_block(fig, layers, result)
    return result


def _draw_base(ax, crs: CRS, window, to_map: Transformer) -> None:
    land = countries()
    if window is not None:
        lon_min, lat_min, lon_max, lat_max = window
        # Clip before projecting: an azimuthal projection folds the far side of the globe.
        land = land.clip(box(lon_min - 30, max(-89, lat_min - 20), lon_max + 30, min(89, lat_max + 20)))
        land = land[~land.is_empty]
    else:
        outline = _world_outline(to_map)
        ax.fill(outline[:, 0], outline[:, 1], color=OCEAN_COLOUR, zorder=0)
        ax.plot(outline[:, 0], outline[:, 1], color="#c8d3dc", linewidth=0.8, zorder=0.5)
    land.to_crs(crs).plot(ax=ax, color=LAND_COLOUR, edgecolor=BORDER_COLOUR, linewidth=0.4, zorder=1)
    if window is not None:  # a framed ocean-coloured window instead of the world's outline
        ax.set_facecolor(OCEAN_COLOUR)
        ax.set_axis_on()
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("")
        ax.set_ylabel("")


def _world_outline(to_map: Transformer) -> np.ndarray:
    lats = np.linspace(-90, 90, 181)
    lons = np.concatenate([np.full(181, -180.0), np.full(181, 180.0)])
    x, y = to_map.transform(lons, np.concatenate([lats, lats[::-1]]))
    return np.column_stack([x, y])


def _draw_flows(ax, layers: PlanLayers, to_map: Transformer, result: StaticMap, scales: MapScales) -> None:
    """One LineCollection per workload class, width by tok/s served, thin lines first."""
    lines = layers.assignments
    result.class_colours = class_colours(workload_classes(layers))
    result.flow_scale = flow_scale([scales.flow_tok_s], FLOW_MAX_PT, FLOW_MIN_PT)
    if lines.empty:
        return
    widths = result.flow_scale.width(lines["served_tok_s"].to_numpy())
    for cls, colour in result.class_colours.items():
        segments, seg_widths = [], []
        of_class = np.flatnonzero((lines["workload"] == cls).to_numpy())
        for i in of_class[np.argsort(widths[of_class], kind="stable")]:
            for lons, lats in line_parts(lines.geometry.iat[i]):  # LineString or MultiLineString
                x, y = to_map.transform(np.asarray(lons), np.asarray(lats))
                segments.append(np.column_stack([x, y]))
                seg_widths.append(widths[i])
        if segments:
            collection = LineCollection(segments, colors=colour, linewidths=seg_widths, alpha=FLOW_ALPHA, zorder=Z_LINES,
                                        capstyle="round", label=f"flows {cls}")
            ax.add_collection(collection)
            result.flows[cls] = collection


def _draw_regions(ax, layers: PlanLayers, to_map: Transformer, result: StaticMap, scales: MapScales) -> None:
    regions = layers.regions
    x, y = to_map.transform(regions.geometry.x.to_numpy(), regions.geometry.y.to_numpy())
    demand = regions["demand_tok_s"].to_numpy()
    sizes = 2 + 30 * np.sqrt(demand / max(scales.region_tok_s, 1.0))
    result.regions = ax.scatter(x, y, s=sizes, color=REGION_COLOUR, alpha=0.45, linewidths=0, zorder=Z_REGIONS)


def _marker_area(it_mw, mw_max: float) -> np.ndarray:
    """Area proportional to IT MW, the plan's largest site at MAX_MARKER_AREA_PT2 (so a
    small plan is as legible as a large one), never below MIN_MARKER_AREA_PT2."""
    return np.maximum(MIN_MARKER_AREA_PT2, MAX_MARKER_AREA_PT2 * np.asarray(it_mw, dtype=float) / mw_max)


def _draw_sites(ax, layers: PlanLayers, to_map: Transformer, result: StaticMap, scales: MapScales) -> tuple[np.ndarray, np.ndarray]:
    sites = layers.sites
    x, y = to_map.transform(sites.geometry.x.to_numpy(), sites.geometry.y.to_numpy())
    closed = ~sites["open"].to_numpy()
    # Unopened candidates: white rings above the region dots (a demand region often sits on
    # the same city) and the flows, below the open sites.
    result.candidates = ax.scatter(x[closed], y[closed], s=22, facecolors="white", edgecolors=CLOSED_COLOUR, linewidths=0.9,
                                   zorder=Z_CANDIDATES)
    area = np.where(closed, 0.0, _marker_area(sites["it_mw"].to_numpy(), scales.site_mw if scales.site_mw > 0 else 1.0))
    roles = sites["role"].to_numpy()
    for role, marker in ROLE_MARKERS.items():
        idx = np.flatnonzero(~closed & (roles == role))
        if not len(idx):
            continue
        idx = idx[np.argsort(-area[idx])]  # big symbols first so small ones stay visible on top
        result.sites[role] = ax.scatter(x[idx], y[idx], s=area[idx], marker=marker, color=ROLE_COLOURS[role], alpha=0.85,
                                        edgecolors="white", linewidths=0.8, zorder=Z_SITES)
    return np.column_stack([x, y]), area


def _draw_outage_rings(ax, layers: PlanLayers, site_xy: np.ndarray, site_area: np.ndarray, result: StaticMap) -> None:
    """A ring just outside the symbol of every open site whose loss breaks (OutageTable.breaks)."""
    result.outages = table = layers.outages
    # a ring says "this loss breaks the stated policy": with no policy nothing is ringed (a ring
    # on every site says nothing); the legend then names the worst loss as text (issue 49)
    breaking = {o.site for o in table.outages if table.survive_site_loss and table.breaks(o)}
    ids = layers.sites["id"].to_numpy()
    idx = np.flatnonzero([site in breaking and area > 0 for site, area in zip(ids, site_area)])
    result.ringed = [str(ids[i]) for i in idx]
    if len(idx):
        diameter_pt = np.sqrt(site_area[idx] * 4 / math.pi) + 2 * RING_GAP_PT
        result.rings = ax.scatter(site_xy[idx, 0], site_xy[idx, 1], s=diameter_pt ** 2, marker="o", facecolors="none",
                                  edgecolors=RISK_COLOUR, linewidths=RING_WIDTH_PT, zorder=Z_SITES)


def _raise_covered(ax, layers: PlanLayers, site_xy: np.ndarray, site_area: np.ndarray, result: StaticMap) -> None:
    """No symbol hides another: each role's symbols are one layer (smallest on top within it), so
    a small site of one role beside a large one of a role drawn later (Dubai by Doha, Tel Aviv by
    Cairo) would lie under it. Such a site is drawn again above every role's layer, as it is."""
    renderer_scale = ax.figure.dpi / 72.0
    display = ax.transData.transform(site_xy)
    roles = layers.sites["role"].to_numpy()
    order = {role: k for k, role in enumerate(ROLE_MARKERS)}
    radius = np.sqrt(site_area / math.pi) * renderer_scale
    open_idx = [i for i in range(len(site_area)) if site_area[i] > 0 and roles[i] in order]
    covered = []
    for i in open_idx:
        for j in open_idx:
            if (site_area[j] > site_area[i] and order[roles[j]] > order[roles[i]]
                    and np.hypot(*(display[i] - display[j])) < radius[i] + radius[j]):
                covered.append(i)
                break
    result.raised = [str(layers.sites["id"].iat[i]) for i in covered]
    for role, marker in ROLE_MARKERS.items():
        idx = [i for i in covered if roles[i] == role]
        if idx:
            idx = sorted(idx, key=lambda i: -site_area[i])
            ax.scatter(site_xy[idx, 0], site_xy[idx, 1], s=site_area[idx], marker=marker, color=ROLE_COLOURS[role], alpha=0.95,
                       edgecolors="white", linewidths=0.8, zorder=Z_SITES + 0.5)


def _outage_legend_lines(table: OutageTable) -> list[str]:
    """The legend's entries under 'If one of N open sites is lost': the ring's (when any site
    is ringed: every open site whose loss breaks), the worst loss and the training that stalls,
    each on at most two lines."""
    breaking = [o for o in table.outages if table.survive_site_loss and table.breaks(o)]
    if breaking:
        lines = [f"{len(breaking)} ringed: the loss\nbreaks survive_site_loss"]
    elif table.survive_site_loss:
        lines = ["none breaks\nsurvive_site_loss"]
    else:
        lines = ["no N-1 policy set\n(survive_site_loss): no rings"]
    worst = max(breaking, key=lambda o: o.at_risk_total_tok_s) if breaking else table.worst()
    if not table.survive_site_loss and (worst is None or worst.at_risk_total_tok_s <= 0):
        lines.append("every loss re-served\nin its failover budget")
    if worst is not None and worst.at_risk_total_tok_s > 0:
        share = worst.at_risk_total_tok_s / max(table.served_tok_s, 1e-9)
        if breaking or not table.survive_site_loss:
            lines.append(f"worst: {_wrap(worst.name, 16).splitlines()[0]},\n{tok_s_text(worst.at_risk_total_tok_s)} short ({share:.0%})")
        else:  # what is short lies in classes the policy leaves out
            lines.append(f"other classes short, worst:\n{_wrap(worst.name, 10).splitlines()[0]}, {tok_s_text(worst.at_risk_total_tok_s)}")
    stalls = sum(1 for o in table.outages if o.jobs)
    if stalls:
        lines.append(f"training stalls: {stalls} site{'s' if stalls > 1 else ''}")
    return lines


def _set_view(ax, window, to_map: Transformer) -> None:
    if window is None:
        ax.autoscale_view()
        return
    x, y = to_map.transform(*window_outline(window))
    ax.set_xlim(np.min(x), np.max(x))
    ax.set_ylim(np.min(y), np.max(y))


def _place_labels(ax, layers: PlanLayers, site_xy: np.ndarray, site_area: np.ndarray, result: StaticMap) -> None:
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    pixels_per_pt = fig.dpi / 72.0
    display = ax.transData.transform(site_xy)
    open_idx = [i for i in np.argsort(-site_area) if site_area[i] > 0]
    open_centres = display[open_idx]  # a label's marker must be the open site nearest to it (nearest_marker)
    ringed = set(result.ringed)
    ids = layers.sites["id"].to_numpy()
    outside_pt = np.array([RING_GAP_PT + RING_WIDTH_PT / 2 if site in ringed else 0.0 for site in ids])  # a ring widens the symbol
    marker_boxes = []
    for i in open_idx:
        radius = (math.sqrt(site_area[i] / math.pi) + outside_pt[i]) * pixels_per_pt
        cx, cy = display[i]
        marker_boxes.append((i, Bbox.from_extents(cx - radius, cy - radius, cx + radius, cy + radius)))
    placed: list[Bbox] = []
    sites = layers.sites
    for rank, i in enumerate(open_idx):
        text = f"{sites['name'].iat[i]}  {mw_text(sites['it_mw'].iat[i])}"
        radius_pt = math.sqrt(site_area[i] / math.pi) + outside_pt[i]
        for k, (dx, dy) in enumerate(LABEL_OFFSETS_PT + LEADER_OFFSETS_PT):
            leader = k >= len(LABEL_OFFSETS_PT)
            scale = (radius_pt + 2) / max(abs(dx), abs(dy)) if not leader else 1.0
            if leader:
                dx, dy = dx + math.copysign(radius_pt, dx) if dx else 0.0, dy + math.copysign(radius_pt, dy) if dy else 0.0
            label = ax.annotate(
                text, xy=tuple(site_xy[i]), xytext=(dx * scale, dy * scale), textcoords="offset points",
                fontsize=LABEL_FONT_PT, ha="left" if dx > 0 else "right" if dx < 0 else "center",
                va="bottom" if dy > 0 else "top" if dy < 0 else "center", zorder=Z_LABELS,
                annotation_clip=False, parse_math=False,  # a '$' in a site name is text, not TeX
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "linewidth": 0},
                arrowprops={"arrowstyle": "-", "color": "#444444", "lw": 0.6, "shrinkA": 0, "shrinkB": radius_pt} if leader else None,
            )
            # the text's own box (an Annotation's extent also spans its leader line)
            label.update_positions(renderer)
            extent = Text.get_window_extent(label, renderer).expanded(1.02, 1.05)
            clear = (
                axes_box.contains(extent.x0, extent.y0) and axes_box.contains(extent.x1, extent.y1)
                and not any(extent.overlaps(b) for b in placed)
                and not any(extent.overlaps(b) for j, b in marker_boxes if j != i)
                # next to its symbol a label must be nearest to it; a far one has its leader line to say whose it is
                and (leader or nearest_marker(extent, open_centres) == rank)
            )
            if clear:
                placed.append(extent)
                result.labels.append(label)
                break
            label.remove()
        else:
            result.unlabelled.append(str(sites["name"].iat[i]))


def nearest_marker(box: Bbox, centres: np.ndarray) -> int:
    """Index of the centre (display coordinates) nearest to `box`; the first on a tie."""
    dx = np.maximum.reduce([box.x0 - centres[:, 0], np.zeros(len(centres)), centres[:, 0] - box.x1])
    dy = np.maximum.reduce([box.y0 - centres[:, 1], np.zeros(len(centres)), centres[:, 1] - box.y1])
    return int(np.argmin(np.hypot(dx, dy)))


def _legend(ax, layers: PlanLayers, result: StaticMap, scales: MapScales) -> None:
    """Beside the map: site symbols by role, size references, flow colours by class (the
    lines' own colour and alpha) and reference widths on the map's scale, regions, candidates."""
    headings: list[Line2D] = []

    def heading(text: str) -> Line2D:
        headings.append(Line2D([], [], linestyle="", marker="", label=text))
        return headings[-1]

    handles = [heading("Sites by role\narea ∝ IT MW")]
    for role, marker in ROLE_MARKERS.items():
        if role in result.sites:
            handles.append(Line2D([], [], marker=marker, linestyle="", markersize=8, color=ROLE_COLOURS[role], alpha=0.85,
                                  markeredgecolor="white", label=f"{role}"))
    it_max = scales.site_mw
    if it_max > 0:
        references = sorted({nice_floor(it_max), nice_floor(it_max / 4), nice_floor(it_max / 20)}, reverse=True)
        # Only sizes above the smallest symbol: below it every site has the same size.
        for mw in [mw for mw in references if MAX_MARKER_AREA_PT2 * mw / it_max > MIN_MARKER_AREA_PT2]:
            handles.append(Line2D([], [], marker="o", linestyle="", markersize=math.sqrt(_marker_area(mw, it_max)), color="#bbbbbb",
                                  label=mw_text(mw)))
    handles.append(Line2D([], [], marker="o", linestyle="", markersize=math.sqrt(22), markerfacecolor="white",
                          markeredgecolor=CLOSED_COLOUR, markeredgewidth=0.9, label="candidate, not opened"))
    handles.append(Line2D([], [], marker="o", linestyle="", markersize=5, color=REGION_COLOUR, alpha=0.45, markeredgewidth=0,
                          label="demand region (size: tok/s)"))
    if result.outages is not None and result.outages.outages:
        handles.append(heading(f"If one of {len(result.outages.outages)} open\nsites is lost"))
        lines = _outage_legend_lines(result.outages)
        if result.ringed:
            handles.append(Line2D([], [], marker="o", linestyle="", markersize=9, markerfacecolor="none", markeredgecolor=RISK_COLOUR,
                                  markeredgewidth=RING_WIDTH_PT, label=lines.pop(0)))
        handles += [Line2D([], [], linestyle="", marker="", label=line) for line in lines]
    robust = robustness_legend(layers.sites)
    if robust:
        handles.append(heading("Over the inputs'\nranges (why\nrobustness)"))
        handles += [Line2D([], [], linestyle="", marker="", label=_wrap(line)) for line in robust]
    if result.flows:
        names = workload_classes(layers)
        handles.append(heading("Flows by class\nregion → site"))
        for cls, collection in result.flows.items():
            handles.append(Line2D([], [], color=collection.get_edgecolor()[0], linewidth=2.5, label=_wrap(names[cls])))
        scale = result.flow_scale
        handles.append(heading(f"Width ∝ tok/s served\n1 pt = {tok_s_text(scale.per_unit)}"))
        for ref in scale.references:
            handles.append(Line2D([], [], color="#555555", alpha=FLOW_ALPHA, linewidth=float(scale.width(ref)), solid_capstyle="butt",
                                  label=tok_s_text(ref)))
    result.legend_entries = (handles, headings)  # kept to lay the legend out again (_fit_legend)
    result.legend = _make_legend(ax, handles, headings, *LEGEND_LAYOUTS[0])


LEGEND_MARGIN_PX = 4
LEGEND_LAYOUTS = ((1.0, 1), (0.5, 1), (0.4, 2))  # (line spacing, columns), the roomiest first


def _make_legend(ax, handles: list, headings: list, spacing: float, columns: int):
    legend = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                       labelspacing=spacing, ncols=columns, borderpad=0.9, handlelength=2.6)
    for text, handle in zip(legend.get_texts(), handles):
        text.set_parse_math(False)  # a '$' in a site or class name is text, not TeX
        if any(handle is h for h in headings):
            text.set_fontweight("bold")
    return legend


def _fit_legend(ax, result: StaticMap) -> None:
    """Keep the legend beside the map inside the figure, which is saved as drawn: tighter lines,
    then two columns, while it runs off the page's bottom (many classes or long names); then
    narrow the map until its right edge ends inside the page."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    floor_px = fig.bbox.y0 + LEGEND_MARGIN_PX  # the footnote runs along the bottom left, under the map, not the legend
    for spacing, columns in LEGEND_LAYOUTS:
        if result.legend.get_window_extent(renderer).y0 >= floor_px - 0.5:
            break
        result.legend.remove()
        result.legend = _make_legend(ax, *result.legend_entries, spacing, columns)
    for _ in range(4):  # the map keeps its aspect, so its right edge moves by about what it is asked to
        over = result.legend.get_window_extent(renderer).x1 - (fig.bbox.x1 - LEGEND_MARGIN_PX)
        if over <= 0.5:
            return
        fig.subplots_adjust(right=fig.subplotpars.right - over / fig.bbox.width)


def _wrap(text: str, width: int = 22) -> str:
    """A legend entry on at most two lines of `width` characters (longer names end in …)."""
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > 2:
        lines = [lines[0], lines[1][: width - 1].rstrip() + "…"]
    return "\n".join(lines)


def _title_block(fig: Figure, layers: PlanLayers, result: StaticMap) -> None:
    plan, k = layers.plan, layers.plan.kpis
    from dcplace.reports.economics import money_step_usd
    from dcplace.reports.summary import money_at, status_word, variant_title

    title = fig.text(0.01, 0.965, f"dcplace plan — {variant_title(plan)}", fontsize=15, weight="bold", va="top", parse_math=False)
    # a variant's title names its changed inputs: it shrinks to fit the page's width (then wraps), never runs off it
    renderer = fig.canvas.get_renderer()
    room = fig.bbox.width * 0.98
    while title.get_window_extent(renderer).width > room and title.get_fontsize() > 9:
        title.set_fontsize(title.get_fontsize() - 1)
    if title.get_window_extent(renderer).width > room:
        chars = int(len(title.get_text()) * room / title.get_window_extent(renderer).width)
        title.set_text("\n".join(textwrap.wrap(title.get_text(), max(chars, 20))[:2]))
        title.set_fontsize(8)
    fig.text(
        0.01, 0.925,
        f"Annual cost {money_at(plan.objective_usd_per_year, money_step_usd(plan))}  ·  {int(k['sites_open'])} sites open  ·  "
        f"IT {mw_text(k['it_mw_inference'])} inference + {mw_text(k['it_mw_training'])} training  ·  "
        f"${k['usd_per_m_tokens']:.3f} per M tokens  ·  mean RTT {k['mean_rtt_ms']:.1f} ms",
        fontsize=10, va="top", parse_math=False,
    )
    projection = "Lambert azimuthal equal-area" if result.regional else "Equal Earth (EPSG:8857)"
    unlabelled = f"  ·  {len(result.unlabelled)} smaller sites unlabelled (no room)" if result.unlabelled else ""
    fig.text(
        0.01, 0.012,
        f"Solved {plan.created_utc[:10]} with {plan.solve.solver} {plan.solve.solver_version} ({status_word(plan)})  ·  "
        f"scenario {plan.scenario_hash[:12]}  ·  {projection}; countries: Natural Earth 1:110m{unlabelled}",
        fontsize=7, color="#555555", parse_math=False,
    )


def static_map_files(layers: PlanLayers, png: bool = True, pdf: bool = True, extent: str = "auto") -> dict[str, bytes]:
    """{"map.png": 200 dpi PNG, "map.pdf": vector PDF} as asked, drawn in memory (nothing written)."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    drawn = draw_static_map(layers, extent=extent)
    wanted = [("map.png", {"format": "png", "dpi": 200})] * png + [("map.pdf", {"format": "pdf"})] * pdf
    files = {}
    try:
        for name, how in wanted:
            buffer = io.BytesIO()
            drawn.figure.savefig(buffer, **how)
            files[name] = buffer.getvalue()
    finally:
        plt.close(drawn.figure)
    return files


def save_static_map(layers: PlanLayers, out_dir: str | Path, png: bool = True, pdf: bool = True, extent: str = "auto") -> list[Path]:
    """Write map.png (200 dpi) and/or map.pdf (vector) into `out_dir`; returns the paths."""
    layers = layers.for_display()  # names as outputs show them (reports.style.display_name)
    check_destination(out_dir, "report")  # refuse a bad --out before drawing, not after
    return write_files(out_dir, static_map_files(layers, png, pdf, extent))


def write_files(out_dir: str | Path, files: dict[str, bytes]) -> list[Path]:
    """Files drawn in memory into a report folder, all or none (one staging folder)."""
    with staged_files(out_dir, "report") as stage:
        for name, data in files.items():
            (stage.dir / name).write_bytes(data)
    return stage.moved
