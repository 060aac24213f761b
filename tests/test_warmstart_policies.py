"""The rounded start (optimizer.solvers.warmstart) under plan-wide policies: a carbon cap, a capex
budget, single-purpose sites. The rounding used to give up on these ("let HiGHS search"), and on
the default world with a carbon cap at 60 % of its emissions no plan was found in 60 s.

Two sites beside one town: 'dirty' (cheap power, 800 g/kWh) and 'clean' (dear power, 10 g/kWh).
A server rack serves 16 GPUs x 50 tok/s = 800 tok/s; the town asks 1,200 tok/s: 1.5 racks."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dcplace.models import load_scenario
from dcplace.optimizer import SolveOptions, solve
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.solvers import warmstart
from dcplace.optimizer.solvers.highs_model import to_highs

from helpers import job, make_scenario, region, site


def _world(tmp_path, policies=None, jobs=None, chat=1200):
    sites = [site("dirty", 0, 0, power_price_usd_per_mwh=40, grid_carbon_g_per_kwh=800),
             site("clean", 0, 0.2, power_price_usd_per_mwh=160, grid_carbon_g_per_kwh=10)]
    return load_scenario(make_scenario(tmp_path, sites=sites, regions=[region("town", 0, 0.1, chat=chat)], jobs=jobs,
                                       policies=policies))


def _rack_emissions_t(ix, s: str) -> float:
    return next(e.emissions_t_per_year for key, e in ix.inf_econ.items() if key[0] == s and key[2] == "air")


def _carbon(lm, x) -> float:
    row = next(iter(lm.families["carbon_cap"].rows().values()))
    return float(lm.row_activity(x)[row])


def test_a_rounding_over_the_carbon_cap_is_done_again_with_the_cap_lowered(tmp_path, monkeypatch):
    """Cap = 1.3 air racks' emissions at 'dirty': the LP runs 0.75 air and 0.75 liquid racks there, to
    the cap; rounded, 'dirty' gets 2 air racks, over it. The LP again with the cap lowered by 1.25 x
    the excess opens 'clean' most, and the rounding of that LP meets the cap: a start plan where none
    was made before (the rounding gave up on a carbon cap). The cap's real bound is restored."""
    ix0 = build_index(_world(tmp_path / "free"))
    cap = 1.3 * _rack_emissions_t(ix0, "dirty")
    ix = build_index(_world(tmp_path / "capped", policies={"carbon_cap_t_per_year": cap}))
    lm = build_model(ix)
    rounds = []
    round_once = warmstart._round_once
    monkeypatch.setattr(warmstart, "_round_once", lambda *a: rounds.append(1) or round_once(*a))
    how, plan = warmstart.rounded_lp_start(to_highs(lm), lm, ix, 60.0)
    assert plan is not None and lm.is_feasible(plan), how
    assert len(rounds) == 2  # the first rounding broke the cap, the second met it
    assert _carbon(lm, plan) <= cap * (1 + 1e-9)
    row = next(iter(lm.families["carbon_cap"].rows().values()))
    assert lm.row_bounds()[1][row] == pytest.approx(cap)


def test_over_budgets_names_only_the_plan_wide_rows_a_point_breaks(tmp_path):
    ix0 = build_index(_world(tmp_path / "free"))
    one_rack_t = _rack_emissions_t(ix0, "dirty")
    ix = build_index(_world(tmp_path / "capped", policies={"carbon_cap_t_per_year": one_rack_t, "max_sites": 1}))
    lm = build_model(ix)
    x = np.zeros(lm.n_cols)
    key = next(k for k in ix.inf_econ if k[0] == "dirty" and k[2] == "air")
    x[lm.col("racks_inf", key)] = 3.0
    x[lm.col("open", "dirty")] = x[lm.col("open", "clean")] = 1.0
    over = warmstart._over_budgets(lm, x)
    carbon_row = next(iter(lm.families["carbon_cap"].rows().values()))
    sites_row = next(iter(lm.families["max_sites"].rows().values()))
    assert over == {carbon_row: pytest.approx(2 * one_rack_t), sites_row: pytest.approx(1.0)}
    x[lm.col("open", "clean")] = 0.0
    x[lm.col("racks_inf", key)] = 1.0
    assert warmstart._over_budgets(lm, x) == {}


@pytest.mark.parametrize("share", [0.8, 0.5])
def test_solves_with_and_without_the_warm_start_agree_under_a_carbon_cap(tmp_path, share):
    """The start changes how the optimum is found, never which: at gap 0 the solve with the rounded
    start and the solve by HiGHS alone give the same cost, and the plan keeps the cap."""
    free = solve(_world(tmp_path / "free", chat=3000), SolveOptions(mip_gap=0.0, race=False))
    cap = share * free.kpis["emissions_t_per_year"]
    scenario = _world(tmp_path / "capped", policies={"carbon_cap_t_per_year": cap}, chat=3000)
    with_start = solve(scenario, SolveOptions(mip_gap=0.0, race=False))
    alone = solve(scenario, SolveOptions(mip_gap=0.0, race=False, warm_start=False))
    assert with_start.objective_usd_per_year == pytest.approx(alone.objective_usd_per_year, rel=1e-6)
    assert with_start.kpis["emissions_t_per_year"] <= cap * (1 + 1e-9)
    assert with_start.objective_usd_per_year > free.objective_usd_per_year


def test_single_purpose_sites_get_a_start_with_one_role_each(tmp_path):
    """A 48-GPU job and 1,200 tok/s of chat, single-purpose sites: the LP puts both at 'dirty' in part;
    the rounding's LP holds each site to the role the LP gives it more of, so the start never has a
    site with both (before, the rounding gave up on the policy)."""
    ix = build_index(_world(tmp_path, policies={"single_purpose_sites": True}, jobs=[job("train", 48)]))
    lm = build_model(ix)
    how, plan = warmstart.rounded_lp_start(to_highs(lm), lm, ix, 60.0, mip_gap=0.0)
    assert plan is not None and lm.is_feasible(plan), how
    hosts = {role: {s for s in lm.blocks[role].keys if plan[lm.col(role, s)] > 0.5} for role in ("hosts_inf", "hosts_trn")}
    assert hosts["hosts_inf"] and hosts["hosts_trn"] and hosts["hosts_inf"].isdisjoint(hosts["hosts_trn"])
    alone = solve(_world(tmp_path / "again", policies={"single_purpose_sites": True}, jobs=[job("train", 48)]),
                  SolveOptions(mip_gap=0.0, race=False, warm_start=False))
    assert float(lm.objective() @ plan) >= alone.objective_usd_per_year * (1 - 1e-9)
