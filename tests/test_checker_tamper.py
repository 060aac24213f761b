"""The checker catches tampered plan folders: files changed, added or removed, figures
edited consistently in several places, a plan.json from another scenario.

Each tampering runs twice: as it is (the manifest catches the changed bytes), and with the
manifest written again over the tampered folder (a tamperer who knows the format), where the
recomputation of the figure itself must catch it.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest

from helpers import job, make_scenario, region, site
from dcplace.models.plan import write_manifest
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.solving.pipeline import solve_to_folder

SITES = [site("a", 0, 0, cooling_allowed="air;liquid"), site("b", 0, 1, power_price_usd_per_mwh=30)]
REGIONS = [region("town", 0, 0.2, chat=2000, budget=5), region("city", 0, 1.1, chat=900, budget=5)]
JOBS = [job("pretrain", 96), job("tune", 20)]


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    root = tmp_path_factory.mktemp("tamper")
    path = make_scenario(root / "in", sites=SITES, regions=REGIONS, jobs=JOBS)
    _, report = solve_to_folder(path, root / "plan", SolveOptions(mip_gap=0.0))
    assert report.ok, report.violations
    other = make_scenario(root / "other-in", sites=[*SITES, site("c", 1, 1)], regions=REGIONS, jobs=JOBS, name="other",
                          economics={"carbon_price_usd_per_t": 10})
    _, report = solve_to_folder(other, root / "other-plan", SolveOptions(mip_gap=0.0))
    assert report.ok, report.violations
    return root


@pytest.fixture
def plan_dir(solved, tmp_path):
    target = tmp_path / "plan"
    shutil.copytree(solved / "plan", target)
    return target


def edit_plan(folder, change):
    data = json.loads((folder / "plan.json").read_text())
    change(data)
    (folder / "plan.json").write_text(json.dumps(data, indent=2))


def edit_csv(folder, name, change):
    path = folder / name
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    change(frame)
    frame.to_csv(path, index=False)


def reseal(folder):
    """What a tamperer who read docs/plan-format.md would do: write the manifest again."""
    write_manifest(folder, json.loads((folder / "plan.json").read_text())["scenario_hash"])


def serving_site(data):
    return next(s for s in data["sites"] if s["role"] in ("inference", "mixed"))


def open_site_with_racks(data):
    return next(s for s in data["sites"] if s["racks"])


# ------------------------------------------------------------------ the tamperings


def copy_other_plan(folder, solved):
    shutil.copy(solved / "other-plan" / "plan.json", folder / "plan.json")


def add_input_site(folder, solved):
    def add(frame):
        row = frame.iloc[[0]].copy()
        row["id"], row["name"] = "zz", "Never mentioned"
        frame.loc[len(frame)] = row.iloc[0]

    edit_csv(folder, "inputs/sites.csv", add)


def delete_sites_csv(folder, solved):
    (folder / "sites.csv").unlink()


def delete_input_sites_csv(folder, solved):
    (folder / "inputs" / "sites.csv").unlink()


def edit_cost_in_sites_csv(folder, solved):
    edit_csv(folder, "sites.csv", lambda f: f.__setitem__("cost_energy_usd_per_year", "1.0"))


def edit_cost_in_input_sites_csv(folder, solved):
    edit_csv(folder, "inputs/sites.csv", lambda f: f.__setitem__("fixed_cost_usd_per_year", "123456"))


def halve_kpi(key):
    def tamper(folder, solved):
        edit_plan(folder, lambda d: d["kpis"].__setitem__(key, d["kpis"][key] / 2))

    return tamper


def halve_site_figure(key):
    def tamper(folder, solved):
        def change(d):
            s = open_site_with_racks(d)
            cut = s[key] / 2
            s[key] -= cut
            d["kpis"][key] -= cut  # consistent: the total still adds up

        edit_plan(folder, change)
        edit_csv(folder, "sites.csv", lambda f: f.__setitem__(key, [str(s[key]) for s in json.loads((folder / "plan.json").read_text())["sites"]]))

    return tamper


def misreport_role(folder, solved):
    edit_plan(folder, lambda d: serving_site(d).update(role="training"))


def change_rtt_budget(folder, solved):
    def change(d):
        d["assignments"][0]["rtt_budget_ms"] = 500.0

    edit_plan(folder, change)
    edit_csv(folder, "assignments.csv", lambda f: f.loc.__setitem__((0, "rtt_budget_ms"), "500.0"))


def halve_bound_keep_optimal(folder, solved):
    def change(d):
        d["solve"]["best_bound_usd_per_year"] = d["solve"]["objective_usd_per_year"] / 2
        d["solve"]["gap"] = 0.5

    edit_plan(folder, change)


def halve_bound_keep_gap(folder, solved):
    edit_plan(folder, lambda d: d["solve"].update(best_bound_usd_per_year=d["solve"]["objective_usd_per_year"] / 2))


def assignments_csv_other_site(folder, solved):
    sites = json.loads((folder / "plan.json").read_text())["sites"]

    def change(frame):
        other = next(s["id"] for s in sites if s["id"] != frame.loc[0, "site"])
        frame.loc[0, "site"] = other

    edit_csv(folder, "assignments.csv", change)


def rename_job(folder, solved):
    edit_plan(folder, lambda d: d["jobs"][0].update(name="Something else"))


def scale_job(folder, solved):
    edit_plan(folder, lambda d: d["jobs"][0].update(gpus_h100_equiv=d["jobs"][0]["gpus_h100_equiv"] / 2))


def rename_region_in_assignment(folder, solved):
    edit_plan(folder, lambda d: d["assignments"][0].update(region_name="Elsewhere"))


def add_stray_file(folder, solved):
    (folder / "inputs" / "notes.txt").write_text("added later\n")


CASES = {
    # name: (tampering, family the recomputation reports once the manifest is written again)
    "plan.json copied from another scenario's plan folder": (copy_other_plan, "provenance"),
    "inputs list a site the plan never mentions": (add_input_site, "sites"),
    "sites.csv deleted": (delete_sites_csv, "tables"),
    "inputs/sites.csv deleted": (delete_input_sites_csv, "inputs"),
    "a cost edited in sites.csv": (edit_cost_in_sites_csv, "tables"),
    "a cost edited in inputs/sites.csv": (edit_cost_in_input_sites_csv, "cost"),
    "mean RTT halved": (halve_kpi("mean_rtt_ms"), "kpis"),
    "$ per M tokens halved": (halve_kpi("usd_per_m_tokens"), "kpis"),
    "a site's emissions halved in the site and the total": (halve_site_figure("emissions_t_per_year"), "sites"),
    "a site's upfront capex halved in the site and the total": (halve_site_figure("upfront_capex_usd"), "sites"),
    "a site's role misreported": (misreport_role, "sites"),
    "an assignment's rtt_budget_ms changed": (change_rtt_budget, "assignments"),
    "an assignment's region_name changed": (rename_region_in_assignment, "assignments"),
    "status optimal with the bound halved (gap 0.5)": (halve_bound_keep_optimal, "status"),
    "bound halved, gap left as it was": (halve_bound_keep_gap, "status"),
    "assignments.csv names another site than plan.json": (assignments_csv_other_site, "tables"),
    "a job's name changed": (rename_job, "jobs"),
    "a job's H100-equivalents halved": (scale_job, "jobs"),
    "a file added to the folder": (add_stray_file, "manifest"),
}


def test_untouched_folder_passes(plan_dir):
    report = check_plan_folder(plan_dir)
    assert report.ok, report.violations
    assert {"manifest", "provenance", "sites", "kpis", "assignments", "jobs", "status", "tables"} <= set(report.checked)


@pytest.mark.parametrize("case", list(CASES))
def test_tampering_is_caught_by_the_manifest(case, plan_dir, solved):
    tamper, _ = CASES[case]
    tamper(plan_dir, solved)
    report = check_plan_folder(plan_dir)  # never raises, whatever was done to the folder
    assert "manifest" in report.families_violated(), report.violations
    assert not report.ok


@pytest.mark.parametrize("case", list(CASES))
def test_tampering_is_caught_by_recomputation(case, plan_dir, solved):
    tamper, family = CASES[case]
    tamper(plan_dir, solved)
    if (plan_dir / "plan.json").exists():
        reseal(plan_dir)
    report = check_plan_folder(plan_dir)
    assert family in report.families_violated(), report.violations
    for v in report.violations:
        assert "Traceback" not in v.message


def test_a_folder_without_manifest_is_told_to_re_solve(plan_dir):
    (plan_dir / "manifest.json").unlink()
    report = check_plan_folder(plan_dir)
    [violation] = [v for v in report.violations if v.family == "manifest"]
    assert "no manifest.json" in violation.message and "dcplace solve" in violation.message


def test_missing_plan_json_is_a_violation_not_an_exception(plan_dir):
    (plan_dir / "plan.json").unlink()
    report = check_plan_folder(plan_dir)
    assert {"plan", "manifest"} <= report.families_violated()


def test_later_report_and_export_subfolders_are_allowed(plan_dir):
    """Outputs other commands write into a plan folder carry their own marker of their kind."""
    for sub, kind in (("report", "report"), ("export", "export"), ("maps-for-the-board", "report")):
        (plan_dir / sub).mkdir()
        (plan_dir / sub / "file.html").write_text("<p>later</p>")
        (plan_dir / sub / ".dcplace-folder.json").write_text(json.dumps({"kind": kind}))
    report = check_plan_folder(plan_dir)
    assert report.ok, report.violations
    # a folder without a marker, or one claiming to be a plan, does not hide what it holds
    (plan_dir / "notes").mkdir()
    (plan_dir / "notes" / "added.txt").write_text("x")
    (plan_dir / "fake").mkdir()
    (plan_dir / "fake" / "added.csv").write_text("x")
    (plan_dir / "fake" / ".dcplace-folder.json").write_text(json.dumps({"kind": "plan"}))
    found = {v.message.split(" ")[0] for v in check_plan_folder(plan_dir).violations if v.family == "manifest"}
    assert {"notes/added.txt", "fake/added.csv"} <= found


def test_manifest_follows_the_documented_format(plan_dir):
    """manifest.json as docs/plan-format.md describes it, recomputed here by hand."""
    doc = json.loads((plan_dir / "manifest.json").read_text())
    plan = json.loads((plan_dir / "plan.json").read_text())
    assert doc["format_version"] == 1 and doc["algorithm"] == "sha256"
    assert doc["scenario_hash"] == plan["scenario_hash"] == plan["provenance"]["scenario_hash"]
    on_disk = sorted(p.relative_to(plan_dir).as_posix() for p in plan_dir.rglob("*") if p.is_file())
    assert sorted(doc["files"]) == [p for p in on_disk if p not in ("manifest.json", ".dcplace-folder.json")]
    for rel, entry in doc["files"].items():
        data = (plan_dir / rel).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    lines = "".join(f"{rel.removeprefix('inputs/')} {doc['files'][rel]['sha256']}\n" for rel in sorted(doc["files"]) if rel.startswith("inputs/"))
    assert doc["inputs_sha256"] == hashlib.sha256(lines.encode()).hexdigest()
