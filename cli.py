"""dcplace command line: parses arguments, calls the library, prints with rich.

Exit codes (the table is reports.terminal's `ExitCode` / `EXIT_CODE_MEANINGS`; `dcplace --help` prints it): 0 success; 1 a plan failed its independent check; 2 bad input (every problem
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
or terminal control codes: see reports.terminal.
"""

from __future__ import annotations

import errno
import json
import functools
import os
import platform
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Optional

import click
import typer
from rich.console import Console
from rich.text import Text

from dcplace.models import ScenarioError, export_default, load_scenario, scenario_warnings, with_footprint
from dcplace.models.outputs import OutputRefused, check_destination
from dcplace.models.overrides import OverrideError, parse_assignments
from dcplace.models.plan import PlanFileError, plan_json_edited
from dcplace.models.versions import package_versions
from dcplace.optimizer.solvers.backends import CAPABILITIES
from dcplace.optimizer.checker import check_plan_folder, check_schedule_folder
from dcplace.optimizer.model.index import MAX_FULL_PAIRS
from dcplace.optimizer.solving.pipeline import PlanCheckFailed, solve_schedule_to_folder, solve_to_folder
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions
from dcplace.reports.style import money
from dcplace.reports.terminal import (EXIT_CODE_MEANINGS, ExitCode, PipeSafe, batch_line, check_outcome, clean as _clean,
                                      hide_engine_log, live_status, markup_name as _name, markup_text as _text, member_line,
                                      plan_summary, print_alternatives, print_batch_summary, print_comparison, print_frontier,
                                      print_infeasible, print_outages, print_plan, print_prices, print_problems, print_robustness, print_schedule,
                                      print_warnings, print_worth, print_written, say, show_engine_log, solve_line)

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


ScenarioArg = typer.Argument(None, help="Scenario YAML file; omit for the embedded default ('years': the default over "
                             "three periods, docs/periods.md).", show_default=False)


def _bad_input(exc: ScenarioError) -> None:
    print_problems(exc.problems, err)
    raise typer.Exit(EXIT_BAD_INPUT)


def _progress_on(quiet: bool) -> bool:
    return not quiet and err.is_terminal


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
    as_is: Optional[Path] = typer.Option(None, "--as-is", help="Today's footprint (a CSV of site, config, cooling, workload or "
                                         "fabric, racks), held fixed: the cost of today's sites and racks (docs/as-is.md)."),
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
        if as_is is not None:
            loaded = with_footprint(loaded, as_is)
        if not quiet:
            print_warnings(scenario_warnings(loaded), err)
            # The solve can take its whole time limit: say at once what is being solved.
            err.print(f"Solving {_name(loaded.name)} ({len(loaded.sites):,} sites, {len(loaded.regions):,} regions, "
                      f"limit {time_limit:g} s)…", highlight=False)
        line = solve_line(time_limit, err)
        live = _progress_on(quiet)
        with live_status(line, live, console):  # phase, best plan, bound, gap and elapsed time, while it solves
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
        if exc.scenario.footprint:
            err.print("[bold red]Today's footprint (--as-is) cannot keep every limit:[/] what it leaves unserved or breaks follows.")
        print_infeasible(exc.diagnosis, err)
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
        print_schedule(schedule, out, console, quiet)
    elif quiet:
        console.print(_clean(plan_summary(plan, out)), markup=False, highlight=False, soft_wrap=True)
    else:
        print_plan(plan, out, console)


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
    print_warnings(scenario_warnings(loaded), err)
    console.print(
        f"[green]OK[/]: scenario '{_name(loaded.name)}': {len(loaded.sites)} sites, {len(loaded.regions)} regions "
        f"({demand:,.0f} tok/s peak demand), {len(loaded.jobs)} training jobs, {len(loaded.catalog.rack_configs)} rack configurations"
        + (f"; {len(loaded.periods)} periods, {loaded.periods[0].year}-{loaded.periods[-1].year + loaded.periods[-1].years - 1}." if loaded.periods else ".")
    )


@app.command()
def check(folder: Path = typer.Argument(..., help="A plan folder written by `dcplace solve`."), json_: bool = JsonOption) -> None:
    """Re-check a plan folder (or a multi-period schedule folder) with the independent checker."""
    outcome = check_outcome(folder)
    text, lines = outcome.pop("text"), outcome.pop("lines")
    if json_:
        _emit_json({**outcome, "message": Text.from_markup(text).plain})
        return
    if outcome["status"] == "pass":
        console.print(text)
        return
    if outcome["status"] == "infeasible":
        print_infeasible(outcome["diagnosis"], err)
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
    print_written(paths, console)
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
    print_written(paths, console)


@app.command()
def report(
    folder: Path = PlanFolderArg,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for report.html and report.pdf; default FOLDER/report."),
) -> None:
    """Executive report (HTML and PDF): KPIs, map, cost by category and site, sites, solver, provenance
    (of a multi-period schedule folder: NPV, builds per period, cost per period, a map per period)."""
    from dcplace.reports import save_report
    from dcplace.reports.pdf import PdfEngineMissing

    try:
        if (folder / "schedule.json").is_file():
            from dcplace.reports.schedule import save_schedule_report

            paths = save_schedule_report(folder, out or folder / "report")
        else:
            paths = save_report(_plan_layers(folder), out or folder / "report")
    except PdfEngineMissing as exc:  # report.html is written; report.pdf needs the system's Pango
        console.print("Report written:")
        print_written(exc.written, console)
        err.print(_clean(exc), markup=False, highlight=False)
        raise typer.Exit(ExitCode.MISSING_LIBRARY)
    console.print("Report written:")  # only once it is written
    print_written(paths, console)


@app.command()
def outages(
    folder: Path = PlanFolderArg,
    regions: int = typer.Option(20, "--regions", help="Also list this many (lost site, region) pairs with demand at risk; 0 = none."),
) -> None:
    """What losing each open site costs: tok/s at risk and where, fallback RTT, training stalled (any plan folder)."""
    from dcplace.optimizer.studies.outages import NoOutageTable, outage_table

    _warn_if_edited(folder)
    try:
        table = outage_table(folder)
    except NoOutageTable as exc:
        err.print(_clean(exc, newlines=True), markup=False, highlight=False)
        raise typer.Exit(EXIT_BAD_INPUT if "not a plan folder" in str(exc) else EXIT_INFEASIBLE)
    except (ScenarioError, ValueError) as exc:
        err.print(f"[red]{_text(folder)}: the plan folder is damaged[/] ({_text(exc, newlines=True)}). Fix: re-run `dcplace solve`.")
        raise typer.Exit(EXIT_BAD_INPUT)
    print_outages(table, regions, console)


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
    line = batch_line(_clean(sweep.name), err)

    def show(p) -> None:
        line(p)
        if p.last is not None and not quiet:
            member_line(p.last, console)

    try:
        with live_status(line, _progress_on(quiet), console):  # members done, failed and running, while they solve
            result = run_batch(sweep, out, workers=workers, scheduler=scheduler, on_progress=show)
    except BatchBusy as exc:
        err.print(f"[red]{_text(exc, newlines=True)}[/]")
        raise typer.Exit(EXIT_BAD_INPUT)
    if not quiet:
        print_batch_summary(result.results, out / "batch.csv", console)
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
    print_comparison(comparison, console)
    print_written(paths, console)


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
        line = batch_line(f"cost against {tradeoff}", err)

        def stage(names: list[str]) -> None:  # the point(s) now being solved
            line.stage = f"point {_clean(names[0])}" if len(names) == 1 else f"points {_clean(names[0])}…{_clean(names[-1])}"
            line.progress = None

        with live_status(line, _progress_on(quiet), console):  # the current point, points done, failed and running
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
        print_frontier(frontier, tradeoff, out / "pareto.csv", console)
        print_written(paths, console)
        started_from = [p for p in frontier if p.message and p.cost_usd_per_year is not None]
        for p in started_from:
            say(f"  note: {_text(p.name)}: {_text(p.message)}", console)
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
    print_prices(result, folder / "why" / "prices" / "prices.json", console)

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
    line = batch_line("site worth", err)
    with live_status(line, _progress_on(quiet), console):
        study = site_worth(folder, workers=workers, options=options, closed_candidates=candidates, on_progress=line)
    print_worth(study, console)
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
    print_alternatives(study, slack, console)

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

    _explainable(folder)
    options = {k: v for k, v in (("time_limit_s", time_limit), ("mip_gap", gap)) if v is not None}
    line = batch_line("robustness", err)
    try:
        with live_status(line, _progress_on(quiet), console):
            study = robustness(folder, samples=samples, workers=workers, seed=seed, options=options, on_progress=line,
                               robust_plan=robust_plan, quantile=quantile)
    except ValueError as exc:
        _bad_option(exc)
    print_robustness(study, console)
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


def _verbose(value: bool) -> None:
    if value:
        show_engine_log(None)
    else:
        hide_engine_log()  # an earlier --verbose run in this process


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print dcplace's version and exit."),
    verbose: bool = typer.Option(False, "--verbose", "-v", callback=_verbose, help="Show the engine's log lines (INFO) on stderr: "
                                 "`dcplace --verbose solve ...`."),
) -> None:
    """Placement engine for AI infrastructure."""


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
    sys.stdout, sys.stderr = (None if stream is None else PipeSafe(stream) for stream in (sys.stdout, sys.stderr))
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
