"""What a plan with the clock reports hour by hour (docs/clock.md): hourly[], the clock record, and
routing per hour (clock.routing hour) with its constraints."""

from __future__ import annotations

from collections import defaultdict

from dcplace.optimizer.checker.common import ABS_TOL, HOURS_PER_DAY, close, is_number, split_list


class HourlyChecks:
    """check_hourly, check_clock_record, check_hourly_routing; built on ClockChecks' day and loads."""

    def check_hourly(self) -> None:
        """hourly[] recomputed row by row (docs/clock.md): with the clock on, one owned row per (site, class) with
        inference racks and represented hour (load from the shares, capacity from the racks, serving and lent GPUs
        the dispatch's sums); one rented row per (cloud region, class) a rent assignment serves and represented
        hour (load, the GPUs rented then, their capacity). Every row present once, no other, each figure equal."""
        rows = self.plan.get("hourly") or []
        if not self.inp.clock_on and not self.inp.clouds:
            return  # check_clock: such a plan lists no hourly rows
        blocks = self._blocks()
        expected: dict[tuple, dict] = {}
        if self.inp.clock_on:
            loads, capacity = self._site_loads(), self._owned_capacity()
            serving, lent = defaultdict(float), defaultdict(float)
            for d in self.plan.get("dispatch", []):
                serving[d["site"], d["workload"], int(d["hour_utc"])] += d["serving_gpus"]
                lent[d["site"], d["workload"], int(d["hour_utc"])] += d["lent_gpus"]
            for s, w in sorted({(s, w) for (s, _, _, w) in self._installed()}):
                for h in blocks:
                    expected[s, "owned", w, h] = {"weight_h": float(len(blocks[h])), "load_tok_s": loads.get((s, w, h), 0.0),
                                                  "capacity_tok_s": capacity.get((s, w), 0.0),
                                                  "serving_gpus": serving.get((s, w, h), 0.0), "lent_gpus": lent.get((s, w, h), 0.0)}
        load, on_demand, reserved = defaultdict(float), defaultdict(float), defaultdict(float)
        for a in self.plan.get("rent_assignments", []):
            if a["site"] in self.inp.clouds and a["share"] > 1e-9:
                for h in blocks:
                    load[a["site"], a["workload"], h] += self._served(a) * self._p(a["region"], a["workload"], h)
        for ln in self.plan.get("rentals", []):
            if ln["kind"] == "on_demand":
                on_demand[ln["cloud"], ln["workload"], int(ln["hour_utc"])] += ln["gpus"]
            elif ln["kind"] == "reserved":
                reserved[ln["cloud"], ln["workload"]] += ln["gpus"]
        for q, w in sorted({(q, w) for (q, w, _) in load}):
            for h in blocks:
                gpus = on_demand.get((q, w, h), 0.0) + reserved.get((q, w), 0.0)
                expected[q, "rented", w, h] = {"weight_h": float(len(blocks[h])), "load_tok_s": load[q, w, h],
                                               "capacity_tok_s": gpus * self.inp.tok_s_at_target(self.inp.clouds[q]["chip"], w),
                                               "serving_gpus": gpus, "lent_gpus": 0.0}
        seen = set()
        for i, ln in enumerate(rows):
            key = (ln["place"], ln["kind"], ln["workload"], ln["hour_utc"])
            where = f"hourly[{i}] ({ln['place']} {ln['kind']} '{ln['workload']}' at {ln['hour_utc']}:00 UTC)"
            if key in seen:
                self.fail("hourly", f"{where} appears more than once.")
                continue
            seen.add(key)
            want = expected.get(key)
            if want is None:
                self.fail("hourly", f"{where} is no row of the plan: its place, kind, class or hour has no load or capacity "
                          "there (owned rows: sites with inference racks of the class; rented rows: cloud regions it rents "
                          "from; hours: the represented hours).")
                continue
            for name, value in want.items():
                abs_ = 1e-3 if name.endswith("_tok_s") else 1e-6
                self._compare("hourly", where, name, ln.get(name, 0.0), value, abs_=abs_)
        missing = sorted(set(expected) - seen, key=str)
        if missing:
            shown = "; ".join(f"{p} {k} '{w}' at {h}:00" for p, k, w, h in missing[:5])
            self.fail("hourly", f"hourly[] lacks {len(missing)} row(s) the plan has ({shown}{' …' if len(missing) > 5 else ''}).")

    def check_clock_record(self) -> None:
        """plan.json clock (docs/clock.md): empty exactly when the scenario has neither the clock nor cloud regions;
        its settings those of inputs/scenario.yaml; represented hours, weights and blocks one partition of the day
        (check_clock); load_share the recomputed p[r,w,h] of every (region, class) with demand, block_overstatement
        the share of the day's served tokens the blocks overstate, both recomputed."""
        clock = self.plan.get("clock") or {}
        inp = self.inp
        if not inp.clock_on and not inp.clouds:
            if clock:
                self.fail("clock_record", "plan.json has a clock record, but the scenario has neither the clock nor cloud regions.")
            return
        if not clock:
            self.fail("clock_record", "plan.json has no clock record; the scenario has the clock on or cloud regions.")
            return
        blocks = self._blocks()
        for key, expected in (("on", inp.clock_on), ("hours", int(inp.clock.get("hours") or 0)),
                              ("idle_power_share", float(inp.clock.get("idle_power_share", 0.3))),
                              ("inference_fabric_tier", int(inp.clock.get("inference_fabric_tier", 1))),
                              ("routing", "hour" if self._routes_by_hour else "day")):
            value = clock.get(key)
            same = value == expected if isinstance(expected, (bool, str)) else (is_number(value) and close(float(value), expected))
            if not same or isinstance(value, bool) != isinstance(expected, bool):
                self.fail("clock_record", f"clock.{key} is {value!r} in plan.json; inputs/scenario.yaml gives {expected!r}.")
        hours = clock.get("represented_hours_utc")
        if not isinstance(hours, list) or sorted(int(h) for h in hours) != sorted(blocks) or len(hours) != len(blocks):
            self.fail("clock_record", f"clock.represented_hours_utc is {hours!r}; the blocks start at {sorted(blocks)}.")
            return
        if set((clock.get("weight_h") or {})) != {str(h) for h in blocks}:
            self.fail("clock_record", "clock.weight_h does not weigh exactly the represented hours.")
        offsets = clock.get("utc_offsets_h") or {}
        demanded = [(r, w) for r in inp.regions for w in inp.workloads if inp.demand(r, w) > 0] if inp.clock_on else []
        if inp.clock_on:
            for r in sorted(set(offsets) - set(inp.regions)):
                self.fail("clock_record", f"clock.utc_offsets_h names region {r!r}, not a region of inputs/.")
            for r in sorted({r for r, _ in demanded} - set(offsets)):
                self.fail("clock_record", f"clock.utc_offsets_h has no offset for region {r}, which has demand.")
        shares = clock.get("load_share") or {}
        want = {f"{r}|{w}" for r, w in demanded}
        for key in sorted(set(shares) ^ want):
            self.fail("clock_record", f"clock.load_share {'lists' if key in shares else 'lacks'} {key!r}; it holds the "
                      "(region, class) pairs with demand.")
        for r, w in demanded:
            values = shares.get(f"{r}|{w}")
            if values is None:
                continue
            if not isinstance(values, list) or len(values) != len(hours):
                self.fail("clock_record", f"clock.load_share {r}|{w} has not one value per represented hour.")
                continue
            for h, value in zip(hours, values):
                if not is_number(value) or not close(float(value), self._p(r, w, int(h)), abs_=1e-9):
                    self.fail("clock_record", f"clock.load_share {r}|{w} at {h}:00 UTC is {value!r}, recomputed {self._p(r, w, int(h))!r}.")
                    break
        served = over = 0.0
        for r, w in demanded:
            demand = inp.demand(r, w)
            utc = [v * demand for v in self._utc(r, w)]
            served += sum(utc)
            for block in blocks.values():
                over += max(utc[u] for u in block) * len(block) - sum(utc[u] for u in block)
        expected = over / served if served else 0.0
        self._compare("clock_record", "clock", "block_overstatement", clock.get("block_overstatement"), expected, abs_=1e-9)

    def check_hourly_routing(self) -> None:
        """Routing per hour (clock.routing hour, docs/clock.md): every line of plan.json's routing is a known
        pair within its round-trip budget and allowed countries, at an open site, its share in [0, max share]
        and its served tok/s share x demand x p[r,w,h]; every represented hour's demand is met (owned shares
        of that hour plus the day's rented shares = 1); each assignment's share is the hours' weighted mean
        sum_h (w_h / 24) share_h. The hourly load these shares put on each site is what check_clock holds
        against its capacity and dispatch, hour by hour."""
        lines = self.plan.get("routing", [])
        if not self._routes_by_hour:
            if lines:
                self.fail("hourly_routing", "plan.json lists routing per hour, but inputs/scenario.yaml routes by the day "
                          "(clock.routing is not 'hour').")
            return
        blocks = self._blocks()
        cap = self.inp.policies["max_share_per_site"]
        open_sites = {s["id"] for s in self.plan["sites"] if s["open"]}
        served, mean, seen = defaultdict(float), defaultdict(float), set()
        for ln in lines:
            r, w, s, h = ln["region"], ln["workload"], ln["site"], int(ln["hour_utc"])
            where = f"routing of {r} '{w}' from {s} at {h}:00 UTC"
            if (r, w, s, h) in seen:
                self.fail("hourly_routing", f"{where} appears more than once.")
            seen.add((r, w, s, h))
            if r not in self.inp.regions or s not in self.inp.sites or w not in self.inp.workloads or h not in blocks:
                self.fail("hourly_routing", f"{where}: region, class, site or represented hour is not in inputs/ or plan.json's clock.")
                continue
            share = ln["share"]
            if share < -ABS_TOL or share > cap + ABS_TOL:
                self.fail("hourly_routing", f"{where}: share {share} outside [0, {cap}].")
            budget = float(self.inp.regions[r][f"rtt_budget_{w}_ms"])
            rtt = self._rtt_ms(r, s)
            if rtt > budget + 1e-6:
                self.fail("hourly_routing", f"{where} at {rtt:.2f} ms, over its {budget:g} ms budget.")
            allowed = split_list(self.inp.regions[r].get("allowed_countries"))
            if allowed and self.inp.sites[s]["country"] not in allowed:
                self.fail("hourly_routing", f"{where}: {s} is outside {';'.join(allowed)}.")
            if share > ABS_TOL and s not in open_sites:
                self.fail("hourly_routing", f"{where}: the site is not open.")
            self._compare("hourly_routing", where, "weight_h", ln["weight_h"], float(len(blocks[h])))
            self._compare("hourly_routing", where, "served_tok_s", ln["served_tok_s"], share * self.inp.demand(r, w) * self._p(r, w, h), abs_=1e-3)
            served[r, w, h] += share
            mean[r, w, s] += share * len(blocks[h]) / HOURS_PER_DAY
        for a in self.plan.get("rent_assignments", []):  # rented shares hold for the whole day
            for h in blocks:
                served[a["region"], a["workload"], h] += a["share"]
        for r in self.inp.regions:
            for w in self.inp.workloads:
                if self.inp.demand(r, w) <= 0:
                    continue
                for h in sorted(blocks):
                    if not close(served[r, w, h], 1.0):
                        self.fail("hourly_routing", f"region {r} '{w}' demand at {h}:00 UTC is {served[r, w, h] * 100:.4f}% served, not 100%.", breaks="hourly_demand_met")
        listed = set()
        for a in self.plan["assignments"]:
            key = (a["region"], a["workload"], a["site"])
            listed.add(key)
            self._compare("hourly_routing", f"assignment {key[0]} '{key[1]}' from {key[2]}", "share", a["share"], mean.get(key, 0.0),
                          abs_=1e-6, source="the hours' weighted mean of routing gives")
        for key, value in mean.items():
            if key not in listed and value > 1e-6:
                self.fail("hourly_routing", f"routing serves {key[0]} '{key[1]}' from {key[2]} ({value:.6f} of the day), "
                          "which assignments does not list.", breaks="hourly_share_mean")
