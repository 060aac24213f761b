import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import time

import pytest


@pytest.fixture(scope="session")
def default_plan_folder(tmp_path_factory):
    """The embedded default solved once for the whole run (it takes minutes since the default was
    rebuilt on sourced data): (plan folder, progress reports, seconds). Tests read it; none may
    write into it. Under pytest-xdist the workers share one solve: the first to ask solves (holding
    a lock on a file in the run's temporary root), the others wait and read its folder and reports
    (the solve uses both cores anyway, so a second one beside it would only halve each)."""
    import fcntl
    import os
    import pickle

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return _solve_default(tmp_path_factory.mktemp("default-session") / "plan")
    shared = tmp_path_factory.getbasetemp().parent / "default-session"  # the run's root, the same for every worker
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "reports.pickle"
        if not done.exists():
            out, calls, seconds = _solve_default(shared / "plan")
            done.write_bytes(pickle.dumps((calls, seconds)))
        calls, seconds = pickle.loads(done.read_bytes())
    return shared / "plan", calls, seconds


def _solve_default(out: Path):
    from dcplace.optimizer.solving.pipeline import solve_to_folder
    from dcplace.optimizer.solving.solve import SolveOptions

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
