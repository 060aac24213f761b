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
import reprlib
from typing import Sequence

import numpy as np

from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.records import (
    Catalog,
    Chip,
    Cooling,
    FLOOR_RACKS_MAX,
    POWER_LIMIT_KW_MAX,
    RTT_MS_MAX,
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
    problems: list[InputProblem] = []

    def bad(field: str, message: str, fix: str) -> None:
        problems.append(InputProblem(LABEL, None, field, message, fix))

    fixed_costs, demands = _entries(fixed_costs, "fixed_costs", bad), _entries(demands, "demands", bad)
    capacities = None if capacities is None else _entries(capacities, "capacities", bad)
    m, n = len(fixed_costs), len(demands)
    if problems:
        raise ScenarioError(problems)
    if m == 0 or n == 0:
        bad(None, f"needs at least one facility and one customer (got {m} and {n}).", "give fixed_costs and demands.")
    rows = _cost_rows(costs, m, n, bad) if m and n else None
    if capacities is not None and len(capacities) != m:
        bad("capacities", f"has {len(capacities)} entries for {m} facilities.", "give one capacity per facility, or None.")
    for key, values in (("fixed_costs", fixed_costs), ("demands", demands), ("capacities", capacities or [])):
        for k, v in enumerate(values):
            if not _non_negative(v):
                bad(f"{key}[{k}]", f"must be a finite number >= 0 (got {reprlib.repr(v)}).", "give a finite, non-negative value.")
    total_demand = sum(float(d) for d in demands) if not problems else 0.0
    if not math.isfinite(total_demand):
        bad("demands", "add up to more than a float can hold.", "give demands in a larger unit.")
    # a capacity is a site's floor_racks, which has a physical range (models.records)
    for k, c in enumerate(capacities or []):
        if _non_negative(c) and c > FLOOR_RACKS_MAX:
            bad(f"capacities[{k}]", f"is {c:,.6g}, above the {FLOOR_RACKS_MAX:,} units a facility can hold here.",
                "give capacities and demands in a larger unit (divide both by the same factor).")
    if capacities is None and total_demand > FLOOR_RACKS_MAX:
        bad("demands", f"add up to {total_demand:,.6g}, above the {FLOOR_RACKS_MAX:,} units a facility can hold here.",
            "give demands in a larger unit (divide them by the same factor), or give capacities.")
    if problems:
        raise ScenarioError(problems)
    caps = [int(c) for c in capacities] if capacities is not None else [max(math.ceil(total_demand), 1)] * m
    sites = [
        dict(id=f"w{i + 1}", name=f"Warehouse {i + 1}", lat=0, lon=0, country="XX", power_price_usd_per_mwh=0,
             grid_carbon_g_per_kwh=0, power_limit_kw=POWER_LIMIT_KW_MAX, floor_racks=caps[i], fixed_cost_usd_per_year=float(fixed_costs[i]),
             colocation_usd_per_kw_month=0, cooling_allowed=("any",))
        for i in range(m)
    ]
    regions = [
        dict(id=f"c{j + 1}", name=f"Customer {j + 1}", lat=0, lon=0, country="XX",
             demand_tok_s={"demand": float(demands[j])}, rtt_budget_ms={"demand": RTT_MS_MAX})
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


def _entries(values, field: str, bad) -> list:
    """`values` (any sequence, array, Series or iterable) as a list, by position; [] after naming it when it is none."""
    if isinstance(values, (str, bytes)):
        bad(field, f"must be a sequence of numbers (got the text {values!r}).", f"give {field} as a list or an array.")
        return []
    try:
        return list(values.tolist() if hasattr(values, "tolist") else values)
    except TypeError:
        bad(field, f"must be a sequence of numbers (got {type(values).__name__}).", f"give {field} as a list or an array.")
        return []


def _non_negative(value) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return False
    return math.isfinite(number) and number >= 0


def _cost_rows(costs, m: int, n: int, bad) -> list[list[float]] | None:
    """costs as m rows of n floats, or None after naming what is wrong with it: its shape, or
    each entry that is not a finite number >= 0 (checked as one array when it is one)."""
    def wrong_shape(got: str) -> None:
        bad("costs", f"must be {m} x {n} (facilities x customers), got {got}.", "give costs[i][j] for every facility i and customer j.")

    if isinstance(costs, (str, bytes)):
        wrong_shape(f"the text {costs!r}")
        return None
    try:
        matrix = np.asarray(costs, dtype=float)
    except (TypeError, ValueError, OverflowError):  # ragged, iterators, or an entry that is not a number: entry by entry
        matrix = None
    if matrix is not None:
        if matrix.shape != (m, n):
            wrong_shape(f"an array of shape {matrix.shape}")
            return None
        for i, j in np.argwhere(~np.isfinite(matrix) | (matrix < 0)).tolist():
            bad(f"costs[{i}][{j}]", f"must be a finite number >= 0 (got {float(matrix[i, j])!r}).", "give a finite, non-negative cost.")
        return matrix.tolist()
    try:
        grid = np.asarray(costs, dtype=object)  # a DataFrame by its rows, not by its column labels
        rows = grid.tolist() if grid.ndim == 2 else [list(row) for row in costs]
    except (TypeError, ValueError):
        rows = []
    if len(rows) != m or any(len(row) != n for row in rows):
        lengths = sorted({len(row) for row in rows})
        wrong_shape(f"{len(rows)} rows of {' or '.join(map(str, lengths)) or 0} entries")
        return None
    broken = [(i, j, v) for i, row in enumerate(rows) for j, v in enumerate(row) if not _non_negative(v)]
    for i, j, v in broken:
        bad(f"costs[{i}][{j}]", f"must be a finite number >= 0 (got {reprlib.repr(v)}).", "give a finite, non-negative cost.")
    return None if broken else [[float(v) for v in row] for row in rows]
