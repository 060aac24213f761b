"""Maps that show flows (issue 18, item 3): the static map's artists and the interactive
map's figure data. The browser side (viewports, labels drawn, no network) is in
tests/test_browser.py."""

from __future__ import annotations

import html

import numpy as np
import pytest
from helpers import europe_scenario, hostile_world_scenario
from matplotlib.colors import to_rgba

from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import load_plan_layers
from dcplace.reports.htmlmap import plan_figure
from dcplace.reports.mpl import plt
from dcplace.reports.staticmap import RING_GAP_PT, draw_static_map
from dcplace.reports.style import ROLE_MARKERS, flow_scale


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("flows-world")
    solve_to_folder(hostile_world_scenario(root / "s"), root / "plan")
    return load_plan_layers(root / "plan")


@pytest.fixture(scope="module")
def europe(tmp_path_factory):
    root = tmp_path_factory.mktemp("flows-europe")
    solve_to_folder(europe_scenario(root / "s"), root / "plan")
    return load_plan_layers(root / "plan")


def test_flow_scale_is_linear_round_and_floored():
    scale = flow_scale([3e6, 5e4, 2e3], max_width=7.0, min_width=0.3)
    assert scale.per_unit == 5e5  # a round number of tok/s per point, largest flow <= 7 pt
    assert scale.width([3e6, 1e6, 10.0]).tolist() == [6.0, 2.0, 0.3]
    assert scale.references == (2e6, 1e6, 5e5)


def test_static_line_widths_follow_tok_s_served(world):
    drawn = draw_static_map(world)
    try:
        lines = world.assignments
        served = {}
        for cls, collection in drawn.flows.items():
            widths = collection.get_linewidths()
            of_class = lines[lines["workload"] == cls].sort_values("served_tok_s", kind="stable")
            assert len(widths) == len(of_class)  # one segment per line: no antimeridian crossing here
            np.testing.assert_allclose(widths, drawn.flow_scale.width(of_class["served_tok_s"]))
            served.update(zip(widths, of_class["served_tok_s"]))
        all_widths = np.concatenate([c.get_linewidths() for c in drawn.flows.values()])
        assert len(set(np.round(all_widths, 6))) > 1, "widths must differ with tok/s served"
        # Wider means more tok/s.
        pairs = sorted(served.items())
        assert all(a[1] <= b[1] for a, b in zip(pairs, pairs[1:]))
    finally:
        plt.close(drawn.figure)


def test_static_legend_colours_are_the_line_colours(world):
    drawn = draw_static_map(world)
    try:
        entries = {text.get_text(): handle for text, handle in zip(drawn.legend.get_texts(), drawn.legend.legend_handles)}
        names = {w.id: w.name for w in world.scenario.catalog.workloads}
        assert drawn.flows
        for cls, collection in drawn.flows.items():
            line_colours = {tuple(np.round(c, 6)) for c in collection.get_edgecolor()}
            assert len(line_colours) == 1
            handle = entries[names[cls]]
            assert tuple(np.round(to_rgba(handle.get_color(), handle.get_alpha()), 6)) in line_colours
        # Width references: two or three, each drawn at the width of the stated scale.
        refs = [(t, h) for t, h in entries.items() if t.endswith("tok/s")]
        assert 1 <= len(refs) <= 3
        for _, handle in refs:
            assert handle.get_linewidth() >= 2 * drawn.flow_scale.min_width
    finally:
        plt.close(drawn.figure)


def test_static_sites_by_role_symbol_and_candidates_above_regions(europe):
    drawn = draw_static_map(europe)
    try:
        assert drawn.regional
        closed = int((~europe.sites["open"]).sum())
        assert closed > 0 and len(drawn.candidates.get_offsets()) == closed
        assert drawn.candidates.get_zorder() > drawn.regions.get_zorder()
        assert all(c.get_zorder() < drawn.regions.get_zorder() for c in drawn.flows.values())  # flows under the dots
        assert to_rgba(drawn.candidates.get_facecolor()[0]) == to_rgba("white")  # a visible ring, not a hole
        for role, artist in drawn.sites.items():
            assert artist.get_zorder() > drawn.candidates.get_zorder()
            assert role in ROLE_MARKERS
        # Labels: the open sites here are few, so all are labelled, none overlapping.
        assert len(drawn.labels) == int(europe.sites["open"].sum())
    finally:
        plt.close(drawn.figure)


def test_html_flows_have_width_colour_and_hover(world):
    fig = plan_figure(world)
    flows = [t for t in fig.data if t.meta["layer"] == "assignments"]
    hover = [t for t in fig.data if t.meta["layer"] == "flow-hover"]
    assert flows and hover
    assert len({t.line.width for t in flows}) > 1  # width by tok/s
    colours = {t.meta["workload"]: t.line.color for t in flows}
    for t in hover:
        assert t.hoverlabel.bgcolor == colours[t.meta["workload"]]
    texts = [text for t in hover for text in t.text]
    assert len(texts) == 3 * len(world.assignments)
    for a in world.assignments.itertuples():
        assert any(f"{a.served_tok_s:,.0f} tok/s" in text and f"RTT {a.rtt_ms:.1f} ms" in text for text in texts)
    assert all("→" in text for text in texts)


def test_html_candidates_above_regions_and_main_sites_labelled(europe, world):
    for layers in (europe, world):
        fig = plan_figure(layers)
        order = [t.meta["layer"] for t in fig.data]
        assert order.index("candidates") > order.index("regions")
        sites = [t for t in fig.data if t.meta["layer"] == "sites"]
        labels = [text for t in sites for text in t.texttemplate if text]
        assert labels, "the main open sites carry text labels"
        assert all(t.mode == "markers+text" for t in sites)


def test_html_site_hover_says_what_its_loss_costs(world):
    """Each open site's hover carries its row of the outage table (the same LP as `dcplace outages`)."""
    from dcplace.optimizer.studies.outages import outages_of

    table = {o.site: o for o in outages_of(world.plan, world.scenario).outages}
    fig = plan_figure(world)
    hovers = {site: text for t in fig.data if t.meta["layer"] == "sites" for site, text in zip(t.customdata, t.text)}
    assert set(hovers) == set(table)
    for site, outage in table.items():
        text = hovers[site]
        assert "if lost:" in text
        if outage.at_risk_total_tok_s > 1e-6:
            assert "at risk" in text and html.escape(outage.regions_at_risk()[0].region_name) in text
        elif outage.lost_total_tok_s > 0:
            assert "re-served within the failover budgets" in text
        if outage.jobs:
            assert f"{len(outage.jobs)} training job(s) stall" in text


def _legend_texts(drawn) -> list[str]:
    return [text.get_text() for text in drawn.legend.get_texts()]


def test_static_map_without_a_policy_rings_nothing_and_names_the_worst_loss(world):
    """Issue 49 (reversing issue 16's rings on every short site): with no N-1 policy a ring would
    mark nearly every site and say nothing, so none is drawn; the legend says no policy is set
    and names the worst loss with its share of peak, inside the figure."""
    from dcplace.optimizer.studies.outages import outages_of

    table = outages_of(world.plan, world.scenario)
    short = {o.site for o in table.outages if o.at_risk_total_tok_s > 1e-6}
    drawn = draw_static_map(world)
    try:
        assert short, "the hostile world's plan has no N-1 policy: some loss must leave demand short"
        assert drawn.ringed == [] and drawn.rings is None
        texts = _legend_texts(drawn)
        assert f"If one of {len(table.outages)} open\nsites is lost" in texts
        assert "no N-1 policy set\n(survive_site_loss): no rings" in texts
        worst = max(table.outages, key=lambda o: (o.at_risk_total_tok_s, o.gpu_days_at_risk))
        share = worst.at_risk_total_tok_s / sum(o.lost_total_tok_s for o in table.outages)
        assert any(t.startswith(f"worst: {worst.name[:8]}") and t.endswith(f"short ({share:.0%})") for t in texts)
        assert all(not text.get_parse_math() for text in drawn.legend.get_texts())  # '$1$' in a name stays text
        assert _legend_inside_page(drawn)
    finally:
        plt.close(drawn.figure)


def _legend_inside_page(drawn) -> bool:
    box = drawn.legend.get_window_extent(drawn.figure.canvas.get_renderer())
    page = drawn.figure.bbox
    return page.x0 <= box.x0 and box.x1 <= page.x1 + 0.5 and page.y0 <= box.y0 + 0.5 and box.y1 <= page.y1 + 0.5


@pytest.mark.parametrize("width_in", [14.0, 8.0])
def test_static_legend_stays_on_the_page(world, width_in):
    """The figure is saved as drawn: a legend taller than the map (a small page, many entries)
    is laid out tighter, then in two columns, and the map narrows until it ends inside the page."""
    drawn = draw_static_map(world, width_in=width_in)
    try:
        assert _legend_inside_page(drawn)
        if width_in == 8.0:  # 4 in tall: one roomy column would run off the bottom
            assert drawn.legend.labelspacing < 1.0
    finally:
        plt.close(drawn.figure)


def test_static_map_of_an_n1_secure_plan_rings_nothing_and_says_so(tmp_path):
    """Three sites around one town, chat must survive the loss of any one (the hand-derived
    case of tests/test_resilience.py): no ring, and the legend says no loss breaks the policy.
    The same town without the policy: its one open site's loss leaves the town short."""
    from helpers import make_scenario, region, site

    sites = [site("a", 0, 0), site("b", 0, 0.2), site("c", 0.2, 0)]
    town = [region("town", 0.1, 0.1, chat=4800, budget=50)]
    for name, policies in (("n1", {"survive_site_loss": {"chat": 1.0}}), ("today", {})):
        solve_to_folder(make_scenario(tmp_path / name, sites=sites, regions=town, policies=policies), tmp_path / f"{name}-plan")
    secure = draw_static_map(load_plan_layers(tmp_path / "n1-plan"))
    today = draw_static_map(load_plan_layers(tmp_path / "today-plan"))
    try:
        assert secure.ringed == [] and secure.rings is None
        assert "none breaks\nsurvive_site_loss" in _legend_texts(secure)
        assert secure.outages.secure is True
        open_today = [o.site for o in today.outages.outages]
        assert today.ringed == [] and len(open_today) == 1  # no policy, no ring (issue 49): the legend says what a loss costs
        assert "worst: " + today.outages.outages[0].name[:8] in " ".join(_legend_texts(today))
        assert any(t.endswith("short (100%)") for t in _legend_texts(today))
    finally:
        plt.close(secure.figure)
        plt.close(today.figure)


def test_the_maps_and_the_report_section_share_one_outage_table(world, monkeypatch):
    """Each open site's loss is re-routed once per plan read (PlanLayers.outages), however many
    outputs show it: the static map, the HTML map and the report's section."""
    import dcplace.optimizer.studies.outages as studies
    from dcplace.reports.outages import outages_section

    calls = []
    real = studies.outages_of
    monkeypatch.setattr(studies, "outages_of", lambda *args, **kwargs: calls.append(args) or real(*args, **kwargs))
    layers = load_plan_layers(world.folder)
    drawn = draw_static_map(layers)
    try:
        plan_figure(layers)
        section = outages_section(layers)
    finally:
        plt.close(drawn.figure)
    assert len(calls) == 1
    assert drawn.outages is layers.outages and section is not None


def test_static_map_fits_a4_and_no_symbol_hides_another(tmp_path):
    """Issue 49: map.pdf is A4 landscape wide with labels at 7 pt or more (it was 14 x 7 in,
    labels at about 5.3 pt when printed on A4); a small site beside a larger one of a role drawn
    later is drawn again on top (Dubai was hidden in Doha's symbol, Tel Aviv in Cairo's)."""
    from helpers import job, make_scenario, region, site

    from dcplace.reports.staticmap import A4_LANDSCAPE_IN, LABEL_FONT_PT, static_map_files

    sites = [site("hub", 30.0, 50.0, name="Hub", cooling_allowed="air", power_price_usd_per_mwh=20, power_limit_kw=60000, floor_racks=5000),
             site("lab", 30.0, 50.4, name="Lab", power_price_usd_per_mwh=400, power_limit_kw=60000),
             site("far", 0.0, 0.0, name="Far", cooling_allowed="air", power_price_usd_per_mwh=400)]
    regions = [region("metro", 30.0, 50.1, chat=400_000, budget=3), region("edge", 0.1, 0.1, chat=800, budget=50)]
    solve_to_folder(make_scenario(tmp_path / "s", sites, regions, jobs=[job("tiny", 8)]), tmp_path / "plan")
    layers = load_plan_layers(tmp_path / "plan")
    roles = dict(zip(layers.sites["id"], layers.sites["role"]))
    drawn = draw_static_map(layers)
    try:
        w, h = drawn.figure.get_size_inches()
        assert w <= A4_LANDSCAPE_IN[0] + 1e-6 and h <= A4_LANDSCAPE_IN[1] + 1e-6
        assert LABEL_FONT_PT >= 7 and all(t.get_fontsize() >= 7 for t in drawn.figure.texts)
        assert (roles["hub"], roles["lab"]) == ("inference", "training"), roles
        assert drawn.raised == ["lab"]  # the lab's small square lies under the hub's big circle: drawn again on top
    finally:
        plt.close(drawn.figure)
    import re

    box = re.search(rb"/MediaBox \[ *0 0 ([\d.]+) ([\d.]+) *\]", static_map_files(layers, png=False)["map.pdf"])
    assert float(box.group(1)) <= 842 and float(box.group(2)) <= 596  # A4 landscape: 841.9 x 595.3 pt


def test_html_map_legend_is_whole_words_with_a_size_key_and_the_loss_entry(world):
    """Issue 49: legend names were cut mid-word ('Small-model chat (7-8B class: L… flows'); there
    was no size key and nothing on single-site losses. Without a policy: no ring on the map, and
    the entry says so and names the worst loss."""
    from dcplace.reports.htmlmap import plan_figure

    fig = plan_figure(world)
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    assert not any("…" in n for n in names), names
    keys = [t for t in fig.data if t.meta["layer"] == "size-key"]
    assert keys and all(t.name.startswith("size key: ") and t.name.endswith(" px wide)") for t in keys)
    (losses,) = [t for t in fig.data if t.meta["layer"] == "losses"]
    assert "no N-1 policy set" in losses.name and "worst loss:" in losses.name.replace("<br>", " ")
    assert list(losses.lon) == [None]  # no ring drawn without a policy
