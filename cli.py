"""dcplace command line: parses arguments, calls the library, prints with rich.

Exit codes (the table is `ExitCode` / `EXIT_CODE_MEANINGS` below; `dcplace --help` prints it): 0 success; 1 a plan failed its independent check; 2 bad input (every problem
is listed, naming file, row and field); 3 the scenario is infeasible (the diagnosis says
which limits must move); 4 the time limit ended before any plan was found; 5 a batch finished with members that
failed (bad input, error, crash, no plan in time; re-run the same command to retry them);
6 an internal error (a bug: one line names it and where its full traceback was saved); 7 a
resource limit (the machine ran out of memory: a scenario too large for it, not a bug; the
message says what to cut).
Ctrl-C ends with 130; SIGTERM removes the run's staging folders and ends by the signal. Either
waits while an output moves into place, so a stopped run leaves the old output or the new one.

Every text that comes from the user (names of sites, regions, jobs, scenarios, plans and
batch members, file paths, messages quoting them) is printed as text, never as rich markup
or terminal control codes: see `_text`.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import json
import logging
import functools
import os
import platform
import re
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import click
import typer
from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from dcplace.models import ScenarioError, export_default, load_scenario, scenario_warnings
from dcplace.models.outputs import OutputRefused, check_destination
from dcplace.models.overrides import OverrideError, parse_assignments
from dcplace.models.plan import HAS_PLAN, Plan, PlanFileError, manifest_removed, plan_json_edited, read_plan
from dcplace.models.versions import package_versions
from dcplace.optimizer.solvers.backends import CAPABILITIES
from dcplace.optimizer.check import check_plan_folder
from dcplace.optimizer.model.index import MAX_FULL_PAIRS
from dcplace.optimizer.solving.pipeline import PlanCheckFailed, solve_schedule_to_folder, solve_to_folder
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.progress import SolveProgress
from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions
from dcplace.reports.style import display_name, money, mw_number, mw_text, visible_controls

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
    ExitCode.INTERRUPTED: "stopped by Ctrl-C (SIGTERM ends the process by the signal)",
}


def exit_code_table() -> str:
    """The exit codes as lines `  N  meaning`, for `dcplace --help` and the docs."""
    return "\n".join(f"{int(code):>5}  {meaning}" for code, meaning in EXIT_CODE_MEANINGS.items())


app = typer.Typer(add_completion=False, no_args_is_help=True, help="Placement engine for AI infrastructure.",
                  epilog="Exit codes:\n\n" + "\n\n".join(f"{int(c)}: {m}" for c, m in EXIT_CODE_MEANINGS.items()))
console = Console()
err = Console(stderr=True, soft_wrap=True)

EXIT_CHECK_FAILED = ExitCode.CHECK_FAILED
EXIT_BAD_INPUT = ExitCode.BAD_INPUT
EXIT_INFEASIBLE = ExitCode.INFEASIBLE
EXIT_NO_PLAN = ExitCode.NO_PLAN
EXIT_BATCH_INCOMPLETE = ExitCode.BATCH_INCOMPLETE
EXIT_INTERNAL_ERROR = ExitCode.INTERNAL_ERROR
EXIT_RESOURCE_LIMIT = ExitCode.RESOURCE_LIMIT

def _clean(value: object, newlines: bool = False) -> str:
    """`value` as text with every terminal control character shown as an escape (`\\x1b`);
    line breaks kept when `newlines` (for multi-line messages). reports.style holds the rule."""
    return visible_controls(str(value), newlines)


def _name(value: object) -> str:
    """A name from the inputs for a rich markup string or Table cell: as every output shows it
    (reports.style.display_name: cut to 80 characters, control characters as escapes)."""
    return escape(display_name(value))


def _text(value: object, newlines: bool = False) -> str:
    """User text for a rich markup string or Table cell: shown exactly as typed, never as
    markup (`[link=...]`, `[/]`) or terminal control codes."""
    return escape(_clean(value, newlines))


ScenarioArg = typer.Argument(None, help="Scenario YAML file; omit for the embedded default ('years': the default over "
                             "three periods, docs/periods.md).", show_default=False)


def _bad_input(exc: ScenarioError) -> None:
    err.print(f"[bold red]The scenario has {len(exc.problems)} problem(s):[/]")
    for problem in exc.problems:
        err.print(f"  • {_clean(problem, newlines=True)}", markup=False, highlight=False)
    raise typer.Exit(EXIT_BAD_INPUT)


def _print_warnings(loaded) -> None:
    """Allowed but probably a mistake (a site outside its country, a site that holds no rack); never blocks."""
    warnings = scenario_warnings(loaded)
    if warnings:
        err.print(f"[bold yellow]{len(warnings)} warning(s)[/] (the scenario is still used as given):")
    for problem in warnings:
        err.print(f"  • warning: {_clean(problem, newlines=True)}", markup=False, highlight=False)


def _print_infeasible(diagnosis: list[str]) -> None:
    err.print("[bold red]Infeasible:[/] no plan keeps every limit. To make one possible:")
    for line in diagnosis or ["(no single limit could be named; loosen policies or add capacity)"]:
        err.print(f"  • {_clean(line, newlines=True)}", markup=False, highlight=False)


# ------------------------------------------------------------------ terminal layout

# A money figure (`$1,234.56 M`, reports.style.money) or a unit price (`$0.123 per M tokens`):
# kept whole on one line by _say, never split or cut.
_MONEY_TEXT = re.compile(r"-?\$[\d,]+\.\d+(?: per M tokens| M(?:/yr)?)?")


def _say(markup: str, to: Console | None = None) -> None:
    """Print a paragraph wrapped at word boundaries to the console's width, never inside a
    money figure (rich would break `$1,234.56 M` between the number and its unit)."""
    to = to or console
    text = Text.from_markup(markup)
    plain = text.plain
    protected: set[int] = set()
    for m in _MONEY_TEXT.finditer(plain):
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
class _Col:
    header: str
    cells: list[str]  # rich markup (user text already through _text)
    kind: str = "text"  # "money" and "number": right-aligned, never wrapped or cut; "text": folds


def _fit_table(title: str, columns: list[_Col], drop_order: list[str], to: Console | None = None) -> tuple[Table, list[str]]:
    """A table as wide as the console allows: numbers (money above all) are shown whole at
    their full width; when the table would not fit, whole columns are left out, in
    `drop_order` (lowest priority first), rather than cutting any figure. Returns the
    table and the headers left out."""
    to = to or console
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


def _left_out(dropped: list[str], where: str, to: Console | None = None) -> None:
    """Say which columns a narrow terminal left out, and where the full table is."""
    to = to or console
    if dropped:
        _say(f"[dim]Left out at {to.width} columns: {_text(', '.join(dropped))}; all columns are in {_text(where)}.[/]", to)


class _SolveLine:
    """The live status line of `dcplace solve` (on stderr): phase, elapsed time and, during
    the search, the best plan's cost, the bound and the gap. Fed by solve's progress callback
    (from any thread); redrawn by rich.live about twice a second."""

    def __init__(self, time_limit_s: float, to: Console):
        self.time_limit_s = time_limit_s
        self.to = to
        self.started = time.perf_counter()
        self.latest: SolveProgress | None = None

    def __call__(self, progress: SolveProgress) -> None:
        self.latest = progress  # one reference swap: safe from HiGHS's thread

    def text(self) -> str:
        p = self.latest
        # (priority, text): on a narrow terminal whole parts are left out, least important
        # first (the bound, then the gap, ...): a figure is never cut at the terminal's edge
        parts = [(0, p.label if p else "starting"), (1, f"{time.perf_counter() - self.started:,.0f} s of {self.time_limit_s:g} s")]
        if p is not None and p.incumbent_usd_per_year is not None:
            parts.append((2, f"best {money(p.incumbent_usd_per_year)}/yr"))
        if p is not None and p.bound_usd_per_year is not None:
            parts.append((4, f"bound {money(p.bound_usd_per_year)}"))
        if p is not None and p.gap is not None:
            parts.append((3, f"gap {p.gap:.2%}"))
        return _fit_line(parts, self.to.width)

    def __rich__(self):
        return Spinner("dots", Text(self.text(), no_wrap=True))


def _fit_line(parts: list[tuple[int, str]], width: int) -> str:
    """Parts joined with ' · ', leaving out whole parts (highest priority number first)
    until the line fits `width` less the spinner's 2 cells."""
    parts = list(parts)
    while parts:
        line = " · ".join(text for _, text in parts)
        if cell_len(line) + 2 <= width or len(parts) == 1:
            return line
        parts.remove(max(parts, key=lambda x: x[0]))
    return ""


def _live(renderable, enabled: bool):
    """A transient live display on stderr, or nothing (quiet, or stderr not a terminal).
    stdout is routed above it only when stdout is the terminal too."""
    if not enabled:
        return contextlib.nullcontext()
    return Live(renderable, console=err, refresh_per_second=2, transient=True,
                redirect_stdout=console.is_terminal, redirect_stderr=False)


def _progress_on(quiet: bool) -> bool:
    return not quiet and err.is_terminal


# Columns of the open-sites table left out on a narrow terminal, first to last; the site's
# name and its cost are always shown.
SITE_COLUMN_PRIORITY = ["racks", "facility\nMW", "fabric", "GPUs", "cooling", "role", "IT\nMW"]
JOB_COLUMN_PRIORITY = ["chip", "fabric"]


def print_plan(plan: Plan, out_dir: Path | None = None) -> None:
    """The plan on the terminal: what was solved, the open sites, the jobs, the annual cost
    and the KPIs. At any width every money figure is whole (`$1,234.56 M`): on a narrow
    terminal the lowest-priority columns are left out (SITE_COLUMN_PRIORITY) and the note
    under the tables names the plan folder's CSVs that hold them all."""
    s = plan.solve
    gap = f"{s.gap:.2%}" if s.gap is not None else "n/a"
    _say(
        f"[bold]{_name(plan.scenario)}[/]: [green]{_text(s.status)}[/] in {s.build_time_s + s.solve_time_s:.1f} s "
        f"({s.model['rows']:,} rows, {s.model['columns']:,} columns, {s.model['integers']:,} integers; gap {gap})"
    )
    from dcplace.reports.summary import clock_terminal_lines, status_text  # what "optimal" means here: within the gap, in dollars

    _say(f"Status: {_text(status_text(plan))}.")
    if s.pairs:
        bound_kind = s.pairs.get("bound_kind") or "the full model's LP bound"  # plans written before bound_kind
        _say(
            f"Serving pairs: {s.pairs['pairs_in_model']:,} of {s.pairs['pairs_eligible']:,} eligible in the model after "
            f"{s.pairs['pricing_rounds']} pricing rounds; "
            + (f"the gap is against {bound_kind} ({money(s.pairs['full_lp_bound_usd_per_year'])}/yr)."
               if s.pairs["full_lp_bound_usd_per_year"] is not None else f"{bound_kind}.")
        )
    # Numbers never wrap or shrink to '…'; text columns fold (a name over several lines, cut
    # only past 80 characters: reports.style.display_name); what still does not fit is left out by priority.
    sites = sorted((x for x in plan.sites if x.open), key=lambda x: -x.total_cost_usd_per_year)
    columns = [
        _Col("site", [_name(x.name) for x in sites]),
        _Col("role", [_text(x.role) for x in sites]),
        _Col("racks", [f"{x.racks_total:,}" for x in sites], "number"),
        _Col("GPUs", [f"{x.gpus:,}" for x in sites], "number"),
        _Col("IT\nMW", [mw_number(x.it_kw / 1000) for x in sites], "number"),
        _Col("facility\nMW", [mw_number(x.facility_kw / 1000) for x in sites], "number"),
        _Col("cooling", [_text(", ".join(x.zones)) for x in sites]),
        _Col("fabric", [_text(", ".join(x.fabrics)) for x in sites]),
        _Col("cost/yr", [money(x.total_cost_usd_per_year) for x in sites], "money"),
    ]
    table, dropped = _fit_table("Open sites", columns, SITE_COLUMN_PRIORITY)
    console.print(table)
    if plan.jobs:
        names = {x.id: x.name for x in plan.sites}
        jobs, dropped_jobs = _fit_table("Training jobs", [
            _Col("job", [_name(j.name) for j in plan.jobs]),
            _Col("site", [_name(names.get(j.site, j.site)) for j in plan.jobs]),
            _Col("fabric", [_text(j.fabric) for j in plan.jobs]),
            _Col("chip", [_text(j.chip) for j in plan.jobs]),
            _Col("H100-eq GPUs", [f"{j.gpus_h100_equiv:,.0f}" for j in plan.jobs], "number"),
        ], JOB_COLUMN_PRIORITY)
        console.print(jobs)
        dropped += [f"job {d}" for d in dropped_jobs]
    lines = [(c, v) for c, v in plan.cost_breakdown_usd_per_year.items() if v]
    costs, _ = _fit_table("Annual cost", [
        _Col("category", [_text(c.replace("_", " ")) for c, _ in lines] + ["[bold]total[/]"]),
        _Col("USD/yr", [money(v) for _, v in lines] + [f"[bold]{money(plan.objective_usd_per_year)}[/]"], "money"),
    ], [])
    console.print(costs)
    k = plan.kpis
    _say(
        f"Inference: {k['tokens_per_s_served_peak']:,.0f} tok/s at peak, ${k['usd_per_m_tokens']:.3f} per M tokens, "
        f"mean RTT {k['mean_rtt_ms']:.1f} ms, {k['demand_within_budget_share']:.1%} within budget. "
        f"IT {mw_text(k['it_mw_inference'])} inference + {mw_text(k['it_mw_training'])} training; "
        f"{k['emissions_t_per_year']:,.0f} t CO2/yr."
    )
    for line in clock_terminal_lines(plan):  # the clock and rentals (docs/clock.md); none without them
        _say(_text(line))
    if out_dir is not None:
        if dropped:
            _left_out(dropped, f"{out_dir / 'sites.csv'} and {out_dir / 'jobs.csv'}")
        else:
            _say(f"[dim]Every site, job and assignment: {_text(out_dir / 'sites.csv')}, jobs.csv, assignments.csv.[/]")
        _say(f"Plan written to [bold]{_text(out_dir)}[/] and checked.")
    elif dropped:
        _left_out(dropped, "the plan folder's sites.csv and jobs.csv")


def plan_summary(plan: Plan, out_dir: Path | None = None) -> str:
    """One line for scripts (`--quiet`): status, cost, gap, sites, time, folder."""
    s = plan.solve
    gap = f"gap {s.gap:.2%}" if s.gap is not None else "no gap"
    opened = sum(1 for x in plan.sites if x.open)
    where = f"; plan in {out_dir} (checked)" if out_dir is not None else ""
    return (f"{display_name(plan.scenario)}: {s.status}, {money(plan.objective_usd_per_year)}/yr, {gap}, {opened} sites open, "
            f"{s.build_time_s + s.solve_time_s:.1f} s{where}")


@app.command()
def solve(
    scenario: Optional[Path] = ScenarioArg,
    out: Path = typer.Option(Path("plan"), "--out", "-o", help="Plan folder to write (replaced atomically)."),
    time_limit: float = typer.Option(300.0, "--time-limit", help="Time limit for the whole solve (model build, warm start, search), seconds."),
    gap: float = typer.Option(5e-3, "--gap", help="Relative MIP gap at which to stop (0.005 = proven within 0.5 %)."),
    threads: int = typer.Option(1, "--threads", help="Solver threads."),
    seed: int = typer.Option(0, "--seed", help="Solver random seed."),
    solver: str = typer.Option("highs", "--solver", help=f"Back-end: {', '.join(CAPABILITIES)}."),
    max_full_pairs: int = typer.Option(
        MAX_FULL_PAIRS, "--max-full-pairs",
        help="Above this many eligible (region, class, site) pairs, start from candidate pairs and price the rest in "
        "(docs/solvers.md); the gap is then stated against the full model's LP bound.",
    ),
    race: bool = typer.Option(True, "--race/--no-race", help="With --solver highs on 2+ cores, race OR-Tools' SCIP on the "
                              "full model in a second process; the first to prove the gap wins (docs/solvers.md)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="For scripts: no progress, no tables; one summary line (and errors)."),
    set_: list[str] = typer.Option([], "--set", help="Override one scenario value, PATH=VALUE, as a scenario's overrides: "
                                   "e.g. --set clock.hours=24 (docs/clock.md), --set 'sites[ashburn].power_limit_kw=*1.2'. Repeatable."),
    json_: bool = typer.Option(False, "--json", help="For scripts: no progress; one JSON object on stdout (status, objective, "
                               "gap, sites open, folder, or the problems / diagnosis, and exit_code)."),
) -> None:
    """Solve a scenario and write its plan folder."""
    quiet = quiet or json_
    head = {"command": "solve", "scenario": str(scenario) if scenario else None, "folder": str(out)}
    try:
        options = SolveOptions(solver=solver, time_limit_s=time_limit, mip_gap=gap, threads=threads, seed=seed,
                               max_full_pairs=max_full_pairs, race=race)
        overrides = parse_assignments(set_)
    except (ValueError, OverrideError) as exc:
        if json_:
            _emit_json({**head, "status": "bad_input", "exit_code": int(EXIT_BAD_INPUT), "message": f"Bad option: {exc}"})
        err.print(f"[red]Bad option:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        check_destination(out, "plan")  # refuse --out before any work
        loaded = load_scenario(scenario, overrides=overrides or None, overrides_origin="--set")
        if not quiet:
            _print_warnings(loaded)
            # The solve can take its whole time limit: say at once what is being solved.
            err.print(f"Solving {_name(loaded.name)} ({len(loaded.sites):,} sites, {len(loaded.regions):,} regions, "
                      f"limit {time_limit:g} s)…", highlight=False)
        line = _SolveLine(time_limit, err)
        live = _progress_on(quiet)
        with _live(line, live):  # phase, best plan, bound, gap and elapsed time, while it solves
            if loaded.periods:  # a build schedule over the years (docs/periods.md)
                schedule, plans, _ = solve_schedule_to_folder(loaded, out, options, progress=line if live else None,
                                                              started=_EXEC_STARTED)
            else:
                plan, _ = solve_to_folder(loaded, out, options, progress=line if live else None, started=_EXEC_STARTED)
    except ScenarioError as exc:
        if json_:
            _emit_json({**head, "status": "bad_input", "exit_code": int(EXIT_BAD_INPUT), "problems": [_problem_json(p) for p in exc.problems]})
        _bad_input(exc)
    except InfeasibleScenario as exc:
        if json_:
            _emit_json({**head, "status": "infeasible", "exit_code": int(EXIT_INFEASIBLE), "diagnosis": list(exc.diagnosis)})
        _print_infeasible(exc.diagnosis)
        err.print(f"The diagnosis is recorded in {_text(out / 'plan.json')}.")
        raise typer.Exit(EXIT_INFEASIBLE)
    except NoPlanFound as exc:
        if json_:
            _emit_json({**head, "status": "no_plan", "exit_code": int(EXIT_NO_PLAN), "message": str(exc)})
        err.print(f"[bold red]No plan:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_NO_PLAN)
    except PlanCheckFailed as exc:
        if json_:
            _emit_json({**head, "status": "check_failed", "exit_code": int(EXIT_CHECK_FAILED), "message": str(exc)})
        err.print(f"[bold red]{_text(exc, newlines=True)}[/]")
        raise typer.Exit(EXIT_CHECK_FAILED)
    if json_:
        done = schedule if loaded.periods else plan
        s = done.solve
        _emit_json({**head, "status": s.status, "exit_code": 0, "name": done.scenario, "solver": s.solver, "gap": s.gap,
                    "best_bound_usd_per_year": s.best_bound_usd_per_year, "seconds": s.build_time_s + s.solve_time_s,
                    **({"npv_usd": schedule.npv_usd, "periods": len(schedule.periods)} if loaded.periods else
                       {"objective_usd_per_year": plan.objective_usd_per_year, "sites_open": sum(1 for x in plan.sites if x.open),
                        "kpis": plan.kpis})})
        return
    if loaded.periods:
        print_schedule(schedule, out, quiet)
    elif quiet:
        console.print(_clean(plan_summary(plan, out)), markup=False, highlight=False, soft_wrap=True)
    else:
        print_plan(plan, out)


def print_schedule(schedule, out_dir: Path, quiet: bool = False) -> None:
    """A schedule on the terminal: NPV, gap, and per period what is open, bought and retired."""
    from dcplace.reports.schedule import schedule_lines

    s = schedule.solve
    gap = f"gap {s.gap:.2%}" if s.gap is not None else "no gap"
    head = (f"{display_name(schedule.scenario)}: {s.status}, NPV {money(schedule.npv_usd)} over {len(schedule.periods)} periods, {gap}, "
            f"{s.build_time_s + s.solve_time_s:.1f} s; schedule in {out_dir} (checked)")
    console.print(_clean(head), markup=False, highlight=False, soft_wrap=True)
    if not quiet:
        for text in schedule_lines(schedule):
            console.print(_clean(text), markup=False, highlight=False, soft_wrap=True)


JsonOption = typer.Option(False, "--json", help="For scripts: print one JSON object on stdout (status, problems or "
                          "violations, exit_code) instead of text; the exit code is the same.")


def _emit_json(payload: dict) -> None:
    """One JSON object on stdout, then exit with its `exit_code`."""
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
    sys.stdout.flush()
    if payload["exit_code"]:
        raise typer.Exit(payload["exit_code"])


def _problem_json(problem) -> dict:
    return {"file": problem.file, "row": problem.row, "field": problem.field, "message": problem.message, "fix": problem.fix}


@app.command()
def validate(scenario: Optional[Path] = ScenarioArg, json_: bool = JsonOption) -> None:
    """Check a scenario's files and what can be known before solving; list every problem."""
    try:
        loaded = load_scenario(scenario)
        if loaded.periods:  # every period's own scenario, prechecked (docs/periods.md)
            from dcplace.optimizer.solving.periods import period_indexes

            period_indexes(loaded, SolveOptions())
        else:
            checked_index(loaded)
    except ScenarioError as exc:
        if json_:
            _emit_json({"command": "validate", "scenario": str(scenario) if scenario else None, "status": "bad_input",
                        "exit_code": int(EXIT_BAD_INPUT), "problems": [_problem_json(p) for p in exc.problems], "warnings": []})
        _bad_input(exc)
    demand = sum(sum(r.demand_tok_s.values()) for r in loaded.regions)
    if json_:
        _emit_json({"command": "validate", "scenario": str(scenario) if scenario else None, "status": "ok", "exit_code": 0,
                    "problems": [], "warnings": [_problem_json(p) for p in scenario_warnings(loaded)],
                    "name": loaded.name, "sites": len(loaded.sites), "regions": len(loaded.regions), "jobs": len(loaded.jobs),
                    "rack_configs": len(loaded.catalog.rack_configs), "peak_demand_tok_s": demand,
                    "periods": [p.year for p in loaded.periods]})
        return
    _print_warnings(loaded)
    console.print(
        f"[green]OK[/]: scenario '{_name(loaded.name)}': {len(loaded.sites)} sites, {len(loaded.regions)} regions "
        f"({demand:,.0f} tok/s peak demand), {len(loaded.jobs)} training jobs, {len(loaded.catalog.rack_configs)} rack configurations"
        + (f"; {len(loaded.periods)} periods, {loaded.periods[0].year}-{loaded.periods[-1].year + loaded.periods[-1].years - 1}." if loaded.periods else ".")
    )


def _check_outcome(folder: Path) -> dict:
    """What `dcplace check` found, as the JSON it prints with --json: status (pass, fail,
    infeasible, bad_input), exit_code, violations, and `text` / `lines`, the rich markup the
    terminal shows (stderr unless status is pass)."""
    out = {"command": "check", "folder": str(folder), "violations": [], "checked": [], "plan_status": None,
           "recomputed_cost_usd_per_year": None, "diagnosis": []}

    def bad(text: str) -> dict:
        return {**out, "status": "bad_input", "exit_code": int(EXIT_BAD_INPUT), "text": text, "lines": []}

    def fail(report) -> dict:
        return {**out, "status": "fail", "exit_code": int(EXIT_CHECK_FAILED), "checked": report.checked,
                "violations": [{"family": v.family, "message": v.message} for v in report.violations],
                "text": f"[bold red]FAIL[/]: {_text(folder)}: {len(report.violations)} violation(s):",
                "lines": [str(v) for v in report.violations]}

    if (folder / "schedule.json").is_file():
        from dcplace.optimizer.check_schedule import check_schedule_folder

        report = check_schedule_folder(folder)
        if not report.ok:
            return fail(report)
        return {**out, "status": "pass", "exit_code": 0, "kind": "schedule", "checked": report.checked,
                "recomputed_cost_usd_per_year": report.recomputed_cost_usd_per_year, "lines": [],
                "text": f"[green]PASS[/]: {_text(folder)}: every period's plan and the ties between periods hold "
                        f"({len(report.checked)} checks); the NPV adds up to ${report.recomputed_cost_usd_per_year:,.2f}."}
    if not (folder / "plan.json").exists() or not (folder / "inputs" / "scenario.yaml").exists():
        return bad(f"[red]{_text(folder)}: not a plan folder[/] (plan.json and inputs/scenario.yaml are needed). Fix: give a folder written by `dcplace solve`.")
    try:
        report = check_plan_folder(folder)
    except (KeyError, ValueError, OSError) as exc:
        return bad(f"[red]{_text(folder)}: the plan folder is damaged[/] ({type(exc).__name__}: {_text(exc, newlines=True)}). "
                   "Fix: re-run `dcplace solve`.")
    if report.violations and all(v.family == "manifest" and "has no manifest.json" in v.message for v in report.violations):
        if manifest_removed(folder):  # the folder was written with one: it was deleted, not never there
            return bad(f"[red]{_text(folder)}: its manifest.json was removed[/] (the folder's marker lists it), so its files "
                       "cannot be verified. Fix: restore manifest.json, or re-run `dcplace solve` (its command is in "
                       "inputs/provenance.json, `rerun`).")
        return bad(f"[red]{_text(folder)}: written before plan folders carried a manifest[/], so it cannot be verified. "
                   "Fix: re-run `dcplace solve` (its command is in inputs/provenance.json, `rerun`).")
    if not report.ok:
        return fail(report)
    out.update(plan_status=report.status, checked=report.checked, recomputed_cost_usd_per_year=report.recomputed_cost_usd_per_year)
    if report.status not in HAS_PLAN:
        try:
            diagnosis = read_plan(folder).diagnosis
        except (OSError, ValueError) as exc:
            return bad(f"[red]{_text(folder)}: the plan folder is damaged[/] ({type(exc).__name__}). Fix: re-run `dcplace solve`.")
        return {**out, "status": "infeasible", "exit_code": int(EXIT_INFEASIBLE), "diagnosis": diagnosis, "text": "", "lines": []}
    return {**out, "status": "pass", "exit_code": 0, "lines": [],
            "text": f"[green]PASS[/]: {_text(folder)}: {len(report.checked)} constraint families hold "
                    f"({_text(', '.join(report.checked))}); line items add up to ${report.recomputed_cost_usd_per_year:,.2f}/yr."}


@app.command()
def check(folder: Path = typer.Argument(..., help="A plan folder written by `dcplace solve`."), json_: bool = JsonOption) -> None:
    """Re-check a plan folder (or a multi-period schedule folder) with the independent checker."""
    outcome = _check_outcome(folder)
    text, lines = outcome.pop("text"), outcome.pop("lines")
    if json_:
        _emit_json({**outcome, "message": Text.from_markup(text).plain})
        return
    if outcome["status"] == "pass":
        console.print(text)
        return
    if outcome["status"] == "infeasible":
        _print_infeasible(outcome["diagnosis"])
    else:
        err.print(text)
        for line in lines:
            err.print(f"  • {_clean(line, newlines=True)}", markup=False, highlight=False)
    raise typer.Exit(outcome["exit_code"])


def _warn_if_edited(folder: Path) -> None:
    """Reports show a plan as its plan.json stands; when that file is not the one `dcplace solve`
    wrote (its SHA-256 differs from manifest.json's), say so before showing it."""
    if plan_json_edited(folder):
        err.print(f"[yellow]Warning[/]: {_text(folder / 'plan.json')} was changed after `dcplace solve` wrote it (its SHA-256 "
                  f"differs from manifest.json's); what follows shows it as it now stands. Fix: `dcplace check {_text(folder)}` "
                  "lists what no longer holds; re-run `dcplace solve` for a plan you can trust.")


def _plan_layers(folder: Path):
    """The plan folder's layers for a report command, or a clear message and exit code."""
    from dcplace.reports import NoPlanToReport, NotAPlanFolder, load_plan_layers  # matplotlib/plotly load only when asked

    _warn_if_edited(folder)
    try:
        return load_plan_layers(folder)
    except NoPlanToReport as exc:
        err.print(_clean(exc, newlines=True), markup=False, highlight=False)
        raise typer.Exit(EXIT_INFEASIBLE)
    except NotAPlanFolder as exc:
        err.print(_clean(exc, newlines=True), markup=False, highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT)


def _written(paths: list[Path]) -> None:
    for path in paths:
        console.print(f"  {_text(path)}  ({path.stat().st_size / 1e6:,.2f} MB)", highlight=False)


PlanFolderArg = typer.Argument(..., help="A plan folder written by `dcplace solve`.")


@app.command()
def export(
    folder: Path = PlanFolderArg,
    fmt: str = typer.Option("gpkg", "--format", "-f", help="geojson, gpkg, parquet, csv, or xlsx (the plan's tables as one workbook)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for the layers; default FOLDER/export."),
) -> None:
    """Write sites, regions and assignment lines as GIS layers (EPSG:4326), or the plan's tables as one Excel workbook."""
    from dcplace.reports import EXPORT_FORMATS, export_layers
    from dcplace.reports.layers import zero_length

    if fmt not in EXPORT_FORMATS:
        err.print(f"[red]Unknown format {_text(repr(fmt))}.[/] Fix: --format one of {', '.join(EXPORT_FORMATS)}.")
        raise typer.Exit(EXIT_BAD_INPUT)
    layers = _plan_layers(folder)
    paths = export_layers(layers, out or folder / "export", fmt)
    console.print(f"Exported {fmt}:")  # only once they are written
    _written(paths)
    unlined = int(zero_length(layers.assignments).sum())
    if unlined and fmt != "xlsx":
        console.print(f"[dim]{unlined:,} of {len(layers.assignments):,} assignments have no line (an empty geometry): each serves "
                      "a region from a site at the same place (0 km).[/]")


@app.command("map")
def map_(
    folder: Path = PlanFolderArg,
    png: bool = typer.Option(False, "--png", help="Static map, 200 dpi PNG."),
    pdf: bool = typer.Option(False, "--pdf", help="Static map, vector PDF."),
    html: bool = typer.Option(False, "--html", help="Interactive map, one HTML file that works offline."),
    extent: str = typer.Option("auto", "--extent", help="auto (zoom to a regional plan) or world."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for the maps; default FOLDER/report."),
) -> None:
    """Draw the plan on a map: PNG/PDF (equal-area, labelled) and/or interactive HTML. No flag: all three."""
    from dcplace.reports import save_maps

    if extent not in ("auto", "world"):
        err.print(f"[red]Unknown extent {_text(repr(extent))}.[/] Fix: --extent auto or --extent world.")
        raise typer.Exit(EXIT_BAD_INPUT)
    if not (png or pdf or html):
        png = pdf = html = True
    layers = _plan_layers(folder)
    paths = save_maps(layers, out or folder / "report", png=png, pdf=pdf, html=html, extent=extent)
    console.print("Maps written:")
    _written(paths)


@app.command()
def report(
    folder: Path = PlanFolderArg,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for report.html and report.pdf; default FOLDER/report."),
) -> None:
    """Executive report (HTML and PDF): KPIs, map, cost by category and site, sites, solver, provenance
    (of a multi-period schedule folder: NPV, builds per period, cost per period, a map per period)."""
    from dcplace.reports import save_report

    if (folder / "schedule.json").is_file():
        from dcplace.reports.schedule import save_schedule_report

        paths = save_schedule_report(folder, out or folder / "report")
        console.print("Report written:")
        _written(paths)
        return

    layers = _plan_layers(folder)
    paths = save_report(layers, out or folder / "report")
    console.print("Report written:")  # only once it is written
    _written(paths)


@app.command()
def outages(
    folder: Path = PlanFolderArg,
    regions: int = typer.Option(20, "--regions", help="Also list this many (lost site, region) pairs with demand at risk; 0 = none."),
) -> None:
    """What losing each open site costs: tok/s at risk and where, fallback RTT, training stalled (any plan folder)."""
    from dcplace.optimizer.studies.outages import NoOutageTable, outage_table
    from dcplace.reports.outages import region_rows, site_rows, summary_lines

    _warn_if_edited(folder)
    try:
        table = outage_table(folder)
    except NoOutageTable as exc:
        err.print(_clean(exc, newlines=True), markup=False, highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT if "not a plan folder" in str(exc) else EXIT_INFEASIBLE)
    except (ScenarioError, ValueError) as exc:
        err.print(f"[red]{_text(folder)}: the plan folder is damaged[/] ({_text(exc, newlines=True)}). Fix: re-run `dcplace solve`.")
        raise typer.Exit(EXIT_BAD_INPUT)
    for line in summary_lines(table):
        console.print(_clean(line), markup=False, highlight=False)
    for title, (columns, rows, numeric) in (("Single-site losses", site_rows(table)),
                                            ("Demand at risk", region_rows(table, regions) if regions else ([], [], []))):
        if not rows:
            continue
        grid = Table(title=title, show_lines=False)
        for column, right in zip(columns, numeric):
            grid.add_column(column, justify="right" if right else "left")
        for row in rows:
            grid.add_row(*[Text(_clean(cell)) for cell in row])
        console.print(grid)


class _BatchLine:
    """The live status line of `dcplace batch` and `dcplace pareto` (on stderr): members done,
    failed and running, elapsed time, ETA, what is being solved and the last result."""

    def __init__(self, name: str, to: Console):
        self.name = name
        self.to = to
        self.started = time.perf_counter()
        self.stage = ""  # pareto: the point(s) being solved
        self.progress = None

    def __call__(self, progress) -> None:
        self.progress = progress

    def text(self) -> str:
        p = self.progress
        parts = [(3, self.name)]
        if self.stage:
            parts.append((1, self.stage))
        if p is not None:
            parts += [(0, f"{p.done}/{p.total} done"), (0, f"{p.failed} failed"), (0, f"{p.running} running")]
        parts.append((2, f"{time.perf_counter() - self.started:,.0f} s"))
        if p is not None and p.eta_s is not None:
            parts.append((4, f"ETA {p.eta_s:,.0f} s"))
        if p is not None and p.last is not None:
            cost = f" {money(p.last.objective_usd_per_year)}/yr" if p.last.objective_usd_per_year is not None else ""
            parts.append((5, f"last: {_clean(p.last.name)} {p.last.status}{cost}"))
        return _fit_line(parts, self.to.width)

    def __rich__(self):
        return Spinner("dots", Text(self.text(), no_wrap=True))


def _member_line(r) -> None:
    """One finished member, as it finishes."""
    colour = "red" if r.status not in HAS_PLAN else "green"
    note = " (already solved)" if r.skipped else ""
    cost = f" {money(r.objective_usd_per_year)}/yr" if r.objective_usd_per_year is not None else ""
    detail = f": {r.message[:200]}" if r.message else ""
    _say(f"  [{colour}]{_text(r.status)}[/] " + _text(f"{r.name}{note}{cost}{detail}"))


# Columns of the batch summary left out on a narrow terminal, first to last; the member's name,
# its status and its cost are always shown.
BATCH_COLUMN_PRIORITY = ["time s", "RTT ms", "$/M tok", "gap", "sites"]


def print_batch_summary(results, index: Path) -> None:
    """The members' results as a table: cost whole at any width (columns are left out by
    BATCH_COLUMN_PRIORITY instead); every KPI of every member is in batch.csv."""
    dash = "—"

    def kpi(r, key: str, fmt: str) -> str:
        value = r.kpis.get(key)
        return fmt.format(value) if value is not None else dash

    table, dropped = _fit_table("Batch", [
        _Col("member", [_name(r.name) for r in results]),
        _Col("status", [_text(r.status + (" (resumed)" if r.skipped else "")) for r in results]),
        _Col("cost/yr", [money(r.objective_usd_per_year) if r.objective_usd_per_year is not None else dash for r in results], "money"),
        _Col("gap", [f"{r.gap:.2%}" if r.gap is not None else dash for r in results], "number"),
        _Col("$/M tok", [kpi(r, "usd_per_m_tokens", "{:.3f}") for r in results], "number"),
        _Col("RTT ms", [kpi(r, "mean_rtt_ms", "{:.1f}") for r in results], "number"),
        _Col("sites", [kpi(r, "sites_open", "{:,.0f}") for r in results], "number"),
        _Col("time s", [f"{r.seconds:,.1f}" for r in results], "number"),
    ], BATCH_COLUMN_PRIORITY)
    console.print(table)
    _left_out(dropped, str(index))


@app.command()
def batch(
    sweep_file: Path = typer.Argument(..., help="Sweep YAML: a base scenario with named members and/or a grid of overrides."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the member plan folders, batch.json and batch.csv."),
    workers: int = typer.Option(1, "--workers", "-w", help="Members solved at once (local process pool)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address (tcp://host:8786) instead of local processes."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="For scripts: no progress, no tables; one summary line (and errors)."),
) -> None:
    """Solve every scenario of a sweep, each into its own plan folder; re-run to resume."""
    from dcplace.models.sweep import load_sweep
    from dcplace.optimizer.studies.batch import BatchBusy, batch_options, run_batch

    try:
        sweep = load_sweep(sweep_file)
        batch_options(sweep)
    except ScenarioError as exc:
        _bad_input(exc)
    except ValueError as exc:
        err.print(f"[red]{_text(sweep_file)}:[/] {_text(exc, newlines=True)}. Fix: correct the sweep's options.")
        raise typer.Exit(EXIT_BAD_INPUT)
    if workers < 1:
        err.print("[red]--workers must be at least 1.[/]")
        raise typer.Exit(EXIT_BAD_INPUT)
    line = _BatchLine(_clean(sweep.name), err)

    def show(p) -> None:
        line(p)
        if p.last is not None and not quiet:
            _member_line(p.last)

    try:
        with _live(line, _progress_on(quiet)):  # members done, failed and running, while they solve
            result = run_batch(sweep, out, workers=workers, scheduler=scheduler, on_progress=show)
    except BatchBusy as exc:
        err.print(f"[red]{_text(exc, newlines=True)}[/]")
        raise typer.Exit(EXIT_BAD_INPUT)
    if not quiet:
        print_batch_summary(result.results, out / "batch.csv")
    else:
        for r in result.results:
            if r.status not in ("optimal", "feasible", "infeasible"):
                err.print(_clean(f"  • {r.name}: {r.status}: {r.message[:300]}"), markup=False, highlight=False)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result.by_status().items()))
    console.print(_clean(f"{len(result.results)} scenarios: {counts}. Index: {out / 'batch.csv'}"), markup=False,
                  highlight=False, soft_wrap=quiet)
    if not result.ok:
        raise typer.Exit(EXIT_BATCH_INCOMPLETE)


@app.command()
def compare(
    folders: list[Path] = typer.Argument(..., help="Plan folders and/or batch folders (a batch folder stands for all its members)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", "-b", help="Name (folder name) of the plan to compare against; default the first with a plan."),
    out: Path = typer.Option(Path("compare"), "--out", "-o", help="Folder for compare.csv, compare_sites.csv, compare_costs.csv and compare.html."),
) -> None:
    """Plans against a baseline: real spend vs notional charges, emissions, sites that move, failures."""
    from dcplace.reports import NotAPlanFolder
    from dcplace.reports.compare import build_comparison, collect_plans, write_comparison

    try:
        plans = collect_plans(folders)
        comparison = build_comparison(plans, baseline)
        paths = write_comparison(comparison, out)
    except NotAPlanFolder as exc:
        err.print(_text(exc, newlines=True))
        raise typer.Exit(EXIT_BAD_INPUT)
    except ValueError as exc:
        err.print(f"[red]{_text(exc, newlines=True)}[/]")
        raise typer.Exit(EXIT_BAD_INPUT)
    rows = comparison.table.to_dict(orient="records")
    nan = lambda v: v is None or v != v  # noqa: E731
    fmt = lambda v, f: "—" if nan(v) else f.format(v)  # noqa: E731
    signed = lambda v: "—" if nan(v) else ("+" if round(v, 2) > 0 else "") + money(v * 1e6).removesuffix(" M").replace("$", "")  # noqa: E731
    # (header, priority, cells, numeric): columns are dropped lowest priority first until the
    # table fits the terminal; numbers never wrap or shrink, so money is never cut.
    columns = [
        ("plan", 1, [_text(r["plan"]) for r in rows], False),
        ("status", 1, [_text(r.get("proof") or r["status"]) for r in rows], False),
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

    budget, used, shown = console.width, 1, []  # 1: the table's left edge; 3 per column: padding and border
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
    view = Table(title=f"Against {_text(comparison.baseline)}", title_justify="left")
    for (header, _, cells, numeric), w in zip(shown, widths):
        view.add_column(header, justify="right" if numeric else "left", width=w, overflow="fold")
    for i, r in enumerate(rows):
        view.add_row(*(cells[i] for _, _, cells, _ in shown), style="bold" if r["baseline"] else None)
    console.print(view)
    if len(shown) < len(columns):
        console.print(f"[dim]({len(columns) - len(shown)} columns left out at {console.width} columns; all are in compare.csv)[/]")
    stories = comparison.stories()
    changed = [r for r in rows if not r["baseline"] and not r["cause"]]
    if changed:
        console.print("\n[bold]What changes[/]")
        for r in changed:  # name, then its story and movers wrapped under it, indented
            console.print(f"  [bold]{_text(r['plan'])}[/]", highlight=False)
            console.print(Padding(_text(stories[r["plan"]]), (0, 0, 0, 4)), highlight=False)
            if r.get("inputs_changed") and r["inputs_changed"] != "none":
                console.print(Padding(f"inputs: {_text(r['inputs_changed'])}", (0, 0, 0, 4)), highlight=False)
            if r.get("classes_protected"):
                console.print(Padding(f"N-1 buys: worst loss {_text(r['worst_loss_baseline'])} -> {_text(r['worst_loss_plan'])}; "
                                      f"protected: {_text(r['classes_protected'])}", (0, 0, 0, 4)), highlight=False)
            if r["top_movers"]:
                console.print(Padding(f"sites: {_text(r['top_movers'])}", (0, 0, 0, 4)), highlight=False)
    failed = [r for r in rows if r["cause"]]
    if failed:
        console.print(f"\n[bold red]{len(failed)} without a plan[/] (answers too: the limit or input that stops them)")
        for r in failed:
            overrides = f" (overrides: {_text(r['overrides'])})" if r["overrides"] else ""
            console.print(f"  [bold]{_text(r['plan'])}[/] ({_text(r['status'])})", highlight=False)
            console.print(Padding(f"{_text(r['cause'])}{overrides}", (0, 0, 0, 4)), highlight=False)
    _written(paths)


@app.command()
def pareto(
    scenario: Optional[Path] = ScenarioArg,
    tradeoff: str = typer.Option("carbon", "--tradeoff", "-t", help="carbon (epsilon constraint on emissions) or latency (weight on distance)."),
    points: int = typer.Option(6, "--points", "-n", help="Points on the curve, the least-cost plan included (carbon also lists the least-emissions solve)."),
    out: Path = typer.Option(Path("pareto"), "--out", "-o", help="Folder for pareto.csv/png/html and points/ (one plan folder per point)."),
    workers: int = typer.Option(1, "--workers", "-w", help="Points solved at once."),
    time_limit: float = typer.Option(300.0, "--time-limit", help="Solver time limit per point, seconds."),
    gap: float = typer.Option(5e-3, "--gap", help="Relative MIP gap per point."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="For scripts: no progress, no tables; one summary line (and errors)."),
) -> None:
    """Trace annual cost against emissions or mean latency and draw the frontier."""
    from dcplace.optimizer.studies.pareto import NoFrontier, TRADEOFFS, failed_points, trace_pareto
    from dcplace.reports.pareto import save_frontier

    if tradeoff not in TRADEOFFS or points < 2 or workers < 1:
        err.print(f"[red]Bad option.[/] Fix: --tradeoff one of {', '.join(TRADEOFFS)}, --points >= 2, --workers >= 1.")
        raise typer.Exit(EXIT_BAD_INPUT)
    options = {"time_limit_s": time_limit, "mip_gap": gap}
    try:
        loaded = load_scenario(scenario)
        line = _BatchLine(f"cost against {tradeoff}", err)

        def stage(names: list[str]) -> None:  # the point(s) now being solved
            line.stage = f"point {_clean(names[0])}" if len(names) == 1 else f"points {_clean(names[0])}…{_clean(names[-1])}"
            line.progress = None

        with _live(line, _progress_on(quiet)):  # the current point, points done, failed and running
            frontier = trace_pareto(loaded, out, tradeoff, points, workers, options, on_progress=line, on_stage=stage)
    except ScenarioError as exc:
        _bad_input(exc)
    except ValueError as exc:  # a scenario the trade-off cannot steer (docs/periods.md)
        err.print(f"[red]Cannot trace the curve:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_BAD_INPUT)
    except NoFrontier as exc:
        err.print(f"[bold red]No frontier:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_INFEASIBLE)
    paths = save_frontier(frontier, out, tradeoff, loaded.name)
    failed = failed_points(frontier)
    if quiet:
        costs = [p.cost_usd_per_year for p in frontier if p.cost_usd_per_year is not None]
        console.print(_clean(f"cost against {tradeoff} for {loaded.name}: {len(frontier) - len(failed)} of {len(frontier)} points "
                             f"solved, {sum(p.efficient for p in frontier)} efficient, {money(min(costs))} to {money(max(costs))}/yr; "
                             f"{out / 'pareto.csv'}"), markup=False, highlight=False, soft_wrap=True)
    else:
        dash = "—"
        view, dropped = _fit_table(f"Cost against {_text(tradeoff)}", [
            _Col("point", [_name(p.name) for p in frontier]),
            _Col("setting", [_text(p.parameter) for p in frontier]),
            _Col("status", [_text(p.status) for p in frontier]),
            _Col("cost/yr", [money(p.cost_usd_per_year) if p.cost_usd_per_year is not None else dash for p in frontier], "money"),
            _Col("mean RTT ms", [f"{p.mean_rtt_ms:.2f}" if p.mean_rtt_ms is not None else dash for p in frontier], "number"),
            _Col("kt CO2/yr", [f"{p.emissions_t_per_year / 1e3:,.2f}" if p.emissions_t_per_year is not None else dash
                               for p in frontier], "number"),
            _Col("efficient", ["yes" if p.efficient else "no" for p in frontier]),
        ], ["setting", "status", "efficient", "mean RTT ms" if tradeoff == "carbon" else "kt CO2/yr"])
        console.print(view)
        _left_out(dropped, str(out / "pareto.csv"))
        _written(paths)
        started_from = [p for p in frontier if p.message and p.cost_usd_per_year is not None]
        for p in started_from:
            _say(f"  note: {_text(p.name)}: {_text(p.message)}")
    if failed:
        err.print(f"[bold red]{len(failed)} of {len(frontier)} points failed[/] (re-run the same command to retry them):")
        for p in failed:
            err.print(f"  • {_text(p.name)} ({_text(p.parameter)}): {_text(p.status)}: {_text(p.message[:300])}")
        raise typer.Exit(EXIT_BATCH_INCOMPLETE)


why_app = typer.Typer(no_args_is_help=True, help="Why this plan: prices of limits, site worth, alternatives, robustness (docs/why.md).")
app.add_typer(why_app, name="why")


def _explainable(folder: Path):
    """A plan folder's plan and scenario for an explanation, or a clear message and exit 2."""
    from dcplace.optimizer.studies.explain import NotExplainable, plan_and_scenario

    try:
        return plan_and_scenario(folder)
    except NotExplainable as exc:
        err.print(_clean(exc, newlines=True), markup=False, highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    except ScenarioError as exc:
        _bad_input(exc)


def _bad_option(exc: Exception) -> None:
    err.print(f"[red]Bad option:[/] {_text(exc, newlines=True)}")
    raise typer.Exit(EXIT_BAD_INPUT)


@why_app.command("prices")
def why_prices(folder: Path = PlanFolderArg) -> None:
    """Prices of the limits: LP duals with the plan's integer decisions fixed (site power, floor, carbon, capex, max share)
    and the latency budgets' finite differences; saved in FOLDER/why/prices/."""
    from dcplace.optimizer.studies.duals import PlanLPError, prices_of_plan

    _explainable(folder)
    try:
        result = prices_of_plan(folder)
    except PlanLPError as exc:
        err.print(f"[red]No prices:[/] {_text(exc)}")
        raise typer.Exit(EXIT_BAD_INPUT)
    view, _ = _fit_table("Binding limits (LP duals, integer decisions fixed)", [
        _Col("limit", [_text(p.limit) for p in result.binding()]),
        _Col("where", [_name(p.name) for p in result.binding()]),
        _Col("$/yr per unit", [f"{p.value_usd_per_year_per_unit:,.2f}" for p in result.binding()], "number"),
        _Col("unit", [_text(p.unit) for p in result.binding()]),
        _Col("check", ["" if p.check_usd_per_year_per_unit is None else f"{p.check_usd_per_year_per_unit:,.2f}"
                       for p in result.binding()], "number"),
    ], ["check", "unit"])
    console.print(view)
    _say(f"Plan LP {money(result.lp_objective_usd_per_year)}/yr against the plan's {money(result.plan_objective_usd_per_year)}/yr; "
         f"{result.seconds:,.1f} s. Saved: {_text(folder / 'why' / 'prices' / 'prices.json')}")


@why_app.command("worth")
def why_worth(
    folder: Path = PlanFolderArg,
    workers: int = typer.Option(1, "--workers", "-w", help="Re-solves run at once."),
    candidates: int = typer.Option(5, "--candidates", help="Closed candidates to price (the substitutes the re-solves open most, then the LP relaxation's nearest)."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Per re-solve, seconds (default: the plan's)."),
    gap: Optional[float] = typer.Option(None, "--gap", help="Per re-solve (default: the plan's)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress line."),
) -> None:
    """What each open site is worth (a re-solve without it) and what closed candidates lack to enter; resumable."""
    from dcplace.optimizer.studies.worth import site_worth

    _explainable(folder)
    if workers < 1 or candidates < 0:
        _bad_option(ValueError("--workers >= 1 and --candidates >= 0 are required"))
    options = {k: v for k, v in (("time_limit_s", time_limit), ("mip_gap", gap)) if v is not None}
    line = _BatchLine("site worth", err)
    with _live(line, _progress_on(quiet)):
        study = site_worth(folder, workers=workers, options=options, closed_candidates=candidates, on_progress=line)
    rows = sorted(study.items, key=lambda w: (w.kind, -(w.worth_usd_per_year or float("inf"))))
    view, _ = _fit_table("What each site is worth (cost without it; for closed candidates: cost with it)", [
        _Col("site", [_name(w.name) for w in rows]),
        _Col("kind", [w.kind for w in rows]),
        _Col("worth/yr", ["indispensable" if w.indispensable else money(w.worth_usd_per_year) if w.worth_usd_per_year is not None
                          else _text(w.status) for w in rows], "money"),
        _Col("tie", ["tie" if w.tie else "" for w in rows]),
    ], ["tie"])
    console.print(view)
    _say(f"{len(study.items)} re-solves in {study.seconds:,.0f} s. Saved: {_text(Path(study.folder) / 'worth.json')}")
    if study.failed():
        err.print(f"[bold red]{len(study.failed())} re-solves failed[/] (re-run the same command to retry them).")
        raise typer.Exit(EXIT_BATCH_INCOMPLETE)


def _alternatives(folder: Path, k: int, slack: float, time_limit: float) -> None:
    from dcplace.optimizer.studies.alternatives import near_optimal_alternatives

    _explainable(folder)
    try:
        study = near_optimal_alternatives(folder, k=k, slack=slack, time_limit_s=time_limit,
                                          on_alternative=lambda a: err.print(f"  {a.name}: {money(a.cost_usd_per_year)}/yr "
                                                                             f"({a.over_plan_share:+.2%}), {a.differs_from_plan} sites different"))
    except ValueError as exc:
        _bad_option(exc)
    names = study.names
    _say(f"{len(study.alternatives)} alternatives within {slack:.0%}, each checked. Must-haves ({len(study.must_haves())}): "
         + _text(", ".join(display_name(names.get(s, s)) for s in study.must_haves())) + f"; interchangeable: {len(study.interchangeable())} sites."
         + (f" {_text(study.note)}." if study.note else ""))
    _say(f"Saved: {_text(Path(study.folder))} (one checked plan folder per alternative); {study.seconds:,.0f} s.")


@why_app.command("alternatives")
def why_alternatives(
    folder: Path = PlanFolderArg,
    k: int = typer.Option(5, "--k", "-k", help="How many alternatives."),
    slack: float = typer.Option(0.02, "--slack", help="Cost slack over the plan (0.02 = within 2 %)."),
    time_limit: float = typer.Option(60.0, "--time-limit", help="Search time per alternative, seconds."),
) -> None:
    """Near-optimal alternatives (MGA): k checked plans within the slack that open other sites."""
    _alternatives(folder, k, slack, time_limit)


# The same command at the top level, since alternatives are what a strategist asks for first.
app.command("alternatives", help="Near-optimal alternatives (MGA): k checked plans within the slack that open other sites "
            "(= `dcplace why alternatives`).")(why_alternatives)


@why_app.command("robustness")
def why_robustness(
    folder: Path = PlanFolderArg,
    samples: int = typer.Option(50, "--samples", "-n", help="Sampled scenarios."),
    workers: int = typer.Option(1, "--workers", "-w", help="Samples solved at once."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Per sample, seconds (default: the plan's)."),
    gap: Optional[float] = typer.Option(None, "--gap", help="Per sample (default: the plan's)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress line."),
    robust_plan: bool = typer.Option(False, "--robust-plan", help="Also choose the robust plan: the candidate plan with the "
                                     "least worst-case cost over the samples, written as a checked plan folder (docs/why.md)."),
    quantile: float = typer.Option(0.9, "--quantile", help="The cost quantile reported beside the worst case (0 < q <= 1)."),
) -> None:
    """Perturb the inputs within the ranges their provenance records, re-solve each sample, label each open site and
    training placement robust or 'depends on ...', report flips, regret and a tornado; --robust-plan adds the robust plan."""
    from dcplace.optimizer.studies.robustness import robustness
    from dcplace.reports.summary import robustness_lines

    _explainable(folder)
    options = {k: v for k, v in (("time_limit_s", time_limit), ("mip_gap", gap)) if v is not None}
    line = _BatchLine("robustness", err)
    try:
        with _live(line, _progress_on(quiet)):
            study = robustness(folder, samples=samples, workers=workers, seed=seed, options=options, on_progress=line,
                               robust_plan=robust_plan, quantile=quantile)
    except ValueError as exc:
        _bad_option(exc)
    q = study.regret_quantiles()
    rates = list(study.flip_rates().items())[:8]
    _say(f"{len(study.solved())} of {len(study.samples)} samples solved in {study.seconds:,.0f} s. "
         + (f"Regret of the plan: median {money(q['p50'])}, p90 {money(q['p90'])}, worst {money(q['max'])}/yr. " if q else "")
         + ("Decisions that flip: " + _text(", ".join(f"{display_name(study.names.get(s, s))} {r:.0%}" for s, r in rates)) if rates else "No decision flips."))
    for b in study.tornado()[:5]:
        _say(f"  {_text(b.label)}: least cost {money(b.cost_swing_usd_per_year)} from low to high")
    for text in robustness_lines(study):
        _say(_text(text))
    _say(f"Saved: {_text(Path(study.folder) / 'robustness.json')}, {_text(Path(study.folder) / 'labels.csv')}")
    if len(study.solved()) < len(study.samples):
        err.print("[bold red]Some samples failed[/] (re-run the same command to retry them).")
        raise typer.Exit(EXIT_BATCH_INCOMPLETE)


data_app = typer.Typer(no_args_is_help=True, help="The embedded default data.")
app.add_typer(data_app, name="data")


@data_app.command("export")
def data_export(folder: Path = typer.Argument(..., help="A new folder to write the default scenario into.")) -> None:
    """Write the default scenario, catalog and their sources as editable files (with scenario.schema.json for editors)."""
    try:
        path = export_default(folder)
    except ScenarioError as exc:
        _bad_input(exc)
    console.print(f"Default scenario written to [bold]{_text(folder)}[/]; edit it, then run `dcplace solve {_text(path)}`.")


@data_app.command("schema")
def data_schema(out: Optional[Path] = typer.Argument(None, help="File to write (e.g. scenario.schema.json); omit or '-' for stdout.",
                                                     show_default=False)) -> None:
    """Write the JSON Schema of a scenario YAML file, for editors (docs/api.md, README "Scenario format")."""
    from dcplace.models.schema import write_schema

    if out is None or str(out) == "-":
        from dcplace.models.schema import schema_text

        sys.stdout.write(schema_text())
        return
    write_schema(out)
    console.print(f"JSON Schema of the scenario written to [bold]{_text(out)}[/]; reference it from a scenario with its first line "
                  f"`# yaml-language-server: $schema={_text(out)}`.", highlight=False)


@data_app.command("quotes")
def data_quotes(
    quotes: Path = typer.Argument(..., help="CSV of your own figures: site (or market), field, value, source, date."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="A new folder for the scenario (default: <quotes file name>-scenario)."),
    base: Optional[Path] = typer.Option(None, "--base", help="The scenario the quotes change (default: the embedded default)."),
) -> None:
    """Write a scenario that extends the default (or --base) with your quoted figures in place of its own, and a
    provenance.csv naming each quote."""
    from dcplace.models.quotes import write_quote_scenario

    folder = out if out is not None else quotes.with_name(f"{quotes.stem}-scenario")
    try:
        path, rows = write_quote_scenario(quotes, folder, base)
    except ScenarioError as exc:
        _bad_input(exc)
    console.print(f"{len(rows)} quote(s) from {_text(quotes)} written to [bold]{_text(path)}[/] (provenance.csv beside it "
                  f"names each); run `dcplace solve {_text(path)}`.")


def _friendly(command):
    """Errors every command can meet, as a message and an exit code instead of a traceback."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except OutputRefused as exc:
            err.print(f"[red]Refused to write[/] {_text(exc.path)}: {_text(exc.message, newlines=True)}\nFix: {_text(exc.fix)}")
            raise typer.Exit(EXIT_BAD_INPUT)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # the exit codes and usage errors above, as click prints them
        except PlanFileError as exc:  # a plan.json edited or damaged by hand: the file, the record, the field
            err.print(f"[red]Cannot read the plan:[/] {_text(exc, newlines=True)}")
            raise typer.Exit(EXIT_BAD_INPUT)
        except OSError as exc:
            if exc.errno not in _USER_OS_ERRORS:
                _internal_error(exc)
            where = f" {_text(exc.filename)}" if exc.filename else ""
            err.print(f"[red]Could not read or write{where}:[/] {_text(exc.strerror or exc)}. "
                      "Fix: check the path, its permissions and the free space, then run the command again.")
            raise typer.Exit(EXIT_BAD_INPUT)
        except MemoryError as exc:  # a resource limit, not a bug (models.limits refuses what it can foresee)
            detail = f" ({_text(exc)})" if str(exc) else ""
            err.print(f"[red]Out of memory[/]{detail}: the work is too large for this machine's memory; this is a resource "
                      "limit, not a bug. Fix: cut the sites or regions (dcplace validate estimates what fits), lower "
                      "clock.hours or the number of periods, close other programs, or run on a machine with more memory.")
            raise typer.Exit(EXIT_RESOURCE_LIMIT)
        except Exception as exc:  # noqa: BLE001 - the last resort: a bug, said in one line
            _damaged_folder(args, kwargs)  # unless a plan folder it was given fails its check: then the folder is the cause
            _internal_error(exc)

    return run


def _damaged_folder(args, kwargs) -> None:
    """A command that failed on a plan or schedule folder it was given: when that folder fails the
    independent check (a file edited, truncated or removed after `dcplace solve` wrote it), say so
    with the checker's first findings and exit 2; a folder that passes leaves the failure a bug."""
    given = [v for v in [*args, *kwargs.values()] for v in (v if isinstance(v, (list, tuple)) else [v])]
    for folder in (Path(v) for v in given if isinstance(v, (str, Path))):
        try:
            if (folder / "schedule.json").is_file():
                from dcplace.optimizer.check_schedule import check_schedule_folder

                findings = [str(v) for v in check_schedule_folder(folder).violations]
            elif (folder / "plan.json").is_file():
                findings = [str(v) for v in check_plan_folder(folder).violations]
            else:
                continue
        except Exception:  # noqa: BLE001 - the checker never raises on a damaged folder: this is a bug, said as one
            return
        if findings:
            shown = "\n  • ".join(_text(f, newlines=True) for f in findings[:3])
            more = f"\n  … and {len(findings) - 3} more" if len(findings) > 3 else ""
            err.print(f"[red]{_text(folder)}: the plan folder is damaged[/], so this command cannot read it:\n  • {shown}{more}\n"
                      f"Fix: restore the folder or re-run `dcplace solve`; `dcplace check {_text(folder)}` lists every problem.")
            raise typer.Exit(EXIT_BAD_INPUT)


# Errors of the machine, not of dcplace: a full disk, a read-only or forbidden path.
_USER_OS_ERRORS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EISDIR,
                   errno.ENAMETOOLONG, errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY}


def _package_version() -> str:
    return package_versions(("dcplace",))["dcplace"]


def _internal_error(exc: BaseException) -> None:
    """One line naming the error and where its traceback was saved; exit 6."""
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        fd, name = tempfile.mkstemp(prefix="dcplace-error-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"command: {' '.join(sys.argv)}\ndcplace {_package_version()}; Python {platform.python_version()}; "
                     f"{platform.platform()}\n\n{details}")
        saved = f"Full traceback: {_text(name)}"
    except OSError as write_error:
        saved = f"(the traceback could not be saved: {_text(write_error)}; it follows)\n{_text(details, newlines=True)}"
    message = " ".join(str(exc).split())  # one line
    err.print(f"[bold red]internal error:[/] {_text(type(exc).__name__)}: {_text(message)} — this is a bug; please report it "
              f"with the command and `dcplace --version`.\n{saved}", highlight=False)
    raise typer.Exit(EXIT_INTERNAL_ERROR)


for _command in app.registered_commands + data_app.registered_commands + why_app.registered_commands:
    _command.callback = _friendly(_command.callback)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"dcplace {_package_version()} (Python {platform.python_version()}, {platform.platform()})",
                      markup=False, highlight=False)
        raise typer.Exit()


class _CurrentStderr(logging.StreamHandler):
    """A handler writing to whatever sys.stderr is when a line is logged: a command run in-process
    (a notebook, CliRunner) swaps sys.stderr and closes its own, which a handler bound at --verbose
    would then write to ("I/O operation on closed file" on every later log line)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _verbose(value: bool) -> None:
    logger = logging.getLogger("dcplace")
    if value:
        show_engine_log(None)
        return
    for old in [h for h in logger.handlers if h.get_name() == "dcplace-verbose"]:  # an earlier --verbose run in this process
        logger.removeHandler(old)


def show_engine_log(stream, level: int = logging.INFO) -> logging.Handler:
    """Send the engine's log lines (the `dcplace` logger: pricing rounds, lazy rows, periods, …)
    to `stream` (None: sys.stderr as it is at each line), one line each with its time and module;
    returns the handler (remove it to stop)."""
    handler = _CurrentStderr() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    handler.setLevel(level)
    handler.set_name("dcplace-verbose")
    logger = logging.getLogger("dcplace")
    for old in [h for h in logger.handlers if h.get_name() == "dcplace-verbose"]:  # one at a time (a second run in one process)
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(min(level, logger.level or logging.WARNING))
    return handler


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print dcplace's version and exit."),
    verbose: bool = typer.Option(False, "--verbose", "-v", callback=_verbose, help="Show the engine's log lines (INFO) on stderr: "
                                 "`dcplace --verbose solve ...`."),
) -> None:
    """Placement engine for AI infrastructure."""


class _PipeSafe:
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


def _terminated(signum, frame) -> None:
    """SIGTERM (kill, timeout, a scheduler, a container stop) ends the process without unwinding:
    remove this run's staging folders and stop a racing SCIP first, then end by the signal as before."""
    try:
        from dcplace.models.outputs import remove_own_staging
        from dcplace.optimizer.solvers.scip_racer import stop_all

        remove_own_staging()
        stop_all()
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # as PID 1 (a container) the kernel ignores a default-action SIGTERM, even one sent to itself


# When the `dcplace` process was started (set by main(), the console script; None when the commands are
# called in-process, as by tests): `solve --time-limit` then holds from exec to exit, imports, write and check included.
_EXEC_STARTED: float | None = None


def main() -> None:
    from dcplace.models.outputs import defer_while_moving
    from dcplace.optimizer.solving.budget import process_started

    global _EXEC_STARTED
    _EXEC_STARTED = process_started()

    signal.signal(signal.SIGTERM, defer_while_moving(_terminated))
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # Ctrl-C too: KeyboardInterrupt after the last move
        signal.signal(signal.SIGINT, defer_while_moving(signal.default_int_handler))
    # a stream closed by the caller (`dcplace validate >&-`) is None: left as Python has it
    sys.stdout, sys.stderr = (None if stream is None else _PipeSafe(stream) for stream in (sys.stdout, sys.stderr))
    try:
        app()
    except SystemExit as exc:
        from dcplace.optimizer.solvers.highs_model import abandoned_runs

        if abandoned_runs():
            # A HiGHS run left behind at its deadline aborts the process if it returns during
            # interpreter shutdown; everything is written and flushed, so end here with our code.
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_INTERNAL_ERROR)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        raise


if __name__ == "__main__":
    main()
