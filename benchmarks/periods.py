"""The default world over three periods (data/default/years.yaml): the schedule, its NPV and how
fast it is found.

    python benchmarks/periods.py                       # 120 s at gap 0.01, 600 s at gap 0.005, 2 threads
    python benchmarks/periods.py --runs 120:0.01 --threads 2

Solves the embedded default as `dcplace solve` does, then data/default/years.yaml once per run
(time limit : gap) through solve_schedule_to_folder (so the independent schedule checker passes on every
result). Records per run: the status, the NPV, the solver's bound and the gap, the wall time,
the time the first incumbent (each period's own plan, kept open and bought forward) took and
its NPV, and the model's size; then the schedule of the first run: per period the sites open,
IT MW, racks bought and retired, and the NPV by category. Replaces the "periods" section of
benchmarks/RESULTS.md with what it measured.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import replace_section  # noqa: E402
from benchmarks.run import _machine  # noqa: E402
from dcplace.models import load_scenario  # noqa: E402
from dcplace.models.files import default_scenario_path  # noqa: E402
from dcplace.models.versions import versions_line  # noqa: E402
from dcplace.optimizer.solving.pipeline import solve_schedule_to_folder, solve_to_folder  # noqa: E402
from dcplace.optimizer.solving.solve import SolveOptions  # noqa: E402
from dcplace.reports.style import category_label, money  # noqa: E402

YEARS = default_scenario_path().with_name("years.yaml")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", nargs="+", default=["120:0.01", "600:0.005"], help="time limit (s) : relative gap, per run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dcplace-periods-"))

    started = time.perf_counter()
    today, _ = solve_to_folder(load_scenario(), tmp / "today", SolveOptions(time_limit_s=300, mip_gap=5e-3, threads=args.threads))
    today_s = time.perf_counter() - started
    runs = []
    for i, run in enumerate(args.runs):
        limit, gap = (float(x) for x in run.split(":"))
        started = time.perf_counter()
        options = SolveOptions(time_limit_s=limit, mip_gap=gap, threads=args.threads)
        schedule, plans, report = solve_schedule_to_folder(load_scenario(YEARS), tmp / f"years-{i}", options)
        wall = time.perf_counter() - started
        runs.append((limit, gap, schedule, plans, report, wall))
        print(f"{limit:g} s: {schedule.solve.status}, NPV {money(schedule.npv_usd)}, gap {schedule.solve.gap:.2%}, {wall:.1f} s", flush=True)

    lines = [
        "## Plan the years: the default world over three periods (benchmarks/periods.py)",
        "",
        f"Measured {_machine()}; {versions_line()}. "
        f"`python benchmarks/periods.py --runs {' '.join(args.runs)} --threads {args.threads}`; wall times are end to end "
        "(load, each period's own plan, the search, extraction, writing and the independent check).",
        "",
        "Scenario: `data/default/years.yaml`, the default world in 2026-27, 2028-29 and 2030-31 (demand x1.754 and x3.065 "
        "for inference, x1.444 and x2.043 for training; market power x1.651 and x2.724 except seven markets with dated steps; "
        "liquid readiness $995/kW, retrofit $2,000/kW); NPV at 2026 at 8 %/yr.",
        "",
        "| run | time limit | asked gap | threads | status | NPV | solver's bound | gap | wall time | model (rows x columns, integers) | independent check |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |",
        f"| today (one year, no periods) | 300 s | 0.5 % | {args.threads} | {today.solve.status} | {money(today.objective_usd_per_year)}/yr | — | "
        f"{today.solve.gap:.2%} | {today_s:.1f} s | {today.solve.model['rows']:,} x {today.solve.model['columns']:,}, "
        f"{today.solve.model['integers']:,} | pass |",
    ]
    for limit, gap, schedule, _, report, wall in runs:
        s = schedule.solve
        lines.append(f"| three periods | {limit:g} s | {gap:.1%} | {args.threads} | {s.status} | {money(schedule.npv_usd)} | "
                     f"{money(s.best_bound_usd_per_year) if s.best_bound_usd_per_year is not None else '—'} | "
                     f"{s.gap:.2%} | {wall:.1f} s | {s.model['rows']:,} x {s.model['columns']:,}, {s.model['integers']:,} | "
                     f"{'pass' if report.ok else 'FAIL'} |")
    lines.append("")
    first_limit, _, first, plans, _, first_wall = runs[0]
    met = first.solve.gap is not None and first.solve.gap <= 0.01 and first_wall <= 120.0
    lines.append(f"- Target (within 1 % in at most 120 s on 2 cores): {'met' if met else 'not met'} in the first run "
                 f"({first.solve.gap:.2%} in {first_wall:.1f} s end to end). The first incumbent is each period's own plan "
                 "(solved alone at a 1 % gap, up to 40 % of the limit), kept open and bought forward; "
                 f"start: {first.solve.warm_start}. What bounds it: the search after that start, on a model "
                 f"{first.solve.model['columns'] / max(today.solve.model['columns'], 1):.1f} times today's size.")
    lines.append("")
    bought = Counter()
    gpus = Counter()
    for b in first.builds:
        if b.kind == "racks":
            bought[b.year] += b.count
            gpus[b.year] += b.count * b.gpus_per_rack
    lines.append(f"The schedule (first run): NPV {money(first.npv_usd)}; the three periods as annualized years:")
    lines.append("")
    lines.append("| period | sites open | IT MW (inference + training) | racks bought (GPUs) | annual cost as one year | operating NPV |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for p in first.periods:
        lines.append(f"| {p.year}-{p.year + p.years - 1} | {p.sites_open} | {p.it_mw:,.1f} ({p.inference_it_mw:,.1f} + {p.training_it_mw:,.1f}) | "
                     f"{bought[p.year]:,} ({gpus[p.year]:,}) | {money(p.annual_usd_per_year)} | {money(p.operating_npv_usd)} |")
    lines.append("")
    parts = ", ".join(f"{category_label(c)} {money(v)}" for c, v in sorted(first.npv_breakdown_usd.items(), key=lambda cv: -cv[1]))
    ready = sum(h.ready_kw for h in first.halls) / 1000
    retrofit = sum(h.retrofit_kw for h in first.halls) / 1000
    lines.append(f"NPV by category: {parts}. Liquid halls: {ready:,.2f} MW built ready, {retrofit:,.2f} MW retrofitted.")
    opened = [{s.id for s in plan.sites if s.open} for plan, _ in plans]
    new = [sorted(b - a) for a, b in zip(opened, opened[1:])]
    lines.append("Sites opened after the first period: " + "; ".join(
        f"{first.periods[i + 1].year}: {', '.join(n) or 'none'}" for i, n in enumerate(new)) + ".")
    replace_section(args.out, "periods", "\n".join(lines))
    print(f"wrote the periods section of {args.out}")


if __name__ == "__main__":
    main()
