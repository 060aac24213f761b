"""Compare plans against a named baseline and tell the story of each change.

    plans = collect_plans(["runs/"])                # plan folders, or batch folders (expanded)
    story = build_comparison(plans, baseline="baseline")
    paths = write_comparison(story, "compare/")     # or: paths, table = save_comparison(plans, "compare/", "baseline")

For each plan against the baseline: the KPIs and their change; the cost change split into
real spend and notional charges (the carbon price line, and the transport line of a
latency trade-off point, which is a steering weight, not a bill); emissions change;
per-site deltas (IT and facility MW, role, racks, cost, emissions) for every site open in
any plan, largest MW change first; a cost waterfall by category and a difference map.
Members of a batch that have no plan (infeasible, bad input, an error) are answers too:
they are listed with their cause (the plan's diagnosis or batch.json's message) and the
overrides that produced them.

Written: compare.csv (one row per plan), compare_sites.csv (per-site deltas),
compare_costs.csv (cost by category, baseline and plan) and compare.html. The CSV headers
are words with units ("cost change, $M/yr"). CSVs are for spreadsheets: a text cell that a
spreadsheet would run as a formula (a plan or site name starting with `=`, `+`, `-`, `@`, a
tab or CR) gets a leading `'`; numbers are written as numbers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.reports.charts import cost_waterfall_figure, figure_data_uri, stacked_cost_figure
from dcplace.reports.layers import NotAPlanFolder
from dcplace.reports.mpl import plt  # the one place that picks matplotlib's backend
from dcplace.reports.output import check_destination, render_html, spreadsheet_frame, staged_files
from dcplace.reports.style import BORDER_COLOUR, CATEGORY_COLOURS, LAND_COLOUR, OCEAN_COLOUR, category_label, countries, money, short_name, tok_s_text

KPIS = [  # (plan kpi key, column, scale, format)
    ("total_cost_usd_per_year", "cost_musd_per_year", 1e-6, "{:,.2f}"),
    ("usd_per_m_tokens", "usd_per_m_tokens", 1.0, "{:.3f}"),
    ("mean_rtt_ms", "mean_rtt_ms", 1.0, "{:.1f}"),
    ("demand_within_budget_share", "demand_within_budget", 1.0, "{:.1%}"),
    ("it_mw_inference", "it_mw_inference", 1.0, "{:,.1f}"),
    ("it_mw_training", "it_mw_training", 1.0, "{:,.1f}"),
    ("emissions_t_per_year", "emissions_kt_per_year", 1e-3, "{:,.1f}"),
    ("sites_open", "sites_open", 1.0, "{:.0f}"),
    ("upfront_capex_usd", "upfront_capex_musd", 1e-6, "{:,.1f}"),
]

# Column of a table -> (header with units, factor applied when written). Shares are written as %.
HEADERS: dict[str, tuple[str, float]] = {
    "plan": ("plan", 1), "baseline": ("baseline", 1), "status": ("status", 1), "gap": ("MIP gap, %", 100),
    "proof": ("what the solver proved", 1),
    "cost_musd_per_year": ("cost, $M/yr", 1), "cost_change_musd_per_year": ("cost change, $M/yr", 1),
    "cost_change_share": ("cost change, %", 100), "real_change_musd_per_year": ("real spend change, $M/yr", 1),
    "notional_change_musd_per_year": ("notional charges change, $M/yr", 1),
    "notional_musd_per_year": ("notional charges, $M/yr", 1), "notional_lines": ("notional lines", 1),
    "usd_per_m_tokens": ("cost per M tokens, $", 1), "mean_rtt_ms": ("mean RTT, ms", 1),
    "demand_within_budget": ("demand within RTT budget, %", 100), "it_mw_inference": ("inference IT, MW", 1),
    "it_mw_training": ("training IT, MW", 1), "emissions_kt_per_year": ("emissions, kt CO2/yr", 1),
    "emissions_change_kt_per_year": ("emissions change, kt CO2/yr", 1), "emissions_change_share": ("emissions change, %", 100),
    "sites_open": ("sites open", 1), "upfront_capex_musd": ("upfront capex, $M", 1),
    "sites_opened": ("sites opened", 1), "sites_closed": ("sites closed", 1), "top_movers": ("largest site changes", 1),
    "cause": ("cause (diagnosis or error)", 1), "overrides": ("overrides", 1), "scenario_hash": ("scenario hash", 1),
    "inputs_changed": ("inputs changed against the baseline", 1),
    "as_is": ("as-is plan: today's footprint held fixed", 1),
    "savings_vs_as_is_musd_per_year": ("saving against today's footprint (as-is baseline), $M/yr", 1), "gap_band_musd": ("solver uncertainty, ± $M/yr", 1),
    "within_gap": ("cost change within the solver's uncertainty", 1), "training_moves": ("training jobs moved", 1),
    "chip_changes": ("GPUs by chip, change", 1), "worst_loss_baseline": ("worst single-site loss, baseline", 1),
    "worst_loss_plan": ("worst single-site loss, plan", 1), "classes_protected": ("classes protected against a site loss", 1),
    "training_at_risk": ("training job-days at risk, worst loss", 1),
    "folder": ("folder", 1),
    # per-site deltas
    "site": ("site", 1), "site_id": ("site id", 1), "country": ("country", 1),
    "role_baseline": ("role, baseline", 1), "role_plan": ("role, plan", 1),
    "it_mw_baseline": ("IT MW, baseline", 1), "it_mw_plan": ("IT MW, plan", 1), "it_mw_change": ("IT MW, change", 1),
    "facility_mw_baseline": ("facility MW, baseline", 1), "facility_mw_plan": ("facility MW, plan", 1),
    "facility_mw_change": ("facility MW, change", 1),
    "racks_baseline": ("racks, baseline", 1), "racks_plan": ("racks, plan", 1), "racks_change": ("racks, change", 1),
    "cost_musd_baseline": ("cost, baseline, $M/yr", 1), "cost_musd_plan": ("cost, plan, $M/yr", 1),
    "cost_musd_change": ("cost change, $M/yr", 1),
    "emissions_t_baseline": ("emissions, baseline, t CO2/yr", 1), "emissions_t_plan": ("emissions, plan, t CO2/yr", 1),
    "emissions_t_change": ("emissions change, t CO2/yr", 1),
    # cost by category
    "category": ("cost category", 1), "notional": ("notional", 1),
    "baseline_musd_per_year": ("baseline, $M/yr", 1), "plan_musd_per_year": ("plan, $M/yr", 1),
    "change_musd_per_year": ("change, $M/yr", 1),
}
TABLE_COLUMNS = ["plan", "baseline", "status", "proof", "gap", "cost_musd_per_year", "cost_change_musd_per_year", "cost_change_share",
                 "real_change_musd_per_year", "notional_change_musd_per_year", "notional_musd_per_year", "notional_lines",
                 "usd_per_m_tokens", "mean_rtt_ms", "demand_within_budget", "it_mw_inference", "it_mw_training",
                 "emissions_kt_per_year", "emissions_change_kt_per_year", "emissions_change_share", "sites_open",
                 "upfront_capex_musd", "sites_opened", "sites_closed", "top_movers", "inputs_changed", "gap_band_musd", "within_gap",
                 "training_moves", "chip_changes", "worst_loss_baseline", "worst_loss_plan", "classes_protected", "training_at_risk",
                 "as_is", "savings_vs_as_is_musd_per_year", "cause", "overrides", "scenario_hash", "folder"]
SITE_COLUMNS = ["plan", "site", "site_id", "country", "role_baseline", "role_plan", "it_mw_baseline", "it_mw_plan", "it_mw_change",
                "facility_mw_baseline", "facility_mw_plan", "facility_mw_change", "racks_baseline", "racks_plan", "racks_change",
                "cost_musd_baseline", "cost_musd_plan", "cost_musd_change", "emissions_t_baseline", "emissions_t_plan",
                "emissions_t_change"]
COST_COLUMNS = ["plan", "category", "notional", "baseline_musd_per_year", "plan_musd_per_year", "change_musd_per_year"]

TRANSPORT_RATE = "economics.transport_usd_per_tok_s_1000km_year"
TOP_MOVERS = 5  # site changes named in a plan's story (the CSV and HTML list all)
MAP_MOVERS = 12  # labelled on the difference map


@dataclass(frozen=True)
class NamedPlan:
    """One answer to compare: a plan folder, or a batch member. `plan` is None for a member
    that left no plan.json (bad input, an error, a crash); `message` is batch.json's message
    and `overrides` the member's overrides (batch members only); `sweep` the batch's sweep."""

    label: str
    folder: Path
    plan: Plan | None
    status_: str = ""
    message: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)
    sweep: str = ""

    @property
    def status(self) -> str:
        return self.plan.solve.status if self.plan is not None else (self.status_ or "error")

    @property
    def has_plan(self) -> bool:
        return self.plan is not None and self.plan.solve.status in HAS_PLAN

    @property
    def cause(self) -> str:
        """Why there is no plan: the diagnosis, else batch.json's message, else the termination."""
        if self.has_plan:
            return ""
        if self.plan is not None and self.plan.diagnosis:
            return "; ".join(self.plan.diagnosis)
        return self.message or (self.plan.solve.termination if self.plan is not None else "no plan and no message")


def _recorded_overrides(plan: Plan) -> dict[str, Any]:
    found = (plan.provenance or {}).get("overrides") or {}
    return dict(found) if isinstance(found, dict) else {}


def overrides_text(overrides: dict[str, Any]) -> str:
    return "; ".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in overrides.items())


def collect_plans(paths: list[str | Path]) -> list[NamedPlan]:
    """Plan folders as given; a batch folder (with batch.json) stands for all its members in
    order, those without a plan included (plan None, with their status, message and overrides);
    a schedule folder (or member) for its periods' plans, labelled NAME@YEAR."""
    plans: list[NamedPlan] = []
    for path in map(Path, paths):
        if (path / "batch.json").is_file():
            try:
                doc = json.loads((path / "batch.json").read_text(encoding="utf-8"))
                members = [(m["name"], m.get("status", ""), m.get("message", ""), dict(m.get("overrides") or {})) for m in doc["members"]]
                sweep = str(doc.get("sweep", ""))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise NotAPlanFolder(f"{path}: batch.json is damaged ({type(exc).__name__}: {exc}). "
                                     "Fix: re-run the same `dcplace batch` command to rewrite it.") from exc
            entries = [(path / name, status, message, overrides, sweep) for name, status, message, overrides in members]
        elif (path / "plan.json").is_file():
            entries = [(path, "", "", {}, "")]
        elif (path / "schedule.json").is_file():
            entries = [(path, "", "", {}, "")]
        else:
            raise NotAPlanFolder(f"{path}: neither a plan folder (plan.json), a schedule folder (schedule.json) nor a batch folder "
                                 "(batch.json). Fix: give folders written by `dcplace solve` or `dcplace batch`.")
        for folder, status, message, overrides, sweep in _periods_of(entries):
            plan = None
            if (folder / "plan.json").is_file():
                try:
                    plan = read_plan(folder)
                except ValueError as exc:
                    raise NotAPlanFolder(f"{folder}: plan.json is damaged ({exc}). Fix: re-run the solve.") from exc
            if plan is not None and not overrides:  # a plan solved with --set records its overrides (issue 49)
                overrides = _recorded_overrides(plan)
            label = f"{folder.parent.parent.name}@{folder.name}" if (folder.parent.parent / "schedule.json").is_file() else folder.name
            plans.append(NamedPlan(label, folder, plan, status, message, overrides, sweep))
    labels = [p.label for p in plans]
    duplicates = {x for x in labels if labels.count(x) > 1}
    if duplicates:  # two folders of the same name from different places: qualify by parent
        plans = [NamedPlan(f"{p.folder.parent.name}/{p.label}" if p.label in duplicates else p.label, p.folder, p.plan,
                           p.status_, p.message, p.overrides, p.sweep) for p in plans]
    return plans


def _periods_of(entries: list[tuple]) -> list[tuple]:
    """A multi-period schedule folder (docs/periods.md) stands for its periods' plans, in order."""
    out = []
    for folder, status, message, overrides, sweep in entries:
        if (folder / "schedule.json").is_file() and (folder / "periods").is_dir():
            years = sorted(int(p.name) for p in (folder / "periods").iterdir() if p.name.isdigit())
            out += [(folder / "periods" / str(y), status, message, overrides, sweep) for y in years]
        else:
            out.append((folder, status, message, overrides, sweep))
    return out


def _open_sites(plan: Plan | None) -> dict[str, str]:
    return {s.id: s.name for s in plan.sites if s.open} if plan is not None else {}


def notional_by_category(p: NamedPlan) -> dict[str, float]:
    """The notional part of each cost line, USD/yr: the whole carbon line (a carbon price is a
    shadow charge that steers the plan, not money paid), and for a latency trade-off point
    (a member of a `pareto-latency` sweep) the part of the transport line from the weight it
    adds to the base rate."""
    costs = p.plan.cost_breakdown_usd_per_year if p.plan is not None else {}
    out = {"carbon": costs.get("carbon", 0.0)}
    rate = p.overrides.get(TRANSPORT_RATE)
    if p.sweep == "pareto-latency" and isinstance(rate, (int, float)) and rate > 0:
        base_rate = _base_rate_of_sweep(p)
        out["transport"] = costs.get("transport", 0.0) * max(0.0, rate - base_rate) / rate
    return out


def _scenario_transport_rate(folder: Path) -> float | None:
    try:
        import yaml

        spec = yaml.safe_load((folder / "inputs" / "scenario.yaml").read_text(encoding="utf-8"))
        return float((spec.get("economics") or {}).get("transport_usd_per_tok_s_1000km_year", 0.0))
    except Exception:  # noqa: BLE001 - unreadable: no base rate to subtract
        return None


def _base_rate_of_sweep(p: NamedPlan) -> float:
    """A pareto-latency point's base rate: that of the sweep's unweighted least-cost member."""
    rate = _scenario_transport_rate(p.folder.parent / "least-cost")
    return rate if rate is not None else 0.0


def _sum(costs: dict[str, float]) -> float:
    return float(sum(costs.values()))


def _nan(value: float | None, scale: float = 1.0) -> float:
    return np.nan if value is None else value * scale


def signed_money(usd: float) -> str:
    """`+$1.80 M`, `-$0.25 M`, `$0.00 M`: a change of money (style.money with a plus sign)."""
    text = money(usd)
    return f"+{text}" if not text.startswith("-") and round(usd / 1e6, 2) != 0 else text


def _mw(value: float) -> str:
    return f"{value:,.1f}"


def site_deltas(base: NamedPlan, plans: list[NamedPlan]) -> pd.DataFrame:
    """Per plan with a plan, one row per site open in the baseline or in any compared plan:
    role, IT and facility MW, racks, cost and emissions in baseline and plan and the change;
    each plan's rows sorted by the size of the IT MW change (then of the cost change)."""
    with_plan = [p for p in plans if p.has_plan]
    ids = set(_open_sites(base.plan)) | {i for p in with_plan for i in _open_sites(p.plan)}
    base_sites = {s.id: s for s in base.plan.sites}
    rows = []
    for p in with_plan:
        if p.label == base.label:
            continue
        sites = {s.id: s for s in p.plan.sites}
        block = []
        for sid in ids:
            b, s = base_sites.get(sid), sites.get(sid)
            ref = s or b
            row = {"plan": p.label, "site": ref.name, "site_id": sid, "country": ref.country,
                   "role_baseline": b.role if b is not None else "not a candidate", "role_plan": s.role if s is not None else "not a candidate"}
            for key, get, scale in (("it_mw", lambda x: x.it_kw, 1e-3), ("facility_mw", lambda x: x.facility_kw, 1e-3),
                                    ("racks", lambda x: x.racks_total, 1), ("cost_musd", lambda x: x.total_cost_usd_per_year, 1e-6),
                                    ("emissions_t", lambda x: x.emissions_t_per_year, 1)):
                before = get(b) * scale if b is not None else 0.0
                after = get(s) * scale if s is not None else 0.0
                row[f"{key}_baseline"], row[f"{key}_plan"], row[f"{key}_change"] = before, after, after - before
            block.append(row)
        block.sort(key=lambda r: (-round(abs(r["it_mw_change"]), 9), -abs(r["cost_musd_change"]), r["site"]))
        rows.extend(block)
    return pd.DataFrame(rows, columns=SITE_COLUMNS)


def mover_text(row: dict[str, Any]) -> str:
    """`Mumbai 91.8 -> 2.2 MW (-89.6)`, with `opened` or `closed` when the site's state changes."""
    before, after, change = row["it_mw_baseline"], row["it_mw_plan"], row["it_mw_change"]
    state = ""
    if row["role_baseline"] == "closed" and row["role_plan"] != "closed":
        state = ", opened"
    elif row["role_baseline"] != "closed" and row["role_plan"] == "closed":
        state = ", closed"
    elif row["role_baseline"] != row["role_plan"]:
        state = f", {row['role_baseline']} -> {row['role_plan']}"
    return f"{row['site']} {_mw(before)} -> {_mw(after)} MW ({_signed(change, 1)}{state})"


def cost_lines(base: NamedPlan, plans: list[NamedPlan]) -> pd.DataFrame:
    """Per plan with a plan: each cost category (and its notional part) in baseline and plan."""
    rows = []
    base_costs = base.plan.cost_breakdown_usd_per_year
    base_fake = notional_by_category(base)
    for p in plans:
        if not p.has_plan or p.label == base.label:
            continue
        costs, fake = p.plan.cost_breakdown_usd_per_year, notional_by_category(p)
        for category in list(dict.fromkeys([*CATEGORY_COLOURS, *base_costs, *costs])):
            for notional, before, after in ((False, base_costs.get(category, 0.0) - base_fake.get(category, 0.0),
                                             costs.get(category, 0.0) - fake.get(category, 0.0)),
                                            (True, base_fake.get(category, 0.0), fake.get(category, 0.0))):
                if before == 0 and after == 0 and (notional or category in fake or category in base_fake):
                    continue  # a line that is wholly notional (carbon) has no real part to list, and vice versa
                rows.append({"plan": p.label, "category": category, "notional": notional, "baseline_musd_per_year": before / 1e6,
                             "plan_musd_per_year": after / 1e6, "change_musd_per_year": (after - before) / 1e6})
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def comparison_table(plans: list[NamedPlan], baseline: str, sites: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per plan (members without a plan included): status, KPIs, cost change against
    the baseline split into real spend and notional charges, emissions change, sites
    opened/closed, the largest site changes, and for a plan-less member its cause and overrides."""
    base = _baseline(plans, baseline)
    if sites is None:
        sites = site_deltas(base, plans)
    base_cost = base.plan.objective_usd_per_year
    base_fake = _sum(notional_by_category(base))
    base_emissions = base.plan.kpis.get("emissions_t_per_year", np.nan)
    base_sites = _open_sites(base.plan)
    rows = []
    for p in plans:
        feasible = p.has_plan
        row: dict[str, object] = {"plan": p.label, "baseline": p.label == base.label, "status": p.status,
                                  "gap": p.plan.solve.gap if p.plan is not None and p.plan.solve.gap is not None else np.nan}
        for key, column, scale, _ in KPIS:
            row[column] = p.plan.kpis.get(key, np.nan) * scale if feasible else np.nan
        cost = p.plan.objective_usd_per_year if feasible else None
        fake = _sum(notional_by_category(p)) if feasible else np.nan
        change = (cost - base_cost) / 1e6 if cost is not None and base_cost is not None else np.nan
        row["cost_change_musd_per_year"] = change
        row["cost_change_share"] = (cost - base_cost) / base_cost if cost is not None and base_cost else np.nan
        row["notional_musd_per_year"] = fake / 1e6
        row["notional_change_musd_per_year"] = (fake - base_fake) / 1e6
        row["real_change_musd_per_year"] = change - row["notional_change_musd_per_year"]
        row["notional_lines"] = ", ".join(category_label(c) for c, v in notional_by_category(p).items() if abs(v) > 0.5) if feasible else ""
        emissions = p.plan.kpis.get("emissions_t_per_year", np.nan) if feasible else np.nan
        row["emissions_change_kt_per_year"] = (emissions - base_emissions) / 1e3
        row["emissions_change_share"] = (emissions - base_emissions) / base_emissions if base_emissions else np.nan
        open_now = _open_sites(p.plan)
        row["sites_opened"] = "; ".join(sorted(open_now[s] for s in open_now.keys() - base_sites.keys())) if feasible else ""
        row["sites_closed"] = "; ".join(sorted(base_sites[s] for s in base_sites.keys() - open_now.keys())) if feasible else ""
        mine = sites[sites["plan"] == p.label] if feasible and not row["baseline"] else sites.iloc[0:0]
        moved = [r for r in mine.to_dict(orient="records") if abs(r["it_mw_change"]) >= 0.05 or r["role_baseline"] != r["role_plan"]]
        row["top_movers"] = ", ".join(mover_text(r) for r in moved[:TOP_MOVERS])
        for key in ("worst_loss_baseline", "worst_loss_plan", "classes_protected", "training_at_risk"):
            row[key] = ""  # filled only for a plan whose N-1 policy differs (resilience_of)
        row["proof"] = _proof(p.plan) if feasible else ""
        row["inputs_changed"] = inputs_changed(base, p) if p.plan is not None and not row["baseline"] else ""
        band = max(_gap_usd(base.plan), _gap_usd(p.plan)) if feasible else np.nan
        row["gap_band_musd"] = band / 1e6
        row["within_gap"] = bool(abs(cost - base_cost) <= band) if feasible and not row["baseline"] else ""
        row["training_moves"] = training_moves(base.plan, p.plan) if feasible and not row["baseline"] else ""
        row["chip_changes"] = chip_changes(base.plan, p.plan) if feasible and not row["baseline"] else ""
        for key, value in resilience_of(base, p).items() if feasible and not row["baseline"] else ():
            row[key] = value
        row["as_is"] = bool(p.plan is not None and p.plan.as_is)
        # against an as-is baseline the change is what moving off today's footprint saves (docs/as-is.md)
        row["savings_vs_as_is_musd_per_year"] = -change if base.plan.as_is and not row["baseline"] else np.nan
        row["cause"] = p.cause
        row["overrides"] = overrides_text(p.overrides)
        row["scenario_hash"] = p.plan.scenario_hash if p.plan is not None else ""
        row["folder"] = str(p.folder)
        rows.append(row)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _proof(plan: Plan) -> str:
    """'proven optimal', 'proven within 0.48 %': what the solver proved, never a bare 'optimal'."""
    from dcplace.reports.summary import status_word

    return status_word(plan)


def _gap_usd(plan: Plan | None) -> float:
    """The solver's uncertainty on a plan's cost, USD/yr: objective - best bound (0 when proven
    optimal; the objective itself when no bound was proven)."""
    if plan is None or plan.objective_usd_per_year is None:
        return 0.0
    bound = plan.solve.best_bound_usd_per_year
    return abs(plan.objective_usd_per_year) if bound is None else max(plan.objective_usd_per_year - bound, 0.0)


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):  # an empty mapping is no value (it shows as 'none' against the other side's keys)
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def _inputs_of(folder: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A plan's inputs as it solved them: the scenario's sections flattened to paths, and the
    bytes of each table file (inputs/, written by dcplace in one canonical form)."""
    import yaml

    sections: dict[str, Any] = {}
    tables: dict[str, bytes] = {}
    try:
        spec = yaml.safe_load((folder / "inputs" / "scenario.yaml").read_text(encoding="utf-8")) or {}
        for key in ("economics", "latency", "policies", "clock"):
            _flat(key, spec.get(key) or {}, sections)
        for path in sorted((folder / "inputs").rglob("*.csv")):
            tables[str(path.relative_to(folder / "inputs"))] = path.read_bytes()
    except (OSError, ValueError, AttributeError):
        pass
    return sections, tables


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None or value == {} or value == [] else str(value)


def inputs_changed(base: NamedPlan, p: NamedPlan) -> str:
    """What differs in the inputs the two plans were solved on: each scenario value
    (`economics.carbon_price_usd_per_t 0 -> 100`) and each table file that differs."""
    a, ta = _inputs_of(base.folder)
    b, tb = _inputs_of(p.folder)
    parts = [f"{k} {_value_text(a.get(k))} -> {_value_text(b.get(k))}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    for name in sorted(set(ta) | set(tb)):
        if ta.get(name) != tb.get(name):
            parts += _table_changes(name, ta.get(name), tb.get(name))
    if not parts and base.plan is not None and p.plan is not None and base.plan.scenario_hash != p.plan.scenario_hash:
        parts.append("the scenarios differ (hash)")
    return "; ".join(parts) or "none"


TABLE_CHANGES_SHOWN = 6  # changed cells named per table; the rest are counted


def _table_changes(name: str, before: bytes | None, after: bytes | None) -> list[str]:
    """The cells that differ between two versions of an inputs/ table, by row id:
    `sites[tokyo].power_price_usd_per_mwh 80 -> 60` (at most TABLE_CHANGES_SHOWN, then a count)."""
    import io

    if before is None or after is None:
        return [f"{name} {'added' if before is None else 'removed'}"]
    try:
        a = pd.read_csv(io.BytesIO(before), dtype=str, keep_default_na=False)
        b = pd.read_csv(io.BytesIO(after), dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError):
        return [f"{name} differs"]
    key = "id" if "id" in a.columns and "id" in b.columns else None
    if key is None or a[key].duplicated().any() or b[key].duplicated().any():
        return [f"{name} differs"]
    table = name.rsplit("/", 1)[-1].removesuffix(".csv")
    a, b = a.set_index(key), b.set_index(key)
    changes = [f"{table}[{i}] added" for i in b.index.difference(a.index)] + [f"{table}[{i}] removed" for i in a.index.difference(b.index)]
    for i in a.index.intersection(b.index):
        for column in sorted(set(a.columns) | set(b.columns)):
            x, y = a.at[i, column] if column in a.columns else "", b.at[i, column] if column in b.columns else ""
            if x != y:
                changes.append(f"{table}[{i}].{column} {x or 'none'} -> {y or 'none'}")
    if len(changes) > TABLE_CHANGES_SHOWN:
        changes = changes[:TABLE_CHANGES_SHOWN] + [f"and {len(changes) - TABLE_CHANGES_SHOWN} more cells of {name}"]
    return changes or [f"{name} differs (formatting only)"]


def training_moves(base: Plan, plan: Plan) -> str:
    """Each training job whose site, chip or fabric changed: `Frontier: Montreal -> Cairo (b200 -> h100)`."""
    names = {s.id: s.name for s in [*base.sites, *plan.sites]}
    before = {j.job: j for j in base.jobs}
    out = []
    for j in plan.jobs:
        b = before.get(j.job)
        if b is None:
            out.append(f"{j.name}: new at {names.get(j.site, j.site)}")
            continue
        bits = []
        if b.site != j.site:
            bits.append(f"{names.get(b.site, b.site)} -> {names.get(j.site, j.site)}")
        if b.chip != j.chip:
            bits.append(f"{b.chip} -> {j.chip}")
        if b.fabric != j.fabric:
            bits.append(f"{b.fabric} -> {j.fabric}")
        if bits:
            out.append(f"{j.name}: " + ", ".join(bits))
    out += [f"{b.name}: dropped" for jid, b in before.items() if jid not in {j.job for j in plan.jobs}]
    return "; ".join(out) or "none"


def _gpus_by_chip(plan: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in plan.sites:
        for ln in s.racks:
            out[ln.chip] = out.get(ln.chip, 0) + ln.gpus
    return out


def chip_changes(base: Plan, plan: Plan) -> str:
    """Physical GPUs by chip, the change: `b200 +1,024; h100 -512` ('none' when the same)."""
    a, b = _gpus_by_chip(base), _gpus_by_chip(plan)
    parts = [f"{c} {b.get(c, 0) - a.get(c, 0):+,}" for c in sorted(set(a) | set(b)) if b.get(c, 0) != a.get(c, 0)]
    return "; ".join(parts) or "none"


def _worst_text(table) -> tuple[str, float]:
    worst = table.worst()
    peak = table.served_tok_s
    days = max((o.training_days_at_risk for o in table.outages), default=0.0)
    if worst is None or worst.at_risk_total_tok_s <= 1.0:
        return "no single-site loss leaves demand unserved", days
    share = f" ({worst.at_risk_total_tok_s / peak:.1%} of peak)" if peak else ""
    return f"{worst.name}: {tok_s_text(worst.at_risk_total_tok_s)}{share} unserved", days


def resilience_of(base: NamedPlan, p: NamedPlan) -> dict[str, str]:
    """What an N-1 policy buys, for a plan whose policy (policies.survive_site_loss) differs
    from the baseline's: the worst single-site loss before and after, the classes protected and
    the training job-days the worst loss of training puts at risk (the outage table's LP per
    open site, docs/resilience.md). Empty when neither plan names a class to survive."""
    a = (base.plan.solve.failover or {}).get("classes") or {}
    b = (p.plan.solve.failover or {}).get("classes") or {}
    if not a and not b:
        return {}
    from dcplace.reports.layers import load_plan_layers

    try:
        before, after = load_plan_layers(base.folder).outages, load_plan_layers(p.folder).outages
    except Exception:  # noqa: BLE001 - a folder whose inputs cannot be re-read: the columns stay empty
        return {}
    wb, db = _worst_text(before)
    wa, da = _worst_text(after)
    names = after.class_names
    protected = ", ".join(f"{short_name(names.get(w, w))} {v:.0%}" for w, v in sorted(b.items())) or "none"
    return {"worst_loss_baseline": wb, "worst_loss_plan": wa, "classes_protected": protected,
            "training_at_risk": f"{db:,.0f} -> {da:,.0f}"}


def _baseline(plans: list[NamedPlan], baseline: str) -> NamedPlan:
    base = next((p for p in plans if p.label == baseline), None)
    if base is None:
        raise ValueError(f"baseline '{baseline}' is not among the plans ({', '.join(p.label for p in plans)}); pass --baseline with one of them")
    if not base.has_plan:
        raise ValueError(f"baseline '{baseline}' has no plan ({base.status}: {base.cause}); pass --baseline with a plan that has one")
    return base


def story(row: dict[str, Any]) -> str:
    """One plan's change in a sentence: `+$43.60 M/yr (+3.5 %) = +$1.80 M real spend + $41.80 M
    notional (carbon); emissions -31.0 % (-250.3 kt CO2/yr)`."""
    if row["baseline"]:
        return "baseline: today's footprint, held as it is (as-is)" if row.get("as_is") is True else "baseline"
    if pd.isna(row["cost_change_musd_per_year"]):
        return f"no plan ({row['status']}): {row['cause']}"
    change, real, fake = (row[c] * 1e6 for c in ("cost_change_musd_per_year", "real_change_musd_per_year", "notional_change_musd_per_year"))
    text = f"{signed_money(change)}/yr ({_signed_pct(row['cost_change_share'])})"
    saving = row.get("savings_vs_as_is_musd_per_year")
    if saving is not None and not pd.isna(saving):
        verb = f"saves {money(saving * 1e6)}" if saving >= 0 else f"costs {money(-saving * 1e6)} more"
        text = f"{verb} a year against today's footprint (as-is): {text}"
    if abs(fake) >= 5e3:
        text += f" = {signed_money(real)} real spend {'+' if fake >= 0 else '-'} {money(abs(fake))} notional ({row['notional_lines'] or 'carbon'})"
    else:
        text += " (all real spend)"
    if row.get("within_gap") is True:
        text += f", within the solver's uncertainty (± {money(row['gap_band_musd'] * 1e6)}: the larger of the two plans' gaps)"
    if not pd.isna(row["emissions_change_share"]):
        text += f"; emissions {_signed_pct(row['emissions_change_share'])} ({_signed(row['emissions_change_kt_per_year'], 1)} kt CO2/yr)"
    return text


def _signed(value: float, decimals: int) -> str:
    """`+1.3`, `-0.4`, `0.0` (never `-0.0` nor `+0.0`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    rounded = round(float(value), decimals)
    if rounded == 0:
        return f"{0.0:,.{decimals}f}"
    return f"{rounded:+,.{decimals}f}"


def _signed_pct(share: float, decimals: int = 1) -> str:
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "—"
    return _signed(share * 100, decimals) + " %"


@dataclass
class Comparison:
    baseline: str
    plans: list[NamedPlan]
    table: pd.DataFrame  # one row per plan (TABLE_COLUMNS)
    sites: pd.DataFrame  # per-site deltas (SITE_COLUMNS)
    costs: pd.DataFrame  # cost by category (COST_COLUMNS)

    @property
    def failed(self) -> pd.DataFrame:
        """The rows of plans without a plan of their own (infeasible, bad input, error ...)."""
        return self.table[self.table["cause"] != ""]

    def stories(self) -> dict[str, str]:
        return {r["plan"]: story(r) for r in self.table.to_dict(orient="records")}


def build_comparison(plans: list[NamedPlan], baseline: str | None = None) -> Comparison:
    if not plans:
        raise ValueError("no plans to compare")
    baseline = baseline or next((p.label for p in plans if p.has_plan), plans[0].label)
    base = _baseline(plans, baseline)
    sites = site_deltas(base, plans)
    return Comparison(baseline, plans, comparison_table(plans, baseline, sites), sites, cost_lines(base, plans))


def _csv_digits(header: str) -> int | None:
    """Decimals a CSV column is written to, by its unit: what the figure means, not float noise
    (99.99999999999993 % is 100.0 %): $M to the cent, MW to 0.1 kW, % to 0.0001, ms to 1 µs; fine
    enough for a small test world, with no float noise."""
    for unit, digits in (("$M", 8), ("cost per M tokens, $", 6), ("MW", 4), ("%", 4), ("ms", 3), ("kt CO2", 4),
                         ("t CO2", 2), ("racks", 0)):
        if unit in header:
            return digits
    return None


def human_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame as written: shares as %, headers in words with units, text spreadsheet-safe."""
    out = frame.copy()
    for column in out.columns:
        header, factor = HEADERS.get(column, (column.replace("_", " "), 1))
        if factor != 1:
            out[column] = out[column] * factor
        digits = _csv_digits(header)
        if digits is not None and pd.api.types.is_float_dtype(out[column]):
            out[column] = out[column].round(digits) + 0.0  # + 0.0: no -0.0
    out.columns = [HEADERS.get(c, (c.replace("_", " "), 1))[0] for c in out.columns]
    return spreadsheet_frame(out)


# ----------------------------------------------------------------------------- figures


def _cost_figure(plans: list[NamedPlan]):
    bars = [(p.label, p.plan.cost_breakdown_usd_per_year) for p in plans if p.has_plan]
    return stacked_cost_figure(bars, list(CATEGORY_COLOURS), "Annual cost by category")


def _tradeoff_figure(table: pd.DataFrame, x: str, xlabel: str):
    fig, ax = plt.subplots(figsize=(6, 4.2), dpi=100)
    rows = table.dropna(subset=[x, "cost_musd_per_year"])
    ax.scatter(rows[x], rows["cost_musd_per_year"], color="#1b9e77", zorder=3)
    base = rows[rows["baseline"]]
    ax.scatter(base[x], base["cost_musd_per_year"], color="#d95f02", s=80, zorder=4, label="baseline")
    for r in rows.itertuples():
        ax.annotate(str(r.plan), (getattr(r, x), r.cost_musd_per_year), fontsize=7, xytext=(4, 3), textcoords="offset points", parse_math=False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("annual cost, USD M")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


def _waterfall_figure(base: NamedPlan, p: NamedPlan):
    return cost_waterfall_figure(base.plan.cost_breakdown_usd_per_year, p.plan.cost_breakdown_usd_per_year,
                                 list(dict.fromkeys([*CATEGORY_COLOURS, *p.plan.cost_breakdown_usd_per_year])),
                                 f"Annual cost: {base.label} → {p.label}",
                                 notional={c: v - notional_by_category(base).get(c, 0.0) for c, v in notional_by_category(p).items()},
                                 base_label=base.label, plan_label=p.label)


GROW_COLOUR, SHRINK_COLOUR, SAME_COLOUR = "#6a3d9a", "#e66101", "#9a9a9a"
CHANGE_LABEL_OFFSETS = [(6, 4), (6, -10), (-6, 4), (-6, -10), (0, 12), (0, -16), (14, 14), (-14, 14), (14, -20), (-14, -20),
                        (24, 0), (-24, 0), (0, 26), (0, -30)]


def _place_change_labels(ax, labelled: list) -> list:
    """Label the largest changes `Mumbai +1.3 MW` where no label overlaps another or the legend:
    the first of several offsets around the circle that is clear, with a leader line when it is
    not the nearest (labels used to pile up: 'Mumbai +1.3 MW MW'). Returns the labels drawn."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    taken = [legend.get_window_extent(renderer)] if legend is not None else []
    axes_box = ax.get_window_extent(renderer)
    drawn = []
    for r, x, y in labelled:
        for k, (dx, dy) in enumerate(CHANGE_LABEL_OFFSETS):
            label = ax.annotate(f"{r['site']} {r['it_mw_change']:+,.1f} MW", (x, y), xytext=(dx, dy), textcoords="offset points",
                                fontsize=7.5, zorder=4, parse_math=False, ha="left" if dx >= 0 else "right",
                                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
                                arrowprops={"arrowstyle": "-", "color": "#555555", "lw": 0.6} if k >= 4 else None)
            box = label.get_window_extent(renderer)
            inside = axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1 and axes_box.y0 <= box.y0 and box.y1 <= axes_box.y1
            if inside and not any(box.overlaps(t) for t in taken):
                taken.append(box)
                drawn.append(label)
                break
            label.remove()
    return drawn


def difference_map_figure(base: Plan, plan: Plan, title: str, rows: pd.DataFrame):
    """Sites coloured by IT MW change (purple grows, orange shrinks, grey unchanged) and sized
    by its size, the largest changes labelled, over the countries of data/geo (offline)."""
    coords = {s.id: (s.lon, s.lat) for s in [*base.sites, *plan.sites]}
    records = rows.to_dict(orient="records")
    lons = [coords[r["site_id"]][0] for r in records]
    lats = [coords[r["site_id"]][1] for r in records]
    fig, ax = plt.subplots(figsize=(7.2, 4.6), dpi=100)
    ax.set_facecolor(OCEAN_COLOUR)
    if lons:  # the sites' box, padded and widened to the figure's shape (lon degrees shrink by cos(lat))
        pad = max(3.0, 0.12 * max(max(lons) - min(lons), max(lats) - min(lats)))
        y0, y1 = max(-85.0, min(lats) - pad), min(85.0, max(lats) + pad)
        squeeze = max(0.2, math.cos(math.radians((y0 + y1) / 2)))
        half = max((max(lons) - min(lons)) / 2 + pad, (y1 - y0) * 1.45 / squeeze / 2)
        middle = (max(lons) + min(lons)) / 2
        x0, x1 = max(-180.0, middle - half), min(180.0, middle + half)
    else:
        x0, x1, y0, y1 = -180.0, 180.0, -60.0, 85.0
    try:
        countries().plot(ax=ax, color=LAND_COLOUR, edgecolor=BORDER_COLOUR, linewidth=0.6, zorder=1)
    except Exception:  # noqa: BLE001 - the dots still tell the story without the base map
        pass
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect(1.0 / max(0.2, math.cos(math.radians((y0 + y1) / 2))))
    biggest = max((abs(r["it_mw_change"]) for r in records), default=0.0) or 1.0
    for r, x, y in sorted(zip(records, lons, lats), key=lambda t: abs(t[0]["it_mw_change"])):
        change = r["it_mw_change"]
        colour = GROW_COLOUR if change >= 0.05 else SHRINK_COLOUR if change <= -0.05 else SAME_COLOUR
        size = 20 + 900 * abs(change) / biggest
        ax.scatter([x], [y], s=size, color=colour, alpha=0.75, edgecolor="white", linewidth=0.8, zorder=3)
    labelled = [t for t in sorted(zip(records, lons, lats), key=lambda t: -abs(t[0]["it_mw_change"])) if abs(t[0]["it_mw_change"]) >= 0.05]
    from matplotlib.lines import Line2D

    ax.legend(handles=[Line2D([], [], marker="o", linestyle="", color=GROW_COLOUR, label="more IT MW"),
                       Line2D([], [], marker="o", linestyle="", color=SHRINK_COLOUR, label="less IT MW"),
                       Line2D([], [], marker="o", linestyle="", color=SAME_COLOUR, label="unchanged")],
              fontsize=7.5, loc="lower left", framealpha=0.85)
    ax.set_title(title, loc="left", fontsize=11)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("")
    ax.set_ylabel("")
    fig.text(0.99, 0.01, "circle area ∝ |IT MW change|", ha="right", fontsize=7, color="#555555")
    fig.tight_layout()
    _place_change_labels(ax, labelled[:MAP_MOVERS])  # last: in the axes' final place
    return fig


# ----------------------------------------------------------------------------- writing


def _cell(value: Any, fmt: str) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def write_comparison(comparison: Comparison, out_dir: str | Path) -> list[Path]:
    """compare.csv, compare_sites.csv, compare_costs.csv and compare.html into out_dir."""
    check_destination(out_dir, "compare")  # refuse a bad --out before drawing, not after
    table, plans = comparison.table, comparison.plans
    base = _baseline(plans, comparison.baseline)
    figures = [_cost_figure(plans), _tradeoff_figure(table, "emissions_kt_per_year", "emissions, kt CO₂ per year"),
               _tradeoff_figure(table, "mean_rtt_ms", "demand-weighted mean RTT, ms")]
    sections = []
    try:
        images = [figure_data_uri(f) for f in figures]
        stories = comparison.stories()
        for p in plans:
            if not p.has_plan or p.label == base.label:
                continue
            rows = comparison.sites[comparison.sites["plan"] == p.label]
            waterfall = _waterfall_figure(base, p)
            figures.append(waterfall)
            dmap = difference_map_figure(base.plan, p.plan, f"IT MW change: {base.label} → {p.label}", rows)
            figures.append(dmap)
            sections.append({"plan": p.label, "story": stories[p.label], "waterfall": figure_data_uri(waterfall),
                             "map": figure_data_uri(dmap, "png", dpi=110), "sites": [_site_cells(r) for r in rows.to_dict(orient="records")],
                             "costs": [_cost_cells(r) for r in comparison.costs[comparison.costs["plan"] == p.label].to_dict(orient="records")
                                       if abs(r["baseline_musd_per_year"]) + abs(r["plan_musd_per_year"]) > 5e-7]})
    finally:
        for f in figures:
            plt.close(f)
    shown = []
    for row in table.to_dict(orient="records"):
        cells = {column: _cell(row[column], fmt) for _, column, _, fmt in KPIS}
        change = row["cost_change_musd_per_year"]
        cells["change"] = "—" if pd.isna(change) else f"{_signed(change, 2)} ({_signed_pct(row['cost_change_share'])})"
        if row.get("within_gap") is True:
            cells["change"] += " ≈ 0 within the gap"
        cells["real"] = _signed(row["real_change_musd_per_year"], 2)
        cells["notional"] = _signed(row["notional_change_musd_per_year"], 2)
        cells["emissions_change"] = _signed_pct(row["emissions_change_share"])
        shown.append({**row, "cells": cells, "story": stories[row["plan"]]})
    failed = [r for r in shown if r["cause"]]
    page = render_html("compare.html.j2", rows=shown, baseline=comparison.baseline, kpis=KPIS, images=images,
                       sections=sections, failed=failed, headers={k: v[0] for k, v in HEADERS.items()})
    with staged_files(out_dir, "compare") as stage:
        human_frame(table).to_csv(stage.dir / "compare.csv", index=False)
        human_frame(comparison.sites).to_csv(stage.dir / "compare_sites.csv", index=False)
        human_frame(comparison.costs).to_csv(stage.dir / "compare_costs.csv", index=False)
        (stage.dir / "compare.html").write_text(page, encoding="utf-8")
    return stage.moved


def _site_cells(r: dict[str, Any]) -> dict[str, Any]:
    return {**r, "cells": {
        "it_mw_baseline": f"{r['it_mw_baseline']:,.1f}", "it_mw_plan": f"{r['it_mw_plan']:,.1f}", "it_mw_change": _signed(r['it_mw_change'], 1),
        "facility_mw_baseline": f"{r['facility_mw_baseline']:,.1f}", "facility_mw_plan": f"{r['facility_mw_plan']:,.1f}",
        "facility_mw_change": _signed(r['facility_mw_change'], 1), "racks_baseline": f"{r['racks_baseline']:,.0f}",
        "racks_plan": f"{r['racks_plan']:,.0f}", "racks_change": _signed(r['racks_change'], 0),
        "cost_musd_baseline": f"{r['cost_musd_baseline']:,.2f}", "cost_musd_plan": f"{r['cost_musd_plan']:,.2f}",
        "cost_musd_change": _signed(r['cost_musd_change'], 2), "emissions_t_change": _signed(r['emissions_t_change'], 0)}}


def _cost_cells(r: dict[str, Any]) -> dict[str, Any]:
    label = category_label(r["category"]) + (" (notional)" if r["notional"] else "")
    return {**r, "label": label, "cells": {k: _signed(r[k], 2) if k.startswith("change") else f"{r[k]:,.2f}"
                                           for k in ("baseline_musd_per_year", "plan_musd_per_year", "change_musd_per_year")}}


def save_comparison(plans: list[NamedPlan], out_dir: str | Path, baseline: str | None = None) -> tuple[list[Path], pd.DataFrame]:
    """Build the comparison and write it into out_dir; return the paths and the per-plan table."""
    if not plans:
        raise ValueError("no plans to compare")
    check_destination(out_dir, "compare")
    comparison = build_comparison(plans, baseline)
    return write_comparison(comparison, out_dir), comparison.table
