"""One registry of constraint families.

A family is one record: its name (the name its rows carry in the LinearModel and the
Pyomo model), its builder, its statement in math (the builder's docstring), the method of
the independent checker that verifies it (by name: optimizer/checker/ imports nothing of
dcplace, so the link is a string, and tests/test_registry.py asserts that the method
exists; the checker's violations name the family the same way, Violation.registry_family,
held to these names by tests/test_checker_families.py), and how the elastic diagnosis may relax it (a `Relax`) or why it is not relaxed.
A family that only tightens the LP relaxation (other rows imply it in the MIP) may be
registered `lp_lazy=True`: LP relaxations then hold its rows back and add those a
solution breaks (optimizer.solvers.lazy_rows), with the rest of their `lp_lazy_group`
if it names one; the MIP always has every row.

Three more flags say which lists a family belongs to, so that the registry is the only list
of family names: `priced=True` (a share column may enter its rows and pricing's reduced
costs stay exact, optimizer.solvers.pairs), `n1=True` (N-1's aggregate and cut rows, which
make lazy rows not worth holding on small models, optimizer.solvers.lazy_rows) and
`optimality=True` (holds for some cheapest plan, not for every plan: a model whose plan is
not free to be a cheapest one is built without it: `build_model(ix, cheapest=False)`).

    @family(checker="check_power_and_space", relax=Relax(...))
    def site_power(lm, ix): '''sum racks * kw * PUE - power_limit_kw[s] * open[s] <= 0'''

`build_model` runs REGISTRY in order; optimizer.solving.diagnose reads `relax`;
docs/formulation.md is generated from it:

    python -m dcplace.optimizer.model.formulation_doc --write docs/formulation.md
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

ROWS, BOUNDS = "rows", "bounds"  # what a builder writes: rows named after the family, or column bounds


@dataclass(frozen=True)
class Relax:
    """How the elastic diagnosis relaxes a family's rows.

    `direction` "over" lets the row's activity exceed its upper limit, "short" fall below
    its lower one. The slack of a row is `magnitude(ix, key) * t` with t >= 0 dimensionless
    and penalised `weight * t`: every penalty is relative to the row's own size (a site's
    power, the budget itself), so that none vanishes under the solver's tolerances and a
    10 % overage weighs the same on any limit. `message` is formatted with the fields
    `fields(ix, key, amount)` returns (amount in `unit`); `change` names the input to move.
    """

    direction: str
    unit: str
    magnitude: Callable[[Any, Any], float]
    message: str
    fields: Callable[[Any, Any, float], dict]
    change: str
    weight: float = 1.0

    def describe(self, ix, key, amount: float) -> str:
        return self.message.format(**self.fields(ix, key, amount))


@dataclass(frozen=True)
class Family:
    name: str
    builder: Callable
    math: str
    checker: str
    relax: Relax | None = None
    not_relaxed: str = ""
    writes: str = ROWS
    section: str = "core"
    lp_lazy: bool = False  # implied in the MIP by other rows: LP relaxations add its rows only where broken
    lp_lazy_group: Callable[[Any], Any] | None = None  # row key -> group: a broken row puts back its whole group
    priced: bool = False  # share columns may enter its rows and pricing stays exact (pairs.ServingRows)
    n1: bool = False  # N-1's aggregate and cut rows (lazy_rows.lazy_rows)
    optimality: bool = False  # holds for some cheapest plan, not every plan (left out by build_model(ix, cheapest=False))


REGISTRY: dict[str, Family] = {}


def family(name: str | None = None, *, checker: str, relax: Relax | None = None, not_relaxed: str = "",
           writes: str = ROWS, section: str = "core", lp_lazy: bool = False,
           lp_lazy_group: Callable[[Any], Any] | None = None, priced: bool = False, n1: bool = False,
           optimality: bool = False) -> Callable[[Callable], Callable]:
    """Register the decorated builder `f(lm, ix)` as a constraint family (once)."""

    def register(builder: Callable) -> Callable:
        key = name or builder.__name__
        if key in REGISTRY:
            raise ValueError(f"constraint family '{key}' is registered twice")
        if (relax is None) == (not not_relaxed):
            raise ValueError(f"family '{key}': give either relax=Relax(...) or not_relaxed='the reason'")
        if not checker.startswith("check_"):
            raise ValueError(f"family '{key}': checker must name a PlanChecker.check_* method, not '{checker}'")
        if writes not in (ROWS, BOUNDS):
            raise ValueError(f"family '{key}': writes must be '{ROWS}' or '{BOUNDS}'")
        math = inspect.cleandoc(builder.__doc__ or "")
        if not math:
            raise ValueError(f"family '{key}': the builder's docstring must state its math")
        if lp_lazy and (relax is not None or writes != ROWS):
            raise ValueError(f"family '{key}': a lazy family writes rows and is not relaxed (it limits nothing the MIP does not)")
        if lp_lazy_group is not None and not lp_lazy:
            raise ValueError(f"family '{key}': lp_lazy_group needs lp_lazy=True")
        REGISTRY[key] = Family(key, builder, math, checker, relax, not_relaxed, writes, section, lp_lazy, lp_lazy_group,
                               priced, n1, optimality)
        builder.family = key
        return builder

    return register


def relaxable() -> dict[str, Relax]:
    """family name -> Relax, for every family the elastic diagnosis may relax."""
    return {name: f.relax for name, f in REGISTRY.items() if f.relax is not None}


def flagged(flag: str) -> tuple[str, ...]:
    """The names of the registered families whose `flag` ("priced", "n1", "optimality") is set,
    in registry order (the registry is filled when dcplace.optimizer.model.formulation is imported)."""
    if flag not in ("priced", "n1", "optimality"):
        raise ValueError(f"no family flag named '{flag}'")
    return tuple(name for name, f in REGISTRY.items() if getattr(f, flag))


# ------------------------------------------------------------------------ the document

HEADER = """# The formulation

Generated from the constraint-family registry (`optimizer/model/families.py`) by
`python -m dcplace.optimizer.model.formulation_doc --write docs/formulation.md`; do not edit by
hand (tests/test_registry.py fails when this file is stale).

Each family is one function in `optimizer/model/formulation.py` (the resilience families in
`optimizer/model/failover.py`, docs/resilience.md; the clock's in
`optimizer/model/clock_families.py`, docs/clock.md; the families that tie the periods of a
multi-period plan in `optimizer/model/periods.py`, docs/periods.md, checked by
`ScheduleChecker` in `optimizer/checker/schedule.py`); its rows carry the
family's name in the LinearModel, in the Pyomo model and in HiGHS's infeasible subset.
The independent checker (`optimizer/checker/`) verifies each family with the method named
here, from the plan folder alone, and names the family in each violation it finds
(`Violation.registry_family`). When no plan exists, the elastic diagnosis
(`optimizer/solving/diagnose.py`) gives each relaxable row a slack of
`magnitude x t` (t >= 0 dimensionless, penalised `weight x t`), so every penalty is
relative to the row's own size.

Notation: S sites, R regions, W inference classes, K rack configs, C cooling types,
F fabrics, J training jobs, X chips; serve = {(r,w,s)}, inf = {(s,k,c,w)},
trn = {(s,k,c,f)}, place = {(j,s,f,x)}, zones = {(s,c)} are the sparse index sets of
`optimizer/model/index.py` (constraints enforced by pruning are listed there).
"""


def render_markdown() -> str:
    """docs/formulation.md, from the registry (filled when dcplace.optimizer.model.formulation is imported)."""
    out = [HEADER]
    out.append("| family | writes | checker | diagnosis |\n| --- | --- | --- | --- |")
    checker = lambda f: "ScheduleChecker" if f.section == "periods" else "PlanChecker"  # noqa: E731
    for f in REGISTRY.values():
        diag = f"relaxed ({f.relax.direction}, {f.relax.unit})" if f.relax else "not relaxed"
        out.append(f"| [`{f.name}`](#{f.name}) | {f.writes} | `{checker(f)}.{f.checker}` | {diag} |")
    out.append("")
    for f in REGISTRY.values():
        out.append(f"## {f.name}\n")
        out.append("```text\n" + f.math + "\n```\n")
        out.append(f"- builder: `{f.builder.__module__.rsplit('.', 1)[-1]}.{f.builder.__name__}`; writes {'rows named ' + repr(f.name) if f.writes == ROWS else 'column bounds (no rows)'}")
        out.append(f"- checked by: `{checker(f)}.{f.checker}`")
        if f.relax:
            r = f.relax
            out.append(f"- diagnosis: relaxed {r.direction} its limit, slack in {r.unit}, weight {r.weight:g}; "
                       f"change: {r.change}")
            out.append(f"- message: `{r.message}`")
        else:
            out.append(f"- diagnosis: not relaxed: {f.not_relaxed}")
        if f.lp_lazy:
            out.append("- LP relaxations: held back, rows added only where a solution breaks them "
                       "(`optimizer/solvers/lazy_rows.py`); the MIP has every row")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


__all__ = ["Family", "Relax", "REGISTRY", "family", "relaxable", "render_markdown", "ROWS", "BOUNDS"]
