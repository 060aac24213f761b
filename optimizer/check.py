"""The independent plan checker.

It re-reads a plan folder (plan.json and the resolved tables in inputs/) with nothing but
pandas, yaml, json and networkx, and verifies every hard constraint and every cost line
from first principles. It deliberately shares no code with the formulation, the index
sets, the cost coefficients or the latency model: a bug there cannot hide itself here.

    report = check_plan_folder("plan/")
    report.ok, report.violations
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import pandas as pd
import yaml

REL_TOL = 1e-6
ABS_TOL = 1e-6


@dataclass(frozen=True)
class Violation:
    family: str
    message: str

    def __str__(self) -> str:
        return f"[{self.family}] {self.message}"


@dataclass
class CheckReport:
    folder: str
    checked: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    recomputed_cost_usd_per_year: float = 0.0
    status: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations

    def families_violated(self) -> set[str]:
        return {v.family for v in self.violations}


def _close(a: float, b: float, rel: float = REL_TOL, abs_: float = ABS_TOL) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def _list(cell) -> list[str]:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [p.strip() for p in str(cell).split(";") if p.strip()]


class _Inputs:
    """The resolved scenario of a plan folder, read as plain tables."""

    def __init__(self, folder: Path):
        spec = yaml.safe_load((folder / "scenario.yaml").read_text())
        self.economics = spec["economics"]
        self.latency = spec["latency"]
        self.policies = spec["policies"]
        read = lambda name: pd.read_csv(folder / name, keep_default_na=False, na_values=[""])  # noqa: E731
        self.sites = {r["id"]: r for r in read("sites.csv").to_dict("records")}
        self.regions = {r["id"]: r for r in read("regions.csv").to_dict("records")}
        self.jobs = {r["id"]: r for r in read("jobs.csv").to_dict("records")}
        self.chips = {r["id"]: r for r in read("catalog/chips.csv").to_dict("records")}
        self.racks = {r["id"]: r for r in read("catalog/rack_configs.csv").to_dict("records")}
        self.cooling = {r["id"]: r for r in read("catalog/cooling.csv").to_dict("records")}
        self.fabrics = {r["id"]: r for r in read("catalog/fabrics.csv").to_dict("records")}
        self.workloads = {r["id"]: r for r in read("catalog/workloads.csv").to_dict("records")}
        self.tok_s = {(r["chip"], r["workload"]): r["tok_s_per_gpu"] for r in read("catalog/throughput.csv").to_dict("records")}
        self.backbone = read("backbone.csv") if (folder / "backbone.csv").exists() else None
        self.pair_costs = {}
        if (folder / "pair_costs.csv").exists():
            self.pair_costs = {(r["region"], r["workload"], r["site"]): r["usd_per_year"] for r in read("pair_costs.csv").to_dict("records")}

    def gpus_per_rack(self, k: str) -> int:
        rack = self.racks[k]
        return int(rack["gpus_per_server"]) * int(rack["servers_per_rack"])

    def kw_per_rack(self, k: str) -> float:
        rack = self.racks[k]
        return rack["servers_per_rack"] * rack["server_kw"] + rack["rack_overhead_kw"]

    def pue(self, s: str, c: str) -> float:
        return 1.0 + (self.cooling[c]["pue"] - 1.0) * self.sites[s]["pue_climate_factor"]

    def demand(self, r: str, w: str) -> float:
        value = self.regions[r].get(f"demand_{w}_tok_s")
        return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _haversine_km(lat1, lon1, lat2, lon2) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(min(1.0, math.sqrt(a)))


class PlanChecker:
    """Each `check_*` method verifies one family of constraints."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.plan = json.loads((self.folder / "plan.json").read_text())
        self.inp = _Inputs(self.folder / "inputs")
        self.report = CheckReport(str(self.folder))
        self._paths = None

    def fail(self, family: str, message: str) -> None:
        self.report.violations.append(Violation(family, message))

    def lines(self):
        for site in self.plan["sites"]:
            for line in site["racks"]:
                yield site, line

    # ------------------------------------------------------------------ families

    def check_integrality(self) -> None:
        for site, ln in self.lines():
            n = ln["racks"]
            if not isinstance(n, int) or n <= 0:
                self.fail("integrality", f"site {site['id']}: {ln['config']} has {n} racks; a positive whole number is required.")
                continue
            if ln["gpus"] != n * self.inp.gpus_per_rack(ln["config"]):
                self.fail("integrality", f"site {site['id']}: {ln['config']} lists {ln['gpus']} GPUs for {n} racks.")
            if not _close(ln["it_kw"], n * self.inp.kw_per_rack(ln["config"])):
                self.fail("integrality", f"site {site['id']}: {ln['config']} lists {ln['it_kw']} kW IT for {n} racks.")

    def check_demand(self) -> None:
        total = defaultdict(float)
        cap = self.inp.policies["max_share_per_site"]
        for a in self.plan["assignments"]:
            total[a["region"], a["workload"]] += a["share"]
            if a["share"] < -ABS_TOL or a["share"] > cap + ABS_TOL:
                self.fail("demand", f"region {a['region']} {a['workload']}: share {a['share']} from {a['site']} outside [0, {cap}].")
            if not _close(a["served_tok_s"], a["share"] * self.inp.demand(a["region"], a["workload"]), abs_=1e-3):
                self.fail("demand", f"region {a['region']} {a['workload']}: served tok/s does not equal share x demand.")
        for r in self.inp.regions:
            for w in self.inp.workloads:
                if self.inp.demand(r, w) > 0 and not _close(total[r, w], 1.0):
                    self.fail("demand", f"region {r} '{w}' demand is {total[r, w] * 100:.4f}% served, not 100%.")

    def _rtt_ms(self, r: str, s: str) -> float:
        lat = self.inp.latency
        if self.inp.backbone is not None:
            if self._paths is None:
                g = nx.Graph()
                for e in self.inp.backbone.to_dict("records"):
                    if not g.has_edge(e["from"], e["to"]) or g[e["from"]][e["to"]]["km"] > e["km"]:
                        g.add_edge(e["from"], e["to"], km=e["km"])
                self._paths = dict(nx.all_pairs_dijkstra_path_length(g, weight="km"))
            km = self._paths.get(r, {}).get(s, math.inf)
        else:
            region, site = self.inp.regions[r], self.inp.sites[s]
            km = _haversine_km(region["lat"], region["lon"], site["lat"], site["lon"]) * lat["route_factor"]
        return 2 * km / lat["fiber_km_per_ms"] + lat["overhead_ms"]

    def check_latency(self) -> None:
        for a in self.plan["assignments"]:
            rtt = self._rtt_ms(a["region"], a["site"])
            budget = self.inp.regions[a["region"]][f"rtt_budget_{a['workload']}_ms"]
            if rtt > budget + 1e-6:
                self.fail("latency", f"region {a['region']} '{a['workload']}' served from {a['site']} at {rtt:.2f} ms, over its {budget:g} ms budget.")
            if not _close(rtt, a["rtt_ms"], abs_=1e-6):
                self.fail("latency", f"region {a['region']} to {a['site']}: plan says {a['rtt_ms']:.3f} ms, recomputed {rtt:.3f} ms.")

    def check_residency(self) -> None:
        for a in self.plan["assignments"]:
            allowed = _list(self.inp.regions[a["region"]].get("allowed_countries"))
            country = self.inp.sites[a["site"]]["country"]
            if allowed and country not in allowed:
                self.fail("residency", f"region {a['region']} served from {a['site']} in {country}, outside {';'.join(allowed)}.")
        for p in self.plan["jobs"]:
            allowed = _list(self.inp.jobs[p["job"]].get("allowed_countries"))
            country = self.inp.sites[p["site"]]["country"]
            if allowed and country not in allowed:
                self.fail("residency", f"job {p['job']} runs at {p['site']} in {country}, outside {';'.join(allowed)}.")

    def check_inference_capacity(self) -> None:
        util = self.inp.economics["inference_target_utilization"]
        capacity = defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] != "inference":
                continue
            tok = self.inp.tok_s.get((ln["chip"], ln["workload"]))
            if tok is None:
                self.fail("inference_capacity", f"site {site['id']}: chip {ln['chip']} cannot serve '{ln['workload']}'.")
                continue
            capacity[site["id"], ln["workload"]] += ln["racks"] * self.inp.gpus_per_rack(ln["config"]) * tok * util
        served = defaultdict(float)
        for a in self.plan["assignments"]:
            served[a["site"], a["workload"]] += a["share"] * self.inp.demand(a["region"], a["workload"])
        for (s, w), need in served.items():
            if need > capacity[s, w] * (1 + REL_TOL) + 1e-3:
                self.fail("inference_capacity", f"site {s} serves {need:,.1f} tok/s of '{w}' with capacity {capacity[s, w]:,.1f}.")

    def check_density(self) -> None:
        for site, ln in self.lines():
            s, c, k = site["id"], ln["cooling"], ln["config"]
            if self.inp.racks[k]["chip"] != ln["chip"]:
                self.fail("density", f"site {s}: config {k} is listed with chip {ln['chip']}.")
            if c not in _list(self.inp.sites[s]["cooling_allowed"]):
                self.fail("density", f"site {s}: cooling {c} is not allowed there.")
            if self.inp.kw_per_rack(k) > self.inp.cooling[c]["max_kw_per_rack"] + 1e-9:
                self.fail("density", f"site {s}: {k} at {self.inp.kw_per_rack(k):g} kW/rack in a {c} zone rated {self.inp.cooling[c]['max_kw_per_rack']:g} kW.")
            if c not in site["zones"]:
                self.fail("density", f"site {s}: racks in a {c} zone that was not built.")

    def check_power_and_space(self) -> None:
        for site in self.plan["sites"]:
            s = site["id"]
            inp = self.inp.sites[s]
            kw = sum(ln["racks"] * self.inp.kw_per_rack(ln["config"]) * self.inp.pue(s, ln["cooling"]) for ln in site["racks"])
            racks = sum(ln["racks"] for ln in site["racks"])
            if kw > inp["power_limit_kw"] * (1 + REL_TOL):
                self.fail("power", f"site {s} draws {kw:,.1f} kW facility power over its {inp['power_limit_kw']:,.1f} kW limit.")
            if racks > inp["floor_racks"]:
                self.fail("space", f"site {s} holds {racks} racks on {inp['floor_racks']} rack positions.")
            if (racks or site["zones"]) and not site["open"]:
                self.fail("open", f"site {s} has racks or zones but is not open.")
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        for a in self.plan["assignments"]:
            if a["site"] not in open_sites:
                self.fail("open", f"region {a['region']} served from closed site {a['site']}.")

    def check_training(self) -> None:
        placed = defaultdict(list)
        for p in self.plan["jobs"]:
            placed[p["job"]].append(p)
        need = defaultdict(float)
        for j, job in self.inp.jobs.items():
            if len(placed[j]) != 1:
                self.fail("training", f"job {j} is placed {len(placed[j])} times; exactly once is required.")
                continue
            p = placed[j][0]
            chip, fabric = self.inp.chips[p["chip"]], self.inp.fabrics[p["fabric"]]
            eligible = _list(job.get("eligible_chips"))
            if chip["h100_equiv"] <= 0 or (eligible and p["chip"] not in eligible):
                self.fail("training", f"job {j} runs on chip {p['chip']}, which is not eligible.")
            if fabric["tier"] < job["min_fabric_tier"]:
                self.fail("training", f"job {j} runs on fabric {p['fabric']} (tier {fabric['tier']}) below its minimum tier {job['min_fabric_tier']}.")
            physical = job["gpus_h100_equiv"] / (fabric["training_efficiency"] * chip["h100_equiv"]) if chip["h100_equiv"] > 0 else math.inf
            if physical > fabric["max_cluster_gpus"] + 1e-9:
                self.fail("training", f"job {j} needs {physical:,.0f} GPUs, beyond fabric {p['fabric']}'s {fabric['max_cluster_gpus']:,} GPU limit.")
            need[p["site"], p["fabric"], p["chip"]] += job["gpus_h100_equiv"]
        have = defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] == "training":
                eff = self.inp.fabrics[ln["fabric"]]["training_efficiency"]
                have[site["id"], ln["fabric"], ln["chip"]] += eff * self.inp.chips[ln["chip"]]["h100_equiv"] * ln["gpus"]
        for key, n in need.items():
            if n > have[key] * (1 + REL_TOL) + 1e-6:
                self.fail("training", f"site {key[0]} runs {n:,.0f} H100-eq of jobs on {key[1]}/{key[2]} with {have[key]:,.1f} H100-eq installed.")

    def check_policies(self) -> None:
        pol = self.inp.policies
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        for s in pol.get("forced_sites") or []:
            if s not in open_sites:
                self.fail("policy", f"forced site {s} is not open.")
        for s in pol.get("forbidden_sites") or []:
            if s in open_sites:
                self.fail("policy", f"forbidden site {s} is open.")
        if pol.get("min_sites") and len(open_sites) < pol["min_sites"]:
            self.fail("policy", f"{len(open_sites)} sites open, fewer than min_sites {pol['min_sites']}.")
        if pol.get("max_sites") is not None and len(open_sites) > pol["max_sites"]:
            self.fail("policy", f"{len(open_sites)} sites open, more than max_sites {pol['max_sites']}.")
        if pol.get("single_purpose_sites"):
            for site in self.plan["sites"]:
                if len({ln["purpose"] for ln in site["racks"]}) > 1:
                    self.fail("policy", f"site {site['id']} hosts both training and inference under single_purpose_sites.")
        hours = self.inp.economics["hours_per_year"]
        emitted = capex = 0.0
        for site, ln in self.lines():
            s = site["id"]
            lf = self._load_factor(ln)
            mwh = ln["racks"] * self.inp.kw_per_rack(ln["config"]) * self.inp.pue(s, ln["cooling"]) * hours * lf / 1000
            emitted += mwh * self.inp.sites[s]["grid_carbon_g_per_kwh"] / 1000
            capex += ln["gpus"] * self.inp.chips[ln["chip"]]["capex_usd_per_gpu"]
            capex += ln["racks"] * self.inp.kw_per_rack(ln["config"]) * self.inp.cooling[ln["cooling"]]["capex_usd_per_kw"]
            if ln["fabric"]:
                capex += ln["gpus"] * self.inp.fabrics[ln["fabric"]]["cost_usd_per_gpu"]
        if pol.get("carbon_cap_t_per_year") is not None and emitted > pol["carbon_cap_t_per_year"] * (1 + REL_TOL):
            self.fail("policy", f"emissions {emitted:,.0f} t/yr exceed the carbon cap {pol['carbon_cap_t_per_year']:,.0f} t/yr.")
        if pol.get("capex_budget_usd") is not None and capex > pol["capex_budget_usd"] * (1 + REL_TOL):
            self.fail("policy", f"upfront capex ${capex:,.0f} exceeds the budget ${pol['capex_budget_usd']:,.0f}.")

    def _load_factor(self, ln) -> float:
        if ln["purpose"] == "training":
            return self.inp.economics["training_load_factor"]
        return self.inp.workloads[ln["workload"]]["load_factor"]

    def check_cost(self) -> None:
        """Recompute every line item from the inputs; their sum must equal the objective."""
        eco = self.inp.economics
        r = eco["discount_rate"]

        def annuity(years: float) -> float:
            return 1 / years if r == 0 else r / (1 - (1 + r) ** -years)

        by_category = defaultdict(float)
        for site in self.plan["sites"]:
            s = site["id"]
            inp = self.inp.sites[s]
            mine = defaultdict(float)
            if site["open"]:
                mine["site_fixed"] += inp["fixed_cost_usd_per_year"]
            for c in site["zones"]:
                mine["cooling_zones"] += self.inp.cooling[c]["zone_fixed_usd_per_year"]
            for ln in site["racks"]:
                kw = ln["racks"] * self.inp.kw_per_rack(ln["config"])
                chip, cool = self.inp.chips[ln["chip"]], self.inp.cooling[ln["cooling"]]
                mwh = kw * self.inp.pue(s, ln["cooling"]) * eco["hours_per_year"] * self._load_factor(ln) / 1000
                mine["chips"] += ln["gpus"] * chip["capex_usd_per_gpu"] * annuity(chip["life_years"])
                mine["cooling_capex"] += kw * cool["capex_usd_per_kw"] * annuity(cool["life_years"])
                mine["energy"] += mwh * inp["power_price_usd_per_mwh"]
                mine["colocation"] += kw * inp["colocation_usd_per_kw_month"] * 12
                mine["carbon"] += mwh * inp["grid_carbon_g_per_kwh"] / 1000 * eco["carbon_price_usd_per_t"]
                if ln["fabric"]:
                    fab = self.inp.fabrics[ln["fabric"]]
                    mine["fabric"] += ln["gpus"] * fab["cost_usd_per_gpu"] * annuity(fab["life_years"])
            for a in self.plan["assignments"]:
                if a["site"] != s:
                    continue
                if eco["transport_usd_per_tok_s_1000km_year"]:
                    region = self.inp.regions[a["region"]]
                    km = _haversine_km(region["lat"], region["lon"], inp["lat"], inp["lon"])
                    mine["transport"] += a["share"] * self.inp.demand(a["region"], a["workload"]) * km / 1000 * eco["transport_usd_per_tok_s_1000km_year"]
                mine["transport"] += a["share"] * self.inp.pair_costs.get((a["region"], a["workload"], s), 0.0)
            for cat, value in mine.items():
                by_category[cat] += value
                if not _close(value, site["cost_usd_per_year"].get(cat, 0.0), abs_=1e-3):
                    self.fail("cost", f"site {s} {cat}: plan says ${site['cost_usd_per_year'].get(cat, 0.0):,.2f}, recomputed ${value:,.2f}.")
        total = sum(by_category.values())
        self.report.recomputed_cost_usd_per_year = total
        if not _close(total, self.plan["objective_usd_per_year"]):
            self.fail("cost", f"line items add up to ${total:,.2f}, the plan's objective is ${self.plan['objective_usd_per_year']:,.2f}.")
        for cat, value in self.plan["cost_breakdown_usd_per_year"].items():
            if not _close(value, by_category.get(cat, 0.0), abs_=1e-3):
                self.fail("cost", f"breakdown {cat}: plan says ${value:,.2f}, recomputed ${by_category.get(cat, 0.0):,.2f}.")
        solver_objective = self.plan["solve"]["objective_usd_per_year"]
        if solver_objective is not None and not _close(total, solver_objective, rel=1e-6, abs_=1.0):
            self.fail("cost", f"line items add up to ${total:,.2f}, the solver's objective was ${solver_objective:,.2f}.")

    def run(self) -> CheckReport:
        self.report.status = self.plan["solve"]["status"]
        if self.report.status not in ("optimal", "feasible"):
            return self.report  # no plan to check: the folder records why (plan.json "diagnosis")
        for name in sorted(n for n in dir(self) if n.startswith("check_")):
            getattr(self, name)()
            self.report.checked.append(name.removeprefix("check_"))
        return self.report


def check_plan_folder(folder: str | Path) -> CheckReport:
    """Verify a plan folder; the report lists every violation found."""
    return PlanChecker(folder).run()
