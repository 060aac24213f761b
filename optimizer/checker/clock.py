"""The clock (docs/clock.md): the represented day, each region's load hour by hour, and the hourly
constraints: dispatch within installed GPUs, troughs lent to training, rentals."""

from __future__ import annotations

import math
from collections import defaultdict

from dcplace.optimizer.checker.common import ABS_TOL, HOURS_PER_DAY, REL_TOL, close, haversine_km, split_list


class ClockChecks:
    """check_clock and the hour-by-hour figures the other families read (`_blocks`, `_p`, `_site_loads`,
    `_busy_energy`, `_rental_cost`, ...). Reads `_served` and `_compare` (CostChecks, PlanChecker)."""

    def _blocks(self) -> dict[int, list[int]]:
        """Represented UTC hour -> the hours it stands for, as plan.json records them (check_clock verifies them);
        read once (callers only read it)."""
        if "_blocks_read" not in self.__dict__:
            if not self.inp.clock_on:
                blocks = {0: list(range(HOURS_PER_DAY))}
            else:
                blocks = {int(h): [int(x) for x in hours] for h, hours in (self.plan.get("clock") or {}).get("blocks_utc", {}).items()}
            self.__dict__["_blocks_read"] = blocks
        return self.__dict__["_blocks_read"]

    def _offset_h(self, r: str) -> float:
        given = self.inp.regions[r].get("utc_offset_h")
        if given is not None and not (isinstance(given, float) and math.isnan(given)):
            return float(given)
        return float(self.plan["clock"]["utc_offsets_h"][r]["offset_h"])

    def _local_profile(self, w: str, r: str) -> list[float]:
        """The region's own profile of class w, else the class's (check_inputs holds each to 24 hours peaking at 1)."""
        if "_profile_rows" not in self.__dict__:
            grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
            for p in self.inp.profiles:
                region = p.get("region")
                grouped[p["workload"], region if isinstance(region, str) else ""].append(p)
            self.__dict__["_profile_rows"] = grouped
        grouped = self.__dict__["_profile_rows"]
        rows = grouped.get((w, r)) or grouped.get((w, ""), [])
        out = [0.0] * HOURS_PER_DAY
        for p in rows:
            out[int(p["local_hour"])] = float(p["load"])
        return out

    def _p(self, r: str, w: str, h: int) -> float:
        """Region r's class-w load at represented hour h relative to its peak: the largest, over
        the UTC hours h stands for, of its local profile read at utc + offset (linear between hours)."""
        if not self.inp.clock_on:
            return 1.0
        key = (r, w)
        cache = self.__dict__.setdefault("_p_cache", {})
        if key not in cache:
            utc = self._utc(r, w)
            cache[key] = {b: max(utc[x] for x in hours) for b, hours in self._blocks().items()}
        return cache[key][h]

    def _utc(self, r: str, w: str) -> list[float]:
        """Region r's class-w load at each UTC hour 0..23 relative to its peak: its local profile at utc + offset,
        linear between whole hours."""
        cache = self.__dict__.setdefault("_utc_cache", {})
        if (r, w) not in cache:
            local, offset = self._local_profile(w, r), self._offset_h(r)
            out = []
            for utc in range(HOURS_PER_DAY):
                t = (utc + offset) % HOURS_PER_DAY
                lo = math.floor(t)
                frac = t - lo
                out.append(local[lo % HOURS_PER_DAY] * (1 - frac) + local[(lo + 1) % HOURS_PER_DAY] * frac)
            cache[r, w] = out
        return cache[r, w]

    def _day_load(self, r: str, w: str) -> float:
        """Token-hours a day of (r, w) at share 1: demand x sum over represented hours of weight x p."""
        return self.inp.demand(r, w) * sum(len(hours) * self._p(r, w, h) for h, hours in self._blocks().items())

    def _busy_energy(self) -> dict[str, dict[str, float]]:
        """Site -> MWh a year of GPUs busy serving and lent to training, above the racks' idle share, and their t CO2."""
        if "_busy" in self.__dict__:
            return self.__dict__["_busy"]
        out: dict[str, dict[str, float]] = {}
        if self.inp.clock_on:
            days = self.inp.economics["hours_per_year"] / HOURS_PER_DAY
            idle = float(self.inp.clock["idle_power_share"])
            blocks = self._blocks()
            for d in self.plan.get("dispatch", []):
                s = d["site"]
                kw = self.inp.kw_per_gpu_of_group(d["group"]) * self.inp.pue(s, d["cooling"]) * (1 - idle)
                hours = len(blocks.get(int(d["hour_utc"]), [])) * days
                entry = out.setdefault(s, {"serving_mwh": 0.0, "lent_mwh": 0.0, "t": 0.0})
                entry["serving_mwh"] += d["serving_gpus"] * kw * hours / 1000
                entry["lent_mwh"] += d["lent_gpus"] * kw * hours / 1000
            for s, entry in out.items():
                entry["t"] = (entry["serving_mwh"] + entry["lent_mwh"]) * self.inp.sites[s]["grid_carbon_g_per_kwh"] / 1000
        self.__dict__["_busy"] = out
        return out

    def _cloud_rtt_ms(self, r: str, q: str) -> float:
        lat, region, cloud = self.inp.latency, self.inp.regions[r], self.inp.clouds[q]
        km = haversine_km(region["lat"], region["lon"], cloud["lat"], cloud["lon"]) * lat["route_factor"]
        return 2 * km / lat["fiber_km_per_ms"] + lat["overhead_ms"]

    def _rental_gpu_hours(self, ln: dict) -> float:
        hours = self.inp.economics["hours_per_year"]
        if ln["kind"] == "on_demand":
            return ln["gpus"] * len(self._blocks().get(int(ln["hour_utc"]), [])) * hours / HOURS_PER_DAY
        return ln["gpus"] * hours

    def _rental_cost(self, ln: dict) -> float:
        cloud = self.inp.clouds[ln["cloud"]]
        price = cloud["usd_per_gpu_hour_on_demand"] if ln["kind"] == "on_demand" else cloud["usd_per_gpu_hour_reserved"]
        return self._rental_gpu_hours(ln) * float(price)

    def _clock_kpis(self) -> dict[str, float]:
        hourly = self.plan.get("hourly", [])
        hours = sorted(self._blocks())
        out = {
            "rental_usd_per_year": sum(self._rental_cost(ln) for ln in self.plan.get("rentals", [])),
            "rented_gpus_peak": max((sum(ln["serving_gpus"] for ln in hourly if ln["kind"] == "rented" and ln["hour_utc"] == h) for h in hours),
                                    default=0.0),
            "trough_h100_gpu_hours_per_day": sum(b["gpus"] * len(self._blocks().get(int(b["hour_utc"]), [])) * self.inp.chips[b["chip"]]["h100_equiv"]
                                                 for b in self.plan.get("backfill", [])),
        }
        if self.inp.clock_on:
            capacity, peak = self._owned_capacity(), defaultdict(float)
            for (s, w, h), load in self._site_loads().items():
                peak[s, w] = max(peak[s, w], load)
            out["owned_capacity_tok_s"] = sum(capacity.values())
            out["owned_coincident_peak_tok_s"] = sum(peak.values())
        return out

    def _installed(self) -> dict[tuple, float]:
        """(site, group, cooling, class) -> inference GPUs installed, from the rack lines."""
        out = defaultdict(float)
        for site, ln in self.lines():
            if ln["purpose"] == "inference":
                out[site["id"], self.inp.group_of(ln["config"]), ln["cooling"], ln["workload"]] += ln["gpus"]
        return out

    def _owned_capacity(self) -> dict[tuple, float]:
        out = defaultdict(float)
        for (s, g, c, w), gpus in self._installed().items():
            chip = g if g in self.inp.chips else self.inp.racks[g]["chip"]
            out[s, w] += gpus * self.inp.tok_s_at_target(chip, w)
        return out

    @property
    def _routes_by_hour(self) -> bool:
        """clock.routing 'hour' in inputs/scenario.yaml: the shares of routing.csv, one per represented hour."""
        return self.inp.clock_on and str(self.inp.clock.get("routing") or "day") == "hour"

    def _site_loads(self) -> dict[tuple, float]:
        """(site, class, represented hour) -> tok/s the assignments put there (with routing per hour, the
        hour's own shares: share x demand x p for every line of plan.json's routing); computed once."""
        if "_loads" not in self.__dict__:
            self.__dict__["_loads"] = dict(self._compute_site_loads())
        return self.__dict__["_loads"]

    def _compute_site_loads(self) -> dict[tuple, float]:
        out = defaultdict(float)
        if self._routes_by_hour:
            for ln in self.plan.get("routing", []):
                out[ln["site"], ln["workload"], int(ln["hour_utc"])] += \
                    ln["share"] * self.inp.demand(ln["region"], ln["workload"]) * self._p(ln["region"], ln["workload"], int(ln["hour_utc"]))
            return out
        for a in self.plan["assignments"]:
            for h in self._blocks():
                out[a["site"], a["workload"], h] += self._served(a) * self._p(a["region"], a["workload"], h)
        return out

    def check_clock(self) -> None:
        """Hourly serving, dispatch within installed GPUs, troughs lent to training, rentals (docs/clock.md)."""
        plan = self.plan
        if not self.inp.clock_on and not self.inp.clouds:
            for key in ("hourly", "dispatch", "backfill", "rentals", "rent_assignments"):
                if plan.get(key):
                    self.fail("clock", f"plan.json lists {key} but the scenario has neither the clock nor cloud regions.")
            return
        if self.inp.clock_on:
            self._check_day()
            self._check_rows()
            self._check_dispatch()
            self._check_backfill()
        elif plan.get("dispatch") or plan.get("backfill"):
            self.fail("clock", "plan.json lists dispatch or backfill, but the clock is off.")
        self._check_rentals()

    def _check_rows(self) -> None:
        """Each dispatch and backfill line names a known site, dispatch group (its chip's: the chip, or the config
        where the chip's configs differ in kW per GPU), the group's chip, a cooling type and class of inputs/ and a
        represented hour, once; a backfill line weighs its block's hours."""
        blocks = self._blocks()
        groups = {self.inp.group_of(k): r["chip"] for k, r in self.inp.racks.items()}
        for name, key in (("dispatch", ("site", "group", "cooling", "workload", "hour_utc")),
                          ("backfill", ("job", "site", "group", "workload", "hour_utc"))):
            seen = set()
            for i, ln in enumerate(self.plan.get(name, [])):
                where = f"{name}[{i}] ({ln['site']} {ln['group']} '{ln['workload']}' at {ln['hour_utc']}:00 UTC)"
                k = tuple(ln[f] for f in key)
                if k in seen:
                    self.fail("clock", f"{where} appears more than once.")
                seen.add(k)
                if ln["site"] not in self.inp.sites or ln["workload"] not in self.inp.workloads or int(ln["hour_utc"]) not in blocks \
                        or (name == "dispatch" and ln["cooling"] not in self.inp.cooling):
                    self.fail("clock", f"{where}: its site, class, cooling or hour is not one of inputs/ or the represented hours.")
                    continue
                if groups.get(ln["group"]) is None or ln["chip"] != groups[ln["group"]]:
                    self.fail("clock", f"{where}: group {ln['group']!r} with chip {ln['chip']!r} is not a dispatch group of the "
                              f"catalog and its chip ({groups.get(ln['group'])!r}).")
                if name == "backfill":
                    self._compare("clock", where, "weight_h", ln["weight_h"], float(len(blocks[int(ln["hour_utc"])])))

    def _check_day(self) -> None:
        clock = self.plan.get("clock") or {}
        blocks = self._blocks()
        covered = sorted(x for hours in blocks.values() for x in hours)
        if covered != list(range(HOURS_PER_DAY)):
            self.fail("clock", f"the represented hours stand for UTC hours {covered}, not each of 0..23 once.")
        for h, hours in blocks.items():
            if not hours or hours[0] != h or any((b - a) % HOURS_PER_DAY != 1 for a, b in zip(hours, hours[1:])):
                self.fail("clock", f"represented hour {h} stands for {hours}: a block must be consecutive hours starting at {h}.")
            if not close(float((clock.get("weight_h") or {}).get(str(h), -1)), float(len(hours))):
                self.fail("clock", f"represented hour {h} weighs {(clock.get('weight_h') or {}).get(str(h))!r} hours, its block holds {len(hours)}.")
        if len(blocks) != int(self.inp.clock["hours"]) and not (int(self.inp.clock["hours"]) >= HOURS_PER_DAY and len(blocks) == HOURS_PER_DAY):
            self.fail("clock", f"clock.hours is {self.inp.clock['hours']} but the plan represents the day by {len(blocks)} hours.")
        try:
            from timezonefinder import TimezoneFinder  # an independent reading of the offsets, where the package is installed
            from zoneinfo import ZoneInfo
            from datetime import datetime, timezone
            finder = TimezoneFinder()
        except ImportError:
            finder = None
        for r, region in self.inp.regions.items():
            given = region.get("utc_offset_h")
            if given is not None and not (isinstance(given, float) and math.isnan(given)):
                recorded = (clock.get("utc_offsets_h") or {}).get(r, {}).get("offset_h")
                if recorded is not None and not close(float(recorded), float(given)):
                    self.fail("clock", f"region {r}: plan.json records UTC offset {recorded}, inputs/regions.csv gives {given}.")
            elif finder is not None and any(self.inp.demand(r, w) > 0 for w in self.inp.workloads):
                name = finder.timezone_at(lat=float(region["lat"]), lng=float(region["lon"]))
                if name:  # standard time: the smaller of the January and July offsets (DST is in one of them)
                    expected = min(datetime(2026, m, 15, 12, tzinfo=timezone.utc).astimezone(ZoneInfo(name)).utcoffset().total_seconds()
                                   for m in (1, 7)) / 3600
                    if not close(self._offset_h(r), expected):
                        self.fail("clock", f"region {r} lies in {name} (standard offset {expected:+g} h); plan.json records {self._offset_h(r):+g} h.")

    def _check_dispatch(self) -> None:
        installed, loads = self._installed(), self._site_loads()
        used = defaultdict(float)
        serving_tok = defaultdict(float)
        lent = defaultdict(float)
        lent_busy, lent_tok = defaultdict(float), defaultdict(float)  # what lending alone takes: which family a breach breaks
        policies = self.inp.policies if isinstance(self.inp.policies, dict) else {}
        exact = policies.get("carbon_cap_t_per_year") is not None  # under a carbon cap the dispatch is the model's own (docs/clock.md)
        for d in self.plan.get("dispatch", []):
            key = (d["site"], d["group"], d["cooling"], d["workload"])
            if d["serving_gpus"] < -ABS_TOL or d["lent_gpus"] < -ABS_TOL:
                self.fail("clock", f"site {d['site']} hour {d['hour_utc']}: negative GPUs in the dispatch.")
            used[key + (int(d["hour_utc"]),)] += d["serving_gpus"] + d["lent_gpus"]
            lent_busy[key + (int(d["hour_utc"]),)] += d["lent_gpus"]
            chip = d["group"] if d["group"] in self.inp.chips else self.inp.racks[d["group"]]["chip"]
            serving_tok[d["site"], d["workload"], int(d["hour_utc"])] += d["serving_gpus"] * self.inp.tok_s_at_target(chip, d["workload"])
            lent_tok[d["site"], d["workload"], int(d["hour_utc"])] += d["lent_gpus"] * self.inp.tok_s_at_target(chip, d["workload"])
            lent[d["site"], d["group"], d["workload"], int(d["hour_utc"])] += d["lent_gpus"]
        for (s, g, c, w, h), n in used.items():
            have = installed.get((s, g, c, w), 0.0)
            if n > have * (1 + REL_TOL) + 1e-6:
                self.fail("clock", f"site {s} hour {h}: {n:,.2f} {g} GPUs of '{w}' in {c} are busy, {installed.get((s, g, c, w), 0.0):,.0f} installed.",
                          # lending alone beyond the racks; else the busy GPUs of an exact dispatch, or the hour's load
                          breaks="trough_fits_idle" if lent_busy[s, g, c, w, h] > have * (1 + REL_TOL) + 1e-6
                          else "busy_within_racks" if exact else "hourly_serving")
        for (s, w, h), load in loads.items():
            if load > serving_tok[s, w, h] * (1 + REL_TOL) + 1e-3:
                # the racks themselves too few for the load beside what they lend, or only the GPUs dispatched to serve
                short_of_racks = load + lent_tok[s, w, h] > self._owned_capacity().get((s, w), 0.0) * (1 + REL_TOL) + 1e-3
                self.fail("clock", f"site {s} hour {h} UTC: '{w}' load {load:,.1f} tok/s, its serving GPUs give {serving_tok[s, w, h]:,.1f}.",
                          breaks="hourly_serving" if short_of_racks else "busy_serves_load" if exact else ())
        backfill = defaultdict(float)
        for b in self.plan.get("backfill", []):
            backfill[b["site"], b["group"], b["workload"], int(b["hour_utc"])] += b["gpus"]
        for key in sorted(set(lent) | set(backfill)):
            if not close(lent.get(key, 0.0), backfill.get(key, 0.0), abs_=1e-6):
                s, g, w, _ = key
                racks_hold = sum(n for (s_, g_, _, w_), n in installed.items() if (s_, g_, w_) == (s, g, w))
                self.fail("clock", f"site {key[0]} hour {key[3]}: the dispatch lends {lent.get(key, 0.0):,.3f} {key[1]} GPUs of '{key[2]}', "
                          f"backfill.csv borrows {backfill.get(key, 0.0):,.3f}.",
                          # borrowing beyond the group's racks breaks trough_fits_idle; within them, the two records disagree
                          breaks="trough_fits_idle" if backfill.get(key, 0.0) > racks_hold * (1 + REL_TOL) + 1e-6 else ())

    def _check_backfill(self) -> None:
        tier = int(self.inp.clock.get("inference_fabric_tier", 0))
        got = defaultdict(float)
        for b in self.plan.get("backfill", []):
            j, where = b["job"], f"backfill of job {b['job']} at {b['site']} hour {b['hour_utc']}"
            if j not in self.inp.jobs or not self.inp.interruptible(j):
                self.fail("clock", f"{where}: the job is not an interruptible job of inputs/jobs.csv.")
                continue
            job, chip = self.inp.jobs[j], self.inp.chips[b["chip"]]
            eligible = split_list(job.get("eligible_chips"))
            if chip["h100_equiv"] <= 0 or (eligible and b["chip"] not in eligible):
                self.fail("clock", f"{where}: chip {b['chip']} is not eligible for the job.")
            if int(job["min_fabric_tier"]) > tier:
                self.fail("clock", f"{where}: the job needs fabric tier {job['min_fabric_tier']}, inference racks sit on tier {tier}.")
            allowed = split_list(job.get("allowed_countries"))
            if allowed and self.inp.sites[b["site"]]["country"] not in allowed:
                self.fail("clock", f"{where}: site {b['site']} is outside {';'.join(allowed)}.")
            hours = len(self._blocks().get(int(b["hour_utc"]), []))
            self._compare("clock", where, "h100_gpu_hours_per_day", b["h100_gpu_hours_per_day"], b["gpus"] * hours * chip["h100_equiv"], abs_=1e-6)
            got[j] += b["gpus"] * hours * chip["h100_equiv"]
        own = {p["job"] for p in self.plan["jobs"]} | {ln["job"] for ln in self.plan.get("rentals", []) if ln["kind"] == "training"}
        for j in self.inp.jobs:
            if self.inp.interruptible(j) and j not in own and got[j] < self.inp.daily_h100_hours(j) * (1 - REL_TOL) - 1e-6:
                self.fail("clock", f"interruptible job {j} gets {got[j]:,.1f} H100-equivalent GPU-hours a day from the troughs, "
                          f"needs {self.inp.daily_h100_hours(j):,.1f}, and has no racks or rented GPUs of its own.", breaks="trough_job_hours")

    def _check_rentals(self) -> None:
        loads = defaultdict(float)
        for a in self.plan.get("rent_assignments", []):
            r, w, q = a["region"], a["workload"], a["site"]
            where = f"rented serving of {r} '{w}' from {q}"
            if q not in self.inp.clouds:
                self.fail("clock", f"{where}: {q} is not in inputs/cloud_regions.csv.")
                continue
            cloud, region = self.inp.clouds[q], self.inp.regions[r]
            rtt = self._cloud_rtt_ms(r, q)
            if rtt > float(region[f"rtt_budget_{w}_ms"]) + 1e-6:
                self.fail("clock", f"{where} at {rtt:.2f} ms, over its {region[f'rtt_budget_{w}_ms']:g} ms budget.")
            self._compare("clock", where, "rtt_ms", a["rtt_ms"], rtt)
            self._compare("clock", where, "served_tok_s", a["served_tok_s"], self._served(a), abs_=1e-3)
            allowed = split_list(region.get("allowed_countries"))
            if allowed and cloud["country"] not in allowed:
                self.fail("clock", f"{where}: {q} in {cloud['country']} is outside {';'.join(allowed)}.")
            if (cloud["chip"], w) not in self.inp.tok_s:
                self.fail("clock", f"{where}: chip {cloud['chip']} cannot serve '{w}'.")
            for h in self._blocks():
                loads[q, w, h] += self._served(a) * self._p(r, w, h)
        rented = defaultdict(float)
        reserved = defaultdict(float)
        per_hour = defaultdict(float)
        for ln in self.plan.get("rentals", []):
            q = ln["cloud"]
            where = f"rental {ln['kind']} at {q}"
            if q not in self.inp.clouds:
                self.fail("clock", f"{where}: not in inputs/cloud_regions.csv.")
                continue
            cloud = self.inp.clouds[q]
            if ln["chip"] != cloud["chip"]:
                self.fail("clock", f"{where}: lists chip {ln['chip']}, the region rents {cloud['chip']}.")
            on_demand, training = ln["kind"] == "on_demand", ln["kind"] == "training"
            if (ln.get("workload") in self.inp.workloads) == training or (ln.get("job") is not None) != training \
                    or (ln.get("hour_utc") is not None) != on_demand or (on_demand and int(ln["hour_utc"]) not in self._blocks()):
                self.fail("clock", f"{where}: a rental on demand names a class and a represented hour, a reserved one a class, "
                          f"a training one a job (it names class {ln.get('workload')!r}, job {ln.get('job')!r}, hour {ln.get('hour_utc')!r}).")
            self._compare("clock", where, "gpu_hours_per_year", ln["gpu_hours_per_year"], self._rental_gpu_hours(ln), abs_=1e-6)
            self._compare("clock", where, "usd_per_year", ln["usd_per_year"], self._rental_cost(ln), abs_=1e-3)
            if ln["kind"] == "on_demand":
                rented[q, ln["workload"], int(ln["hour_utc"])] += ln["gpus"]
                per_hour[q, int(ln["hour_utc"])] += ln["gpus"]
            elif ln["kind"] == "reserved":
                reserved[q, ln["workload"]] += ln["gpus"]
                for h in self._blocks():
                    per_hour[q, h] += ln["gpus"]
            else:
                j = ln["job"]
                job, chip = self.inp.jobs[j], self.inp.chips[cloud["chip"]]
                eligible = split_list(job.get("eligible_chips"))
                if chip["h100_equiv"] <= 0 or (eligible and cloud["chip"] not in eligible) or int(cloud["fabric_tier"]) < int(job["min_fabric_tier"]):
                    self.fail("clock", f"{where}: job {j} cannot run on {cloud['chip']} at fabric tier {cloud['fabric_tier']}.")
                    continue
                allowed = split_list(job.get("allowed_countries"))
                if allowed and cloud["country"] not in allowed:
                    self.fail("clock", f"{where}: job {j} must stay in {';'.join(allowed)}.")
                self._compare("clock", where, "gpus", ln["gpus"], float(job["gpus_h100_equiv"]) / chip["h100_equiv"], abs_=1e-6)
                for h in self._blocks():
                    per_hour[q, h] += ln["gpus"]
        for (q, w, h), load in loads.items():
            have = (rented[q, w, h] + reserved[q, w]) * self.inp.tok_s_at_target(self.inp.clouds[q]["chip"], w)
            if load > have * (1 + REL_TOL) + 1e-3:
                self.fail("clock", f"cloud region {q} hour {h} UTC: '{w}' load {load:,.1f} tok/s on rented GPUs giving {have:,.1f}.", breaks="rental_capacity")
        for (q, h), gpus in per_hour.items():
            cap = self.inp.clouds[q].get("cap_gpus")
            if cap is not None and not (isinstance(cap, float) and math.isnan(cap)) and gpus > float(cap) * (1 + REL_TOL) + 1e-6:
                self.fail("clock", f"cloud region {q} hour {h} UTC rents {gpus:,.1f} GPUs over its cap {cap:,.0f}.", breaks="rental_cap")
