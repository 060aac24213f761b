"""Bad input: every case gets a message naming file, row and field, exit code 2, no traceback."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from dcplace.cli import app
from helpers import job, make_scenario, region, site
from dcplace.models import ScenarioError, load_scenario
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.solving.precheck import precheck

runner = CliRunner()


def good(tmp_path, **kw):
    args = dict(
        sites=[site("a", 0, 0), site("b", 0, 1)],
        regions=[region("town", 0, 0.5), region("city", 0, 0.7)],
        jobs=[job("pretrain", 48)],
    )
    args.update(kw)
    return make_scenario(tmp_path, **args)


def rewrite_cell(path, row_index, column, value):
    rows = list(csv.DictReader(path.open()))
    rows[row_index][column] = value
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def problems_of(path):
    with pytest.raises(ScenarioError) as info:
        scenario = load_scenario(path)
        found = precheck(build_index(scenario))
        if found:
            raise ScenarioError(found)
    return info.value.problems


def assert_problem(problems, file, row, field, *phrases):
    matches = [p for p in problems if p.file.endswith(file) and p.row == row and p.field == field]
    assert matches, f"no problem at {file} row {row} field {field}; got: {[str(p) for p in problems]}"
    text = str(matches[0]).lower()
    for phrase in phrases:
        assert phrase.lower() in text, text
    assert matches[0].fix, "every problem says what would fix it"


def test_valid_scenario_validates(tmp_path):
    result = runner.invoke(app, ["validate", str(good(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "OK" in result.output


def test_missing_scenario_file(tmp_path):
    problems = problems_of(tmp_path / "nope.yaml")
    assert "not found" in str(problems[0])


def test_missing_table_file(tmp_path):
    path = good(tmp_path)
    (tmp_path / "sites.csv").unlink()
    assert_problem(problems_of(path), "sites.csv", None, None, "file not found")


def test_missing_column(tmp_path):
    path = good(tmp_path)
    rows = list(csv.DictReader((tmp_path / "sites.csv").open()))
    for row in rows:
        del row["power_price_usd_per_mwh"]
    with (tmp_path / "sites.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert_problem(problems_of(path), "sites.csv", None, "power_price_usd_per_mwh", "missing")


def test_wrong_type(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 1, "floor_racks", "lots")
    assert_problem(problems_of(path), "sites.csv", 3, "floor_racks", "integer", "lots")


def test_negative_price(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 0, "power_price_usd_per_mwh", "-20")
    assert_problem(problems_of(path), "sites.csv", 2, "power_price_usd_per_mwh", "greater than or equal to 0", "usd per mwh")


@pytest.mark.parametrize("column", ["power_price_usd_per_mwh", "power_limit_kw", "lat"])
def test_nan_values(tmp_path, column):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 1, column, "NaN")
    assert_problem(problems_of(path), "sites.csv", 3, column, "nan")


def test_price_per_kwh_is_flagged_as_unit_mistake(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 0, "power_price_usd_per_mwh", "0.08")
    assert_problem(problems_of(path), "sites.csv", 2, "power_price_usd_per_mwh", "per kwh", "1000")


def test_server_power_in_watts_is_flagged(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "catalog" / "rack_configs.csv", 0, "server_kw", "10200")
    assert_problem(problems_of(path), "rack_configs.csv", 2, "server_kw", "watts")


@pytest.mark.parametrize("column,value", [("lat", "91"), ("lon", "-200")])
def test_coordinates_out_of_range(tmp_path, column, value):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "regions.csv", 0, column, value)
    assert_problem(problems_of(path), "regions.csv", 2, column, value)


def test_unknown_chip(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "catalog" / "rack_configs.csv", 1, "chip", "h900")
    assert_problem(problems_of(path), "rack_configs.csv", 3, "chip", "unknown chip 'h900'", "server")


def test_unknown_cooling(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 1, "cooling_allowed", "air;cryo")
    assert_problem(problems_of(path), "sites.csv", 3, "cooling_allowed", "unknown cooling 'cryo'", "liquid")


def test_duplicate_ids(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 1, "id", "a")
    assert_problem(problems_of(path), "sites.csv", 3, "id", "duplicate id 'a'", "row 2")


def test_unknown_column_suggests_the_right_one(tmp_path):
    path = good(tmp_path)
    text = (tmp_path / "sites.csv").read_text().replace("floor_racks", "floor_rack", 1)
    (tmp_path / "sites.csv").write_text(text)
    problems = problems_of(path)
    assert_problem(problems, "sites.csv", 1, "floor_rack", "unknown column", "floor_racks")


def test_unknown_scenario_key(tmp_path):
    path = good(tmp_path)
    path.write_text(path.read_text() + "polices: {}\n")
    assert_problem(problems_of(path), "scenario.yaml", None, "polices", "unknown key", "policies")


def test_unknown_policy_key(tmp_path):
    path = good(tmp_path, policies={"max_site": 3})
    assert_problem(problems_of(path), "scenario.yaml", None, "policies.max_site", "unknown key", "max_sites")


def test_region_with_no_site_in_budget(tmp_path):
    path = good(tmp_path, regions=[region("town", 0, 0.5), region("remote", 0, 30, budget=20)])
    # nearest site b is 29 degrees away: 3224.8 km, 32.2 ms round trip at 200 km/ms
    assert_problem(problems_of(path), "regions.csv", 3, "rtt_budget_chat_ms", "remote", "20 ms budget", "b", "32.2 ms", "at least 33 ms")


def test_demand_beyond_all_capacity(tmp_path):
    sites = [site("a", 0, 0, floor_racks=2), site("b", 0, 1, floor_racks=2)]
    path = good(tmp_path, sites=sites, regions=[region("town", 0, 0.5, chat=10_000_000)])
    assert_problem(problems_of(path), "regions.csv", None, "demand_chat_tok_s", "10,000,000 tok/s", "at most")


def test_job_no_site_can_hold(tmp_path):
    path = good(tmp_path, jobs=[job("giant", 10_000_000)])
    assert_problem(problems_of(path), "jobs.csv", 2, "gpus_h100_equiv", "giant")


def test_power_limit_in_mw_is_converted_once(tmp_path):
    path = good(tmp_path)
    text = (tmp_path / "sites.csv").read_text().replace("power_limit_kw", "power_limit_mw", 1).replace(",10000,", ",10,")
    (tmp_path / "sites.csv").write_text(text)
    assert {s.power_limit_kw for s in load_scenario(path).sites} == {10000.0}


def test_cli_reports_every_problem_at_once_without_traceback(tmp_path):
    path = good(tmp_path)
    rewrite_cell(tmp_path / "sites.csv", 0, "power_price_usd_per_mwh", "-1")
    rewrite_cell(tmp_path / "regions.csv", 1, "lat", "95")
    out = tmp_path / "plan"
    for command in (["validate", str(path)], ["solve", str(path), "--out", str(out)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2
        text = result.output
        assert "Traceback" not in text
        assert "sites.csv, row 2, field 'power_price_usd_per_mwh'" in text
        assert "regions.csv, row 3, field 'lat'" in text
    assert not out.exists()
    assert not list(tmp_path.glob(".plan*")), "no half-written folder is left"


def test_infeasible_scenario_exits_3_and_records_the_diagnosis(tmp_path):
    path = good(tmp_path, policies={"carbon_cap_t_per_year": 0.0})
    out = tmp_path / "plan"
    result = runner.invoke(app, ["solve", str(path), "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert "carbon cap 0 t CO2/yr is exceeded by" in result.output
    assert "Traceback" not in result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["solve"]["status"] == "infeasible" and plan["sites"] == []
    assert any("carbon cap" in line for line in plan["diagnosis"])
    again = runner.invoke(app, ["check", str(out)])
    assert again.exit_code == 3 and "carbon cap" in again.output
    assert not list(tmp_path.glob(".plan*"))


def test_pair_cost_for_unknown_site(tmp_path):
    from helpers import write_csv

    path = good(tmp_path)
    write_csv(tmp_path / "pair_costs.csv", [{"region": "town", "site": "nowhere", "workload": "chat", "usd_per_year": 5}])
    path.write_text(path.read_text() + "pair_costs: pair_costs.csv\n")
    assert_problem(problems_of(path), "pair_costs.csv", 2, "site", "unknown site 'nowhere'")
