"""dcplace compare tells the story: per-site deltas, real spend apart from notional charges,
members without a plan listed with their cause and override, headers with units, and no
money figure cut at 80 columns."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from helpers import make_scenario, region, site
from rich.console import Console
from typer.testing import CliRunner

import dcplace.cli as cli
from dcplace.cli import app
from dcplace.models.plan import read_plan
from dcplace.reports.compare import build_comparison, collect_plans

runner = CliRunner()

SWEEP = """name: story
base: s/scenario.yaml
options: {time_limit_s: 60, mip_gap: 0}
scenarios:
  baseline: {}
  carbon-100: {economics.carbon_price_usd_per_t: 100}
  tiny-cap: {policies.carbon_cap_t_per_year: 1}
  broken: {"sites[dirty].power_price_usd_per_mwh": "*-1"}
"""


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """A cheap dirty site that cannot hold all demand, a dearer clean one, a spare: the baseline
    splits the load between dirty and clean; a $100/t carbon price moves it all to clean.
    One member is infeasible (a 1 t carbon cap), one has bad input (a negative price)."""
    root = tmp_path_factory.mktemp("story")
    big = {"power_limit_kw": 20000, "floor_racks": 5000}
    sites = [site("dirty", 40.0, -74.0, power_price_usd_per_mwh=40, grid_carbon_g_per_kwh=800, name="Dirtyville", **{**big, "power_limit_kw": 6000}),
             site("clean", 40.2, -74.2, power_price_usd_per_mwh=60, grid_carbon_g_per_kwh=20, name="Cleanford", **big),
             site("spare", 40.1, -74.3, power_price_usd_per_mwh=70, grid_carbon_g_per_kwh=400, name="Sparetown", **big)]
    regions = [region("r1", 40.1, -74.1, chat=1_600_000, budget=60), region("r2", 40.3, -74.0, chat=800_000, budget=60)]
    make_scenario(root / "s", sites, regions)
    (root / "sweep.yaml").write_text(SWEEP)
    batch = runner.invoke(app, ["batch", str(root / "sweep.yaml"), "--out", str(root / "runs")])
    assert batch.exit_code == 5, batch.output  # the bad-input member is a failure
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "80")
        mp.setattr(cli, "console", Console(width=80, force_terminal=False, color_system=None))
        result = runner.invoke(app, ["compare", str(root / "runs"), "--baseline", "baseline", "--out", str(root / "cmp")])
    assert result.exit_code == 0, result.output
    return root, result.output


def test_per_site_deltas_are_the_plans_megawatts_largest_move_first(story):
    root, output = story
    base, plan = read_plan(root / "runs" / "baseline"), read_plan(root / "runs" / "carbon-100")
    before = {s.id: s for s in base.sites}
    after = {s.id: s for s in plan.sites}
    assert [s.id for s in base.sites if s.open] == ["dirty", "clean"] and [s.id for s in plan.sites if s.open] == ["clean"]
    sites = pd.read_csv(root / "cmp" / "compare_sites.csv")
    rows = sites[sites["plan"] == "carbon-100"].set_index("site id")
    assert set(rows.index) == {"dirty", "clean"}  # every site open in any plan; the spare stays out
    for sid in ("dirty", "clean"):  # written to what they mean: MW to 1 kW, $M to $10 k (issue 49)
        assert rows.loc[sid, "IT MW, baseline"] == pytest.approx(before[sid].it_kw / 1e3, abs=5e-4)
        assert rows.loc[sid, "IT MW, plan"] == pytest.approx(after[sid].it_kw / 1e3, abs=5e-4)
        assert rows.loc[sid, "IT MW, change"] == pytest.approx((after[sid].it_kw - before[sid].it_kw) / 1e3, abs=5e-4)
        assert rows.loc[sid, "facility MW, change"] == pytest.approx((after[sid].facility_kw - before[sid].facility_kw) / 1e3, abs=5e-4)
        assert rows.loc[sid, "racks, change"] == after[sid].racks_total - before[sid].racks_total
        assert rows.loc[sid, "cost change, $M/yr"] == pytest.approx((after[sid].total_cost_usd_per_year - before[sid].total_cost_usd_per_year) / 1e6, abs=5e-3)
    assert rows.loc["dirty", "role, baseline"] == "inference" and rows.loc["dirty", "role, plan"] == "closed"
    changes = sites[sites["plan"] == "carbon-100"]["IT MW, change"].abs().tolist()
    assert changes == sorted(changes, reverse=True)
    # The terminal names the movers as "Dirtyville 5.5 -> 0.0 MW (-5.5, closed)".
    d = before["dirty"].it_kw / 1e3
    assert f"Dirtyville {d:,.1f} -> 0.0 MW ({-d:+,.1f}, closed)" in " ".join(output.split())
    c0, c1 = before["clean"].it_kw / 1e3, after["clean"].it_kw / 1e3
    assert f"Cleanford {c0:,.1f} -> {c1:,.1f} MW ({c1 - c0:+,.1f})" in " ".join(output.split())


def test_real_spend_is_separated_from_the_notional_carbon_charge(story):
    root, output = story
    base, plan = read_plan(root / "runs" / "baseline"), read_plan(root / "runs" / "carbon-100")
    carbon = plan.cost_breakdown_usd_per_year["carbon"]
    assert carbon > 0 and base.cost_breakdown_usd_per_year["carbon"] == 0
    total = plan.objective_usd_per_year - base.objective_usd_per_year
    row = pd.read_csv(root / "cmp" / "compare.csv").set_index("plan").loc["carbon-100"]
    # the CSV is written to what its figures mean: $M to $10 k, % to 0.01 (issue 49)
    assert row["cost change, $M/yr"] == pytest.approx(total / 1e6, abs=5e-3)
    assert row["notional charges change, $M/yr"] == pytest.approx(carbon / 1e6, abs=5e-3)
    assert row["real spend change, $M/yr"] == pytest.approx((total - carbon) / 1e6, abs=5e-3)
    assert row["emissions change, %"] == pytest.approx(100 * (plan.kpis["emissions_t_per_year"] / base.kpis["emissions_t_per_year"] - 1), abs=5e-3)
    costs = pd.read_csv(root / "cmp" / "compare_costs.csv")
    notional = costs[(costs["plan"] == "carbon-100") & costs["notional"]]
    assert list(notional["cost category"]) == ["carbon"] and notional["change, $M/yr"].iloc[0] == pytest.approx(carbon / 1e6, abs=5e-3)
    real = costs[(costs["plan"] == "carbon-100") & ~costs["notional"]]
    assert real["change, $M/yr"].sum() == pytest.approx((total - carbon) / 1e6, abs=5e-3 * len(real))
    # The sentence: total = real + notional, each a money figure.
    from dcplace.reports.compare import signed_money
    from dcplace.reports.style import money

    sentence = f"{signed_money(total)}/yr"
    flat = " ".join(output.split())
    assert sentence in flat and f"{signed_money(total - carbon)} real spend + {money(carbon)} notional (carbon)" in flat
    page = (root / "cmp" / "compare.html").read_text()
    assert "real spend" in page and "carbon (notional)" in page  # the sentence and the cost-by-category table
    assert page.count("data:image/png") == 1  # the difference map
    assert page.count("data:image/svg+xml") == 4  # cost by category, two trade-offs, the waterfall


def test_members_without_a_plan_are_answers_with_cause_and_override(story):
    root, output = story
    table = pd.read_csv(root / "cmp" / "compare.csv").set_index("plan")
    assert list(table.index) == ["baseline", "carbon-100", "tiny-cap", "broken"]  # none dropped, batch order
    members = {m["name"]: m for m in json.loads((root / "runs" / "batch.json").read_text())["members"]}
    assert table.loc["tiny-cap", "status"] == "infeasible"
    assert "carbon cap 1 t CO2/yr is exceeded" in table.loc["tiny-cap", "cause (diagnosis or error)"]
    assert table.loc["tiny-cap", "overrides"] == "policies.carbon_cap_t_per_year: 1"
    assert table.loc["broken", "status"] == "bad_input"
    assert table.loc["broken", "cause (diagnosis or error)"] == members["broken"]["message"]
    assert table.loc["broken", "overrides"] == "sites[dirty].power_price_usd_per_mwh: *-1"
    flat = " ".join(output.split())
    assert "2 without a plan" in flat
    assert "tiny-cap (infeasible) carbon cap 1 t CO2/yr is exceeded" in flat
    assert "(overrides: policies.carbon_cap_t_per_year: 1)" in flat
    assert "broken (bad_input)" in flat and "(overrides: sites[dirty].power_price_usd_per_mwh: *-1)" in flat
    page = (root / "cmp" / "compare.html").read_text()
    failed = page[page.index('<table id="failed">'):page.index("</table>", page.index('<table id="failed">'))]
    assert "tiny-cap" in failed and "carbon cap 1 t CO2/yr is exceeded" in failed and "policies.carbon_cap_t_per_year: 1" in failed
    assert "broken" in failed and "bad_input" in failed
    # The library keeps them too.
    comparison = build_comparison(collect_plans([root / "runs"]), "baseline")
    assert list(comparison.failed["plan"]) == ["tiny-cap", "broken"]


def test_headers_are_words_with_units(story):
    root, _ = story
    header = pd.read_csv(root / "cmp" / "compare.csv").columns
    for name in ("cost, $M/yr", "cost change, $M/yr", "cost change, %", "real spend change, $M/yr", "notional charges change, $M/yr",
                 "emissions, kt CO2/yr", "inference IT, MW", "mean RTT, ms", "upfront capex, $M"):
        assert name in header
    assert not [c for c in header if "_" in c]  # no field names
    assert not [c for c in pd.read_csv(root / "cmp" / "compare_sites.csv").columns if "_" in c]
    page = (root / "cmp" / "compare.html").read_text()
    for name in ("cost change, $M/yr", "IT MW, change", "racks, change", "emissions change, %"):
        assert f">{name}<" in page
    assert "musd" not in page.split("<body>")[1]


def test_no_money_figure_is_cut_at_80_columns(story):
    root, output = story
    assert max(len(line) for line in output.splitlines()) <= 80
    assert not re.search(r"\d…|…\d|\$…", output)
    table = pd.read_csv(root / "cmp" / "compare.csv").set_index("plan")
    for plan in ("baseline", "carbon-100"):  # every plan's full cost figure is on screen
        assert f"{table.loc[plan, 'cost, $M/yr']:,.2f}" in output
    assert f"{table.loc['carbon-100', 'real spend change, $M/yr']:+,.2f}" in output


# ----------------------------------------------------------------------------- compare explains (issue 49)


@pytest.fixture(scope="module")
def n1_pair(tmp_path_factory):
    """Three sites around a town with a training job: the baseline as the file has it, and
    the same file solved with --set's overrides (chat must survive a site loss)."""
    from helpers import job

    from dcplace.models.scenario_file import load_scenario
    from dcplace.optimizer.solving.pipeline import solve_to_folder

    root = tmp_path_factory.mktemp("n1pair")
    path = make_scenario(root / "s", [site("a", 0, 0, name="Alpha"), site("b", 0, 0.2, name="Bravo"), site("c", 0.2, 0, name="Charlie")],
                         [region("town", 0.1, 0.1, chat=4800, budget=50)], jobs=[job("big", 96)], name="towns")
    solve_to_folder(load_scenario(path), root / "base")
    solve_to_folder(load_scenario(path, overrides={"policies.survive_site_loss": {"chat": 1}}, overrides_origin="--set"), root / "n1")
    result = runner.invoke(app, ["compare", str(root / "base"), str(root / "n1"), "--baseline", "base", "--out", str(root / "cmp")])
    assert result.exit_code == 0, result.output
    return root


def test_compare_names_the_changed_inputs_of_a_set_run(n1_pair):
    table = pd.read_csv(n1_pair / "cmp" / "compare.csv").set_index("plan")
    assert table.loc["n1", "overrides"] == 'policies.survive_site_loss: {"chat": 1}'
    assert "policies.survive_site_loss.chat none -> 1" in table.loc["n1", "inputs changed against the baseline"]
    page = (n1_pair / "cmp" / "compare.html").read_text()
    assert "Inputs changed: policies.survive_site_loss.chat none -&gt; 1" in page


def test_compare_says_what_n1_buys(n1_pair):
    table = pd.read_csv(n1_pair / "cmp" / "compare.csv").set_index("plan")
    row = table.loc["n1"]
    assert row["classes protected against a site loss"] == "Chat 100%"
    assert "unserved" in row["worst single-site loss, baseline"]  # one site: its loss leaves the town unserved
    assert row["worst single-site loss, plan"] == "no single-site loss leaves demand unserved"
    assert " -> " in row["training job-days at risk, worst loss"]
    assert "What resilience buys: worst single-site loss" in (n1_pair / "cmp" / "compare.html").read_text()


def test_compare_bands_each_delta_by_the_solver_gap():
    from types import SimpleNamespace

    from dcplace.reports.compare import _gap_usd, _signed, story

    plan = SimpleNamespace(objective_usd_per_year=100e6, solve=SimpleNamespace(best_bound_usd_per_year=99e6))
    assert _gap_usd(plan) == pytest.approx(1e6)
    row = {"baseline": False, "cost_change_musd_per_year": 0.5, "real_change_musd_per_year": 0.5, "notional_change_musd_per_year": 0.0,
           "cost_change_share": 0.005, "emissions_change_share": float("nan"), "within_gap": True, "gap_band_musd": 1.0,
           "status": "optimal", "cause": ""}
    assert "within the solver's uncertainty (± $1.00 M" in story(row)
    assert _signed(-0.04, 1) == "0.0" and _signed(0.26, 1) == "+0.3" and _signed(-1.26, 1) == "-1.3"


def test_compare_csv_has_no_float_noise(story):
    root, _ = story
    text = (root / "cmp" / "compare.csv").read_text() + (root / "cmp" / "compare_sites.csv").read_text()
    assert not re.search(r"\d\.\d{9,}", text), re.search(r"[^,]*\d\.\d{9,}[^,]*", text).group(0)
    assert not re.search(r"(^|,)-0\.0(,|$)", text, re.M)


def test_difference_map_labels_and_chart_legends_never_overlap(story):
    """Issue 49: labels piled up on the difference map ('Mumbai +1.3 MW MW') and the cost chart's
    legend was drawn over a bar. Sites 20 km apart here: their labels must not overlap."""
    import matplotlib.pyplot as plt

    from dcplace.reports.compare import build_comparison, difference_map_figure, _cost_figure

    root, _ = story
    comparison = build_comparison(collect_plans([root / "runs"]), "baseline")
    base = next(p for p in comparison.plans if p.label == "baseline")
    plan = next(p for p in comparison.plans if p.label == "carbon-100")
    rows = comparison.sites[comparison.sites["plan"] == "carbon-100"]
    fig = difference_map_figure(base.plan, plan.plan, "t", rows)
    try:
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        labels = [t.get_window_extent(renderer) for t in ax.texts if "MW" in t.get_text()]
        assert len(labels) == int((rows["it_mw_change"].abs() >= 0.05).sum())
        legend = ax.get_legend().get_window_extent(renderer)
        boxes = labels + [legend]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    finally:
        plt.close(fig)
    fig = _cost_figure(comparison.plans)
    try:
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        legend = ax.get_legend().get_window_extent(renderer)
        assert not any(legend.overlaps(bar.get_window_extent(renderer)) for bar in ax.patches)
    finally:
        plt.close(fig)


def test_compare_says_what_the_solver_proved_not_a_bare_optimal(story):
    root, output = story
    table = pd.read_csv(root / "cmp" / "compare.csv").set_index("plan")
    assert table.loc["baseline", "what the solver proved"] == "proven optimal"  # mip_gap 0 in the sweep
    page = (root / "cmp" / "compare.html").read_text()
    assert "<td class=\"text\">proven optimal</td>" in page and "<td class=\"text\">optimal</td>" not in page


def test_inputs_changed_names_the_table_cells_a_member_changed(tmp_path):
    """A member whose override changes one site's price: compare names that cell, so the reader
    sees why that site moved (issue 49)."""
    from helpers import make_scenario, region, site

    from dcplace.models.scenario_file import load_scenario
    from dcplace.optimizer.solving.pipeline import solve_to_folder
    from dcplace.reports.compare import NamedPlan, inputs_changed

    path = make_scenario(tmp_path / "s", [site("a", 40, -74), site("b", 40.2, -74.2)], [region("r", 40.1, -74.1, chat=1600)])
    solve_to_folder(load_scenario(path), tmp_path / "base")
    solve_to_folder(load_scenario(path, overrides={"sites[a].power_price_usd_per_mwh": 500}, overrides_origin="--set"), tmp_path / "dear")
    base, dear = (NamedPlan(n, tmp_path / n, read_plan(tmp_path / n)) for n in ("base", "dear"))
    assert inputs_changed(base, dear) == "sites[a].power_price_usd_per_mwh 100.0 -> 500.0"


def test_the_terminal_says_which_inputs_changed_and_what_n1_buys(n1_pair):
    result = runner.invoke(app, ["compare", str(n1_pair / "base"), str(n1_pair / "n1"), "--baseline", "base", "--out", str(n1_pair / "cmp2")])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "inputs: policies.survive_site_loss.chat none -> 1" in flat
    assert "N-1 buys: worst loss" in flat and "protected: Chat 100%" in flat
