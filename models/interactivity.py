"""Chip throughput at a class's interactivity target (issue 48, item 6).

A throughput row with `tok_s_per_user` is one point of a chip's curve on a class: tokens per
second per GPU when every user sees at least that many tokens per second (MLPerf's Server and
Interactive bounds on time per output token). Each class with a curve names its target,
`interactivity_tok_s_per_user` in workloads.csv; the chip's figure for the class is the curve
read there:

- between two points: piecewise linear in (tok/s per user, tok/s per GPU);
- looser than the curve's loosest point: that point's figure (clamped). A system that keeps a
  stricter bound keeps the looser one, so the clamp is a lower bound, never an overstatement;
- stricter than the curve's strictest point: the chip is not offered for the class. Nothing
  published says how far below that point its throughput falls, and an extrapolated figure
  would choose hardware on a number no one measured.

Both ends are said as warnings (`interactivity_warnings`, in `dcplace validate` and before a
solve); a class whose target is stricter than every chip's curve is refused, naming its row.

One home: the optimizer, the clock, the report and the loader's checks all read
`tok_s_at_target`; the independent checker (optimizer/checker/inputs.py) recomputes the same from
the plan's recorded throughput.csv and workloads.csv on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

from dcplace.models.errors import InputProblem, ProblemLog
from dcplace.models.records import Catalog, Throughput, Workload


# How a chip's figure for a class was read: the row as given, interpolated between two
# points, on a point, clamped to the loosest point, or not offered (beyond the strictest).
FIXED, ON_POINT, INTERPOLATED, CLAMPED, BEYOND = "fixed", "on a point", "interpolated", "clamped", "beyond"


def throughput_id(chip: str, workload: str, tok_s_per_user: float | None) -> str:
    """A throughput row's id in provenance.csv: chip/workload, then @ tok/s per user for a curve's point."""
    fixed = tok_s_per_user is None or math.isnan(tok_s_per_user)
    return f"{chip}/{workload}" + ("" if fixed else f"@{tok_s_per_user:g}")


@dataclass(frozen=True)
class ThroughputAtTarget:
    """One chip on one class at the class's target: the figure the model uses and how it was read."""

    chip: str
    workload: str
    target_tok_s_per_user: float | None  # None: a fixed figure, no curve
    tok_s_per_gpu: float | None  # None: not offered (the target is beyond the curve)
    how: str
    points: tuple[tuple[float, float], ...]  # the curve (tok/s per user, tok/s per GPU), loosest first; () for a fixed figure


def read_curve(points: list[tuple[float, float]], target: float) -> tuple[float | None, str]:
    """The curve's tok/s per GPU at `target` tok/s per user, and how it was read (see the module)."""
    pts = sorted(points)
    if target < pts[0][0]:
        return pts[0][1], CLAMPED
    if target > pts[-1][0]:
        return None, BEYOND
    for (u0, g0), (u1, g1) in zip(pts, pts[1:]):
        if u0 <= target <= u1:
            if target in (u0, u1):
                return (g0 if target == u0 else g1), ON_POINT
            return g0 + (g1 - g0) * (target - u0) / (u1 - u0), INTERPOLATED
    return pts[0][1], ON_POINT  # a single point, target on it


def throughput_at_targets(catalog: Catalog) -> list[ThroughputAtTarget]:
    """Every (chip, class) of the throughput table read at its class's target, in table order."""
    targets = {w.id: w.interactivity_tok_s_per_user for w in catalog.workloads}
    curves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    fixed: dict[tuple[str, str], float] = {}
    for t in catalog.throughput:
        if t.tok_s_per_user is None:
            fixed[(t.chip, t.workload)] = t.tok_s_per_gpu
        else:
            curves.setdefault((t.chip, t.workload), []).append((t.tok_s_per_user, t.tok_s_per_gpu))
    out = []
    for key in dict.fromkeys((t.chip, t.workload) for t in catalog.throughput):
        chip, workload = key
        if key in fixed:
            out.append(ThroughputAtTarget(chip, workload, None, fixed[key], FIXED, ()))
            continue
        target = targets.get(workload)
        if target is None:  # the loader refuses this (check_curves); a hand-built catalog gets no figure
            continue
        value, how = read_curve(curves[key], target)
        out.append(ThroughputAtTarget(chip, workload, target, value, how, tuple(sorted(curves[key]))))
    return out


def tok_s_at_target(catalog: Catalog) -> Mapping[tuple[str, str], float]:
    """(chip, class) -> tok/s per GPU at the class's target, for every pair the chip can serve:
    what the model plans with. Computed once per catalog (catalogs are frozen and hashable)."""
    try:
        return _tok_s_at_target(catalog)
    except TypeError:  # a catalog copied with a list in place of a tuple (model_copy does not validate) has no hash
        return _tok_s_at_target.__wrapped__(catalog)


@lru_cache(maxsize=32)
def _tok_s_at_target(catalog: Catalog) -> Mapping[tuple[str, str], float]:
    return MappingProxyType({(t.chip, t.workload): t.tok_s_per_gpu for t in throughput_at_targets(catalog)
                             if t.tok_s_per_gpu is not None})


def check_curves(throughput: list[tuple[int, Throughput]], workloads: list[tuple[int, Workload]], labels: dict[str, str],
                 log: ProblemLog) -> None:
    """The throughput table's rows as one figure or one curve per (chip, class), and each class with a
    curve given a target some chip can serve; each problem named by file, row and field."""
    kinds: dict[tuple[str, str], str] = {}
    points: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    tp = labels["throughput"]
    for row, t in throughput:
        key, kind = (t.chip, t.workload), "curve" if t.tok_s_per_user is not None else "fixed"
        if key in kinds and (kind == "fixed" or kinds[key] == "fixed"):
            log.add(tp, row, "tok_s_per_user" if kinds[key] != kind else "chip", f"throughput for ({t.chip}, {t.workload}) given twice.",
                    "keep one row per chip and workload, or give every row of the pair a tok_s_per_user (a curve).")
            continue
        kinds[key] = kind
        if kind == "curve":
            if any(u == t.tok_s_per_user for u, _, _ in points.get(key, [])):
                log.add(tp, row, "tok_s_per_user", f"({t.chip}, {t.workload}) has two points at {t.tok_s_per_user:g} tok/s per user.",
                        "keep one row per chip, workload and tok_s_per_user.")
                continue
            points.setdefault(key, []).append((t.tok_s_per_user, t.tok_s_per_gpu, row))
    for (chip, workload), pts in points.items():
        pts.sort()
        for (u0, g0, _), (u1, g1, row1) in zip(pts, pts[1:]):
            if g1 > g0:
                log.add(tp, row1, "tok_s_per_gpu", f"({chip}, {workload}) gives {g1:,.6g} tok/s per GPU at {u1:g} tok/s per user, more "
                        f"than {g0:,.6g} at the looser {u0:g}: a chip that keeps the stricter bound keeps the looser one.",
                        f"give at least {g1:,.6g} at {u0:g} tok/s per user, or at most {g0:,.6g} at {u1:g}.")
    for row, w in workloads:
        curved = sorted(c for c, wl in points if wl == w.id)
        if not curved:
            continue
        if w.interactivity_tok_s_per_user is None:
            log.add(labels["workloads"], row, "interactivity_tok_s_per_user",
                    f"class '{w.id}' has throughput curves ({', '.join(curved)}) but no interactivity target.",
                    "give the tokens per second each user must see, e.g. 25 (MLPerf's Llama 2 70B Interactive bound, TPOT 40 ms).")
            continue
        target = w.interactivity_tok_s_per_user
        fixed = any(kinds[k] == "fixed" for k in kinds if k[1] == w.id)
        strictest = {c: points[(c, w.id)][-1][0] for c in curved}
        if not fixed and all(target > u for u in strictest.values()):
            log.add(labels["workloads"], row, "interactivity_tok_s_per_user",
                    f"{target:g} tok/s per user is stricter than every published point of class '{w.id}' (the strictest: "
                    f"{max(strictest.values()):g}); no chip could serve it.",
                    f"give at most {max(strictest.values()):g}, or add throughput rows measured at {target:g} tok/s per user or more.")


def interactivity_warnings(catalog: Catalog, file: str = "catalog/workloads.csv") -> list[InputProblem]:
    """Each chip a class's target leaves off its published curve: clamped (the target is looser than
    its loosest point) or not offered (stricter than its strictest); allowed, never blocking."""
    rows = {w.id: i + 2 for i, w in enumerate(catalog.workloads)}
    out = []
    for t in throughput_at_targets(catalog):
        if t.how not in (CLAMPED, BEYOND):
            continue
        target = f"{t.target_tok_s_per_user:g} tok/s per user"
        if t.how == CLAMPED:
            said = (f"{target} is looser than {t.chip}'s loosest published point on '{t.workload}' ({t.points[0][0]:g}): its figure "
                    f"there, {t.tok_s_per_gpu:,.6g} tok/s per GPU, is used (a lower bound).",
                    f"add a point of {t.chip} at {target} or looser to throughput.csv for a closer figure.")
        else:
            said = (f"{target} is stricter than {t.chip}'s strictest published point on '{t.workload}' ({t.points[-1][0]:g}): "
                    f"{t.chip} is not offered for the class.",
                    f"give at most {t.points[-1][0]:g}, or add a point of {t.chip} measured at {target} or stricter.")
        out.append(InputProblem(file, rows[t.workload], "interactivity_tok_s_per_user", *said))
    return out
