"""The terminal: what `dcplace` prints and the codes it ends with, as library calls (cli.py parses
arguments, calls the library and these, and exits).

Every text that comes from the user (names of sites, regions, jobs, scenarios, plans and batch
members, file paths, messages quoting them) is printed as text, never as rich markup or terminal
control codes (`markup_text`, `markup_name`, `clean`). At any width every money figure is whole:
paragraphs wrap between words, never inside a figure (`say`); tables leave out whole columns by
priority rather than cut a number (`fit_table`, `left_out`). One live status line serves every
long command (`LiveLine`). Every printer is given the rich Console it prints to: the consoles are
the command line's (cli.console, cli.err). Also here: the exit codes (`ExitCode`), what the
independent check found as the terminal and --json show it (`check_outcome`), a stream that
survives a closed pipe (`PipeSafe`) and the engine's log on stderr (`show_engine_log`).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from dcplace.models.plan import HAS_PLAN, Plan, manifest_removed, read_plan
from dcplace.optimizer.checker import check_plan_folder, check_schedule_folder
from dcplace.optimizer.solving.progress import SolveProgress
from dcplace.reports.style import display_name, money, mw_number, mw_text, visible_controls


# ------------------------------------------------------------------ exit codes


class ExitCode(enum.IntEnum):
    """Every exit code of `dcplace`, in one place: README.md's "Exit codes" and `dcplace --help` are
    written from EXIT_CODE_MEANINGS (tests/test_ecosystem.py checks that the README agrees)."""

    OK = 0
    CHECK_FAILED = 1
    BAD_INPUT = 2
    INFEASIBLE = 3
    NO_PLAN = 4
    BATCH_INCOMPLETE = 5
    INTERNAL_ERROR = 6
    RESOURCE_LIMIT = 7
    MISSING_LIBRARY = 8
    INTERRUPTED = 130


EXIT_CODE_MEANINGS = {
    ExitCode.OK: "success",
    ExitCode.CHECK_FAILED: "a plan failed its independent check (a bug: please report it)",
    ExitCode.BAD_INPUT: "bad input (every problem listed with file, row, field and a fix)",
    ExitCode.INFEASIBLE: "infeasible (with the diagnosis)",
    ExitCode.NO_PLAN: "the time limit ended before any plan was found",
    ExitCode.BATCH_INCOMPLETE: "a batch finished with failed members (re-run the same command to retry them)",
    ExitCode.INTERNAL_ERROR: "an internal error (a bug: one line names it and the file its traceback was saved to; please report "
                             "it with `dcplace --version`)",
    ExitCode.RESOURCE_LIMIT: "a resource limit: the machine ran out of memory (not a bug; the message says what to cut)",
    ExitCode.MISSING_LIBRARY: "a system library is missing: report.pdf needs Pango (one line names it and the apt-get command; "
                              "report.html is written all the same)",
    ExitCode.INTERRUPTED: "stopped by Ctrl-C (SIGTERM ends the process by the signal)",
}


def exit_code_table() -> str:
    """The exit codes as lines `  N  meaning`, for `dcplace --help` and the docs."""
    return "\n".join(f"{int(code):>5}  {meaning}" for code, meaning in EXIT_CODE_MEANINGS.items())


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
    min_width: int = 0  # a text column kept at least this wide (a list of names), else by its words


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
                table.add_column(c.header, overflow="fold",
                                 min_width=max(c.min_width, min(max(map(cell_len, words), default=1), TEXT_WORD_MAX)))
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


def print_outages(table, regions: int, to: Console) -> None:
    """`dcplace outages`: the outage table's summary lines, then its tables fitted to the terminal
    (whole columns left out in priority order, and said where they are: reports/outages.py)."""
    from dcplace.reports.outages import summary_lines, terminal_tables

    for line in summary_lines(table):
        to.print(clean(line), markup=False, highlight=False)
    for shown in terminal_tables(table, regions):
        grid, dropped = fit_table(shown.title, [Col(c.header, [markup_text(cell) for cell in c.cells], "number" if c.numeric else "text",
                                                    c.min_width) for c in shown.columns], shown.drop_order, to)
        to.print(grid)
        left_out(dropped, shown.full_table, to)


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


# ------------------------------------------------------------------ problems and files written


def print_problems(problems: list, to: Console) -> None:
    """A scenario's problems, one a line (each names file, row, field and the fix)."""
    to.print(f"[bold red]The scenario has {len(problems)} problem(s):[/]")
    for problem in problems:
        to.print(f"  • {clean(problem, newlines=True)}", markup=False, highlight=False)


def print_warnings(warnings: list, to: Console) -> None:
    """Allowed but probably a mistake (a site outside its country, a site that holds no rack); never blocks."""
    if warnings:
        to.print(f"[bold yellow]{len(warnings)} warning(s)[/] (the scenario is still used as given):")
    for problem in warnings:
        to.print(f"  • warning: {clean(problem, newlines=True)}", markup=False, highlight=False)


def print_infeasible(diagnosis: list[str], to: Console) -> None:
    to.print("[bold red]Infeasible:[/] no plan keeps every limit. To make one possible:")
    for line in diagnosis or ["(no single limit could be named; loosen policies or add capacity)"]:
        to.print(f"  • {clean(line, newlines=True)}", markup=False, highlight=False)


def print_written(paths: list[Path], to: Console) -> None:
    for path in paths:
        to.print(f"  {markup_text(path)}  ({path.stat().st_size / 1e6:,.2f} MB)", highlight=False)


# ------------------------------------------------------------------ the independent check


def check_outcome(folder: Path) -> dict:
    """What `dcplace check` found, as the JSON it prints with --json: status (pass, fail,
    infeasible, bad_input), exit_code, violations, and `text` / `lines`, the rich markup the
    terminal shows (stderr unless status is pass)."""
    out = {"command": "check", "folder": str(folder), "violations": [], "checked": [], "plan_status": None,
           "recomputed_cost_usd_per_year": None, "diagnosis": []}

    def bad(text: str) -> dict:
        return {**out, "status": "bad_input", "exit_code": int(ExitCode.BAD_INPUT), "text": text, "lines": []}

    def fail(report) -> dict:
        return {**out, "status": "fail", "exit_code": int(ExitCode.CHECK_FAILED), "checked": report.checked,
                "violations": [{"family": v.family, "message": v.message, "registry_families": list(v.registry_families)}
                               for v in report.violations],
                "text": f"[bold red]FAIL[/]: {markup_text(folder)}: {len(report.violations)} violation(s):",
                "lines": [str(v) for v in report.violations]}

    if (folder / "schedule.json").is_file():
        report = check_schedule_folder(folder)
        if not report.ok:
            return fail(report)
        return {**out, "status": "pass", "exit_code": 0, "kind": "schedule", "checked": report.checked,
                "recomputed_cost_usd_per_year": report.recomputed_cost_usd_per_year, "lines": [],
                "text": f"[green]PASS[/]: {markup_text(folder)}: every period's plan and the ties between periods hold "
                        f"({len(report.checked)} checks); the NPV adds up to ${report.recomputed_cost_usd_per_year:,.2f}."}
    if not (folder / "plan.json").exists() or not (folder / "inputs" / "scenario.yaml").exists():
        return bad(f"[red]{markup_text(folder)}: not a plan folder[/] (plan.json and inputs/scenario.yaml are needed). Fix: give a folder written by `dcplace solve`.")
    try:
        report = check_plan_folder(folder)
    except (KeyError, ValueError, OSError) as exc:
        return bad(f"[red]{markup_text(folder)}: the plan folder is damaged[/] ({type(exc).__name__}: {markup_text(exc, newlines=True)}). "
                   "Fix: re-run `dcplace solve`.")
    if report.violations and all(v.family == "manifest" and "has no manifest.json" in v.message for v in report.violations):
        if manifest_removed(folder):  # the folder was written with one: it was deleted, not never there
            return bad(f"[red]{markup_text(folder)}: its manifest.json was removed[/] (the folder's marker lists it), so its files "
                       "cannot be verified. Fix: restore manifest.json, or re-run `dcplace solve` (its command is in "
                       "inputs/provenance.json, `rerun`).")
        return bad(f"[red]{markup_text(folder)}: written before plan folders carried a manifest[/], so it cannot be verified. "
                   "Fix: re-run `dcplace solve` (its command is in inputs/provenance.json, `rerun`).")
    if not report.ok:
        return fail(report)
    out.update(plan_status=report.status, checked=report.checked, recomputed_cost_usd_per_year=report.recomputed_cost_usd_per_year)
    if report.status not in HAS_PLAN:
        try:
            diagnosis = read_plan(folder).diagnosis
        except (OSError, ValueError) as exc:
            return bad(f"[red]{markup_text(folder)}: the plan folder is damaged[/] ({type(exc).__name__}). Fix: re-run `dcplace solve`.")
        return {**out, "status": "infeasible", "exit_code": int(ExitCode.INFEASIBLE), "diagnosis": diagnosis, "text": "", "lines": []}
    return {**out, "status": "pass", "exit_code": 0, "lines": [],
            "text": f"[green]PASS[/]: {markup_text(folder)}: {len(report.checked)} constraint families hold "
                    f"({markup_text(', '.join(report.checked))}); line items add up to ${report.recomputed_cost_usd_per_year:,.2f}/yr."}


# ------------------------------------------------------------------ plans, schedules and batches

# Columns of the open-sites table left out on a narrow terminal, first to last; the site's
# name and its cost are always shown.
SITE_COLUMN_PRIORITY = ["racks", "facility\nMW", "fabric", "GPUs", "cooling", "role", "IT\nMW"]
JOB_COLUMN_PRIORITY = ["chip", "fabric"]


def print_plan(plan: Plan, out_dir: Path | None, to: Console) -> None:
    """The plan on the terminal: what was solved, the open sites, the jobs, the annual cost
    and the KPIs. At any width every money figure is whole (`$1,234.56 M`): on a narrow
    terminal the lowest-priority columns are left out (SITE_COLUMN_PRIORITY) and the note
    under the tables names the plan folder's CSVs that hold them all."""
    s = plan.solve
    gap = f"{s.gap:.2%}" if s.gap is not None else "n/a"
    say(
        f"[bold]{markup_name(plan.scenario)}[/]: [green]{markup_text(s.status)}[/] in {s.build_time_s + s.solve_time_s:.1f} s "
        f"({s.model['rows']:,} rows, {s.model['columns']:,} columns, {s.model['integers']:,} integers; gap {gap})", to
    )
    from dcplace.reports.summary import clock_terminal_lines, status_text  # what "optimal" means here: within the gap, in dollars

    say(f"Status: {markup_text(status_text(plan))}.", to)
    if s.pairs:
        bound_kind = s.pairs.get("bound_kind") or "the full model's LP bound"  # plans written before bound_kind
        say(
            f"Serving pairs: {s.pairs['pairs_in_model']:,} of {s.pairs['pairs_eligible']:,} eligible in the model after "
            f"{s.pairs['pricing_rounds']} pricing rounds; "
            + (f"the gap is against {bound_kind} ({money(s.pairs['full_lp_bound_usd_per_year'])}/yr)."
               if s.pairs["full_lp_bound_usd_per_year"] is not None else f"{bound_kind}."),
            to,
        )
    # Numbers never wrap or shrink to '…'; text columns fold (a name over several lines, cut
    # only past 80 characters: reports.style.display_name); what still does not fit is left out by priority.
    sites = sorted((x for x in plan.sites if x.open), key=lambda x: -x.total_cost_usd_per_year)
    columns = [
        Col("site", [markup_name(x.name) for x in sites]),
        Col("role", [markup_text(x.role) for x in sites]),
        Col("racks", [f"{x.racks_total:,}" for x in sites], "number"),
        Col("GPUs", [f"{x.gpus:,}" for x in sites], "number"),
        Col("IT\nMW", [mw_number(x.it_kw / 1000) for x in sites], "number"),
        Col("facility\nMW", [mw_number(x.facility_kw / 1000) for x in sites], "number"),
        Col("cooling", [markup_text(", ".join(x.zones)) for x in sites]),
        Col("fabric", [markup_text(", ".join(x.fabrics)) for x in sites]),
        Col("cost/yr", [money(x.total_cost_usd_per_year) for x in sites], "money"),
    ]
    table, dropped = fit_table("Open sites", columns, SITE_COLUMN_PRIORITY, to)
    to.print(table)
    if plan.jobs:
        names = {x.id: x.name for x in plan.sites}
        jobs, dropped_jobs = fit_table("Training jobs", [
            Col("job", [markup_name(j.name) for j in plan.jobs]),
            Col("site", [markup_name(names.get(j.site, j.site)) for j in plan.jobs]),
            Col("fabric", [markup_text(j.fabric) for j in plan.jobs]),
            Col("chip", [markup_text(j.chip) for j in plan.jobs]),
            Col("H100-eq GPUs", [f"{j.gpus_h100_equiv:,.0f}" for j in plan.jobs], "number"),
        ], JOB_COLUMN_PRIORITY, to)
        to.print(jobs)
        dropped += [f"job {d}" for d in dropped_jobs]
    lines = [(c, v) for c, v in plan.cost_breakdown_usd_per_year.items() if v]
    costs, _ = fit_table("Annual cost", [
        Col("category", [markup_text(c.replace("_", " ")) for c, _ in lines] + ["[bold]total[/]"]),
        Col("USD/yr", [money(v) for _, v in lines] + [f"[bold]{money(plan.objective_usd_per_year)}[/]"], "money"),
    ], [], to)
    to.print(costs)
    k = plan.kpis
    say(
        f"Inference: {k['tokens_per_s_served_peak']:,.0f} tok/s at peak, ${k['usd_per_m_tokens']:.3f} per M tokens, "
        f"mean RTT {k['mean_rtt_ms']:.1f} ms, {k['demand_within_budget_share']:.1%} within budget. "
        f"IT {mw_text(k['it_mw_inference'])} inference + {mw_text(k['it_mw_training'])} training; "
        f"{k['emissions_t_per_year']:,.0f} t CO2/yr.", to
    )
    for line in clock_terminal_lines(plan):  # the clock and rentals (docs/clock.md); none without them
        say(markup_text(line), to)
    if out_dir is not None:
        if dropped:
            left_out(dropped, f"{out_dir / 'sites.csv'} and {out_dir / 'jobs.csv'}", to)
        else:
            say(f"[dim]Every site, job and assignment: {markup_text(out_dir / 'sites.csv')}, jobs.csv, assignments.csv.[/]", to)
        say(f"Plan written to [bold]{markup_text(out_dir)}[/] and checked.", to)
    elif dropped:
        left_out(dropped, "the plan folder's sites.csv and jobs.csv", to)


def plan_summary(plan: Plan, out_dir: Path | None = None) -> str:
    """One line for scripts (`--quiet`): status, cost, gap, sites, time, folder."""
    s = plan.solve
    gap = f"gap {s.gap:.2%}" if s.gap is not None else "no gap"
    opened = sum(1 for x in plan.sites if x.open)
    where = f"; plan in {out_dir} (checked)" if out_dir is not None else ""
    return (f"{display_name(plan.scenario)}: {s.status}, {money(plan.objective_usd_per_year)}/yr, {gap}, {opened} sites open, "
            f"{s.build_time_s + s.solve_time_s:.1f} s{where}")


def print_schedule(schedule, out_dir: Path, to: Console, quiet: bool = False) -> None:
    """A schedule on the terminal: NPV, gap, and per period what is open, bought and retired."""
    from dcplace.reports.schedule import schedule_lines

    s = schedule.solve
    gap = f"gap {s.gap:.2%}" if s.gap is not None else "no gap"
    head = (f"{display_name(schedule.scenario)}: {s.status}, NPV {money(schedule.npv_usd)} over {len(schedule.periods)} periods, {gap}, "
            f"{s.build_time_s + s.solve_time_s:.1f} s; schedule in {out_dir} (checked)")
    to.print(clean(head), markup=False, highlight=False, soft_wrap=True)
    if not quiet:
        for text in schedule_lines(schedule):
            to.print(clean(text), markup=False, highlight=False, soft_wrap=True)


def member_line(r, to: Console) -> None:
    """One finished member, as it finishes."""
    colour = "red" if r.status not in HAS_PLAN else "green"
    note = " (already solved)" if r.skipped else ""
    cost = f" {money(r.objective_usd_per_year)}/yr" if r.objective_usd_per_year is not None else ""
    detail = f": {r.message[:200]}" if r.message else ""
    say(f"  [{colour}]{markup_text(r.status)}[/] " + markup_text(f"{r.name}{note}{cost}{detail}"), to)


# Columns of the batch summary left out on a narrow terminal, first to last; the member's name,
# its status and its cost are always shown.
BATCH_COLUMN_PRIORITY = ["time s", "RTT ms", "$/M tok", "gap", "sites"]


def print_batch_summary(results, index: Path, to: Console) -> None:
    """The members' results as a table: cost whole at any width (columns are left out by
    BATCH_COLUMN_PRIORITY instead); every KPI of every member is in batch.csv."""
    dash = "—"

    def kpi(r, key: str, fmt: str) -> str:
        value = r.kpis.get(key)
        return fmt.format(value) if value is not None else dash

    table, dropped = fit_table("Batch", [
        Col("member", [markup_name(r.name) for r in results]),
        Col("status", [markup_text(r.status + (" (resumed)" if r.skipped else "")) for r in results]),
        Col("cost/yr", [money(r.objective_usd_per_year) if r.objective_usd_per_year is not None else dash for r in results], "money"),
        Col("gap", [f"{r.gap:.2%}" if r.gap is not None else dash for r in results], "number"),
        Col("$/M tok", [kpi(r, "usd_per_m_tokens", "{:.3f}") for r in results], "number"),
        Col("RTT ms", [kpi(r, "mean_rtt_ms", "{:.1f}") for r in results], "number"),
        Col("sites", [kpi(r, "sites_open", "{:,.0f}") for r in results], "number"),
        Col("time s", [f"{r.seconds:,.1f}" for r in results], "number"),
    ], BATCH_COLUMN_PRIORITY, to)
    to.print(table)
    left_out(dropped, str(index), to)


# ------------------------------------------------------------------ comparisons, frontiers and explanations


def print_comparison(comparison, to: Console) -> None:
    """Plans against the baseline as a table that fits the terminal (whole priority levels of
    columns left out, never a cut number; all are in compare.csv), then what changes in each
    plan and why the plans without one have none."""
    rows = comparison.table.to_dict(orient="records")
    nan = lambda v: v is None or v != v  # noqa: E731
    fmt = lambda v, f: "—" if nan(v) else f.format(v)  # noqa: E731
    signed = lambda v: "—" if nan(v) else ("+" if round(v, 2) > 0 else "") + money(v * 1e6).removesuffix(" M").replace("$", "")  # noqa: E731
    # (header, priority, cells, numeric): columns are dropped lowest priority first until the
    # table fits the terminal; numbers never wrap or shrink, so money is never cut.
    columns = [
        ("plan", 1, [markup_text(r["plan"]) for r in rows], False),
        ("status", 1, [markup_text(r.get("proof") or r["status"]) for r in rows], False),
        ("cost $M/yr", 1, [fmt(r["cost_musd_per_year"], "{:,.2f}") for r in rows], True),
        ("change $M/yr", 1, [signed(r["cost_change_musd_per_year"]) for r in rows], True),
        ("real $M/yr", 2, [signed(r["real_change_musd_per_year"]) for r in rows], True),
        ("notional $M/yr", 2, [signed(r["notional_change_musd_per_year"]) for r in rows], True),
        ("change %", 3, [fmt(r["cost_change_share"], "{:+.1%}") for r in rows], True),
        ("CO2 change %", 3, [fmt(r["emissions_change_share"], "{:+.1%}") for r in rows], True),
        ("$/M tok", 4, [fmt(r["usd_per_m_tokens"], "{:.3f}") for r in rows], True),
        ("RTT ms", 5, [fmt(r["mean_rtt_ms"], "{:.1f}") for r in rows], True),
        ("sites", 5, [fmt(r["sites_open"], "{:.0f}") for r in rows], True),
    ]

    def least(header: str, cells: list[str], numeric: bool) -> int:  # the narrowest the column may get
        words = max(len(w) for text in (header, *cells) for w in (text.split() or [""]))
        return words if numeric else min(10, words)

    def most(header: str, cells: list[str], numeric: bool) -> int:  # header on one line, no cell wrapped
        return min(max(len(text) for text in (header, *cells)), 10**6 if numeric else 24)

    budget, used, shown = to.width, 1, []  # 1: the table's left edge; 3 per column: padding and border
    for priority in sorted({c[1] for c in columns}):
        group = [c for c in columns if c[1] == priority]
        need = sum(least(c[0], c[2], c[3]) + 3 for c in group)
        if used + need > budget and priority > 1:
            break  # a whole priority level or nothing, and nothing of lower priority after it
        shown.extend(group)
        used += need
    shown = [c for c in columns if c in shown]
    widths = [least(c[0], c[2], c[3]) for c in shown]
    for text_first in (True, False):  # room left: text columns first, then headers on one line
        for i, c in enumerate(shown):
            if (not c[3]) == text_first:
                grow = max(0, min(most(c[0], c[2], c[3]) - widths[i], budget - used))
                widths[i] += grow
                used += grow
    view = Table(title=f"Against {markup_text(comparison.baseline)}", title_justify="left")
    for (header, _, cells, numeric), w in zip(shown, widths):
        view.add_column(header, justify="right" if numeric else "left", width=w, overflow="fold")
    for i, r in enumerate(rows):
        view.add_row(*(cells[i] for _, _, cells, _ in shown), style="bold" if r["baseline"] else None)
    to.print(view)
    if len(shown) < len(columns):
        to.print(f"[dim]({len(columns) - len(shown)} columns left out at {to.width} columns; all are in compare.csv)[/]")
    stories = comparison.stories()
    changed = [r for r in rows if not r["baseline"] and not r["cause"]]
    if changed:
        to.print("\n[bold]What changes[/]")
        for r in changed:  # name, then its story and movers wrapped under it, indented
            to.print(f"  [bold]{markup_text(r['plan'])}[/]", highlight=False)
            to.print(Padding(markup_text(stories[r["plan"]]), (0, 0, 0, 4)), highlight=False)
            if r.get("inputs_changed") and r["inputs_changed"] != "none":
                to.print(Padding(f"inputs: {markup_text(r['inputs_changed'])}", (0, 0, 0, 4)), highlight=False)
            if r.get("classes_protected"):
                to.print(Padding(f"N-1 buys: worst loss {markup_text(r['worst_loss_baseline'])} -> {markup_text(r['worst_loss_plan'])}; "
                                      f"protected: {markup_text(r['classes_protected'])}", (0, 0, 0, 4)), highlight=False)
            if r["top_movers"]:
                to.print(Padding(f"sites: {markup_text(r['top_movers'])}", (0, 0, 0, 4)), highlight=False)
    failed = [r for r in rows if r["cause"]]
    if failed:
        to.print(f"\n[bold red]{len(failed)} without a plan[/] (answers too: the limit or input that stops them)")
        for r in failed:
            overrides = f" (overrides: {markup_text(r['overrides'])})" if r["overrides"] else ""
            to.print(f"  [bold]{markup_text(r['plan'])}[/] ({markup_text(r['status'])})", highlight=False)
            to.print(Padding(f"{markup_text(r['cause'])}{overrides}", (0, 0, 0, 4)), highlight=False)


def print_frontier(frontier, tradeoff: str, index: Path, to: Console) -> None:
    """The points of a cost trade-off curve as a table (setting, status and the other axis left
    out first on a narrow terminal; `index`, pareto.csv, has every column)."""
    dash = "—"
    view, dropped = fit_table(f"Cost against {markup_text(tradeoff)}", [
        Col("point", [markup_name(p.name) for p in frontier]),
        Col("setting", [markup_text(p.parameter) for p in frontier]),
        Col("status", [markup_text(p.status) for p in frontier]),
        Col("cost/yr", [money(p.cost_usd_per_year) if p.cost_usd_per_year is not None else dash for p in frontier], "money"),
        Col("mean RTT ms", [f"{p.mean_rtt_ms:.2f}" if p.mean_rtt_ms is not None else dash for p in frontier], "number"),
        Col("kt CO2/yr", [f"{p.emissions_t_per_year / 1e3:,.2f}" if p.emissions_t_per_year is not None else dash
                          for p in frontier], "number"),
        Col("efficient", ["yes" if p.efficient else "no" for p in frontier]),
    ], ["setting", "status", "efficient", "mean RTT ms" if tradeoff == "carbon" else "kt CO2/yr"], to)
    to.print(view)
    left_out(dropped, str(index), to)


def print_prices(result, saved: Path, to: Console) -> None:
    """`dcplace why prices`: the binding limits and their prices, and the plan LP against the plan."""
    view, _ = fit_table("Binding limits (LP duals, integer decisions fixed)", [
        Col("limit", [markup_text(p.limit) for p in result.binding()]),
        Col("where", [markup_name(p.name) for p in result.binding()]),
        Col("$/yr per unit", [f"{p.value_usd_per_year_per_unit:,.2f}" for p in result.binding()], "number"),
        Col("unit", [markup_text(p.unit) for p in result.binding()]),
        Col("check", ["" if p.check_usd_per_year_per_unit is None else f"{p.check_usd_per_year_per_unit:,.2f}"
                      for p in result.binding()], "number"),
    ], ["check", "unit"], to)
    to.print(view)
    say(f"Plan LP {money(result.lp_objective_usd_per_year)}/yr against the plan's {money(result.plan_objective_usd_per_year)}/yr; "
        f"{result.seconds:,.1f} s. Saved: {markup_text(saved)}", to)


def print_worth(study, to: Console) -> None:
    """`dcplace why worth`: what each open site is worth, and each closed candidate with it."""
    rows = sorted(study.items, key=lambda w: (w.kind, -(w.worth_usd_per_year or float("inf"))))
    view, _ = fit_table("What each site is worth (cost without it; for closed candidates: cost with it)", [
        Col("site", [markup_name(w.name) for w in rows]),
        Col("kind", [w.kind for w in rows]),
        Col("worth/yr", ["indispensable" if w.indispensable else money(w.worth_usd_per_year) if w.worth_usd_per_year is not None
                         else markup_text(w.status) for w in rows], "money"),
        Col("tie", ["tie" if w.tie else "" for w in rows]),
    ], ["tie"], to)
    to.print(view)
    say(f"{len(study.items)} re-solves in {study.seconds:,.0f} s. Saved: {markup_text(Path(study.folder) / 'worth.json')}", to)


def print_alternatives(study, slack: float, to: Console) -> None:
    """`dcplace why alternatives`: how many, the sites every alternative keeps, and where they are saved."""
    names = study.names
    say(f"{len(study.alternatives)} alternatives within {slack:.0%}, each checked. Must-haves ({len(study.must_haves())}): "
        + markup_text(", ".join(display_name(names.get(s, s)) for s in study.must_haves())) + f"; interchangeable: {len(study.interchangeable())} sites."
        + (f" {markup_text(study.note)}." if study.note else ""), to)
    say(f"Saved: {markup_text(Path(study.folder))} (one checked plan folder per alternative); {study.seconds:,.0f} s.", to)


def print_robustness(study, to: Console) -> None:
    """`dcplace why robustness`: samples solved, the plan's regret, the decisions that flip and the tornado's top bars."""
    q = study.regret_quantiles()
    rates = list(study.flip_rates().items())[:8]
    say(f"{len(study.solved())} of {len(study.samples)} samples solved in {study.seconds:,.0f} s. "
        + (f"Regret of the plan: median {money(q['p50'])}, p90 {money(q['p90'])}, worst {money(q['max'])}/yr. " if q else "")
        + ("Decisions that flip: " + markup_text(", ".join(f"{display_name(study.names.get(s, s))} {r:.0%}" for s, r in rates)) if rates else "No decision flips."), to)
    for b in study.tornado()[:5]:
        say(f"  {markup_text(b.label)}: least cost {money(b.cost_swing_usd_per_year)} from low to high", to)
    from dcplace.reports.summary import robustness_lines  # the labels and the robust plan, in sentences

    for text in robustness_lines(study):
        say(markup_text(text), to)
    say(f"Saved: {markup_text(Path(study.folder) / 'robustness.json')}, {markup_text(Path(study.folder) / 'labels.csv')}", to)


# ------------------------------------------------------------------ the process's streams and the engine's log


class PipeSafe:
    """A text stream that keeps going when its reader has gone (`dcplace validate ... | head -1`):
    further output is dropped, so the command ends with its own exit code (2 for bad input)
    instead of click's 1, which this CLI uses for a plan that failed its check."""

    def __init__(self, stream):
        self._stream = stream
        self._gone = False

    def _closed_pipe(self) -> None:
        self._gone = True
        with contextlib.suppress(OSError, ValueError):  # so that the interpreter's last flush does not fail either
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._closed_pipe()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._closed_pipe()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class CurrentStderr(logging.StreamHandler):
    """A handler writing to whatever sys.stderr is when a line is logged: a command run in-process
    (a notebook, CliRunner) swaps sys.stderr and closes its own, which a handler bound at --verbose
    would then write to ("I/O operation on closed file" on every later log line)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def show_engine_log(stream, level: int = logging.INFO) -> logging.Handler:
    """Send the engine's log lines (the `dcplace` logger: pricing rounds, lazy rows, periods, …)
    to `stream` (None: sys.stderr as it is at each line), one line each with its time and module;
    returns the handler (remove it to stop)."""
    handler = CurrentStderr() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    handler.setLevel(level)
    handler.set_name("dcplace-verbose")
    hide_engine_log()  # one at a time (a second run in one process)
    logger = logging.getLogger("dcplace")
    logger.addHandler(handler)
    logger.setLevel(min(level, logger.level or logging.WARNING))
    return handler


def hide_engine_log() -> None:
    """Stop showing the engine's log lines: remove show_engine_log's handler, if any."""
    logger = logging.getLogger("dcplace")
    for old in [h for h in logger.handlers if h.get_name() == "dcplace-verbose"]:
        logger.removeHandler(old)
