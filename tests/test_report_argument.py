"""The executive report as an argument: the summary on PDF page 1 with the plan's own figures,
page numbers on every page, no text below 8 pt, per-class $/M tokens that a recomputation
from plan.json reproduces, and the small-site flag.

Font sizes are read from the PDF with poppler: `pdftotext -bbox-layout` gives every word's box,
and a word's box height is its font size times the font's (ascent - descent), the same factor
for every size of one font. The test calibrates that factor on a reference PDF it prints itself
with the report's engine (WeasyPrint, reports.pdf) in the report's font (DejaVu Sans, normal and
bold, 8 pt), so the threshold is "at least as tall as 8 pt text", whatever poppler's version. The
report's figures are images (the charts' SVG text is drawn as paths), so every word in its PDF
is the page's own text (tables, paragraphs, footers) and all of it is checked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import job, make_scenario, region, site

from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import load_plan_layers, save_report
from dcplace.reports.report import SMALL_SITE_FLAG, report_content

if shutil.which("pdftotext") is None or shutil.which("pdfinfo") is None:
    if os.environ.get("DCPLACE_REQUIRE_SYSTEM_TOOLS") == "1":
        raise RuntimeError("poppler-utils (pdfinfo, pdftotext) missing; apt-get install poppler-utils")
    pytest.skip("poppler-utils not installed (.ci/run installs it)", allow_module_level=True)

WORD = re.compile(r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">([^<]*)</word>')


def pdf_pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))


def page_text(pdf: Path, first: int, last: int | None = None) -> str:
    text = subprocess.run(["pdftotext", "-f", str(first), "-l", str(last or first), "-layout", str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout
    return re.sub(r"\s+", " ", text)


def word_boxes(pdf: Path) -> list[tuple[int, str, float]]:
    """(page, word, box height in pt) for every word of the PDF."""
    out = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    words = []
    for number, page in enumerate(out.split("<page ")[1:], start=1):
        for m in WORD.finditer(page):
            words.append((number, m[5], float(m[4]) - float(m[2])))
    return words


@pytest.fixture(scope="module")
def eight_pt_height(tmp_path_factory) -> float:
    from dcplace.reports.pdf import write_pdf

    path = tmp_path_factory.mktemp("calibrate") / "eight.pdf"
    write_pdf(path, '<html><body style="font-family: \'DejaVu Sans\'; font-size: 8pt"><p>Calibrate 8pt</p><p><b>Bold 8pt</b></p>'
                    '</body></html>')  # the report's engine and font (reports.pdf)
    heights = [h for _, _, h in word_boxes(path)]
    assert len(heights) == 4 and max(heights) - min(heights) < 0.05
    return min(heights)


# ----------------------------------------------------------------------------- a small site


@pytest.fixture(scope="module")
def small_site_plan(tmp_path_factory):
    """A hub near New York and one far site that alone reaches Los Angeles within 20 ms: it
    opens with one rack (400 tok/s) at a $2 M/yr fixed cost."""
    root = tmp_path_factory.mktemp("small")
    sites = [site("hub", 40.0, -74.0, name="Hub East"),
             site("far", 34.0, -118.0, name="Far West $1$ <b>", fixed_cost_usd_per_year=2_000_000)]
    regions = [region("ny", 40.1, -74.0, chat=1600, budget=20), region("la", 34.1, -118.0, chat=400, budget=20, name="Los Angeles")]
    solve_to_folder(make_scenario(root / "s", sites, regions, jobs=[job("big", 96)], name="small-site"), root / "plan")
    layers = load_plan_layers(root / "plan")
    save_report(layers, root / "report")
    return root, layers


def test_small_site_is_flagged_in_why_these_sites(small_site_plan):
    root, layers = small_site_plan
    far = next(s for s in layers.plan.sites if s.id == "far")
    assert far.open and far.racks_total == 1 and far.total_cost_usd_per_year > 2_000_000
    why = report_content(layers).section("why").blocks[1]
    rows = {row[0]: (row, flag) for row, flag in zip(why.rows, why.flagged)}
    row, flag = rows[far.name]
    assert flag and row[-1].startswith(SMALL_SITE_FLAG)
    assert "the only open site within the latency budget of Los Angeles" in row[-1]
    assert not rows["Hub East"][1]
    page = (root / "report" / "report.html").read_text()
    assert SMALL_SITE_FLAG in page and '<tr class="flag">' in page
    assert "Far West $1$ &lt;b&gt;" in page  # escaped, shown as typed
    pdf_text = page_text(root / "report" / "report.pdf", 1, pdf_pages(root / "report" / "report.pdf"))
    assert "small site: fixed" in pdf_text and "Far West $1$ <b>" in pdf_text


def test_small_plan_pdf_numbers_every_page_and_keeps_text_at_8pt(small_site_plan, eight_pt_height):
    root, layers = small_site_plan
    pdf = root / "report" / "report.pdf"
    n = pdf_pages(pdf)
    for i in range(1, n + 1):
        assert f"page {i} of {n}" in page_text(pdf, i), i
    small = [(p, w, h) for p, w, h in word_boxes(pdf) if h < eight_pt_height - 0.01]
    assert not small, small[:10]


# ----------------------------------------------------------------------------- the default plan (conftest: default_report)


def test_summary_is_on_page_1_with_the_training_site_and_total_cost(default_report):
    root, layers = default_report
    plan = json.loads((root / "plan" / "plan.json").read_text())
    text = page_text(root / "report" / "report.pdf", 1)
    assert "Executive summary" in text
    memo, text = text, page_text(root / "report" / "report.pdf", 1, 2)  # page 1 decides; the argument follows it
    by_site = defaultdict(float)
    for j in plan["jobs"]:
        by_site[j["site"]] += j["gpus_h100_equiv"]
    main = max(by_site, key=by_site.get)
    main_name = next(s["name"] for s in plan["sites"] if s["id"] == main)
    assert f"Training goes to {main_name}" in text
    # money on page 1 is rounded to what the solver's gap supports (issue 49)
    from dcplace.reports.economics import money_step_usd
    from dcplace.reports.summary import money_at

    step = money_step_usd(layers.plan)
    assert money_at(plan["objective_usd_per_year"], step) in memo
    assert money_at(plan["kpis"]["upfront_capex_usd"], step) in memo
    assert "per effective H100-year" in text and "median eligible site" in text
    # page 1 is the decision memo (recommendation, risks); the three assumptions follow it
    assert "three assumptions that matter most" in text


def test_class_cost_per_million_tokens_matches_a_recomputation(default_report):
    """Each inference rack line's cost to its class, tokens = served x load factor x hours x 3600;
    the default has no transport cost, and shared fixed costs are left out."""
    root, _ = default_report
    plan = json.loads((root / "plan" / "plan.json").read_text())
    assert plan["cost_breakdown_usd_per_year"].get("transport", 0.0) == 0.0
    import csv

    with open(root / "plan" / "inputs" / "catalog" / "workloads.csv") as fh:
        workloads = {r["id"]: (r["name"], float(r["load_factor"])) for r in csv.DictReader(fh)}
    cost, tokens = defaultdict(float), defaultdict(float)
    for s in plan["sites"]:
        for line in s["racks"]:
            if line["purpose"] == "inference":
                cost[line["workload"]] += sum(line["cost_usd_per_year"].values())
    for a in plan["assignments"]:
        tokens[a["workload"]] += a["served_tok_s"] * workloads[a["workload"]][1] * 8760 * 3600
    text = page_text(root / "report" / "report.pdf", 1, 2)  # the argument right after page 1's memo (issue 49)
    html = (root / "report" / "report.html").read_text()
    assert set(tokens) == set(workloads)  # every class of the default is served
    for w, t in tokens.items():
        expected = f"{workloads[w][0]}: ${cost[w] / (t / 1e6):,.3f} per M tokens"
        assert expected in text, expected
        assert expected in html, expected
    # The classes add up to the headline figure.
    assert sum(cost.values()) / (sum(tokens.values()) / 1e6) == pytest.approx(plan["kpis"]["usd_per_m_tokens"], rel=1e-9)


def test_default_pdf_numbers_every_page_and_keeps_text_at_8pt(default_report, eight_pt_height):
    root, _ = default_report
    pdf = root / "report" / "report.pdf"
    n = pdf_pages(pdf)
    assert n >= 6
    for i in range(1, n + 1):
        assert f"page {i} of {n}" in page_text(pdf, i), i
    words = word_boxes(pdf)
    small = [(p, w, round(h, 2)) for p, w, h in words if h < eight_pt_height - 0.01]
    assert not small, small[:10]
    # The appendix lists every candidate site.
    assert "Appendix: every candidate site" in page_text(pdf, 1, n)


def test_headings_are_never_alone_at_a_page_foot(default_report):
    """The last text line of a page (above the footer) is never a section heading."""
    root, layers = default_report
    pdf = root / "report" / "report.pdf"
    titles = {s.title for s in report_content(layers).sections}
    out = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    for number, page in enumerate(out.split("<page ")[1:], start=1):
        height = float(re.match(r'width="[\d.]+" height="([\d.]+)"', page)[1])
        lines = []
        for line in re.findall(r"<line[^>]*>(.*?)</line>", page, re.S):
            words = WORD.findall(line)
            if words:
                lines.append((float(words[0][1]), " ".join(w[4] for w in words)))
        body = [(y, text) for y, text in sorted(lines) if not text.startswith("page ") and "dcplace plan" not in text]
        assert body, number
        y, last = body[-1]
        assert not (last in titles and y > 0.5 * height), (number, last)  # (a heading above a figure is the last text)


# ----------------------------------------------------------------------------- page 1 decides (issue 49)


def _two_class_catalog():
    from helpers import catalog_with_class

    return catalog_with_class("bulk", "Bulk batch", 0.5, 50, 100)


@pytest.fixture(scope="module")
def n1_variant(tmp_path_factory):
    """Three sites around one town: chat must survive a site loss (the policy, given as --set
    would), bulk need not; a training job; a carbon price. Solved through load_scenario's
    overrides, as `dcplace solve --set` does."""
    from dcplace.models.scenario_file import load_scenario

    root = tmp_path_factory.mktemp("n1variant")
    sites = [site("a", 0, 0, name="Alpha"), site("b", 0, 0.2, name="Bravo"), site("c", 0.2, 0, name="Charlie")]
    regions = [region("town", 0.1, 0.1, chat=4800, budget=50, demand_bulk_tok_s=3200, rtt_budget_bulk_ms=50)]
    path = make_scenario(root / "s", sites, regions, jobs=[job("big", 96)], catalog=_two_class_catalog(), name="three-towns")
    overrides = {"policies.survive_site_loss": {"chat": 1}, "economics.carbon_price_usd_per_t": 100}
    scenario = load_scenario(path, overrides=overrides, overrides_origin="--set")
    solve_to_folder(scenario, root / "plan")
    layers = load_plan_layers(root / "plan")
    save_report(layers, root / "report")
    return root, layers


def test_page_1_opens_with_a_recommendation_and_a_risks_box(n1_variant):
    root, layers = n1_variant
    content = report_content(layers)
    first = content.section("summary").blocks[0]
    assert first.style == "decision" and first.texts[0].startswith("Build "), first
    opened = [s.name for s in layers.plan.sites if s.open]
    assert any(name in first.texts[0] for name in opened)
    text = page_text(root / "report" / "report.pdf", 1)
    assert "Risks of this plan" in text
    assert "Concentration: 100% of training" in text  # one job, one site
    assert "Single-site loss:" in text and "Solver:" in text


def test_page_1_names_protected_and_unprotected_classes_with_the_worst_loss(n1_variant):
    root, layers = n1_variant
    text = " ".join(page_text(root / "report" / "report.pdf", 1).split())
    assert "Protected against the loss of any one open site: Chat (100% of its demand" in text, text
    assert "NOT protected: Bulk batch" in text, text
    table = layers.outages
    if any(o.at_risk_tok_s.get("bulk", 0) > 1 for o in table.outages):
        assert "unserved" in text.split("NOT protected: Bulk batch")[1][:200]
    if any(o.jobs for o in table.outages):
        assert "Training is not covered by the policy: losing" in text and "job-days at risk" in text
    argument = " ".join(page_text(root / "report" / "report.pdf", 1, 2).split())
    assert "N-1 secure for Chat 100% only, not for Bulk batch" in argument or not layers.plan.solve.failover.get("secure")


def test_a_variant_says_what_it_is_in_plan_json_and_every_title(n1_variant):
    root, layers = n1_variant
    plan = json.loads((root / "plan" / "plan.json").read_text())
    assert plan["provenance"]["overrides"] == {"policies.survive_site_loss": {"chat": 1}, "economics.carbon_price_usd_per_t": 100}
    stored = json.loads((root / "plan" / "inputs" / "provenance.json").read_text())
    assert stored["overrides"] == plan["provenance"]["overrides"]
    title = report_content(layers).title
    assert title == "dcplace plan — three-towns · policies.survive_site_loss={chat: 1}; economics.carbon_price_usd_per_t=100", title
    assert page_text(root / "report" / "report.pdf", 1).startswith(title)
    from dcplace.reports.staticmap import draw_static_map

    fig = draw_static_map(layers).figure
    assert any(t.get_text().startswith(title) for t in fig.texts)
    renderer = fig.canvas.get_renderer()
    assert all(t.get_window_extent(renderer).x1 <= fig.bbox.width + 0.5 for t in fig.texts)  # the long title stays on the page
    from dcplace.reports.htmlmap import plan_figure

    assert "economics.carbon_price_usd_per_t=100" in plan_figure(layers).layout.title.text
    from dcplace.reports.export import metadata_rows

    assert dict(metadata_rows(layers, "2026-01-01T00:00:00Z"))["overrides"] == title.split(" · ", 1)[1]  # the GeoPackage's record
    from dcplace.optimizer.checker import check_plan_folder

    assert check_plan_folder(root / "plan").ok  # the provenance record stays consistent for the checker


def test_the_carbon_charge_is_apart_from_real_spend_on_page_1(n1_variant):
    root, layers = n1_variant
    plan = layers.plan
    carbon = plan.cost_breakdown_usd_per_year["carbon"]
    assert carbon > 0
    text = " ".join(page_text(root / "report" / "report.pdf", 1).split())
    assert "Carbon is priced at $100 per t CO₂" in text and "notional carbon charge" in text
    from dcplace.reports.economics import money_step_usd
    from dcplace.reports.summary import money_at

    step = money_step_usd(plan)
    assert f"real spend is {money_at(plan.objective_usd_per_year - carbon, step)} a year" in text


def test_money_on_page_1_is_rounded_to_what_the_gap_supports():
    from types import SimpleNamespace

    from dcplace.reports.economics import money_step_usd
    from dcplace.reports.summary import money_at

    def plan(objective, bound):
        return SimpleNamespace(solve=SimpleNamespace(objective_usd_per_year=objective, best_bound_usd_per_year=bound))

    assert money_step_usd(plan(451.9e6, 451.9e6 - 8.54e6)) == 1e6
    assert money_at(451_904_321.0, 1e6) == "$452 M"
    assert money_at(1_825_502_002.0, 1e7) == "$1,830 M"
    assert money_step_usd(plan(451.9e6, 451.9e6)) == 1e4
    assert money_at(451_904_321.0, 1e4) == "$451.90 M"
    assert money_at(451_904_321.0, 1e5) == "$451.9 M"


def test_html_keeps_money_with_its_unit(n1_variant):
    root, _ = n1_variant
    html = (root / "report" / "report.html").read_text()
    assert ".fig { white-space: nowrap; }" in html
    assert re.search(r'<span class="fig">\$[\d,.]+ (M|k)</span>', html)
    assert not re.search(r"[^>]\$[\d,.]+ M\b", re.sub(r'<span class="fig">[^<]*</span>', "", html.split("<main>")[1]))
