"""N-1 (docs/resilience.md): every loss of an open site re-routed on the checker's own max-flow, the
plan's record of its N-1 loop, and the standby sites of training jobs."""

from __future__ import annotations

import math
from collections import defaultdict

import networkx as nx

from dcplace.optimizer.checker.common import REL_TOL, close, is_number, split_list


class ResilienceChecks:
    """check_failover and check_standby. Reads `_rtt_ms` (ConstraintChecks) and `_served` (CostChecks)."""

    FAILOVER_RTT_FACTOR = 2.0  # default failover budget: twice the region's rtt_budget_<class>_ms (docs/plan-format.md)

    def _survive(self) -> dict[str, float]:
        """policies.survive_site_loss as class -> share (a list means 1 each)."""
        value = self.inp.policies.get("survive_site_loss") or {}
        if isinstance(value, str):
            value = split_list(value)
        if isinstance(value, (list, tuple)):
            return {w: 1.0 for w in value}
        return {w: float(a) for w, a in value.items()}

    def _failover_budget(self, r: str, w: str) -> float:
        cell = self.inp.regions[r].get(f"failover_rtt_{w}_ms")
        if cell is not None and not (isinstance(cell, float) and math.isnan(cell)) and str(cell) != "":
            return float(cell)
        stated = (self.inp.policies.get("failover_rtt_ms") or {}).get(w)
        if stated is not None:
            return float(stated)
        return self.FAILOVER_RTT_FACTOR * float(self.inp.regions[r][f"rtt_budget_{w}_ms"])

    def check_failover(self) -> None:
        """N-1: for every open site f and every class w in policies.survive_site_loss (share a),
        a max-flow re-serves what each region loses beyond 1 - a of its demand,
        max(0, share[r,w,f] - (1 - a)) x demand, from the other sites' spare capacity
        (inference capacity of w minus what they serve) over pairs within the region's
        failover budget and allowed countries. Capacities are whole milli-tokens/s."""
        survive = self._survive()
        shortfalls: dict[tuple[str, str], tuple[float, float]] = {}  # (lost site, class) -> (tok/s short, tok/s needed)
        try:
            if survive:
                self._reroute_every_loss(survive, shortfalls)
        finally:
            self._check_failover_record(survive, shortfalls)

    def _check_failover_record(self, survive: dict[str, float], shortfalls: dict) -> None:
        """solve.failover (docs/resilience.md) against the checker's own re-routing: present exactly when the
        policy names a class; its classes the policy's; `secure` the re-routing's verdict (false needs a loss
        short by more than half the solver's own rule, 1e-6 x need + 0.001 tok/s); its rounds consistent: each a
        count of losses checked, the broken ones among them (sites of inputs/), unserved tok/s > 0 exactly when
        some broke, no broken round after one without; when secure (and not repaired) the last round broke
        none and nothing stopped the loop, when not secure the last one broke some and `stopped` says why;
        scenarios_generated the number of losses_in_model."""
        record = (self.plan.get("solve") or {}).get("failover")
        if not survive:
            if record:
                self.fail("failover", "solve.failover records an N-1 loop, but inputs/ has no policies.survive_site_loss.")
            return
        if not isinstance(record, dict) or not record:
            self.fail("failover", f"policies.survive_site_loss names {', '.join(sorted(survive))}, but solve.failover is empty: "
                      "the plan does not record its N-1 loop (classes, secure, rounds).")
            return
        classes = record.get("classes")
        if not isinstance(classes, dict) or set(classes) != set(survive) or \
                any(not is_number(classes[w]) or not close(float(classes[w]), a) for w, a in survive.items()):
            self.fail("failover", f"solve.failover.classes is {classes!r}; policies.survive_site_loss is {survive!r}.")
        broken = sorted(f"{f} '{w}'" for (f, w), (short, need) in shortfalls.items() if short > 1e-5 * need + 1e-2)
        # the solver's rule, halved for the whole milli-tok/s of the max-flow (a loss it found broken by a hair)
        beyond_rule = [k for k, (short, need) in shortfalls.items() if short > 0.5 * (1e-6 * need + 1e-3)]
        secure, repaired = record.get("secure"), record.get("repaired", False)
        if not isinstance(secure, bool) or not isinstance(repaired, bool):
            self.fail("failover", f"solve.failover.secure is {secure!r} (repaired {repaired!r}), not true or false.")
        elif secure and broken:
            self.fail("failover", f"solve.failover.secure is true, but the losses of {', '.join(broken)} leave demand unserved.")
        elif not secure and not beyond_rule:
            self.fail("failover", "solve.failover.secure is false, but every loss of an open site re-routes within the failover "
                      "budgets: the plan is N-1 secure.")
        stopped = record.get("stopped")
        if not isinstance(stopped, str) or (secure is True and not repaired and stopped) or (secure is False and not stopped):
            self.fail("failover", f"solve.failover.stopped is {stopped!r} with secure {secure!r}: a loop stops early only "
                      "without a secure plan of its own.")
        rounds = record.get("rounds")
        if not isinstance(rounds, list) or not rounds:
            self.fail("failover", "solve.failover.rounds is empty: the N-1 loop records at least the round of its first plan.")
            return
        clean = False
        for i, rnd in enumerate(rounds):
            where = f"solve.failover.rounds[{i}]"
            if not isinstance(rnd, dict):
                self.fail("failover", f"{where} is not a record.")
                continue
            lost, checked, unserved = rnd.get("losses_broken"), rnd.get("losses_checked"), rnd.get("unserved_tok_s")
            if not isinstance(lost, list) or any(f not in self.inp.sites for f in lost) or len(set(lost)) != len(lost):
                self.fail("failover", f"{where}.losses_broken is {lost!r}, not distinct sites of inputs/.")
                continue
            for key in ("losses_checked", "reroutings_added", "cuts_added"):
                value = rnd.get(key, 0)
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    self.fail("failover", f"{where}.{key} is {value!r}, not a count.")
            if isinstance(checked, int) and len(lost) > checked:
                self.fail("failover", f"{where} breaks {len(lost)} losses of {checked} checked.")
            if not is_number(unserved) or unserved < 0 or (unserved > 0) != bool(lost):
                self.fail("failover", f"{where}: unserved_tok_s {unserved!r} with {len(lost)} broken loss(es); demand goes "
                          "unserved exactly when a loss breaks.")
            if lost and clean:
                self.fail("failover", f"{where} breaks losses after a round that broke none: the loop ends at its first secure round.")
            clean = clean or not lost
        last = rounds[-1] if isinstance(rounds[-1], dict) else {}
        if secure is True and not repaired and last.get("losses_broken"):
            self.fail("failover", f"solve.failover.secure is true, but its last round broke {last.get('losses_broken')!r}.")
        if secure is False and not last.get("losses_broken"):
            self.fail("failover", "solve.failover.secure is false, but its last round broke no loss.")
        generated, losses = record.get("scenarios_generated"), record.get("losses_in_model")
        if losses is not None and (not isinstance(losses, list) or any(f not in self.inp.sites for f in losses)):
            self.fail("failover", f"solve.failover.losses_in_model is {losses!r}, not sites of inputs/.")
        elif generated is not None and (not isinstance(losses, list) or generated != len(set(losses))):
            self.fail("failover", f"solve.failover.scenarios_generated is {generated!r}; losses_in_model lists "
                      f"{len(set(losses)) if isinstance(losses, list) else losses!r}.")

    def _reroute_every_loss(self, survive: dict[str, float], shortfalls: dict) -> None:
        util = self.inp.economics["inference_target_utilization"]
        capacity, served = defaultdict(float), defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] == "inference" and ln["workload"] in survive:
                tok = self.inp.tok_s.get((ln["chip"], ln["workload"]), 0.0)
                capacity[site["id"], ln["workload"]] += ln["racks"] * self.inp.gpus_per_rack(ln["config"]) * tok * util
        for a in self.plan["assignments"]:
            served[a["site"], a["workload"]] += self._served(a)
        open_sites = sorted(s["id"] for s in self.plan["sites"] if s["open"])
        for f in open_sites:
            for w, share_kept in survive.items():
                need = {}
                for a in self.plan["assignments"]:
                    if a["site"] == f and a["workload"] == w:
                        lost = max(0.0, a["share"] - (1.0 - share_kept)) * self.inp.demand(a["region"], w)
                        if lost > 0:
                            need[a["region"]] = need.get(a["region"], 0.0) + lost
                if not need:
                    continue
                g = nx.DiGraph()
                for r, v in need.items():
                    g.add_edge("source", ("region", r), capacity=int(round(v * 1000)))
                    allowed = split_list(self.inp.regions[r].get("allowed_countries"))
                    budget = self._failover_budget(r, w)
                    for s in open_sites:
                        spare = capacity[s, w] - served[s, w]
                        if s == f or spare <= 0 or (allowed and self.inp.sites[s]["country"] not in allowed):
                            continue
                        if self._rtt_ms(r, s) <= budget + 1e-6:
                            g.add_edge(("region", r), ("site", s))  # no capacity attribute: unbounded
                            g.add_edge(("site", s), "sink", capacity=int(math.floor(spare * 1000)))
                if "sink" in g:
                    value, flows = nx.maximum_flow(g, "source", "sink")
                else:
                    value, flows = 0, {}
                total = sum(need.values())
                short = total - value / 1000
                shortfalls[f, w] = (short, total)
                if short > 1e-5 * total + 1e-2:
                    gone = {r: v - sum(flows.get(("region", r), {}).values()) / 1000 for r, v in need.items()}
                    worst = sorted(((v, r) for r, v in gone.items() if v > 1e-3), reverse=True)[:3]
                    named = ", ".join(f"{self.inp.regions[r]['name']} {v:,.0f} tok/s" for v, r in worst)
                    self.fail("failover", f"losing site {f} leaves {short:,.1f} tok/s of '{w}' unserved within the failover "
                              f"budgets (policies.survive_site_loss {w}: {share_kept:g}): {named}.",
                              # the plan folder holds no re-routing: the loss breaks the pair of rows together
                              breaks=("failover_reserve", "failover_capacity"))

    def check_standby(self) -> None:
        """A job with standby_required has a standby site other than its own, with an eligible chip, a fabric of its
        tier, room for its cluster, allowed countries, and capacity beside the jobs placed there (not pooled)."""
        need, have = defaultdict(float), defaultdict(float)
        for p in self.plan["jobs"]:
            need[p["site"], p["fabric"], p["chip"]] += float(self.inp.jobs[p["job"]]["gpus_h100_equiv"])
        for p in self.plan["jobs"]:
            job = self.inp.jobs[p["job"]]
            flag = job.get("standby_required", False)
            required = flag if isinstance(flag, bool) else str(flag).strip().lower() in ("true", "1", "yes")
            if not p.get("standby_site"):
                if required:
                    self.fail("standby", f"job {p['job']} requires a standby site (jobs.csv standby_required) and has none.", breaks="training_standby")
                continue
            s, f, x = p["standby_site"], p.get("standby_fabric"), p.get("standby_chip")
            if s == p["site"]:
                self.fail("standby", f"job {p['job']}: its standby site {s} is the site it runs at.", breaks="training_standby")
            chip, fabric = self.inp.chips[x], self.inp.fabrics[f]
            eligible = split_list(job.get("eligible_chips"))
            if chip["h100_equiv"] <= 0 or (eligible and x not in eligible) or fabric["tier"] < job["min_fabric_tier"]:
                self.fail("standby", f"job {p['job']}: standby on {f}/{x} is not an eligible fabric and chip for it.")
            elif job["gpus_h100_equiv"] / (fabric["training_efficiency"] * chip["h100_equiv"]) > fabric["max_cluster_gpus"] + 1e-9:
                self.fail("standby", f"job {p['job']}: standby fabric {f} cannot carry its cluster.")
            allowed = split_list(job.get("allowed_countries"))
            if allowed and self.inp.sites[s]["country"] not in allowed:
                self.fail("standby", f"job {p['job']}: standby site {s} is outside {';'.join(allowed)}.")
            need[s, f, x] += float(job["gpus_h100_equiv"])
        for site, ln in self.lines():
            if ln["purpose"] == "training":
                have[site["id"], ln["fabric"], ln["chip"]] += (self.inp.fabrics[ln["fabric"]]["training_efficiency"]
                                                              * self.inp.chips[ln["chip"]]["h100_equiv"] * ln["gpus"])
        for key, n in need.items():
            if any(p.get("standby_site") == key[0] and p.get("standby_fabric") == key[1] and p.get("standby_chip") == key[2]
                   for p in self.plan["jobs"]) and n > have[key] * (1 + REL_TOL) + 1e-6:
                self.fail("standby", f"site {key[0]} holds {n:,.0f} H100-eq of jobs and standbys on {key[1]}/{key[2]} "
                          f"with {have[key]:,.1f} H100-eq installed.", breaks="training_standby")
