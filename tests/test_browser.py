"""The HTML map and report in a real browser: Debian's Chromium, headless, network off.

The network is off in two ways at once: Chromium runs in a fresh network namespace with no
interface but a down loopback (`unshare -n`, where the kernel allows it), and it is told to
resolve no host name and to use a proxy that does not exist. A page that needed a CDN would
draw nothing. .ci/run installs chromium and sets DCPLACE_REQUIRE_SYSTEM_TOOLS=1, which turns
a missing browser into a failure rather than a skip.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shutil
import subprocess
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import HOSTILE_SCENARIO, HOSTILE_SITE, hostile_world_scenario
from PIL import Image

from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import load_plan_layers, save_html_map, save_report
from dcplace.reports.htmlmap import plan_figure
from dcplace.reports.style import LAND_COLOUR, ROLE_COLOURS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

if CHROMIUM is None:
    if os.environ.get("DCPLACE_REQUIRE_SYSTEM_TOOLS") == "1":
        raise RuntimeError("DCPLACE_REQUIRE_SYSTEM_TOOLS=1 but no chromium on PATH; install it with `apt-get install chromium`")
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)


@lru_cache(maxsize=1)
def _no_network_prefix() -> tuple[str, ...]:
    try:
        ok = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ("unshare", "-n") if ok else ()


def headless(page: Path, profile: Path, screenshot: Path | None = None, size: tuple[int, int] = (1400, 900)) -> str:
    """Open `page` in headless Chromium with no network; return the DOM after scripts ran."""
    args = [
        *_no_network_prefix(), CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", f"--window-size={size[0]},{size[1]}",
    ]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    done = subprocess.run([*args, page.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    if screenshot:
        assert screenshot.exists(), done.stderr[-2000:]
    return done.stdout


class _TraceCounter(HTMLParser):
    """Counts plotly's marker paths (`path.point`) inside each `g.trace.scattergeo`, in order."""

    def __init__(self):
        super().__init__()
        self.depth = 0
        self.trace_depth: int | None = None
        self.counts: list[int] = []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "g":
            self.depth += 1
            if "trace" in classes and "scattergeo" in classes:
                self.trace_depth = self.depth
                self.counts.append(0)
        elif tag == "path" and self.trace_depth is not None and "point" in classes:
            self.counts[-1] += 1

    def handle_endtag(self, tag):
        if tag == "g":
            if self.trace_depth == self.depth:
                self.trace_depth = None
            self.depth -= 1


def _pixels_near(image: Image.Image, hex_colour: str, tolerance: int = 12) -> int:
    r0, g0, b0 = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return sum(
        count for count, (r, g, b) in image.convert("RGB").getcolors(maxcolors=1 << 24)
        if abs(r - r0) <= tolerance and abs(g - g0) <= tolerance and abs(b - b0) <= tolerance
    )


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    solve_to_folder(hostile_world_scenario(root / "scenario"), root / "plan")
    layers = load_plan_layers(root / "plan")
    save_html_map(layers, root / "out")
    save_report(layers, root / "out", pdf=False)
    return root, layers


def test_html_map_draws_offline(outputs):
    root, layers = outputs
    shot = root / "map.png"
    headless(root / "out" / "map.html", root / "profile-map-shot", screenshot=shot)
    image = Image.open(shot)
    total = image.width * image.height
    # The base map drew (land fills a good part of the frame) ...
    assert _pixels_near(image, LAND_COLOUR, 4) > 0.08 * total
    # ... and every site role in the plan shows in its colour.
    for role in set(layers.sites.loc[layers.sites["open"], "role"]):
        assert _pixels_near(image, ROLE_COLOURS[role], 25) > 40, role


def test_html_map_has_every_marker_and_runs_no_hostile_script(outputs):
    root, layers = outputs
    dom = headless(root / "out" / "map.html", root / "profile-map-dom")
    counter = _TraceCounter()
    counter.feed(dom)
    figure = plan_figure(layers)
    # legend-only traces (the size key, the loss entry with no ring) hold one None point: nothing drawn
    expected = [0 if trace.mode == "lines" else sum(x is not None for x in trace.lon) for trace in figure.data]
    assert counter.counts == expected
    site_markers = sum(n for n, trace in zip(counter.counts, figure.data) if trace.meta["layer"] == "sites")
    assert site_markers == int(layers.sites["open"].sum()) == 3
    assert "<title>dcplace map — &lt;script&gt;document.title=" in dom  # the page title is the text; it did not run
    # plotly's own title shows the hostile scenario name character for character.
    drawn_title = re.search(r'<text class="gtitle".*?</text>', dom, re.S).group(0)
    assert html.unescape(re.sub(r"<[^>]+>", "", drawn_title)) == HOSTILE_SCENARIO
    assert HOSTILE_SITE not in dom  # the raw tag never becomes part of the document
    assert "<img src=\"x\"" not in dom and "<img src=x" not in dom


def test_report_renders_offline_with_names_as_text(outputs):
    root, layers = outputs
    shot = root / "report.png"
    headless(root / "out" / "report.html", root / "profile-report-shot", screenshot=shot, size=(1400, 2400))
    image = Image.open(shot)
    # The inline map image shows land and the role colours.
    assert _pixels_near(image, LAND_COLOUR, 4) > 0.02 * image.width * image.height
    for role in set(layers.sites.loc[layers.sites["open"], "role"]):
        assert _pixels_near(image, ROLE_COLOURS[role], 25) > 40, role

    dom = headless(root / "out" / "report.html", root / "profile-report-dom")
    assert "<script" not in dom  # no element of script was created from any name
    assert "<img src=\"x\"" not in dom
    title = dom.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.startswith("dcplace plan — &lt;script&gt;document.title=")  # the hostile title is text; it did not run
    # The hostile site name is a text cell of the site table, and images are inline data.
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in dom
    assert dom.count("<tr>") == 1 + int(layers.sites["open"].sum()) + 2  # sites header+rows, jobs header+row
    assert dom.count('src="data:image/') == 5  # the map and the cost chart on page 1 too (issue 49)


# A script appended (test only) to the map page: once the page's own fit script has laid the
# figure out for the window (`data-fitted`), it writes the boxes of what must be visible into
# the DOM, which --dump-dom then returns.
_MEASURE = """<script>
(function () {
  function box(el) { if (!el) { return null; } var r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }
  function measure() {
    var gd = document.querySelector('.plotly-graph-div');
    if (!gd || !gd.dataset.fitted) { setTimeout(measure, 100); return; }
    var out = {viewport: [window.innerWidth, window.innerHeight], legendMode: gd.dataset.legend,
      svg: box(gd.querySelector('.main-svg')), geo: box(gd.querySelector('.geo .bg rect')),
      title: box(gd.querySelector('.gtitle')), annotations: Array.from(gd.querySelectorAll('.annotation')).map(box),
      legend: box(gd.querySelector('.legend')), modebar: box(gd.querySelector('.modebar')),
      labels: Array.from(gd.querySelectorAll('.trace.scattergeo text')).map(function (t) { return [t.textContent, box(t)]; }),
      scroll: [document.documentElement.scrollWidth, document.documentElement.scrollHeight]};
    var pre = document.createElement('pre'); pre.id = 'dcplace-measure'; pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  setTimeout(measure, 100);
})();
</script>"""


@lru_cache(maxsize=1)
def _window_chrome_px(probe: str) -> int:
    """Headless Chromium's window is taller than its viewport (by about 143 px); measured once."""
    dom = headless(Path(probe), Path(probe).parent / "profile-probe", size=(1000, 800))
    return 800 - json.loads(re.search(r'<pre id="dcplace-measure">(.*?)</pre>', dom).group(1))["viewport"][1]


def _inside(box, width, height, slack=1.0):
    return box[0] >= -slack and box[1] >= -slack and box[2] <= width + slack and box[3] <= height + slack


def _overlap(a, b):
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


@pytest.mark.parametrize("viewport", [(1366, 768), (1920, 1080), (800, 600)])
def test_html_map_fits_the_window_with_labels_and_no_network(outputs, viewport):
    root, layers = outputs
    page = root / "out" / "map.html"
    measured = root / "measure.html"
    if not measured.exists():
        measured.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>", 1), encoding="utf-8")
    width, height = viewport
    extra = _window_chrome_px(str(measured))
    dom = headless(measured, root / f"profile-fit-{width}", size=(width, height + extra))
    m = json.loads(re.search(r'<pre id="dcplace-measure">(.*?)</pre>', dom).group(1))
    assert m["viewport"] == [width, height]
    assert m["scroll"] == [width, height]  # no scrolling: the page is exactly the window
    # The figure fills the window; the map's plot area, title, KPI lines and legend lie inside it.
    assert m["svg"] == [0, 0, width, height]
    for name in ("geo", "title", "legend"):
        assert _inside(m[name], width, height), (name, m[name], viewport)
    assert all(_inside(b, width, height) for b in m["annotations"])
    # No big blank area: the map takes at least half the window's height or 95 % of its width.
    geo_w, geo_h = m["geo"][2] - m["geo"][0], m["geo"][3] - m["geo"][1]
    assert geo_h >= 0.5 * height or geo_w >= 0.95 * width, (m["geo"], viewport)
    # The modebar covers neither the title nor the KPI lines.
    assert not _overlap(m["modebar"], m["title"]) and not any(_overlap(m["modebar"], b) for b in m["annotations"])
    # The legend does not cover the map.
    assert not _overlap(m["legend"], m["geo"])
    # Labels of the main sites are drawn, inside the window, not overlapping each other.
    labels = [(text, box) for text, box in m["labels"] if text]
    assert labels, viewport
    assert all(_inside(box, width, height) for _, box in labels), ([(t, b) for t, b in labels if not _inside(b, width, height)], m["geo"])
    for (_, a), (_, b) in itertools.combinations(labels, 2):
        assert not _overlap(a, b), (a, b)
    # Flow hover text is in the figure data the page holds (hover needs no network either).
    figure = plan_figure(layers)
    hover = [t for t in figure.data if t.meta["layer"] == "flow-hover"]
    assert hover and all(t.text and "→" in t.text[0] and "tok/s" in t.text[0] and "RTT" in t.text[0] for t in hover)


def test_html_map_makes_no_network_request(outputs):
    """Every URL the page could load is local: no src/href to http(s), and the page is drawn
    by the network-less browser above (a CDN dependency would leave the map empty)."""
    root, _ = outputs
    page = (root / "out" / "map.html").read_text(encoding="utf-8")
    markup = re.sub(r"<script\b.*?</script>", "", page, flags=re.S | re.I)  # plotly.js's own source holds URL strings
    assert not re.search(r"""(?:src|href)\s*=\s*["']?https?://""", markup, re.I)
    assert not re.search(r"""<script[^>]+src=""", page, re.I)  # every script is inline
    assert "cdn.plot.ly" not in page.split("window.PlotlyGeoAssets", 1)[1].split("</script>", 1)[0]
    assert "window.PlotlyGeoAssets" in page


_FIGURE_LINES = r"""<script>
(function () {
  var spans = Array.from(document.querySelectorAll('span.fig'));
  var broken = spans.filter(function (s) { return s.getClientRects().length !== 1; }).map(function (s) { return s.textContent; });
  // and every money or power figure anywhere in the text, inside a span.fig or not: its glyphs on one line
  var figure = /[-±]?\$\d[\d,]*(?:\.\d+)?\s(?:M|k|B)(?![\w])|\d[\d,]*(?:\.\d+)?\s(?:MW|kW|M tok\/s|k tok\/s|tok\/s|t CO₂\/yr)(?![\w])/g;
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), node, m, found = 0;
  while ((node = walker.nextNode())) {
    figure.lastIndex = 0;
    while ((m = figure.exec(node.data))) {
      var range = document.createRange(); range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      var tops = new Set(Array.from(range.getClientRects()).filter(function (r) { return r.width > 0; }).map(function (r) { return Math.round(r.top); }));
      found += 1;
      if (tops.size > 1) { broken.push(m[0]); }
    }
  }
  var pre = document.createElement('pre'); pre.id = 'dcplace-figures';
  pre.textContent = JSON.stringify({count: spans.length, figures: found, broken: broken});
  document.body.appendChild(pre);
})();
</script>"""


@pytest.mark.parametrize("width", [1366, 1400])
def test_report_never_splits_money_from_its_unit(outputs, width):
    """Issue 49: '$451.90⏎M' at 1,366-1,400 px. Every figure with its unit is one span kept on
    one line (white-space: nowrap), and every money, MW or tok/s figure of the page's text (in a
    KPI card, a header, a caption as well as a paragraph) has its glyphs on one line: measured in Chromium (a test copy without the page's CSP,
    which forbids any script)."""
    root, _ = outputs
    page = (root / "out" / "report.html").read_text(encoding="utf-8")
    page = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page).replace("</body>", _FIGURE_LINES + "</body>", 1)
    probe = root / f"figures-{width}.html"
    probe.write_text(page, encoding="utf-8")
    dom = headless(probe, root / f"profile-figures-{width}", size=(width, 900))
    found = json.loads(html.unescape(re.search(r'<pre id="dcplace-figures">(.*?)</pre>', dom).group(1)))
    assert found["count"] > 20 and found["figures"] > 20 and found["broken"] == [], found
