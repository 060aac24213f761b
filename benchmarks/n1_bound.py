"""What bounds the N-1 gap on the default world: the bound, the plan, or the lazy loop?

    python benchmarks/n1_bound.py                       # 30 s first round, 6 LP cut rounds, 2 threads
    python benchmarks/n1_bound.py --round-s 60 --lp-rounds 10 --threads 1

The world of benchmarks/resilience.py (chat and reasoning survivable, chat's failover budget
100 ms). Prints, does not write RESULTS.md (docs/resilience.md quotes what it measured):

1. the LP relaxation of the first round's model (the lazy model with its up-front cut rows);
2. the same LP after rounds of min cuts: re-route every loss of the LP's own (fractional)
   plan (optimizer.solving.failover.check_losses), add the min cut of each loss that
   breaks (model.failover.cut_row) to the same HiGHS instance and re-solve from its basis.
   Every cut is met by every plan of the full N-1 model, so each round's LP value is a lower
   bound of the full model; if N-1 rows the lazy model lacks were what kept its bound low,
   this is where it would rise;
3. the first round's MIP as solve() runs it (run_backend with its warm start): its plan, its
   bound, the losses it breaks and what the greedy repair and the repair MIP add;
4. spare capacity (built minus served tok/s) per class in the LP and in that plan;
5. where the money between the LP and that plan sits: cost by column block (site opens, zones
   per cooling, inference racks per class, training racks);
6. with --exact-lp, the full N-1 LP (every loss re-routed region by region,
   optimizer.solving.failover_sites.held_index) over the sites the LP opens, every other site
   closed. It restricts the full model's LP, whose value therefore lies between the lazy LP
   of step 1 (a relaxation of it) and this one: if the two are close, no N-1 row the lazy model
   lacks can raise the bound;
7. with --cluster-rounds N, N rounds of count cuts on the LP of step 1: for a set S of sites
   (a region's eligible sites, or two overlapping regions'), R = the regions that may be served
   only from S and k = the sites of S open, some site of S carries D_R / k of R's demand, so
   the spare within R's failover reach is at least D_R / k; with k whole, the secant through
   k0 = floor(k) and k0 + 1 holds: sum spare + D_R * k / (k0 (k0 + 1)) >= D_R / k0 + D_R / (k0 + 1)
   (k counted by open[s]); the most violated 60 per round are added;
8. with --bnb-s T, HiGHS's own branch and bound on the first round's model for T seconds
   (one thread): how far its cuts and branching move the bound.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import highspy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dcplace.models import load_scenario  # noqa: E402
from dcplace.optimizer.model.failover import cut_row  # noqa: E402
from dcplace.optimizer.model.formulation import build_model  # noqa: E402
from dcplace.optimizer.solvers.backends import run_backend  # noqa: E402
from dcplace.optimizer.solvers.highs_model import run_until, to_highs  # noqa: E402
from dcplace.optimizer.solving import failover as fo  # noqa: E402
from dcplace.optimizer.solving.failover_sites import held_index, reroute_count  # noqa: E402
from dcplace.optimizer.solving.precheck import checked_index  # noqa: E402
from dcplace.optimizer.solving.solve import SolveOptions  # noqa: E402

SURVIVE = {"chat": 1.0, "reasoning": 1.0}  # as benchmarks/resilience.py
FAILOVER = {"chat": 100.0}


def musd(usd: float | None) -> str:
    return "none" if usd is None else f"${usd / 1e6:,.2f} M"


def spare_table(state: fo.ServingState, classes) -> list[str]:
    """Per class: sites carrying load, the largest site load, the total spare (tok/s)."""
    out = []
    for w in classes:
        loads = [v for (s, ww), v in state.load.items() if ww == w and v > 1.0]
        spare = sum(state.spare(w).values())
        out.append(f"{w}: load at {len(loads)} sites, largest {max(loads, default=0):,.0f} tok/s, spare {spare:,.0f} tok/s")
    return out


def cost_by_block(lm, ix, x: np.ndarray) -> list[str]:
    """Annual cost of `x` per column block, zones per cooling and inference racks per class."""
    c = lm.objective()
    out = []
    for name, b in lm.blocks.items():
        part = slice(b.start, b.start + len(b.keys))
        if abs(c[part] @ x[part]) > 1e4:
            out.append(f"{name} {musd(c[part] @ x[part])} (sum of columns {x[part].sum():,.2f})")
    for block, at, names in (("zone", 1, ix.cooling), ("racks_inf", 3, ix.workloads)):
        b = lm.blocks[block]
        for name in names:
            cols = np.array([b.start + i for i, key in enumerate(b.keys) if key[at] == name], dtype=np.int64)
            if len(cols) and x[cols].sum() > 1e-6:
                out.append(f"  {block} {name}: {musd(c[cols] @ x[cols])} (sum {x[cols].sum():,.2f})")
    return out


def exact_lp(ix, x_lp: np.ndarray, lm, threads: int) -> str:
    """Step 6: the full N-1 LP over the sites the LP opens (module docstring)."""
    sites = sorted(s for s in ix.sites if x_lp[lm.col("open", s)] > 0.01)
    held = held_index(ix, sites)
    model = build_model(held)
    for s in model.blocks["open"].keys:
        if s not in sites:
            model.fix("open", s, 0.0)
    h = to_highs(model, threads)
    cols = model.integer_columns()
    h.changeColsIntegrality(len(cols), cols, np.full(len(cols), highspy.HighsVarType.kContinuous))
    started = time.perf_counter()
    run_until(h, started + 1800)
    return (f"exact N-1 LP over the {len(sites)} sites the LP opens ({reroute_count(held):,} re-routings, "
            f"{model.n_cols:,} columns): {musd(h.getInfo().objective_function_value)} in {time.perf_counter() - started:.1f} s")


def count_cuts(h, lm, ix, x: np.ndarray, classes, top: int = 60) -> int:
    """Step 7: add to `h` the `top` most violated count cuts at the LP point `x` (module docstring)."""
    spare = lm.blocks["spare"]
    site_ids = list(ix.site_pos)
    open_of = np.array([x[lm.col("open", s)] if s in lm.blocks["open"].pos else 0.0 for s in site_ids])
    cuts = []
    for w in classes:
        eligible, reach = ix.eligible[w], ix.failover[w]
        demand = np.array([ix.demand(r, w) for r in ix.region_pos])
        served = eligible.any(axis=1) & (demand > 0)
        spare_col = np.array([spare.start + spare.pos[s, w] if (s, w) in spare.pos else -1 for s in site_ids])
        seen = set()
        for i in np.flatnonzero(served):
            for j in np.flatnonzero(served & (eligible & eligible[i]).any(axis=1)):
                sites = eligible[i] | eligible[j]
                if sites.tobytes() in seen:
                    continue
                seen.add(sites.tobytes())
                regions = served & ~(eligible & ~sites).any(axis=1)
                total = demand[regions].sum()
                count = [lm.col("open", site_ids[k]) for k in np.flatnonzero(sites) if site_ids[k] in lm.blocks["open"].pos]
                k0 = max(1, int(np.floor(open_of[sites].sum() + 1e-9)))
                near = spare_col[(reach[regions].any(axis=0) | sites) & (spare_col >= 0)]
                slope, rhs = total / (k0 * (k0 + 1)), total / k0 + total / (k0 + 1)
                short = rhs - x[near].sum() - slope * open_of[sites].sum()
                if short > 1e-3 * total / k0:
                    cuts.append((short, list(near) + count, [1.0] * len(near) + [slope] * len(count), rhs))
    for _, cols, coefs, rhs in sorted(cuts, key=lambda cut: -cut[0])[:top]:
        h.addRow(1.0, highspy.kHighsInf, len(cols), np.array(cols, dtype=np.int32), np.array(coefs) / rhs)
    return min(len(cuts), top)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--round-s", type=float, default=30.0, help="time limit of the first round's MIP")
    parser.add_argument("--lp-rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--exact-lp", action="store_true", help="step 6: the full N-1 LP over the LP's sites")
    parser.add_argument("--cluster-rounds", type=int, default=0, help="step 7: rounds of count cuts")
    parser.add_argument("--bnb-s", type=float, default=0.0, help="step 8: seconds of HiGHS branch and bound")
    args = parser.parse_args()
    scenario = load_scenario(None, overrides={"policies.survive_site_loss": SURVIVE, "policies.failover_rtt_ms": FAILOVER})
    ix = checked_index(scenario)
    lm = build_model(ix)
    classes = sorted(SURVIVE)
    print(f"model: {lm.size()}")

    h = to_highs(lm, args.threads)
    integer_cols = lm.integer_columns()
    h.changeColsIntegrality(len(integer_cols), integer_cols, np.full(len(integer_cols), highspy.HighsVarType.kContinuous))
    lp_state = None
    cuts_found: list[tuple] = []
    for n in range(args.lp_rounds + 1):
        started = time.perf_counter()
        run_until(h, time.perf_counter() + 600)
        x = np.asarray(h.getSolution().col_value)
        state = fo.state_from_columns(x, lm, ix, fractional=True)
        if lp_state is None:
            lp_state, x_lp = state, x
        losses = fo.check_losses(ix, state, args.threads)
        bad = fo.broken(losses)
        print(f"LP round {n}: {musd(h.getInfo().objective_function_value)} in {time.perf_counter() - started:.1f} s; "
              f"{len(bad)} losses break ({sum(bad.values()):,.0f} tok/s short)", flush=True)
        if n == args.lp_rounds:
            break
        ix.failover_cuts = cuts_found  # _new_cuts skips the cuts already added
        new = fo._new_cuts(ix, state, losses, bad)
        if not new:
            break
        for f, w, inside, near in new:
            terms, upper = cut_row(lm, ix, f, w, inside, near)
            h.addRow(-highspy.kHighsInf, upper, len(terms), np.array([j for j, _ in terms], dtype=np.int32),
                     np.array([v for _, v in terms]))
        cuts_found = cuts_found + new
    ix.failover_cuts = []
    print(*(f"  LP (round 0) {line}" for line in spare_table(lp_state, classes)), sep="\n")
    print(*(f"  LP (round 0) {line}" for line in cost_by_block(lm, ix, x_lp)), sep="\n", flush=True)
    if args.exact_lp:
        print(exact_lp(ix, x_lp, lm, args.threads), flush=True)
    if args.cluster_rounds:
        h = to_highs(lm, args.threads)
        h.changeColsIntegrality(len(integer_cols), integer_cols, np.full(len(integer_cols), highspy.HighsVarType.kContinuous))
        run_until(h, time.perf_counter() + 600)
        for n in range(1, args.cluster_rounds + 1):
            added = count_cuts(h, lm, ix, np.asarray(h.getSolution().col_value), classes)
            if not added:
                break
            started = time.perf_counter()
            run_until(h, started + 600)
            print(f"LP with count cuts, round {n} ({added} added): {musd(h.getInfo().objective_function_value)} "
                  f"in {time.perf_counter() - started:.1f} s", flush=True)
    if args.bnb_s:
        h = to_highs(lm, 1)
        h.setOptionValue("time_limit", args.bnb_s)
        started = time.perf_counter()
        h.run()
        print(f"HiGHS branch and bound, {args.bnb_s:g} s, one thread: bound {musd(h.getInfo().mip_dual_bound)}, "
              f"plan {musd(h.getInfo().objective_function_value)} (of the lazy model, not checked for N-1), "
              f"{h.getInfo().mip_node_count:,} nodes in {time.perf_counter() - started:.0f} s", flush=True)

    started = time.perf_counter()
    result, x = run_backend(lm, ix, SolveOptions(time_limit_s=args.round_s, threads=args.threads, mip_gap=5e-3))
    print(f"first round MIP ({args.round_s:g} s): {musd(result.objective_usd_per_year)}, bound {musd(result.best_bound_usd_per_year)}, "
          f"{time.perf_counter() - started:.1f} s; {result.termination}; warm start: {result.warm_start}")
    if x is None:
        return
    state = fo.state_from_columns(x, lm, ix)
    print(*(f"  plan {line}" for line in spare_table(state, classes)), sep="\n")
    print(*(f"  plan {line}" for line in cost_by_block(lm, ix, x)), sep="\n")
    losses = fo.check_losses(ix, state, args.threads)
    bad = fo.broken(losses)
    print(f"  breaks {len(bad)} losses: " + ", ".join(f"{f} {v:,.0f} tok/s" for f, v in sorted(bad.items())))
    if not bad:
        return
    started = time.perf_counter()
    greedy = fo.repair(x, lm, ix, args.threads)
    print(f"  greedy repair: {musd(lm.objective() @ greedy[0]) if greedy else 'none'} ({time.perf_counter() - started:.1f} s)")
    ix.failover_cuts = fo._new_cuts(ix, state, losses, bad)
    new = build_model(ix)
    started = time.perf_counter()
    y = fo.repair_mip(fo.transfer(x, lm, new, ix, {}), new, ix, time.perf_counter() + fo.REPAIR_MIP_S, args.threads)
    fixed = fo.repair(y, new, ix, args.threads) if y is not None else None
    print(f"  repair MIP then greedy: {musd(new.objective() @ fixed[0]) if fixed else 'none'} ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
