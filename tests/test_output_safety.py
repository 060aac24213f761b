"""dcplace never deletes or overwrites what it did not write (issue 13, items 1, 2 and 5).

Every command that writes a folder is pointed at a user's folder, at a file and under a
file: each refuses with exit 2 and a message that says what is there, and every byte of
the user's files is unchanged. Staging folders left by a killed process are cleaned, and
only those; folders honour the umask.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import job, make_scenario, region, site
from typer.testing import CliRunner

from dcplace.cli import app
from dcplace.models.outputs import MARKER, OutputRefused, check_destination, read_marker, remove_stale_staging
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.solving.pipeline import solve_to_folder

runner = CliRunner()
FAST = ["--time-limit", "60", "--gap", "0"]


def _tiny(folder: Path) -> Path:
    return make_scenario(folder, [site("a", 0, 0), site("b", 0, 1, power_price_usd_per_mwh=30)],
                         [region("town", 0, 0.5, chat=2000)], jobs=[job("pretrain", 48)])


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety")
    path = _tiny(root / "scenario")
    solve_to_folder(path, root / "plan", SolveOptions(mip_gap=0, time_limit_s=60))
    return root, path


@pytest.fixture
def users_folder(tmp_path):
    """What a user keeps: a scenario, notes and a spreadsheet."""
    folder = tmp_path / "mydata"
    _tiny(folder)
    (folder / "notes.txt").write_text("board meeting notes\n")
    (folder / "budget.xlsx").write_bytes(b"PK\x03\x04 not really a spreadsheet")
    return folder


def _commands(solved_root: Path, scenario: Path, out: Path, tmp: Path) -> dict[str, list[str]]:
    plan = str(solved_root / "plan")
    sweep = tmp / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": str(scenario), "scenarios": {"one": {}}}))
    return {
        "solve": ["solve", str(scenario), "--out", str(out), *FAST],
        "batch": ["batch", str(sweep), "--out", str(out)],
        "report": ["report", plan, "--out", str(out)],
        "map": ["map", plan, "--png", "--out", str(out)],
        "export": ["export", plan, "--format", "csv", "--out", str(out)],
        "compare": ["compare", plan, "--out", str(out)],
        "pareto": ["pareto", str(scenario), "--points", "2", "--out", str(out), "--time-limit", "30"],
        "data export": ["data", "export", str(out)],
    }


@pytest.mark.parametrize("command", ["solve", "batch", "report", "map", "export", "compare", "pareto", "data export"])
def test_no_command_writes_into_a_users_folder(solved, users_folder, tmp_path, command):
    root, scenario = solved
    before = _digests(users_folder)
    args = _commands(root, scenario, users_folder, tmp_path)[command]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "notes.txt" in result.output or "not empty" in result.output, result.output
    assert "Fix:" in result.output or "Fix" in result.output
    assert _digests(users_folder) == before
    assert not [p for p in users_folder.parent.iterdir() if p.name.startswith(".")], "a staging folder was left behind"


@pytest.mark.parametrize("command", ["solve", "batch", "report", "export", "compare", "data export"])
def test_no_command_turns_a_file_into_a_folder(solved, tmp_path, command):
    root, scenario = solved
    target = tmp_path / "results.txt"
    target.write_text("keep me\n")
    result = runner.invoke(app, _commands(root, scenario, target, tmp_path)[command])
    assert result.exit_code == 2, result.output
    assert target.read_text() == "keep me\n"
    result = runner.invoke(app, _commands(root, scenario, target / "sub", tmp_path)[command])
    assert result.exit_code == 2, result.output
    assert "file" in result.output


def test_solve_refuses_before_solving_and_replaces_its_own_plan_folder(solved, tmp_path):
    root, scenario = solved
    out = tmp_path / "plan"
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(out), *FAST]).exit_code == 0
    assert read_marker(out)["kind"] == "plan"
    (out / "report").mkdir()  # dcplace's own sub-outputs go with the folder it replaces
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(out), *FAST]).exit_code == 0
    assert not (out / "report").exists()
    # a plan folder is not a report folder, and the other way round
    with pytest.raises(OutputRefused, match="plan folder"):
        check_destination(out, "report")
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0  # its own report folder is replaced file by file
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(out / "report"), *FAST]).exit_code == 2


def test_an_empty_folder_may_be_used(solved, tmp_path):
    root, scenario = solved
    (tmp_path / "empty").mkdir()
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(tmp_path / "empty"), *FAST]).exit_code == 0
    assert (tmp_path / "empty" / "plan.json").is_file()


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_stale_staging_of_a_dead_process_is_removed_and_nothing_else(solved, tmp_path):
    from dcplace.models.outputs import _HOST

    root, scenario = solved
    dead, alive = _dead_pid(), os.getpid()
    stale = tmp_path / f".plan.dcplace-{_HOST}-{dead}-0a1b2c3d.tmp"
    live = tmp_path / f".plan.dcplace-{_HOST}-{alive}-0a1b2c3d.tmp"
    other_host = tmp_path / f".plan.dcplace-elsewhere-{dead}-0a1b2c3d.tmp"
    users = tmp_path / ".plan.backup.tmp"  # a user's hidden folder that merely looks like staging
    for folder in (stale, live, other_host, users):
        folder.mkdir()
        (folder / "plan.json").write_text("{partial")
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(tmp_path / "plan"), *FAST]).exit_code == 0
    assert not stale.exists()
    assert live.exists() and other_host.exists() and users.exists()


def test_a_swap_killed_half_way_restores_the_old_plan(solved, tmp_path):
    from dcplace.models.outputs import _HOST

    root, _ = solved
    old = tmp_path / f".plan.dcplace-{_HOST}-{_dead_pid()}-0a1b2c3d.old"
    import shutil

    shutil.copytree(root / "plan", old)
    assert remove_stale_staging(tmp_path, "plan") == []
    assert (tmp_path / "plan" / MARKER).is_file() and not old.exists()


def test_the_batch_folder_keeps_a_users_hidden_folder(solved, tmp_path):
    root, scenario = solved
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": str(scenario), "scenarios": {"one": {}}}))
    out = tmp_path / "runs"
    assert runner.invoke(app, ["batch", str(sweep), "--out", str(out)]).exit_code == 0
    (out / ".mine.tmp").mkdir()
    assert runner.invoke(app, ["batch", str(sweep), "--out", str(out)]).exit_code == 0
    assert (out / ".mine.tmp").is_dir()


@pytest.mark.parametrize("umask, folder_mode, file_mode", [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600), (0o002, 0o775, 0o664)])
def test_folders_and_files_honour_the_umask(solved, tmp_path, umask, folder_mode, file_mode):
    root, scenario = solved
    previous = os.umask(umask)
    try:
        solve_to_folder(scenario, tmp_path / "plan", SolveOptions(mip_gap=0, time_limit_s=60))
        runner.invoke(app, ["report", str(tmp_path / "plan")])
    finally:
        os.umask(previous)
    for path in [tmp_path / "plan", tmp_path / "plan" / "inputs", tmp_path / "plan" / "report"]:
        assert stat.S_IMODE(path.stat().st_mode) == folder_mode, path
    for path in [tmp_path / "plan" / "plan.json", tmp_path / "plan" / "inputs" / "sites.csv"]:
        assert stat.S_IMODE(path.stat().st_mode) == file_mode, path


def test_a_users_files_inside_a_plan_folder_stop_its_replacement(solved, tmp_path):
    root, scenario = solved
    out = tmp_path / "plan"
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(out), *FAST]).exit_code == 0
    (out / "my-notes.txt").write_text("mine\n")
    (out / "analysis").mkdir()
    (out / "analysis" / "work.ipynb").write_text("{}")
    result = runner.invoke(app, ["solve", str(scenario), "--out", str(out), *FAST])
    assert result.exit_code == 2, result.output
    assert "my-notes.txt" in result.output and "analysis/work.ipynb" in result.output
    assert (out / "my-notes.txt").read_text() == "mine\n" and (out / "analysis" / "work.ipynb").is_file()
    (out / "my-notes.txt").unlink()
    import shutil

    shutil.rmtree(out / "analysis")
    # dcplace's own later outputs inside the folder (a report, maps in a folder of the user's naming) are not the user's
    assert runner.invoke(app, ["map", str(out), "--png", "--out", str(out / "maps")]).exit_code == 0
    assert runner.invoke(app, ["check", str(out)]).exit_code == 0
    assert runner.invoke(app, ["solve", str(scenario), "--out", str(out), *FAST]).exit_code == 0


def test_write_scenario_never_writes_over_a_folder(solved, users_folder):
    from dcplace.models import load_scenario, write_scenario

    root, scenario = solved
    before = _digests(users_folder)
    with pytest.raises(OutputRefused, match="not empty"):
        write_scenario(load_scenario(scenario), users_folder)
    assert _digests(users_folder) == before


def test_a_symlinked_out_is_refused(solved, tmp_path):
    root, scenario = solved
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    result = runner.invoke(app, ["solve", str(scenario), "--out", str(tmp_path / "link"), *FAST])
    assert result.exit_code == 2 and "symbolic link" in result.output
    assert (tmp_path / "link").is_symlink() and not any(real.iterdir())


def test_a_member_may_not_be_named_like_the_batch_index(solved, tmp_path):
    root, scenario = solved
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "s", "base": str(scenario), "scenarios": {"batch.json": {}}}))
    result = runner.invoke(app, ["batch", str(sweep), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "batch.json" in result.output


def test_a_plan_folder_without_a_manifest_asks_for_a_re_solve(solved, tmp_path):
    import shutil

    root, _ = solved
    shutil.copytree(root / "plan", tmp_path / "old")
    (tmp_path / "old" / "manifest.json").unlink()
    result = runner.invoke(app, ["check", str(tmp_path / "old")])
    assert result.exit_code == 2 and "re-run `dcplace solve`" in result.output


def test_destinations_with_control_characters_or_inside_a_plans_inputs_are_refused(tmp_path):
    """GDAL's writers fail on a line break in a path (exit 6 before); anything written under a plan
    folder's inputs/, which its manifest hashes whole, would make that plan fail its check."""
    from dcplace.models.outputs import OutputRefused, check_destination, write_marker

    with pytest.raises(OutputRefused, match="control character"):
        check_destination(tmp_path / "gis\nx", "export")
    plan = tmp_path / "plan"
    (plan / "inputs").mkdir(parents=True)
    write_marker(plan, "plan")
    with pytest.raises(OutputRefused, match="inside the inputs/ of the plan folder"):
        check_destination(plan / "inputs" / "gis", "export")
    assert check_destination(plan / "export", "export") == plan / "export"  # beside inputs/ is fine


def test_a_destination_name_too_long_for_its_staging_folder_is_refused(tmp_path):
    """The staging folder beside the destination adds host, pid and token to its name (models/outputs.py):
    a name that fits the file system's 255 bytes but not with them was a raw 'File name too long'."""
    from dcplace.models.outputs import MAX_NAME_BYTES, NAME_MAX_BYTES, new_stage

    longest = tmp_path / ("p" * MAX_NAME_BYTES)
    assert check_destination(longest, "plan") == longest
    stage = new_stage(longest)
    assert len(stage.name.encode()) <= NAME_MAX_BYTES
    stage.rmdir()
    too_long = tmp_path / ("é" * ((MAX_NAME_BYTES + 2) // 2))  # counted in bytes: two per é
    with pytest.raises(OutputRefused, match=f"at most {MAX_NAME_BYTES} bytes"):
        check_destination(too_long, "plan")
    result = CliRunner().invoke(app, ["solve", "--out", str(tmp_path / ("q" * 230)), "--time-limit", "5"])
    assert result.exit_code == 2 and "at most" in result.output and "Traceback" not in result.output, result.output
