"""The engine against the bare engines on hard facility-location instances (issue [solve]).

    python benchmarks/race.py                          # OR-Library capa/capb/capc (12 problems), 300 s each
    python benchmarks/race.py --time-limit 120 --instances capa_8000,capa_14000
    python benchmarks/race.py --generated 3            # also Cornuejols-type instances made here (3 capacity ratios)

For each instance, in one run on one machine:
  1. bare HiGHS and bare SCIP (OR-Tools' bundled SCIP) on the textbook CFLP model
     (min Σ f_i y_i + Σ c_ij x_ij, Σ_i x_ij = 1, Σ_j d_j x_ij <= s_i y_i, x_ij <= y_i; 1 thread,
     the same gap and time limit), side by side, one process each: the two-core portfolio a
     user could run by hand;
  2. then the engine alone (`dcplace.solve`, threads=1, the race on: it uses both cores).
Each run is its own process, so its memory and its time are its own. Times are from model
build to answer. The section `race` of RESULTS.md is rewritten with the machine, versions
and date; the other sections are kept.

Generated instances (`gen-SEED-MxN-RATIO`) follow Cornuejols, Sridharan & Thizy (1991):
dcplace.models.synthetic.cflp_instance. They have no published optimum: the best plan of
the three runs is the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.orlib import CAPACITIES, as_scenario, instances, optima, parse_cap  # noqa: E402
from benchmarks.results import replace_section  # noqa: E402
from dcplace.models.synthetic import cflp_instance  # noqa: E402
from dcplace.models.versions import versions_line  # noqa: E402

SECTION = "race"
GAP = 1e-6
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
KILL_AFTER_S = 120  # a run still going this long after its limit is stopped and recorded as such
MATCH_TOL = 1e-4  # relative, "within 0.01 % of the published optimum"


def load(name: str) -> dict:
    if name.startswith("gen"):  # gen-SEED-MxN-RATIO
        _, seed, size, ratio = name.split("-")
        m, n = (int(v) for v in size.split("x"))
        return cflp_instance(int(seed), m, n, float(ratio))
    (found,) = instances([name])
    return parse_cap(found[1], found[2])


def textbook(data: dict):
    """The textbook CFLP as a dcplace LinearModel (y binary open, x share in [0, 1])."""
    from dcplace.optimizer.model.linear import LinearModel

    m, n = data["m"], data["n"]
    d = np.asarray(data["d"], dtype=float)
    lm = LinearModel("textbook")
    lm.add_block("y", list(range(m)), 0, 1, "binary")
    lm.add_block("x", [(i, j) for i in range(m) for j in range(n)], 0, 1, "continuous")
    lm.add_costs("fixed", np.arange(m), np.asarray(data["f"], dtype=float))
    lm.add_costs("serve", m + np.arange(m * n), np.asarray(data["c"], dtype=float).ravel())
    x = lambda i, j: m + i * n + j  # noqa: E731
    for j in range(n):
        lm.add_row("demand", j, [(x(i, j), 1.0) for i in range(m)], 1.0, 1.0)
    for i in range(m):
        lm.add_row("capacity", i, [(x(i, j), d[j]) for j in range(n)] + [(i, -float(data["s"][i]))], upper=0.0)
    rows = np.arange(m * n)
    lm.add_rows("link", list(range(m * n)), np.stack([m + rows, rows // n], axis=1), np.tile([1.0, -1.0], (m * n, 1)), upper=0.0)
    return lm


def run_one(way: str, name: str, limit_s: float) -> dict:
    """One run in this process: 'bare-highs', 'bare-scip' or 'engine'."""
    data = load(name)
    started = time.perf_counter()
    if way == "engine":
        from dcplace.optimizer import NoPlanFound, SolveOptions, solve

        scenario = as_scenario(name, data)
        try:
            plan = solve(scenario, SolveOptions(mip_gap=GAP, time_limit_s=limit_s, threads=1))
        except NoPlanFound as exc:
            plan = exc.plan
        s = plan.solve
        race = s.race or {}
        return {"objective": plan.objective_usd_per_year, "bound": s.best_bound_usd_per_year, "status": s.status,
                "seconds": time.perf_counter() - started, "winner": race.get("winner"), "bound_from": race.get("bound_from"),
                "race": race.get("skipped", ""), "pairs_path": bool(s.pairs), "termination": s.termination[:300]}
    lm = textbook(data)
    if way == "bare-highs":
        from dcplace.optimizer.solvers.highs_model import to_highs

        h = to_highs(lm, 1)
        h.setOptionValue("mip_rel_gap", GAP)
        h.setOptionValue("time_limit", max(limit_s - (time.perf_counter() - started), 0.01))
        h.run()
        info = h.getInfo()
        feasible = info.primal_solution_status == 2
        return {"objective": info.objective_function_value if feasible else None, "bound": info.mip_dual_bound,
                "status": h.modelStatusToString(h.getModelStatus()), "seconds": time.perf_counter() - started}
    from ortools.linear_solver.python import model_builder as mb

    from dcplace.optimizer.solvers.scip_racer import write_mps

    path = Path(f"/tmp/race-bench-{os.getpid()}.mps")
    write_mps(lm, path)
    model = mb.Model()
    model.import_from_mps_file(str(path))
    path.unlink()
    solver = mb.Solver("scip")
    solver.set_time_limit_in_seconds(max(limit_s - (time.perf_counter() - started), 0.01))
    solver.set_solver_specific_parameters(f"limits/gap = {GAP}\nparallel/maxnthreads = 1")
    result = solver.solve(model)
    feasible = result in (mb.SolveStatus.OPTIMAL, mb.SolveStatus.FEASIBLE)
    return {"objective": solver.objective_value if feasible else None, "bound": solver.best_objective_bound if feasible else None,
            "status": result.name, "seconds": time.perf_counter() - started}


def spawn(way: str, name: str, limit_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--one", way, name, str(limit_s)], stdout=subprocess.PIPE, text=True)


def collect(process: subprocess.Popen, limit_s: float) -> dict:
    try:
        out, _ = process.communicate(timeout=limit_s + KILL_AFTER_S)
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as exc:
        process.kill()
        return {"objective": None, "bound": None, "status": f"failed: {type(exc).__name__}", "seconds": float("nan")}


def compare(names: list[str], limit_s: float, together: bool = False, on_row=None) -> list[dict]:
    """Each instance: the bare pair side by side, then the engine; or (`together`) all three at
    once, so that each run sees the same load of a shared machine at the same moment (four
    processes: each engine's share of the cores is the same, the engine's two racers included).
    `on_row(rows)`, if given, hears the rows so far after each instance."""
    published = optima()
    rows = []
    for name in names:
        bare = [spawn("bare-highs", name, limit_s), spawn("bare-scip", name, limit_s)]
        if together:
            running = spawn("engine", name, limit_s)
            highs, scip = (collect(p, limit_s) for p in bare)
            engine = collect(running, limit_s)
        else:
            highs, scip = (collect(p, limit_s) for p in bare)
            engine = collect(spawn("engine", name, limit_s), limit_s)
        reference = published.get(name)
        best_plan = min([r["objective"] for r in (highs, scip, engine) if r["objective"] is not None], default=None)
        rows.append({"instance": name, "published": reference, "best_plan": best_plan, "highs": highs, "scip": scip, "engine": engine})
        print(json.dumps(rows[-1]), flush=True)
        if on_row is not None:
            on_row(rows)
    return rows


def _above(value, reference) -> str:
    if value is None or reference is None:
        return "no plan"
    return f"{100 * (value - reference) / reference:+.3f} %"


def _proved(run: dict, gap: float = 1e-4) -> bool:
    o, b = run.get("objective"), run.get("bound")
    return o is not None and b is not None and (o - b) <= gap * abs(o)


def table(rows: list[dict], limit_s: float) -> str:
    lines = [f"Each instance: bare HiGHS and bare SCIP (1 thread each, the textbook model) and the engine (threads=1; its race "
             f"runs a second process). Gap {GAP:g}, {limit_s:g} s each. Above = against the published optimum "
             f"(OR-Library) or, for generated instances, the best plan of the three runs. A time in bold is a proof "
             f"within 0.01 %.", "",
             "| instance | engine above | engine s | engine plan / bound from | bare HiGHS above | HiGHS s | bare SCIP above | SCIP s | "
             "engine s / faster bare s |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    ratios = []
    for r in rows:
        reference = r["published"] or r["best_plan"]
        e, h, s = r["engine"], r["highs"], r["scip"]
        bare_times = [x["seconds"] for x in (h, s) if _proved(x)]
        faster = min(bare_times) if bare_times else limit_s
        ratio = e["seconds"] / faster if e["seconds"] == e["seconds"] else float("nan")
        ratios.append(ratio)
        fmt = lambda x: f"**{x['seconds']:.1f}**" if _proved(x) else f"{x['seconds']:.1f}"  # noqa: E731
        lines.append(f"| {r['instance']} | {_above(e['objective'], reference)} | {fmt(e)} | {e.get('winner')} / "
                     f"{e.get('bound_from')}{' (' + e['race'] + ')' if e.get('race') else ''} | {_above(h['objective'], reference)} | "
                     f"{fmt(h)} | {_above(s['objective'], reference)} | {fmt(s)} | {ratio:.2f} |")
    within = sum(1 for r in rows if r["engine"]["objective"] is not None and (r["published"] or r["best_plan"])
                 and abs(r["engine"]["objective"] - (r["published"] or r["best_plan"])) <= MATCH_TOL * (r["published"] or r["best_plan"]))
    median = float(np.nanmedian(ratios)) if ratios else float("nan")
    lines += ["", f"Engine within 0.01 % of the reference: {within}/{len(rows)}. Median of engine time / faster bare engine's "
              f"time (the limit where neither bare engine proved): {median:.2f}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", nargs=3, metavar=("WAY", "NAME", "LIMIT"), help=argparse.SUPPRESS)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--instances", default=None, help="comma-separated names (default: capa/capb/capc)")
    parser.add_argument("--generated", type=int, default=0, help="also this many generated instances (ratios 1.5, 3, 5, 10)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md as it is")
    parser.add_argument("--together", action="store_true", help="run the engine and the two bare engines at once "
                        "(a shared, loaded machine: all three see the same load)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], float(args.one[2]))), flush=True)
        # as the CLI does (cli.main): a HiGHS run abandoned at its deadline would hold the interpreter's
        # exit for up to 600 s (highs_model._quiet_abandoned_runs); the answer is out, the run is over
        os._exit(0)
    names = args.instances.split(",") if args.instances else [f"{k}_{c}" for k, caps in CAPACITIES.items() for c in caps]
    names += [f"gen-{k}-100x1000-{ratio}" for k, ratio in enumerate([1.5, 3, 5, 10][: args.generated])]
    started, load = datetime.now(timezone.utc), os.getloadavg()[0]

    def body(rows: list[dict]) -> str:
        unfinished = "" if len(rows) == len(names) else (
            f" **{len(rows)} of the {len(names)} instances so far** (the section is rewritten after each instance: "
            f"a run stopped early keeps what it finished; still to come: {', '.join(names[len(rows):])}).")
        return (f"## The race: engine against bare HiGHS and bare SCIP (benchmarks/race.py)\n\n"
                f"Measured {started:%Y-%m-%d %H:%M} UTC on {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
                f"{versions_line()}; load average when it started {load:.1f}, "
                f"{'all three runs of an instance at once (--together)' if args.together else 'bare pair, then the engine'}; "
                f"`{' '.join(['python benchmarks/race.py', *sys.argv[1:]])}`.{unfinished}"
                f"\n\n{table(rows, args.time_limit)}\n")

    def write(rows: list[dict]) -> None:
        if not args.no_write:
            replace_section(RESULTS, SECTION, body(rows))

    rows = compare(names, args.time_limit, args.together, on_row=write)
    print(body(rows))


if __name__ == "__main__":
    main()
