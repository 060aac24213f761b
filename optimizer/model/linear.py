"""A small linear model: named column blocks and row families over sparse keys.

The formulation (optimizer.model.formulation) writes the placement MIP once, into a
`LinearModel`. It knows no solver; the solvers layer hands it on in one of two ways:

* `optimizer.solvers.highs_model.to_highs(lm)`: the matrix goes straight to highspy as
  one CSC array (the default path: no per-variable Python objects, so it scales to
  millions of columns);
* `optimizer.solvers.pyomo_model.to_pyomo(lm)`: the same model as a Pyomo ConcreteModel
  with the same names (`m.share[r, w, s]`, `m.demand_met[r, w]`, `m.cost["energy"]`),
  for a notebook user who wants to inspect or extend it, for the OR-Tools back-end
  (written as MPS), and for the elastic diagnosis.

Rows are `lower <= sum_j a_ij x_j <= upper` (either side may be infinite). A row family's
rows are added together, so a row number maps back to (family, key) for messages.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field
from typing import Hashable, Iterable

import numpy as np

INF = float("inf")  # what highspy.kHighsInf is
DOMAINS = ("binary", "integer", "continuous")


@dataclass
class ColumnBlock:
    """One variable family: `keys[i]` is column `start + i`."""

    name: str
    keys: list
    start: int
    lower: np.ndarray
    upper: np.ndarray
    domain: str
    pos: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pos = {key: i for i, key in enumerate(self.keys)}

    @property
    def stop(self) -> int:
        return self.start + len(self.keys)


@dataclass
class RowFamily:
    """One constraint family: `keys[i]` is row `start + i`; key None marks a single row."""

    name: str
    start: int
    keys: list = field(default_factory=list)

    def rows(self) -> dict:
        """key -> row number."""
        return {key: self.start + i for i, key in enumerate(self.keys)}


class LinearModel:
    """Columns, rows, and the objective split into named cost categories."""

    def __init__(self, name: str):
        self.name = name
        self.blocks: dict[str, ColumnBlock] = {}
        self.families: dict[str, RowFamily] = {}
        self.n_cols = 0
        self._row_lower = array("d")
        self._row_upper = array("d")
        self._a_row = array("i")
        self._a_col = array("i")
        self._a_val = array("d")
        self._costs: dict[str, dict[int, float]] = {}
        self._costs_version = 0  # bumped by every change through add_cost or the costs setter
        self._objective: tuple[tuple[int, int], np.ndarray] | None = None  # (version, n_cols) -> the dense objective
        self.cost_categories: tuple[str, ...] = ()  # the objective's categories in report order (set by the builder)
        self._family_starts: list[int] = []
        self._family_names: list[str] = []

    # ------------------------------------------------------------------ columns
    def add_block(self, name: str, keys: list, lower, upper, domain: str) -> ColumnBlock:
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {DOMAINS}")
        n = len(keys)
        block = ColumnBlock(
            name, list(keys), self.n_cols,
            np.broadcast_to(np.asarray(lower, dtype=float), (n,)).copy(),
            np.broadcast_to(np.asarray(upper, dtype=float), (n,)).copy(),
            domain,
        )
        self.blocks[name] = block
        self.n_cols += n
        return block

    def col(self, block: str, key: Hashable) -> int:
        b = self.blocks[block]
        return b.start + b.pos[key]

    def fix(self, block: str, key: Hashable, value: float) -> None:
        b = self.blocks[block]
        b.lower[b.pos[key]] = b.upper[b.pos[key]] = value

    def column_name(self, j: int) -> str:
        for b in self.blocks.values():
            if b.start <= j < b.stop:
                return f"{b.name}[{_key_text(b.keys[j - b.start])}]"
        raise IndexError(j)

    # --------------------------------------------------------------------- rows
    @property
    def n_rows(self) -> int:
        return len(self._row_lower)

    def _family_for_rows(self, family: str) -> RowFamily:
        """The family new rows join: created at the current row count, or the last one added
        (a family's rows are contiguous)."""
        fam = self.families.get(family)
        if fam is None:
            fam = self.families[family] = RowFamily(family, self.n_rows)
            self._family_starts.append(fam.start)
            self._family_names.append(family)
        elif self._family_names[-1] != family:
            raise ValueError(f"rows of family '{family}' must be added together")
        return fam

    def add_row(self, family: str, key: Hashable, terms: Iterable[tuple[int, float]], lower: float = -INF, upper: float = INF) -> int:
        """Append `lower <= sum coef * x[col] <= upper` to `family` (its rows must be added together)."""
        fam = self._family_for_rows(family)
        i = self.n_rows
        for j, coef in terms:
            if coef:
                self._a_row.append(i)
                self._a_col.append(j)
                self._a_val.append(coef)
        self._row_lower.append(lower)
        self._row_upper.append(upper)
        fam.keys.append(key)
        return i

    def add_rows(self, family: str, keys: list, cols: np.ndarray, coefs: np.ndarray, lower: float = -INF,
                 upper: float = INF) -> None:
        """One row per key at once: row i is `lower <= sum_t coefs[i, t] * x[cols[i, t]] <= upper`.
        The same rows, in the same order and with the same entries, as add_row called per key
        (zero coefficients left out), at numpy speed: for families of many rows of one shape."""
        n = len(keys)
        if not n:
            return
        cols = np.asarray(cols, dtype=np.int32).reshape(n, -1)
        coefs = np.broadcast_to(np.asarray(coefs, dtype=np.float64), cols.shape)
        rows = np.broadcast_to(np.arange(n)[:, None], cols.shape)
        self.add_entries(family, keys, rows.ravel(), cols.ravel(), coefs.ravel(), lower, upper)

    def add_entries(self, family: str, keys: list, row: np.ndarray, cols: np.ndarray, coefs: np.ndarray,
                    lower: float = -INF, upper: float = INF) -> None:
        """One row per key at once, rows of any length: entry t is `coefs[t] * x[cols[t]]` in the
        family's row `row[t]` (0 for keys[0]). The same rows as add_row called per key with
        those terms (zero coefficients left out), for families whose rows differ in length."""
        n = len(keys)
        if not n:
            return
        row, cols, coefs = (np.asarray(row, dtype=np.int64), np.asarray(cols, dtype=np.int32),
                            np.asarray(coefs, dtype=np.float64))
        if len(row) and (row.min() < 0 or row.max() >= n):
            raise IndexError(f"entry rows must lie in 0..{n - 1}")
        fam = self._family_for_rows(family)
        kept = coefs != 0
        self._a_row.frombytes((row[kept] + self.n_rows).astype(np.int32).tobytes())
        self._a_col.frombytes(np.ascontiguousarray(cols[kept]).tobytes())
        self._a_val.frombytes(np.ascontiguousarray(coefs[kept]).tobytes())
        self._row_lower.frombytes(np.full(n, lower, dtype=np.float64).tobytes())
        self._row_upper.frombytes(np.full(n, upper, dtype=np.float64).tobytes())
        fam.keys.extend(keys)

    def append(self, other: "LinearModel", tag: str, cost_weight: float = 1.0, skip_categories: tuple[str, ...] = ()) -> int:
        """Copy `other` in after this model's columns and rows: its blocks and families renamed
        `name@tag`, its cost terms times `cost_weight` (categories in `skip_categories` left out).
        Returns the column offset: other's column j is this model's column offset + j (a
        multi-period model is its periods' models side by side, optimizer.model.periods)."""
        offset, row_offset = self.n_cols, self.n_rows
        for b in other.blocks.values():
            self.add_block(f"{b.name}@{tag}", b.keys, b.lower, b.upper, b.domain)
        for name in other._family_names:
            fam = other.families[name]
            new = self.families[f"{name}@{tag}"] = RowFamily(f"{name}@{tag}", row_offset + fam.start, list(fam.keys))
            self._family_starts.append(new.start)
            self._family_names.append(new.name)
        self._a_row.frombytes((np.frombuffer(other._a_row, dtype=np.int32) + row_offset).astype(np.int32).tobytes())
        self._a_col.frombytes((np.frombuffer(other._a_col, dtype=np.int32) + offset).astype(np.int32).tobytes())
        self._a_val.extend(other._a_val)
        self._row_lower.extend(other._row_lower)
        self._row_upper.extend(other._row_upper)
        for category, terms in other.costs.items():
            if category not in skip_categories:
                self.add_costs(category, [j + offset for j in terms], [v * cost_weight for v in terms.values()])
        return offset

    def add_to_row(self, i: int, col: int, coef: float) -> None:
        """Add `coef * x[col]` to row i, which already exists (the elastic diagnosis's slacks)."""
        if not 0 <= i < self.n_rows:
            raise IndexError(i)
        self._a_row.append(i)
        self._a_col.append(col)
        self._a_val.append(coef)

    def row_name(self, i: int) -> str:
        fam = self.families[self._family_names[bisect.bisect_right(self._family_starts, i) - 1]]
        key = fam.keys[i - fam.start]
        return fam.name if key is None else f"{fam.name}[{_key_text(key)}]"

    # ---------------------------------------------------------------- objective
    @property
    def costs(self) -> dict[str, dict[int, float]]:
        """category -> {column: $/yr}. Change it through add_cost (or assign a new dict):
        objective() is cached against those changes."""
        return self._costs

    @costs.setter
    def costs(self, value: dict[str, dict[int, float]]) -> None:
        self._costs = value
        self._costs_version += 1

    def add_cost(self, category: str, col: int, usd_per_year: float) -> None:
        if usd_per_year:
            terms = self._costs.setdefault(category, {})
            terms[col] = terms.get(col, 0.0) + usd_per_year
            self._costs_version += 1

    def add_costs(self, category: str, cols, usd_per_year) -> None:
        """add_cost for each (column, $/yr) pair, in order."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        values = np.asarray(usd_per_year, dtype=np.float64).ravel()
        kept = values != 0
        cols, values = cols[kept].tolist(), values[kept].tolist()
        if cols:
            terms = self._costs.setdefault(category, {})
            if not terms and len(set(cols)) == len(cols):  # a new category of distinct columns: one update
                terms.update(zip(cols, values))
            else:
                for col, value in zip(cols, values):
                    terms[col] = terms.get(col, 0.0) + value
        self._costs_version += 1

    def objective(self) -> np.ndarray:
        """The dense cost vector (read-only). Computed once per state of the costs and the
        columns: the solve reads it a dozen times (warm start, start checks, the record), and
        a new column or cost term makes it be computed again."""
        key = (self._costs_version, self.n_cols)
        if self._objective is None or self._objective[0] != key:
            c = np.zeros(self.n_cols)
            for terms in self._costs.values():
                for j, v in terms.items():
                    c[j] += v
            c.flags.writeable = False
            self._objective = (key, c)
        return self._objective[1]

    def cost_by_category(self, x: np.ndarray) -> dict[str, float]:
        return {cat: float(sum(v * x[j] for j, v in terms.items())) for cat, terms in self.costs.items()}

    # ------------------------------------------------------------------- arrays
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lower = np.concatenate([b.lower for b in self.blocks.values()]) if self.blocks else np.zeros(0)
        upper = np.concatenate([b.upper for b in self.blocks.values()]) if self.blocks else np.zeros(0)
        return lower, upper

    def row_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.frombuffer(self._row_lower, dtype=np.float64).copy(), np.frombuffer(self._row_upper, dtype=np.float64).copy()

    def integer_columns(self) -> np.ndarray:
        return np.concatenate(
            [np.arange(b.start, b.stop, dtype=np.int32) for b in self.blocks.values() if b.domain != "continuous"] or [np.zeros(0, np.int32)]
        )

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The constraint matrix in compressed-column form: (start, index, value)."""
        rows = np.frombuffer(self._a_row, dtype=np.int32)
        cols = np.frombuffer(self._a_col, dtype=np.int32)
        vals = np.frombuffer(self._a_val, dtype=np.float64)
        order = np.lexsort((rows, cols))
        start = np.zeros(self.n_cols + 1, dtype=np.int32)
        np.cumsum(np.bincount(cols, minlength=self.n_cols), out=start[1:])
        return start, rows[order].astype(np.int32), vals[order]

    def row_activity(self, x: np.ndarray) -> np.ndarray:
        rows = np.frombuffer(self._a_row, dtype=np.int32)
        cols = np.frombuffer(self._a_col, dtype=np.int32)
        vals = np.frombuffer(self._a_val, dtype=np.float64)
        return np.bincount(rows, weights=vals * x[cols], minlength=self.n_rows)

    def is_feasible(self, x: np.ndarray, tol: float = 1e-6) -> bool:
        """Bounds, rows (relative tolerance) and integrality all hold at `x`."""
        lower, upper = self.bounds()
        if np.any(x < lower - tol) or np.any(x > upper + tol):
            return False
        integer = x[self.integer_columns()]
        if np.any(np.abs(integer - np.round(integer)) > tol):
            return False
        activity = self.row_activity(x)
        row_lower, row_upper = self.row_bounds()
        slack = tol * np.maximum(1.0, np.abs(activity))
        return bool(np.all(activity >= row_lower - slack) and np.all(activity <= row_upper + slack))

    def size(self) -> dict[str, int]:
        binaries = sum(len(b.keys) for b in self.blocks.values() if b.domain == "binary")
        integers = sum(len(b.keys) for b in self.blocks.values() if b.domain != "continuous")
        return {"rows": self.n_rows, "columns": self.n_cols, "integers": integers, "binaries": binaries, "nonzeros": len(self._a_val)}


def _key_text(key) -> str:
    return ",".join(map(str, key)) if isinstance(key, tuple) else str(key)
