"""Beasley's OR-Library capacitated facility location instances, solved through dcplace.

Each instance becomes an ordinary dcplace Scenario (`dcplace.scenario_from_cost_matrix`,
models/costmatrix.py): warehouses are sites (fixed cost =
`fixed_cost_usd_per_year`, capacity = `floor_racks` of a one-unit rack that serves one unit
of demand and costs nothing), customers are regions with one workload class, and the
allocation cost c_ij of serving all of customer j from warehouse i is a pair cost — the
network transport input of the scenario format. Latency budgets are wide open. The
engine's optimum must equal the published one (1e-6 relative).

For scale, the same instance is also built directly as a bare highspy model
(min Σ f_i y_i + Σ c_ij x_ij, Σ_i x_ij = 1, Σ_j d_j x_ij <= s_i y_i, x_ij <= y_i) and timed.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import highspy
import numpy as np

from dcplace.models import Scenario
from dcplace.models.costmatrix import UNIT_CATALOG, scenario_from_cost_matrix  # noqa: F401 - UNIT_CATALOG kept importable here

CAPACITIES = {"capa": (8000, 10000, 12000, 14000), "capb": (5000, 6000, 7000, 8000), "capc": (5000, 5750, 6500, 7250)}


def orlib_dir() -> Path:
    """../shared/benchmarks/orlib beside the repository, or $DCPLACE_ORLIB."""
    if os.environ.get("DCPLACE_ORLIB"):
        return Path(os.environ["DCPLACE_ORLIB"])
    return Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / "orlib"


def optima() -> dict[str, float]:
    with (orlib_dir() / "optima.csv").open() as fh:
        return {row["instance"]: float(row["optimal_value"]) for row in csv.DictReader(fh)}


def parse_cap(path: Path, capacity: float | None = None) -> dict:
    """m, n, capacities s, fixed costs f, demands d, costs c[i][j] (all of j's demand from i)."""
    tokens = path.read_text().split()
    m, n = int(tokens[0]), int(tokens[1])
    pos = 2
    s, f = [], []
    for _ in range(m):
        cap = tokens[pos]
        s.append(float(capacity) if cap == "capacity" else float(cap))
        f.append(float(tokens[pos + 1]))
        pos += 2
    d, c = [], np.zeros((m, n))
    for j in range(n):
        d.append(float(tokens[pos]))
        pos += 1
        c[:, j] = [float(t) for t in tokens[pos : pos + m]]
        pos += m
    return {"m": m, "n": n, "s": s, "f": f, "d": d, "c": c}


def instances(names: list[str] | None = None) -> list[tuple[str, Path, float | None]]:
    """(name, file, capacity override) for the cap instances in optima.csv."""
    out = []
    for name in optima():
        if not name.startswith("cap"):
            continue
        if "_" in name:
            base, cap = name.split("_")
            out.append((name, orlib_dir() / "cap" / f"{base}.txt", float(cap)))
        else:
            out.append((name, orlib_dir() / "cap" / f"{name}.txt", None))
    return [x for x in out if names is None or x[0] in names]


def as_scenario(name: str, data: dict) -> Scenario:
    """The instance as a dcplace scenario (see the module docstring and dcplace.scenario_from_cost_matrix)."""
    return scenario_from_cost_matrix(data["f"], data["d"], data["c"], capacities=data["s"], name=name)


def bare_highs(data: dict, time_limit_s: float = 600.0) -> tuple[float, float]:
    """(objective, seconds to build and solve) of the CFLP built directly with highspy."""
    started = time.perf_counter()
    m, n = data["m"], data["n"]
    d = np.array(data["d"])
    n_cols = m + m * n  # y_i, then x_ij at m + i*n + j
    cost = np.concatenate([data["f"], data["c"].ravel()])
    lower, upper = np.zeros(n_cols), np.ones(n_cols)
    rows, cols, vals, row_lo, row_hi = [], [], [], [], []
    r = 0
    for j in range(n):  # sum_i x_ij = 1
        for i in range(m):
            rows.append(r); cols.append(m + i * n + j); vals.append(1.0)
        row_lo.append(1.0); row_hi.append(1.0); r += 1
    for i in range(m):  # sum_j d_j x_ij - s_i y_i <= 0
        for j in range(n):
            rows.append(r); cols.append(m + i * n + j); vals.append(d[j])
        rows.append(r); cols.append(i); vals.append(-data["s"][i])
        row_lo.append(-highspy.kHighsInf); row_hi.append(0.0); r += 1
    for i in range(m):  # x_ij - y_i <= 0
        for j in range(n):
            rows.append(r); cols.append(m + i * n + j); vals.append(1.0)
            rows.append(r); cols.append(i); vals.append(-1.0)
            row_lo.append(-highspy.kHighsInf); row_hi.append(0.0); r += 1
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("time_limit", time_limit_s)
    h.addVars(n_cols, lower, upper)
    h.changeColsCost(n_cols, np.arange(n_cols, dtype=np.int32), cost)
    h.changeColsIntegrality(m, np.arange(m, dtype=np.int32), np.full(m, highspy.HighsVarType.kInteger))
    rows_arr = np.array(rows)  # entries were appended row by row, so this is already CSR order
    starts = np.searchsorted(rows_arr, np.arange(r)).astype(np.int32)
    h.addRows(r, np.array(row_lo), np.array(row_hi), len(vals), starts, np.array(cols, dtype=np.int32), np.array(vals))
    h.run()
    return h.getInfo().objective_function_value, time.perf_counter() - started
