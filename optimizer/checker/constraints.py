"""The hard constraints of one plan, recomputed from its decisions (racks, shares, placements) and inputs/."""

from __future__ import annotations

import math
from collections import defaultdict

import networkx as nx

from dcplace.optimizer.checker.common import ABS_TOL, REL_TOL, cell_text, close, haversine_km, is_number, split_list


class ConstraintChecks:
    """Demand, latency, residency, capacity, density, power and space, training, self-build, policies.
    Reads the costs' `_line`, `_served` and `_build_usd_per_mw` (CostChecks) and the clock's
    `_busy_energy` (ClockChecks)."""

    def check_integrality(self) -> None:
        for site, ln in self.lines():
            n = ln["racks"]
            if not isinstance(n, int) or n <= 0:
                self.fail("integrality", f"site {site['id']}: {ln['config']} has {n} racks; a positive whole number is required.")
                continue
            if ln["gpus"] != n * self.inp.gpus_per_rack(ln["config"]):
                self.fail("integrality", f"site {site['id']}: {ln['config']} lists {ln['gpus']} GPUs for {n} racks.")
            if not close(ln["it_kw"], n * self.inp.kw_per_rack(ln["config"])):
                self.fail("integrality", f"site {site['id']}: {ln['config']} lists {ln['it_kw']} kW IT for {n} racks.")

    def check_demand(self) -> None:
        total = defaultdict(float)
        cap = self.inp.policies["max_share_per_site"]
        for a in self.plan["assignments"] + self.plan.get("rent_assignments", []):
            total[a["region"], a["workload"]] += a["share"]
            if a["share"] < -ABS_TOL or a["share"] > cap + ABS_TOL:
                self.fail("demand", f"region {a['region']} {a['workload']}: share {a['share']} from {a['site']} outside [0, {cap}].")
            if not close(a["served_tok_s"], a["share"] * self.inp.demand(a["region"], a["workload"]), abs_=1e-3):
                self.fail("demand", f"region {a['region']} {a['workload']}: served tok/s does not equal share x demand.")
        for r in self.inp.regions:
            for w in self.inp.workloads:
                if self.inp.demand(r, w) > 0 and not close(total[r, w], 1.0):
                    self.fail("demand", f"region {r} '{w}' demand is {total[r, w] * 100:.4f}% served, not 100%.", breaks="demand_met")

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
            km = haversine_km(region["lat"], region["lon"], site["lat"], site["lon"]) * lat["route_factor"]
        return 2 * km / lat["fiber_km_per_ms"] + lat["overhead_ms"]

    def check_latency(self) -> None:
        for a in self.plan["assignments"]:
            rtt = self._rtt_ms(a["region"], a["site"])
            budget = self.inp.regions[a["region"]][f"rtt_budget_{a['workload']}_ms"]
            if rtt > budget + 1e-6:
                self.fail("latency", f"region {a['region']} '{a['workload']}' served from {a['site']} at {rtt:.2f} ms, over its {budget:g} ms budget.")
            if not close(rtt, a["rtt_ms"], abs_=1e-6):
                self.fail("latency", f"region {a['region']} to {a['site']}: plan says {a['rtt_ms']:.3f} ms, recomputed {rtt:.3f} ms.")

    def check_residency(self) -> None:
        for a in self.plan["assignments"]:
            allowed = split_list(self.inp.regions[a["region"]].get("allowed_countries"))
            country = self.inp.sites[a["site"]]["country"]
            if allowed and country not in allowed:
                self.fail("residency", f"region {a['region']} served from {a['site']} in {country}, outside {';'.join(allowed)}.")
        for p in self.plan["jobs"]:
            allowed = split_list(self.inp.jobs[p["job"]].get("allowed_countries"))
            country = self.inp.sites[p["site"]]["country"]
            if allowed and country not in allowed:
                self.fail("residency", f"job {p['job']} runs at {p['site']} in {country}, outside {';'.join(allowed)}.")

    def check_inference_capacity(self) -> None:
        if self.inp.clock_on:
            return  # sized hour by hour instead: check_clock
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
                self.fail("inference_capacity", f"site {s} serves {need:,.1f} tok/s of '{w}' with capacity {capacity[s, w]:,.1f}.", breaks="inference_capacity")

    def check_density(self) -> None:
        for site in self.plan["sites"]:
            allowed = split_list(self.inp.sites[site["id"]]["cooling_allowed"]) if site["id"] in self.inp.sites else []
            for c in site["zones"]:
                if c not in allowed or site["zones"].count(c) > 1:
                    self.fail("density", f"site {site['id']}: a {c} zone is built {site['zones'].count(c)} time(s) where the site "
                              f"allows {';'.join(allowed)}, once each.")
        for site, ln in self.lines():
            s, c, k = site["id"], ln["cooling"], ln["config"]
            if self.inp.racks[k]["chip"] != ln["chip"]:
                self.fail("density", f"site {s}: config {k} is listed with chip {ln['chip']}.")
            if c not in split_list(self.inp.sites[s]["cooling_allowed"]):
                self.fail("density", f"site {s}: cooling {c} is not allowed there.")
            if self.inp.kw_per_rack(k) > self.inp.cooling[c]["max_kw_per_rack"] + 1e-9:
                self.fail("density", f"site {s}: {k} at {self.inp.kw_per_rack(k):g} kW/rack in a {c} zone rated {self.inp.cooling[c]['max_kw_per_rack']:g} kW.")
            if c not in site["zones"]:
                self.fail("density", f"site {s}: racks in a {c} zone that was not built.", breaks="density_needs_zone")

    def check_power_and_space(self) -> None:
        for site in self.plan["sites"]:
            s = site["id"]
            inp = self.inp.sites[s]
            kw = sum(ln["racks"] * self.inp.kw_per_rack(ln["config"]) * self.inp.pue(s, ln["cooling"]) for ln in site["racks"])
            racks = sum(ln["racks"] for ln in site["racks"])
            if kw > inp["power_limit_kw"] * (1 + REL_TOL):
                self.fail("power", f"site {s} draws {kw:,.1f} kW facility power over its {inp['power_limit_kw']:,.1f} kW limit.", breaks="site_power")
            if racks > inp["floor_racks"]:
                self.fail("space", f"site {s} holds {racks} racks on {inp['floor_racks']} rack positions.", breaks="site_space")
            if (racks or site["zones"]) and not site["open"]:
                self.fail("open", f"site {s} has racks or zones but is not open.", breaks="zone_needs_open")
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        for a in self.plan["assignments"]:
            if a["site"] not in open_sites:
                self.fail("open", f"region {a['region']} served from closed site {a['site']}.", breaks="share_needs_open")

    def check_training(self) -> None:
        placed = defaultdict(list)
        for p in self.plan["jobs"]:
            placed[p["job"]].append(p)
        need = defaultdict(float)
        rented = defaultdict(int)
        for ln in self.plan.get("rentals", []):
            if ln["kind"] == "training":
                rented[ln["job"]] += 1
        for j, job in self.inp.jobs.items():
            if len(placed[j]) + rented[j] != 1:
                if self.inp.interruptible(j) and len(placed[j]) + rented[j] == 0:
                    continue  # runs in the troughs: check_clock counts its GPU-hours
                self.fail("training", f"job {j} is placed {len(placed[j])} times and rented {rented[j]} times; exactly once is required.", breaks="job_placed_once")
                continue
            if rented[j]:
                continue  # on rented GPUs: check_clock verifies the rental
            p = placed[j][0]
            chip, fabric = self.inp.chips[p["chip"]], self.inp.fabrics[p["fabric"]]
            eligible = split_list(job.get("eligible_chips"))
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
                self.fail("training", f"site {key[0]} runs {n:,.0f} H100-eq of jobs on {key[1]}/{key[2]} with {have[key]:,.1f} H100-eq installed.", breaks="training_capacity")

    def check_self_build(self) -> None:
        """Tenure per site: none where no build cost is given, else lease (built_kw 0) or build, an open site whose
        built_kw is at least economics.min_campus_mw x 1000 and at most its training racks' IT kW."""
        min_kw = float(self.inp.economics.get("min_campus_mw") or 0.0) * 1000
        for site in self.plan["sites"]:
            s, tenure, built = site["id"], site.get("tenure"), site.get("built_kw")
            can = self._build_usd_per_mw(s) is not None
            if tenure is None:
                if can:
                    self.fail("self_build", f"site {s} has a build cost but no tenure (lease or build) in plan.json.")
                if built:
                    self.fail("self_build", f"site {s} lists built_kw {built} but no tenure.")
                continue
            if not can:
                self.fail("self_build", f"site {s} is '{tenure}' but neither inputs/sites.csv nor economics gives it a build cost.")
                continue
            if tenure not in ("lease", "build") or not is_number(built):
                self.fail("self_build", f"site {s}: tenure {tenure!r} with built_kw {built!r}; lease or build with a number is required.")
                continue
            if tenure == "lease":
                if abs(built) > ABS_TOL:
                    self.fail("self_build", f"site {s} leases but lists {built:,.1f} kW self-built.", breaks="self_build_needs_campus")
                continue
            training_kw = sum(ln["racks"] * self.inp.kw_per_rack(ln["config"]) for ln in site["racks"] if ln["purpose"] == "training")
            if not site["open"]:
                self.fail("self_build", f"site {s} self-builds a campus but is not open.")
            if built > training_kw * (1 + REL_TOL) + 1e-6:
                self.fail("self_build", f"site {s} self-builds {built:,.1f} kW, more than the {training_kw:,.1f} kW IT of its training racks.", breaks="self_build_within_training")
            if built < min_kw * (1 - REL_TOL) - 1e-6:
                self.fail("self_build", f"site {s} self-builds {built:,.1f} kW, below the minimum campus of {min_kw:,.1f} kW "
                          "(economics.min_campus_mw).", breaks="self_build_min_campus")

    def check_footprint(self) -> None:
        """With today's footprint (inputs/footprint.csv, the as-is baseline): the open sites are its sites and
        every site's racks are its racks, line for line; plan.json says it is an as-is plan."""
        held = self.inp.footprint
        if not held:
            if self.plan.get("as_is"):
                self.fail("footprint", "plan.json says it is an as-is plan, but inputs/ holds no footprint.", breaks="as_is_footprint")
            return
        if not self.plan.get("as_is"):
            self.fail("footprint", "inputs/ holds today's footprint, but plan.json does not say it is an as-is plan (as_is).",
                      breaks="as_is_footprint")
        built = {}
        for site, ln in self.lines():
            key = (site["id"], ln["config"], ln["cooling"], cell_text(ln.get("workload")), cell_text(ln.get("fabric")))
            built[key] = built.get(key, 0) + int(ln["racks"])
        for key in sorted(set(held) | set(built)):
            if held.get(key, 0) != built.get(key, 0):
                self.fail("footprint", f"site {key[0]} has {built.get(key, 0)} racks of {key[1]} in {key[2]} for "
                          f"{key[3] or key[4]}; today's footprint has {held.get(key, 0)}.", breaks="as_is_footprint")
        want = {key[0] for key in held}
        for site in self.plan["sites"]:
            if bool(site["open"]) != (site["id"] in want):
                self.fail("footprint", f"site {site['id']} is {'open' if site['open'] else 'closed'}; today's footprint "
                          f"{'has' if site['id'] in want else 'does not have'} it.", breaks="as_is_footprint")

    def check_policies(self) -> None:
        pol = self.inp.policies
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        for s in pol.get("forced_sites") or []:
            if s not in open_sites:
                self.fail("policy", f"forced site {s} is not open.", breaks="forced_sites")
        for s in pol.get("forbidden_sites") or []:
            if s in open_sites:
                self.fail("policy", f"forbidden site {s} is open.")
        if pol.get("min_sites") and len(open_sites) < pol["min_sites"]:
            self.fail("policy", f"{len(open_sites)} sites open, fewer than min_sites {pol['min_sites']}.", breaks="min_sites")
        if pol.get("max_sites") is not None and len(open_sites) > pol["max_sites"]:
            self.fail("policy", f"{len(open_sites)} sites open, more than max_sites {pol['max_sites']}.", breaks="max_sites")
        if pol.get("single_purpose_sites"):
            for site in self.plan["sites"]:
                if len({ln["purpose"] for ln in site["racks"]}) > 1:
                    self.fail("policy", f"site {site['id']} hosts both training and inference under single_purpose_sites.", breaks="single_purpose_sites")
        emitted = sum(b["t"] for b in self._busy_energy().values())
        capex = 0.0
        for site, ln in self.lines():
            line = self._line(site["id"], ln)
            emitted += line["emissions"]
            capex += line["upfront"]
        if pol.get("carbon_cap_t_per_year") is not None and emitted > pol["carbon_cap_t_per_year"] * (1 + REL_TOL):
            self.fail("policy", f"emissions {emitted:,.0f} t/yr exceed the carbon cap {pol['carbon_cap_t_per_year']:,.0f} t/yr.", breaks="carbon_cap")
        if pol.get("capex_budget_usd") is not None and capex > pol["capex_budget_usd"] * (1 + REL_TOL):
            self.fail("policy", f"upfront capex ${capex:,.0f} exceeds the budget ${pol['capex_budget_usd']:,.0f}.", breaks="capex_budget")
