"""The LinearModel as a Pyomo ConcreteModel with the same names: the model's inspectable form."""

from __future__ import annotations

import numpy as np

from dcplace.optimizer.model.linear import INF, LinearModel

def to_pyomo(lm: LinearModel):
    """The same model as a Pyomo ConcreteModel: one Var per block, one Constraint per
    family, `m.cost[category]` Expressions and the `m.total_cost` objective."""
    import pyomo.environ as pyo
    from pyomo.core.expr.numeric_expr import LinearExpression

    m = pyo.ConcreteModel(name=lm.name)
    columns = []
    for b in lm.blocks.values():
        dimen = len(b.keys[0]) if b.keys and isinstance(b.keys[0], tuple) else 1
        index = pyo.Set(initialize=b.keys, dimen=dimen, ordered=True)
        m.add_component(f"{b.name}_index", index)
        domain = {"binary": pyo.Binary, "integer": pyo.NonNegativeIntegers, "continuous": pyo.NonNegativeReals}[b.domain]
        var = pyo.Var(index, domain=domain, dense=True)
        m.add_component(b.name, var)
        for i, key in enumerate(b.keys):
            v = var[key]
            v.setlb(None if b.lower[i] <= -INF else float(b.lower[i]))
            v.setub(None if b.upper[i] >= INF else float(b.upper[i]))
            if b.lower[i] == b.upper[i]:
                v.fix(float(b.lower[i]))
            columns.append(v)

    rows = np.frombuffer(lm._a_row, dtype=np.int32)
    order = np.argsort(rows, kind="stable")
    cols = np.frombuffer(lm._a_col, dtype=np.int32)[order]
    vals = np.frombuffer(lm._a_val, dtype=np.float64)[order]
    row_start = np.searchsorted(rows[order], np.arange(lm.n_rows + 1))
    lower, upper = lm.row_bounds()

    def expression(i: int):
        a, b = row_start[i], row_start[i + 1]
        body = LinearExpression(constant=0.0, linear_coefs=[float(v) for v in vals[a:b]], linear_vars=[columns[j] for j in cols[a:b]])
        lo = None if lower[i] <= -INF else float(lower[i])
        up = None if upper[i] >= INF else float(upper[i])
        return (lo, body, up)

    for fam in lm.families.values():
        if fam.keys == [None]:
            m.add_component(fam.name, pyo.Constraint(expr=expression(fam.start)))
            continue
        dimen = len(fam.keys[0]) if isinstance(fam.keys[0], tuple) else 1
        index = pyo.Set(initialize=fam.keys, dimen=dimen, ordered=True)
        m.add_component(f"{fam.name}_index", index)
        row_of = {key: fam.start + i for i, key in enumerate(fam.keys)}
        m.add_component(fam.name, pyo.Constraint(index, rule=lambda m, *key, row_of=row_of: expression(row_of[key if len(key) > 1 else key[0]])))

    m.CATEGORIES = pyo.Set(initialize=lm.cost_categories or tuple(lm.costs), ordered=True)

    def cost(m, category):
        terms = lm.costs.get(category, {})
        return LinearExpression(constant=0.0, linear_coefs=list(terms.values()), linear_vars=[columns[j] for j in terms])

    m.cost = pyo.Expression(m.CATEGORIES, rule=cost)
    m.total_cost = pyo.Objective(expr=sum(m.cost[c] for c in m.CATEGORIES), sense=pyo.minimize)
    m._columns = columns
    return m


def pyomo_values(m) -> np.ndarray:
    """Column values of a solved `to_pyomo` model, in the LinearModel's column order."""
    return np.array([0.0 if v.value is None else float(v.value) for v in m._columns])
