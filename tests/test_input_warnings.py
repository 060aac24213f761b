"""Warnings: allowed but probably a mistake; printed by validate and solve, never blocking."""

from __future__ import annotations

import json
import time

from typer.testing import CliRunner

from dcplace.cli import app
from helpers import make_scenario, region, site
from dcplace.models import load_scenario, scenario_warnings

runner = CliRunner()


def europe(tmp_path, sites=None, regions=None):
    sites = sites or [site("fra", 50.1, 8.7, country="DE"), site("ams", 52.4, 4.9, country="NL")]
    regions = regions or [region("rfra", 50.4, 9.0, country="DE", budget=30), region("rpar", 48.9, 2.35, country="FR", budget=30)]
    return make_scenario(tmp_path, sites, regions)


def test_swapped_lat_lon_inside_the_range_is_flagged(tmp_path):
    path = europe(tmp_path, sites=[site("fra", 8.7, 50.1, country="DE", name="Frankfurt"), site("ams", 52.4, 4.9, country="NL")])
    warnings = scenario_warnings(load_scenario(path))
    assert len(warnings) == 1, [str(w) for w in warnings]
    w = warnings[0]
    assert (w.file, w.row, w.field) == ("sites.csv", 2, "lat/lon")
    assert "Somalia" in w.message and "outside its country Germany (DE)" in w.message
    assert "did you swap lat and lon?" in w.fix


def test_a_region_in_the_wrong_country_without_a_swap(tmp_path):
    path = europe(tmp_path, regions=[region("rfra", 50.4, 9.0, country="FR", budget=30), region("rpar", 48.9, 2.35, country="FR", budget=30)])
    w = scenario_warnings(load_scenario(path))
    assert [(x.file, x.row, x.field) for x in w] == [("regions.csv", 2, "lat/lon")]
    assert "lies in Germany (DE)" in w[0].message and "swap" not in w[0].fix


def test_norway_and_france_are_known_and_small_states_are_skipped(tmp_path):
    # Natural Earth leaves ISO_A2 at -99 for France and Norway; Singapore is not in the 110m layer.
    path = europe(tmp_path, sites=[site("osl", 59.9, 10.75, country="NO"), site("sin", 1.35, 103.8, country="SG")],
                  regions=[region("rpar", 48.9, 2.35, country="FR", budget=30), region("rosl", 59.9, 10.8, country="NO", budget=30)])
    assert scenario_warnings(load_scenario(path)) == []


def test_the_default_has_no_warnings_and_the_check_is_fast():
    scenario = load_scenario()
    scenario_warnings(scenario)  # the layer is read once and cached
    started = time.perf_counter()
    assert scenario_warnings(scenario) == []
    assert time.perf_counter() - started < 1.0


def test_site_whose_power_fits_no_rack(tmp_path):
    # The tiny catalog's smallest rack is server-air, 4 kW per rack; in liquid cooling (PUE 1.1) 4.4 kW of facility power.
    path = europe(tmp_path, sites=[site("fra", 50.1, 8.7, country="DE"), site("tiny", 52.4, 4.9, country="NL", power_limit_kw=4)])
    warnings = scenario_warnings(load_scenario(path))
    assert [(w.file, w.row, w.field) for w in warnings] == [("sites.csv", 3, "power_limit_kw")]
    assert "4.4 kW of facility power" in warnings[0].message and "server-air" in warnings[0].message


def test_validate_and_solve_print_warnings_and_still_work(tmp_path):
    path = europe(tmp_path / "in", sites=[site("fra", 8.7, 50.1, country="DE"), site("ams", 52.4, 4.9, country="NL")],
                  regions=[region("rams", 52.5, 5.0, country="NL", budget=30)])
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0 and "OK" in result.output
    assert "warning: sites.csv, row 2, field 'lat/lon'" in result.output and "did you swap lat and lon?" in result.output
    out = tmp_path / "plan"
    result = runner.invoke(app, ["solve", str(path), "--out", str(out), "--gap", "0"])
    assert result.exit_code == 0, result.output
    assert "did you swap lat and lon?" in result.output
    assert json.loads((out / "plan.json").read_text())["solve"]["status"] == "optimal"
