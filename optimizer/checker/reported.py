"""What plan.json reports and the flat CSV views show: the documented fields and nothing else, each
site's and assignment's figures, the jobs, and the CSVs mirroring plan.json."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import pandas as pd

from dcplace.optimizer.checker.common import close, spreadsheet_cell

PLAN_FIELDS = ("format_version scenario scenario_hash created_utc solve objective_usd_per_year cost_breakdown_usd_per_year "
               "kpis sites assignments jobs provenance")
PLAN_OPTIONAL = "clock hourly dispatch backfill rentals rent_assignments routing diagnosis as_is"
SOLVE_FIELDS = ("solver solver_version status termination objective_usd_per_year best_bound_usd_per_year gap build_time_s "
                "solve_time_s options model")
SOLVE_OPTIONAL = "extract_time_s warm_start pairs failover race"
SITE_FIELDS = ("id name lat lon country open role zones fabrics racks racks_total gpus it_kw facility_kw power_limit_kw "
               "floor_racks served_tok_s emissions_t_per_year upfront_capex_usd cost_usd_per_year total_cost_usd_per_year")
SITE_OPTIONAL = "tenure built_kw"
RACK_FIELDS = "config chip cooling purpose racks gpus it_kw facility_kw cost_usd_per_year"
RACK_OPTIONAL = "workload fabric"
ASSIGNMENT_FIELDS = "region region_name workload site share served_tok_s rtt_ms rtt_budget_ms"
JOB_FIELDS = "job name site fabric chip gpus_h100_equiv"
JOB_OPTIONAL = "standby_site standby_fabric standby_chip"
HOUR_FIELDS = "place kind workload hour_utc weight_h load_tok_s capacity_tok_s"
HOUR_OPTIONAL = "lent_gpus serving_gpus"
ROUTE_FIELDS = "region workload site hour_utc weight_h share served_tok_s"
DISPATCH_FIELDS = "site group chip cooling workload hour_utc serving_gpus lent_gpus"
BACKFILL_FIELDS = "job site group chip workload hour_utc weight_h gpus h100_gpu_hours_per_day"
RENTAL_FIELDS = "cloud chip kind gpus gpu_hours_per_year usd_per_year"
RENTAL_OPTIONAL = "workload job hour_utc"
CLOCK_FIELDS = ("on hours represented_hours_utc weight_h blocks_utc block_overstatement idle_power_share inference_fabric_tier "
                "routing utc_offsets_h load_share")
FAILOVER_FIELDS = "classes secure stopped rounds"
FAILOVER_OPTIONAL = ("scenarios_generated losses_in_model reroutings_in_model cuts_in_model open_sites_checked loop_s repaired "
                     "held_sites")
ROUND_FIELDS = "objective_usd_per_year solve_s losses_checked losses_broken reroutings_added unserved_tok_s"
ROUND_OPTIONAL = "repaired_usd_per_year cuts_added"
ROLES = ("training", "inference", "mixed", "idle", "closed")
COST_CATEGORIES = ("site_fixed", "cooling_zones", "chips", "cooling_capex", "energy", "colocation", "self_build", "fabric",
                   "carbon", "transport", "rental")


class ReportedChecks:
    """check_schema, check_tables, check_sites, check_assignments, check_jobs."""

    def check_sites(self) -> None:
        """plan.json lists each site of inputs/sites.csv (but the forbidden ones) once, with its input fields and every figure recomputed."""
        ids = [s["id"] for s in self.plan["sites"]]
        for s in sorted({i for i in ids if ids.count(i) > 1}):
            self.fail("sites", f"site {s} appears {ids.count(s)} times in plan.json.")
        forbidden = set(self.inp.policies.get("forbidden_sites") or [])  # they get no variables and no entry
        for s in sorted(set(self.inp.sites) - set(ids) - forbidden):
            self.fail("sites", f"inputs/sites.csv lists site {s}, which plan.json never mentions.")
        for s in sorted(set(ids) & forbidden):
            self.fail("sites", f"plan.json lists site {s}, which policies.forbidden_sites excludes from the plan.")
        for s in sorted(set(ids) - set(self.inp.sites)):
            self.fail("sites", f"plan.json lists site {s}, which is not in inputs/sites.csv.")
        served = defaultdict(lambda: defaultdict(float))
        for a in self.plan["assignments"]:
            if a["site"] in self.inp.sites and a["region"] in self.inp.regions:
                served[a["site"]][a["workload"]] += self._served(a)
        for site in self.plan["sites"]:
            s = site["id"]
            if s not in self.inp.sites:
                continue
            where = f"site {s}"
            inp = self.inp.sites[s]
            for key in ("name", "country"):
                if str(site[key]) != str(inp[key]):
                    self.fail("sites", f"{where}: {key} is {site[key]!r} in plan.json, {inp[key]!r} in inputs/sites.csv.")
            for key in ("lat", "lon", "power_limit_kw", "floor_racks"):
                self._compare("sites", where, key, site[key], float(inp[key]), source="inputs/sites.csv says")
            lines = [self._line(s, ln) for ln in site["racks"]]
            for ln, line in zip(site["racks"], lines):
                self._compare("sites", f"{where} {ln['config']} ({ln['purpose']}) line", "facility_kw", ln["facility_kw"], line["facility_kw"])
            self._compare("sites", where, "racks_total", site["racks_total"], float(sum(ln["racks"] for ln in site["racks"])))
            self._compare("sites", where, "gpus", site["gpus"], float(sum(x["gpus"] for x in lines)))
            self._compare("sites", where, "it_kw", site["it_kw"], sum(x["it_kw"] for x in lines))
            self._compare("sites", where, "facility_kw", site["facility_kw"], sum(x["facility_kw"] for x in lines))
            self._compare("sites", where, "emissions_t_per_year", site["emissions_t_per_year"],
                          sum(x["emissions"] for x in lines) + self._busy_energy().get(s, {}).get("t", 0.0))
            self._compare("sites", where, "upfront_capex_usd", site["upfront_capex_usd"], sum(x["upfront"] for x in lines), abs_=1e-3)
            costs = site["cost_usd_per_year"]
            self._compare("sites", where, "total_cost_usd_per_year", site["total_cost_usd_per_year"], sum(costs.values()), abs_=1e-3)
            expected_served = {w: v for w, v in served[s].items() if v > 0}
            for w in sorted(set(expected_served) | set(site["served_tok_s"])):
                self._compare("sites", where, f"served_tok_s[{w}]", site["served_tok_s"].get(w, 0.0), expected_served.get(w, 0.0), abs_=1e-3)
            purposes = {ln["purpose"] for ln in site["racks"]}
            role = "closed" if not site["open"] else "idle" if not purposes else "mixed" if len(purposes) == 2 else next(iter(purposes))
            if site["role"] != role:
                self.fail("sites", f"{where}: role is '{site['role']}' in plan.json; its open flag and rack lines make it '{role}'.")
            fabrics = sorted({ln["fabric"] for ln in site["racks"] if ln.get("fabric")})
            if list(site["fabrics"]) != fabrics:
                self.fail("sites", f"{where}: fabrics are {site['fabrics']} in plan.json, its training lines use {fabrics}.")
    def _assignment_rows(self, rows: list, label: str, places: dict, place: str):
        """Each of `rows` named once, with a known region, class and `place`, its region_name and
        rtt_budget_ms as in inputs/regions.csv; yields (row, its description) for the rows that name
        known ones."""
        seen = set()
        for i, a in enumerate(rows):
            key = (a["region"], a["workload"], a["site"])
            where = f"{label} {i} ({a['region']} '{a['workload']}' from {a['site']})"
            if key in seen:
                self.fail("assignments", f"{where} appears more than once.")
            seen.add(key)
            if a["region"] not in self.inp.regions or a["site"] not in places or a["workload"] not in self.inp.workloads:
                self.fail("assignments", f"{where}: region, class or {place} is not in inputs/.")
                continue
            region = self.inp.regions[a["region"]]
            if str(a["region_name"]) != str(region["name"]):
                self.fail("assignments", f"{where}: region_name is {a['region_name']!r}, inputs/regions.csv says {region['name']!r}.")
            self._compare("assignments", where, "rtt_budget_ms", a["rtt_budget_ms"], float(region[f"rtt_budget_{a['workload']}_ms"]),
                          source="inputs/regions.csv says")
            yield a, where

    def check_assignments(self) -> None:
        """Each assignment names a known region, class and site once; its fields mirror the inputs. Each rent
        assignment names a known region, class and cloud region once, its region_name and rtt_budget_ms as in
        inputs/regions.csv (check_clock recomputes its rtt_ms and served tok/s)."""
        for _ in self._assignment_rows(self.plan.get("rent_assignments", []), "rent assignment", self.inp.clouds, "cloud region"):
            pass  # check_clock recomputes a rent assignment's rtt_ms and served tok/s
        for a, where in self._assignment_rows(self.plan["assignments"], "assignment", self.inp.sites, "site"):
            self._compare("assignments", where, "served_tok_s", a["served_tok_s"], self._served(a), abs_=1e-3)
            self._compare("assignments", where, "rtt_ms", a["rtt_ms"], self._rtt_ms(a["region"], a["site"]))

    def check_jobs(self) -> None:
        """Each placement names a known job, site, fabric and chip; its fields mirror inputs/jobs.csv."""
        for p in self.plan["jobs"]:
            where = f"job {p['job']}"
            job = self.inp.jobs.get(p["job"])
            if job is None or p["site"] not in self.inp.sites or p["fabric"] not in self.inp.fabrics or p["chip"] not in self.inp.chips:
                self.fail("jobs", f"{where}: job, site ({p['site']}), fabric ({p['fabric']}) or chip ({p['chip']}) is not in inputs/.")
                continue
            if str(p["name"]) != str(job["name"]):
                self.fail("jobs", f"{where}: name is {p['name']!r}, inputs/jobs.csv says {job['name']!r}.")
            self._compare("jobs", where, "gpus_h100_equiv", p["gpus_h100_equiv"], float(job["gpus_h100_equiv"]), source="inputs/jobs.csv says")
    def check_schema(self) -> None:
        """Every record of plan.json has the documented fields and no other (docs/plan-format.md): a figure the
        checker does not know is not shown unchecked by a report, map or compare; the words of the documented
        sets (role, purpose, kind, cost category) are the documented ones."""
        plan = self.plan

        def keys(where: str, record, fields: str, optional: str = "") -> bool:
            if not isinstance(record, dict):
                self.fail("schema", f"{where} is {type(record).__name__}, not a record.")
                return False
            allowed, required = set(fields.split()) | set(optional.split()), set(fields.split())
            unknown, missing = sorted(set(record) - allowed), sorted(required - set(record))
            if unknown:
                self.fail("schema", f"{where} has field(s) {', '.join(unknown)}, which the plan format does not have: "
                          "a figure the checker cannot check.")
            if missing:
                self.fail("schema", f"{where} lacks field(s) {', '.join(missing)}.")
            return not missing

        keys("plan.json", plan, PLAN_FIELDS, PLAN_OPTIONAL)
        try:
            datetime.fromisoformat(str(plan.get("created_utc")))
        except ValueError:
            self.fail("schema", f"plan.json created_utc is {plan.get('created_utc')!r}, not an ISO 8601 time.")
        solve = plan.get("solve")
        if keys("plan.json solve", solve, SOLVE_FIELDS, SOLVE_OPTIONAL):
            for key in ("pairs", "failover", "race", "options", "model"):
                if not isinstance(solve.get(key, {}), dict):
                    self.fail("schema", f"plan.json solve.{key} is not a record.")
        for name, fields, optional in (("assignments", ASSIGNMENT_FIELDS, ""), ("rent_assignments", ASSIGNMENT_FIELDS, ""),
                                       ("jobs", JOB_FIELDS, JOB_OPTIONAL), ("hourly", HOUR_FIELDS, HOUR_OPTIONAL),
                                       ("dispatch", DISPATCH_FIELDS, ""), ("backfill", BACKFILL_FIELDS, ""),
                                       ("rentals", RENTAL_FIELDS, RENTAL_OPTIONAL), ("routing", ROUTE_FIELDS, "")):
            rows = plan.get(name) or []
            if not isinstance(rows, list):
                self.fail("schema", f"plan.json {name} is not a list.")
                continue
            for i, row in enumerate(rows):
                keys(f"plan.json {name}[{i}]", row, fields, optional)
        for i, site in enumerate(plan.get("sites") or []):
            where = f"plan.json sites[{i}] ({site.get('id') if isinstance(site, dict) else '?'})"
            if not keys(where, site, SITE_FIELDS, SITE_OPTIONAL):
                continue
            if site["role"] not in ROLES:
                self.fail("schema", f"{where}: role {site['role']!r} is not one of {', '.join(ROLES)}.")
            for cat in sorted(set(site["cost_usd_per_year"]) - set(COST_CATEGORIES)):
                self.fail("schema", f"{where}: cost category {cat!r} is not one of the documented categories.")
            for w in sorted(set(site["served_tok_s"]) - set(self.inp.workloads)):
                self.fail("schema", f"{where}: served_tok_s names {w!r}, not a class of inputs/.")
            for j, ln in enumerate(site["racks"]):
                line = f"{where} racks[{j}]"
                if not keys(line, ln, RACK_FIELDS, RACK_OPTIONAL):
                    continue
                if ln["purpose"] == "inference" and (ln.get("workload") not in self.inp.workloads or ln.get("fabric")):
                    self.fail("schema", f"{line}: an inference line serves a class of inputs/ ({ln.get('workload')!r}) on no fabric.")
                elif ln["purpose"] == "training" and (ln.get("fabric") not in self.inp.fabrics or ln.get("workload")):
                    self.fail("schema", f"{line}: a training line sits on a fabric of inputs/ ({ln.get('fabric')!r}) for no class.")
                elif ln["purpose"] not in ("inference", "training"):
                    self.fail("schema", f"{line}: purpose {ln['purpose']!r} is neither inference nor training.")
                for cat in sorted(set(ln["cost_usd_per_year"]) - set(COST_CATEGORIES)):
                    self.fail("schema", f"{line}: cost category {cat!r} is not one of the documented categories.")
        for cat in sorted(set(plan.get("cost_breakdown_usd_per_year") or {}) - set(COST_CATEGORIES)):
            self.fail("schema", f"plan.json cost_breakdown_usd_per_year has {cat!r}, not one of the documented categories.")
        for i, ln in enumerate(plan.get("hourly") or []):
            if isinstance(ln, dict) and ln.get("kind") not in ("owned", "rented"):
                self.fail("schema", f"plan.json hourly[{i}]: kind {ln.get('kind')!r} is neither owned nor rented.")
        for i, ln in enumerate(plan.get("rentals") or []):
            if isinstance(ln, dict) and ln.get("kind") not in ("on_demand", "reserved", "training"):
                self.fail("schema", f"plan.json rentals[{i}]: kind {ln.get('kind')!r} is not on_demand, reserved or training.")
        clock = plan.get("clock") or {}
        if clock:
            keys("plan.json clock", clock, CLOCK_FIELDS)
        failover = (solve or {}).get("failover") if isinstance(solve, dict) else None
        if isinstance(failover, dict) and failover:
            keys("plan.json solve.failover", failover, FAILOVER_FIELDS, FAILOVER_OPTIONAL)
            rounds = failover.get("rounds")
            for i, rnd in enumerate(rounds if isinstance(rounds, list) else []):
                keys(f"plan.json solve.failover.rounds[{i}]", rnd, ROUND_FIELDS, ROUND_OPTIONAL)

    def check_tables(self) -> None:
        """sites.csv, assignments.csv and jobs.csv mirror plan.json row by row, column by column."""
        sites = self.plan["sites"]
        served = sorted({w for s in sites for w in s["served_tok_s"]})
        categories = sorted({c for s in sites for c in s["cost_usd_per_year"]})
        site_rows = []
        tenure_columns = any(x.get("tenure") is not None for x in sites)  # self-build on
        for s in sites:
            row = {"id": s["id"], "name": s["name"], "lat": s["lat"], "lon": s["lon"], "country": s["country"], "open": s["open"],
                   "role": s["role"], "zones": ";".join(s["zones"]), "fabrics": ";".join(s["fabrics"]), "racks": s["racks_total"],
                   "gpus": s["gpus"], "it_kw": s["it_kw"], "facility_kw": s["facility_kw"], "power_limit_kw": s["power_limit_kw"],
                   "floor_racks": s["floor_racks"], "emissions_t_per_year": s["emissions_t_per_year"],
                   "upfront_capex_usd": s["upfront_capex_usd"], "total_cost_usd_per_year": s["total_cost_usd_per_year"]}
            row.update({f"served_{w}_tok_s": s["served_tok_s"].get(w) for w in served})
            row.update({f"cost_{c}_usd_per_year": s["cost_usd_per_year"].get(c) for c in categories})
            if tenure_columns:
                row.update({"tenure": s.get("tenure") or "", "built_kw": s.get("built_kw")})
            site_rows.append(row)
        self._compare_table("sites.csv", "id", site_rows)
        fields = ("region", "region_name", "workload", "site", "share", "served_tok_s", "rtt_ms", "rtt_budget_ms")
        self._compare_table("assignments.csv", "region", [{k: a.get(k) for k in fields} for a in self.plan["assignments"]], fields)
        fields = ("job", "name", "site", "fabric", "chip", "gpus_h100_equiv")
        if any("standby_site" in p for p in self.plan["jobs"]):  # plan folders written since resilience (docs/resilience.md)
            fields += ("standby_site", "standby_fabric", "standby_chip")
        self._compare_table("jobs.csv", "job", [{k: p.get(k) for k in fields} for p in self.plan["jobs"]], fields)
        if self.plan.get("clock"):  # docs/clock.md
            for name, key in (("hourly", "place"), ("dispatch", "site"), ("backfill", "job"), ("rentals", "cloud"), ("rent_assignments", "region")):
                rows = self.plan.get(name, [])
                self._compare_table(f"{name}.csv", key, rows, list(rows[0]) if rows else None)
            if self.plan.get("routing") or self._routes_by_hour:  # routing per hour
                rows = self.plan.get("routing", [])
                self._compare_table("routing.csv", "region", rows, list(rows[0]) if rows else None)

    def _compare_table(self, name: str, key: str, rows: list[dict], columns=None) -> None:
        columns = list(columns or (rows[0] if rows else []))
        try:
            frame = pd.read_csv(self.folder / name, dtype=str, keep_default_na=False)
        except FileNotFoundError:
            self.fail("tables", f"{name} is missing; it is the flat view of plan.json.")
            return
        except (OSError, ValueError) as exc:
            self.fail("tables", f"{name} cannot be read ({type(exc).__name__}: {exc}).")
            return
        if rows and set(frame.columns) != set(columns):
            extra, missing = sorted(set(frame.columns) - set(columns)), sorted(set(columns) - set(frame.columns))
            self.fail("tables", f"{name} does not have plan.json's columns (extra: {extra or 'none'}; missing: {missing or 'none'}).")
            return
        if len(frame) != len(rows):
            self.fail("tables", f"{name} has {len(frame)} rows, plan.json has {len(rows)}.")
            return
        for i, (cells, row) in enumerate(zip(frame.to_dict("records"), rows)):
            for col in columns:
                value, cell = row[col], cells[col]
                if value is None:
                    ok = cell == ""
                elif isinstance(value, (bool, str)):
                    ok = cell in (str(value), spreadsheet_cell(str(value)))  # folders written before the quote: as is
                else:
                    try:
                        ok = close(float(cell), float(value), rel=1e-9, abs_=1e-9)
                    except ValueError:
                        ok = False
                if not ok:
                    self.fail("tables", f"{name} row {i + 2} ({key} {row[key]}): {col} is {cell!r}, plan.json says {value!r}.")
