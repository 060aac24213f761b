"""Robustness to assumptions: re-solve the plan's scenario under sampled inputs, see which
decisions flip, what the recommended plan would cost too much in each (its regret), and which
inputs matter most (a tornado).

    from dcplace.optimizer.studies.robustness import robustness
    study = robustness("plan/", samples=50, workers=2)        # PLAN/why/robustness/
    study.flip_rates(), study.regret_quantiles(), study.tornado()

**Ranges come from provenance.** Each perturbed input cell is looked up in the provenance tables
(`provenance.csv` beside the scenario's tables or in the plan's inputs/; for a plan folder whose
inputs/ carry none, the embedded default's provenance of every cell whose value equals the
default's). A cell whose row records a range (`low` < `high`: the spread of the markets that
publish the figure) moves over exactly that range. A cell with no range, or a one-figure range
(`low` = `high`: "one figure, no spread"), gets its basis's band around its value: `source` and
`derived` +-5 %, `rule` fills and `assumption`s +-25 %; a cell with no provenance at all counts as
an assumption. Cells are grouped by (table, field, basis), e.g. "colocation price, rule-filled (70
sites)", and each group moves by one position t in [0, 1] per sample, every cell of the group to
low + t (high - low) of its own range (a correlated error: a rule that fills 70 prices is wrong
the same way in all of them), so the sampled joint range is the box the sources give. By default
the groups are the sites' power price, colocation price and fixed cost (grid carbon too when
carbon is priced or capped; the build cost per MW and the campus economics when self-build is on)
and the discount rate: the prices a plan is judged by, which leave every limit as it is, so the
recommended plan stays feasible in every sample and its regret is defined. Power limits and floor
space are limits, not prices, and are not moved by default (a plan that does not fit a sample's
limits has no cost there); catalog cells (chip prices, cooling, fabrics) are not perturbed: scenario
overrides cannot address catalog tables yet (docs/batch.md). `ranges` replaces the defaults:
{override path: (low factor, high factor)}, any path the batch engine accepts
(`sites[country=US].power_price_usd_per_mwh`, `economics.discount_rate`, ...), each a factor on the
cell's value.

**Sampling.** `samples` Latin-hypercube draws of the group factors (seeded), each an ordinary
sweep member solved by the batch engine (parallel, resumable, every member a checked plan
folder) and started from the recommended plan (batch `starts`: it meets every limit of every
sample, so no member ends without a plan).

**Results.** Per sample: the least cost found, the recommended plan re-costed for the sample
(its regret is the difference: what choosing it cost in that world, at most the member's own
gap too high), and the sites whose open/closed state or role differs from the recommended
plan (flips). The tornado fits the least cost and the regret linearly on the group factors
over the samples (least squares) and reports each group's swing: its coefficient times its
range, the change from its low to its high end with the others at their means.

**Labels.** Each open site of the plan (with its role) and each training job's placement is
`robust` when the least-cost plan of every solved sample keeps it (the same site open in the
same role; the job at the same site), else `depends on <inputs>`: the input groups whose factor
separates the samples where it changes from those where it holds. The separation of a group is
the two-sample Kolmogorov-Smirnov statistic of its factor (the largest gap between the
empirical distributions of the factor in the changing and the holding samples, 0 to 1); the
groups named are those within `NAMED_SHARE` of the largest, at most `MAX_NAMED`, each with the
end of its range where the decision changes (the changing samples' median factor against the
holding samples'). The plan's own inputs count as one more holding sample (the decision holds
there by definition): where a recorded range lies mostly on one side of the plan's value, every
sample may differ from the plan, and the groups whose samples all lie away from the plan's
value are then the ones named. Labels are in robustness.json and labels.csv.

**A robust plan** (`robust_plan=True`; optimizer/studies/robust_plan.py): among the candidate
plans (the recommended one and each sample's least-cost plan) the one whose worst cost over the
samples is least, re-costed with its decisions held; written as a checked plan folder.
"""

from __future__ import annotations

import csv
import io
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dcplace.models import Scenario
from dcplace.models.provenance import AS_GIVEN, Provenance, basis, input_provenance
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.models.sweep import Member, Sweep
from dcplace.optimizer.studies.batch import Progress, run_batch
from dcplace.optimizer.studies.explain import analysis_folder, plan_and_scenario, stamp, write_file, write_json
from dcplace.optimizer.studies.robust_plan import DEFAULT_QUANTILE, cost_matrix
from dcplace.optimizer.studies.robust_plan import robust_plan as choose_robust_plan

SOURCE_RANGE = 0.05
IMPUTED_RANGE = 0.25
BASIS_RANGE = {"source": SOURCE_RANGE, "derived": SOURCE_RANGE, "rule": IMPUTED_RANGE, "assumption": IMPUTED_RANGE}
BASIS_LABEL = {"source": "sourced", "derived": "derived from sources", "rule": "rule-filled", "assumption": "assumed",
               "as given": "no provenance"}
SITE_FIELDS = {"power_price_usd_per_mwh": "power price", "colocation_usd_per_kw_month": "colocation price",
               "fixed_cost_usd_per_year": "site fixed cost", "grid_carbon_g_per_kwh": "grid carbon",
               "build_usd_per_mw": "build cost per MW"}
ECONOMICS_FIELDS = {"build_om_share_per_year": "self-build O&M share", "build_life_years": "self-build life",
                    "campus_fixed_usd_per_year": "campus fixed cost"}  # moved when self-build is on
DEFAULT_SAMPLES = 50
NAMED_SHARE = 0.75  # a group is named when its separation is at least this share of the largest
MAX_NAMED = 3
ROBUST = "robust"
POSITION = (0.0, 1.0)  # a group with cell ranges moves by a position within each cell's range


@dataclass
class InputGroup:
    label: str
    paths: list[str]  # override paths moved together
    low: float  # factor on each cell's value, or (with cell_ranges) position 0 within each cell's range
    high: float
    basis: str
    cell_ranges: list[list[float]] = field(default_factory=list)  # per path [low, high] in the cell's unit
    recorded: int = 0  # how many of the cells' ranges are recorded in provenance.csv (the others: the basis band)
    nominal: float = 1.0  # where the plan's own inputs sit: factor 1, or (cell_ranges) their mean position in their ranges

    def values(self, factor: float) -> list[str]:
        """The override value of each path at `factor` (position or factor)."""
        if self.cell_ranges:
            return [f"{lo + factor * (hi - lo):.10g}" for lo, hi in self.cell_ranges]
        return [f"*{float(factor):.6f}"] * len(self.paths)

    def range_text(self) -> str:
        if not self.cell_ranges:
            return f"x{self.low:.2f} to x{self.high:.2f}"
        lo = min(r[0] for r in self.cell_ranges)
        hi = max(r[1] for r in self.cell_ranges)
        return (f"{_num(lo)} to {_num(hi)}" + ("" if len(self.cell_ranges) == 1 else " (each cell its own)")
                + ("" if self.recorded == len(self.cell_ranges) else
                   f"; {len(self.cell_ranges) - self.recorded} of {len(self.cell_ranges)} on the basis band"))


def _num(x: float) -> str:
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"


@dataclass
class Sample:
    name: str
    factors: list[float]  # per group, in study.groups order
    status: str
    cost_usd_per_year: float | None = None  # the least cost found for the sample
    gap: float | None = None
    plan_cost_usd_per_year: float | None = None  # the recommended plan, re-costed for the sample
    flips: list[str] = field(default_factory=list)  # site ids whose state or role differs from the recommended plan
    message: str = ""
    job_flips: list[str] = field(default_factory=list)  # job ids placed at another site than in the recommended plan

    @property
    def regret_usd_per_year(self) -> float | None:
        if self.cost_usd_per_year is None or self.plan_cost_usd_per_year is None:
            return None
        return max(self.plan_cost_usd_per_year - self.cost_usd_per_year, 0.0)


@dataclass
class TornadoBar:
    label: str
    low: float
    high: float
    cost_swing_usd_per_year: float  # fitted change of the least cost from the low to the high end
    regret_swing_usd_per_year: float


@dataclass
class DecisionLabel:
    kind: str  # "site" (an open site and its role) or "job" (a training job's placement)
    id: str  # site id or job id
    name: str
    decision: str  # the plan's: the site's role, or the job's site id
    holds: int  # solved samples whose least-cost plan keeps it
    samples: int  # solved samples
    label: str  # "robust" or "depends on ..."
    inputs: list[str] = field(default_factory=list)  # the input groups named, most separating first
    separation: list[float] = field(default_factory=list)  # their KS statistics
    ends: list[str] = field(default_factory=list)  # "high" or "low": the end of each one's range where it changes

    @property
    def robust(self) -> bool:
        return self.label == ROBUST


@dataclass
class RobustnessStudy:
    plan: dict
    plan_objective_usd_per_year: float
    plan_roles: dict[str, str]
    groups: list[InputGroup]
    samples: list[Sample]
    seed: int
    workers: int
    options: dict[str, Any]
    seconds: float
    names: dict[str, str] = field(default_factory=dict)
    folder: str = ""
    plan_jobs: dict[str, str] = field(default_factory=dict)  # job id -> site id in the plan
    job_names: dict[str, str] = field(default_factory=dict)
    robust_share: float = 1.0  # a decision is robust when it holds in at least this share of the solved samples
    labels: list[DecisionLabel] = field(default_factory=list)
    robust_plan: dict | None = None  # optimizer.studies.robust_plan.RobustPlan.to_dict(), when asked for

    def solved(self) -> list[Sample]:
        return [s for s in self.samples if s.cost_usd_per_year is not None]

    def flip_rates(self) -> dict[str, float]:
        """Site id -> share of solved samples in which its decision differs from the plan's, most often first."""
        solved = self.solved()
        counts: dict[str, int] = defaultdict(int)
        for s in solved:
            for site in s.flips:
                counts[site] += 1
        return dict(sorted(((k, v / len(solved)) for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))) if solved else {}

    def regret_quantiles(self) -> dict[str, float]:
        regrets = [s.regret_usd_per_year for s in self.solved() if s.regret_usd_per_year is not None]
        if not regrets:
            return {}
        return {"p50": float(np.quantile(regrets, 0.5)), "p90": float(np.quantile(regrets, 0.9)), "max": float(max(regrets)),
                "mean": float(np.mean(regrets))}

    def tornado(self) -> list[TornadoBar]:
        """Each group's fitted swing of the least cost and of the regret, largest cost swing first."""
        solved = [s for s in self.solved() if s.regret_usd_per_year is not None]
        if len(solved) < len(self.groups) + 2:
            return []
        f = np.array([s.factors for s in solved])
        a = np.column_stack([np.ones(len(solved)), f - f.mean(axis=0)])
        cost = np.linalg.lstsq(a, np.array([s.cost_usd_per_year for s in solved]), rcond=None)[0][1:]
        regret = np.linalg.lstsq(a, np.array([s.regret_usd_per_year for s in solved]), rcond=None)[0][1:]
        bars = [TornadoBar(g.label, g.low, g.high, float(c * (g.high - g.low)), float(r * (g.high - g.low)))
                for g, c, r in zip(self.groups, cost, regret)]
        return sorted(bars, key=lambda b: -abs(b.cost_swing_usd_per_year))

    def to_dict(self) -> dict:
        return asdict(self)

    def label_of(self, kind: str, id: str) -> DecisionLabel | None:
        return next((x for x in self.labels if x.kind == kind and x.id == id), None)

    def decision_labels(self) -> list[DecisionLabel]:
        """Each open site (and its role) and each training job's placement, labelled (module docstring)."""
        solved = self.solved()
        out = []
        for kind, decisions, names, changed in (
                ("site", self.plan_roles, self.names, lambda s: s.flips),
                ("job", self.plan_jobs, self.job_names, lambda s: s.job_flips)):
            for id, decision in sorted(decisions.items()):
                flips = [id in changed(s) for s in solved]
                holds = len(flips) - sum(flips)
                label = DecisionLabel(kind, id, names.get(id, id), decision, holds, len(flips), ROBUST)
                if solved and holds < self.robust_share * len(flips) - 1e-9:
                    _name_inputs(label, self.groups, np.array([s.factors for s in solved]), np.array(flips),
                                 np.array([g.nominal for g in self.groups]))
                out.append(label)
        return out

    @classmethod
    def from_dict(cls, doc: dict) -> "RobustnessStudy":
        return cls(**{**doc, "groups": [InputGroup(**g) for g in doc["groups"]], "samples": [Sample(**s) for s in doc["samples"]],
                      "labels": [DecisionLabel(**x) for x in doc.get("labels", [])]})


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical
    distribution functions of a and b (0: the same; 1: fully separated)."""
    points = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), points, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), points, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def _name_inputs(label: DecisionLabel, groups: list[InputGroup], factors: np.ndarray, flips: np.ndarray,
                 nominal: np.ndarray) -> None:
    """Fill `label` for a decision that changes in some samples (module docstring, Labels); the
    plan's own inputs (`nominal`, where the decision holds by definition) count as a holding sample."""
    if not len(groups):
        label.label = "depends on the inputs"
        return
    changed, held = factors[flips], np.vstack([factors[~flips], nominal[None, :]])
    ks = [ks_statistic(changed[:, g], held[:, g]) for g in range(len(groups))]
    top = max(ks)
    order = [g for g in sorted(range(len(groups)), key=lambda g: -ks[g]) if ks[g] >= NAMED_SHARE * top][:MAX_NAMED]
    label.inputs = [groups[g].label for g in order]
    label.separation = [ks[g] for g in order]
    label.ends = ["high" if np.median(changed[:, g]) >= np.median(held[:, g]) else "low" for g in order]
    label.label = "depends on " + "; ".join(f"{groups[g].label} (changes when {end})" for g, end in zip(order, label.ends))


# ----------------------------------------------------------------------------- provenance


def cell_bases(scenario: Scenario, folder: Path | None = None) -> dict[tuple[str, str, str], str]:
    """(table, id, field) -> basis of the scenario's site cells (models.provenance)."""
    return {key: kind for key, (kind, _) in input_provenance(scenario, folder).rows.items() if key[0] == "sites"}


def cell_range(prov: Provenance, table: str, id: str, field: str, value: float) -> tuple[float, float, bool]:
    """(low, high, recorded) of one cell: its recorded range where provenance.csv gives one that
    is not a single figure, else its basis's band around `value` (module docstring)."""
    found = prov.range(table, id, field)
    if found is not None and found[1] > found[0]:
        return found[0], found[1], True
    r = BASIS_RANGE.get(basis(prov, table, id, field), IMPUTED_RANGE)
    return value * (1 - r), value * (1 + r), False


def _group(label: str, basis_: str, cells: list[tuple[str, float, float, bool, float]]) -> InputGroup:
    """A group of cells (path, low, high, recorded, value); its nominal position is the mean of its
    cells' (value - low) / (high - low), each clipped to [0, 1]."""
    spans = [(c[4] - c[1]) / (c[2] - c[1]) for c in cells if c[2] > c[1]]
    nominal = float(np.mean(np.clip(spans, 0.0, 1.0))) if spans else 0.5
    return InputGroup(label, [c[0] for c in cells], *POSITION, basis_, [[c[1], c[2]] for c in cells], sum(c[3] for c in cells), nominal)


def provenance_groups(scenario: Scenario, folder: Path | None = None) -> list[InputGroup]:
    """The default input groups and their ranges (see the module docstring)."""
    prov = input_provenance(scenario, folder)
    fields = ["power_price_usd_per_mwh", "colocation_usd_per_kw_month", "fixed_cost_usd_per_year"]
    if scenario.economics.carbon_price_usd_per_t > 0 or scenario.policies.carbon_cap_t_per_year is not None:
        fields.append("grid_carbon_g_per_kwh")
    self_build = scenario.economics.self_build and (scenario.economics.build_usd_per_mw is not None
                                                    or any(s.build_usd_per_mw is not None for s in scenario.sites))
    if self_build:
        fields.append("build_usd_per_mw")
    forbidden = set(scenario.policies.forbidden_sites)
    groups = []
    for f in fields:
        by_basis: dict[str, list[tuple[str, float, float, bool]]] = defaultdict(list)
        for s in scenario.sites:
            value = getattr(s, f)
            if s.id in forbidden or value is None or float(value) == 0.0:
                continue
            by_basis[basis(prov, "sites", s.id, f)].append((f"sites[{s.id}].{f}", *cell_range(prov, "sites", s.id, f, float(value)),
                                                            float(value)))
        for kind, cells in sorted(by_basis.items()):
            groups.append(_group(f"{SITE_FIELDS[f]}, {BASIS_LABEL.get(kind, kind)} ({len(cells)} site{'s' * (len(cells) != 1)})",
                                 kind, cells))
    economics = ["discount_rate"] + (list(ECONOMICS_FIELDS) if self_build else [])
    for f in economics:
        value = float(getattr(scenario.economics, f))
        kind = basis(prov, "economics", "default", f)
        kind = "assumption" if kind == AS_GIVEN else kind  # economics parameters without a row are the scenario's assumptions
        low, high, recorded = cell_range(prov, "economics", "default", f, value)
        if high > low:
            groups.append(_group(f"{ECONOMICS_FIELDS.get(f, f.replace('_', ' '))}, {BASIS_LABEL.get(kind, kind)}", kind,
                                 [(f"economics.{f}", low, high, recorded, value)]))
    return groups


def user_groups(ranges: dict[str, tuple[float, float]]) -> list[InputGroup]:
    groups = []
    for path, bounds in ranges.items():
        low, high = (float(b) for b in bounds)
        if not 0 < low <= high:
            raise ValueError(f"range for '{path}': give (low factor, high factor) with 0 < low <= high, not {bounds!r}")
        groups.append(InputGroup(path, [path], low, high, "given"))
    return groups


def latin_hypercube(n: int, groups: list[InputGroup], seed: int) -> np.ndarray:
    """n x groups factors: each group's range cut in n strata, one draw per stratum, strata shuffled per group."""
    rng = np.random.default_rng(seed)
    u = (np.argsort(rng.random((len(groups), n)), axis=1).T + rng.random((n, len(groups)))) / n
    low = np.array([g.low for g in groups])
    high = np.array([g.high for g in groups])
    return low + u * (high - low)


# ----------------------------------------------------------------------------- the study


def _overrides(groups: list[InputGroup], factors: np.ndarray) -> dict[str, str]:
    out = {}
    for g, k in zip(groups, factors):
        out.update(zip(g.paths, g.values(float(k))))
    return out


def _decisions(plan: Plan) -> dict[str, str]:
    return {s.id: s.role for s in plan.sites if s.open}


def _placements(plan: Plan) -> dict[str, str]:
    return {j.job: j.site for j in plan.jobs}


def _differs(mine: dict[str, str], theirs: dict[str, str]) -> list[str]:
    return sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))


def robustness(plan_folder: str | Path, samples: int = DEFAULT_SAMPLES, workers: int = 1,
               ranges: dict[str, tuple[float, float]] | None = None, seed: int = 0, out_dir: str | Path | None = None,
               options: dict[str, Any] | None = None, on_progress: Callable[[Progress], None] | None = None,
               robust_plan: bool = False, criterion: str = "worst", quantile: float = DEFAULT_QUANTILE,
               robust_share: float = 1.0) -> RobustnessStudy:
    """Sample the inputs, re-solve each sample through the batch engine, label the plan's decisions
    and summarise (module docstring); with `robust_plan`, also choose and write the robust plan
    (optimizer/studies/robust_plan.py). Saved as PLAN/why/robustness/robustness.json and labels.csv
    beside one plan folder per sample (and robust-plan/)."""
    if samples < 1 or workers < 1:
        raise ValueError("samples >= 1 and workers >= 1 are required")
    if not 0 < robust_share <= 1:
        raise ValueError("robust_share must be in (0, 1]")
    if criterion not in ("worst", "quantile") or not 0 < quantile <= 1:
        raise ValueError("criterion 'worst' or 'quantile' and 0 < quantile <= 1 are required")
    started = time.perf_counter()
    plan_folder = Path(plan_folder).resolve()
    plan, scenario = plan_and_scenario(plan_folder)
    groups = user_groups(ranges) if ranges else provenance_groups(scenario, plan_folder)
    factors = np.round(latin_hypercube(samples, groups, seed), 6)  # as written into the overrides
    members = [Member(f"sample-{i:03d}", _overrides(groups, factors[i])) for i in range(samples)]
    solve_options = {"time_limit_s": plan.solve.options.get("time_limit_s", 300.0), "mip_gap": plan.solve.options.get("mip_gap", 5e-3),
                     **(options or {})}
    folder = analysis_folder(plan_folder, "robustness", out_dir)
    base = plan_folder / "inputs" / "scenario.yaml"
    result = run_batch(Sweep("robustness", base, members, solve_options), folder, workers=workers, on_progress=on_progress,
                       starts={m.name: [plan_folder] for m in members})
    mine, my_jobs = _decisions(plan), _placements(plan)
    paths = [p for g in groups for p in g.paths]
    max_pairs = int(plan.solve.options.get("max_full_pairs", 60_000))
    matrix = cost_matrix(plan, folder if robust_plan else None, base, members, paths, scenario, max_pairs)
    out = []
    for member, r, f, plan_cost in zip(members, result.results, factors, matrix.costs[0]):
        sample = Sample(member.name, [float(v) for v in f], r.status, message=r.message)
        if r.status in HAS_PLAN and r.objective_usd_per_year is not None:
            theirs = read_plan(folder / member.name)
            sample.cost_usd_per_year, sample.gap = r.objective_usd_per_year, r.gap
            sample.flips = _differs(mine, _decisions(theirs))
            sample.job_flips = _differs(my_jobs, _placements(theirs))
            sample.plan_cost_usd_per_year = plan_cost
        out.append(sample)
    study = RobustnessStudy(stamp(plan), float(plan.objective_usd_per_year), mine, groups, out, seed, workers, solve_options,
                            0.0, {s.id: s.name for s in plan.sites}, str(folder), my_jobs,
                            {j.job: j.name for j in plan.jobs}, robust_share)
    study.labels = study.decision_labels()
    if robust_plan:
        study.robust_plan = choose_robust_plan(plan, scenario, matrix, folder, criterion, quantile).to_dict()
    study.seconds = time.perf_counter() - started
    write_labels(folder / LABELS_CSV, study.labels)
    write_json(folder / "robustness.json", study.to_dict())
    return study


LABELS_CSV = "labels.csv"
LABEL_COLUMNS = ("kind", "id", "name", "decision", "holds", "samples", "label", "inputs")


def write_labels(path: Path, labels: list[DecisionLabel]) -> None:
    """labels.csv: one row per labelled decision (inputs ';'-separated, most separating first)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(LABEL_COLUMNS)
    for x in labels:
        writer.writerow([x.kind, x.id, x.name, x.decision, x.holds, x.samples, x.label, ";".join(x.inputs)])
    write_file(path, buffer.getvalue().encode("utf-8"))


__all__ = ["BASIS_RANGE", "DEFAULT_SAMPLES", "DecisionLabel", "InputGroup", "LABELS_CSV", "ROBUST", "RobustnessStudy", "Sample",
           "TornadoBar", "cell_bases", "cell_range", "ks_statistic", "latin_hypercube", "provenance_groups", "robustness",
           "user_groups", "write_labels"]
