"""Chips at an interactivity target (issue 48 item 6): throughput curves read at each class's
tok/s-per-user target (models/interactivity.py), the default's curves recomputed from their
recorded MLPerf sources, bad targets named by file, row and field, and the checker's own reading."""

from __future__ import annotations

import csv
import shutil
import statistics
from pathlib import Path

import pytest

from dcplace import load_scenario
from dcplace.models import ScenarioError, scenario_warnings
from dcplace.models.interactivity import BEYOND, CLAMPED, INTERPOLATED, ON_POINT, read_curve, throughput_at_targets, tok_s_at_target
from dcplace.optimizer.checker.inputs import tok_s_at_targets as _tok_s_at_targets

from tests.helpers import TINY_CATALOG, make_scenario, region, site

DATA = Path(__file__).resolve().parent.parent / "data"


def read(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# ----------------------------------------------------------------- reading a curve, by hand


def test_read_curve_by_hand_on_two_points():
    points = [(25.0, 7000.0), (5.0, 12000.0)]  # any order
    # 15 tok/s per user is halfway from 5 to 25: 12000 + (7000 - 12000) x (15 - 5) / (25 - 5) = 9500
    assert read_curve(points, 15.0) == (pytest.approx(9500.0), INTERPOLATED)
    # 10: a quarter of the way: 12000 - 5000 x 0.25 = 10750
    assert read_curve(points, 10.0) == (pytest.approx(10750.0), INTERPOLATED)
    assert read_curve(points, 5.0) == (12000.0, ON_POINT)
    assert read_curve(points, 25.0) == (7000.0, ON_POINT)
    assert read_curve(points, 2.0) == (12000.0, CLAMPED)  # looser than every point: the loosest point's figure
    assert read_curve(points, 30.0) == (None, BEYOND)  # stricter than every point: not offered


def _with_targets(catalog, targets: dict[str, float]):
    workloads = tuple(w.model_copy(update={"interactivity_tok_s_per_user": targets.get(w.id, w.interactivity_tok_s_per_user)})
                      for w in catalog.workloads)
    return catalog.model_copy(update={"workloads": workloads})


def test_a_higher_target_never_gets_more_tok_s_per_chip():
    catalog = load_scenario().catalog
    grid = [1, 2.5, 5, 5.714, 7, 10, 12.5, 15, 20, 25, 30, 33.333, 40, 100]
    for w in catalog.workloads:
        previous: dict[str, float] = {}
        for target in grid:
            now = {chip: v for (chip, wl), v in tok_s_at_target(_with_targets(catalog, {w.id: target})).items() if wl == w.id}
            for chip, before in previous.items():
                assert now.get(chip, 0.0) <= before + 1e-9, (w.id, chip, target)
            assert set(now) <= set(previous) or not previous, (w.id, target)  # no chip appears at a stricter target
            previous = now


def test_the_checker_reads_the_curves_as_the_model_does():
    catalog = load_scenario().catalog
    rows = [t.model_dump() for t in catalog.throughput]
    for targets in ({}, {"chat": 15.0, "reasoning": 3.0, "chat_small": 20.0}, {"chat": 30.0}):
        cat = _with_targets(catalog, targets)
        workloads = {w.id: w.model_dump() for w in cat.workloads}
        assert _tok_s_at_targets(rows, workloads) == pytest.approx(dict(tok_s_at_target(cat)))


# ------------------------------------------------------- the default's curves from their sources


def test_default_curves_recompute_from_the_recorded_mlperf_rows():
    results: dict[tuple[str, str, str], list[float]] = {}
    for r in read(DATA / "reference" / "mlperf_inference_v5_1.csv"):
        results.setdefault((r["chip"], r["model"], r["scenario"]), []).append(float(r["tok_s_per_accelerator"]))
    bounds = {(r["model"], r["scenario"]): r for r in read(DATA / "reference" / "mlperf_interactivity.csv")}
    for b in bounds.values():  # tok/s per user = 1000 / the 99th-percentile TPOT bound quoted from mlperf.conf
        assert float(b["tok_s_per_user"]) == pytest.approx(1000 / float(b["tpot_ms"]), abs=1e-3)
        assert f"tpot_latency = {b['tpot_ms']}" in b["quote"] and b["address"].startswith("https://github.com/mlcommons/inference/")
    model = {"chat_small": "llama3.1-8b", "chat": "llama2-70b-99", "reasoning": "llama3.1-405b"}
    prov = {(r["id"], r["field"]): r for r in read(DATA / "catalog" / "provenance.csv") if r["table"] == "throughput"}
    rows = read(DATA / "catalog" / "throughput.csv")
    assert rows
    for row in rows:
        m, user, value = model[row["workload"]], float(row["tok_s_per_user"]), float(row["tok_s_per_gpu"])
        scenario = next(sc for (mm, sc), b in bounds.items() if mm == m and float(b["tok_s_per_user"]) == user)
        key = f"{row['chip']}/{row['workload']}@{user:g}"
        cell = prov[(key, "tok_s_per_gpu")]
        assert prov[(key, "tok_s_per_user")]["basis"] == "source"
        measured = results.get((row["chip"], m, scenario))
        if measured:  # the best submission of the chip in the scenario; range: all its submissions
            assert cell["basis"] == "derived" and value == pytest.approx(max(measured), abs=0.05)
            assert (float(cell["low"]), float(cell["high"])) == pytest.approx((min(measured), max(measured)), abs=0.05)
        else:  # a fill: the chip's other point x (or /) the median Interactive/Server ratio of the chips with both
            assert cell["basis"] == "rule" and "fill" in cell["reference"]
            ratios = [max(results[(c, m, "Interactive")]) / max(results[(c, m, "Server")]) for c in
                      {c for c, mm, _ in results if mm == m} if (c, m, "Interactive") in results and (c, m, "Server") in results]
            other = max(results[(row["chip"], m, "Server" if scenario == "Interactive" else "Interactive")])
            mid = statistics.median(ratios)
            assert value == pytest.approx(other * mid if scenario == "Interactive" else other / mid, abs=0.05)
            assert float(cell["low"]) < value < float(cell["high"])
    targets = {r["id"]: r for r in read(DATA / "catalog" / "workloads.csv")}
    for w, m in model.items():  # each class's target is one of its benchmark's two bounds
        assert float(targets[w]["interactivity_tok_s_per_user"]) in {float(b["tok_s_per_user"]) for (mm, _), b in bounds.items() if mm == m}


def test_the_default_plans_with_the_published_points_at_its_targets():
    figures = {(t.chip, t.workload): (t.tok_s_per_gpu, t.how) for t in throughput_at_targets(load_scenario().catalog)}
    assert figures[("gb200", "reasoning")] == (137.8, ON_POINT)  # MLPerf v5.1 405B Interactive, 12.5 tok/s per user
    assert figures[("b200", "chat")] == (7856.4, ON_POINT)  # 70B Interactive, 25 tok/s per user
    assert figures[("b200", "chat_small")] == (16099.2, ON_POINT)  # 8B Server, 10 tok/s per user
    assert not [p for p in scenario_warnings(load_scenario()) if p.field == "interactivity_tok_s_per_user"]


# ------------------------------------------------------------------------ bad input, named


def _catalog_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "world"
    shutil.copytree(DATA / "default", folder)
    shutil.copytree(DATA / "catalog", folder / "catalog")
    text = (folder / "scenario.yaml").read_text()
    (folder / "scenario.yaml").write_text(text + "\ncatalog: catalog\n" if "catalog:" not in text else text)
    return folder


def _set_cell(path: Path, row_id: str, field: str, value: str, key: str = "id") -> int:
    rows = read(path)
    for i, r in enumerate(rows):
        if r[key] == row_id:
            r[field] = value
            n = i + 2
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return n


@pytest.mark.parametrize("value,says", [("0", "greater than 0"), ("-5", "greater than 0"), ("5000", "1000"),
                                        ("40", "stricter than every published point"), ("", "no interactivity target")])
def test_a_bad_target_names_file_row_and_field(tmp_path, value, says):
    folder = _catalog_copy(tmp_path)
    row = _set_cell(folder / "catalog" / "workloads.csv", "chat", "interactivity_tok_s_per_user", value)
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder / "scenario.yaml")
    hits = [p for p in info.value.problems if p.field == "interactivity_tok_s_per_user"]
    assert hits, info.value.problems
    assert hits[0].file.endswith("workloads.csv") and hits[0].row == row
    assert says in hits[0].message + hits[0].fix


def test_a_curve_that_rises_with_interactivity_is_refused_at_its_row(tmp_path):
    folder = _catalog_copy(tmp_path)
    path = folder / "catalog" / "throughput.csv"
    rows = read(path)
    i = next(i for i, r in enumerate(rows) if r["chip"] == "b200" and r["workload"] == "chat" and float(r["tok_s_per_user"]) == 25)
    rows[i]["tok_s_per_gpu"] = "20000"  # more than its 12,701.4 at the looser 5 tok/s per user
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ScenarioError) as info:
        load_scenario(folder / "scenario.yaml")
    [problem] = info.value.problems
    assert (problem.file.endswith("throughput.csv"), problem.row, problem.field) == (True, i + 2, "tok_s_per_gpu")


def test_a_target_off_a_chips_curve_is_a_warning_naming_the_row(tmp_path):
    folder = _catalog_copy(tmp_path)
    # 30 tok/s per user on chat_small: inside the 8B curves (10 to 33.3); on chat: beyond the 70B curves' 25
    _set_cell(folder / "catalog" / "workloads.csv", "reasoning", "interactivity_tok_s_per_user", "3")
    scenario = load_scenario(folder / "scenario.yaml")
    warned = [p for p in scenario_warnings(scenario) if p.field == "interactivity_tok_s_per_user"]
    assert {p.row for p in warned} == {4} and all("looser" in p.message for p in warned)
    assert len(warned) == 4  # gb200, b200, h200, h100 clamped to their 5.714 tok/s per user point
    assert tok_s_at_target(scenario.catalog)[("gb200", "reasoning")] == 161.3


# ----------------------------------------------------- a plan at an interpolated target, checked


def _curve_world(tmp_path: Path, target: float, extra: tuple[dict, ...] = ()) -> Path:
    catalog = {**TINY_CATALOG,
               "workloads": [{"id": "chat", "name": "Chat", "load_factor": 0.5, "interactivity_tok_s_per_user": target}],
               "throughput": [{"chip": "server", "workload": "chat", "tok_s_per_user": 5, "tok_s_per_gpu": 80},
                              {"chip": "server", "workload": "chat", "tok_s_per_user": 25, "tok_s_per_gpu": 40}, *extra]}
    return make_scenario(tmp_path / f"t{target:g}", [site("a", 40.0, -75.0)], [region("r", 40.0, -75.0, chat=1000)], catalog=catalog)


def test_a_plan_at_an_interpolated_target_is_sized_on_the_curve_and_checked(tmp_path):
    from dcplace import solve_to_folder

    racks = {}
    for target in (5.0, 15.0):
        # 5 tok/s per user: 80 tok/s per GPU, 1000 / 80 = 12.5 GPUs, one 16-GPU rack; 15: 80 + (40 - 80) x 10 / 20 = 60,
        # 1000 / 60 = 16.7 GPUs, two racks
        plan, report = solve_to_folder(_curve_world(tmp_path, target), tmp_path / f"plan{target:g}")
        assert report.ok, report
        racks[target] = sum(ln.racks for s in plan.sites for ln in s.racks if ln.purpose == "inference")
        recorded = read(tmp_path / f"plan{target:g}" / "inputs" / "catalog" / "throughput.csv")
        assert len(recorded) == 2 and {float(r["tok_s_per_user"]) for r in recorded} == {5.0, 25.0}  # the curve, not one figure
    assert racks == {5.0: 1, 15.0: 2}


def test_a_chip_whose_curve_stops_short_of_the_target_is_not_offered_with_a_warning(tmp_path):
    # the server chip's curve stops at 25 tok/s per user; the trainer has one fixed figure
    path = _curve_world(tmp_path, 30.0, ({"chip": "trainer", "workload": "chat", "tok_s_per_user": "", "tok_s_per_gpu": 100},))
    scenario = load_scenario(path)
    assert dict(tok_s_at_target(scenario.catalog)) == {("trainer", "chat"): 100}
    [warning] = [p for p in scenario_warnings(scenario) if p.field == "interactivity_tok_s_per_user"]
    assert warning.row == 2 and "not offered" in warning.message and "give at most 25" in warning.fix


def test_a_catalog_copied_with_lists_is_read_afresh_not_from_a_stale_cache():
    catalog = load_scenario().catalog
    doubled = catalog.model_copy(update={"throughput": [t.model_copy(update={"tok_s_per_gpu": 2 * t.tok_s_per_gpu})
                                                        for t in catalog.throughput]})  # a list: no hash (benchmarks/robustness.py)
    assert tok_s_at_target(doubled)[("gb200", "reasoning")] == pytest.approx(2 * tok_s_at_target(catalog)[("gb200", "reasoning")])


def test_the_reports_cost_per_token_at_the_target_by_hand(tmp_path):
    from dcplace import solve_to_folder
    from dcplace.reports.economics import chip_economics

    path = _curve_world(tmp_path, 15.0)
    plan, _ = solve_to_folder(path, tmp_path / "plan")
    [row] = chip_economics(plan, load_scenario(path))
    hours = 8760  # economics.hours_per_year's default
    # one server-air rack: 16 GPUs x $2,000 over 5 years at 0 % = $6,400; colocation 4 kW x $100 x 12 = $4,800; in air,
    # energy 4 kW x PUE 1.5 x 8,760 h x load 0.5 / 1000 x $100/MWh = $2,628 and no cooling capex; in liquid, PUE 1.1 and
    # $1,000 per kW over 10 years: $1,927.2 + $400, the cheaper (zone fixed costs are left out of a chip's own cost)
    air = 6400 + 4 * 1.5 * hours * 0.5 / 1000 * 100 + 4 * 100 * 12
    liquid = 6400 + 4 * 1.1 * hours * 0.5 / 1000 * 100 + 4 * 1000 / 10 + 4 * 100 * 12
    rack_usd = min(air, liquid)
    assert rack_usd == liquid
    tokens = 16 * 60 * 1.0 * 0.5 * hours * 3600  # 60 tok/s per GPU at 15 tok/s per user, utilization 1, load factor 0.5
    assert (row.chip, row.tok_s_per_gpu, row.how, row.gpus) == ("server", pytest.approx(60.0), INTERPOLATED, 32)
    assert row.usd_per_m_tokens == pytest.approx(rack_usd / (tokens / 1e6))
