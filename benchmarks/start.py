"""Offer HiGHS a start, or hold it back? The same scenarios solved both ways, in one run.

    python benchmarks/start.py                      # the default and the 50 x 200 scale, 1 thread
    python benchmarks/start.py --threads 2 --limit 300

`optimizer/solvers/backends.py` holds the warm start (and a caller's start plan) back from
HiGHS until its root is over and switches its feasibility jump off (`HOLD_BACK_START`):
with an incumbent known before the root's cut loop, HiGHS 1.16 spent tens of seconds in its
first separation round of the world default. This script measures that choice against the old one (the start
handed to HiGHS with `setSolution`, feasibility jump on) on the same machine in the same
run, and replaces the "start" section of benchmarks/RESULTS.md with what it measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import replace_section  # noqa: E402
from benchmarks.run import _machine  # noqa: E402
from dcplace.models import load_scenario  # noqa: E402
from dcplace.models.synthetic import synthetic_scenario  # noqa: E402
from dcplace.models.versions import versions_line  # noqa: E402
import dcplace.optimizer.solvers.backends as backends  # noqa: E402
from dcplace.optimizer.solving.solve import NoPlanFound, SolveOptions, solve  # noqa: E402
from dcplace.reports.style import money  # noqa: E402


def scenarios() -> list[tuple[str, object]]:
    return [
        ("default (76 x 536)", load_scenario(None)),
        ("synthetic 50 x 200", synthetic_scenario(7, 50, 200, 4, box_deg=(25.0, 45.0))),
    ]


def run(scenario, hold: bool, options: SolveOptions) -> dict:
    backends.HOLD_BACK_START = hold
    started = time.perf_counter()
    try:
        plan = solve(scenario, options)
    except NoPlanFound as exc:
        plan = exc.plan
    finally:
        backends.HOLD_BACK_START = True
    r = plan.solve
    return dict(wall_s=time.perf_counter() - started, status=r.status, objective=r.objective_usd_per_year, gap=r.gap,
                bound=r.best_bound_usd_per_year, termination=r.termination)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    options = SolveOptions(threads=args.threads, time_limit_s=args.limit)
    rows, ratios = [], []
    for name, scenario in scenarios():
        measured = {}
        for hold in (False, True):
            measured[hold] = m = run(scenario, hold, options)
            gap = f"{m['gap']:.2%}" if m["gap"] is not None else ""
            cost = money(m["objective"]) if m["objective"] is not None else "no plan"
            rows.append(f"| {name} | {'held back to the end of the root, feasibility jump off' if hold else 'offered to HiGHS at the start'} | {m['status']} | "
                        f"{cost} | {gap} | {m['wall_s']:.1f} | {m['termination'][:90]} |")
            print(rows[-1], flush=True)
        ratios.append(f"{name}: offered / held back wall time {measured[False]['wall_s'] / measured[True]['wall_s']:.2f}")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join([
        "## The start: offered to HiGHS or held back (benchmarks/start.py)",
        "",
        f"Measured {now} on {_machine()}; {versions_line()}. "
        f"`python benchmarks/start.py --threads {args.threads} --limit {args.limit:g}`.",
        "",
        "Each scenario solved twice in this run, default gap (0.5 %): the warm start handed to HiGHS as its first "
        "incumbent (as before), and held back (`HOLD_BACK_START`, optimizer/solvers/backends.py): HiGHS searches "
        "without it and without its feasibility jump through its root, the plan is handed over once the root is over, "
        "the search stops once HiGHS's dual bound proves the held plan within the gap, and the cheaper of the two plans "
        "is returned.",
        "",
        "| scenario | start | status | annual cost | gap | wall s | termination |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
        *rows,
        "",
        *[f"- {r}." for r in ratios],
    ])
    replace_section(args.out, "start", body)


if __name__ == "__main__":
    main()
