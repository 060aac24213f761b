"""Issue 50 (reliability, round 3): a checked result is never silently replaced, numbers are
bounded to physical ranges, unit slips are named, long names do not stall the report, a huge
table is refused with a size it can handle, and the small ones (item 10)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import job, make_scenario, region, site
from typer.testing import CliRunner

from dcplace.cli import EXIT_BAD_INPUT, app
from dcplace.models.outputs import OutputBusy, destination_lock
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solving.pipeline import solve_to_folder

runner = CliRunner()


def _tiny(folder: Path, **site_overrides) -> Path:
    sites = [site("a", 40.0, -74.0, **site_overrides), site("b", 41.0, -75.0)]
    return make_scenario(folder, sites, [region("r", 40.5, -74.5, chat=800)], jobs=[job("j", 48)])


# ----------------------------------------------------------------------------- item 2: one run per output folder


def _hold_lock(out: Path) -> subprocess.Popen:
    """Another process holding the lock on `out` (as a run that is still solving does)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from dcplace.models.outputs import destination_lock\n"
        "with destination_lock(sys.argv[1], 'plan'):\n"
        "    print('locked', flush=True); time.sleep(60)\n"), str(out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_run_on_the_same_out_is_refused_at_once_naming_the_other(tmp_path, monkeypatch):
    """Two solves with --out same both said 'plan in same (checked)' and the folder held the first's."""
    import dcplace.optimizer.solving.pipeline as pipeline

    scenario = _tiny(tmp_path / "s")
    out = tmp_path / "same"
    holder = _hold_lock(out)
    try:
        solved = []
        monkeypatch.setattr(pipeline, "solve", lambda *a, **k: solved.append(1))  # refused before the solve
        began = time.monotonic()
        with pytest.raises(OutputBusy, match=f"pid {holder.pid} on "):
            solve_to_folder(scenario, out, SolveOptions(time_limit_s=30))
        assert not solved and time.monotonic() - began < 5
        monkeypatch.undo()
        result = runner.invoke(app, ["solve", str(scenario), "--out", str(out), "--quiet"])
        assert result.exit_code == EXIT_BAD_INPUT == 2, result.output
        assert f"pid {holder.pid}" in result.output and "another --out" in result.output
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    # its holder gone (killed: the kernel drops its flock, its file stays): the next run takes the lock over
    assert (tmp_path / ".same.dcplace-lock").exists()
    plan, report = solve_to_folder(scenario, out, SolveOptions(time_limit_s=30))
    assert report.ok and (out / "plan.json").exists()
    assert not (tmp_path / ".same.dcplace-lock").exists()  # nothing left beside the plan


def test_a_lock_whose_recorded_owner_is_dead_is_taken_over(tmp_path):
    """A process that inherited the lock's file outlived its run: the recorded owner is dead, so
    the lock is taken over; a live recorded owner is refused."""
    out = tmp_path / "plan"
    lock = tmp_path / ".plan.dcplace-lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"h = open({str(lock)!r}, 'a+'); fcntl.flock(h, fcntl.LOCK_EX)\n"
        "print('locked', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        lock.write_text(f"{holder.pid} {socket.gethostname()} x\n")
        with pytest.raises(OutputBusy, match=f"pid {holder.pid}"):
            with destination_lock(out, "plan"):
                pass
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        lock.write_text(f"{dead.pid} {socket.gethostname()} x\n")
        with destination_lock(out, "plan"):
            assert lock.read_text().split()[0] == str(os.getpid())
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------------------- items 3, 4, 10a: physical ranges, unit slips


def _problems(path: Path) -> list:
    from dcplace.models import ScenarioError, load_scenario

    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value.problems


def _numeric(annotation) -> bool:
    import types
    import typing

    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _numeric(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_numeric(a) for a in typing.get_args(annotation) if a is not type(None))
    return origin is dict and _numeric(typing.get_args(annotation)[1])


def test_every_numeric_input_field_has_a_physical_range():
    """Item 3: a site's power_limit_mw = 1e30 passed validate, and solve then gave up ('raise the time
    limit'): every number of sites, regions, jobs, catalog tables and the scenario sections is bounded."""
    import typing

    from dcplace.models import records
    from dcplace.models.ranges import _field_bounds

    checked_by_a_validator = {("Site", "power_price_usd_per_mwh")}  # '... looks like a price per kWh', with its range
    unbounded = []
    for name in dir(records):
        model = getattr(records, name)
        if not (isinstance(model, type) and issubclass(model, records.Row)) or model in (records.Row, records.Record):
            continue
        for field, info in model.model_fields.items():
            if not _numeric(info.annotation) or (name, field) in checked_by_a_validator:
                continue
            loc = [field, "x"] if typing.get_origin(info.annotation) is dict else [field]
            bounds = _field_bounds(model, loc)
            if bounds is None or bounds[0] is None or bounds[2] is None:
                unbounded.append(f"{name}.{field}")
    assert not unbounded, unbounded


def test_a_number_out_of_its_range_is_refused_naming_file_row_field_and_range(tmp_path):
    path = _tiny(tmp_path, power_limit_kw=1e30, fixed_cost_usd_per_year=1e40)
    problems = {(p.file, p.row, p.field): p for p in _problems(path)}
    power = problems[("sites.csv", 2, "power_limit_kw")]
    assert "1e+30" in power.message and "0 < power_limit_kw <= 10,000,000" in power.message
    assert "0 <= fixed_cost_usd_per_year <= 1,000,000,000,000" in problems[("sites.csv", 2, "fixed_cost_usd_per_year")].message
    # the scenario's sections and the other tables too
    path = make_scenario(tmp_path / "r", [site("a", 40.0, -74.0)], [region("r", 40.5, -74.5, chat=1e30)])
    fields = {p.field: p.message for p in _problems(path)}
    assert "physical range is 0 <= demand_chat_tok_s <= 1,000,000,000,000" in fields["demand_chat_tok_s"]
    path = make_scenario(tmp_path / "b", [site("a", 40.0, -74.0)], [region("r", 40.5, -74.5)], jobs=[job("j", 1e30)],
                         economics={"carbon_price_usd_per_t": 1e12}, latency={"overhead_ms": 1e9},
                         policies={"capex_budget_usd": 1e30})
    fields = {p.field: p.message for p in _problems(path)}
    assert "physical range is 0 < gpus_h100_equiv <= 100,000,000" in fields["gpus_h100_equiv"]
    for field in ("economics.carbon_price_usd_per_t", "latency.overhead_ms", "policies.capex_budget_usd"):
        assert "physical range is 0 <= " in fields[field], (field, fields[field])


def test_power_limit_mw_problems_name_the_users_column_in_its_unit(tmp_path):
    """Item 10: 'inf' in power_limit_mw was reported as field power_limit_kw; 1e30 MW is refused in MW."""
    import csv

    path = _tiny(tmp_path)
    rows = list(csv.DictReader((tmp_path / "sites.csv").open()))
    for row, value in zip(rows, ("inf", "20000000")):
        row["power_limit_mw"] = value
        del row["power_limit_kw"]
    with (tmp_path / "sites.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    problems = {p.row: p for p in _problems(path)}
    assert problems[2].field == "power_limit_mw" and "NaN or infinite" in problems[2].message
    assert "0 < power_limit_mw <= 10,000" in problems[2].message
    assert problems[3].field == "power_limit_mw" and "is 20000000, outside its physical range 0 < power_limit_mw <= 10,000" \
        in problems[3].message
    assert "probably kW" in problems[3].fix


def test_unit_slips_in_a_sites_power_are_warned(tmp_path):
    """Item 4: a site of 20 kW (one rack of the densest configuration needs 60 kW) and one of 5 GW
    were accepted without a word; each is now a warning that says what the slip looks like."""
    from dcplace.models import load_scenario
    from dcplace.models.checks import scenario_warnings

    sites = [site("tiny", 40.0, -74.0, power_limit_kw=20), site("huge", 41.0, -75.0, power_limit_kw=5e6),
             site("fine", 41.0, -74.0)]
    path = make_scenario(tmp_path, sites, [region("r", 40.5, -74.5, chat=800)])
    warnings = {w.row: w for w in scenario_warnings(load_scenario(path))}
    assert set(warnings) == {2, 3}
    assert warnings[2].field == "power_limit_kw" and "less than one rack of 'trainer-dense'" in warnings[2].message
    assert "unit slip" in warnings[2].message
    assert "5,000 MW (5 GW)" in warnings[3].message and "looks like kW" in warnings[3].message


# ----------------------------------------------------------------------------- item 5, item 10 (glyphs): long names


LONG_NAME = "X" * 4990 + "\x1b[31m red"  # 5,000 characters, one word, with a terminal colour code


@pytest.fixture(scope="module")
def long_named_plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    sites = [site("a", 40.0, -74.0, name=LONG_NAME), site("b", 52.4, 4.9, country="NL", name="Amsterdam")]
    regions = [region("r", 40.5, -74.5, chat=800, budget=20, name=LONG_NAME), region("e", 52.3, 4.8, chat=800, budget=20, country="NL")]
    path = make_scenario(root / "s", sites, regions, jobs=[job("j", 48, name=LONG_NAME)], name=LONG_NAME)
    solve_to_folder(path, root / "plan", SolveOptions(time_limit_s=60))
    return root / "plan"


def test_the_report_and_maps_of_a_5000_character_name_finish_and_cut_it(long_named_plan, tmp_path, recwarn):
    """Item 5: 'dcplace report' did not finish in 240 s on a plan with a 5,000-character site name;
    item 10: matplotlib warned 'Glyph 27 missing' with a raw ESC byte for a name holding one."""
    from dcplace.reports import load_plan_layers, save_maps, save_report

    began = time.monotonic()
    layers = load_plan_layers(long_named_plan)
    paths = save_report(layers, tmp_path / "report") + save_maps(layers, tmp_path / "maps")
    assert time.monotonic() - began < 60
    assert not [w for w in recwarn if "Glyph" in str(w.message)]
    page = (tmp_path / "report" / "report.html").read_text()
    assert "X" * 79 + "…" in page and "X" * 80 not in page
    assert "\x1b" not in page and "\x1b" not in (tmp_path / "maps" / "map.html").read_text()
    text = subprocess.run(["pdftotext", str(tmp_path / "report" / "report.pdf"), "-"], capture_output=True, text=True).stdout \
        if any(p.suffix == ".pdf" for p in paths) and shutil_which("pdftotext") else ""
    assert "X" * 100 not in text.replace("\n", "")
    # the data keep the name exactly
    assert LONG_NAME in {s.name for s in layers.plan.sites} and LONG_NAME in set(layers.sites["name"])


def shutil_which(name: str):
    import shutil

    return shutil.which(name)


def test_the_terminal_cuts_a_long_name(long_named_plan):
    from dcplace.models.plan import read_plan
    from dcplace.reports.terminal import print_plan
    from rich.console import Console

    console = Console(width=200, record=True)
    print_plan(read_plan(long_named_plan), long_named_plan, console)
    shown = console.export_text()
    assert "…" in shown
    assert "X" * 200 not in shown.replace("\n", "").replace(" ", "").replace("│", "")


# ----------------------------------------------------------------------------- item 6: too large for memory


def test_a_sites_table_too_large_for_memory_is_refused_before_its_rows_are_validated(tmp_path, monkeypatch):
    """Item 6: a 1,000,000-row sites table ended in exit 6 'internal error: MemoryError: Unable to
    allocate 3.92 GiB ... (526, 1000000)' after 2 min 19 s. It is refused at once, with exit 2, the
    number of sites that fit and how to cut the list."""
    import dcplace.models.limits as limits

    path = _tiny(tmp_path, floor_racks=-5)  # a bad row: not reached, the size is refused first
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 1000)  # 1 region x 2 sites need 800 bytes, 800 allowed
    assert limits.size_problem(1, 2, "sites.csv") is None
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 900)  # 800 bytes needed, 720 allowed
    problems = _problems(path)
    assert len(problems) == 1 and problems[0].file == "sites.csv"
    assert "1 regions x 2 sites" in problems[0].message and "GB available" in problems[0].message
    monkeypatch.setattr(limits, "available_memory_bytes", lambda: 1)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == EXIT_BAD_INPUT and "cut the sites list to at most 0 rows" in result.output, result.output
    assert "Traceback" not in result.output and "bug" not in result.output
    # a scenario built in memory meets the same limit when it is indexed
    import dcplace
    from dcplace.models import ScenarioError
    from dcplace.optimizer.model.index import build_index

    scenario = dcplace.scenario_from_cost_matrix([1.0, 2.0], [1.0], [[1.0], [2.0]])
    with pytest.raises(ScenarioError, match="region-site pairs"):
        build_index(scenario)


def test_running_out_of_memory_is_a_resource_limit_not_a_bug(tmp_path, monkeypatch):
    import dcplace.cli as cli

    def huge(*args, **kwargs):
        raise MemoryError("Unable to allocate 3.92 GiB for an array with shape (526, 1000000) and data type float64")

    monkeypatch.setattr(cli, "load_scenario", huge)
    result = runner.invoke(app, ["validate", str(_tiny(tmp_path))])
    assert result.exit_code == cli.EXIT_RESOURCE_LIMIT == 7, result.output
    assert "Out of memory" in result.output and "3.92 GiB" in result.output and "resource limit, not a bug" in result.output
    assert "internal error" not in result.output and "Traceback" not in result.output


# ----------------------------------------------------------------------------- item 10: the small ones


@pytest.fixture(scope="module")
def tiny_plan(tmp_path_factory):
    """A region on its own site (r at a's place) and one near the other site (e), each only within its own site's budget."""
    root = tmp_path_factory.mktemp("tiny")
    sites = [site("a", 40.0, -74.0), site("b", 45.0, -80.0)]
    regions = [region("r", 40.0, -74.0, chat=800, budget=5), region("e", 45.1, -80.1, chat=800, budget=5)]
    solve_to_folder(make_scenario(root / "s", sites, regions), root / "plan", SolveOptions(time_limit_s=60))
    return root / "plan"


def test_a_deleted_manifest_is_called_removed_not_old(tiny_plan, tmp_path):
    import shutil

    folder = tmp_path / "plan"
    shutil.copytree(tiny_plan, folder)
    (folder / "manifest.json").unlink()
    result = runner.invoke(app, ["check", str(folder)])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "manifest.json was removed" in result.output and "written before" not in result.output


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc")
def test_an_unwritable_out_is_refused_before_the_solve(tmp_path, monkeypatch):
    """--out /sys/... was refused only after the solve: os.access says yes to root everywhere."""
    import dcplace.optimizer.solving.pipeline as pipeline

    solved = []
    monkeypatch.setattr(pipeline, "solve", lambda *a, **k: solved.append(1))
    result = runner.invoke(app, ["solve", str(_tiny(tmp_path)), "--out", "/proc/dcplace-plan", "--quiet"])
    assert result.exit_code == EXIT_BAD_INPUT and not solved, result.output
    assert "/proc does not take new files" in result.output


def test_an_exported_region_on_its_own_site_has_no_invalid_line(tiny_plan, tmp_path):
    """45 of 1,618 exported assignment lines were zero-length LineStrings (invalid in GIS tools)."""
    from dcplace.reports import read_layer

    result = runner.invoke(app, ["export", str(tiny_plan), "--format", "gpkg", "--out", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    assert "1 of 2 assignments have no line" in result.output
    lines = read_layer(tmp_path / "x" / "plan.gpkg", "assignments")
    assert len(lines) == 2  # the row is kept
    own = lines[lines["region"] == "r"]
    assert own.geometry.isna().all() and float(own["distance_km"].iat[0]) == 0.0
    assert lines.geometry.dropna().is_valid.all() and all(g.length > 0 for g in lines.geometry.dropna())
