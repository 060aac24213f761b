"""Input files that used to be silently merged, crash with a traceback, or leave the user
guessing: each now gives one clear problem naming the file, the row and the field."""

from __future__ import annotations

import csv
import json

import geopandas as gpd
import pandas as pd
import pytest
import yaml
from shapely.geometry import Point, Polygon
from typer.testing import CliRunner

from dcplace.cli import app
from helpers import TINY_CATALOG, job, make_scenario, region, site, write_csv
from dcplace.models import ScenarioError, load_scenario
from dcplace.models.sweep import load_member, load_sweep

runner = CliRunner()


def good(tmp_path, **kw):
    args = dict(sites=[site("a", 0, 0), site("b", 0, 1)], regions=[region("town", 0, 0.5), region("city", 0, 0.7)], jobs=[job("pretrain", 48)])
    args.update(kw)
    return make_scenario(tmp_path, **args)


def problems_of(path, **kw):
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, **kw)
    return info.value.problems


def only(problems, field):
    found = [p for p in problems if p.field == field]
    assert len(found) == 1, [str(p) for p in problems]
    return found[0]


# ---------------------------------------------------------------- 1. duplicates


def test_duplicate_yaml_key_names_the_key_and_both_lines(tmp_path):
    path = good(tmp_path, policies={"max_sites": 2})
    path.write_text(path.read_text() + "policies:\n  min_sites: 1\n")
    lines = path.read_text().splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("policies:"))
    problem = only(problems_of(path), "policies")
    assert problem.file == "scenario.yaml" and problem.row == len(lines) - 1
    assert f"line {first} and on line {len(lines) - 1}" in str(problem) and "twice" in str(problem)


def test_duplicate_key_in_a_sweep(tmp_path):
    sweep = tmp_path / "whatifs.yaml"
    sweep.write_text("name: w\nbase: default\ngrid:\n  economics.carbon_price_usd_per_t: [0, 50]\ngrid:\n  economics.carbon_price_usd_per_t: [100]\n")
    with pytest.raises(ScenarioError) as info:
        load_sweep(sweep)
    text = str(info.value)
    assert "whatifs.yaml, row 5, field 'grid'" in text and "line 3 and on line 5" in text


@pytest.mark.parametrize("table", ["sites", "regions", "jobs"])
def test_ids_that_differ_only_by_case_or_spaces(tmp_path, table):
    rows = {"sites": [site("nyc", 0, 0), site("NYC ", 0, 1)], "regions": [region("nyc", 0, 0.5), region(" NYC", 0, 0.7)],
            "jobs": [job("nyc", 48), job("Nyc", 48)]}[table]
    path = good(tmp_path, **{table: rows})
    problem = only(problems_of(path), "id")
    assert problem.file == f"{table}.csv" and problem.row == 3
    assert "id 'nyc'" in str(problem) and "row 2" in str(problem) and "only by case" in str(problem)


def test_catalog_ids_that_differ_only_by_case(tmp_path):
    catalog = {**TINY_CATALOG, "cooling": TINY_CATALOG["cooling"] + [{**TINY_CATALOG["cooling"][0], "id": "Air"}]}
    problem = only(problems_of(good(tmp_path, catalog=catalog)), "id")
    assert problem.file.endswith("cooling.csv") and problem.row == 4 and "'Air'" in str(problem) and "'air' in row 2" in str(problem)


# ------------------------------------------------------ 2. no more tracebacks


def test_a_folder_as_the_scenario(tmp_path):
    good(tmp_path / "world")
    for command in ("validate", "solve"):
        result = runner.invoke(app, [command, str(tmp_path / "world"), *(["--out", str(tmp_path / "plan")] if command == "solve" else [])])
        assert result.exit_code == 2, result.output
        assert "is a folder, not a scenario file" in result.output and "give the scenario.yaml inside it" in result.output
        assert "Traceback" not in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["validate", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "is a folder" in result.output


def test_json_dumped_yaml_with_an_emoji_solves(tmp_path):
    path = good(tmp_path / "in", sites=[site("a", 0, 0, name="Launchpad \U0001F680"), site("b", 0, 1)])
    spec = yaml.safe_load(path.read_text())
    spec["name"] = "Rocket \U0001F680 plan"
    path.write_text(json.dumps(spec))  # ensure_ascii: the emoji is written as "\ud83d\ude80"
    assert "\\ud83d\\ude80" in path.read_text()
    assert load_scenario(path).name == "Rocket \U0001F680 plan"
    out = tmp_path / "plan"
    result = runner.invoke(app, ["solve", str(path), "--out", str(out), "--gap", "0"])
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["scenario"] == "Rocket \U0001F680 plan"
    assert load_scenario(out / "inputs" / "scenario.yaml").name == "Rocket \U0001F680 plan"


def test_a_lone_surrogate_is_named(tmp_path):
    path = good(tmp_path)
    spec = yaml.safe_load(path.read_text())
    path.write_text(json.dumps(spec).replace('"name": "tiny"', '"name": "tiny \\ud83d"'))
    problem = only(problems_of(path), "name")
    assert "lone UTF-16 surrogate" in str(problem) and "\\ud83d" in str(problem)


# ------------------------------------------------------ 3. clearer messages


def test_unknown_column_is_one_problem_not_one_per_row(tmp_path):
    regions = [region(f"r{i}", 0, 0.5, populaton=5) for i in range(30)]
    problems = problems_of(good(tmp_path, regions=regions))
    assert [str(p) for p in problems] == [
        "regions.csv, row 1, field 'populaton': unknown column (in all 30 rows). Fix: did you mean 'population'?"]


@pytest.mark.parametrize("delimiter,said", [(";", "';'"), ("\t", "tabs")])
def test_semicolon_or_tab_delimited_csv(tmp_path, delimiter, said):
    path = good(tmp_path)
    frame = pd.read_csv(tmp_path / "sites.csv", dtype=str, keep_default_na=False)
    frame.to_csv(tmp_path / "sites.csv", sep=delimiter, index=False)
    problems = problems_of(path)
    assert len(problems) == 1, [str(p) for p in problems]
    assert str(problems[0]) == (f"sites.csv, row 1: this file is delimited by {said}, not by commas, so its columns cannot be read. "
                                "Fix: save it comma-separated (CSV with ',' between cells).")


def test_latin1_csv_names_the_line(tmp_path):
    path = good(tmp_path, sites=[site("a", 0, 0), site("b", 0, 1, name="Zürich")])
    (tmp_path / "sites.csv").write_bytes((tmp_path / "sites.csv").read_text(encoding="utf-8").encode("latin-1"))
    problem = problems_of(path)[0]
    assert problem.file == "sites.csv" and problem.row == 3
    assert "line 3" in str(problem) and "0xfc" in str(problem) and "save it as UTF-8" in str(problem)
    assert "position" not in str(problem)


def test_polygon_geometry_is_named(tmp_path):
    path = good(tmp_path)
    frame = pd.read_csv(tmp_path / "sites.csv", keep_default_na=False)
    shapes = [Point(0, 0), Polygon([(1, 0), (1.1, 0), (1.1, 0.1)])]
    gpd.GeoDataFrame(frame.drop(columns=["lat", "lon"]), geometry=shapes, crs=4326).to_file(tmp_path / "sites.geojson", driver="GeoJSON")
    path.write_text(path.read_text().replace("sites.csv", "sites.geojson"))
    problem = only(problems_of(path), "geometry")
    assert (problem.file, problem.row) == ("sites.geojson", 2)
    assert "geometry is a Polygon" in str(problem) and "point" in str(problem)
    assert not [p for p in problems_of(path) if p.field == "lat"], "no more 'lat is empty'"


def test_bad_grid_value_names_the_sweep_file_and_key(tmp_path):
    sweep = tmp_path / "whatifs.yaml"
    sweep.write_text(yaml.safe_dump({"name": "w", "base": "default", "grid": {"economics.carbon_price_usd_per_t": [0, -5]}}))
    with pytest.raises(ScenarioError) as info:
        load_sweep(sweep)
    problem = only(info.value.problems, "grid.economics.carbon_price_usd_per_t")
    assert problem.file == "whatifs.yaml" and "-5" in str(problem) and "greater than or equal to 0" in str(problem)


def test_bad_table_value_from_a_sweep_names_the_sweep_file(tmp_path):
    base = good(tmp_path / "base")
    sweep = tmp_path / "whatifs.yaml"
    sweep.write_text(yaml.safe_dump({"name": "w", "base": "base/scenario.yaml", "grid": {"sites.power_price_usd_per_mwh": ["*-1"]}}))
    loaded = load_sweep(sweep)
    with pytest.raises(ScenarioError) as info:
        load_member(loaded.base, loaded.members[0])
    text = str(info.value)
    assert "sites.csv, row 2, field 'power_price_usd_per_mwh'" in text
    assert "after override 'sites.power_price_usd_per_mwh: *-1' in whatifs.yaml" in text and "scenario.yaml" not in text
    assert base.exists()


def test_excel_empty_unnamed_columns_are_dropped(tmp_path):
    path = good(tmp_path)
    lines = (tmp_path / "sites.csv").read_text().splitlines()
    (tmp_path / "sites.csv").write_text("\n".join(line + ",," for line in lines) + "\n")
    assert len(load_scenario(path).sites) == 2


def test_a_non_empty_column_without_header(tmp_path):
    path = good(tmp_path)
    lines = (tmp_path / "sites.csv").read_text().splitlines()
    n = len(lines[0].split(","))
    (tmp_path / "sites.csv").write_text("\n".join([lines[0] + ",", lines[1] + ",oops", lines[2] + ","]) + "\n")
    problems = problems_of(path)
    assert [str(p) for p in problems] == [
        f"sites.csv, row 1: column {n + 1} has no header but holds values. Fix: give the column a name in the header row, or delete it."]
    assert "Unnamed" not in str(problems[0])
