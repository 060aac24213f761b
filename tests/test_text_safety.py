"""User text is text, everywhere it is printed or exported (issue 13 items 10-12, issue 12
item 6): rich markup and terminal control codes in names show as typed, a spreadsheet
never runs a name as a formula, money is one format and is never cut at 80 columns, and
every command ends with a message and a documented exit code — never a traceback."""

from __future__ import annotations

import csv
import errno
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import job, make_scenario, region, site
from rich.console import Console
from typer.testing import CliRunner

import dcplace.cli as cli
from dcplace.cli import app
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solving.pipeline import solve_to_folder
from dcplace.reports import load_plan_layers, read_layer, terminal
from dcplace.reports.output import from_spreadsheet_text, spreadsheet_frame, spreadsheet_text
from dcplace.reports.style import money

runner = CliRunner()
FAST = ["--time-limit", "60", "--gap", "0"]

LINK_SITE = "[link=https://evil.example/login]Ashburn[/link]"
CLOSER_SITE = "Broken [/] tag [bold]"
ESCAPE_SITE = "Raw \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ here"
FORMULA_SITE = '=HYPERLINK("https://evil.example","Ashburn")'
SCENARIO = "[/]hostile [link=https://evil.example]world[/link]"
OSC8 = "\x1b]8;"
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _hostile(folder: Path) -> Path:
    sites = [
        site("ash", 39.0, -77.5, name=LINK_SITE, fixed_cost_usd_per_year=1_234_000_000),
        site("nyc", 40.7, -74.0, name=CLOSER_SITE, fixed_cost_usd_per_year=2_345_000_000),
        site("chi", 41.8, -87.6, name=ESCAPE_SITE, fixed_cost_usd_per_year=1_111_000_000),
        site("dal", 32.8, -96.8, name=FORMULA_SITE, fixed_cost_usd_per_year=1_999_000_000),
    ]
    regions = [  # each within its 2 ms budget of one site only: every site opens
        region("r1", 39.1, -77.4, chat=1600, budget=2, name="@SUM(A1:A9)"),
        region("r2", 40.8, -73.9, chat=1600, budget=2, name="+cmd|' /C calc'!A0"),
        region("r3", 41.9, -87.7, chat=1600, budget=2, name="-2+3"),
        region("r4", 32.9, -96.9, chat=1600, budget=2, name="\tTabbed"),
    ]
    return make_scenario(folder, sites, regions, jobs=[job("big", 96, name="[bold red]=job[/]")], name=SCENARIO)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    scenario = _hostile(root / "scenario")
    solve_to_folder(scenario, root / "plan", SolveOptions(mip_gap=0, time_limit_s=60))
    return root, scenario


def _terminal(monkeypatch, width: int) -> None:
    """Print as to a colour terminal (where rich would emit OSC 8 hyperlinks)."""
    monkeypatch.setattr(cli, "console", Console(force_terminal=True, width=width))
    monkeypatch.setattr(cli, "err", Console(force_terminal=True, width=width, stderr=True, soft_wrap=True))


# ----------------------------------------------------------------------------- terminal


def test_solve_prints_hostile_names_as_text_on_a_terminal(hostile, tmp_path, monkeypatch):
    _, scenario = hostile
    _terminal(monkeypatch, 400)
    result = runner.invoke(app, ["solve", str(scenario), "--out", str(tmp_path / "plan"), *FAST])
    assert result.exit_code == 0, result.output
    assert OSC8 not in result.output  # no live hyperlink, whether from markup or from raw escapes in a name
    shown = SGR.sub("", result.output)
    for name in (LINK_SITE, CLOSER_SITE, FORMULA_SITE, SCENARIO, "[bold red]=job[/]"):
        assert name in shown, name
    assert "Raw \\x1b]8;;https://evil.example\\x1b\\click" in shown  # the control code is shown, not obeyed
    assert f"Solving {SCENARIO} (4 sites, 4 regions, limit 60 s)…" in shown
    assert (tmp_path / "plan" / "plan.json").exists()


def test_validate_check_and_compare_print_names_as_text(hostile, tmp_path, monkeypatch):
    root, scenario = hostile
    _terminal(monkeypatch, 400)
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 0 and SCENARIO in SGR.sub("", result.output) and OSC8 not in result.output, result.output
    odd = tmp_path / "[link=evil.example]plan"  # an unclosed tag runs to the end of the line
    odd.mkdir()
    result = runner.invoke(app, ["check", str(odd)])
    assert result.exit_code == 2 and str(odd) in SGR.sub("", result.output) and OSC8 not in result.output, result.output
    result = runner.invoke(app, ["compare", str(root / "plan"), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    assert OSC8 not in result.output


def test_money_is_one_format_and_whole_at_80_columns(hostile, tmp_path, monkeypatch):
    _, scenario = hostile
    monkeypatch.setattr(cli, "console", Console(width=80))
    result = runner.invoke(app, ["solve", str(scenario), "--out", str(tmp_path / "plan"), *FAST], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    plan = load_plan_layers(tmp_path / "plan").plan
    amounts = [money(s.total_cost_usd_per_year) for s in plan.sites if s.open] + [money(plan.objective_usd_per_year)]
    assert all(len(a) >= len("$1,234.00 M") for a in amounts)
    for amount in amounts:
        assert amount in result.output, (amount, result.output)
    assert not [line for line in result.output.splitlines() if "$" in line and "…" in line]
    assert max(len(line) for line in result.output.splitlines() if line[:1] in "┏┃┡│└") <= 80
    assert money(-250_000) == "-$0.25 M" and money(1_250_450_000) == "$1,250.45 M"


# ----------------------------------------------------------------------------- CSV


def test_spreadsheet_text_neutralises_text_only_and_reverses():
    for raw in ("=1+1", "+1", "-1", "@A1", "\tx", "\rx", "'=x", "''+x"):
        safe = spreadsheet_text(raw)
        assert safe == "'" + raw and from_spreadsheet_text(safe) == raw
    for raw in ("Ashburn", "'quoted", "a=b", "", "São Paulo"):
        assert spreadsheet_text(raw) == raw and from_spreadsheet_text(raw) == raw
    frame = pd.DataFrame({"name": ["=x", "ok"], "value": [-3.5, 2.0], "count": [-1, 4], "flag": [True, False]})
    safe = spreadsheet_frame(frame)
    assert list(safe["name"]) == ["'=x", "ok"]
    for column in ("value", "count", "flag"):
        assert safe[column].dtype == frame[column].dtype and list(safe[column]) == list(frame[column])


def _raw_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_csv_export_is_safe_in_a_spreadsheet_and_reads_back_exact(hostile, tmp_path):
    root, _ = hostile
    result = runner.invoke(app, ["export", str(root / "plan"), "--format", "csv", "--out", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    for name in ("sites", "regions", "assignments"):
        for row in _raw_csv(tmp_path / "x" / f"{name}.csv"):
            for column, cell in row.items():
                assert not cell or cell[0] not in "=+-@\t\r", (name, column, cell)
    sites = {r["id"]: r for r in _raw_csv(tmp_path / "x" / "sites.csv")}
    assert sites["dal"]["name"] == "'" + FORMULA_SITE
    regions = {r["id"]: r["name"] for r in _raw_csv(tmp_path / "x" / "regions.csv")}
    assert regions["r3"] == "'-2+3" and regions["r1"] == "'@SUM(A1:A9)"
    # numbers are still numbers in the file
    assert float(sites["dal"]["cost_usd_per_year"]) > 1e9
    # read_layer gives the names back exactly
    assert FORMULA_SITE in set(read_layer(tmp_path / "x" / "sites.csv")["name"])
    assert "-2+3" in set(read_layer(tmp_path / "x" / "regions.csv")["name"])


def test_the_plan_folders_own_csvs_are_safe_in_a_spreadsheet_and_still_checked(hostile):
    """Issue 50 item 1: sites.csv, assignments.csv and jobs.csv (the files solve points at) carried
    hostile names verbatim; plan.json and inputs/ keep them exact and the checker still passes."""
    root, _ = hostile
    for name in ("sites", "assignments", "jobs"):
        for row in _raw_csv(root / "plan" / f"{name}.csv"):
            for column, cell in row.items():
                if cell and cell[0] in "=+-@\t\r":
                    float(cell)  # only a number (-0.5) may start with '-': text never does
    assert {r["id"]: r["name"] for r in _raw_csv(root / "plan" / "sites.csv")}["dal"] == "'" + FORMULA_SITE
    regions = {r["region"]: r["region_name"] for r in _raw_csv(root / "plan" / "assignments.csv")}
    assert regions["r2"] == "'+cmd|' /C calc'!A0" and regions["r3"] == "'-2+3"
    assert [r["name"] for r in _raw_csv(root / "plan" / "jobs.csv")] == ["[bold red]=job[/]"]  # starts with '[': as is
    assert FORMULA_SITE in {s["name"] for s in json.loads((root / "plan" / "plan.json").read_text())["sites"]}
    assert FORMULA_SITE in {r["name"] for r in _raw_csv(root / "plan" / "inputs" / "sites.csv")}
    result = runner.invoke(app, ["check", str(root / "plan")])
    assert result.exit_code == 0, result.output


def test_batch_csv_is_safe_in_a_spreadsheet(tmp_path):
    from dcplace.optimizer.studies.batch import MemberResult, _write_index

    member = MemberResult(name="=cmd", status="error", overrides={}, message="-bad input")
    sweep = type("S", (), {"name": "s", "base": "b", "source": None})()
    _write_index(tmp_path, sweep, {}, [member])
    row = _raw_csv(tmp_path / "batch.csv")[0]
    assert row["name"] == "'=cmd" and row["message"] == "'-bad input"
    assert json.loads((tmp_path / "batch.json").read_text())["members"][0]["name"] == "=cmd"  # exact for scripts


def test_compare_csv_is_safe_in_a_spreadsheet(hostile, tmp_path):
    import shutil

    root, _ = hostile
    shutil.copytree(root / "plan", tmp_path / "=cmd")
    shutil.copytree(root / "plan", tmp_path / "base")
    result = runner.invoke(app, ["compare", str(tmp_path / "base"), str(tmp_path / "=cmd"), "--out", str(tmp_path / "cmp")])
    assert result.exit_code == 0, result.output
    rows = _raw_csv(tmp_path / "cmp" / "compare.csv")
    assert [r["plan"] for r in rows] == ["base", "'=cmd"]
    assert float(rows[1]["cost change, $M/yr"]) == 0.0 and float(rows[0]["cost, $M/yr"]) > 1000


# ----------------------------------------------------------------------------- exit codes


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("dcplace ")


def test_an_unexpected_error_is_one_line_exit_6_with_a_saved_traceback(hostile, monkeypatch):
    root, _ = hostile

    def broken(folder):
        raise RuntimeError("boom [/] [link=https://evil.example]x[/link]\nsecond line")

    monkeypatch.setattr(terminal, "check_plan_folder", broken)  # `dcplace check`
    monkeypatch.setattr(cli, "check_plan_folder", broken)  # the damaged-folder test of an error
    result = runner.invoke(app, ["check", str(root / "plan")])
    assert result.exit_code == cli.EXIT_INTERNAL_ERROR == 6, result.output
    first, second = result.output.strip().splitlines()
    assert first.startswith("internal error: RuntimeError: boom [/] [link=https://evil.example]x[/link] second line — this is a bug")
    assert "dcplace --version" in first
    saved = Path(second.removeprefix("Full traceback: "))
    try:
        text = saved.read_text()
        assert "Traceback" in text and "RuntimeError: boom" in text and "dcplace 0" in text
    finally:
        saved.unlink()


def test_a_machine_error_is_exit_2_naming_the_path(hostile, monkeypatch):
    root, _ = hostile

    def full(folder):
        raise OSError(errno.ENOSPC, "No space left on device", str(root / "plan" / "x"))

    monkeypatch.setattr(terminal, "check_plan_folder", full)  # `dcplace check`
    monkeypatch.setattr(cli, "check_plan_folder", full)  # the damaged-folder test of an error
    result = runner.invoke(app, ["check", str(root / "plan")])
    assert result.exit_code == 2, result.output
    assert "No space left on device" in result.output and "Fix:" in result.output


@pytest.mark.parametrize("command", ["solve", "batch", "report", "map", "export", "compare", "pareto", "data export"])
def test_out_under_a_file_is_exit_2_for_every_command(hostile, tmp_path, command):
    root, scenario = hostile
    blocker = tmp_path / "a-file"
    blocker.write_text("keep\n")
    out = str(blocker / "sub")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": str(scenario), "scenarios": {"one": {}}}))
    plan = str(root / "plan")
    args = {
        "solve": ["solve", str(scenario), "--out", out, *FAST],
        "batch": ["batch", str(sweep), "--out", out],
        "report": ["report", plan, "--out", out],
        "map": ["map", plan, "--png", "--out", out],
        "export": ["export", plan, "--format", "csv", "--out", out],
        "compare": ["compare", plan, "--out", out],
        "pareto": ["pareto", str(scenario), "--points", "2", "--out", out, "--time-limit", "30"],
        "data export": ["data", "export", out],
    }[command]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Refused to write" in result.output and "is a file" in result.output and "Fix:" in result.output
    assert blocker.read_text() == "keep\n"


def test_bidi_controls_in_names_do_not_reach_a_page(tmp_path):
    """A right-to-left override in a name reverses the text after it on a page ("Evil\u202etxt.exe" reads
    "Evilexe.txt"): reports and maps show the name without bidi controls; the plan keeps it as typed."""
    from dcplace.reports import save_maps, save_report

    name = "Evil\u202etxt.exe \u2067isolated\u2069"
    path = make_scenario(tmp_path / "in", sites=[site("hub", 0, 0, name=name)], regions=[region("town", 0, 0.1)])
    solve_to_folder(path, tmp_path / "plan", SolveOptions(time_limit_s=60))
    layers = load_plan_layers(tmp_path / "plan")
    assert name in set(layers.sites["name"])
    save_report(layers, tmp_path / "out", pdf=False)
    save_maps(layers, tmp_path / "out", png=False, pdf=False)
    for page in ("report.html", "map.html"):
        text = (tmp_path / "out" / page).read_text(encoding="utf-8")
        assert not any(ch in text for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), page
    from dcplace.reports.htmlmap import plan_figure

    figure = plan_figure(layers).to_json()  # the map's data, as the page embeds it (plotly.js itself names these codes)
    assert not re.search(r"\\u20(2[a-e]|6[6-9])", figure, re.IGNORECASE) and "Eviltxt.exe" in figure
    assert "Eviltxt.exe isolated" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_a_plan_json_edited_after_the_solve_is_named_before_it_is_shown(tmp_path):
    """report, map, export and outages show a plan as its plan.json stands; one that is not the file the solve
    wrote (its SHA-256 is not the manifest's) gets a warning first, naming `dcplace check`."""
    path = make_scenario(tmp_path / "in", sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1)])
    solve_to_folder(path, tmp_path / "plan", SolveOptions(time_limit_s=60))
    plan = tmp_path / "plan" / "plan.json"
    result = runner.invoke(app, ["outages", str(tmp_path / "plan")])
    assert result.exit_code == 0 and "was changed after" not in result.output
    plan.write_text(plan.read_text() + " ")  # the same plan, but not the file the solve wrote
    for command in (["outages"], ["export", "-f", "csv", "-o", str(tmp_path / "gis")]):
        result = runner.invoke(app, [command[0], str(tmp_path / "plan"), *command[1:]])
        assert result.exit_code == 0 and "was changed after `dcplace solve` wrote it" in " ".join(result.output.split()), result.output
        assert "dcplace check" in result.output
