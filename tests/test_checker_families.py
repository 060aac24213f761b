"""The checker's violations name the registry's constraint families (Violation.registry_families).

The checker imports nothing of dcplace, so it writes each family's name as text where a rule
reports it (`self.fail(..., breaks="site_power")`). Read from its source with ast, those
names are exactly registry names, each sits in the check_* method the registry names for the
family (or a helper that method calls), and every registered family has such a rule but the ones
listed in NO_RULE_OF_ITS_OWN, each with the reason. tests/test_registry.py's leave-one-out test shows,
solving, that a plan built without a family is reported under that family's name.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from dcplace.optimizer.checker import CheckReport, Violation
from dcplace.optimizer.model import formulation  # noqa: F401  (fills the registry)
from dcplace.optimizer.model.families import REGISTRY, flagged

CHECKER = Path(__file__).resolve().parent.parent / "optimizer" / "checker"

NO_RULE_OF_ITS_OWN = {
    # optimality rows (Family.optimality): they hold for some cheapest plan, not for every plan the checker may be given
    **{name: "an optimality row" for name in flagged("optimality")},
    "failover_aggregate": "implied by the loss rows: the checker re-routes every loss itself (failover_reserve, failover_capacity)",
    "place_needs_zone": "implied by training_capacity and density_needs_zone: a job's racks in an unbuilt zone are density_needs_zone",
    "busy_energy_split": "bounds the objective only (no plan breaks it): check_cost recomputes the energy from the dispatch",
    "busy_energy_within_racks": "bounds the objective only (no plan breaks it): check_cost recomputes the energy from the dispatch",
}


def labelled_rules() -> dict[str, set[tuple[str, str]]]:
    """Registry family name -> the (class, method) whose `fail(..., breaks=...)` reports it."""
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in CHECKER.glob("*.py"):
        for cls in (n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)):
            for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
                for call in (n for n in ast.walk(method) if isinstance(n, ast.Call)):
                    for kw in call.keywords:
                        if kw.arg == "breaks":
                            for node in ast.walk(kw.value):
                                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                                    out[node.value].add((cls.name, method.name))
    return out


def calls() -> dict[str, set[str]]:
    """Method name -> the self.<method>() it calls, over every class of the package (the mixins are one class)."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in CHECKER.glob("*.py"):
        for cls in (n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)):
            for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
                for node in ast.walk(method):
                    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                        out[method.name].add(node.attr)
    return out


def reached(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for callee in graph.get(todo.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


def test_the_checkers_family_names_are_registry_names():
    labels = labelled_rules()
    assert labels, "no rule of the checker names a registry family"
    assert set(labels) <= set(REGISTRY), sorted(set(labels) - set(REGISTRY))


def test_every_registered_family_has_a_rule_or_a_reason():
    labels = labelled_rules()
    assert set(NO_RULE_OF_ITS_OWN) <= set(REGISTRY), sorted(set(NO_RULE_OF_ITS_OWN) - set(REGISTRY))
    assert not set(labels) & set(NO_RULE_OF_ITS_OWN), sorted(set(labels) & set(NO_RULE_OF_ITS_OWN))
    assert set(labels) | set(NO_RULE_OF_ITS_OWN) == set(REGISTRY), sorted(set(REGISTRY) - set(labels) - set(NO_RULE_OF_ITS_OWN))


def test_each_label_sits_in_the_method_the_registry_names():
    """A family's rule is in the check_* method of the registry's record (PlanChecker or ScheduleChecker by section),
    or in a helper that method calls."""
    graph = calls()
    wrong = []
    for name, places in labelled_rules().items():
        fam = REGISTRY[name]
        owner = "ScheduleChecker" if fam.section == "periods" else None
        for cls, method in places:
            if (owner and cls != owner) or (not owner and cls == "ScheduleChecker") or method not in reached(fam.checker, graph):
                wrong.append(f"{name}: labelled in {cls}.{method}, which {fam.checker} does not reach")
    assert wrong == []


def test_a_report_names_the_registry_families_it_breaks():
    report = CheckReport("plan")
    report.add("power", "site a draws too much.", breaks="site_power")
    report.add("failover", "losing site a leaves 10 tok/s unserved.", breaks=("failover_reserve", "failover_capacity"))
    report.add("sites", "site a: gpus is 3 in plan.json, recomputed 4.")
    assert report.violations[0] == Violation("power", "site a draws too much.", ("site_power",))
    assert report.registry_families_violated() == {"site_power", "failover_reserve", "failover_capacity"}
    assert report.families_violated() == {"power", "failover", "sites"}
    assert str(report.violations[2]) == "[sites] site a: gpus is 3 in plan.json, recomputed 4."  # the label, not the registry's name
