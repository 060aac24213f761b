"""Robustness to assumptions: re-solve the plan's scenario under sampled inputs, see which
decisions flip, what the recommended plan would cost too much in each (its regret), and which
inputs matter most (a tornado).

    from dcplace.optimizer.studies.robustness import robustness
    study = robustness("plan/", samples=50, workers=2)        # PLAN/why/robustness/
    study.flip_rates(), study.regret_quantiles(), study.tornado()

**Ranges follow provenance.** Each perturbed input cell has a basis in the provenance tables
(`provenance.csv` beside the scenario's tables; for a plan folder, whose inputs/ copy carries
none, the embedded default's provenance of every cell whose value equals the default's):
`source` and `derived` cells vary by +-5 %, `rule` fills and `assumption`s by +-25 %, and a
cell with no recorded provenance counts as an assumption (+-25 %). Cells are grouped by
(table, field, basis), e.g. "power price, rule-filled, 51 sites", and each group moves by one
factor per sample (a correlated error: a rule that fills 51 prices is wrong the same way in
all of them). By default the groups are the sites' power price, colocation price and fixed
cost (and grid carbon when carbon is priced or capped) and the discount rate: the prices a
plan is judged by, which leave every limit as it is, so the recommended plan stays feasible
in every sample and its regret is defined. Catalog cells (chip prices, cooling, fabrics) are
not perturbed: scenario overrides cannot address catalog tables yet (docs/batch.md). `ranges`
replaces the defaults: {override path: (low factor, high factor)}, any path the batch engine
accepts (`sites[country=US].power_price_usd_per_mwh`, `economics.discount_rate`, ...).

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
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dcplace.models import Scenario
from dcplace.models.provenance import input_provenance
from dcplace.models.plan import HAS_PLAN, Plan, read_plan
from dcplace.models.sweep import Member, Sweep, load_member
from dcplace.optimizer.model.formulation import OPTIMALITY_ROWS, build_model
from dcplace.optimizer.solving.precheck import checked_index
from dcplace.optimizer.studies.batch import Progress, run_batch, start_columns
from dcplace.optimizer.studies.explain import analysis_folder, plan_and_scenario, stamp, write_json

SOURCE_RANGE = 0.05
IMPUTED_RANGE = 0.25
BASIS_RANGE = {"source": SOURCE_RANGE, "derived": SOURCE_RANGE, "rule": IMPUTED_RANGE, "assumption": IMPUTED_RANGE}
BASIS_LABEL = {"source": "sourced", "derived": "derived from sources", "rule": "rule-filled", "assumption": "assumed",
               "as given": "no provenance"}
SITE_FIELDS = {"power_price_usd_per_mwh": "power price", "colocation_usd_per_kw_month": "colocation price",
               "fixed_cost_usd_per_year": "site fixed cost", "grid_carbon_g_per_kwh": "grid carbon"}
DEFAULT_SAMPLES = 50


@dataclass
class InputGroup:
    label: str
    paths: list[str]  # override paths moved together
    low: float  # factor
    high: float
    basis: str


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

    @classmethod
    def from_dict(cls, doc: dict) -> "RobustnessStudy":
        return cls(**{**doc, "groups": [InputGroup(**g) for g in doc["groups"]], "samples": [Sample(**s) for s in doc["samples"]]})


# ----------------------------------------------------------------------------- provenance


def cell_bases(scenario: Scenario) -> dict[tuple[str, str, str], str]:
    """(table, id, field) -> basis of the scenario's site cells (models.provenance)."""
    return {key: kind for key, (kind, _) in input_provenance(scenario).rows.items() if key[0] == "sites"}


def provenance_groups(scenario: Scenario) -> list[InputGroup]:
    """The default input groups (see the module docstring)."""
    bases = cell_bases(scenario)
    fields = ["power_price_usd_per_mwh", "colocation_usd_per_kw_month", "fixed_cost_usd_per_year"]
    if scenario.economics.carbon_price_usd_per_t > 0 or scenario.policies.carbon_cap_t_per_year is not None:
        fields.append("grid_carbon_g_per_kwh")
    forbidden = set(scenario.policies.forbidden_sites)
    groups = []
    for f in fields:
        by_basis: dict[str, list[str]] = defaultdict(list)
        for s in scenario.sites:
            if s.id not in forbidden and float(getattr(s, f)) != 0.0:
                by_basis[bases.get(("sites", s.id, f), "as given")].append(s.id)
        for basis, ids in sorted(by_basis.items()):
            r = BASIS_RANGE.get(basis, IMPUTED_RANGE)
            groups.append(InputGroup(f"{SITE_FIELDS[f]}, {BASIS_LABEL.get(basis, basis)} ({len(ids)} sites)",
                                     [f"sites[{i}].{f}" for i in ids], 1 - r, 1 + r, basis))
    groups.append(InputGroup("discount rate, assumed", ["economics.discount_rate"], 1 - IMPUTED_RANGE, 1 + IMPUTED_RANGE, "assumption"))
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
        for path in g.paths:
            out[path] = f"*{float(k):.6f}"
    return out


def _decisions(plan: Plan) -> dict[str, str]:
    return {s.id: s.role for s in plan.sites if s.open}


def _plan_cost_in(plan: Plan, base: Path, member: Member, max_full_pairs: int) -> float | None:
    """The recommended plan's annual cost under the member's inputs (None: it breaks a limit there)."""
    scenario = load_member(str(base), member)
    ix = checked_index(scenario, max_full_pairs)
    lm = build_model(ix, without=OPTIMALITY_ROWS)  # the plan as it is, idle open sites and all
    x = start_columns(plan, lm, ix)
    if x is None or not lm.is_feasible(x):
        return None
    return float(lm.objective() @ x)


def robustness(plan_folder: str | Path, samples: int = DEFAULT_SAMPLES, workers: int = 1,
               ranges: dict[str, tuple[float, float]] | None = None, seed: int = 0, out_dir: str | Path | None = None,
               options: dict[str, Any] | None = None, on_progress: Callable[[Progress], None] | None = None) -> RobustnessStudy:
    """Sample the inputs, re-solve each sample through the batch engine and summarise (module docstring);
    saved as PLAN/why/robustness/robustness.json beside one plan folder per sample."""
    if samples < 1 or workers < 1:
        raise ValueError("samples >= 1 and workers >= 1 are required")
    started = time.perf_counter()
    plan_folder = Path(plan_folder).resolve()
    plan, scenario = plan_and_scenario(plan_folder)
    groups = user_groups(ranges) if ranges else provenance_groups(scenario)
    factors = np.round(latin_hypercube(samples, groups, seed), 6)  # as written into the overrides
    members = [Member(f"sample-{i:03d}", _overrides(groups, factors[i])) for i in range(samples)]
    solve_options = {"time_limit_s": plan.solve.options.get("time_limit_s", 300.0), "mip_gap": plan.solve.options.get("mip_gap", 5e-3),
                     **(options or {})}
    folder = analysis_folder(plan_folder, "robustness", out_dir)
    base = plan_folder / "inputs" / "scenario.yaml"
    result = run_batch(Sweep("robustness", base, members, solve_options), folder, workers=workers, on_progress=on_progress,
                       starts={m.name: [plan_folder] for m in members})
    mine = _decisions(plan)
    max_pairs = int(plan.solve.options.get("max_full_pairs", 60_000))
    out = []
    for member, r, f in zip(members, result.results, factors):
        sample = Sample(member.name, [float(v) for v in f], r.status, message=r.message)
        if r.status in HAS_PLAN and r.objective_usd_per_year is not None:
            theirs = _decisions(read_plan(folder / member.name))
            sample.cost_usd_per_year, sample.gap = r.objective_usd_per_year, r.gap
            sample.flips = sorted(s for s in set(mine) | set(theirs) if mine.get(s) != theirs.get(s))
            sample.plan_cost_usd_per_year = _plan_cost_in(plan, base, member, max_pairs)
        out.append(sample)
    study = RobustnessStudy(stamp(plan), float(plan.objective_usd_per_year), mine, groups, out, seed, workers, solve_options,
                            time.perf_counter() - started, {s.id: s.name for s in plan.sites}, str(folder))
    write_json(folder / "robustness.json", study.to_dict())
    return study


__all__ = ["BASIS_RANGE", "DEFAULT_SAMPLES", "InputGroup", "RobustnessStudy", "Sample", "TornadoBar", "cell_bases",
           "latin_hypercube", "provenance_groups", "robustness", "user_groups"]
