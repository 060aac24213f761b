"""A sweep file: named what-if scenarios and/or a grid of overrides over one base scenario.

```yaml
name: what-ifs
base: default                      # or a scenario YAML path, relative to this file
options: {time_limit_s: 120, mip_gap: 0.005}
scenarios:                         # named members: overrides over the base (models/overrides.py)
  baseline: {}
  power-plus-30: {sites.power_price_usd_per_mwh: "*1.3"}
  tight-latency: {regions.rtt_budget_chat_ms: "*0.75"}
grid:                              # and/or every combination of these values
  economics.carbon_price_usd_per_t: [0, 50, 100]
  regions.demand_chat_tok_s: ["*1", "*2"]
```

Grid members are named from their values (`carbon_price_usd_per_t=50,demand_chat_tok_s=x2`),
so a member's folder says what it is. Override paths, and the values of parameter
(economics, latency, policies) overrides, are checked when the sweep is read, naming the
sweep file and the grid key; table values and ids when each member loads, so one bad
member fails alone and the rest run. A problem an override causes names the sweep file
(`load_member`). A key given twice in the YAML is a problem naming both lines.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dcplace.models.errors import InputProblem, ProblemLog, ScenarioError
from dcplace.models.overrides import OverrideError, arithmetic, parse_override
from dcplace.models.records import Economics, Latency, Policies, Scenario
from dcplace.models.scenario_file import default_scenario_path, load_scenario
from dcplace.models.tables import record_problems
from dcplace.models.yamlio import read_yaml

_SECTIONS = {"economics": Economics, "latency": Latency, "policies": Policies}

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]+")


class SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    base: str = "default"
    options: dict[str, Any] = {}
    scenarios: dict[str, dict[str, Any]] = {}
    grid: dict[str, list[Any]] = {}


@dataclass(frozen=True)
class Member:
    """One scenario of a sweep: a name (also its folder) and its overrides over the base."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict, compare=False)  # override path -> the file that set it


@dataclass(frozen=True)
class Sweep:
    name: str
    base: Path
    members: list[Member]
    options: dict[str, Any]
    source: Path | None = None


RESERVED_NAMES = {"batch.json", "batch.csv"}  # the batch folder's own index files


def member_slug(text: str) -> str:
    """A folder-safe name: '*' becomes 'x', anything else unsafe becomes '_'."""
    return _UNSAFE.sub("_", text.replace("*", "x")).strip("._") or "member"


def grid_members(grid: dict[str, list[Any]], label: str | None = None) -> list[Member]:
    """Every combination of the grid's values, named by the last part of each path."""
    if not grid:
        return []
    paths = list(grid)
    members = []
    for values in itertools.product(*(grid[p] for p in paths)):
        origins = {p: label for p in paths} if label else {}
        members.append(Member(member_slug(name_of(paths, values)), dict(zip(paths, values)), origins))
    return members


def name_of(paths: list[str], values: tuple) -> str:
    return ",".join(f"{p.rsplit('.', 1)[-1]}={v}" for p, v in zip(paths, values))


def load_member(base: str | Path, member: Member) -> Scenario:
    """The member's scenario: the base with the member's overrides; a problem an override
    causes names the sweep file that set it, not the base scenario."""
    return load_scenario(base, overrides={"name": member.name, **member.overrides}, overrides_origin=member.origins)


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file; ScenarioError names the key and what would fix it."""
    path = Path(path)
    label = path.name
    log = ProblemLog()
    raw = read_yaml(path, label, log, "sweep")
    if raw is None:
        raise ScenarioError(log.problems)
    try:
        spec = SweepFile(**(raw if isinstance(raw, dict) else {}))
    except ValidationError as exc:
        problems = [
            InputProblem(label, None, ".".join(str(p) for p in e["loc"]), str(e["msg"]) + ".",
                         "known keys: name, base, options, scenarios, grid." if e["type"] == "extra_forbidden" else "see the sweep format in docs/batch.md.")
            for e in exc.errors()
        ]
        raise ScenarioError(problems) from None
    base = default_scenario_path() if spec.base == "default" else (path.parent / spec.base).resolve()
    return sweep_from(spec.name, base, spec.scenarios, spec.grid, spec.options, path, label)


def sweep_from(name: str, base: Path, scenarios: dict[str, dict[str, Any]], grid: dict[str, list[Any]],
               options: dict[str, Any] | None = None, source: Path | None = None, label: str = "sweep") -> Sweep:
    """A Sweep from named members and a grid (the library form of a sweep file)."""
    problems: list[InputProblem] = []
    if not base.exists():
        problems.append(InputProblem(label, None, "base", f"base scenario not found (looked for {base}).", "give a path relative to the sweep file, or 'default'."))
    members = [Member(member_slug(n), dict(o or {}), {p: label for p in (o or {})}) for n, o in scenarios.items()] + grid_members(grid, label)
    for key, values in grid.items():
        if not values:
            problems.append(InputProblem(label, None, f"grid.{key}", "has no values.", "list at least one value."))
        for value in values or []:
            problems += _section_value_problems(key, value, label, f"grid.{key}")
    for member_name, overrides in scenarios.items():
        for key, value in (overrides or {}).items():
            problems += _section_value_problems(key, value, label, f"scenarios.{member_name}.{key}")
    if not members:
        problems.append(InputProblem(label, None, "scenarios", "the sweep has no scenarios.", "add named scenarios or a grid."))
    seen: set[str] = set()
    for member in members:
        if member.name in seen:
            problems.append(InputProblem(label, None, f"scenarios.{member.name}", "two members have the same folder name.", "rename one of them."))
        if member.name.lower() in RESERVED_NAMES:
            problems.append(InputProblem(label, None, f"scenarios.{member.name}", f"'{member.name}' is a file the batch folder "
                                         "itself holds, so it cannot name a member's folder.", "rename the member."))
        seen.add(member.name)
        for override_path, value in member.overrides.items():
            try:
                parse_override(override_path, value)
            except OverrideError as exc:
                problems.append(InputProblem(label, None, f"{member.name}.{override_path}", exc.message, exc.fix))
    if problems:
        raise ScenarioError(problems)
    return Sweep(name, base, members, dict(options or {}), source)


def _section_value_problems(path: str, value: Any, label: str, where: str) -> list[InputProblem]:
    """A parameter override's value checked now (it does not depend on the base): the
    problem names the sweep file and the grid key."""
    target, _, key = path.partition(".")
    model = _SECTIONS.get(target)
    if model is None or key not in model.model_fields or arithmetic(value) is not None:
        return []
    try:
        model(**{key: value})
    except ValidationError as exc:
        return [InputProblem(label, None, where, message, fix)
                for _, _, _, message, fix in record_problems(model, exc, label, None)]
    return []
