"""Every cost line item and KPI, recomputed from the inputs and the decisions (docs/plan-format.md)."""

from __future__ import annotations

from collections import defaultdict

from dcplace.optimizer.checker.common import HOURS_PER_DAY, SECONDS_PER_HOUR, close, haversine_km, is_number


class CostChecks:
    """check_cost and check_kpis, and what one rack line, campus or assignment costs (read by the other families)."""

    def _annuity(self, years: float) -> float:
        r = self.inp.economics["discount_rate"]
        return 1 / years if r == 0 else r / (1 - (1 + r) ** -years)

    def _line(self, s: str, ln: dict) -> dict:
        """Everything one rack line is, costs and emits, from the inputs and its rack count."""
        eco = self.inp.economics
        n = ln["racks"]
        kw = n * self.inp.kw_per_rack(ln["config"])
        site = self.inp.sites[s]
        chip, cool = self.inp.chips[ln["chip"]], self.inp.cooling[ln["cooling"]]
        gpus = n * self.inp.gpus_per_rack(ln["config"])
        facility_kw = kw * self.inp.pue(s, ln["cooling"])
        mwh = facility_kw * eco["hours_per_year"] * self._load_factor(ln) / 1000
        emissions = mwh * site["grid_carbon_g_per_kwh"] / 1000
        cost = {
            "chips": gpus * chip["capex_usd_per_gpu"] * self._annuity(chip["life_years"]),
            "cooling_capex": kw * cool["capex_usd_per_kw"] * self._annuity(cool["life_years"]),
            "energy": mwh * site["power_price_usd_per_mwh"],
            "colocation": kw * site["colocation_usd_per_kw_month"] * 12,
            "carbon": emissions * eco["carbon_price_usd_per_t"],
            "fabric": 0.0,
        }
        upfront = gpus * chip["capex_usd_per_gpu"] + kw * cool["capex_usd_per_kw"]
        if ln.get("fabric"):
            fab = self.inp.fabrics[ln["fabric"]]
            cost["fabric"] = gpus * fab["cost_usd_per_gpu"] * self._annuity(fab["life_years"])
            upfront += gpus * fab["cost_usd_per_gpu"]
        return {"gpus": gpus, "it_kw": kw, "facility_kw": facility_kw, "mwh": mwh, "emissions": emissions,
                "upfront": upfront, "cost": cost}

    def _build_usd_per_mw(self, s: str) -> float | None:
        """The site's build_usd_per_mw cell, else economics.build_usd_per_mw; None: it cannot self-build
        (economics.self_build false, or no cost given)."""
        if self.inp.economics.get("self_build", True) is False:
            return None
        cell = self.inp.sites[s].get("build_usd_per_mw")
        if is_number(cell):
            return float(cell)
        value = self.inp.economics.get("build_usd_per_mw")
        return float(value) if is_number(value) else None

    def _campus(self, site: dict) -> tuple[float, float]:
        """(self_build cost, colocation credit) of a site's self-built campus, USD per year:
        built_kw x build_usd_per_mw / 1000 x (annuity(build_life_years) + build_om_share_per_year)
        + campus_fixed_usd_per_year, and built_kw x colocation_usd_per_kw_month x 12; (0, 0) when leased."""
        if site.get("tenure") != "build":
            return 0.0, 0.0
        eco = self.inp.economics
        built = float(site.get("built_kw") or 0.0)
        per_mw = self._build_usd_per_mw(site["id"]) or 0.0
        annual_per_kw = per_mw / 1000 * (self._annuity(eco.get("build_life_years", 20.0)) + eco.get("build_om_share_per_year", 0.0))
        cost = built * annual_per_kw + eco.get("campus_fixed_usd_per_year", 0.0)
        return cost, built * self.inp.sites[site["id"]]["colocation_usd_per_kw_month"] * 12

    def _served(self, a: dict) -> float:
        return a["share"] * self.inp.demand(a["region"], a["workload"])

    def _transport(self, a: dict) -> float:
        eco = self.inp.economics
        out = 0.0
        if eco["transport_usd_per_tok_s_1000km_year"]:
            region, site = self.inp.regions[a["region"]], self.inp.sites[a["site"]]
            km = haversine_km(region["lat"], region["lon"], site["lat"], site["lon"])  # great circle, even with a backbone
            out += self._served(a) * km / 1000 * eco["transport_usd_per_tok_s_1000km_year"]
        return out + a["share"] * self.inp.pair_costs.get((a["region"], a["workload"], a["site"]), 0.0)

    def _load_factor(self, ln) -> float:
        if ln["purpose"] == "training":
            return self.inp.economics["training_load_factor"]
        if self.inp.clock_on:  # the idle share all year; busy GPUs pay the rest by the hour (check_clock)
            return float(self.inp.clock["idle_power_share"])
        return self.inp.workloads[ln["workload"]]["load_factor"]

    def check_cost(self) -> None:
        """Recompute every line item from the inputs; their sum must equal the objective."""
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
                cost = self._line(s, ln)["cost"]
                for cat in sorted(set(cost) | set(ln["cost_usd_per_year"])):
                    if cat not in cost:
                        self.fail("cost", f"site {s}: {ln['config']} line lists an unknown cost category '{cat}'.")
                        continue
                    mine[cat] += cost[cat]
                    if not close(cost[cat], ln["cost_usd_per_year"].get(cat, 0.0), abs_=1e-3):
                        self.fail("cost", f"site {s}: {ln['config']} ({ln['purpose']}) line {cat}: plan says "
                                  f"${ln['cost_usd_per_year'].get(cat, 0.0):,.2f}, recomputed ${cost[cat]:,.2f}.")
            for a in self.plan["assignments"]:
                if a["site"] == s:
                    mine["transport"] += self._transport(a)
            campus, credit = self._campus(site)
            if campus or credit:  # self-build replaces colocation on the built kW (check_self_build)
                mine["self_build"] += campus
                mine["colocation"] -= credit
            busy = self._busy_energy().get(s)
            if busy:
                mwh = busy["serving_mwh"] + busy["lent_mwh"]
                mine["energy"] += mwh * inp["power_price_usd_per_mwh"]
                mine["carbon"] += busy["t"] * self.inp.economics["carbon_price_usd_per_t"]
            for cat in sorted(set(mine) | set(site["cost_usd_per_year"])):
                value = mine.get(cat, 0.0)
                by_category[cat] += value
                if not close(value, site["cost_usd_per_year"].get(cat, 0.0), abs_=1e-3):
                    self.fail("cost", f"site {s} {cat}: plan says ${site['cost_usd_per_year'].get(cat, 0.0):,.2f}, recomputed ${value:,.2f}.")
        rental = sum(self._rental_cost(ln) for ln in self.plan.get("rentals", []))
        if rental or "rental" in self.plan["cost_breakdown_usd_per_year"]:
            by_category["rental"] += rental
        total = sum(by_category.values())
        self.report.recomputed_cost_usd_per_year = total
        if not close(total, self.plan["objective_usd_per_year"]):
            self.fail("cost", f"line items add up to ${total:,.2f}, the plan's objective is ${self.plan['objective_usd_per_year']:,.2f}.")
        breakdown = self.plan["cost_breakdown_usd_per_year"]
        for cat in sorted(set(breakdown) | set(by_category)):
            if not close(breakdown.get(cat, 0.0), by_category.get(cat, 0.0), abs_=1e-3):
                self.fail("cost", f"breakdown {cat}: plan says ${breakdown.get(cat, 0.0):,.2f}, recomputed ${by_category.get(cat, 0.0):,.2f}.")
        solver_objective = self.plan["solve"]["objective_usd_per_year"]
        if solver_objective is not None and not close(total, solver_objective, rel=1e-6, abs_=1.0):
            self.fail("cost", f"line items add up to ${total:,.2f}, the solver's objective was ${solver_objective:,.2f}.")
    def check_kpis(self) -> None:
        """Every KPI recomputed from the inputs and the decisions (racks, shares, placements)."""
        eco = self.inp.economics
        hours = eco["hours_per_year"]
        by_purpose = defaultdict(float)
        it_kw, gpus = defaultdict(float), defaultdict(float)
        facility_kw = emissions = upfront = 0.0
        for site, ln in self.lines():
            line = self._line(site["id"], ln)
            by_purpose[ln["purpose"]] += sum(line["cost"].values())
            it_kw[ln["purpose"]] += line["it_kw"]
            gpus[ln["purpose"]] += line["gpus"]
            facility_kw += line["facility_kw"]
            emissions += line["emissions"]
            upfront += line["upfront"]
        shared = 0.0
        for site in self.plan["sites"]:
            campus, credit = self._campus(site)
            by_purpose["training"] += campus - credit  # a campus houses training racks only
            if site["open"]:
                shared += self.inp.sites[site["id"]]["fixed_cost_usd_per_year"]
            shared += sum(self.inp.cooling[c]["zone_fixed_usd_per_year"] for c in site["zones"])
        transport = sum(self._transport(a) for a in self.plan["assignments"])
        busy = self._busy_energy()
        carbon_price = eco["carbon_price_usd_per_t"]
        for s, b in busy.items():
            price = self.inp.sites[s]["power_price_usd_per_mwh"]
            t_serving = b["t"] * b["serving_mwh"] / max(b["serving_mwh"] + b["lent_mwh"], 1e-12)
            by_purpose["inference"] += b["serving_mwh"] * price + t_serving * carbon_price
            by_purpose["training"] += b["lent_mwh"] * price + (b["t"] - t_serving) * carbon_price
            emissions += b["t"]
        for ln in self.plan.get("rentals", []):
            by_purpose["training" if ln["kind"] == "training" else "inference"] += self._rental_cost(ln)
        inference = by_purpose["inference"] + transport
        total = inference + by_purpose["training"] + shared
        peak = tokens = within = rtt_weighted = 0.0
        owned = len(self.plan["assignments"])
        for i, a in enumerate(self.plan["assignments"] + self.plan.get("rent_assignments", [])):
            served = self._served(a)
            rtt = self._rtt_ms(a["region"], a["site"]) if a["site"] in self.inp.sites else self._cloud_rtt_ms(a["region"], a["site"])
            peak += served
            if self._routes_by_hour and i < owned:
                pass  # owned pairs routed per hour: their tokens are counted hour by hour below
            elif self.inp.clock_on:
                tokens += a["share"] * self._day_load(a["region"], a["workload"]) * hours / HOURS_PER_DAY * SECONDS_PER_HOUR
            else:
                tokens += served * self.inp.workloads[a["workload"]]["load_factor"] * hours * SECONDS_PER_HOUR
            rtt_weighted += served * rtt
            if rtt <= self.inp.regions[a["region"]][f"rtt_budget_{a['workload']}_ms"] + 1e-9:
                within += served
        if self._routes_by_hour:
            blocks = self._blocks()
            for ln in self.plan.get("routing", []):
                r, w, h = ln["region"], ln["workload"], int(ln["hour_utc"])
                tokens += ln["share"] * self.inp.demand(r, w) * self._p(r, w, h) * len(blocks.get(h, [])) * hours / HOURS_PER_DAY * SECONDS_PER_HOUR
        demand = sum(self.inp.demand(r, w) for r in self.inp.regions for w in self.inp.workloads)
        expected = {
            "total_cost_usd_per_year": total,
            "inference_cost_usd_per_year": inference,
            "training_cost_usd_per_year": by_purpose["training"],
            "shared_cost_usd_per_year": shared,
            "usd_per_m_tokens": inference / (tokens / 1e6) if tokens else 0.0,
            "tokens_per_s_served_peak": peak,
            "tokens_per_year": tokens,
            "demand_within_budget_share": within / demand if demand else 1.0,
            "mean_rtt_ms": rtt_weighted / peak if peak else 0.0,
            "sites_open": float(sum(1 for s in self.plan["sites"] if s["open"])),
            "it_mw_inference": it_kw["inference"] / 1000,
            "it_mw_training": it_kw["training"] / 1000,
            "facility_mw": facility_kw / 1000,
            "gpus_inference": gpus["inference"],
            "gpus_training": gpus["training"],
            "emissions_t_per_year": emissions,
            "upfront_capex_usd": upfront,
            "training_jobs_placed": float(len(self.plan["jobs"])),
        }
        if self.plan.get("clock"):
            expected.update(self._clock_kpis())
        kpis = self.plan["kpis"]
        for key in sorted(set(kpis) - set(expected)):
            self.fail("kpis", f"plan.json kpis has '{key}', which is not a documented KPI.")
        for key, value in expected.items():
            if key not in kpis:
                self.fail("kpis", f"plan.json kpis lacks '{key}'.")
                continue
            abs_ = 1e-3 if key.endswith("_usd_per_year") or key == "upfront_capex_usd" else 1e-9
            if not is_number(kpis[key]) or not close(float(kpis[key]), value, abs_=abs_):
                self.fail("kpis", f"KPI {key}: plan.json says {kpis[key]!r}, recomputed {value!r}.")
