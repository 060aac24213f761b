"""A facility location problem given as a cost matrix, expressed as an ordinary Scenario.

Facilities are sites (fixed cost = `fixed_cost_usd_per_year`, capacity = `floor_racks` of a
one-unit rack that serves one unit of demand and costs nothing), customers are regions
with one workload class, and the cost c[i][j] of serving all of customer j from facility
i is a pair cost (the network transport input of the scenario format). Latency budgets
are wide open, so the engine solves exactly

    min Σ_i f_i y_i + Σ_ij c_ij x_ij   s.t.  Σ_i x_ij = 1,  Σ_j d_j x_ij <= s_i y_i,  x_ij <= y_i

(x continuous: a customer's demand may be split). Beasley's OR-Library benchmarks
(benchmarks/orlib.py) use this.
"""

from __future__ import annotations

import math

import numpy as np
from typing import Sequence

from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.records import (
    Catalog,
    Chip,
    Cooling,
    Economics,
    Latency,
    RackConfig,
    Scenario,
    Throughput,
    Workload,
)
from dcplace.models.scenario_file import scenario_hash

LABEL = "<cost matrix>"

UNIT_CATALOG = Catalog(
    chips=(Chip(id="unit", name="One unit of capacity", capex_usd_per_gpu=0, life_years=1, h100_equiv=0),),
    rack_configs=(RackConfig(id="unit", chip="unit", gpus_per_server=1, servers_per_rack=1, server_kw=0.001),),
    cooling=(Cooling(id="any", name="Any", max_kw_per_rack=1, pue=1.0, capex_usd_per_kw=0, life_years=1, zone_fixed_usd_per_year=0),),
    fabrics=(),
    workloads=(Workload(id="demand", name="Demand", load_factor=1.0),),
    throughput=(Throughput(chip="unit", workload="demand", tok_s_per_gpu=1.0),),
)


def scenario_from_cost_matrix(
    fixed_costs: Sequence[float],
    demands: Sequence[float],
    costs,
    capacities: Sequence[float] | None = None,
    name: str = "cost-matrix",
) -> Scenario:
    """The facility location problem (m facilities, n customers) as a Scenario.

    `fixed_costs[i]` per year of opening facility i; `demands[j]` of customer j;
    `costs[i][j]` (a nested sequence or an m x n array) per year of serving all of j's
    demand from i; `capacities[i]` in units of demand (None = uncapacitated; a capacity is
    rounded down to a whole unit). Sites are named w1..wm, regions c1..cn. Raises
    ScenarioError naming any bad entry.
    """
    m, n = len(fixed_costs), len(demands)
    problems: list[InputProblem] = []

    def bad(field: str, message: str, fix: str) -> None:
        problems.append(InputProblem(LABEL, None, field, message, fix))

    if m == 0 or n == 0:
        bad(None, f"needs at least one facility and one customer (got {m} and {n}).", "give fixed_costs and demands.")
    rows = _cost_rows(costs, m, n, bad) if m and n else None
    if capacities is not None and len(capacities) != m:
        bad("capacities", f"has {len(capacities)} entries for {m} facilities.", "give one capacity per facility, or None.")
    for key, values in (("fixed_costs", fixed_costs), ("demands", demands), ("capacities", capacities or [])):
        for k, v in enumerate(values):
            if not _non_negative(v):
                bad(f"{key}[{k}]", f"must be a finite number >= 0 (got {v!r}).", "give a finite, non-negative value.")
    if problems:
        raise ScenarioError(problems)
    total = math.ceil(sum(float(d) for d in demands))
    caps = [int(c) for c in capacities] if capacities is not None else [max(total, 1)] * m
    sites = [
        dict(id=f"w{i + 1}", name=f"Warehouse {i + 1}", lat=0, lon=0, country="XX", power_price_usd_per_mwh=0,
             grid_carbon_g_per_kwh=0, power_limit_kw=1e9, floor_racks=caps[i], fixed_cost_usd_per_year=float(fixed_costs[i]),
             colocation_usd_per_kw_month=0, cooling_allowed=("any",))
        for i in range(m)
    ]
    regions = [
        dict(id=f"c{j + 1}", name=f"Customer {j + 1}", lat=0, lon=0, country="XX",
             demand_tok_s={"demand": float(demands[j])}, rtt_budget_ms={"demand": 1e6})
        for j in range(n)
    ]
    # sites, regions and pairs as plain dicts, validated by the Scenario in one call into pydantic's
    # core: half the time of a record built each, which was a sixth of the engine's time on 50 x 50
    site_ids, region_ids = [f"w{i + 1}" for i in range(m)], [f"c{j + 1}" for j in range(n)]
    pairs = [{"region": region_ids[j], "site": site_ids[i], "workload": "demand", "usd_per_year": v}
             for i, row in enumerate(rows) for j, v in enumerate(row)]
    scenario = Scenario(
        name=name, sites=sites, regions=regions, catalog=UNIT_CATALOG, pair_costs=pairs,
        economics=Economics(discount_rate=0.0, inference_target_utilization=1.0), latency=Latency(route_factor=1, overhead_ms=0),
    )
    return scenario.model_copy(update={"content_hash": scenario_hash(scenario)})


def _non_negative(value) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number >= 0


def _cost_rows(costs, m: int, n: int, bad) -> list[list[float]] | None:
    """costs as m rows of n floats, or None after naming what is wrong with it: its shape, or
    each entry that is not a finite number >= 0 (checked as one array when it is one)."""
    try:
        matrix = np.asarray(costs, dtype=float)
    except (TypeError, ValueError):  # ragged, or an entry that is not a number: look row by row
        matrix = None
    if matrix is not None and matrix.shape != (m, n):
        bad("costs", f"must be {m} x {n} (facilities x customers), got an array of shape {matrix.shape}.",
            "give costs[i][j] for every facility i and customer j.")
        return None
    if matrix is None:
        try:
            rows = [list(row) for row in costs]
        except TypeError:
            rows = []
        if len(rows) != m or any(len(row) != n for row in rows):
            lengths = sorted({len(row) for row in rows})
            bad("costs", f"must be {m} x {n} (facilities x customers), got {len(rows)} rows of "
                f"{' or '.join(map(str, lengths)) or 0} entries.", "give costs[i][j] for every facility i and customer j.")
            return None
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if not _non_negative(v):
                    bad(f"costs[{i}][{j}]", f"must be a finite number >= 0 (got {v!r}).", "give a finite, non-negative cost.")
        return None
    for i, j in np.argwhere(~np.isfinite(matrix) | (matrix < 0)).tolist():
        bad(f"costs[{i}][{j}]", f"must be a finite number >= 0 (got {float(matrix[i, j])!r}).", "give a finite, non-negative cost.")
    return matrix.tolist()
