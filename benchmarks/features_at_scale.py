"""The model's newer features at synthetic scale: the 24-hour clock, N-1 and periods (issue 20, item 3),
and the features switched on together on the default world ([solve] issue 53).

    python benchmarks/features_at_scale.py                                  # 200x1000 and 500x3000, 300 s each
    python benchmarks/features_at_scale.py --scales 200x1000 --limit 120
    python benchmarks/features_at_scale.py --scales default --features "carbon cap,clock 24 h+N-1+carbon cap" \
        --limit 120 --section features-combined                             # the default world, features at once

A feature may be several joined by "+": each is applied on top of the others (`carbon cap`: a cap
of CARBON_CAP_T on the scenario's emissions). `--scales default` is the embedded default world.

Each synthetic world is the one of the "Synthetic scales" table (models/synthetic.py, seed 7,
the full default catalog, 4 training jobs, a 25 x 45 degree box), written as a scenario
folder; each feature is a scenario that extends it:

- `base`: the world as it is (every site sized for the sum of the peaks it serves);
- `clock 24 h`: `clock.hours: 24` with the default's shipped daily profiles
  (data/default/profiles.csv), each region's offset from its position;
- `N-1`: `survive_site_loss` for chat and reasoning at their default failover budgets
  (2 x the serving budget; docs/resilience.md);
- `periods`: the default's three two-year periods (data/default/years.yaml's demand and
  power factors, without its site-specific power steps). Above --max-full-pairs each period is
  priced and planned alone, the plans bought forward are the start, and the bound is the sum of
  the periods' own bounds (optimizer/solving/periods.py, docs/periods.md).

Every run is `dcplace solve` as a library call (solve_to_folder / solve_schedule_to_folder,
so the independent checker passes judgement on each folder), in a child process of its own so
that its peak memory is its own, at 2 threads and the default gap (0.5 %). A run the library
refuses, or that finds no plan in its limit, is recorded as such with its message. Replaces the
"features-at-scale" section of benchmarks/RESULTS.md with what it measured.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import replace_section  # noqa: E402
from benchmarks.run import N_JOBS, SEED, _machine  # noqa: E402
from dcplace.optimizer.solvers.pairs import CAPACITY_COST, FULL_LP, LAGRANGIAN  # noqa: E402
from dcplace.optimizer.solving.periods import PERIOD_SUM  # noqa: E402
from dcplace.reports.style import money  # noqa: E402

SECTION = "features-at-scale"
FEATURES = ("base", "clock 24 h", "N-1", "periods")
DEFAULT_SCALES = ((200, 1000), (500, 3000))
BOUND_TAGS = {FULL_LP: " (full LP)", LAGRANGIAN: " (Lagrangian)", CAPACITY_COST: " (capacity-cost)",
              PERIOD_SUM: " (periods' sum)"}  # pairs.bound_kind
CARBON_CAP_T = 400_000.0  # t CO2/yr: the [solve] issue's combined case on the default world (its plan emits about 483,000 t)
CHILD_GRACE_S = 900  # a run's process is stopped this long after its time limit (model builds are not deadline-bound)


def feature_yaml(world_yaml: Path, feature: str, folder: Path, default_world: bool = False) -> Path:
    """A scenario file that extends a written world (`world_yaml`) with a feature, or with several
    joined by "+" ("clock 24 h+N-1+carbon cap": every one at once)."""
    from dcplace.models.files import default_scenario_path

    default = default_scenario_path().parent
    doc: dict = {"name": f"{'default' if default_world else 'synthetic'}-{feature.replace(' ', '-').replace('+', '-').lower()}",
                 "extends": str(world_yaml)}
    policies: dict = {}
    for part in feature.split("+"):
        if part == "clock 24 h":
            doc.update(profiles=str(default / "profiles.csv"), clock={"hours": 24})
        elif part == "N-1":
            policies["survive_site_loss"] = {"chat": 1.0, "reasoning": 1.0}
            if default_world:  # at chat's default 2 x 40 ms Cape Town has no backup (benchmarks/resilience.py)
                policies["failover_rtt_ms"] = {"chat": 100.0}
        elif part == "carbon cap":
            policies["carbon_cap_t_per_year"] = CARBON_CAP_T
        elif part == "periods":
            years = yaml.safe_load((default / "years.yaml").read_text())
            doc["periods"] = years["periods"]
        elif part != "base":
            raise ValueError(f"unknown feature {part!r}: one of base, clock 24 h, N-1, carbon cap, periods, joined by '+'")
    if policies:
        doc["policies"] = policies
    path = folder / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run_key(n_sites: int, n_regions: int, feature: str, limit_s: float) -> dict:
    """The columns that name a run in the table."""
    return {"scale": "default world" if n_sites == 0 else f"{n_sites} x {n_regions}", "feature": feature, "limit_s": limit_s}


def _scale(text: str) -> tuple[int, int]:
    """'200x1000' -> (200, 1000); 'default' -> (0, 0), the embedded default world."""
    return (0, 0) if text == "default" else tuple(int(v) for v in text.split("x"))


def one_run(n_sites: int, n_regions: int, feature: str, limit_s: float) -> dict:
    """One (scale, feature) solve, in this (child) process: the record of the table row."""
    from dcplace.models import load_scenario
    from dcplace.models.errors import ScenarioError
    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.models.writing import write_scenario
    from dcplace.optimizer.solving.pipeline import solve_schedule_to_folder, solve_to_folder
    from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions

    from dcplace.models.files import default_scenario_path

    row = _run_key(n_sites, n_regions, feature, limit_s)
    tmp = Path(tempfile.mkdtemp(prefix="dcplace-features-"))
    if n_sites == 0:  # the embedded default world
        world_yaml = default_scenario_path()
    else:
        write_scenario(synthetic_scenario(SEED, n_sites, n_regions, N_JOBS, box_deg=(25.0, 45.0)), tmp / "world")
        world_yaml = tmp / "world" / "scenario.yaml"
    options = SolveOptions(time_limit_s=limit_s, threads=2)
    started = time.perf_counter()
    try:
        scenario = load_scenario(feature_yaml(world_yaml, feature, tmp, default_world=n_sites == 0))
        if feature == "periods":
            schedule, plans, report = solve_schedule_to_folder(scenario, tmp / "out", options)
            s = schedule.solve
            row.update(objective=schedule.npv_usd, objective_unit="NPV", bound=s.best_bound_usd_per_year, gap=s.gap,
                       status=s.status, model=s.model, pairs=s.pairs, checked=report.ok)
        else:
            plan, report = solve_to_folder(scenario, tmp / "out", options)
            s = plan.solve
            row.update(objective=plan.objective_usd_per_year, objective_unit="/yr", bound=s.best_bound_usd_per_year, gap=s.gap,
                       status=s.status, model=s.model, pairs=s.pairs, checked=report.ok,
                       scenarios=(s.failover or {}).get("scenarios_generated"))
    except (NoPlanFound, InfeasibleScenario) as exc:
        row.update(status="no plan" if isinstance(exc, NoPlanFound) else "infeasible", note=str(exc).splitlines()[0])
    except ScenarioError as exc:
        row.update(status="refused", note=str(exc).splitlines()[0])
    row.update(wall_s=time.perf_counter() - started, peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return row


def run_child(n_sites: int, n_regions: int, feature: str, limit_s: float) -> dict:
    cmd = [sys.executable, __file__, "--one", f"{n_sites}x{n_regions}", feature, "--limit", str(limit_s)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s + CHILD_GRACE_S)
    except subprocess.TimeoutExpired:
        return {**_run_key(n_sites, n_regions, feature, limit_s), "status": "stopped",
                "note": f"still running {CHILD_GRACE_S} s after its time limit"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        reason = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return {**_run_key(n_sites, n_regions, feature, limit_s), "status": "crashed", "note": reason}
    return json.loads(lines[-1])


def _money(usd) -> str:
    return "" if usd is None else money(usd)


def _size(model: dict | None) -> str:
    if not model:
        return ""
    return f"{model.get('rows', 0):,} x {model.get('columns', 0):,}, {model.get('integers', 0):,}"


def render(rows: list[dict], command: str, measured_utc: str | None = None) -> str:
    """The section's text; `measured_utc` is when the rows were measured (now, unless they are re-read)."""
    from dcplace.models.versions import versions_line

    now = measured_utc or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        f"## {'Features at once on the default world' if all(r['scale'] == 'default world' for r in rows) else 'The newer features at synthetic scale'} "
        "(benchmarks/features_at_scale.py)", "",
        f"Measured {now} on {_machine()}; {versions_line()}. `{command}`.", "",
        "The synthetic worlds benchmarks/run.py builds for its scales (models/synthetic.py, seed 7, 4 jobs, the current "
        "default catalog), each solved as it is and with one feature on: "
        "`clock 24 h` (the shipped daily profiles), `N-1` (chat and reasoning survive the loss of any site, default "
        "failover budgets), `periods` (the default's three two-year periods). One child process per run, 2 threads, "
        "gap 0.5 %; `checked` is the independent checker's verdict on the folder written. A feature of several joined by "
        f"`+` has them all at once (`carbon cap`: {CARBON_CAP_T:,.0f} t CO2/yr; on the default world N-1 gives chat a "
        "100 ms failover budget, as benchmarks/resilience.py does). The objective of `periods` "
        "is the NPV of the schedule, the others' an annual cost.", "",
        "| scale | feature | limit | status | objective | bound | gap | wall s | model (rows x columns, integers) "
        "| pairs in model / eligible | N-1 scenarios | peak MB | checked | note |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        pairs = r.get("pairs") or {}
        pair_text = f"{pairs['pairs_in_model']:,} / {pairs['pairs_eligible']:,}" if {"pairs_in_model", "pairs_eligible"} <= set(pairs) \
            else ("all" if r.get("model") else "")
        gap = f"{100 * r['gap']:.2f} %" if r.get("gap") is not None else ""
        checked = {True: "pass", False: "FAIL"}.get(r.get("checked"), "")
        kind = BOUND_TAGS.get(pairs.get("bound_kind", ""), "")
        note = re.sub(r"^\S*(?:synthetic|default)-[\w-]+\.yaml, ", "", (r.get("note") or "")).replace("|", "/")  # not the run's temp path
        out.append(f"| {r['scale']} | {r['feature']} | {r['limit_s']:g} s | {r.get('status', '')} | {_money(r.get('objective'))} "
                   f"| {_money(r.get('bound'))}{kind} | {gap} | {r.get('wall_s', 0):.1f} | {_size(r.get('model'))} | {pair_text} "
                   f"| {r.get('scenarios') if r.get('scenarios') is not None else ''} | {r.get('peak_mb', 0):,.0f} | {checked} | {note} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scales", default=",".join(f"{a}x{b}" for a, b in DEFAULT_SCALES))
    parser.add_argument("--features", default=",".join(FEATURES))
    parser.add_argument("--limit", type=float, default=300.0)
    parser.add_argument("--one", nargs=2, metavar=("SCALE", "FEATURE"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    parser.add_argument("--section", default=SECTION, help="the RESULTS.md section to replace (a second table keeps the first)")
    args = parser.parse_args()
    if args.one:
        n_sites, n_regions = _scale(args.one[0])
        print(json.dumps(one_run(n_sites, n_regions, args.one[1], args.limit), default=str))
        return
    rows = []
    for scale in args.scales.split(","):
        n_sites, n_regions = _scale(scale)
        for feature in args.features.split(","):
            rows.append(run_child(n_sites, n_regions, feature, args.limit))
            print(rows[-1], flush=True)
    command = "python benchmarks/features_at_scale.py " + " ".join(sys.argv[1:])
    replace_section(args.out, args.section, render(rows, command.strip()))


if __name__ == "__main__":
    main()
