"""Issue 48 item 5: `dcplace data quotes` puts the user's own figures in place of the default's fills in
one step: a scenario that extends the base and overrides exactly the quoted cells, whose provenance
names each quote; bad rows are named by file, row and field with a fix (exit 2)."""

from __future__ import annotations

import csv

import pytest
import yaml
from typer.testing import CliRunner

from helpers import make_scenario, region, site
from dcplace.cli import app
from dcplace.models import ScenarioError, load_scenario
from dcplace.models.provenance import input_provenance
from dcplace.models.quotes import read_quotes, write_quote_scenario
from dcplace.optimizer import SolveOptions, solve

HEADER = "site,field,value,source,date\n"


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_a_quote_for_montreals_rent_changes_the_default_and_its_provenance(tmp_path):
    quotes = write(tmp_path / "quotes.csv", HEADER + "montreal,colocation_usd_per_kw_month,128,Broker quote ACME-114 (250-500 kW),2026-11-30\n")
    result = CliRunner().invoke(app, ["data", "quotes", str(quotes), "--out", str(tmp_path / "q")])
    assert result.exit_code == 0, result.output
    document = yaml.safe_load((tmp_path / "q" / "scenario.yaml").read_text())
    assert document["extends"] == "default"
    assert document["overrides"] == {"sites[montreal].colocation_usd_per_kw_month": 128}
    before, after = load_scenario(), load_scenario(tmp_path / "q" / "scenario.yaml")
    rent = {s.id: s.colocation_usd_per_kw_month for s in after.sites}
    assert rent["montreal"] == 128 and rent == {s.id: (128 if s.id == "montreal" else s.colocation_usd_per_kw_month) for s in before.sites}
    was = input_provenance(before).get("sites", "montreal", "colocation_usd_per_kw_month")
    now = input_provenance(after).get("sites", "montreal", "colocation_usd_per_kw_month")
    assert was[0] == "rule"  # a fill
    assert now == ("source", "user quote: Broker quote ACME-114 (250-500 kW), 2026-11-30 (quotes.csv, row 2)")
    # every other cell keeps the default's provenance
    assert input_provenance(after).get("sites", "ashburn", "power_limit_mw") == input_provenance(before).get("sites", "ashburn", "power_limit_mw")
    assert input_provenance(after).get("chips", "gb200", "h100_equiv")[0] == "derived"


def test_a_quoted_power_limit_lifts_the_ban_on_a_market_without_new_power(tmp_path):
    quotes = write(tmp_path / "quotes.csv", HEADER + "montreal,power_limit_mw,40,Hydro-Quebec allocation letter 2026-17,2026-10\n")
    path, _ = write_quote_scenario(quotes, tmp_path / "q")
    scenario = load_scenario(path)
    assert "montreal" not in scenario.policies.forbidden_sites and "dublin" in scenario.policies.forbidden_sites
    montreal = next(s for s in scenario.sites if s.id == "montreal")
    assert montreal.power_limit_kw == 40_000 and montreal.floor_racks == 2666  # the default's 15 kW per rack position
    prov = input_provenance(scenario)
    assert prov.get("sites", "montreal", "power_limit_mw")[0] == "source"
    assert "from the quoted power limit" in prov.get("sites", "montreal", "floor_racks")[1]


def test_quotes_round_trip_into_the_plan(tmp_path):
    """On a small world: the quoted rent reaches the plan's inputs and changes its decision and cost."""
    base = make_scenario(tmp_path / "base", [site("cheap", 0, 0, colocation_usd_per_kw_month=100),
                                             site("dear", 0, 0.1, colocation_usd_per_kw_month=150)],
                         [region("town", 0, 0.05)])
    with (base.parent / "provenance.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["table", "id", "field", "basis", "reference", "low", "high"])
        writer.writerow(["sites", "dear", "colocation_usd_per_kw_month", "rule", "a set average", "90", "200"])
    quotes = write(tmp_path / "quotes.csv", "market,field,value,source,date\ndear,colocation_usd_per_kw_month,50,Broker B,2026\n"
                   "dear,power_limit_mw,12,Utility offer U-1,2026-05\n")
    path, _ = write_quote_scenario(quotes, tmp_path / "q", base=base)
    assert yaml.safe_load(path.read_text())["extends"] == "../base/scenario.yaml"
    assert next(s for s in load_scenario(path).sites if s.id == "dear").power_limit_kw == 12_000  # a table given in kW
    options = SolveOptions(time_limit_s=30)
    plan_before, plan_after = solve(load_scenario(base), options), solve(load_scenario(path), options)
    assert {s.id for s in plan_before.sites if s.open} == {"cheap"}
    assert {s.id for s in plan_after.sites if s.open} == {"dear"}
    assert plan_after.objective_usd_per_year < plan_before.objective_usd_per_year
    assert input_provenance(load_scenario(base)).get("sites", "dear", "colocation_usd_per_kw_month")[0] == "rule"
    assert input_provenance(load_scenario(path)).get("sites", "dear", "colocation_usd_per_kw_month")[0] == "source"


def test_bad_rows_are_named_by_file_row_and_field_with_a_fix(tmp_path):
    bad = write(tmp_path / "bad.csv", HEADER + "montreall,colocation_usd_per_kw_month,1,x,2026\n"
                "montreal,colocation,128,x,2026\n"
                "montreal,power_limit_mw,abc,x,2026\n"
                "montreal,power_price_usd_per_mwh,50,,2026/11\n"
                "dublin,power_limit_mw,0,x,2026\n"
                "montreal,colocation_usd_per_kw_month,128,y,2026\n"
                "montreal,colocation_usd_per_kw_month,129,z,2026\n")
    result = CliRunner().invoke(app, ["data", "quotes", str(bad), "--out", str(tmp_path / "q")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    out = " ".join(result.output.split())
    for where in ("bad.csv, row 2, field 'site'", "did you mean 'montreal'", "bad.csv, row 3, field 'field'",
                  "bad.csv, row 4, field 'value'", "bad.csv, row 5, field 'source'", "bad.csv, row 5, field 'date'",
                  "bad.csv, row 6, field 'value'", "bad.csv, row 8, field 'field'", "Fix:"):
        assert where in out, where
    assert not (tmp_path / "q").exists()
    with pytest.raises(ScenarioError) as info:
        read_quotes(write(tmp_path / "nohead.csv", "montreal,colocation_usd_per_kw_month,1,x,2026\n"), {"montreal"})
    assert "site,field,value,source,date" in str(info.value)
