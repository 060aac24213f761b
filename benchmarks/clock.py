"""The clock on the default world: coincident sizing, troughs, rentals, and what they cost to solve.

    python benchmarks/clock.py                       # 24 hours and 6 blocks, each routed by the day and by the hour
    python benchmarks/clock.py --limit 120 --blocks 6 3 --routing day
    python benchmarks/clock.py --hour-limit 1200     # the runs routed per hour get 1,200 s

In one run: the embedded default as `dcplace solve` solves it (every site sized for the sum
of the peaks it serves), then the same world with the clock on (`clock.hours: 24`; the
shipped daily profiles), with the shipped cloud regions for rent, and with the post-training
and fine-tuning jobs interruptible (`interruptible: true`, GPU-hours a day = their GPUs x 24,
inference racks on a tier-2 RoCE network so that the tier-2 jobs may use them), then the
same with k representative blocks instead of 24 hours; each clock run routed by the day (one share
per region, class and site: `clock.routing: day`) and by the hour (`clock.routing: hour`, a share per
represented hour). Every plan goes through
solve_to_folder, so the independent checker passes on it. Records the cost against the
peak-sum model, the inference MW saved, the training absorbed by the troughs, what is rented
where, the solve time and gap, what k blocks cost in accuracy, and what routing per hour saves and
costs to solve. Replaces the "clock"
section of benchmarks/RESULTS.md with what it measured.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import replace_section  # noqa: E402
from benchmarks.run import _machine  # noqa: E402
from dcplace.models import default_scenario_path, load_scenario  # noqa: E402
from dcplace.models.versions import versions_line  # noqa: E402
from dcplace.optimizer.solving.pipeline import solve_to_folder  # noqa: E402
from dcplace.optimizer.solving.solve import NoPlanFound, SolveOptions  # noqa: E402
from dcplace.reports.style import money  # noqa: E402

INTERRUPTIBLE = ("posttrain", "finetune-eu", "finetune-apac")
PLAIN = "clock, 24 hours, day routing, the default as it ships (no job interruptible, no cloud regions)"


def clock_overrides(hours: int, routing: str = "day") -> dict:
    out = {"clock.hours": hours, "clock.inference_fabric_tier": 2, "clock.routing": routing}
    for j in INTERRUPTIBLE:
        out[f"jobs[{j}].interruptible"] = True
    return out


def with_clouds(folder: Path) -> Path:
    """The default with the shipped cloud regions for rent (a scenario that extends it)."""
    path = folder / "default-with-clouds.yaml"
    clouds = default_scenario_path().parent / "cloud_regions.csv"
    path.write_text(f"name: default-world-clock\nextends: default\ncloud_regions: {clouds}\n")
    return path


def clock_cases(blocks: list[int]) -> list[tuple[int, str]]:
    """(clock.hours, label) of the clock runs: every hour, then each number of blocks."""
    return [(24, "24 hours")] + [(k, f"{k} blocks") for k in blocks]


def inference_mw(plan) -> float:
    return sum(ln.it_kw for s in plan.sites for ln in s.racks if ln.purpose == "inference") / 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=float, default=300.0)
    parser.add_argument("--hour-limit", type=float, default=None,
                        help="time limit of the runs routed per hour (a larger model); default --limit")
    parser.add_argument("--blocks", type=int, nargs="*", default=[6])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--routing", nargs="*", choices=("day", "hour"), default=["day", "hour"],
                        help="routing of the clock runs: by the day, by the hour, or both (the default)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dcplace-clock-"))
    options = SolveOptions(time_limit_s=args.limit, mip_gap=5e-3, threads=args.threads)
    runs, failed = [], []
    plan_runs = [("peak sum (today)", 0, "day"), (PLAIN, 24, "plain")] + [
        (f"clock, {what}, {routing} routing", hours, routing) for hours, what in clock_cases(args.blocks) for routing in args.routing]
    for label, hours, routing in plan_runs:
        if routing == "plain":  # what `dcplace solve --set clock.hours=24` solves
            scenario = load_scenario(None, overrides={"clock.hours": hours})
        else:
            scenario = load_scenario(with_clouds(tmp), overrides=clock_overrides(hours, routing)) if hours else load_scenario()
        started = time.perf_counter()
        try:
            limit = args.hour_limit if routing == "hour" and args.hour_limit else args.limit
            plan, report = solve_to_folder(scenario, tmp / f"h{hours}-{routing}", replace(options, time_limit_s=limit))
        except NoPlanFound as exc:
            print(f"{label}: no plan in {time.perf_counter() - started:.1f} s ({exc})", flush=True)
            failed.append((label, time.perf_counter() - started, str(exc)))
            continue
        wall = time.perf_counter() - started
        runs.append((label, hours, routing, plan, wall, report.ok))
        print(f"{label}: {money(plan.objective_usd_per_year)} {plan.solve.status} gap {plan.solve.gap} in {wall:.1f} s, "
              f"check {report.ok}", flush=True)
    write(args, runs, failed)


def write(args, runs, failed) -> None:
    lines = ["## The clock: coincident sizing on the default world (benchmarks/clock.py)", ""]
    lines.append(f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {_machine()}; {versions_line()}. "
                 f"`python benchmarks/clock.py --limit {args.limit:g} --blocks {' '.join(map(str, args.blocks))} --threads {args.threads} "
                 f"--routing {' '.join(args.routing)}"
                 f"{f' --hour-limit {args.hour_limit:g}' if args.hour_limit else ''}`.")
    lines.append("")
    for label, seconds, message in failed:
        lines.append(f"- {label}: no plan within the limit ({seconds:.1f} s): {message}")
    by = {(hours, routing): (plan, wall) for _, hours, routing, plan, wall, _ in runs}
    if (0, "day") not in by or (24, args.routing[0]) not in by:
        lines.append("- Not enough runs finished to compare the clock with the peak sum.")
        replace_section(args.out, "clock", "\n".join(lines))
        return
    lines.append("")
    base = by[0, "day"][0]
    full, full_wall = by[24, args.routing[0]]
    lines.append("Clock runs: the shipped profiles (data/default/profiles.csv), the shipped cloud regions for rent, "
                 f"{', '.join(INTERRUPTIBLE)} interruptible (GPU-hours a day = GPUs x 24), inference racks on fabric tier 2; "
                 "except the second row, which is the default as `dcplace solve --set clock.hours=24` solves it.")
    lines.append("")
    lines.append("| run | status | annual cost | vs peak sum | gap (vs bound) | wall time | inference IT MW | rented $/yr | "
                 "troughs H100-h/day | model columns x rows | independent check |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for label, hours, routing, plan, wall, ok in runs:
        gap = f"{plan.solve.gap * 100:.2f} %" if plan.solve.gap is not None else "none"
        delta = plan.objective_usd_per_year / base.objective_usd_per_year - 1
        lines.append(f"| {label} | {plan.solve.status} | {money(plan.objective_usd_per_year)} | {delta * 100:+.2f} % | {gap} | "
                     f"{wall:.1f} s | {inference_mw(plan):,.1f} | {money(plan.kpis.get('rental_usd_per_year', 0.0))} | "
                     f"{plan.kpis.get('trough_h100_gpu_hours_per_day', 0.0):,.0f} | "
                     f"{plan.solve.model.get('columns', 0):,} x {plan.solve.model.get('rows', 0):,} | {'pass' if ok else 'FAIL'} |")
    lines.append("")
    saved = inference_mw(base) - inference_mw(full)
    lines.append(f"- Inference IT: {inference_mw(base):,.1f} MW sized for the sum of the peaks, {inference_mw(full):,.1f} MW "
                 f"sized hour by hour: {saved:,.1f} MW ({saved / max(inference_mw(base), 1e-9) * 100:.1f} %) not built. "
                 f"Owned capacity {full.kpis.get('owned_capacity_tok_s', 0):,.0f} tok/s against a coincident peak of "
                 f"{full.kpis.get('owned_coincident_peak_tok_s', 0):,.0f} tok/s.")
    need = sum(j.gpus_h100_equiv for j in load_scenario().jobs if j.id in INTERRUPTIBLE) * 24
    absorbed = full.kpis.get("trough_h100_gpu_hours_per_day", 0.0)
    lines.append(f"- Training in the troughs: {absorbed:,.0f} of the {need:,.0f} H100-equivalent GPU-hours a day the interruptible jobs "
                 f"need ({absorbed / need * 100:.1f} %); jobs on racks of their own: "
                 f"{', '.join(sorted(p.job for p in full.jobs if p.job in INTERRUPTIBLE)) or 'none'}.")
    rented = {}
    for ln in full.rentals:
        rented[ln.cloud] = rented.get(ln.cloud, 0.0) + ln.usd_per_year
    lines.append("- Rented: " + ("; ".join(f"{q} {money(v)}/yr" for q, v in sorted(rented.items(), key=lambda kv: -kv[1]))
                                 if rented else "nothing (owning beats the shipped GPU-hour prices everywhere)") + ".")
    for label, hours, routing, plan, wall, ok in runs:
        if hours in (0, 24) or routing == "plain" or (24, routing) not in by:
            continue
        over = plan.objective_usd_per_year / by[24, routing][0].objective_usd_per_year - 1
        lines.append(f"- {label}: {over * 100:+.2f} % against 24 hours routed the same way (the blocks size for each block's largest "
                     f"hour, so capacity is never short; their energy overstates the day's served load by "
                     f"{plan.clock.get('block_overstatement', 0) * 100:.1f} %).")
    for hours, what in clock_cases(args.blocks):
        if (hours, "day") in by and (hours, "hour") in by:
            (day, day_wall), (hour, hour_wall) = by[hours, "day"], by[hours, "hour"]
            gap = lambda p: f"{p.solve.gap * 100:.2f} %" if p.solve.gap is not None else "no gap"  # noqa: E731
            saved = inference_mw(day) - inference_mw(hour)
            lines.append(f"- Routing per hour, {what}: {money(hour.objective_usd_per_year)} ({hour.solve.status}, {gap(hour)}, "
                         f"{hour_wall:.1f} s) against {money(day.objective_usd_per_year)} by the day ({day.solve.status}, {gap(day)}, "
                         f"{day_wall:.1f} s): {(hour.objective_usd_per_year / day.objective_usd_per_year - 1) * 100:+.2f} %; inference IT "
                         f"{inference_mw(hour):,.1f} MW against {inference_mw(day):,.1f} MW ({saved:,.1f} MW fewer); the model has "
                         f"{hour.solve.model.get('columns', 0) / max(day.solve.model.get('columns', 1), 1):.1f}x the columns and "
                         f"{hour.solve.model.get('rows', 0) / max(day.solve.model.get('rows', 1), 1):.1f}x the rows. Lower bounds: "
                         f"{money(hour.solve.best_bound_usd_per_year or 0.0)} per hour, {money(day.solve.best_bound_usd_per_year or 0.0)} by the day.")
    def met(plan, wall) -> str:
        ok = plan.solve.gap is not None and plan.solve.gap <= 5e-3 and wall <= 30.0
        return f"{'met' if ok else 'not met'} ({plan.solve.gap * 100 if plan.solve.gap is not None else math.nan:.2f} % in {wall:.1f} s)"

    plain = by.get((24, "plain"))
    lines.append("- Target (24 represented hours within 0.5 % in at most 30 s on 2 cores): "
                 + (f"the default as it ships {met(*plain)}; " if plain else "")
                 + f"with troughs and cloud regions {met(full, full_wall)}.")
    replace_section(args.out, "clock", "\n".join(lines))
    print(f"wrote the clock section of {args.out}")


if __name__ == "__main__":
    main()
