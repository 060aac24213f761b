"""A plan folder edited or damaged by hand: every command names the file, the record and the
field and says what would fix it (exit 2), never a validator's raw text or a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import make_scenario, region, site
from dcplace.cli import app
from dcplace.models import load_scenario
from dcplace.models.plan import PlanFileError, read_plan
from dcplace.optimizer import SolveOptions
from dcplace.optimizer.checker import check_plan_folder
from dcplace.optimizer.solving.pipeline import solve_to_folder

runner = CliRunner()


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plan")
    path = make_scenario(root / "in", sites=[site("a", 0, 0), site("b", 0, 0.5)], regions=[region("town", 0, 0.1, chat=1600)])
    solve_to_folder(load_scenario(path), root / "plan", SolveOptions(mip_gap=0.0, time_limit_s=30))
    return root / "plan"


@pytest.fixture
def plan_folder(solved, tmp_path) -> Path:
    return Path(shutil.copytree(solved, tmp_path / "plan"))


def edit_plan(folder: Path, edit) -> None:
    doc = json.loads((folder / "plan.json").read_text())
    edit(doc)
    (folder / "plan.json").write_text(json.dumps(doc))


def test_a_field_of_the_wrong_type_is_named_by_its_record(plan_folder):
    edit_plan(plan_folder, lambda doc: doc["sites"][1].__setitem__("racks_total", "many"))
    with pytest.raises(PlanFileError) as info:
        read_plan(plan_folder)
    text = str(info.value)
    assert "plan.json" in text and "sites[1] ('b') -> field 'racks_total'" in text and "Fix:" in text, text
    result = runner.invoke(app, ["report", str(plan_folder)])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "sites[1] ('b')" in output and "racks_total" in output and "Traceback" not in output


def test_another_format_version_is_refused_by_every_reader(plan_folder):
    edit_plan(plan_folder, lambda doc: doc.__setitem__("format_version", 99))
    with pytest.raises(PlanFileError, match="format_version is 99; this dcplace reads plan.json version 1"):
        read_plan(plan_folder)
    for command in (["report"], ["outages"], ["why", "prices"]):
        result = runner.invoke(app, [*command, str(plan_folder)])
        assert result.exit_code == 2, (command, result.output)
        assert "format_version is 99" in " ".join(result.output.split()), (command, result.output)


def test_a_plan_json_that_is_not_json_says_so(plan_folder):
    (plan_folder / "plan.json").write_text('{"sites": [')
    with pytest.raises(PlanFileError, match="not readable as JSON"):
        read_plan(plan_folder)


def test_an_objective_missing_from_a_solved_plan_is_damage_not_no_plan(plan_folder):
    edit_plan(plan_folder, lambda doc: doc.__setitem__("objective_usd_per_year", None))
    result = runner.invoke(app, ["why", "prices", str(plan_folder)])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert "records no objective_usd_per_year" in output and "holds no plan" not in output, output


@pytest.mark.parametrize("text, words", [("", "empty or not a YAML mapping"), ("name: x\n", "lacks 'economics'")])
def test_check_names_what_inputs_scenario_yaml_lacks(plan_folder, text, words):
    (plan_folder / "inputs" / "scenario.yaml").write_text(text)
    report = check_plan_folder(plan_folder)
    messages = " ".join(str(v) for v in report.violations)
    assert not report.ok and words in messages and "AttributeError" not in messages and "NoneType" not in messages, messages
