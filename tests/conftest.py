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
