"""Issue 50 (reliability, round 3): a checked result is never silently replaced, numbers are
bounded to physical ranges, unit slips are named, long names do not stall the report, a huge
table is refused with a size it can handle, and the small ones (item 10)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import job, make_scenario, region, site
from typer.testing import CliRunner

from dcplace.cli import EXIT_BAD_INPUT, app
from dcplace.models.outputs import OutputBusy, destination_lock
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solving.pipeline import solve_to_folder

runner = CliRunner()


def _tiny(folder: Path, **site_overrides) -> Path:
    sites = [site("a", 40.0, -74.0, **site_overrides), site("b", 41.0, -75.0)]
    return make_scenario(folder, sites, [region("r", 40.5, -74.5, chat=800)], jobs=[job("j", 48)])


# ----------------------------------------------------------------------------- item 2: one run per output folder


def _hold_lock(out: Path) -> subprocess.Popen:
    """Another process holding the lock on `out` (as a run that is still solving does)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from dcplace.models.outputs import destination_lock\n"
        "with destination_lock(sys.argv[1], 'plan'):\n"
        "    print('locked', flush=True); time.sleep(60)\n"), str(out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_run_on_the_same_out_is_refused_at_once_naming_the_other(tmp_path, monkeypatch):
    """Two solves with --out same both said 'plan in same (checked)' and the folder held the first's."""
    import dcplace.optimizer.solving.pipeline as pipeline

    scenario = _tiny(tmp_path / "s")
    out = tmp_path / "same"
    holder = _hold_lock(out)
    try:
        solved = []
        monkeypatch.setattr(pipeline, "solve", lambda *a, **k: solved.append(1))  # refused before the solve
        began = time.monotonic()
        with pytest.raises(OutputBusy, match=f"pid {holder.pid} on "):
            solve_to_folder(scenario, out, SolveOptions(time_limit_s=30))
        assert not solved and time.monotonic() - began < 5
        monkeypatch.undo()
        result = runner.invoke(app, ["solve", str(scenario), "--out", str(out), "--quiet"])
        assert result.exit_code == EXIT_BAD_INPUT == 2, result.output
        assert f"pid {holder.pid}" in result.output and "another --out" in result.output
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    # its holder gone (killed: the kernel drops its flock, its file stays): the next run takes the lock over
    assert (tmp_path / ".same.dcplace-lock").exists()
    plan, report = solve_to_folder(scenario, out, SolveOptions(time_limit_s=30))
    assert report.ok and (out / "plan.json").exists()
    assert not (tmp_path / ".same.dcplace-lock").exists()  # nothing left beside the plan


def test_a_lock_whose_recorded_owner_is_dead_is_taken_over(tmp_path):
    """A process that inherited the lock's file outlived its run: the recorded owner is dead, so
    the lock is taken over; a live recorded owner is refused."""
    out = tmp_path / "plan"
    lock = tmp_path / ".plan.dcplace-lock"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"h = open({str(lock)!r}, 'a+'); fcntl.flock(h, fcntl.LOCK_EX)\n"
        "print('locked', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        lock.write_text(f"{holder.pid} {socket.gethostname()} x\n")
        with pytest.raises(OutputBusy, match=f"pid {holder.pid}"):
            with destination_lock(out, "plan"):
                pass
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        lock.write_text(f"{dead.pid} {socket.gethostname()} x\n")
        with destination_lock(out, "plan"):
            assert lock.read_text().split()[0] == str(os.getpid())
    finally:
        holder.kill()
        holder.wait()
