"""Fault injection (issue 13): `kill -9` at seeded random moments of `dcplace solve` and
`dcplace batch`, each followed by the same command again.

After every kill: an existing plan folder is complete and passes the independent checker
(the old one or the new one, never partial; a kill between the two renames of a swap leaves
the old folder aside as `.old`, which the next run puts back), staging left by any earlier
killed run is gone (the re-run removed it), and a batch folder's members are complete. At
the end the command runs to completion and nothing hidden is left beside or inside the
output. The kill delays are spread over the whole run (start-up, solving, writing, after).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_batch import children_of, synthetic_base

from dcplace.models.plan import read_plan
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.studies.batch import read_batch

pytestmark = pytest.mark.slow

SEED = 13
SOLVE_TRIALS = 12
BATCH_TRIALS = 8
STAGING = re.compile(r"^\..+\.dcplace-[A-Za-z0-9]+-(?P<pid>\d+)-[0-9a-f]+\.(?P<what>tmp|old)$")
CLI = [sys.executable, "-m", "dcplace.cli"]


def staging(folder: Path) -> list[tuple[Path, int, str]]:
    if not folder.is_dir():
        return []
    return [(p, int(m["pid"]), m["what"]) for p in folder.iterdir() if (m := STAGING.match(p.name))]


def run_and_kill(command: list[str], delay: float, whole_group: bool) -> tuple[int | None, int, list[int]]:
    """Start `command`, SIGKILL it after `delay` s unless it finished: (exit code or None if
    killed, its pid, the pids of its children at the kill)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        code = process.wait(timeout=delay)
        return code, process.pid, []
    except subprocess.TimeoutExpired:
        pass
    children = children_of(process.pid)
    if whole_group:
        os.killpg(process.pid, signal.SIGKILL)
    else:
        os.kill(process.pid, signal.SIGKILL)  # the process alone, as a terminal or scheduler may
    process.wait()
    return None, process.pid, children


def wait_gone(pids: list[int], seconds: float = 10.0) -> None:
    """Pool workers die with their parent (they may stay zombies where nothing reaps orphans)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                alive.append(pid)
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"workers {alive} outlived their killed parent")


def assert_complete_plan(folder: Path) -> None:
    report = check_plan_folder(folder)
    assert report.ok, (folder, report.violations[:3])


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return synthetic_base(tmp_path_factory.mktemp("fault") / "base")  # solves in about a second


def test_kill_9_of_solve_at_random_moments(base, tmp_path):
    rng = random.Random(SEED)
    out = tmp_path / "plan"
    command = [*CLI, "solve", str(base), "--out", str(out), "--gap", "0", "--time-limit", "60"]
    outcomes: dict[str, int] = {}
    earlier_pids: set[int] = set()
    versions: set[str] = set()
    started = time.perf_counter()
    first = subprocess.run(command, capture_output=True, text=True, timeout=120)  # the plan folder later runs replace
    assert first.returncode == 0, first.stderr
    whole = time.perf_counter() - started  # start-up, solve, write and check: kills land across all of it
    for trial in range(SOLVE_TRIALS):
        delay = rng.uniform(0.3, 1.1 * whole)
        existed = out.exists()
        before = read_plan(out).created_utc if existed else None
        code, pid, _ = run_and_kill(command, delay, whole_group=True)
        left = staging(tmp_path)
        # Staging of earlier killed runs was removed by this run once it reached writing (its own may
        # remain if it was killed); a run killed before it wrote anything cleaned nothing yet.
        if code is not None or any(owner == pid for _, owner, _ in left):
            assert not [p for p, owner, _ in left if owner != pid], (trial, left)
        if code is not None:
            assert code == 0
            outcome = "completed"
        elif any(what == "old" for _, _, what in left) and not out.exists():
            outcome = "killed mid-swap (old folder aside)"
        elif left:
            outcome = "killed while writing"
        else:
            outcome = "killed before writing"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if out.exists():
            assert_complete_plan(out)  # the old complete folder or the new complete one
            versions.add(read_plan(out).created_utc)
            assert before is None or read_plan(out).created_utc >= before
        else:
            assert not existed or any(what == "old" for _, _, what in left)
        earlier_pids.add(pid)
    # The same command once more, to the end: complete, checked, nothing hidden left.
    final = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    assert_complete_plan(out)
    assert staging(tmp_path) == [] and staging(out) == []
    print(f"solve kill trials: {SOLVE_TRIALS} (a run takes {whole:.1f} s): {outcomes}; plan versions seen {len(versions)}")
    assert outcomes.get("completed", 0) < SOLVE_TRIALS, "some kills must land during the run"


def test_kill_9_of_batch_at_random_moments(base, tmp_path):
    rng = random.Random(SEED + 1)
    started = time.perf_counter()
    calibration = subprocess.run([*CLI, "solve", str(base), "--out", str(tmp_path / "one"), "--gap", "0"], capture_output=True, timeout=120)
    assert calibration.returncode == 0
    whole = 1.6 * (time.perf_counter() - started)  # about a batch of 4 members on 2 workers
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "faults", "base": os.path.relpath(base, tmp_path), "options": {"mip_gap": 0, "time_limit_s": 60},
        "scenarios": {"baseline": {}, "power-plus-30": {"sites.power_price_usd_per_mwh": "*1.3"},
                      "carbon-50": {"economics.carbon_price_usd_per_t": 50}, "demand-x1.5": {"regions.demand_chat_tok_s": "*1.5"}},
    }, sort_keys=False))
    episode = 0
    out = tmp_path / "runs-0"
    command = [*CLI, "batch", str(sweep), "--out", str(out), "--workers", "2"]
    outcomes: dict[str, int] = {}
    for trial in range(BATCH_TRIALS):
        if (out / "batch.json").exists() and all(m["status"] == "optimal" for m in read_batch(out)["members"]) \
                and len(read_batch(out)["members"]) == 4:
            episode += 1  # that batch is done: a re-run would only skip; kill a fresh one
            out = tmp_path / f"runs-{episode}"
            command = [*CLI, "batch", str(sweep), "--out", str(out), "--workers", "2"]
        delay = rng.uniform(0.5, whole)
        whole_group = trial % 2 == 0  # half the kills hit the batch process alone
        code, pid, children = run_and_kill(command, delay, whole_group)
        wait_gone(children)
        if code is not None:
            assert code == 0, f"trial {trial}: exit {code} (a busy lock is exit 2)"
            outcome = "completed"
        else:
            outcome = f"killed ({'group' if whole_group else 'parent only'})"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        # Every member folder present is complete; the index, when present, is whole JSON.
        for folder in (p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")) if out.exists() else []:
            assert_complete_plan(folder)
        if (out / "batch.json").exists():
            read_batch(out)
        # Nothing of earlier runs is left once this run got as far as writing: only the just-killed
        # run's staging (and its workers'); a run killed before its first write cleaned nothing yet.
        owners = {pid, *children}
        if code is not None or any(owner in owners for _, owner, _ in staging(out)):
            assert not [p for p, owner, _ in staging(out) if owner not in owners], (trial, staging(out))
    final = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "another batch is running" not in final.stdout + final.stderr
    index = read_batch(out)
    assert {m["name"] for m in index["members"]} == {"baseline", "power-plus-30", "carbon-50", "demand-x1.5"}
    assert all(m["status"] == "optimal" for m in index["members"])
    for m in index["members"]:
        assert_complete_plan(out / m["name"])
        assert staging(out / m["name"]) == []
    assert staging(out) == [] and staging(tmp_path) == []
    for earlier in range(episode):
        assert all(m["status"] == "optimal" for m in read_batch(tmp_path / f"runs-{earlier}")["members"])
    print(f"batch kill trials: {BATCH_TRIALS} over {episode + 1} batch folders: {outcomes}; "
          f"last re-run skipped {json.dumps({m['name']: m['skipped'] for m in index['members']})}")
    assert sum(n for k, n in outcomes.items() if k.startswith("killed")) >= BATCH_TRIALS // 4


def test_sigterm_while_writing_leaves_no_staging(base, tmp_path):
    """SIGTERM (kill, timeout, a scheduler, a container stop) ends the process without unwinding;
    the CLI's handler removes its staging first, so a run stopped while it writes leaves the
    destination as it was and nothing hidden beside it, and still ends by the signal."""
    landed = 0
    for attempt in range(6):
        out = tmp_path / f"plan-{attempt}"
        process = subprocess.Popen([*CLI, "solve", str(base), "--out", str(out), "--gap", "0", "--time-limit", "60"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while process.poll() is None and not staging(tmp_path):
            time.sleep(0.002)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        if code == -signal.SIGTERM:
            landed += 1  # stopped before its folder moved into place (no folder) or just after (a complete one)
            assert not out.exists() or check_plan_folder(out).ok
        else:
            assert code == 0 and check_plan_folder(out).ok
        assert staging(tmp_path) == [], staging(tmp_path)
        assert not list(tmp_path.glob(".*.dcplace-lock")), "the run's lock on its --out is gone with it"
        if landed >= 2:
            break
    assert landed, "no SIGTERM landed while the plan folder was being written"


def test_the_staging_a_process_owns_is_what_its_sigterm_handler_removes(tmp_path):
    from dcplace.models.outputs import new_stage, remove_own_staging, staged_folder

    stage = new_stage(tmp_path / "out")
    (stage / "plan.json").write_text("{}")
    with staged_folder(tmp_path / "kept", "plan") as other:
        (other / "plan.json").write_text("{}")
    remove_own_staging()
    assert not stage.exists() and staging(tmp_path) == []
    assert (tmp_path / "kept" / "plan.json").exists(), "a folder already moved into place is not staging any more"


def test_a_signal_while_report_files_move_waits_for_the_last(tmp_path, monkeypatch):
    """staged_files moves a report's files one by one; a SIGTERM (or Ctrl-C) handled between two
    moves would leave half old, half new files. The CLI's handlers wait for the last move."""
    from dcplace.models import outputs

    out = tmp_path / "report"
    with outputs.staged_files(out, "report") as stage:
        for name in ("a.html", "b.pdf", "c.csv"):
            (stage.dir / name).write_text("old")
    seen: list[dict] = []

    def handler(signum, frame):
        seen.append({p.name: p.read_text() for p in out.iterdir() if p.name != outputs.MARKER})

    deferred = outputs.defer_while_moving(handler)
    replace = os.replace

    def replace_then_signal(src, dst):
        replace(src, dst)
        deferred(signal.SIGTERM, None)  # as if the signal came right after this move

    monkeypatch.setattr(outputs.os, "replace", replace_then_signal)
    with outputs.staged_files(out, "report") as stage:
        for name in ("a.html", "b.pdf", "c.csv"):
            (stage.dir / name).write_text("new")
    assert seen == [{"a.html": "new", "b.pdf": "new", "c.csv": "new"}], "the handler ran once, after every file moved"
    deferred(signal.SIGTERM, None)  # outside a move it runs at once
    assert len(seen) == 2
    assert staging(tmp_path) == []
