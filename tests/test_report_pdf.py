"""report.pdf is report.html printed (reports/pdf.py, WeasyPrint): one template, read back with
poppler (issue 52: no hand-written PDF layout; issue 49: bookmarks, captions, no nearly blank
page, no figure split from its unit), and a machine without Pango still gets report.html.

The default plan's report is read with `pdftohtml -xml` (its outline: the PDF's bookmarks),
`pdftotext -bbox-layout` (lines and where they are) and `pdftoppm` (how far down each page the
ink goes).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import make_scenario, region, site
from PIL import Image
from typer.testing import CliRunner

from dcplace.cli import ExitCode, app
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import load_plan_layers, save_report
from dcplace.reports.pdf import APT_INSTALL, PdfEngineMissing
from dcplace.reports.report import report_content

if not all(shutil.which(tool) for tool in ("pdftotext", "pdfinfo", "pdftohtml", "pdftoppm")):
    if os.environ.get("DCPLACE_REQUIRE_SYSTEM_TOOLS") == "1":
        raise RuntimeError("poppler-utils (pdftotext, pdfinfo, pdftohtml, pdftoppm) missing; apt-get install poppler-utils")
    pytest.skip("poppler-utils not installed (.ci/run installs it)", allow_module_level=True)

runner = CliRunner()
LINE = re.compile(r"<line [^>]*>(.*?)</line>", re.S)
WORD = re.compile(r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">([^<]*)</word>')
# a figure and the unit that must stay on its line: "$451.90 M", "± $8 M", "11.2 M tok/s", "92 MW", "457,653 t CO₂/yr"
NUMBER_AT_END = re.compile(r"(?:\$|±)?-?\$?\d[\d,]*(?:\.\d+)?$")
UNIT_AT_START = re.compile(r"^(?:M|k|MW|kW|M/yr|tok/s|ms|%|t CO₂(?:/yr)?|job-days)(?![\w])")


def pdf_lines(pdf: Path) -> list[list[str]]:
    """Each page's text lines, top to bottom, as poppler reads them."""
    out = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = []
    for page in out.split("<page ")[1:]:
        lines = []
        for line in LINE.findall(page):
            words = WORD.findall(line)
            if words:
                lines.append((float(words[0][1]), float(words[0][0]), html.unescape(" ".join(w[4] for w in words))))
        pages.append([text for _, _, text in sorted(lines)])
    return pages


@pytest.fixture(scope="module")
def printed(default_report):
    """The default plan's report folder (tests/conftest.py writes it once a session) and its content."""
    root, layers = default_report
    return root / "report", report_content(layers)


def test_the_pdf_bookmarks_are_the_section_headings_in_order(printed):
    """Issue 49: 'The PDF has no bookmarks'. Its outline is the sections' titles, each pointing at
    the page where that heading is printed."""
    out, content = printed
    xml = subprocess.run(["pdftohtml", "-xml", "-i", "-stdout", "-q", str(out / "report.pdf")], capture_output=True, text=True,
                         check=True).stdout
    outline = [(int(page), html.unescape(title)) for page, title in re.findall(r'<item page="(\d+)">([^<]*)</item>', xml)]
    assert [title for _, title in outline] == [s.title for s in content.sections]
    pages = pdf_lines(out / "report.pdf")
    for page, title in outline:
        assert title in pages[page - 1], (page, title)
    assert [page for page, _ in outline] == sorted(page for page, _ in outline)


def test_every_table_has_its_caption_in_the_html_and_the_pdf(printed):
    out, content = printed
    page = (out / "report.html").read_text(encoding="utf-8")
    tables = re.findall(r'<table id="([^"]+)">\s*<caption>(.*?)</caption>\s*<thead>', page, re.S)
    expected = [b for s in content.sections for b in s.blocks if type(b).__name__ == "Table"]
    assert len(expected) >= 7 and [t for t, _ in tables] == [b.id for b in expected]
    assert page.count("<table") == len(tables)  # no table without one
    text = " ".join(" ".join(lines) for lines in pdf_lines(out / "report.pdf"))
    for table_id, caption in tables:
        shown = " ".join(html.unescape(re.sub(r"<[^>]+>", "", caption)).split())
        assert shown and shown in text, (table_id, shown)


def layout_lines(pdf: Path) -> list[list[str]]:
    """Each page's physical lines (`pdftotext -layout`), spaces closed up: a table row is one line."""
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return [[" ".join(line.split()) for line in page.splitlines() if line.strip()] for page in text.split("\f")[:-1]]


def test_a_long_table_repeats_its_header_row_on_every_page(printed):
    """The appendix lists every candidate site over several pages; each of them shows the header row."""
    out, content = printed
    appendix = next(b for b in content.section("appendix").blocks if type(b).__name__ == "Table")
    pages = layout_lines(out / "report.pdf")
    rows = [" ".join(row[:4]) for row in appendix.rows]  # site, country, role, power price: this table's rows only
    spanned = [i for i, lines in enumerate(pages) if sum(1 for ln in lines if any(ln.startswith(r) for r in rows)) >= 3]
    assert len(spanned) >= 2, spanned
    for i in spanned:
        assert any(ln.startswith("Site Country Role Power $/") for ln in pages[i]), (i + 1, pages[i][:5])


def _ink_depth(png: Path, footer_px: int) -> float:
    """How far down the page the lowest non-white pixel row is, above the footer band, as a share of the page."""
    pixels = np.asarray(Image.open(png).convert("L"))
    inked = np.flatnonzero(pixels[: pixels.shape[0] - footer_px].min(axis=1) < 200)
    return (inked[-1] + 1) / pixels.shape[0] if inked.size else 0.0


def test_no_page_but_the_last_is_nearly_blank(printed, tmp_path):
    """Issue 49: 'page 16 is nearly blank'. Every page but the last carries ink at least 40 % of the
    way down (measured on pixels, so a page of map or chart counts as full)."""
    out, _ = printed
    subprocess.run(["pdftoppm", "-r", "20", "-gray", "-png", str(out / "report.pdf"), str(tmp_path / "p")], check=True)
    pngs = sorted(tmp_path.glob("p-*.png"))
    footer_px = round(14 / 25.4 * 20)  # the bottom margin (14 mm) holds the running title and page number
    depths = [_ink_depth(p, footer_px) for p in pngs]
    assert len(depths) >= 6
    thin = [(i + 1, round(d, 2)) for i, d in enumerate(depths[:-1]) if d < 0.40]
    assert not thin, (thin, [round(d, 2) for d in depths])
    assert depths[-1] > 0.1


def test_no_figure_is_split_from_its_unit_in_the_pdf(printed):
    """'$451.90⏎M': no line ends in a number whose unit starts the next line."""
    out, _ = printed
    split = []
    for number, lines in enumerate(pdf_lines(out / "report.pdf"), start=1):
        for this, following in zip(lines, lines[1:]):
            if NUMBER_AT_END.search(this.split(" ")[-1]) and UNIT_AT_START.match(following):
                split.append((number, this[-30:], following[:20]))
    assert not split, split
    money = re.findall(r"\$[\d,]+(?:\.\d+)? M\b", " ".join(" ".join(lines) for lines in pdf_lines(out / "report.pdf")))
    assert len(money) > 50  # the check read the report's money


def test_the_pdf_is_a4_landscape_with_the_title_and_page_numbers_on_every_page(printed):
    out, content = printed
    info = subprocess.run(["pdfinfo", str(out / "report.pdf")], capture_output=True, text=True, check=True).stdout
    assert re.search(r"Page size:\s+841\.\d+ x 595\.\d+ pts \(A4\)", info), info
    pages = pdf_lines(out / "report.pdf")
    for number, lines in enumerate(pages, start=1):
        foot = " ".join(lines[-2:])
        assert content.title in foot and f"page {number} of {len(pages)}" in foot, (number, lines[-2:])


def test_images_are_embedded_in_both_outputs(printed):
    out, _ = printed
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') >= 2 and page.count('src="data:image/svg+xml;base64,') >= 2
    listed = subprocess.run(["pdfimages", "-list", str(out / "report.pdf")], capture_output=True, text=True, check=True).stdout \
        if shutil.which("pdfimages") else ""
    if listed:
        assert len(listed.splitlines()) - 2 >= 1  # the map (the charts are vector drawings)
    assert (out / "report.pdf").stat().st_size > 100_000


# ----------------------------------------------------------------------------- without Pango


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("nopango")
    solve_to_folder(make_scenario(root / "s", [site("a", 40.0, -74.0)], [region("r", 40.1, -74.0)]), root / "plan")
    return root / "plan"


@pytest.fixture
def no_pango(monkeypatch):
    """A machine without Pango: cffi cannot open the library, as dlopen fails there, so WeasyPrint's
    own import fails the way it does on such a machine (its notice on stdout, then OSError)."""
    import cffi.api

    from dcplace.reports.pdf import pdf_engine

    pdf_engine()  # loaded once for real, so that every weasyprint module is put back afterwards
    real = cffi.api.FFI.dlopen

    def dlopen(self, name, flags=0):
        if "pango" in str(name):
            raise OSError(f"cannot load library '{name}': {name}: cannot open shared object file: No such file or directory")
        return real(self, name, flags)

    monkeypatch.setattr(cffi.api.FFI, "dlopen", dlopen)
    for module in [m for m in sys.modules if m == "weasyprint" or m.startswith("weasyprint.")]:
        monkeypatch.delitem(sys.modules, module)


def test_without_pango_the_report_writes_its_html_names_the_library_and_exits_8(small_plan, tmp_path, no_pango):
    result = runner.invoke(app, ["report", str(small_plan), "--out", str(tmp_path / "out")])
    assert result.exit_code == ExitCode.MISSING_LIBRARY == 8, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == ["report.html"]
    assert "report.html" in result.stdout.replace("\n", "")  # a long temporary path folds at 80 columns
    error = result.stderr.strip().splitlines()
    assert error == [f"PDF not written: the system library libpango-1.0-0 (WeasyPrint draws its text with it) is missing. "
                     f"Fix: {APT_INSTALL}"], result.stderr
    assert "Traceback" not in result.output and "WeasyPrint could not import" not in result.output


def test_without_pango_save_report_raises_after_writing_the_html(small_plan, tmp_path, no_pango):
    with pytest.raises(PdfEngineMissing) as caught:
        save_report(load_plan_layers(small_plan), tmp_path / "out")
    assert caught.value.written == [tmp_path / "out" / "report.html"] and caught.value.fix == APT_INSTALL
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000 and not (tmp_path / "out" / "report.pdf").exists()

