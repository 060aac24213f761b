"""PDF from the reports' own HTML: WeasyPrint prints the page that the browser shows.

There is one template per report (reports/templates/*.html.j2); its `@page` and `@media print`
rules lay out the PDF (A4 landscape, running title, "page N of M", bookmarks from the section
headings, table headers repeated on every page a table spans). So the HTML and the PDF cannot
disagree: they are one document.

WeasyPrint draws text with the system's Pango (with HarfBuzz and fontconfig). When those
libraries are missing, WeasyPrint cannot even be imported: `pdf_engine()` turns that into
`PdfEngineMissing`, one line that names the library and the command that installs it, and a
report still writes its HTML (reports.report.save_report).
"""

from __future__ import annotations

import contextlib
import io
import re
from importlib import import_module
from pathlib import Path
from types import ModuleType

from dcplace.reports.output import staged_files

# Debian's packages of the libraries WeasyPrint loads (pango pulls in harfbuzz, fontconfig and glib)
APT_INSTALL = "apt-get install libpango-1.0-0 libpangoft2-1.0-0"
PIP_INSTALL = "pip install 'weasyprint>=70'"


class PdfEngineMissing(RuntimeError):
    """The PDF could not be written because WeasyPrint or a system library it loads is missing.
    `written` holds the files that were written without it (report.html)."""

    def __init__(self, missing: str, fix: str, written: list[Path] | None = None):
        self.missing, self.fix, self.written = missing, fix, list(written or [])
        super().__init__(f"PDF not written: {missing}. Fix: {fix}")

    def with_written(self, written: list[Path]) -> "PdfEngineMissing":
        return PdfEngineMissing(self.missing, self.fix, written)


def pdf_engine() -> ModuleType:
    """The weasyprint module, or PdfEngineMissing naming what is missing and how to install it."""
    quiet = io.StringIO()  # WeasyPrint prints a multi-line notice to stdout before it re-raises
    try:
        with contextlib.redirect_stdout(quiet):
            return import_module("weasyprint")
    except ImportError as exc:
        raise PdfEngineMissing(f"the Python package {exc.name or 'weasyprint'} is not installed", PIP_INSTALL) from exc
    except OSError as exc:  # cffi's dlopen: "cannot load library 'libpango-1.0-0': ..."
        found = re.search(r"cannot load library '([^']+)'", str(exc))
        library = found[1] if found else str(exc).splitlines()[0]
        raise PdfEngineMissing(f"the system library {library} (WeasyPrint draws its text with it) is missing", APT_INSTALL) from exc


def write_pdf(path: str | Path, html: str) -> int:
    """Print `html` (a report page, images inline as data: URIs) to `path`; returns the number of pages."""
    weasyprint = pdf_engine()
    # data: URIs only, as the page's Content-Security-Policy says: a name in the inputs never makes the PDF fetch anything
    fetcher = weasyprint.URLFetcher(allowed_protocols=["data"])
    document = weasyprint.HTML(string=html, url_fetcher=fetcher).render()
    document.write_pdf(Path(path))
    return len(document.pages)


def write_report_files(out_dir: str | Path, page: str, html: bool = True, pdf: bool = True) -> list[Path]:
    """report.html and/or report.pdf of one page (a template's HTML) into `out_dir`, all or none;
    returns the paths. Without the PDF engine, report.html is still written and PdfEngineMissing
    raised (its `written` lists what was), so a machine without Pango still gets the report."""
    missing = None
    if pdf:
        try:
            pdf_engine()
        except PdfEngineMissing as exc:
            missing, pdf = exc, False
    written: list[Path] = []
    if html or pdf:
        with staged_files(out_dir, "report") as stage:
            if html:
                (stage.dir / "report.html").write_text(page, encoding="utf-8")
            if pdf:
                write_pdf(stage.dir / "report.pdf", page)
        written = stage.moved
    if missing is not None:
        raise missing.with_written(written)
    return written


__all__ = ["APT_INSTALL", "PdfEngineMissing", "pdf_engine", "write_pdf", "write_report_files"]
