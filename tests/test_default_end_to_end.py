"""`dcplace solve` with no arguments: a real plan on the embedded default, written and checked."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from cli import app
from models import load_scenario

runner = CliRunner()


@pytest.fixture(scope="module")
def default_plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("default") / "plan"
    result = runner.invoke(app, ["solve", "--out", str(out), "--gap", "1e-3", "--threads", "2"])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_solve_prints_and_writes_a_checked_plan(default_plan):
    out, printed = default_plan
    assert "Open sites" in printed and "checked" in printed
    for name in ("plan.json", "sites.csv", "assignments.csv", "jobs.csv", "inputs/scenario.yaml", "inputs/provenance.json"):
        assert (out / name).exists(), name
    result = runner.invoke(app, ["check", str(out)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output


def test_default_plan_serves_all_demand_and_places_all_jobs(default_plan):
    out, _ = default_plan
    plan = json.loads((out / "plan.json").read_text())
    scenario = load_scenario()
    assert plan["solve"]["status"] in ("optimal", "feasible") and plan["solve"]["gap"] <= 1e-3 + 1e-9
    assert plan["kpis"]["demand_within_budget_share"] == pytest.approx(1.0, abs=1e-9)
    assert {j["job"] for j in plan["jobs"]} == {j.id for j in scenario.jobs}
    assignments = pd.read_csv(out / "assignments.csv")
    assert (assignments["rtt_ms"] <= assignments["rtt_budget_ms"] + 1e-9).all()


def test_default_plan_puts_dense_racks_only_in_liquid_zones(default_plan):
    out, _ = default_plan
    plan = json.loads((out / "plan.json").read_text())
    scenario = load_scenario()
    air_max_kw = next(c.max_kw_per_rack for c in scenario.catalog.cooling if c.id == "air")
    kw = {k.id: k.kw_per_rack for k in scenario.catalog.rack_configs}
    dense = [ln for s in plan["sites"] for ln in s["racks"] if kw[ln["config"]] > air_max_kw]
    assert dense, "the default plan uses dense racks"
    assert all(ln["cooling"] in ("dlc", "immersion", "rdhx") for ln in dense)
