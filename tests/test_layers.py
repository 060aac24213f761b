"""The package's layers import one way and have no cycles (read from the source with ast).

    models <- optimizer.model <- optimizer.solvers <- optimizer.solving <- optimizer.studies
           <- reports <- cli <- dcplace (the public API)

A module may import its own layer and the layers to its left; the independent checker
(the package optimizer/checker/) imports nothing of dcplace but its own modules. The solver engines (highspy, pyomo, ortools)
are imported only under optimizer/solvers/: the layers above solve through it
(optimizer/solvers/lp.py for their own LPs and MIPs); tests, benchmarks and data scripts aside. Imports inside functions count too (an
import may not hide in a function to dodge a cycle); only `if TYPE_CHECKING:` blocks,
which never run, are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "optimizer", "reports", "data")

LAYERS = [  # (module prefix, rank); the longest matching prefix decides
    ("dcplace.models", 0),
    ("dcplace.data", 0),
    ("dcplace.optimizer.model", 1),
    ("dcplace.optimizer.solvers", 2),
    ("dcplace.optimizer.solving", 3),
    ("dcplace.optimizer", 3),  # the optimizer's __init__ re-exports solving
    ("dcplace.optimizer.studies", 4),
    ("dcplace.reports", 5),
    ("dcplace.cli", 6),
    ("dcplace", 7),
]
INDEPENDENT = "dcplace.optimizer.checker"  # the independent checker's package: its modules import one another only
ENGINES = ("highspy", "pyomo", "ortools")  # imported only under ENGINE_LAYER
ENGINE_LAYER = "dcplace.optimizer.solvers"


def independent(module: str) -> bool:
    return module == INDEPENDENT or module.startswith(INDEPENDENT + ".")


def rank(module: str) -> int:
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["dcplace", *parts])


def sources() -> dict[str, str]:
    files = [ROOT / "__init__.py", ROOT / "cli.py"] + [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    return {module_name(p): p.read_text() for p in files if p.name != "build_default.py"}  # a script run by hand


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(source: str) -> list[tuple[int, str]]:
    """(line, imported module) for every dcplace or old top-level import that can run."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "." * node.level + (node.module or "")))  # relative: reported, dcplace imports absolutely
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module == "dcplace" or node.module.startswith("dcplace."):
                found.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)  # `from pkg import module`
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def layer_violations(modules: dict[str, str]) -> list[str]:
    """Every import against the layering, every bare top-level import of a dcplace folder, every cycle."""
    known = set(modules)
    out = []
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, source in modules.items():
        for line, target in imports(source):
            if target.startswith("."):
                out.append(f"{module}:{line} imports '{target}' relatively: write the absolute 'dcplace.' import")
                continue
            top = target.split(".")[0]
            if top in ENGINES and not (module == ENGINE_LAYER or module.startswith(ENGINE_LAYER + ".")):
                out.append(f"{module}:{line} imports the engine '{target}': only {ENGINE_LAYER} may (solve through it)")
                continue
            if top in (*PACKAGES, "cli"):
                out.append(f"{module}:{line} imports '{target}': import it as 'dcplace.{target}'")
                continue
            if not (target == "dcplace" or target.startswith("dcplace.")):
                continue
            while target not in known and "." in target:  # `from dcplace.x import name` names a module or an attribute
                target = target.rsplit(".", 1)[0]
            if target not in known:
                out.append(f"{module}:{line} imports unknown dcplace module '{target}'")
                continue
            if independent(module) and not independent(target):
                out.append(f"{module}:{line} imports '{target}': the independent checker imports nothing of dcplace")
            elif rank(target) > rank(module) and not module.startswith(target + "."):
                out.append(f"{module}:{line} imports '{target}', a higher layer ({rank(target)} > {rank(module)})")
            if target != module and not module.startswith(target + "."):
                graph[module].add(target)
    # cycles: Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append("import cycle: " + " -> ".join(sorted(component)))

    for v in graph:
        if v not in index:
            strongconnect(v)
    return out


def test_the_package_imports_one_way_without_cycles():
    assert layer_violations(sources()) == []


@pytest.mark.parametrize("module, source, expected", [
    ("dcplace.optimizer.model.costs", "from dcplace.optimizer.solvers.highs_model import to_highs", "higher layer"),
    ("dcplace.models.plan", "def f():\n    from dcplace.reports import export\n", "higher layer"),
    ("dcplace.optimizer.checker.clock", "import dcplace.models", "independent checker"),
    ("dcplace.optimizer.checker.plan", "def f():\n    from dcplace.optimizer.model.families import REGISTRY\n", "independent checker"),
    ("dcplace.optimizer.checker", "from dcplace.optimizer.solving.pipeline import solve_to_folder", "independent checker"),
    ("dcplace.optimizer.solving.solve", "from models import load_scenario", "import it as 'dcplace.models'"),
    ("dcplace.models.plan", "from ..reports import export", "relatively"),
    ("dcplace.optimizer.studies.duals", "import highspy", "the engine 'highspy'"),
    ("dcplace.optimizer.solving.solve", "def f():\n    from pyomo.environ import ConcreteModel\n", "the engine 'pyomo.environ'"),
    ("dcplace.reports.export", "from ortools.linear_solver import pywraplp", "the engine 'ortools.linear_solver'"),
    ("dcplace.cli", "import highspy", "the engine 'highspy'"),
])
def test_a_deliberate_violation_is_caught(module, source, expected):
    modules = sources()
    modules[module] = modules[module] + "\n" + source + "\n"
    found = layer_violations(modules)
    assert any(expected in v and v.startswith(module) for v in found), found


def test_the_checker_is_a_package_that_imports_only_itself():
    """Every module of optimizer/checker/ is read, and each imports only its siblings of dcplace."""
    modules = sources()
    checker = {m for m in modules if independent(m)}
    assert {f"{INDEPENDENT}.{name}" for name in ("plan", "inputs", "constraints", "resilience", "clock", "costs", "folder",
                                                "schedule")} <= checker
    outside = {t for m in checker for _, t in imports(modules[m]) if t.startswith("dcplace") and not independent(t)}
    assert outside == set(), outside


def test_a_cycle_hidden_in_a_function_is_caught():
    modules = sources()
    modules["dcplace.optimizer.model.latency"] += "\ndef f():\n    from dcplace.optimizer.model import index\n"
    assert any(v.startswith("import cycle") and "latency" in v for v in layer_violations(modules))


def test_type_checking_imports_are_not_runtime_edges():
    assert imports("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dcplace.reports import x\n") == [(1, "typing")]


def test_the_engines_are_imported_only_under_solvers():
    """highspy, pyomo and ortools: only optimizer/solvers/ imports them (its lp.py serves the layers above)."""
    engines = [v for v in layer_violations(sources()) if "the engine" in v]
    assert engines == []
    users = {m for m, src in sources().items() for _, t in imports(src) if t.split(".")[0] in ENGINES}
    assert users and all(m.startswith(ENGINE_LAYER + ".") for m in users), users
