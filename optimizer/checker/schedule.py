"""The independent checker of a multi-period schedule folder (docs/periods.md).

Like the plan checker (plan.py), whose PlanChecker it runs on every period's plan folder, it reads
files with nothing but pandas, yaml and json and shares no code with the formulation: it
re-derives each period's scenario from the top-level inputs (demand multipliers, time to
power, chip availability, the jobs of each period) and compares it with the period folder's
inputs, then verifies what ties the periods (racks and fabric in use are bought and alive,
sites and zones persist, retrofits are paid, nothing is bought before it exists) and
recomputes the net present value line by line. Every formula is in docs/periods.md.

    report = check_schedule_folder("years/")
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import yaml

from dcplace.optimizer.checker.common import close, spreadsheet_cell
from dcplace.optimizer.checker.inputs import InputRules, Inputs, rule_problem
from dcplace.optimizer.checker.plan import PlanChecker
from dcplace.optimizer.checker.report import CheckReport, Violation

CAPEX = ("chips", "cooling_capex", "fabric")


def _number(value, default=None):
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return default
    return float(value)


def _listed(cell) -> list[str]:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [part.strip() for part in str(cell).split(";") if part.strip()]


def _equal(a, b) -> bool:
    """Two cells or YAML values: numbers within a relative 1e-9, empty and NaN alike, the rest equal."""
    empty = lambda v: v is None or v == "" or (isinstance(v, float) and math.isnan(v))  # noqa: E731
    if empty(a) or empty(b):
        return empty(a) and empty(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return str(a).lower() == str(b).lower()
    try:
        return close(float(a), float(b), rel=1e-9, abs_=1e-9)
    except (TypeError, ValueError):
        return a == b if not isinstance(a, (list, tuple)) else list(a) == list(b)


def _steps(cell) -> list[tuple[int, float]]:
    if cell is None or (isinstance(cell, float) and math.isnan(cell)) or str(cell).strip() == "":
        return []
    out = []
    for part in str(cell).split(";"):
        if part.strip():
            year, mw = part.split(":")
            out.append((int(year), float(mw)))
    return sorted(out)


def _read_spreadsheet_csv(path: Path, text_columns: tuple[str, ...]) -> list[dict]:
    """The rows of builds.csv or halls.csv with their ids as schedule.json has them: these CSVs
    are for spreadsheets, so an id a spreadsheet would run as a formula carries a leading '
    there (common.spreadsheet_cell)."""
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={c: str for c in text_columns})
    for column in text_columns:
        if column in frame:
            frame[column] = frame[column].map(lambda cell: cell[1:] if isinstance(cell, str) and cell.startswith("'")
                                              and spreadsheet_cell(cell[1:]) == cell else cell)
    return frame.to_dict("records")


class ScheduleChecker:
    """check_* methods verify one family of rules each; `run` also runs PlanChecker per period."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.report = CheckReport(str(self.folder))
        self.schedule = json.loads((self.folder / "schedule.json").read_text())
        self.inp = Inputs(self.folder / "inputs")
        spec = yaml.safe_load((self.folder / "inputs" / "scenario.yaml").read_text())
        self.periods = spec.get("periods") or []
        self.rate = float(self.inp.economics["discount_rate"])
        self.base = int(self.periods[0]["year"])
        self.builds = _read_spreadsheet_csv(self.folder / "builds.csv", ("site", "config", "chip", "cooling", "fabric"))
        self.halls = _read_spreadsheet_csv(self.folder / "halls.csv", ("site", "cooling"))
        self.plans = {int(p["year"]): json.loads((self.folder / "periods" / str(p["year"]) / "plan.json").read_text())
                      for p in self.periods}
        self.period_inputs = {int(p["year"]): Inputs(self.folder / "periods" / str(p["year"]) / "inputs") for p in self.periods}

    def fail(self, family: str, message: str, breaks: str | tuple[str, ...] = ()) -> None:
        self.report.add(family, message, breaks)

    # ------------------------------------------------------------------ the arithmetic
    def discount(self, year: float) -> float:
        return (1.0 + self.rate) ** -(year - self.base)

    def weight(self, period: dict) -> float:
        return sum(self.discount(y) for y in range(int(period["year"]), int(period["year"]) + int(period.get("years", 1))))

    def serves(self, build_year: int, period: dict, life: float) -> bool:
        return build_year <= int(period["year"]) and int(period["year"]) + int(period.get("years", 1)) <= build_year + life + 1e-9

    def crf(self, years: float) -> float:
        r = self.rate
        return 1.0 / years if r == 0 else r / (1.0 - (1.0 + r) ** -years)

    def power_kw(self, site: dict, year: int) -> float:
        start = _number(site.get("power_from_year"))
        if start is not None and start > year:
            return 0.0
        kw = float(site["power_limit_kw"])
        if not _steps(site.get("power_steps_mw")):
            period = next(p for p in self.periods if int(p["year"]) == year)
            return kw * float(period.get("power_limit_factor", 1.0))
        for step_year, mw in _steps(site.get("power_steps_mw")):
            if step_year <= year:
                kw = mw * 1000.0
        return kw

    def chip_available(self, chip: str, year: int) -> bool:
        start = _number(self.inp.chips[chip].get("available_from_year"))
        return start is None or start <= year

    def in_use(self, year: int) -> tuple[dict, dict]:
        """(site, config, cooling) -> racks and (site, config, cooling, fabric) -> training racks in the period's plan."""
        racks: dict[tuple, int] = defaultdict(int)
        fabric: dict[tuple, int] = defaultdict(int)
        for site in self.plans[year]["sites"]:
            for line in site["racks"]:
                racks[site["id"], line["config"], line["cooling"]] += int(line["racks"])
                if line["purpose"] == "training":
                    fabric[site["id"], line["config"], line["cooling"], line["fabric"]] += int(line["racks"])
        return racks, fabric

    def annuity(self, build: dict) -> float:
        k = build["config"]
        if build["kind"] == "fabric":
            fab = self.inp.fabrics[build["fabric"]]
            return self.inp.gpus_per_rack(k) * float(fab["cost_usd_per_gpu"]) * self.crf(float(fab["life_years"]))
        chip = self.inp.chips[self.inp.racks[k]["chip"]]
        cooling = self.inp.cooling[build["cooling"]]
        return (self.inp.gpus_per_rack(k) * float(chip["capex_usd_per_gpu"]) * self.crf(float(chip["life_years"]))
                + self.inp.kw_per_rack(k) * float(cooling["capex_usd_per_kw"]) * self.crf(float(cooling["life_years"])))

    def life(self, build: dict) -> float:
        if build["kind"] == "fabric":
            return float(self.inp.fabrics[build["fabric"]]["life_years"])
        return float(self.inp.chips[self.inp.racks[build["config"]]["chip"]]["life_years"])

    # ----------------------------------------------------------------------- families
    def _same_rows(self, year: int, table: str, want: dict, got: dict, skip: tuple[str, ...]) -> None:
        """Rows `want` (the top level's, those the period keeps) equal `got` (the period's) but for `skip` columns."""
        if set(want) != set(got):
            self.fail("period_inputs", f"period {year}: {table} has rows {sorted(set(got) ^ set(want))[:5]} where the top-level "
                      "inputs say otherwise.")
        for key in set(want) & set(got):
            for column, value in want[key].items():
                if column in skip:
                    continue
                other = got[key].get(column)
                if not _equal(value, other):
                    self.fail("period_inputs", f"period {year}: {table} {key} {column} is {other!r}; the top-level inputs say {value!r}.")

    def _unchanged(self, year: int, got: Inputs) -> None:
        """Everything a period does not change is the top level's: sites, regions, jobs and catalog
        columns, latency, policies (but the sites without power), economics (but the period's keys)."""
        period = next(p for p in self.periods if int(p["year"]) == year)
        available = {c for c in self.inp.chips if self.chip_available(c, year)}
        running = {j for j in self.inp.jobs if j in got.jobs}
        self._same_rows(year, "sites", self.inp.sites, got.sites, ("power_limit_kw", "power_price_usd_per_mwh"))
        self._same_rows(year, "regions", self.inp.regions, got.regions, tuple(f"demand_{w}_tok_s" for w in self.inp.workloads))
        self._same_rows(year, "jobs", {j: self.inp.jobs[j] for j in running}, got.jobs, ("gpus_h100_equiv", "eligible_chips"))
        for j in running:
            listed = _listed(self.inp.jobs[j].get("eligible_chips"))
            if listed and _listed(got.jobs[j].get("eligible_chips")) != [c for c in listed if c in available]:
                self.fail("period_inputs", f"period {year}: job {j} may use {got.jobs[j].get('eligible_chips')!r}; of its chips "
                          f"{listed}, those available are {[c for c in listed if c in available]}.")
        self._same_rows(year, "chips", {c: self.inp.chips[c] for c in available}, got.chips, ())
        self._same_rows(year, "rack_configs", {k: r for k, r in self.inp.racks.items() if r["chip"] in available}, got.racks, ())
        for name in ("cooling", "fabrics", "workloads"):
            self._same_rows(year, name, getattr(self.inp, name), getattr(got, name), ())
        want_tok = {key: v for key, v in self.inp.tok_s.items() if key[0] in available}
        if want_tok != got.tok_s:
            self.fail("period_inputs", f"period {year}: the throughput table differs from the top level's for the chips available.")
        economics = {**self.inp.economics, **(period.get("economics") or {})}
        for key, value in economics.items():
            if not _equal(value, got.economics.get(key)):
                self.fail("period_inputs", f"period {year}: economics.{key} is {got.economics.get(key)!r}; the period says {value!r}.")
        for key, value in self.inp.policies.items():
            if key == "forbidden_sites":
                value = sorted(set(value or []) | {s for s, site in self.inp.sites.items() if self.power_kw(site, year) <= 0})
                if sorted(got.policies.get(key) or []) != value:
                    self.fail("period_inputs", f"period {year}: forbidden_sites is {got.policies.get(key)!r}; the top level's and "
                              f"those without power make {value!r}.")
            elif not _equal(value, got.policies.get(key)):
                self.fail("period_inputs", f"period {year}: policies.{key} is {got.policies.get(key)!r}; the top level says {value!r}.")
        if self.inp.latency != got.latency and {k: v for k, v in self.inp.latency.items() if k != "backbone"} != \
                {k: v for k, v in got.latency.items() if k != "backbone"}:
            self.fail("period_inputs", f"period {year}: latency differs from the top level's.")

    def check_inputs(self) -> None:
        """The schedule's inputs/ hold what `dcplace validate` accepts: every rule of a plan folder's inputs (each
        period's, derived from these, is checked against them by check_period_inputs), and each period's year,
        length, demand multipliers and power factors within their ranges (models/records.py Period)."""
        for problem in InputRules(self.inp).run():
            self.fail("inputs", problem)
        years = []
        for i, period in enumerate(self.periods):
            where = f"inputs/scenario.yaml periods[{i}]"
            if not isinstance(period, dict):
                self.fail("inputs", f"{where} is not a period.")
                continue
            for key, low, high, flags in (("year", 1900, 2200, "i"), ("years", 1, 20, "io"), ("power_price_factor", 0, 10, "go"),
                                          ("power_limit_factor", 0, 100, "go")):
                why = rule_problem(period.get(key), low, high, flags)
                if why:
                    self.fail("inputs", f"{where}.{key} {why}: `dcplace validate` refuses it.")
            for w, factor in (period.get("demand") or {}).items():
                why = rule_problem(factor, 0, None, "")
                if why:
                    self.fail("inputs", f"{where}.demand.{w} {why}: `dcplace validate` refuses it.")
            years.append((period.get("year"), period.get("years", 1)))
        for (year, _), (before, length) in zip(years[1:], years):
            if all(isinstance(v, int) for v in (year, before, length)) and year != before + length:
                self.fail("inputs", f"inputs/scenario.yaml: the period of {year} does not start where the one of {before} "
                          f"ends ({before + length}): periods run in order, back to back.")

    def check_period_inputs(self) -> None:
        """Each period folder's inputs are the period's scenario derived from the top-level inputs."""
        for period in self.periods:
            year = int(period["year"])
            got = self.period_inputs[year]
            self._unchanged(year, got)
            factor = period.get("demand") or {}
            for r, region in self.inp.regions.items():
                for w in self.inp.workloads:
                    want = self.inp.demand(r, w) * float(factor.get(w, 1.0))
                    if not close(got.demand(r, w), want):
                        self.fail("period_inputs", f"period {year}: region {r} {w} demand is {got.demand(r, w):,.3f} tok/s; "
                                  f"the top-level {self.inp.demand(r, w):,.3f} x {float(factor.get(w, 1.0)):g} = {want:,.3f}.")
            forbidden = set(got.policies.get("forbidden_sites") or [])
            price = float(period.get("power_price_factor", 1.0))
            for s, site in self.inp.sites.items():
                kw = self.power_kw(site, year)
                if kw <= 0 and s not in forbidden:
                    self.fail("period_inputs", f"period {year}: site {s} has no power before {site.get('power_from_year')} "
                              "but is not forbidden in the period's inputs.")
                if kw > 0 and s not in forbidden and not close(float(got.sites[s]["power_limit_kw"]), kw):
                    self.fail("period_inputs", f"period {year}: site {s} power limit is {got.sites[s]['power_limit_kw']:,.1f} kW; "
                              f"its steps give {kw:,.1f} kW.")
                if not close(float(got.sites[s]["power_price_usd_per_mwh"]), float(site["power_price_usd_per_mwh"]) * price):
                    self.fail("period_inputs", f"period {year}: site {s} power price is not the top-level price x {price:g}.")
            for chip in got.chips:
                if not self.chip_available(chip, year):
                    self.fail("period_inputs", f"period {year}: chip {chip} is in the catalog before its available_from_year.")
            training = float(factor.get("training", 1.0))
            for j, job in self.inp.jobs.items():
                first, last = _number(job.get("from_year")), _number(job.get("to_year"))
                runs = (first is None or first <= year) and (last is None or last >= year)
                if runs != (j in got.jobs):
                    self.fail("period_inputs", f"period {year}: job {j} {'runs' if runs else 'does not run'} in this period "
                              f"(from_year {job.get('from_year')}, to_year {job.get('to_year')}) but the period's inputs "
                              f"{'lack' if runs else 'have'} it.")
                elif runs and not close(float(got.jobs[j]["gpus_h100_equiv"]), float(job["gpus_h100_equiv"]) * training):
                    self.fail("period_inputs", f"period {year}: job {j} needs {got.jobs[j]['gpus_h100_equiv']:g} GPUs; "
                              f"the top-level {job['gpus_h100_equiv']:g} x training {training:g}.")

    def check_periods(self) -> None:
        """Racks and fabric in use are bought and alive; sites and zones persist; retrofits are paid."""
        for period in self.periods:
            year = int(period["year"])
            racks, fabric = self.in_use(year)
            for key, count in racks.items():
                alive = sum(int(b["count"]) for b in self.builds if b["kind"] == "racks" and (b["site"], b["config"], b["cooling"]) == key
                            and self.serves(int(b["year"]), period, self.life(b)))
                if count > alive:
                    self.fail("periods", f"period {year}: {count} racks of {key[1]} ({key[2]}) in use at {key[0]}, "
                              f"but only {alive} bought and still within their life.", breaks="rack_stock")
            for key, count in fabric.items():
                alive = sum(int(b["count"]) for b in self.builds if b["kind"] == "fabric"
                            and (b["site"], b["config"], b["cooling"], b["fabric"]) == key and self.serves(int(b["year"]), period, self.life(b)))
                if count > alive:
                    self.fail("periods", f"period {year}: {count} training racks on {key[3]} at {key[0]}, but fabric for only {alive} "
                              "bought and still within its life.", breaks="fabric_stock")
        for b in self.builds:
            if int(b["count"]) < 1:
                self.fail("periods", f"builds.csv lists {b['count']} racks of {b['config']} at {b['site']} in {b['year']}: a purchase is at least one rack.")
        for h in self.halls:
            if min(float(h["ready_kw"]), float(h["retrofit_kw"])) < 0:
                self.fail("periods", f"halls.csv gives negative kW at {h['site']} in {h['year']}.")
        for b in self.builds:
            if not self.chip_available(b["chip"], int(b["year"])):
                self.fail("periods", f"{b['count']} racks of {b['config']} bought at {b['site']} in {b['year']}, before chip "
                          f"{b['chip']} is available ({self.inp.chips[b['chip']].get('available_from_year')}).")
        self._persistence()
        self._retrofits()

    def _sites(self, year: int) -> dict[str, dict]:
        return {s["id"]: s for s in self.plans[year]["sites"]}

    def _persistence(self) -> None:
        for before, after in zip(self.periods, self.periods[1:]):
            y0, y1 = int(before["year"]), int(after["year"])
            now, later = self._sites(y0), self._sites(y1)
            for s, site in now.items():
                if not site["open"] or self.power_kw(self.inp.sites[s], y1) <= 0:
                    continue
                nxt = later.get(s)
                if nxt is None or not nxt["open"]:
                    self.fail("periods", f"site {s} is open in {y0} but closed in {y1}: a site once built stays open.", breaks="open_persists")
                    continue
                missing = set(site["zones"]) - set(nxt["zones"])
                if missing:
                    self.fail("periods", f"site {s} loses its {', '.join(sorted(missing))} zone(s) between {y0} and {y1}.", breaks="zone_persists")

    def _retrofits(self) -> None:
        """A zone of a cooling with a retrofit cost, new at a site that operated the period before, pays
        a retrofit on its IT kW less the readiness bought when the site opened; readiness is bought only then."""
        halls = {(int(h["year"]), h["site"], h["cooling"]): h for h in self.halls}
        ready: dict[tuple[str, str], float] = defaultdict(float)
        for i, period in enumerate(self.periods):
            year = int(period["year"])
            before = self._sites(int(self.periods[i - 1]["year"])) if i else {}
            for (y, s, c), h in halls.items():
                if y == year and float(h["ready_kw"]) > 1e-6:
                    if before.get(s, {}).get("open") or not self._sites(year).get(s, {}).get("open"):
                        self.fail("periods", f"{year}: {s} is built ready for {float(h['ready_kw']):,.1f} kW of {c}, but it does not "
                                  "open in this period (readiness is bought when a site is built).", breaks="ready_at_opening")
            for s, site in self._sites(year).items():
                old = before.get(s)
                for c in site["zones"]:
                    if float(self.inp.cooling[c].get("retrofit_usd_per_kw") or 0) <= 0:
                        continue
                    if old is None or not old["open"] or c in old["zones"]:
                        continue
                    it_kw = sum(float(line["it_kw"]) for line in site["racks"] if line["cooling"] == c)
                    owed = it_kw - ready[s, c]
                    paid = float(halls.get((year, s, c), {}).get("retrofit_kw", 0.0))
                    if owed > paid + max(1e-3, 1e-6 * it_kw):
                        self.fail("periods", f"{year}: {s} adds a {c} zone of {it_kw:,.1f} kW to a site that operated without one; "
                                  f"{owed:,.1f} kW must be paid as a retrofit (less {ready[s, c]:,.1f} kW built ready), halls.csv says {paid:,.1f}.", breaks="retrofit_needed")
            for (y, s, c), h in halls.items():
                if y == year:
                    ready[s, c] += float(h["ready_kw"])

    def check_npv(self) -> None:
        """Every NPV line and the total, recomputed."""
        lines = {int(p["year"]): p for p in self.schedule["periods"]}
        total = 0.0
        for period in self.periods:
            year = int(period["year"])
            plan = self.plans[year]
            capex = sum(float(plan["cost_breakdown_usd_per_year"].get(c, 0.0)) for c in CAPEX)
            operating = (float(plan["objective_usd_per_year"]) - capex) * self.weight(period)
            line = lines.get(year)
            if line is None or not close(float(line["operating_npv_usd"]), operating, rel=1e-6, abs_=1.0):
                self.fail("npv", f"period {year}: operating NPV should be ({plan['objective_usd_per_year']:,.2f} - {capex:,.2f}) x "
                          f"{self.weight(period):.6f} = {operating:,.2f}; schedule.json says {line and line['operating_npv_usd']}.")
            total += operating
        for b in self.builds:
            served = sum(self.weight(p) for p in self.periods if self.serves(int(b["year"]), p, self.life(b)))
            npv = int(b["count"]) * self.annuity(b) * served
            if not close(float(b["npv_usd"]), npv, rel=1e-6, abs_=1.0):
                self.fail("npv", f"build {b['count']} x {b['config']} ({b['kind']}) at {b['site']} in {b['year']}: NPV should be "
                          f"{b['count']} x {self.annuity(b):,.2f} $/yr x {served:.6f} = {npv:,.2f}; builds.csv says {b['npv_usd']:,.2f}.")
            total += npv
        for h in self.halls:
            cooling = self.inp.cooling[h["cooling"]]
            npv = (float(h["ready_kw"]) * float(cooling.get("ready_usd_per_kw") or 0)
                   + float(h["retrofit_kw"]) * float(cooling.get("retrofit_usd_per_kw") or 0)) * self.discount(int(h["year"]))
            if not close(float(h["npv_usd"]), npv, rel=1e-6, abs_=1.0):
                self.fail("npv", f"{h['cooling']} hall at {h['site']} in {h['year']}: {h['ready_kw']:,.1f} kW ready and "
                          f"{h['retrofit_kw']:,.1f} kW retrofitted should cost {npv:,.2f} in NPV; halls.csv says {h['npv_usd']:,.2f}.")
            total += npv
        reported = self.schedule.get("npv_usd")
        if reported is None or not close(float(reported), total, rel=1e-6, abs_=1.0):
            self.fail("npv", f"the schedule's NPV should be {total:,.2f} USD; schedule.json says {reported}.")
        self.report.recomputed_cost_usd_per_year = total
        solve = self.schedule["solve"]
        bound = solve.get("best_bound_usd_per_year")
        if bound is not None and float(bound) > total * (1 + 1e-6) + 1.0:
            self.fail("npv", f"the solver's bound {float(bound):,.2f} is above the schedule's NPV {total:,.2f}: no plan can cost less than its bound.")
        if solve.get("status") == "optimal" and (solve.get("gap") is None or float(solve["gap"]) > float(solve["options"]["mip_gap"]) + 1e-9):
            self.fail("npv", f"status 'optimal' with gap {solve.get('gap')} above the requested {solve['options']['mip_gap']}.")
        if solve.get("status") not in ("optimal", "feasible"):  # a schedule folder is written only with a plan
            self.fail("status", f"schedule.json solve.status is {solve.get('status')!r}; a schedule with its periods' plans is "
                      "'optimal' or 'feasible', and was checked as one.")

    # ---------------------------------------------------------------------------- run
    def run(self) -> CheckReport:
        for period in self.periods:
            sub = PlanChecker(self.folder / "periods" / str(period["year"]), period=True).run()
            for v in sub.violations:
                self.fail(v.family, f"period {period['year']}: {v.message}", v.registry_families)
            self.report.checked += [f"{period['year']}:{name}" for name in sub.checked]
        for name in ("check_inputs", "check_period_inputs", "check_periods", "check_npv"):
            try:
                getattr(self, name)()
            except Exception as exc:  # a damaged or tampered folder: a violation, never a traceback
                self.fail(name.removeprefix("check_"), f"this check could not read what it needs ({type(exc).__name__}: {exc}).")
            self.report.checked.append(name.removeprefix("check_"))
        return self.report


def check_schedule_folder(folder: str | Path) -> CheckReport:
    """Verify a schedule folder (every period's plan, the ties, the NPV); never raises on a damaged folder."""
    try:
        return ScheduleChecker(folder).run()
    except Exception as exc:  # noqa: BLE001 - unreadable top-level files
        report = CheckReport(str(folder))
        report.violations.append(Violation("schedule", f"the schedule folder cannot be read ({type(exc).__name__}: {exc})."))
        return report


__all__ = ["ScheduleChecker", "check_schedule_folder"]
