import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import time

import pytest


@pytest.fixture(scope="session")
def default_plan_folder(tmp_path_factory):
    """The embedded default solved once for the whole session (it takes minutes since the
    default was rebuilt on sourced data): (plan folder, progress reports, seconds). Tests
    read it; none may write into it."""
    from dcplace.optimizer.solving.pipeline import solve_to_folder
    from dcplace.optimizer.solving.solve import SolveOptions

    out = tmp_path_factory.mktemp("default-session") / "plan"
    calls: list = []
    started = time.perf_counter()
    solve_to_folder(None, out, SolveOptions(threads=2), progress=calls.append)
    return out, calls, time.perf_counter() - started


@pytest.fixture(scope="session")
def default_report(tmp_path_factory, default_plan_folder):
    """The session's default plan with its report written once: (root, layers), the plan a copy
    in root/plan, report.html and report.pdf in root/report. Tests read it; none may write into it."""
    import shutil

    from dcplace.reports import load_plan_layers, save_report

    root = tmp_path_factory.mktemp("default-report")
    shutil.copytree(default_plan_folder[0], root / "plan")
    layers = load_plan_layers(root / "plan")
    save_report(layers, root / "report")
    return root, layers
