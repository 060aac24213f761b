"""Decisions labelled robust or fill-dependent, and the robust plan (issue 48 item 4): the ranges
sampled are the ones provenance.csv records, the labels name the input that decides, and the
robust plan is the min-max candidate, checked against a brute-force re-solve."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import job, make_scenario, region, site
from test_why import three_site_scenario as three_sites  # 'a' $50, 'b' $100 serve 'west'; only 'c' reaches 'east'
from dcplace.models import load_scenario
from dcplace.models.sweep import load_member
from dcplace.models.writing import write_scenario
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solving.pipeline import solve_to_folder

EXACT = SolveOptions(mip_gap=0.0, time_limit_s=60)
EXACT_OPTIONS = {"mip_gap": 0.0, "time_limit_s": 60}
HOURS = 8760
RACK_MWH = 4 * 1.5 * HOURS * 0.5 / 1000  # one 'server-air' rack (tests/test_why.py)
DEFAULT_PROVENANCE = Path(__file__).resolve().parents[1] / "data" / "default" / "provenance.csv"


def training_pair(tmp_path):
    """Training and the town's inference go to the cheaper of 'x' ($40/MWh) and 'y' ($60/MWh)."""
    return make_scenario(tmp_path / "pair", sites=[site("x", 0, 0, power_price_usd_per_mwh=40), site("y", 0, 0.2, power_price_usd_per_mwh=60)],
                         regions=[region("town", 0, 0.1, chat=800, budget=10)], jobs=[job("train", 48)])


# ----------------------------------------------------------------------------- 1. ranges from provenance


def test_default_ranges_are_those_in_provenance_csv():
    from dcplace.optimizer.studies.robustness import BASIS_RANGE, IMPUTED_RANGE, provenance_groups

    scenario = load_scenario()
    rows = {(r["table"], r["id"], r["field"]): r for r in csv.DictReader(DEFAULT_PROVENANCE.open(encoding="utf-8"))}
    values = {s.id: s for s in scenario.sites}
    groups = provenance_groups(scenario)
    recorded = banded = 0
    for g in groups:
        assert (g.low, g.high) == (0.0, 1.0) and len(g.cell_ranges) == len(g.paths)
        assert g.values(0.0) == [f"{lo:.10g}" for lo, _ in g.cell_ranges] and g.values(1.0) == [f"{hi:.10g}" for _, hi in g.cell_ranges]
        for path, (lo, hi) in zip(g.paths, g.cell_ranges):
            if path.startswith("sites["):
                sid, fld = path[len("sites["):].split("].")
                key, value = ("sites", sid, fld), float(getattr(values[sid], fld))
            else:
                fld = path.split(".", 1)[1]
                key, value = ("economics", "default", fld), float(getattr(scenario.economics, fld))
            row = rows.get(key)
            if row and row["low"] and row["high"] and float(row["low"]) < float(row["high"]):
                assert (lo, hi) == (float(row["low"]), float(row["high"])), path  # exactly the recorded range
                recorded += 1
            else:  # no range, or one figure: the basis's band around the value
                r = BASIS_RANGE.get(row["basis"], IMPUTED_RANGE) if row else IMPUTED_RANGE
                assert (lo, hi) == pytest.approx((value * (1 - r), value * (1 + r))), path
                banded += 1
    colocation = [g for g in groups if g.label.startswith("colocation price, rule-filled")]
    assert colocation and colocation[0].recorded == len(colocation[0].paths)  # every rule-filled rent has its range
    assert recorded > 100 and banded > 0


def test_a_provenance_table_beside_the_scenario_sets_the_ranges(tmp_path):
    from dcplace.optimizer.studies.robustness import provenance_groups

    path = three_sites(tmp_path)
    with (path.parent / "provenance.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["table", "id", "field", "basis", "reference", "low", "high"])
        w.writerow(["sites", "a", "power_price_usd_per_mwh", "rule", "a tier rule", "30", "140"])
        w.writerow(["sites", "b", "power_price_usd_per_mwh", "source", "a tariff", "", ""])
    groups = {g.label: g for g in provenance_groups(load_scenario(path))}
    rule = groups["power price, rule-filled (1 site)"]
    assert rule.paths == ["sites[a].power_price_usd_per_mwh"] and rule.cell_ranges == [[30.0, 140.0]] and rule.recorded == 1
    sourced = groups["power price, sourced (1 site)"]
    assert sourced.cell_ranges == [pytest.approx([95.0, 105.0])] and sourced.recorded == 0  # sourced, no range: +-5 %
    given = groups["power price, no provenance (1 site)"]  # 'c': no row, an assumption's +-25 %
    assert given.cell_ranges == [pytest.approx([60.0, 100.0])]


def test_ks_statistic_by_hand():
    from dcplace.optimizer.studies.robustness import ks_statistic

    assert ks_statistic(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0])) == 1.0
    assert ks_statistic(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert ks_statistic(np.array([1.0, 3.0]), np.array([2.0, 4.0])) == 0.5


# ----------------------------------------------------------------------------- 2. labels


def test_labels_name_the_input_that_decides(tmp_path):
    from dcplace.optimizer.studies.robustness import robustness

    solve_to_folder(load_scenario(three_sites(tmp_path)), tmp_path / "plan", EXACT)
    study = robustness(tmp_path / "plan", samples=10, ranges={"sites[a].power_price_usd_per_mwh": (0.5, 3.0),
                                                              "sites[c].power_price_usd_per_mwh": (0.5, 3.0)}, options=EXACT_OPTIONS)
    flipped = [50 * s.factors[0] > 100 for s in study.samples]
    assert 0 < sum(flipped) < 10
    a, c = study.label_of("site", "a"), study.label_of("site", "c")
    assert a.holds == 10 - sum(flipped) and a.samples == 10
    # a's own price separates the worlds where 'a' closes from the others completely; c's price does not
    assert a.inputs == ["sites[a].power_price_usd_per_mwh"] and a.separation == [1.0] and a.ends == ["high"]
    assert a.label == "depends on sites[a].power_price_usd_per_mwh (changes when high)"
    assert c.label == "robust" and c.holds == 10  # the only site within reach of 'east'
    saved = json.loads((Path(study.folder) / "robustness.json").read_text())
    assert {x["id"]: x["label"] for x in saved["labels"]} == {"a": a.label, "c": "robust"}
    with (Path(study.folder) / "labels.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["kind"], r["id"], r["label"], r["holds"]) for r in rows] == [("site", "a", a.label, str(a.holds)), ("site", "c", "robust", "10")]


def test_training_placement_label_reaches_page_one_sites_csv_and_maps(tmp_path):
    from dcplace.optimizer.studies.robustness import robustness
    from dcplace.reports import load_plan_layers
    from dcplace.reports.export import export_layers
    from dcplace.reports.layers import robustness_legend
    from dcplace.reports.report import report_content

    solve_to_folder(load_scenario(training_pair(tmp_path)), tmp_path / "plan", EXACT)
    layers = load_plan_layers(tmp_path / "plan")
    assert "robustness" not in layers.sites  # no study yet: no column
    study = robustness(tmp_path / "plan", samples=8, ranges={"sites[x].power_price_usd_per_mwh": (0.5, 3.0)}, options=EXACT_OPTIONS)
    moved = sum(40 * s.factors[0] > 60 for s in study.samples)
    assert 0 < moved < 8
    placement = study.label_of("job", "train")
    assert placement.decision == "x" and placement.holds == 8 - moved
    assert placement.inputs == ["sites[x].power_price_usd_per_mwh"] and placement.ends == ["high"]
    layers = load_plan_layers(tmp_path / "plan")
    content = report_content(layers)
    page_one = " ".join(content.section("argument").blocks[0].texts)
    assert "Training at X is fill-dependent" in page_one and "sites[x].power_price_usd_per_mwh (changes when high)" in page_one
    sites = layers.sites.set_index("id")
    assert sites.at["x", "robustness"] == study.label_of("site", "x").label and sites.at["y", "robustness"] == ""
    export_layers(layers, tmp_path / "export", "csv")
    with (tmp_path / "export" / "sites.csv").open() as fh:
        exported = {r["id"]: r["robustness"] for r in csv.DictReader(fh)}
    assert exported["x"].startswith("depends on sites[x].power_price_usd_per_mwh")
    assert "robustness" not in (tmp_path / "plan" / "sites.csv").read_text().splitlines()[0]  # the solve's own file is untouched
    assert robustness_legend(layers.sites) == ["0 of 1 open sites robust", "fill-dependent: X"]
    from dcplace.reports.htmlmap import plan_figure

    fig = plan_figure(layers.for_display())
    [entry] = [t for t in fig.data if t.meta and t.meta.get("layer") == "robustness"]
    assert "0 of" in entry.name and "fill-" in entry.name
    hover = next(t for t in fig.data if t.meta and str(t.meta.get("layer", "")).startswith("sites") and t.text)
    assert any("under the inputs' ranges: depends on sites[x].power_price_usd_per_mwh" in text for text in hover.text)


# ----------------------------------------------------------------------------- 3. the robust plan


def test_robust_plan_by_hand(tmp_path):
    from dcplace.optimizer.checker import check_plan_folder
    from dcplace.optimizer.studies.robustness import robustness

    base, _ = solve_to_folder(load_scenario(three_sites(tmp_path)), tmp_path / "plan", EXACT)
    study = robustness(tmp_path / "plan", samples=8, ranges={"sites[a].power_price_usd_per_mwh": (0.5, 3.0)}, options=EXACT_OPTIONS,
                       robust_plan=True)
    r = study.robust_plan
    worst_a = 50 * max(s.factors[0] for s in study.samples)
    assert worst_a > 100  # some sample makes 'a' dearer than 'b': the plan that uses 'b' has the least worst case
    assert r["chosen"] != "plan" and r["roles"] == {"b": "inference", "c": "inference"}
    assert r["premium_usd_per_year"] == pytest.approx((100 - 50) * RACK_MWH, rel=1e-9)
    assert r["plan_worst_usd_per_year"] == pytest.approx(base.objective_usd_per_year + (worst_a - 50) * RACK_MWH, rel=1e-9)
    assert r["worst_usd_per_year"] == pytest.approx(base.objective_usd_per_year + 50 * RACK_MWH, rel=1e-9)
    assert r["worst_usd_per_year"] <= r["plan_worst_usd_per_year"] and r["method"] == "re-costed"
    assert check_plan_folder(r["folder"]).ok
    assert r["nominal_usd_per_year"] == pytest.approx(base.objective_usd_per_year + r["premium_usd_per_year"], rel=1e-12)


def test_robust_plan_is_the_min_max_candidate_by_brute_force(tmp_path):
    """On a synthetic world: every candidate re-solved (serving free, first-stage decisions fixed)
    in every sample gives the study's re-costed matrix, and the study's choice is the min-max."""
    from dcplace.models.plan import read_plan
    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.optimizer.checker import check_plan_folder
    from dcplace.optimizer.model.formulation import build_model
    from dcplace.optimizer.model.index import PruningRules
    from dcplace.optimizer.solving.precheck import checked_index
    from dcplace.optimizer.studies.batch import start_columns
    from dcplace.optimizer.studies.robust_plan import fixed_first_stage
    from dcplace.optimizer.studies.robustness import _overrides, latin_hypercube, robustness, user_groups
    from dcplace.models.sweep import Member

    path = write_scenario(synthetic_scenario(seed=5, n_sites=6, n_regions=10, n_jobs=1), tmp_path / "world")
    solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    ranges = {f"sites[s{i}].colocation_usd_per_kw_month": (0.4, 2.5) for i in range(6)}  # each site's rent on its own
    study = robustness(tmp_path / "plan", samples=6, options=EXACT_OPTIONS, robust_plan=True, seed=3, ranges=ranges)
    r = study.robust_plan
    assert r["method"] == "re-costed"  # prices of first-stage decisions only
    assert len(r["candidates"]) >= 3  # the samples' optima differ: a real choice
    groups = user_groups(ranges)
    factors = np.round(latin_hypercube(6, groups, 3), 6)
    folder = Path(study.folder)
    worst = {}
    for cand in r["candidates"]:
        plan = read_plan(tmp_path / "plan" if cand["name"] == "plan" else folder / cand["name"])
        costs = []
        for i in range(6):
            member = load_member(str(tmp_path / "plan" / "inputs" / "scenario.yaml"), Member(f"sample-{i:03d}", _overrides(groups, factors[i])))
            ix = checked_index(member, 60_000, PruningRules.none())
            lm = build_model(ix, cheapest=False)
            x = fixed_first_stage(lm, start_columns(plan, lm, ix))  # an LP re-solve of the serving, not the re-costing
            costs.append(np.inf if x is None else float(lm.objective() @ x))
        assert cand["costs_usd_per_year"] == pytest.approx(costs, rel=1e-7)
        worst[cand["name"]] = max(costs)
    best = min(worst.values())
    assert worst[r["chosen"]] == pytest.approx(best, rel=1e-9)
    assert worst[r["chosen"]] <= worst["plan"] * (1 + 1e-12)  # never beaten on its own worst case by the nominal plan
    assert r["worst_usd_per_year"] == pytest.approx(best, rel=1e-7)
    assert check_plan_folder(r["folder"]).ok


def test_cli_robust_plan(tmp_path):
    from typer.testing import CliRunner

    from dcplace.cli import app

    solve_to_folder(load_scenario(three_sites(tmp_path)), tmp_path / "plan", EXACT)
    result = CliRunner().invoke(app, ["why", "robustness", str(tmp_path / "plan"), "--samples", "3", "--gap", "0", "--robust-plan",
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    assert "Robustness (`dcplace why robustness`, 3 sampled worlds" in result.output and "Robust plan" in result.output
    assert (tmp_path / "plan" / "why" / "robustness" / "robust-plan" / "plan.json").is_file()
    assert (tmp_path / "plan" / "why" / "robustness" / "labels.csv").is_file()
    check = CliRunner().invoke(app, ["check", str(tmp_path / "plan" / "why" / "robustness" / "robust-plan")])
    assert check.exit_code == 0, check.output


def test_a_range_on_a_serving_price_re_solves_the_serving(tmp_path):
    """A transport price prices the serving: holding a candidate's serving would over-state its cost,
    so each candidate's serving is re-solved per sample (an LP with its decisions fixed)."""
    from dcplace.optimizer.studies.robustness import robustness

    path = make_scenario(tmp_path / "t", sites=[site("a", 0, 0, power_price_usd_per_mwh=50), site("b", 0, 1, power_price_usd_per_mwh=100),
                                               site("c", 0, 20, power_price_usd_per_mwh=80)],
                         regions=[region("west", 0, 0.5, chat=800, budget=10), region("east", 0, 20.2, chat=800, budget=10)],
                         economics={"transport_usd_per_tok_s_1000km_year": 1.0})
    solve_to_folder(load_scenario(path), tmp_path / "plan", EXACT)
    study = robustness(tmp_path / "plan", samples=4, options=EXACT_OPTIONS, robust_plan=True,
                       ranges={"sites[a].power_price_usd_per_mwh": (0.5, 3.0), "economics.transport_usd_per_tok_s_1000km_year": (0.5, 2.0)})
    r = study.robust_plan
    assert r["method"] == "serving re-solved"
    assert r["worst_usd_per_year"] <= r["plan_worst_usd_per_year"]
    mine = next(c for c in r["candidates"] if c["name"] == "plan")
    # the recommended plan's own cost in each sample is what the regret uses too
    assert mine["costs_usd_per_year"] == pytest.approx([s.plan_cost_usd_per_year for s in study.samples], rel=1e-12)


def test_a_decision_that_changes_in_every_sample_names_the_range_away_from_the_plan(tmp_path):
    """Every sampled price of 'a' is above 'b''s: 'a' closes in every sample; the plan's own inputs
    (where it holds) separate them, so a's price is named and c's is not."""
    from dcplace.optimizer.studies.robustness import robustness

    solve_to_folder(load_scenario(three_sites(tmp_path)), tmp_path / "plan", EXACT)
    study = robustness(tmp_path / "plan", samples=6, ranges={"sites[a].power_price_usd_per_mwh": (2.5, 3.0),
                                                             "sites[c].power_price_usd_per_mwh": (0.9, 1.1)}, options=EXACT_OPTIONS)
    a = study.label_of("site", "a")
    assert a.holds == 0 and a.samples == 6
    assert a.inputs == ["sites[a].power_price_usd_per_mwh"] and a.separation == [1.0] and a.ends == ["high"]
