"""dcplace installs as one package, `dcplace`, and works from a wheel beside a user's own
`models/` and `data/` packages (issue 12's acceptance).

The wheel is built from this checkout (`pip wheel . --no-deps`) and unpacked into a fresh
virtual environment whose only other path is this environment's site-packages (for the
dependencies; the editable install's finder is not active there), so what runs is the
wheel alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.glob("dcplace-*.whl"))


@pytest.fixture(scope="module")
def venv_python(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    with zipfile.ZipFile(wheel) as whl:
        whl.extractall(site)  # a pure-Python wheel installs by unpacking into site-packages
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin" / "python"


def test_the_wheel_holds_only_dcplace_with_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"dcplace", wheel.name.split("-py3")[0] + ".dist-info"}
    for needed in ("dcplace/cli.py", "dcplace/data/default/scenario.yaml", "dcplace/data/catalog/chips.csv",
                   "dcplace/data/geo/ne_110m_countries.gpkg", "dcplace/reports/templates/report.html.j2",
                   "dcplace/optimizer/checker/plan.py", "dcplace/optimizer/model/formulation.py"):
        assert needed in names
    assert not [n for n in names if n.startswith(("dcplace/tests/", "dcplace/benchmarks/", "dcplace/.venv/"))]
    packages = {"dcplace/" + p.relative_to(ROOT).as_posix() for folder in ("models", "optimizer", "reports", "data")
                for p in (ROOT / folder).rglob("__init__.py")}
    assert packages - set(names) == set(), "pyproject.toml's [tool.setuptools] packages lacks these (the wheel would too)"
    entry = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt").decode()
    assert "dcplace = dcplace.cli:main" in entry


def test_the_wheel_solves_beside_a_users_own_models_and_data(venv_python, tmp_path):
    project = tmp_path / "ml-repo"
    for name in ("models", "data"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text("raise ImportError('the user\\'s own package was imported')\n")
    script = textwrap.dedent("""
        import json, dcplace
        scenario = dcplace.load_scenario()
        plan, report = dcplace.solve_to_folder(scenario, "plan", dcplace.SolveOptions(time_limit_s=120))
        print(json.dumps({"status": plan.solve.status, "ok": report.ok, "file": dcplace.__file__}))
    """)
    done = subprocess.run([str(venv_python), "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] and result["status"] in ("optimal", "feasible")
    assert "site-packages" in result["file"] and str(ROOT) not in result["file"]
    check = subprocess.run([str(venv_python), "-m", "dcplace.cli", "check", "plan"], cwd=project, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    # the user's own packages are still theirs; dcplace installed no top-level models, data, cli, ...
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    for name in ("models", "data", "optimizer", "reports", "cli"):
        probe = subprocess.run([str(venv_python), "-c", f"import {name}"], cwd=empty, capture_output=True, text=True, timeout=60)
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, name
