"""Overrides, sweeps and batch runs: parallel, isolated, resumable, and the same on Dask."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import job, make_scenario, region, site
from typer.testing import CliRunner

from dcplace.cli import app
from dcplace.models import ScenarioError, load_scenario, write_scenario
from dcplace.models.plan import read_plan
from dcplace.models.sweep import load_sweep
from dcplace.models.synthetic import synthetic_scenario
from dcplace.optimizer.studies.batch import read_batch, run_batch
from dcplace.optimizer.checker import check_plan_folder

runner = CliRunner()


# ----------------------------------------------------------------------------- overrides


@pytest.fixture
def base(tmp_path):
    sites = [site("a", 40.0, -74.0), site("b", 41.0, -75.0, power_price_usd_per_mwh=50, country="CA"),
             site("c", 39.0, -76.0, power_price_usd_per_mwh=150)]
    regions = [region("r1", 40.5, -74.5, chat=1600), region("r2", 39.5, -75.5, chat=800)]
    return make_scenario(tmp_path / "base", sites, regions, jobs=[job("j", 48)])


def write_yaml(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_extends_and_overrides_change_exactly_what_they_name(base, tmp_path):
    child = write_yaml(tmp_path / "child" / "scenario.yaml", {
        "name": "child", "extends": "../base/scenario.yaml",
        "economics": {"carbon_price_usd_per_t": 20},
        "overrides": {
            "sites[country=US].power_price_usd_per_mwh": "*1.5",  # a and c, not b
            "sites[b].power_limit_kw": 2500,
            "regions.rtt_budget_chat_ms": "-10",
            "policies.max_sites": 2,
        },
    })
    parent, scenario = load_scenario(base), load_scenario(child)
    price = {s.id: s.power_price_usd_per_mwh for s in scenario.sites}
    assert price == {"a": 150.0, "b": 50.0, "c": 225.0}
    assert {s.id: s.power_limit_kw for s in scenario.sites} == {"a": 10000, "b": 2500, "c": 10000}
    assert [r.rtt_budget_ms["chat"] for r in scenario.regions] == [40.0, 40.0]
    assert scenario.policies.max_sites == 2
    assert scenario.economics.carbon_price_usd_per_t == 20
    assert scenario.economics.discount_rate == parent.economics.discount_rate  # inherited
    assert scenario.name == "child" and scenario.content_hash != parent.content_hash
    # Overrides given to load_scenario (a sweep member) apply after the file's own.
    member = load_scenario(child, overrides={"sites[a].power_price_usd_per_mwh": "+1"})
    assert {s.id: s.power_price_usd_per_mwh for s in member.sites}["a"] == 151.0


def test_overriding_a_column_given_in_another_unit(tmp_path):
    # The embedded default gives power_limit_mw; an override in kW converts that column.
    child = write_yaml(tmp_path / "w.yaml", {"name": "w", "extends": "default", "overrides": {"sites[ashburn].power_limit_kw": 300000}})
    scenario = load_scenario(child)
    assert next(s for s in scenario.sites if s.id == "ashburn").power_limit_kw == 300000
    assert next(s for s in scenario.sites if s.id == "dallas").power_limit_kw == load_scenario().sites[1].power_limit_kw


def test_bad_overrides_name_the_override_and_the_fix(base, tmp_path):
    child = write_yaml(tmp_path / "bad.yaml", {"name": "bad", "extends": "base/scenario.yaml", "overrides": {
        "economics.carbon_prise": 5, "sites[zzz].power_limit_kw": 1, "sites.power_prize_usd_per_mwh": 2,
        "sitez.x": 1, "sites.power_price_usd_per_mwh": "*-1",
    }})
    with pytest.raises(ScenarioError) as info:
        load_scenario(child)
    text = str(info.value)
    assert "field 'overrides.economics.carbon_prise'" in text and "did you mean 'carbon_price_usd_per_t'" in text
    assert "no row of sites has id = 'zzz'" in text
    assert "did you mean 'power_price_usd_per_mwh'" in text
    assert "did you mean 'sites'" in text
    # A value made invalid by an override names the cell and the override that made it.
    assert "sites.csv, row 2, field 'power_price_usd_per_mwh'" in text and "after override 'sites.power_price_usd_per_mwh: *-1'" in text


def test_extends_cycle_is_reported(tmp_path):
    write_yaml(tmp_path / "a.yaml", {"name": "a", "extends": "b.yaml"})
    write_yaml(tmp_path / "b.yaml", {"name": "b", "extends": "a.yaml"})
    with pytest.raises(ScenarioError, match="cycle"):
        load_scenario(tmp_path / "a.yaml")


# ----------------------------------------------------------------------------- sweeps


def synthetic_base(folder: Path) -> Path:
    """A scenario that takes about a second to solve, so a batch can be killed midway."""
    return write_scenario(synthetic_scenario(seed=1, n_sites=8, n_regions=30, n_jobs=1), folder)


def twelve_member_sweep(folder: Path, base: Path) -> Path:
    return write_yaml(folder / "sweep.yaml", {
        "name": "twelve", "base": os.path.relpath(base, folder), "options": {"mip_gap": 0, "time_limit_s": 120},
        "scenarios": {
            "baseline": {},
            "power-plus-30": {"sites.power_price_usd_per_mwh": "*1.3"},
            "tight-latency": {"regions.rtt_budget_chat_ms": "*0.8"},
            "impossible-carbon": {"policies.carbon_cap_t_per_year": 1},
        },
        "grid": {"economics.carbon_price_usd_per_t": [0, 50, 100, 200], "regions.demand_chat_tok_s": ["*1", "*1.5"]},
    })


def test_sweep_members_are_named_by_their_values(tmp_path):
    sweep = load_sweep(twelve_member_sweep(tmp_path, synthetic_base(tmp_path / "base")))
    names = [m.name for m in sweep.members]
    assert len(names) == 12 == len(set(names))
    assert "carbon_price_usd_per_t=50,demand_chat_tok_s=x1.5" in names
    assert sweep.members[1].overrides == {"sites.power_price_usd_per_mwh": "*1.3"}


def test_bad_sweep_is_exit_2_naming_the_member(tmp_path):
    path = write_yaml(tmp_path / "s.yaml", {"name": "s", "scenarios": {"x": {"sitez.power": 1}}})
    result = runner.invoke(app, ["batch", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "x.sitez.power" in result.output and "did you mean 'sites'" in result.output
    bad_option = write_yaml(tmp_path / "o.yaml", {"name": "o", "options": {"mip_gapp": 0}, "scenarios": {"x": {}}})
    result = runner.invoke(app, ["batch", str(bad_option), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "mip_gapp" in result.output and "mip_gap" in result.output
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def local_batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    sweep_path = twelve_member_sweep(root, synthetic_base(root / "base"))
    result = runner.invoke(app, ["batch", str(sweep_path), "--out", str(root / "runs"), "--workers", "2"])
    return root, sweep_path, result


def test_twelve_scenarios_on_two_workers_give_twelve_plan_folders(local_batch):
    root, _, result = local_batch
    assert result.exit_code == 0, result.output  # infeasible is a result, not a failure
    index = read_batch(root / "runs")
    statuses = {m["name"]: m["status"] for m in index["members"]}
    assert len(statuses) == 12
    assert statuses["impossible-carbon"] == "infeasible"
    assert all(s == "optimal" for n, s in statuses.items() if n != "impossible-carbon")
    for name in statuses:
        folder = root / "runs" / name
        plan = read_plan(folder)
        assert plan.scenario == name
        if name != "impossible-carbon":
            assert check_plan_folder(folder).ok
    # The infeasible member says why, and the others did not stop for it.
    infeasible = next(m for m in index["members"] if m["name"] == "impossible-carbon")
    assert "carbon cap" in infeasible["message"]
    # Higher carbon price never lowers cost; 1.5x demand costs more than 1x.
    cost = {m["name"]: m["objective_usd_per_year"] for m in index["members"]}
    for demand in ("x1", "x1.5"):
        series = [cost[f"carbon_price_usd_per_t={p},demand_chat_tok_s={demand}"] for p in (0, 50, 100, 200)]
        assert series == sorted(series)
    assert cost["carbon_price_usd_per_t=0,demand_chat_tok_s=x1.5"] > cost["carbon_price_usd_per_t=0,demand_chat_tok_s=x1"]
    assert cost["carbon_price_usd_per_t=0,demand_chat_tok_s=x1"] == pytest.approx(cost["baseline"], rel=1e-9)
    assert (root / "runs" / "batch.csv").read_text().count("\n") == 13


def test_rerun_skips_by_input_hash_and_resolves_what_changed(local_batch):
    root, sweep_path, _ = local_batch
    before = {m["name"]: read_plan(root / "runs" / m["name"]).created_utc for m in read_batch(root / "runs")["members"]}
    result = runner.invoke(app, ["batch", str(sweep_path), "--out", str(root / "runs"), "--workers", "2"])
    assert result.exit_code == 0, result.output
    index = read_batch(root / "runs")
    assert all(m["skipped"] for m in index["members"])
    assert {m["name"]: read_plan(root / "runs" / m["name"]).created_utc for m in index["members"]} == before
    # Same folder name, different input: the member is solved again (hash, not folder existence).
    doc = yaml.safe_load(sweep_path.read_text())
    doc["scenarios"]["power-plus-30"] = {"sites.power_price_usd_per_mwh": "*1.4"}
    changed = write_yaml(root / "changed.yaml", {**doc, "base": doc["base"]})
    runner.invoke(app, ["batch", str(changed), "--out", str(root / "runs"), "--workers", "2"])
    skipped = {m["name"]: m["skipped"] for m in read_batch(root / "runs")["members"]}
    assert skipped["power-plus-30"] is False
    assert sum(skipped.values()) == 11


def test_a_crashing_member_is_recorded_and_the_rest_finish(tmp_path, monkeypatch):
    base = synthetic_base(tmp_path / "base")
    sweep_path = write_yaml(tmp_path / "s.yaml", {
        "name": "s", "base": "base/scenario.yaml", "options": {"mip_gap": 0},
        "scenarios": {"ok": {}, "broken": {"sites.power_limit_kw": "*0.5"}, "also-ok": {"economics.carbon_price_usd_per_t": 10}},
    })
    import dcplace.optimizer.studies.batch as batch

    real = batch.solve_to_folder

    def crash_on_broken(scenario, folder, options):
        if scenario.name == "broken":
            raise RuntimeError("solver exploded")
        return real(scenario, folder, options)

    monkeypatch.setattr(batch, "solve_to_folder", crash_on_broken)
    result = run_batch(load_sweep(sweep_path), tmp_path / "runs", workers=1)  # forked workers inherit the patch
    status = {r.name: r.status for r in result.results}
    assert status == {"ok": "optimal", "broken": "error", "also-ok": "optimal"}
    assert "solver exploded" in result.results[1].message
    assert not (tmp_path / "runs" / "broken").exists()


def test_kill_9_midway_loses_nothing_and_rerun_completes(tmp_path):
    sweep_path = twelve_member_sweep(tmp_path, synthetic_base(tmp_path / "base"))
    out = tmp_path / "runs"
    command = [sys.executable, "-c", "from cli import main; main()", "batch", str(sweep_path), "--out", str(out), "--workers", "2"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               cwd=Path(__file__).parent.parent)
    deadline = time.time() + 120
    finished_before: set[str] = set()
    while time.time() < deadline:
        try:
            finished_before = {m["name"] for m in read_batch(out)["members"]}
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        if len(finished_before) >= 3:
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the CLI and its pool workers, mid-solve
    process.wait()
    # the workers inherited the batch lock's file; it is free once the last of them is gone
    gone_by = time.time() + 30
    while time.time() < gone_by:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    assert 3 <= len(finished_before) < 12, "the batch must be killed midway"
    # Every member folder that exists is complete; the batch index is whole JSON.
    members_on_disk = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    for folder in members_on_disk:
        assert (folder / "plan.json").exists() and (folder / "inputs" / "scenario.yaml").exists(), folder
    created = {p.name: read_plan(p).created_utc for p in members_on_disk}
    read_batch(out)

    result = runner.invoke(app, ["batch", str(sweep_path), "--out", str(out), "--workers", "2"])
    assert result.exit_code == 0, result.output
    index = read_batch(out)
    assert len(index["members"]) == 12
    skipped = {m["name"] for m in index["members"] if m["skipped"]}
    assert set(created) <= skipped  # finished before the kill: not redone
    assert {p.name: read_plan(p).created_utc for p in members_on_disk} == created
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # staging of the killed run removed


def test_dask_local_cluster_gives_the_same_objectives(local_batch, tmp_path):
    distributed = pytest.importorskip("distributed")
    root, sweep_path, _ = local_batch
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = runner.invoke(app, ["batch", str(sweep_path), "--out", str(tmp_path / "dask"), "--scheduler", cluster.scheduler_address])
    assert result.exit_code == 0, result.output
    local = {m["name"]: (m["status"], m["objective_usd_per_year"]) for m in read_batch(root / "runs")["members"]}
    remote = {m["name"]: (m["status"], m["objective_usd_per_year"]) for m in read_batch(tmp_path / "dask")["members"]}
    assert remote.keys() == local.keys()
    for name, (status, objective) in local.items():
        if name == "power-plus-30":
            continue  # changed by the resume test above
        assert remote[name][0] == status
        assert remote[name][1] == pytest.approx(objective, rel=1e-9, abs=1e-6) if objective is not None else remote[name][1] is None


def test_kill_9_of_the_batch_process_alone_leaves_no_worker_holding_the_lock(tmp_path):
    """A terminal or scheduler may kill only the batch process, not its process group: its pool
    workers must die with it and not keep the lock, so the same command resumes and completes."""
    sweep_path = twelve_member_sweep(tmp_path, synthetic_base(tmp_path / "base"))
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "dcplace.cli", "batch", str(sweep_path), "--out", str(out), "--workers", "2"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    done: set[str] = set()
    while time.time() < deadline and len(done) < 1:
        try:
            done = {m["name"] for m in read_batch(out)["members"]}
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.05)
    children = children_of(process.pid)
    assert children, "the pool's workers were running"
    os.kill(process.pid, signal.SIGKILL)  # the parent only
    process.wait()
    assert 1 <= len(done) < 12, "the batch must be killed midway"
    # its workers are gone (or zombies: nothing reaps orphans in some containers) within seconds
    gone_by = time.time() + 10
    while time.time() < gone_by and any(_running(pid) for pid in children):
        time.sleep(0.05)
    assert not any(_running(pid) for pid in children)
    assert str(process.pid) in (out / ".batch.lock").read_text()  # the lock names its (dead) owner

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "another batch is running" not in rerun.stdout + rerun.stderr
    index = read_batch(out)
    assert len(index["members"]) == 12 and done <= {m["name"] for m in index["members"] if m["skipped"]}
    for m in index["members"]:
        if m["status"] != "infeasible":
            assert check_plan_folder(out / m["name"]).ok
    assert not [p.name for p in out.iterdir() if p.name.startswith(".") and p.name.endswith((".tmp", ".old"))]


def children_of(pid: int) -> list[int]:
    """The pids whose parent is `pid` (read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_lock_held_by_an_orphan_of_a_dead_batch_is_taken_over(tmp_path):
    """Where workers cannot be tied to their parent, an orphan may still hold the lock's file:
    its recorded owner is dead, so the next batch takes the lock over; a live owner is refused."""
    from dcplace.optimizer.studies.batch import BatchBusy, _exclusive

    out = tmp_path / "runs"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, socket, sys, time\n"
        f"h = open({str(out / '.batch.lock')!r}, 'a+'); fcntl.flock(h, fcntl.LOCK_EX)\n"
        "h.truncate(0); h.write(f'{sys.argv[1]} {socket.gethostname()} x\\n'); h.flush()\n"
        "print('locked', flush=True); time.sleep(60)\n"), "PID"], stdout=subprocess.PIPE, text=True)
    try:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        assert holder.stdout.readline().strip() == "locked"
        # the recorded owner is alive (the holder itself): refused, naming it
        (out / ".batch.lock").write_text(f"{holder.pid} {__import__('socket').gethostname()} x\n")
        with pytest.raises(BatchBusy, match=f"pid {holder.pid}"):
            with _exclusive(out):
                pass
        (out / ".batch.lock").write_text(f"{dead.pid} {__import__('socket').gethostname()} x\n")
        with _exclusive(out) as lock:  # owner dead: taken over
            assert str(os.getpid()) in (out / ".batch.lock").read_text()
            assert lock.handle.fileno() >= 0
    finally:
        holder.kill()
        holder.wait()
