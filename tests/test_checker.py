"""The independent checker rejects deliberately broken plans: one test per family it checks."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml

from helpers import job, make_scenario, region, site
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.solving.pipeline import solve_to_folder


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    root = tmp_path_factory.mktemp("checker")
    path = make_scenario(
        root / "in",
        sites=[site("a", 0, 0, cooling_allowed="air;liquid"), site("b", 0, 1, power_price_usd_per_mwh=30)],
        regions=[region("town", 0, 0.2, chat=2000, budget=5), region("city", 0, 1.1, chat=900, budget=5)],
        jobs=[job("pretrain", 96), job("tune", 20)],
    )
    _, report = solve_to_folder(path, root / "plan", SolveOptions(mip_gap=0.0))
    assert report.ok
    return root / "plan"


@pytest.fixture
def plan_dir(solved, tmp_path):
    target = tmp_path / "plan"
    shutil.copytree(solved, target)
    return target


def edit_plan(folder, change):
    data = json.loads((folder / "plan.json").read_text())
    change(data)
    (folder / "plan.json").write_text(json.dumps(data))


def edit_table(folder, name, change):
    path = folder / "inputs" / name
    frame = pd.read_csv(path, keep_default_na=False)
    change(frame)
    frame.to_csv(path, index=False)


def edit_policies(folder, **values):
    path = folder / "inputs" / "scenario.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["policies"].update(values)
    path.write_text(yaml.safe_dump(spec))


def families(folder):
    return check_plan_folder(folder).families_violated()


def first_line(data, purpose):
    return next(ln for s in data["sites"] for ln in s["racks"] if ln["purpose"] == purpose)


def test_untouched_plan_passes(plan_dir):
    report = check_plan_folder(plan_dir)
    assert report.ok, report.violations
    assert {"cost", "demand", "density", "latency", "training", "power_and_space"} <= set(report.checked)


def test_fractional_racks_are_rejected(plan_dir):
    edit_plan(plan_dir, lambda d: first_line(d, "inference").update(racks=1.5))
    assert "integrality" in families(plan_dir)


def test_unmet_demand_is_rejected(plan_dir):
    def halve(d):
        d["assignments"][0]["share"] *= 0.5
        d["assignments"][0]["served_tok_s"] *= 0.5

    edit_plan(plan_dir, halve)
    assert "demand" in families(plan_dir)


def test_broken_latency_budget_is_rejected(plan_dir):
    edit_table(plan_dir, "regions.csv", lambda f: f.__setitem__("rtt_budget_chat_ms", 0.1))
    assert "latency" in families(plan_dir)


def test_misreported_rtt_is_rejected(plan_dir):
    edit_plan(plan_dir, lambda d: d["assignments"][0].update(rtt_ms=0.0))
    assert "latency" in families(plan_dir)


def test_data_residency_is_checked(plan_dir):
    edit_table(plan_dir, "regions.csv", lambda f: f.__setitem__("allowed_countries", "DE"))
    assert "residency" in families(plan_dir)


def test_inference_capacity_is_checked(plan_dir):
    edit_table(plan_dir, "regions.csv", lambda f: f.__setitem__("demand_chat_tok_s", f["demand_chat_tok_s"] * 10))

    def scale(d):
        for a in d["assignments"]:
            a["served_tok_s"] *= 10

    edit_plan(plan_dir, scale)
    assert "inference_capacity" in families(plan_dir)


def test_dense_rack_in_air_zone_is_rejected(plan_dir):
    def to_air(d):
        line = first_line(d, "training")
        line["cooling"] = "air"

    edit_plan(plan_dir, to_air)
    assert "density" in families(plan_dir)


def test_rack_in_unbuilt_zone_is_rejected(plan_dir):
    def drop_zones(d):
        for s in d["sites"]:
            s["zones"] = []

    edit_plan(plan_dir, drop_zones)
    assert "density" in families(plan_dir)


def test_power_limit_is_checked(plan_dir):
    edit_table(plan_dir, "sites.csv", lambda f: f.__setitem__("power_limit_kw", 1.0))
    assert "power" in families(plan_dir)


def test_floor_space_is_checked(plan_dir):
    edit_table(plan_dir, "sites.csv", lambda f: f.__setitem__("floor_racks", 0))
    assert "space" in families(plan_dir)


def test_closed_site_cannot_serve(plan_dir):
    def close_all(d):
        for s in d["sites"]:
            s["open"] = False

    edit_plan(plan_dir, close_all)
    assert "open" in families(plan_dir)


def test_job_placed_twice_is_rejected(plan_dir):
    edit_plan(plan_dir, lambda d: d["jobs"].append(dict(d["jobs"][0])))
    assert "training" in families(plan_dir)


def test_job_on_too_weak_a_fabric_is_rejected(plan_dir):
    edit_table(plan_dir, "jobs.csv", lambda f: f.__setitem__("min_fabric_tier", 9))
    assert "training" in families(plan_dir)


def test_training_capacity_is_checked(plan_dir):
    edit_table(plan_dir, "jobs.csv", lambda f: f.__setitem__("gpus_h100_equiv", f["gpus_h100_equiv"] * 10))
    assert "training" in families(plan_dir)


def test_policies_are_checked(plan_dir):
    data = json.loads((plan_dir / "plan.json").read_text())
    open_site = next(s["id"] for s in data["sites"] if s["open"])
    edit_policies(plan_dir, forbidden_sites=[open_site], max_sites=0, carbon_cap_t_per_year=1.0, capex_budget_usd=1.0)
    report = check_plan_folder(plan_dir)
    messages = " ".join(v.message for v in report.violations if v.family == "policy")
    for phrase in ("forbidden site", "max_sites", "carbon cap", "budget"):
        assert phrase in messages


def test_single_purpose_policy_is_checked(plan_dir):
    def mix(d):
        target = next(s for s in d["sites"] if s["racks"])
        other = {"inference": "training", "training": "inference"}[target["racks"][0]["purpose"]]
        donor = next(ln for s in d["sites"] for ln in s["racks"] if ln["purpose"] == other)
        target["racks"].append(dict(donor))

    edit_plan(plan_dir, mix)
    edit_policies(plan_dir, single_purpose_sites=True)
    assert "policy" in families(plan_dir)


def test_objective_not_matching_line_items_is_rejected(plan_dir):
    edit_plan(plan_dir, lambda d: d.update(objective_usd_per_year=d["objective_usd_per_year"] + 1000))
    assert "cost" in families(plan_dir)


def test_wrong_line_item_is_rejected(plan_dir):
    def bump(d):
        s = next(s for s in d["sites"] if s["open"])
        s["cost_usd_per_year"]["energy"] += 50

    edit_plan(plan_dir, bump)
    assert "cost" in families(plan_dir)


def test_price_change_in_inputs_is_caught_by_cost_check(plan_dir):
    edit_table(plan_dir, "sites.csv", lambda f: f.__setitem__("power_price_usd_per_mwh", f["power_price_usd_per_mwh"] + 1))
    assert "cost" in families(plan_dir)


def test_check_command_accepts_a_relative_folder(solved, monkeypatch):
    from typer.testing import CliRunner

    from dcplace.cli import app

    monkeypatch.chdir(solved.parent)
    result = CliRunner().invoke(app, ["check", solved.name])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
