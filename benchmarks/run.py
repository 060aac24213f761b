"""Run the benchmarks and write benchmarks/RESULTS.md (measured, never typed in).

    python benchmarks/run.py                 # OR-Library cap41-cap134 and the 50x200 scale
    python benchmarks/run.py --large         # also 200x1000, 500x3000 and 2000x10000
    python benchmarks/run.py --hard          # also capa/capb/capc (100 x 1000, 4 capacities each)
    python benchmarks/run.py --quick         # cap41-cap74 and 50x200 only (the CI smoke set)
    python benchmarks/run.py --scales 50x200,200x1000 --extra capa_8000 --time-limit 300
                                             # pick scales; add single hard instances

Each synthetic scale runs in its own process so that its peak memory is its own.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.orlib import as_scenario, bare_highs, instances, optima, parse_cap  # noqa: E402
from benchmarks.results import marked_sections  # noqa: E402
from dcplace.models.versions import versions_line  # noqa: E402

QUICK_CAPS = ["cap41", "cap42", "cap43", "cap44", "cap51", "cap61", "cap62", "cap63", "cap64", "cap71", "cap72", "cap73", "cap74"]
SCALES = [(50, 200)]
LARGE_SCALES = [(200, 1000), (500, 3000), (2000, 10000)]
N_JOBS = 4
SEED = 7
BUILD_GRACE_S = 300  # a scale's process is stopped this long after its time limit


def run_orlib(names: list[str] | None, time_limit_s: float) -> list[dict]:
    from dcplace.optimizer import NoPlanFound, SolveOptions, solve

    published = optima()
    rows = []
    for name, path, capacity in instances(names):
        data = parse_cap(path, capacity)
        scenario = as_scenario(name, data)
        started = time.perf_counter()
        try:
            plan = solve(scenario, SolveOptions(mip_gap=0.0, time_limit_s=time_limit_s))
        except NoPlanFound as exc:
            plan = exc.plan
        engine_s = time.perf_counter() - started
        bare_objective, bare_s = bare_highs(data, time_limit_s)
        objective = plan.objective_usd_per_year if plan.objective_usd_per_year is not None else float("nan")
        rows.append({
            "instance": name, "size": f"{data['m']}x{data['n']}", "published": published[name], "engine": objective,
            "rel_diff": abs(objective - published[name]) / published[name], "status": plan.solve.status,
            "engine_s": engine_s, "solver_s": plan.solve.solve_time_s, "bare_s": bare_s, "bare": bare_objective,
        })
        print(f"{name}: {objective:.3f} vs {published[name]:.3f} in {engine_s:.2f} s (bare {bare_s:.2f} s)", flush=True)
    return rows


def one_scale(n_sites: int, n_regions: int, time_limit_s: float) -> dict:
    """Solve one synthetic scale; runs in a child process (see --one-scale)."""
    from dcplace.models.plan import write_plan_folder
    from dcplace.models.synthetic import synthetic_scenario
    from dcplace.optimizer import NoPlanFound, SolveOptions, solve
    from dcplace.optimizer.check import check_plan_folder

    scenario = synthetic_scenario(SEED, n_sites, n_regions, N_JOBS, box_deg=(25.0, 45.0))
    started = time.perf_counter()
    try:
        plan = solve(scenario, SolveOptions(time_limit_s=time_limit_s, threads=2))
    except NoPlanFound as exc:
        return {"sites": n_sites, "regions": n_regions, "status": "no plan", "note": str(exc), **exc.plan.solve.model,
                "pairs": exc.plan.solve.pairs, "build_s": exc.plan.solve.build_time_s, "solver_s": exc.plan.solve.solve_time_s,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    total = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        write_plan_folder(plan, scenario, Path(tmp) / "plan")
        check_started = time.perf_counter()
        report = check_plan_folder(Path(tmp) / "plan")
        check_s = time.perf_counter() - check_started
    s = plan.solve
    return {
        "sites": n_sites, "regions": n_regions, **s.model, "build_s": s.build_time_s, "solver_s": s.solve_time_s,
        "extract_s": s.extract_time_s, "check_s": check_s, "total_s": total + check_s, "gap": s.gap, "status": s.status,
        "objective": plan.objective_usd_per_year, "bound": s.best_bound_usd_per_year, "pairs": s.pairs,
        "warm_start": s.warm_start, "checker_ok": report.ok, "violations": [str(v) for v in report.violations[:3]],
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_scales(scales, time_limit_s: float) -> list[dict]:
    out = []
    for n_sites, n_regions in scales:
        proc = subprocess.run(
            [sys.executable, __file__, "--one-scale", str(n_sites), str(n_regions), "--time-limit", str(time_limit_s)],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            stopped = {-signal.SIGALRM: f"still running {BUILD_GRACE_S} s after its time limit, stopped"}
            reason = (proc.stderr.strip().splitlines() or [stopped.get(proc.returncode) or (
                f"ended by signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}")])[-1]
            out.append({"sites": n_sites, "regions": n_regions, "status": "crashed", "note": reason})
        else:
            out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(out[-1], flush=True)
    return out


def _machine() -> str:
    import os

    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gb:.0f} GB, Python {platform.python_version()}, {platform.platform()}"


def write_results(orlib_rows: list[dict], scale_rows: list[dict], command: str, path: Path) -> None:
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `{command}` on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.",
        f"Machine: {_machine()}.",
        f"Versions: {versions_line()}.",
        "",
        "## OR-Library capacitated facility location (through the engine)",
        "",
        "Each instance is a dcplace scenario (sites, regions, pair costs; see benchmarks/orlib.py), solved at gap 0 with",
        "HiGHS on 1 thread. `engine s` is load-to-plan (index sets, model build, solve, extraction); `bare s` builds and",
        "solves the textbook CFLP directly in highspy. Tolerance against the published optimum: 1e-6 relative.",
        "",
        "| instance | size | published optimum | engine objective | rel. diff | status | engine s | solver s | bare s | engine / bare |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in orlib_rows:
        lines.append(
            f"| {r['instance']} | {r['size']} | {r['published']:,.3f} | {r['engine']:,.3f} | {r['rel_diff']:.1e} | {r['status']} | "
            f"{r['engine_s']:.2f} | {r['solver_s']:.2f} | {r['bare_s']:.2f} | {r['engine_s'] / max(r['bare_s'], 1e-9):.1f} |"
        )
    if orlib_rows:
        matched = sum(r["rel_diff"] <= 1e-6 for r in orlib_rows)
        lines += ["", f"Matched {matched} of {len(orlib_rows)} published optima within 1e-6."]
    lines += [
        "",
        "## Synthetic scales (models/synthetic.py, seed 7, full default catalog, 4 training jobs)",
        "",
        "HiGHS, 2 threads, default gap (0.5 %), time limit as in the command. Build = index sets + the LinearModel",
        "(built again over the final pairs after pricing); solver = pricing LPs + warm start + MIP. Above",
        "`--max-full-pairs` (60,000) eligible serving pairs the model starts from candidate pairs and prices the rest in",
        "(optimizer/pairs.py): `pairs` is then in the model / eligible, and the gap is measured against the full",
        "model's LP bound that pricing proves, not the restricted MIP's own bound. `checked` is the independent",
        "checker's verdict on the plan folder. Peak memory is the child process's maximum resident set.",
        "",
        "| sites x regions | pairs | rounds | rows | columns | integers | build s | solver s | extract s | check s | total s | (build+extract) / solver | peak MB | gap | status | checked |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in scale_rows:
        if "rows" not in r:
            lines.append(f"| {r['sites']} x {r['regions']} | | | | | | | | | | | | | | {r['status']}: {r.get('note')} | |")
            continue
        gap = f"{r['gap']:.2%}" if r.get("gap") is not None else ""
        pairs = r.get("pairs") or {}
        pair_text = f"{pairs['pairs_in_model']:,} / {pairs['pairs_eligible']:,}" if pairs else "all"
        if r["status"] == "no plan":
            r["total_s"] = r["build_s"] + r["solver_s"]
        ratio = f"{(r['build_s'] + r.get('extract_s', 0)) / max(r['solver_s'], 1e-9):.2f}" if r["status"] != "no plan" else ""
        checked = "" if "checker_ok" not in r else "yes" if r["checker_ok"] else "NO: " + "; ".join(r.get("violations", []))
        lines.append(
            f"| {r['sites']} x {r['regions']} | {pair_text} | {pairs.get('pricing_rounds', '')} | {r['rows']:,} | {r['columns']:,} | "
            f"{r['integers']:,} | {r['build_s']:.1f} | {r['solver_s']:.1f} | {r.get('extract_s', 0):.1f} | {r.get('check_s', 0):.1f} | "
            f"{r.get('total_s', 0):.1f} | {ratio} | {r['peak_mb']:,.0f} | {gap} | {r['status']} | {checked} |"
        )
    kept = marked_sections(path.read_text()) if path.exists() else []  # other scripts' sections
    path.write_text("\n".join(lines) + "\n" + "".join("\n" + section for section in kept))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--hard", action="store_true")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--scales", help="comma-separated SITESxREGIONS, replacing the default scales")
    parser.add_argument("--extra", help="comma-separated OR-Library instance names to add, e.g. capa_8000")
    parser.add_argument("--one-scale", nargs=2, type=int)
    parser.add_argument("--memory-limit-gb", type=float, default=16.0, help="address-space cap of each scale's process")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    if args.one_scale:
        # Guard the machine: a scale that outgrows memory or hangs in the model build (which
        # no solver time limit reaches) ends its own process and is recorded as crashed.
        limit = int(args.memory_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        signal.alarm(int(args.time_limit + BUILD_GRACE_S))
        print(json.dumps(one_scale(*args.one_scale, args.time_limit)))
        return
    names = QUICK_CAPS if args.quick else [n for n, _, _ in instances() if "_" not in n]
    if args.hard:
        names += [n for n, _, _ in instances() if "_" in n]
    if args.extra:
        names += [n for n in args.extra.split(",") if n not in names]
    scales = SCALES + (LARGE_SCALES if args.large and not args.quick else [])
    if args.scales:
        scales = [tuple(int(v) for v in item.lower().split("x")) for item in args.scales.split(",")]
    orlib_rows = run_orlib(names, args.time_limit)
    scale_rows = run_scales(scales, args.time_limit)
    write_results(orlib_rows, scale_rows, "python benchmarks/run.py " + " ".join(sys.argv[1:]), args.out)


if __name__ == "__main__":
    main()
