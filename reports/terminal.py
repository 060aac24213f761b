"""The terminal: what `dcplace` prints, as library calls (cli.py parses arguments and calls these).

Every text that comes from the user (names of sites, regions, jobs, scenarios, plans and batch
members, file paths, messages quoting them) is printed as text, never as rich markup or terminal
control codes (`markup_text`, `markup_name`, `clean`). At any width every money figure is whole:
paragraphs wrap between words, never inside a figure (`say`); tables leave out whole columns by
priority rather than cut a number (`fit_table`, `left_out`). Every function is given the rich
Console it prints to: the consoles are the command line's (cli.console, cli.err).
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.measure import Measurement
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from dcplace.optimizer.solving.progress import SolveProgress
from dcplace.reports.style import display_name, money, visible_controls


# ------------------------------------------------------------------ user text


def clean(value: object, newlines: bool = False) -> str:
    """`value` as text with every terminal control character shown as an escape (`\\x1b`);
    line breaks kept when `newlines` (for multi-line messages). reports.style holds the rule."""
    return visible_controls(str(value), newlines)


def markup_name(value: object) -> str:
    """A name from the inputs for a rich markup string or Table cell: as every output shows it
    (reports.style.display_name: cut to 80 characters, control characters as escapes)."""
    return escape(display_name(value))


def markup_text(value: object, newlines: bool = False) -> str:
    """User text for a rich markup string or Table cell: shown exactly as typed, never as
    markup (`[link=...]`, `[/]`) or terminal control codes."""
    return escape(clean(value, newlines))


# ------------------------------------------------------------------ paragraphs and tables

# A money figure (`$1,234.56 M`, reports.style.money) or a unit price (`$0.123 per M tokens`):
# kept whole on one line by say, never split or cut.
MONEY_TEXT = re.compile(r"-?\$[\d,]+\.\d+(?: per M tokens| M(?:/yr)?)?")


def say(markup: str, to: Console) -> None:
    """Print a paragraph wrapped at word boundaries to the console's width, never inside a
    money figure (rich would break `$1,234.56 M` between the number and its unit)."""
    text = Text.from_markup(markup)
    plain = text.plain
    protected: set[int] = set()
    for m in MONEY_TEXT.finditer(plain):
        protected.update(range(m.start(), m.end()))
    width = max(to.width, 20)
    lines: list[Text] = []
    start = 0
    while cell_len(plain[start:]) > width:
        cut = None
        for i in range(start + 1, len(plain)):
            if plain[i] == " " and i not in protected:
                if cell_len(plain[start:i]) <= width:
                    cut = i
                else:
                    cut = cut or i  # a word longer than the line goes on a line of its own
                    break
        if cut is None:
            break
        lines.append(text[start:cut])
        start = cut + 1
    lines.append(text[start:])
    for line in lines:
        to.print(line, soft_wrap=True, highlight=False)


TEXT_WORD_MAX = 12  # a text column is kept at least as wide as its longest word up to this; longer words fold
FIT_MARGIN = 2  # columns kept spare: rich's column collapse may round a text column back up past its share


@dataclass
class Col:
    header: str
    cells: list[str]  # rich markup (user text already through markup_text)
    kind: str = "text"  # "money" and "number": right-aligned, never wrapped or cut; "text": folds


def fit_table(title: str, columns: list[Col], drop_order: list[str], to: Console) -> tuple[Table, list[str]]:
    """A table as wide as the console allows: numbers (money above all) are shown whole at
    their full width; when the table would not fit, whole columns are left out, in
    `drop_order` (lowest priority first), rather than cutting any figure. Returns the
    table and the headers left out."""
    dropped: list[str] = []
    candidates = [h for h in drop_order if any(c.header == h for c in columns)]
    while True:
        shown = [c for c in columns if c.header not in dropped]
        table = Table(title=title, title_justify="left")
        for c in shown:
            if c.kind == "text":  # whole words where they are short enough; a longer one folds
                words = [w for x in [c.header, *c.cells] for w in Text.from_markup(x).plain.split()]
                table.add_column(c.header, overflow="fold", min_width=min(max(map(cell_len, words), default=1), TEXT_WORD_MAX))
            else:
                full = max(Text.from_markup(x).cell_len for x in [*c.header.split("\n"), *c.cells])
                table.add_column(c.header, justify="right", no_wrap=True, min_width=full)
        for i in range(len(columns[0].cells) if columns else 0):
            table.add_row(*(c.cells[i] for c in shown))
        need = Measurement.get(to, to.options.update_width(10_000), table).minimum
        if need + FIT_MARGIN <= to.width or not candidates:
            return table, [h.replace("\n", " ") for h in dropped]
        dropped.append(candidates.pop(0))


def left_out(dropped: list[str], where: str, to: Console) -> None:
    """Say which columns a narrow terminal left out, and where the full table is."""
    if dropped:
        say(f"[dim]Left out at {to.width} columns: {markup_text(', '.join(dropped))}; all columns are in {markup_text(where)}.[/]", to)


# ------------------------------------------------------------------ the live status line


def fit_line(parts: list[tuple[int, str]], width: int) -> str:
    """Parts joined with ' · ', leaving out whole parts (highest priority number first)
    until the line fits `width` less the spinner's 2 cells."""
    parts = list(parts)
    while parts:
        line = " · ".join(text for _, text in parts)
        if cell_len(line) + 2 <= width or len(parts) == 1:
            return line
        parts.remove(max(parts, key=lambda x: x[0]))
    return ""


class LiveLine:
    """The live status line of a long command (on stderr), for solve, batch, pareto and the
    studies alike: a spinner, then `describe(progress, stage, elapsed_s)`'s parts (priority,
    text). On a narrow terminal whole parts are left out, highest priority number first: a
    figure is never cut at the terminal's edge. Fed by a progress callback from any thread (one
    reference swap); redrawn by rich.live about twice a second."""

    def __init__(self, describe: Callable[[Any, str, float], list[tuple[int, str]]], to: Console):
        self.describe = describe
        self.to = to
        self.started = time.perf_counter()
        self.stage = ""  # pareto: the point(s) being solved
        self.progress = None

    def __call__(self, progress) -> None:
        self.progress = progress

    def text(self) -> str:
        return fit_line(self.describe(self.progress, self.stage, time.perf_counter() - self.started), self.to.width)

    def __rich__(self):
        return Spinner("dots", Text(self.text(), no_wrap=True))


def solve_line(time_limit_s: float, to: Console) -> LiveLine:
    """`dcplace solve`'s line: phase, elapsed time and, during the search, the best plan's cost,
    the bound and the gap (the bound is left out first, then the gap)."""

    def describe(p: SolveProgress | None, stage: str, elapsed_s: float) -> list[tuple[int, str]]:
        parts = [(0, p.label if p else "starting"), (1, f"{elapsed_s:,.0f} s of {time_limit_s:g} s")]
        if p is not None and p.incumbent_usd_per_year is not None:
            parts.append((2, f"best {money(p.incumbent_usd_per_year)}/yr"))
        if p is not None and p.bound_usd_per_year is not None:
            parts.append((4, f"bound {money(p.bound_usd_per_year)}"))
        if p is not None and p.gap is not None:
            parts.append((3, f"gap {p.gap:.2%}"))
        return parts

    return LiveLine(describe, to)


def batch_line(name: str, to: Console) -> LiveLine:
    """`dcplace batch`'s and `pareto`'s line (and the studies'): members done, failed and
    running, elapsed time, ETA, what is being solved and the last result."""

    def describe(p, stage: str, elapsed_s: float) -> list[tuple[int, str]]:
        parts = [(3, name)]
        if stage:
            parts.append((1, stage))
        if p is not None:
            parts += [(0, f"{p.done}/{p.total} done"), (0, f"{p.failed} failed"), (0, f"{p.running} running")]
        parts.append((2, f"{elapsed_s:,.0f} s"))
        if p is not None and p.eta_s is not None:
            parts.append((4, f"ETA {p.eta_s:,.0f} s"))
        if p is not None and p.last is not None:
            cost = f" {money(p.last.objective_usd_per_year)}/yr" if p.last.objective_usd_per_year is not None else ""
            parts.append((5, f"last: {clean(p.last.name)} {p.last.status}{cost}"))
        return parts

    return LiveLine(describe, to)


def live_status(line: LiveLine, enabled: bool, stdout: Console):
    """A transient live display of `line` on its console (stderr), or nothing (quiet, or stderr
    not a terminal). `stdout` is routed above it only when stdout is the terminal too."""
    if not enabled:
        return contextlib.nullcontext()
    return Live(line, console=line.to, refresh_per_second=2, transient=True,
                redirect_stdout=stdout.is_terminal, redirect_stderr=False)
