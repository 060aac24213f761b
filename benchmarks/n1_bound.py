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
4. spare capacity (built minus served tok/s) per class in the LP and in that plan.
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--round-s", type=float, default=30.0, help="time limit of the first round's MIP")
    parser.add_argument("--lp-rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
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
        lp_state = lp_state or state
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

    started = time.perf_counter()
    result, x = run_backend(lm, ix, SolveOptions(time_limit_s=args.round_s, threads=args.threads, mip_gap=5e-3))
    print(f"first round MIP ({args.round_s:g} s): {musd(result.objective_usd_per_year)}, bound {musd(result.best_bound_usd_per_year)}, "
          f"{time.perf_counter() - started:.1f} s; {result.termination}; warm start: {result.warm_start}")
    if x is None:
        return
    state = fo.state_from_columns(x, lm, ix)
    print(*(f"  plan {line}" for line in spare_table(state, classes)), sep="\n")
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
