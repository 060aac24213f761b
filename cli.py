"""dcplace command line: parses arguments, calls the library, prints with rich.

Exit codes: 0 success; 1 a plan failed its independent check; 2 bad input (every problem
is listed, naming file, row and field); 3 the scenario is infeasible (the diagnosis says
which limits must move); 4 the time limit ended before any plan was found; 5 a batch finished with members that
failed (bad input, error, crash, no plan in time; re-run the same command to retry them);
6 an internal error (a bug: one line names it and where its full traceback was saved).

Every text that comes from the user (names of sites, regions, jobs, scenarios, plans and
batch members, file paths, messages quoting them) is printed as text, never as rich markup
or terminal control codes: see `_text`.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import re
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Optional

import click
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dcplace.models import ScenarioError, export_default, load_scenario, scenario_warnings
from dcplace.models.outputs import OutputRefused, check_destination
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.models.versions import package_versions
from dcplace.optimizer.solvers.backends import CAPABILITIES
from dcplace.optimizer.check import check_plan_folder
from dcplace.optimizer.model.index import MAX_FULL_PAIRS
from dcplace.optimizer.solving.pipeline import PlanCheckFailed, solve_to_folder
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions
from dcplace.reports.style import money

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Placement engine for AI infrastructure.")
console = Console()
err = Console(stderr=True, soft_wrap=True)

EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3
EXIT_NO_PLAN = 4
EXIT_BATCH_INCOMPLETE = 5
EXIT_INTERNAL_ERROR = 6

# Characters that would act on the terminal instead of showing: C0/C1 controls (ESC starts
# colour and OSC 8 hyperlink sequences), DEL, and the bidirectional overrides that reorder
# what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _clean(value: object, newlines: bool = False) -> str:
    """`value` as text with every terminal control character shown as an escape (`\\x1b`);
    line breaks kept when `newlines` (for multi-line messages)."""

    def visible(m: re.Match) -> str:
        ch = m.group()
        if newlines and ch == "\n":
            return ch
        return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"

    return _CONTROL.sub(visible, str(value))


def _text(value: object, newlines: bool = False) -> str:
    """User text for a rich markup string or Table cell: shown exactly as typed, never as
    markup (`[link=...]`, `[/]`) or terminal control codes."""
    return escape(_clean(value, newlines))


ScenarioArg = typer.Argument(None, help="Scenario YAML file; omit for the embedded default.", show_default=False)


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


def print_plan(plan: Plan, out_dir: Path | None = None) -> None:
    s = plan.solve
    gap = f"{s.gap:.2%}" if s.gap is not None else "n/a"
    console.print(
        f"[bold]{_text(plan.scenario)}[/]: [green]{_text(s.status)}[/] in {s.build_time_s + s.solve_time_s:.1f} s "
        f"({s.model['rows']:,} rows, {s.model['columns']:,} columns, {s.model['integers']:,} integers; gap {gap})"
    )
    if s.pairs:
        console.print(
            f"Serving pairs: {s.pairs['pairs_in_model']:,} of {s.pairs['pairs_eligible']:,} eligible in the model after "
            f"{s.pairs['pricing_rounds']} pricing rounds; "
            + (f"the gap is against the full model's LP bound ({money(s.pairs['full_lp_bound_usd_per_year'])}/yr"
               f"{'' if s.pairs['converged'] else ', pricing stopped early'})."
               if s.pairs["full_lp_bound_usd_per_year"] is not None else "pricing's LP did not finish: no bound for the full model.")
        )
    # Numbers never wrap or shrink to '…'; on a narrow terminal the text columns fold instead
    # (a name is shown whole, over several lines, never cut).
    table = Table(title="Open sites", title_justify="left")
    for column in ("site", "role", "racks", "GPUs", "IT\nMW", "facility\nMW", "cooling", "fabric", "cost/yr"):
        number = column in ("racks", "GPUs", "IT\nMW", "facility\nMW", "cost/yr")
        table.add_column(column, justify="right" if number else "left", no_wrap=number, overflow="ellipsis" if number else "fold")
    for site in sorted((x for x in plan.sites if x.open), key=lambda x: -x.total_cost_usd_per_year):
        table.add_row(
            _text(site.name), _text(site.role), f"{site.racks_total:,}", f"{site.gpus:,}", f"{site.it_kw / 1000:,.1f}",
            f"{site.facility_kw / 1000:,.1f}", _text(", ".join(site.zones)), _text(", ".join(site.fabrics)),
            money(site.total_cost_usd_per_year),
        )
    console.print(table)
    if plan.jobs:
        jobs = Table(title="Training jobs", title_justify="left")
        for column in ("job", "site", "fabric", "chip", "H100-eq GPUs"):
            number = column == "H100-eq GPUs"
            jobs.add_column(column, justify="right" if number else "left", no_wrap=number, overflow="ellipsis" if number else "fold")
        names = {x.id: x.name for x in plan.sites}
        for j in plan.jobs:
            jobs.add_row(_text(j.name), _text(names.get(j.site, j.site)), _text(j.fabric), _text(j.chip), f"{j.gpus_h100_equiv:,.0f}")
        console.print(jobs)
    costs = Table(title="Annual cost", title_justify="left")
    costs.add_column("category", overflow="fold")
    costs.add_column("USD/yr", justify="right", no_wrap=True)
    for category, value in plan.cost_breakdown_usd_per_year.items():
        if value:
            costs.add_row(_text(category.replace("_", " ")), money(value))
    costs.add_row("[bold]total[/]", f"[bold]{money(plan.objective_usd_per_year)}[/]")
    console.print(costs)
    k = plan.kpis
    console.print(
        f"Inference: {k['tokens_per_s_served_peak']:,.0f} tok/s at peak, ${k['usd_per_m_tokens']:.3f} per M tokens, "
        f"mean RTT {k['mean_rtt_ms']:.1f} ms, {k['demand_within_budget_share']:.1%} within budget. "
        f"IT {k['it_mw_inference']:.1f} MW inference + {k['it_mw_training']:.1f} MW training; "
        f"{k['emissions_t_per_year']:,.0f} t CO2/yr."
    )
    if out_dir is not None:
        console.print(f"Plan written to [bold]{_text(out_dir)}[/] and checked.")


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
) -> None:
    """Solve a scenario and write its plan folder."""
    try:
        options = SolveOptions(solver=solver, time_limit_s=time_limit, mip_gap=gap, threads=threads, seed=seed,
                               max_full_pairs=max_full_pairs)
    except ValueError as exc:
        err.print(f"[red]Bad option:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        check_destination(out, "plan")  # refuse --out before any work
        loaded = load_scenario(scenario)
        _print_warnings(loaded)
        # The solve can take its whole time limit: say at once what is being solved.
        err.print(f"Solving {_text(loaded.name)} ({len(loaded.sites):,} sites, {len(loaded.regions):,} regions, "
                  f"limit {time_limit:g} s)…", highlight=False)
        plan, _ = solve_to_folder(loaded, out, options)
    except ScenarioError as exc:
        _bad_input(exc)
    except InfeasibleScenario as exc:
        _print_infeasible(exc.diagnosis)
        err.print(f"The diagnosis is recorded in {_text(out / 'plan.json')}.")
        raise typer.Exit(EXIT_INFEASIBLE)
    except NoPlanFound as exc:
        err.print(f"[bold red]No plan:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_NO_PLAN)
    except PlanCheckFailed as exc:
        err.print(f"[bold red]{_text(exc, newlines=True)}[/]")
        raise typer.Exit(EXIT_CHECK_FAILED)
    print_plan(plan, out)


@app.command()
def validate(scenario: Optional[Path] = ScenarioArg) -> None:
    """Check a scenario's files and what can be known before solving; list every problem."""
    try:
        loaded = load_scenario(scenario)
        checked_index(loaded)
    except ScenarioError as exc:
        _bad_input(exc)
    _print_warnings(loaded)
    demand = sum(sum(r.demand_tok_s.values()) for r in loaded.regions)
    console.print(
        f"[green]OK[/]: scenario '{_text(loaded.name)}': {len(loaded.sites)} sites, {len(loaded.regions)} regions "
        f"({demand:,.0f} tok/s peak demand), {len(loaded.jobs)} training jobs, {len(loaded.catalog.rack_configs)} rack configurations."
    )


@app.command()
def check(folder: Path = typer.Argument(..., help="A plan folder written by `dcplace solve`.")) -> None:
    """Re-check a plan folder with the independent checker."""
    if not (folder / "plan.json").exists() or not (folder / "inputs" / "scenario.yaml").exists():
        err.print(f"[red]{_text(folder)}: not a plan folder[/] (plan.json and inputs/scenario.yaml are needed). Fix: give a folder written by `dcplace solve`.")
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        report = check_plan_folder(folder)
    except (KeyError, ValueError, OSError) as exc:
        err.print(f"[red]{_text(folder)}: the plan folder is damaged[/] ({type(exc).__name__}: {_text(exc, newlines=True)}). "
                  "Fix: re-run `dcplace solve`.")
        raise typer.Exit(EXIT_BAD_INPUT)
    if report.violations and all(v.family == "manifest" and "has no manifest.json" in v.message for v in report.violations):
        err.print(f"[red]{_text(folder)}: written before plan folders carried a manifest[/], so it cannot be verified. "
                  "Fix: re-run `dcplace solve` (its command is in inputs/provenance.json, `rerun`).")
        raise typer.Exit(EXIT_BAD_INPUT)
    if not report.ok:
        err.print(f"[bold red]FAIL[/]: {_text(folder)}: {len(report.violations)} violation(s):")
        for v in report.violations:
            err.print(f"  • {_clean(v, newlines=True)}", markup=False, highlight=False)
        raise typer.Exit(EXIT_CHECK_FAILED)
    if report.status not in HAS_PLAN:
        try:
            diagnosis = read_plan(folder).diagnosis
        except (OSError, ValueError) as exc:
            err.print(f"[red]{_text(folder)}: the plan folder is damaged[/] ({type(exc).__name__}). Fix: re-run `dcplace solve`.")
            raise typer.Exit(EXIT_BAD_INPUT)
        _print_infeasible(diagnosis)
        raise typer.Exit(EXIT_INFEASIBLE)
    console.print(
        f"[green]PASS[/]: {_text(folder)}: {len(report.checked)} constraint families hold "
        f"({_text(', '.join(report.checked))}); line items add up to ${report.recomputed_cost_usd_per_year:,.2f}/yr."
    )


def _plan_layers(folder: Path):
    """The plan folder's layers for a report command, or a clear message and exit code."""
    from dcplace.reports import NoPlanToReport, NotAPlanFolder, load_plan_layers  # matplotlib/plotly load only when asked

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
    fmt: str = typer.Option("gpkg", "--format", "-f", help="geojson, gpkg, parquet or csv."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for the layers; default FOLDER/export."),
) -> None:
    """Write sites, regions and assignment lines as GIS layers (EPSG:4326)."""
    from dcplace.reports import FORMATS, export_layers

    if fmt not in FORMATS:
        err.print(f"[red]Unknown format {_text(repr(fmt))}.[/] Fix: --format one of {', '.join(FORMATS)}.")
        raise typer.Exit(EXIT_BAD_INPUT)
    layers = _plan_layers(folder)
    console.print(f"Exported {fmt}:")
    _written(export_layers(layers, out or folder / "export", fmt))


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
    from dcplace.reports import save_html_map, save_static_map

    if extent not in ("auto", "world"):
        err.print(f"[red]Unknown extent {_text(repr(extent))}.[/] Fix: --extent auto or --extent world.")
        raise typer.Exit(EXIT_BAD_INPUT)
    if not (png or pdf or html):
        png = pdf = html = True
    layers = _plan_layers(folder)
    out = out or folder / "report"
    paths = save_static_map(layers, out, png=png, pdf=pdf, extent=extent) if (png or pdf) else []
    if html:
        paths += save_html_map(layers, out)
    console.print("Maps written:")
    _written(paths)


@app.command()
def report(
    folder: Path = PlanFolderArg,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for report.html and report.pdf; default FOLDER/report."),
) -> None:
    """Executive report (HTML and PDF): KPIs, map, cost by category and site, sites, solver, provenance."""
    from dcplace.reports import save_report

    layers = _plan_layers(folder)
    console.print("Report written:")
    _written(save_report(layers, out or folder / "report"))


@app.command()
def batch(
    sweep_file: Path = typer.Argument(..., help="Sweep YAML: a base scenario with named members and/or a grid of overrides."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the member plan folders, batch.json and batch.csv."),
    workers: int = typer.Option(1, "--workers", "-w", help="Members solved at once (local process pool)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address (tcp://host:8786) instead of local processes."),
) -> None:
    """Solve every scenario of a sweep, each into its own plan folder; re-run to resume."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

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
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TextColumn("{task.fields[state]}"), TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"))
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(_text(sweep.name), total=len(sweep.members), state="starting", eta="?")  # a markup column

        def show(p) -> None:
            eta = f"{p.eta_s:,.0f} s" if p.eta_s is not None else "?"
            state = f"done {p.done - p.failed} (skipped {p.skipped}) · running {p.running} · failed {p.failed}"
            bar.update(task, completed=p.done, state=state, eta=eta)
            if p.last is not None:
                colour = "red" if p.last.status not in HAS_PLAN else "green"
                note = " (already solved)" if p.last.skipped else ""
                detail = f": {p.last.message[:200]}" if p.last.message else ""
                bar.console.print(f"  [{colour}]{_text(p.last.status)}[/] " + _text(f"{p.last.name}{note}{detail}"), highlight=False)

        try:
            result = run_batch(sweep, out, workers=workers, scheduler=scheduler, on_progress=show)
        except BatchBusy as exc:
            err.print(f"[red]{_text(exc, newlines=True)}[/]")
            raise typer.Exit(EXIT_BAD_INPUT)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result.by_status().items()))
    console.print(f"{len(result.results)} scenarios: {_text(counts)}. Index: {_text(out / 'batch.csv')}")
    if not result.ok:
        raise typer.Exit(EXIT_BATCH_INCOMPLETE)


@app.command()
def compare(
    folders: list[Path] = typer.Argument(..., help="Plan folders and/or batch folders (a batch folder stands for all its members)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", "-b", help="Name (folder name) of the plan to compare against; default the first."),
    out: Path = typer.Option(Path("compare"), "--out", "-o", help="Folder for compare.csv and compare.html."),
) -> None:
    """KPIs of several plans against a baseline, which sites open or close, and charts."""
    from dcplace.reports import NotAPlanFolder
    from dcplace.reports.compare import collect_plans, save_comparison

    try:
        plans = collect_plans(folders)
        paths, table = save_comparison(plans, out, baseline)
    except NotAPlanFolder as exc:
        err.print(_text(exc, newlines=True))
        raise typer.Exit(EXIT_BAD_INPUT)
    except ValueError as exc:
        err.print(f"[red]{_text(exc, newlines=True)}[/]")
        raise typer.Exit(EXIT_BAD_INPUT)
    view = Table(title=f"Against {_text(baseline or plans[0].label)}", title_justify="left")
    for column in ("plan", "status", "cost M$/yr", "change", "$/M tok", "RTT ms", "kt CO2", "sites", "opened", "closed"):
        view.add_column(column)
    for r in table.itertuples():
        fmt = lambda v, f: "—" if v != v else f.format(v)  # noqa: E731 - NaN-safe
        view.add_row(_text(r.plan), _text(r.status), fmt(r.cost_musd_per_year, "{:,.2f}"), fmt(r.cost_change_share, "{:+.1%}"),
                     fmt(r.usd_per_m_tokens, "{:.3f}"), fmt(r.mean_rtt_ms, "{:.1f}"), fmt(r.emissions_kt_per_year, "{:,.1f}"),
                     fmt(r.sites_open, "{:.0f}"), _text(r.sites_opened), _text(r.sites_closed))
    console.print(view)
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
        with console.status(f"Tracing cost against {tradeoff} ({points} points)…"):
            frontier = trace_pareto(loaded, out, tradeoff, points, workers, options)
    except ScenarioError as exc:
        _bad_input(exc)
    except NoFrontier as exc:
        err.print(f"[bold red]No frontier:[/] {_text(exc, newlines=True)}")
        raise typer.Exit(EXIT_INFEASIBLE)
    paths = save_frontier(frontier, out, tradeoff, loaded.name)
    view = Table(title=f"Cost against {tradeoff}", title_justify="left")
    for column in ("point", "setting", "status", "cost M$/yr", "mean RTT ms", "kt CO2/yr", "efficient"):
        view.add_column(column)
    for p in frontier:
        cost = f"{p.cost_usd_per_year / 1e6:,.3f}" if p.cost_usd_per_year is not None else "—"
        rtt = f"{p.mean_rtt_ms:.2f}" if p.mean_rtt_ms is not None else "—"
        kt = f"{p.emissions_t_per_year / 1e3:,.2f}" if p.emissions_t_per_year is not None else "—"
        view.add_row(_text(p.name), _text(p.parameter), _text(p.status), cost, rtt, kt, "yes" if p.efficient else "no")
    console.print(view)
    _written(paths)
    started_from = [p for p in frontier if p.message and p.cost_usd_per_year is not None]
    for p in started_from:
        console.print(f"  note: {_text(p.name)}: {_text(p.message)}", highlight=False)
    failed = failed_points(frontier)
    if failed:
        err.print(f"[bold red]{len(failed)} of {len(frontier)} points failed[/] (re-run the same command to retry them):")
        for p in failed:
            err.print(f"  • {_text(p.name)} ({_text(p.parameter)}): {_text(p.status)}: {_text(p.message[:300])}")
        raise typer.Exit(EXIT_BATCH_INCOMPLETE)


data_app = typer.Typer(no_args_is_help=True, help="The embedded default data.")
app.add_typer(data_app, name="data")


@data_app.command("export")
def data_export(folder: Path = typer.Argument(..., help="A new folder to write the default scenario into.")) -> None:
    """Write the default scenario, catalog and their sources as editable files."""
    try:
        path = export_default(folder)
    except ScenarioError as exc:
        _bad_input(exc)
    console.print(f"Default scenario written to [bold]{_text(folder)}[/]; edit it, then run `dcplace solve {_text(path)}`.")


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
        except OSError as exc:
            if exc.errno not in _USER_OS_ERRORS:
                _internal_error(exc)
            where = f" {_text(exc.filename)}" if exc.filename else ""
            err.print(f"[red]Could not read or write{where}:[/] {_text(exc.strerror or exc)}. "
                      "Fix: check the path, its permissions and the free space, then run the command again.")
            raise typer.Exit(EXIT_BAD_INPUT)
        except Exception as exc:  # noqa: BLE001 - the last resort: a bug, said in one line
            _internal_error(exc)

    return run


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


for _command in app.registered_commands + data_app.registered_commands:
    _command.callback = _friendly(_command.callback)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"dcplace {_package_version()} (Python {platform.python_version()}, {platform.platform()})",
                      markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print dcplace's version and exit."),
) -> None:
    """Placement engine for AI infrastructure."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()
