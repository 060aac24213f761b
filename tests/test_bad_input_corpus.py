"""A corpus of bad inputs on a copy of the default world, one break per case, aimed at the newer
inputs (the clock's profiles and cloud regions, failover budgets, jobs' trough columns,
periods) and at damaged files: each is refused or warned about with a message naming file,
row and field and saying what would fix it, and nothing else is reported in its wake."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dcplace.models import ScenarioError, load_scenario, scenario_warnings
from dcplace.models.overrides import OverrideError, parse_assignments, parse_override
from dcplace.models.periods import period_scenarios
from dcplace.models.scenario_file import default_scenario_path

DEFAULT = default_scenario_path().parent


@pytest.fixture
def world(tmp_path) -> Path:
    folder = tmp_path / "world"
    shutil.copytree(DEFAULT, folder)
    return folder


def edit_csv(path: Path, edit) -> None:
    rows = list(csv.reader(path.open(newline="")))
    edit(rows)
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


def add_column(path: Path, name: str, default: str = "", **by_line: str) -> None:
    """A column `name` (every row `default`), with `line<N>` = value on file line N."""
    def edit(rows):
        rows[0].append(name)
        for row in rows[1:]:
            row.append(default)
        for key, value in by_line.items():
            rows[int(key.removeprefix("line")) - 1][-1] = value
    edit_csv(path, edit)


def append_yaml(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def problems(path: Path) -> list:
    with pytest.raises(ScenarioError) as info:
        scenario = load_scenario(path)
        period_scenarios(scenario)  # what `dcplace validate` also asks of a scenario with periods
    return info.value.problems


def only(found: list, file: str, row: int | None, field: str | None, *phrases: str):
    """The one problem found, at file/row/field, carrying the phrases and a fix."""
    assert len(found) == 1, [str(p) for p in found]
    problem = found[0]
    assert problem.file.endswith(file) and problem.row == row and problem.field == field, str(problem)
    text = str(problem).lower()
    for phrase in phrases:
        assert phrase.lower() in text, text
    assert problem.fix, "every problem says what would fix it"
    return problem


def warnings_at(path: Path, field: str) -> list:
    return [w for w in scenario_warnings(load_scenario(path)) if w.field == field]


# ----------------------------------------------------------------------------- values that read as something else


def test_a_yes_no_value_is_not_read_as_a_number(world):
    append_yaml(world / "scenario.yaml", "clock:\n  hours: true\n")
    only(problems(world / "scenario.yaml"), "scenario.yaml", None, "clock.hours", "yes/no", "not a number")


@pytest.mark.parametrize("column", ["failover_rtt_ms", "rtt_budget_ms", "demand_tok_s"])
def test_a_column_named_after_a_folded_field_is_unknown_not_ignored(world, column):
    # rtt_budget_ms is filled from rtt_budget_<class>_ms: a column of that name used to vanish without a word
    add_column(world / "regions.csv", column, "", line10="100")
    problem = only(problems(world / "scenario.yaml"), "regions.csv", 1, column, "unknown column")
    assert f"'{column}'" not in problem.fix  # the hint names a real column, not the one just refused


def test_a_failover_column_of_an_unknown_class_is_pointed_at_a_real_column(world):
    add_column(world / "regions.csv", "failover_rtt_video_ms", "", line10="100")
    problem = only(problems(world / "scenario.yaml"), "regions.csv", 1, "failover_rtt_video_ms", "unknown column")
    assert "failover_rtt_chat_ms" in problem.fix or "failover_rtt_reasoning_ms" in problem.fix, problem.fix


# ----------------------------------------------------------------------------- fabric tiers, jobs, rentals


def test_an_inference_fabric_tier_no_fabric_has_is_refused(world):
    append_yaml(world / "scenario.yaml", "clock:\n  hours: 24\n  inference_fabric_tier: 99\n")
    only(problems(world / "scenario.yaml"), "scenario.yaml", None, "clock.inference_fabric_tier", "tier 99", "at most 4")


def test_a_cloud_fabric_tier_above_every_fabric_is_warned_about(world):
    # allowed (it only has to meet jobs' min_fabric_tier), but it meets every job's: likely a typo
    append_yaml(world / "scenario.yaml", "cloud_regions: cloud_regions.csv\n")
    edit_csv(world / "cloud_regions.csv", lambda rows: rows[9].__setitem__(rows[0].index("fabric_tier"), "99"))
    found = warnings_at(world / "scenario.yaml", "fabric_tier")
    assert [w.row for w in found] == [10] and "tier 99" in found[0].message and "at most 4" in found[0].fix, [str(w) for w in found]


def test_more_gpu_hours_a_day_than_the_jobs_gpus_give_is_warned_about(world):
    # allowed (the troughs may lend more GPUs than the job's own size), but a typo is likelier
    add_column(world / "jobs.csv", "interruptible", "false", line3="true")
    add_column(world / "jobs.csv", "gpu_hours_per_day", "", line3="1000000")
    found = warnings_at(world / "scenario.yaml", "gpu_hours_per_day")
    assert [w.row for w in found] == [3] and "196,608" in found[0].message, [str(w) for w in found]


def test_trough_columns_that_change_nothing_are_warned_about(world):
    add_column(world / "jobs.csv", "gpu_hours_per_day", "", line3="1000")
    add_column(world / "jobs.csv", "interruptible", "false", line4="true")
    hours = warnings_at(world / "scenario.yaml", "gpu_hours_per_day")
    assert [(w.row, "not interruptible" in w.message) for w in hours] == [(3, True)], [str(w) for w in hours]
    clock_off = warnings_at(world / "scenario.yaml", "interruptible")
    assert [(w.row, "clock is off" in w.message) for w in clock_off] == [(4, True)], [str(w) for w in clock_off]
    append_yaml(world / "scenario.yaml", "clock:\n  hours: 24\n")
    assert warnings_at(world / "scenario.yaml", "interruptible") == []


def test_a_cloud_region_outside_its_country_and_swapped_prices_are_warned_about(world):
    append_yaml(world / "scenario.yaml", "cloud_regions: cloud_regions.csv\n")

    def edit(rows):
        head = rows[0]
        rows[1][head.index("usd_per_gpu_hour_reserved")] = str(float(rows[1][head.index("usd_per_gpu_hour_on_demand")]) + 5)
        us = next(i for i, r in enumerate(rows) if i and r[head.index("country")] == "US")
        rows[us][head.index("country")] = "FR"
        edit.us_line = us + 1
    edit_csv(world / "cloud_regions.csv", edit)
    price = warnings_at(world / "scenario.yaml", "usd_per_gpu_hour_reserved")
    assert [w.row for w in price] == [2] and "swapped" in price[0].fix, [str(w) for w in price]
    place = [w for w in warnings_at(world / "scenario.yaml", "lat/lon") if w.file.endswith("cloud_regions.csv")]
    assert [w.row for w in place] == [edit.us_line] and "outside its country France" in place[0].message, [str(w) for w in place]


def test_a_job_after_the_last_period_is_refused_like_one_that_ends_before_it_starts(world):
    add_column(world / "jobs.csv", "from_year", "", line3="2040")
    only(problems(world / "years.yaml"), "jobs.csv", 3, "from_year", "runs in no period", "after the last period")


def test_a_job_between_two_period_starts_is_refused(world):
    add_column(world / "jobs.csv", "from_year", "", line3="2027")
    add_column(world / "jobs.csv", "to_year", "", line3="2027")
    only(problems(world / "years.yaml"), "jobs.csv", 3, "from_year", "runs in no period", "2026, 2028, 2030")


def test_a_failover_budget_below_the_normal_one_is_one_warning_at_its_source(world):
    text = (world / "scenario.yaml").read_text().replace("policies:\n", "policies:\n  survive_site_loss: {chat: 1}\n"
                                                          "  failover_rtt_ms: {chat: 10}\n", 1)
    (world / "scenario.yaml").write_text(text)
    found = warnings_at(world / "scenario.yaml", "policies.failover_rtt_ms.chat")
    assert len(found) == 1 and "below the normal budget of 526 region(s)" in found[0].message and "40 ms" in found[0].fix, \
        [str(w) for w in found]
    add_column(world / "regions.csv", "failover_rtt_chat_ms", "", line5="20")  # one region's own cell: named at its row
    cells = warnings_at(world / "scenario.yaml", "failover_rtt_chat_ms")
    assert [w.row for w in cells] == [5] and "below its normal budget" in cells[0].message, [str(w) for w in cells]


# ----------------------------------------------------------------------------- profiles


def test_an_all_zero_profile_gets_a_fix_that_can_be_followed(world):
    edit_csv(world / "profiles.csv", lambda rows: [r.__setitem__(rows[0].index("load"), "0") for r in rows[1:] if r[0] == "chat"])
    problem = only(problems(world / "scenario.yaml"), "profiles.csv", None, "load", "0 at every hour")
    assert "by 0" not in problem.fix


def test_a_bad_profile_row_is_named_once_without_follow_on_problems(world):
    edit_csv(world / "profiles.csv", lambda rows: rows[4].__setitem__(rows[0].index("load"), "lots"))
    only(problems(world / "scenario.yaml"), "profiles.csv", 5, "load", "lots")


def test_a_bad_period_is_named_once_without_blaming_its_neighbours(world):
    text = (world / "years.yaml").read_text()
    assert "years: 2" in text
    (world / "years.yaml").write_text(text.replace("years: 2", "years: -2", 1))
    found = problems(world / "years.yaml")
    assert len(found) == 1 and found[0].field.startswith("periods[") and "does not start where" not in str(found[0]), \
        [str(p) for p in found]


def test_a_power_step_is_named_by_its_column_and_entry(world):
    text = (world / "years.yaml").read_text()
    steps = next(line for line in text.splitlines() if "].power_steps_mw:" in line)
    key = steps.split(":", 1)[0].strip()
    (world / "years.yaml").write_text(text.replace(steps, f'  {key}: "2026:-5;2028:330.2"'))
    problem = only(problems(world / "years.yaml"), "sites.csv", problem_row(world, key), "power_steps_mw", "entry 1 (mw)")
    assert "years.yaml" in str(problem)  # the override that wrote the value is named


def problem_row(world: Path, key: str) -> int:
    site = key.split("[", 1)[1].split("]", 1)[0]
    ids = [r["id"] for r in csv.DictReader((world / "sites.csv").open())]
    return ids.index(site) + 2


# ----------------------------------------------------------------------------- damaged files


def test_a_truncated_csv_names_the_line_of_the_open_quote(world):
    data = (DEFAULT / "regions.csv").read_bytes()
    cut = data[: len(data) // 2]
    (world / "regions.csv").write_bytes(cut)
    quote_line = cut.count(b"\n") + 1
    assert cut.rsplit(b"\n", 1)[1].count(b'"') % 2 == 1, "the cut must fall inside a quoted cell for this case"
    only(problems(world / "scenario.yaml"), "regions.csv", quote_line, None, f"opened on line {quote_line}", "never closed")


def test_a_row_with_an_extra_cell_names_its_line(world):
    lines = (world / "profiles.csv").read_text().splitlines()
    lines[4] += ",extra"
    (world / "profiles.csv").write_text("\n".join(lines) + "\n")
    only(problems(world / "scenario.yaml"), "profiles.csv", 5, None, "line 5 has 5 cells", "4 columns")


def test_an_empty_table_file_says_it_is_empty(world):
    (world / "profiles.csv").write_text("")
    only(problems(world / "scenario.yaml"), "profiles.csv", None, None, "is empty")
    append_yaml(world / "scenario.yaml", "clock:\n  hours: 24\n")  # and the clock's "no profile for class" does not follow
    only(problems(world / "scenario.yaml"), "profiles.csv", None, None, "is empty")


def test_a_cloud_region_may_not_take_a_sites_id(world):
    append_yaml(world / "scenario.yaml", "cloud_regions: cloud_regions.csv\n")
    site = next(csv.DictReader((world / "sites.csv").open()))["id"]
    edit_csv(world / "cloud_regions.csv", lambda rows: rows[3].__setitem__(rows[0].index("id"), site))
    only(problems(world / "scenario.yaml"), "cloud_regions.csv", 4, "id", "also a site's id")


def test_line_ends_of_two_kinds_are_one_problem_not_thousands(world):
    data = (world / "regions.csv").read_bytes()
    assert b"\r\n" in data, "the shipped regions.csv has Windows line ends"
    lines = data.split(b"\n")
    edited = [lines[0] + b",failover_rtt_chat_ms"] + [line + b"," if line else line for line in lines[1:]]
    (world / "regions.csv").write_bytes(b"\n".join(edited))  # a Unix tool appending cells after the '\r'
    only(problems(world / "scenario.yaml"), "regions.csv", 1, None, "carriage return")


def test_a_symbolic_link_loop_is_not_called_a_missing_file(world):
    (world / "profiles.csv").unlink()
    (world / "profiles.csv").symlink_to("profiles.csv")
    problem = only(problems(world / "scenario.yaml"), "profiles.csv", None, None, "symbolic link")
    assert "create it" not in problem.fix


def test_a_section_of_the_wrong_type_points_at_the_readme(world):
    append_yaml(world / "scenario.yaml", "clock: 24\n")
    problem = only(problems(world / "scenario.yaml"), "scenario.yaml", None, "clock", "dictionary")
    assert "clock: {hours: 24}" in problem.fix and "README.md" in problem.fix and "docs/scenario-format" not in problem.fix


def test_an_unknown_override_path_lists_the_clock_too():
    with pytest.raises(OverrideError) as info:
        parse_override("nosuch.key", 3)
    assert "clock.KEY" in info.value.fix
    assert parse_assignments(["clock.hours=24"]) == {"clock.hours": 24}


# ----------------------------------------------------------------------------- the command line


def test_validate_into_a_closed_pipe_keeps_its_exit_code(world):
    edit_csv(world / "regions.csv", lambda rows: [row.__setitem__(rows[0].index(column), "somewhere")
                                                  for row in rows[1:] for column in ("lat", "lon")])
    validate = f"{sys.executable} -m dcplace.cli validate {world / 'scenario.yaml'}"
    whole = subprocess.run(["bash", "-c", f"{validate} 2>&1"], capture_output=True, timeout=120)
    assert whole.returncode == 2 and len(whole.stdout) > 2 * 2**16, "twice what a pipe holds, or the test proves nothing"
    # to a reader that takes one line and leaves
    done = subprocess.run(["bash", "-c", f"{validate} 2>&1 | head -1; exit ${{PIPESTATUS[0]}}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr


def test_validate_with_its_output_closed_still_ends_with_its_code(world):
    append_yaml(world / "scenario.yaml", "clock:\n  hours: true\n")
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m dcplace.cli validate {world / 'scenario.yaml'} >&- 2>&-"], timeout=120)
    assert done.returncode == 2


@pytest.mark.parametrize("table", ["chips", "workloads"])
def test_a_missing_catalog_table_is_one_problem_not_one_per_reference(world, table):
    """Without chips.csv every rack config and throughput row named an 'unknown chip' (27 problems for one
    missing file); the tables that name its ids are not checked against a table that could not be read."""
    shutil.copytree(DEFAULT.parent / "catalog", world / "catalog")
    append_yaml(world / "scenario.yaml", "\ncatalog: catalog\n")
    (world / "catalog" / f"{table}.csv").unlink()
    only(problems(world / "scenario.yaml"), f"catalog/{table}.csv", None, None, "file not found")
