"""The independent checker cannot be talked out of checking (issue 50, item 11).

A corruption suite over three small solved plan folders (the tamper world of
test_checker_tamper.py, a clock plan with troughs lent to training and a cloud region, an N-1
plan): each corruption edits plan.json or inputs/, writes the flat CSV views again from the
edited plan.json and seals the manifest again (a tamperer who read docs/plan-format.md), so
that only the checker's constraint and figure checks can catch it; each must be caught by the
family it names. Then one test per way the issue found to pass the old checker: a plan-less
status on a plan, inputs dcplace validate refuses, profiles with a missing hour or a peak below
1, the N-1 record, hourly[].
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import TINY_CATALOG, job, make_scenario, region, site
from dcplace.models.plan import write_manifest
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.solving.pipeline import solve_to_folder

OPTIONS = SolveOptions(mip_gap=0.0, time_limit_s=60)
TRAINER_ONLY = {**TINY_CATALOG, "throughput": [{"chip": "trainer", "workload": "chat", "tok_s_per_gpu": 100}]}


def plain_world(folder, catalog=None):
    return make_scenario(folder, sites=[site("a", 0, 0, cooling_allowed="air;liquid"), site("b", 0, 1, power_price_usd_per_mwh=30)],
                         regions=[region("town", 0, 0.2, chat=2000, budget=5), region("city", 0, 1.1, chat=900, budget=5)],
                         jobs=[job("pretrain", 96), job("tune", 20)], catalog=catalog)


FAST = {**TINY_CATALOG, "throughput": [{**row, "tok_s_per_gpu": row["tok_s_per_gpu"] * 1.5} for row in TINY_CATALOG["throughput"]]}


def fast_world(folder):
    """The plain world with every GPU 1.5 times as fast: the plan a utilization of 1.5 would give the plain
    world, every figure of it derived by dcplace itself (utilization enters nothing but capacity)."""
    return plain_world(folder, FAST)


def clock_world(folder, scale: float = 1.0):
    """Chat twelve local hours a day in 'town' (one trainer-dense rack serves it and lends its GPUs to an
    interruptible job at night) and a little in 'far', five hours ahead, which a cloud region serves."""
    profile = [{"workload": "chat", "local_hour": h, "load": 1.0 if 8 <= h < 20 else (0.05 if h in (7, 20) else 0.0), "region": ""}
               for h in range(24)]
    clouds = [{"id": "cloud", "name": "Cloud", "provider": "x", "lat": 0, "lon": 0.05, "country": "US", "chip": "trainer",
               "usd_per_gpu_hour_on_demand": 2.0, "usd_per_gpu_hour_reserved": 3.0, "cap_gpus": "", "fabric_tier": 0}]
    regions = [region("town", 0, 0.1, chat=4800 * scale, utc_offset_h=0), region("far", 0, -0.1, chat=300 * scale, utc_offset_h=5)]
    return make_scenario(folder, sites=[site("hub", 0, 0), site("alt", 0, 0.2)], regions=regions,
                         jobs=[job("tune", 30, interruptible=True, gpu_hours_per_day=300)], catalog=TRAINER_ONLY,
                         tables={"profiles": profile, "cloud_regions": clouds}, sections={"clock": {"hours": 24}})


def cloud_world(folder):
    """Cloud regions without the clock: the day is one block, a reserved rental serves both towns."""
    clouds = [{"id": "cloud", "name": "Cloud", "provider": "x", "lat": 0, "lon": 0.05, "country": "US", "chip": "server",
               "usd_per_gpu_hour_on_demand": 0.1, "usd_per_gpu_hour_reserved": 0.05, "cap_gpus": "", "fabric_tier": 0}]
    return make_scenario(folder, sites=[site("hub", 0, 0)], regions=[region("town", 0, 0.1, chat=800), region("b", 0, 0.2, chat=300)],
                         tables={"cloud_regions": clouds})


def half_clock_world(folder):
    """The clock world at half its peak demand: the hourly loads a profile peaking at 0.5 gives the clock world."""
    return clock_world(folder, 0.5)


def n1_world(folder):
    """One town, three sites in reach: each open site holds half the demand (test_resilience.py)."""
    return make_scenario(folder, sites=[site("a", 0, 0), site("b", 0, 0.2), site("c", 0.2, 0)],
                         regions=[region("town", 0.1, 0.1, chat=4800, budget=50)], policies={"survive_site_loss": {"chat": 1.0}})


WORLDS = {"plain": plain_world, "clock": clock_world, "n1": n1_world, "fast": fast_world, "half-clock": half_clock_world,
          "cloud": cloud_world}


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    root = tmp_path_factory.mktemp("corruptions")
    for name, world in WORLDS.items():
        _, report = solve_to_folder(world(root / f"{name}-in"), root / name, OPTIONS)
        assert report.ok, report.violations
    return root


def copy_of(solved, tmp_path, world):
    target = tmp_path / world
    shutil.copytree(solved / world, target)
    return target


# ------------------------------------------------------------------ what a tamperer does


def edit_plan(folder, change):
    data = json.loads((folder / "plan.json").read_text())
    change(data)
    (folder / "plan.json").write_text(json.dumps(data, indent=2))


def edit_input(folder, name, change):
    path = folder / "inputs" / name
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    result = change(frame)
    frame = frame if result is None else result
    frame.to_csv(path, index=False)


def edit_yaml(folder, change):
    path = folder / "inputs" / "scenario.yaml"
    spec = yaml.safe_load(path.read_text())
    change(spec)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def write_views(folder):
    """sites.csv, assignments.csv, jobs.csv and the clock's CSVs written again from plan.json, as
    docs/plan-format.md describes them: the views agree with the edited plan."""
    plan = json.loads((folder / "plan.json").read_text())
    sites = plan["sites"]
    served = sorted({w for s in sites for w in s["served_tok_s"]})
    categories = sorted({c for s in sites for c in s["cost_usd_per_year"]})
    rows = []
    for s in sites:
        row = {"id": s["id"], "name": s["name"], "lat": s["lat"], "lon": s["lon"], "country": s["country"], "open": s["open"],
               "role": s["role"], "zones": ";".join(s["zones"]), "fabrics": ";".join(s["fabrics"]), "racks": s["racks_total"],
               "gpus": s["gpus"], "it_kw": s["it_kw"], "facility_kw": s["facility_kw"], "power_limit_kw": s["power_limit_kw"],
               "floor_racks": s["floor_racks"], "emissions_t_per_year": s["emissions_t_per_year"],
               "upfront_capex_usd": s["upfront_capex_usd"], "total_cost_usd_per_year": s["total_cost_usd_per_year"]}
        row.update({f"served_{w}_tok_s": s["served_tok_s"].get(w) for w in served})
        row.update({f"cost_{c}_usd_per_year": s["cost_usd_per_year"].get(c) for c in categories})
        if any(x.get("tenure") is not None for x in sites):
            row.update({"tenure": s.get("tenure") or "", "built_kw": s.get("built_kw")})
        rows.append(row)
    pd.DataFrame(rows).to_csv(folder / "sites.csv", index=False)
    fields = ["region", "region_name", "workload", "site", "share", "served_tok_s", "rtt_ms", "rtt_budget_ms"]
    pd.DataFrame(plan["assignments"], columns=fields).to_csv(folder / "assignments.csv", index=False)
    fields = ["job", "name", "site", "fabric", "chip", "gpus_h100_equiv", "standby_site", "standby_fabric", "standby_chip"]
    pd.DataFrame(plan["jobs"], columns=fields).to_csv(folder / "jobs.csv", index=False)
    if plan.get("clock"):
        for name in ("hourly", "dispatch", "backfill", "rentals", "rent_assignments"):
            rows = plan.get(name) or []
            columns = list(rows[0]) if rows else list(pd.read_csv(folder / f"{name}.csv", nrows=0).columns)
            pd.DataFrame(rows, columns=columns).to_csv(folder / f"{name}.csv", index=False)


def reseal(folder):
    write_manifest(folder, json.loads((folder / "plan.json").read_text())["scenario_hash"])


def tamper(folder, corruption):
    corruption(folder)
    write_views(folder)
    reseal(folder)
    return check_plan_folder(folder)


# ------------------------------------------------------------------ the corruptions


def plan_edit(change):
    return lambda folder: edit_plan(folder, change)


def input_edit(name, column, value, row=0):
    """Cell (row, column) of inputs/`name` set to `value`; row None: the whole column."""
    def change(frame):
        if row is None:
            frame[column] = value
        else:
            frame.loc[row, column] = value
        return frame

    return lambda folder: edit_input(folder, name, change)


def yaml_edit(section, key, value):
    return lambda folder: edit_yaml(folder, lambda spec: spec[section].__setitem__(key, value))


def lines(data, purpose):
    return [ln for s in data["sites"] for ln in s["racks"] if ln["purpose"] == purpose]


def halve_line(data, purpose="inference"):
    """Half the racks of the first line of `purpose` (its GPUs and IT kW with them); a line of one rack goes."""
    ln = lines(data, purpose)[0]
    racks = ln["racks"] // 2
    if racks == 0:
        for s in data["sites"]:
            s["racks"] = [x for x in s["racks"] if x is not ln]
        return
    ln.update(gpus=ln["gpus"] // ln["racks"] * racks, it_kw=ln["it_kw"] / ln["racks"] * racks, racks=racks)


def halve_inference_lines(data):
    for s in data["sites"]:
        keep = []
        for ln in s["racks"]:
            if ln["purpose"] == "inference":
                ln["racks"] //= 2
                if ln["racks"] == 0:
                    continue
            keep.append(ln)
        s["racks"] = keep


def with_status(status, also=halve_line):
    def change(data):
        also(data)
        data["solve"]["status"] = status

    return plan_edit(change)


def status_feasible_without_sites(data):
    data["sites"], data["assignments"], data["jobs"] = [], [], []
    data["solve"]["status"] = "feasible"


def util_and_halved_lines(folder):
    edit_yaml(folder, lambda spec: spec["economics"].__setitem__("inference_target_utilization", 1.5))
    edit_plan(folder, halve_inference_lines)


def shift_costs(data, new_costs):
    """What a tamperer who read docs/plan-format.md does after editing an input that prices rack lines:
    every line's cost categories set to `new_costs(line)` and each figure that sums them (site, breakdown,
    objective, the solver's objective, the cost KPIs, the bound at the same gap) derived again."""
    delta_total = 0.0
    for s in data["sites"]:
        for ln in s["racks"]:
            for cat, value in new_costs(ln).items():
                delta = value - ln["cost_usd_per_year"].get(cat, 0.0)
                ln["cost_usd_per_year"][cat] = value
                s["cost_usd_per_year"][cat] = s["cost_usd_per_year"].get(cat, 0.0) + delta
                s["total_cost_usd_per_year"] += delta
                data["cost_breakdown_usd_per_year"][cat] += delta
                data["kpis"][f"{ln['purpose']}_cost_usd_per_year"] += delta
                delta_total += delta
    solve, kpis = data["solve"], data["kpis"]
    data["objective_usd_per_year"] += delta_total
    solve["objective_usd_per_year"] += delta_total
    kpis["total_cost_usd_per_year"] += delta_total
    kpis["usd_per_m_tokens"] = kpis["inference_cost_usd_per_year"] / (kpis["tokens_per_year"] / 1e6)
    objective = solve["objective_usd_per_year"]
    solve["best_bound_usd_per_year"] = objective - solve["gap"] * abs(objective)
    solve["gap"] = abs(objective - solve["best_bound_usd_per_year"]) / max(abs(objective), 1e-9)


def annuity(rate, years):
    return 1 / years if rate == 0 else rate / (1 - (1 + rate) ** -years)


def negative_colocation(folder):
    """-50 $/kW-month at every site, every colocation figure derived again (the issue's first input)."""
    edit_input(folder, "sites.csv", lambda f: f.__setitem__("colocation_usd_per_kw_month", "-50"))
    edit_plan(folder, lambda d: shift_costs(d, lambda ln: {"colocation": ln["it_kw"] * -50 * 12}))


def negative_discount_rate(folder):
    """discount_rate -0.5 and every annuitized figure derived again (tiny catalog: chips and fabric 5 years,
    cooling 10; the world's rate is 0)."""
    edit_yaml(folder, lambda spec: spec["economics"].__setitem__("discount_rate", -0.5))

    def again(ln):
        cost = ln["cost_usd_per_year"]
        return {"chips": cost["chips"] * annuity(-0.5, 5) / annuity(0, 5), "fabric": cost["fabric"] * annuity(-0.5, 5) / annuity(0, 5),
                "cooling_capex": cost["cooling_capex"] * annuity(-0.5, 10) / annuity(0, 10)}

    edit_plan(folder, lambda d: shift_costs(d, again))


def utilization_over_one(folder):
    """The issue's headline: inference_target_utilization 1.5 over a plan with two thirds of the GPUs the
    plain world needs (the fast world's, every figure dcplace's own), the catalog's throughput as it was."""
    edit_yaml(folder, lambda spec: spec["economics"].__setitem__("inference_target_utilization", 1.5))
    edit_input(folder, "catalog/throughput.csv", lambda f: f.__setitem__("tok_s_per_gpu", [str(float(v) / 1.5) for v in f["tok_s_per_gpu"]]))


def profile_peaking_at_half(folder):
    """The clock world's profile at half its loads over the half-demand world's plan with the full demand in
    inputs/: every hourly load is the same, the peak figures (share x demand) derived again."""
    edit_input(folder, "regions.csv", lambda f: f.__setitem__("demand_chat_tok_s", [str(float(v) * 2) for v in f["demand_chat_tok_s"]]))
    halve_profile(folder)

    def again(data):
        for a in data["assignments"] + data["rent_assignments"]:
            a["served_tok_s"] *= 2
        for s in data["sites"]:
            s["served_tok_s"] = {w: v * 2 for w, v in s["served_tok_s"].items()}
        data["kpis"]["tokens_per_s_served_peak"] *= 2
        data["clock"]["load_share"] = {key: [v / 2 for v in values] for key, values in data["clock"]["load_share"].items()}

    edit_plan(folder, again)


def duplicate_site_row(folder):
    edit_input(folder, "sites.csv", lambda f: pd.concat([f, f.iloc[[0]]], ignore_index=True))


def drop_profile_hour(folder):
    edit_input(folder, "profiles.csv", lambda f: f[f["local_hour"] != "3"].reset_index(drop=True))


def halve_profile(folder):
    def change(frame):
        frame["load"] = [str(float(v) / 2) for v in frame["load"]]
        return frame

    edit_input(folder, "profiles.csv", change)


def repeat_profile_hour(folder):
    edit_input(folder, "profiles.csv", lambda f: pd.concat([f, f.iloc[[5]]], ignore_index=True))


def failover(change):
    return plan_edit(lambda data: change(data["solve"]["failover"]))


def drop_policy(folder):
    edit_yaml(folder, lambda spec: spec["policies"].__setitem__("survive_site_loss", {}))


def hourly(change):
    def edit(data):
        change(data["hourly"])

    return plan_edit(edit)


def drop_site_rows(rows):
    place = next(ln["place"] for ln in rows if ln["kind"] == "owned")
    rows[:] = [ln for ln in rows if ln["place"] != place]


def halve_serving(rows):
    for ln in rows:
        ln["serving_gpus"] *= 0.5


def lend_without_backfill(rows):
    ln = next(ln for ln in rows if ln["kind"] == "owned" and ln["lent_gpus"] == 0)
    ln["lent_gpus"] = 10.0


def to_cloud(rows):
    ln = next(ln for ln in rows if ln["kind"] == "owned" and ln["load_tok_s"] > 0)
    ln["kind"] = "cloud"
    ln["load_tok_s"] *= 3


def double_capacity(rows):
    for ln in rows:
        if ln["kind"] == "owned":
            ln["capacity_tok_s"] *= 2


def duplicate_row(rows):
    rows.append(dict(rows[0]))


def halve_rented_load(rows):
    for ln in rows:
        if ln["kind"] == "rented":
            ln["load_tok_s"] *= 0.5


def reweigh_row(rows):
    rows[0]["weight_h"] = 2.0


def row_at_hour_25(rows):
    rows.append({**rows[0], "hour_utc": 25})


def empty_rows(rows):
    rows.clear()


def clock_record(key, value):
    return plan_edit(lambda data: data["clock"].__setitem__(key, value))


def load_share_edit(data):
    key = next(iter(data["clock"]["load_share"]))
    data["clock"]["load_share"][key][12] = 0.5


def first(name, **values):
    return plan_edit(lambda data: data[name][0].update(values))


def extra_field(where, key="note_usd"):
    def change(data):
        record = where(data)
        record[key] = 1.0

    return plan_edit(change)


def halve_share(data):
    data["assignments"][0]["share"] *= 0.5
    data["assignments"][0]["served_tok_s"] *= 0.5


def zero_cost_category(data):
    data["sites"][0]["cost_usd_per_year"]["discount"] = 0.0


def halve_rentals(data):
    for ln in data["rentals"]:
        ln["gpus"] *= 0.5


CORRUPTIONS = {
    # name: (world, corruption, the family that must name it)
    # a status that claims no plan, or an unknown one, on a plan with a capacity breach
    "status infeasible, an inference line halved": ("plain", with_status("infeasible"), "status"),
    "status infeasible: the breach is still found": ("plain", with_status("infeasible"), "inference_capacity"),
    "status 'Optimal', an inference line halved": ("plain", with_status("Optimal"), "status"),
    "status 'time_limit', an inference line halved": ("plain", with_status("time_limit"), "status"),
    "status unbounded on a plan": ("plain", with_status("unbounded", also=lambda d: None), "status"),
    "status no_solution on a plan": ("plain", with_status("no_solution", also=lambda d: None), "status"),
    "status feasible with no sites": ("plain", plan_edit(status_feasible_without_sites), "status"),
    # inputs dcplace validate refuses
    "negative colocation": ("plain", input_edit("sites.csv", "colocation_usd_per_kw_month", "-50"), "inputs"),
    "negative colocation, every figure derived again": ("plain", negative_colocation, "inputs"),
    "discount_rate -0.5": ("plain", yaml_edit("economics", "discount_rate", -0.5), "inputs"),
    "discount_rate -0.5, every figure derived again": ("plain", negative_discount_rate, "inputs"),
    "inference_target_utilization 1.5": ("plain", yaml_edit("economics", "inference_target_utilization", 1.5), "inputs"),
    "utilization 1.5 with every inference line halved": ("plain", util_and_halved_lines, "inputs"),
    "utilization 1.5 over two thirds of the GPUs, every figure dcplace's": ("fast", utilization_over_one, "inputs"),
    "negative carbon price": ("plain", yaml_edit("economics", "carbon_price_usd_per_t", -10), "inputs"),
    "hours_per_year 100,000": ("plain", yaml_edit("economics", "hours_per_year", 100000), "inputs"),
    "a power price per kWh": ("plain", input_edit("sites.csv", "power_price_usd_per_mwh", "0.09"), "inputs"),
    "floor_racks 10.5": ("plain", input_edit("sites.csv", "floor_racks", "10.5"), "inputs"),
    "an unknown cooling type allowed": ("plain", input_edit("sites.csv", "cooling_allowed", "air;magic"), "inputs"),
    "a site id twice": ("plain", duplicate_site_row, "inputs"),
    "negative demand": ("plain", input_edit("regions.csv", "demand_chat_tok_s", "-100"), "inputs"),
    "round-trip budget 0": ("plain", input_edit("regions.csv", "rtt_budget_chat_ms", "0"), "inputs"),
    "PUE 0.5": ("plain", input_edit("catalog/cooling.csv", "pue", "0.5"), "inputs"),
    "chip life 0 years": ("plain", input_edit("catalog/chips.csv", "life_years", "0"), "inputs"),
    "negative throughput": ("plain", input_edit("catalog/throughput.csv", "tok_s_per_gpu", "-50"), "inputs"),
    "a rack config of an unknown chip": ("plain", input_edit("catalog/rack_configs.csv", "chip", "ghost"), "inputs"),
    "load factor 2": ("plain", input_edit("catalog/workloads.csv", "load_factor", "2"), "inputs"),
    "training efficiency 1.5": ("plain", input_edit("catalog/fabrics.csv", "training_efficiency", "1.5"), "inputs"),
    "negative job size": ("plain", input_edit("jobs.csv", "gpus_h100_equiv", "-96"), "inputs"),
    "route factor 0.5": ("plain", yaml_edit("latency", "route_factor", 0.5), "inputs"),
    "max share per site 0": ("plain", yaml_edit("policies", "max_share_per_site", 0), "inputs"),
    "survive share 1.5": ("n1", yaml_edit("policies", "survive_site_loss", {"chat": 1.5}), "inputs"),
    "idle power share 2": ("clock", yaml_edit("clock", "idle_power_share", 2.0), "inputs"),
    # the daily profiles
    "a profile hour missing": ("clock", drop_profile_hour, "inputs"),
    "a profile peaking at 0.5": ("clock", halve_profile, "inputs"),
    "a profile peaking at 0.5, every figure derived again": ("half-clock", profile_peaking_at_half, "inputs"),
    "a profile hour given twice": ("clock", repeat_profile_hour, "inputs"),
    # the N-1 record
    "failover secure true -> false": ("n1", failover(lambda f: f.update(secure=False)), "failover"),
    "failover classes rewritten": ("n1", failover(lambda f: f.update(classes={"chat": 0.5})), "failover"),
    "failover last round breaks a loss": ("n1", failover(lambda f: f["rounds"][-1].update(losses_broken=["a"])), "failover"),
    "failover a clean round's unserved tok/s": ("n1", failover(lambda f: f["rounds"][-1].update(unserved_tok_s=120.0)), "failover"),
    "failover record emptied": ("n1", plan_edit(lambda d: d["solve"].update(failover={})), "failover"),
    "failover rounds emptied": ("n1", failover(lambda f: f.update(rounds=[])), "failover"),
    "failover scenarios_generated rewritten": ("n1", failover(lambda f: f.update(scenarios_generated=7)), "failover"),
    "failover secure removed": ("n1", failover(lambda f: f.pop("secure")), "schema"),
    "failover stopped while secure": ("n1", failover(lambda f: f.update(stopped="time limit")), "failover"),
    "failover record kept, policy dropped": ("n1", drop_policy, "failover"),
    "failover record with an unknown figure": ("n1", failover(lambda f: f.update(saved_usd=1.0)), "schema"),
    # hourly[]
    "hourly: every row of one site removed": ("clock", hourly(drop_site_rows), "hourly"),
    "hourly: serving_gpus halved on every row": ("clock", hourly(halve_serving), "hourly"),
    "hourly: lent_gpus where nothing is lent": ("clock", hourly(lend_without_backfill), "hourly"),
    "hourly: a row's kind cloud with its load x 3": ("clock", hourly(to_cloud), "hourly"),
    "hourly: capacity doubled": ("clock", hourly(double_capacity), "hourly"),
    "hourly: a row twice": ("clock", hourly(duplicate_row), "hourly"),
    "hourly: rented load halved": ("clock", hourly(halve_rented_load), "hourly"),
    "hourly: a row's weight": ("clock", hourly(reweigh_row), "hourly"),
    "hourly: a row at hour 25": ("clock", hourly(row_at_hour_25), "hourly"),
    "hourly: emptied": ("clock", hourly(empty_rows), "hourly"),
    "hourly, no clock: a rented row's capacity doubled": ("cloud", hourly(lambda rows: rows[0].update(capacity_tok_s=rows[0]["capacity_tok_s"] * 2)), "hourly"),
    "hourly, no clock: an owned row added": ("cloud", hourly(lambda rows: rows.append({**rows[0], "place": "hub", "kind": "owned"})), "hourly"),
    "no clock: a dispatch line": ("cloud", plan_edit(lambda d: d["dispatch"].append({"site": "hub", "group": "server", "chip": "server",
        "cooling": "air", "workload": "chat", "hour_utc": 0, "serving_gpus": 0.0, "lent_gpus": 0.0})), "clock"),
    "no clock: the clock record says on": ("cloud", clock_record("on", True), "clock_record"),
    # the clock record, dispatch and backfill rows
    "clock block_overstatement": ("clock", clock_record("block_overstatement", 0.1), "clock_record"),
    "clock load_share": ("clock", plan_edit(load_share_edit), "clock_record"),
    "clock routing 'hour'": ("clock", clock_record("routing", "hour"), "clock_record"),
    "clock idle_power_share": ("clock", clock_record("idle_power_share", 0.1), "clock_record"),
    "clock record emptied": ("clock", plan_edit(lambda d: d.update(clock={})), "clock_record"),
    "dispatch chip": ("clock", first("dispatch", chip="server"), "clock"),
    "backfill chip": ("clock", first("backfill", chip="server"), "clock"),
    "backfill weight": ("clock", first("backfill", weight_h=3.0), "clock"),
    "rented GPUs halved": ("clock", plan_edit(halve_rentals), "clock"),
    # fields the format does not have, words outside its sets
    "plan.json: an unknown top-level figure": ("plain", extra_field(lambda d: d), "schema"),
    "a site: an unknown figure": ("plain", extra_field(lambda d: d["sites"][0]), "schema"),
    "a rack line: an unknown figure": ("plain", extra_field(lambda d: lines(d, "inference")[0]), "schema"),
    "an assignment: an unknown figure": ("plain", extra_field(lambda d: d["assignments"][0]), "schema"),
    "solve: an unknown figure": ("plain", extra_field(lambda d: d["solve"]), "schema"),
    "created_utc not a time": ("plain", plan_edit(lambda d: d.update(created_utc="yesterday")), "schema"),
    "a site's role 'hub'": ("plain", plan_edit(lambda d: d["sites"][0].update(role="hub")), "schema"),
    "a zero cost category nobody knows": ("plain", plan_edit(zero_cost_category), "schema"),
    "a rack line's purpose 'storage'": ("plain", plan_edit(lambda d: lines(d, "inference")[0].update(purpose="storage")), "schema"),
    # the solve record and the rest of what a report, map or compare shows
    "a diagnosis on an optimal plan": ("plain", plan_edit(lambda d: d.update(diagnosis=["carbon cap exceeded"])), "status"),
    "the solver's version": ("plain", plan_edit(lambda d: d["solve"].update(solver_version="9.9")), "status"),
    "the solve's options": ("plain", plan_edit(lambda d: d["solve"]["options"].update(threads=64)), "status"),
    "a negative solve time": ("plain", plan_edit(lambda d: d["solve"].update(solve_time_s=-1.0)), "status"),
    "a zone built twice": ("plain", plan_edit(lambda d: next(s for s in d["sites"] if s["zones"])["zones"].append(
        next(s for s in d["sites"] if s["zones"])["zones"][0])), "density"),
    "a rent assignment's region name": ("clock", first("rent_assignments", region_name="Elsewhere"), "assignments"),
    "a rent assignment's budget": ("clock", first("rent_assignments", rtt_budget_ms=500.0), "assignments"),
    "an on-demand rental at an hour not represented": ("clock", first("rentals", hour_utc=30), "clock"),
    # the families that held before (sanity)
    "an inference line halved": ("plain", plan_edit(halve_line), "inference_capacity"),
    "a training line halved": ("plain", plan_edit(lambda d: halve_line(d, "training")), "training"),
    "a share halved": ("plain", plan_edit(halve_share), "demand"),
    "a power limit in inputs/": ("plain", input_edit("sites.csv", "power_limit_kw", "1.0", row=None), "power"),
    "the objective": ("plain", plan_edit(lambda d: d.update(objective_usd_per_year=d["objective_usd_per_year"] * 0.9)), "cost"),
    "a KPI": ("plain", plan_edit(lambda d: d["kpis"].update(gpus_inference=d["kpis"]["gpus_inference"] / 2)), "kpis"),
}


def test_untouched_folders_pass(solved):
    for world in WORLDS:
        report = check_plan_folder(solved / world)
        assert report.ok, (world, report.violations)
    assert "hourly" in check_plan_folder(solved / "clock").checked


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_each_corruption_is_caught_by_its_family(case, solved, tmp_path):
    world, corruption, family = CORRUPTIONS[case]
    report = tamper(copy_of(solved, tmp_path, world), corruption)
    assert family in report.families_violated(), report.violations
    assert "manifest" not in report.families_violated(), report.violations  # sealed again: only the recomputation saw it
    for v in report.violations:
        assert v.family and "Traceback" not in v.message


# ------------------------------------------------------------------ the cases, one by one


def test_a_plan_less_status_does_not_switch_the_checker_off(solved, tmp_path):
    """One inference line halved (a real capacity breach) and the status set to infeasible, 'Optimal' or
    time_limit: the folder is checked as any plan, the breach is found and the status named."""
    for status in ("infeasible", "Optimal", "time_limit"):
        folder = copy_of(solved, tmp_path / status, "plain")
        report = tamper(folder, with_status(status))
        assert not report.ok
        assert {"status", "inference_capacity"} <= report.families_violated(), report.violations
        assert "cost" in report.checked and "demand" in report.checked


def test_the_cli_fails_a_plan_that_claims_to_be_infeasible(solved, tmp_path):
    from typer.testing import CliRunner

    from dcplace.cli import app

    folder = copy_of(solved, tmp_path, "plain")
    tamper(folder, with_status("infeasible"))
    result = CliRunner().invoke(app, ["check", str(folder)])
    assert result.exit_code == 1, result.output  # a plan that fails its check, not exit 3 "infeasible"
    assert "Infeasible" not in result.output


def test_a_real_infeasible_folder_still_passes(tmp_path):
    from dcplace.optimizer import InfeasibleScenario

    path = make_scenario(tmp_path / "in", sites=[site("west", 0, 0)], regions=[region("town", 0, 0.1, budget=5)],
                         policies={"carbon_cap_t_per_year": 0.001})
    with pytest.raises(InfeasibleScenario):
        solve_to_folder(path, tmp_path / "plan", OPTIONS)
    report = check_plan_folder(tmp_path / "plan")
    assert report.ok, report.violations
    assert report.status == "infeasible" and {"inputs", "status", "schema"} <= set(report.checked)


@pytest.mark.parametrize("world, corruption", [("plain", negative_colocation), ("plain", negative_discount_rate),
                                               ("fast", utilization_over_one)])
def test_inputs_dcplace_refuses_are_a_violation(world, corruption, solved, tmp_path):
    """Negative colocation, a negative discount rate, a utilization of 1.5 over two thirds of the GPUs the
    world needs: every figure derived again from the edited inputs, so only the inputs' rules can tell."""
    report = tamper(copy_of(solved, tmp_path, world), corruption)
    assert not report.ok
    assert report.families_violated() == {"inputs"}, report.violations
    assert all("dcplace validate" in v.message for v in report.violations)


@pytest.mark.parametrize("world, corruption", [("clock", drop_profile_hour), ("half-clock", profile_peaking_at_half)])
def test_profiles_are_validated(world, corruption, solved, tmp_path):
    """A missing local hour (one whose load is 0: nothing else changes) and a profile peaking at 0.5 over
    the plan whose hourly loads it gives: each a violation of the inputs, and only that."""
    report = tamper(copy_of(solved, tmp_path, world), corruption)
    assert report.families_violated() == {"inputs"}, report.violations
    messages = " ".join(v.message for v in report.violations)
    assert "has no row for hour(s) 3" in messages or "peaks at 0.5, not 1" in messages, report.violations


@pytest.mark.parametrize("change", [
    lambda f: f.update(secure=False),
    lambda f: f.update(classes={"chat": 0.5}),
    lambda f: f["rounds"][-1].update(losses_broken=["b"], unserved_tok_s=10.0),
    lambda f: f.clear(),
])
def test_the_n1_record_is_checked(change, solved, tmp_path):
    """secure true -> false, the classes rewritten, the last round breaking a loss, the record emptied."""
    report = tamper(copy_of(solved, tmp_path, "n1"), plan_edit(lambda d: change(d["solve"]["failover"])))
    assert not report.ok
    assert "failover" in report.families_violated(), report.violations


@pytest.mark.parametrize("change", [drop_site_rows, halve_serving, lend_without_backfill, to_cloud])
def test_every_hourly_row_is_recomputed(change, solved, tmp_path):
    """One site's rows removed, serving_gpus halved on every row, lent GPUs on a row with no backfill, a row's
    kind 'cloud' with its load x 3."""
    report = tamper(copy_of(solved, tmp_path, "clock"), hourly(change))
    assert not report.ok
    assert "hourly" in report.families_violated(), report.violations


def test_a_plan_found_without_the_n1_loop_records_its_own_check(solved, tmp_path):
    """The checker requires solve.failover under an N-1 policy: an MGA alternative of the N-1 plan (found
    without the loop) records its own re-routing as the one round, and passes."""
    from dcplace.optimizer.studies.alternatives import near_optimal_alternatives

    folder = copy_of(solved, tmp_path, "n1")
    study = near_optimal_alternatives(folder, k=1, slack=0.5)
    assert study.alternatives
    alt = Path(study.folder) / study.alternatives[0].name
    assert check_plan_folder(alt).ok
    record = json.loads((alt / "plan.json").read_text())["solve"]["failover"]
    assert record["classes"] == {"chat": 1.0} and record["secure"] is True and record["rounds"][-1]["losses_broken"] == []


def test_a_schedule_holds_its_inputs_to_the_rules_and_its_periods_to_their_derivation(tmp_path):
    """A period's power price is the schedule's times its factor (300 x 10 = 3,000 $/MWh, beyond what a file may
    give): the period's inputs are derived, not refused. The schedule's own inputs are held to every rule."""
    from dcplace.models import load_scenario
    from dcplace.models.schedule import write_schedule_folder
    from dcplace.optimizer.checker import check_schedule_folder
    from dcplace.optimizer.solving.periods import solve_periods

    path = make_scenario(tmp_path / "in", sites=[site("hub", 0, 0, power_price_usd_per_mwh=300)], regions=[region("town", 0, 0.01)],
                         sections={"periods": [{"year": 2026, "years": 1}, {"year": 2027, "years": 1, "power_price_factor": 10}]})
    schedule, plans = solve_periods(load_scenario(path), OPTIONS)
    folder = write_schedule_folder(schedule, load_scenario(path), plans, tmp_path / "out")
    report = check_schedule_folder(folder)
    assert report.ok, report.violations
    assert "inputs" in report.checked and "2027:inputs" in report.checked
    edit_input(folder, "sites.csv", lambda f: f.__setitem__("colocation_usd_per_kw_month", "-50"))
    report = check_schedule_folder(folder)
    assert any(v.family == "inputs" and "inputs/sites.csv" in v.message for v in report.violations), report.violations
    doc = json.loads((folder / "schedule.json").read_text())
    doc["solve"]["status"] = "infeasible"
    (folder / "schedule.json").write_text(json.dumps(doc))
    assert "status" in check_schedule_folder(folder).families_violated()


# ------------------------------------------------------------------ the checker's rules are dcplace validate's


def _rule_cases():
    """(where, key, value) just outside and just inside every range the checker holds a plain folder's inputs to."""
    import dcplace.optimizer.checker.inputs as check

    if not hasattr(check, "TABLE_RULES"):  # a checker without written-again input rules: no case to compare
        return []
    TABLE_RULES, SECTION_RULES = check.TABLE_RULES, check.SECTION_RULES
    tables = {"sites": "sites.csv", "regions": "regions.csv", "jobs": "jobs.csv", "chips": "catalog/chips.csv",
              "rack_configs": "catalog/rack_configs.csv", "cooling": "catalog/cooling.csv", "fabrics": "catalog/fabrics.csv",
              "workloads": "catalog/workloads.csv", "throughput": "catalog/throughput.csv"}
    rules = [(tables[t], column, low, high, flags) for t, table_rules in TABLE_RULES.items() if t in tables
             for column, low, high, flags in table_rules]
    rules += [(section, key, low, high, flags) for section, section_rules in SECTION_RULES.items() for key, low, high, flags in section_rules]
    cases = []
    for where, key, low, high, flags in rules:
        if low is not None:
            cases.append((where, key, low if "g" in flags else low - 1))
            if "g" not in flags:
                cases.append((where, key, low))
        if high is not None:
            cases.append((where, key, high if "l" in flags else high + 1))
            if "l" not in flags:
                cases.append((where, key, high))
        if "i" in flags:
            cases.append((where, key, (low or 0) + 0.5))
    return cases


@pytest.mark.parametrize("where, key, value", _rule_cases())
def test_the_checker_refuses_exactly_what_dcplace_validate_refuses(where, key, value, solved, tmp_path):
    """Each range the checker writes again (checker/inputs.py), at and beyond its bounds, against the loader's own verdict on the same
    inputs/ (a folder's inputs load as a scenario): both refuse, or neither does."""
    from dcplace.models import ScenarioError, load_scenario

    folder = copy_of(solved, tmp_path, "plain")
    if where.endswith(".csv"):
        edit_input(folder, where, lambda f: f.__setitem__(key, str(value)))
    else:
        edit_yaml(folder, lambda spec: spec[where].__setitem__(key, value))
    try:
        load_scenario(folder / "inputs" / "scenario.yaml")
        refused = False
    except ScenarioError:
        refused = True
    found = [v.message for v in check_plan_folder(folder).violations if v.family == "inputs"]
    assert bool(found) == refused, (refused, found)
    assert found == [] or any(key in message for message in found), found  # it names the field
