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
so a member's folder says what it is. Override paths are checked when the sweep is read;
values and ids when each member loads, so one bad member fails alone and the rest run.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.files import default_scenario_path
from dcplace.models.overrides import OverrideError, parse_override

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


@dataclass(frozen=True)
class Sweep:
    name: str
    base: Path
    members: list[Member]
    options: dict[str, Any]
    source: Path | None = None


def member_slug(text: str) -> str:
    """A folder-safe name: '*' becomes 'x', anything else unsafe becomes '_'."""
    return _UNSAFE.sub("_", text.replace("*", "x")).strip("._") or "member"


def grid_members(grid: dict[str, list[Any]]) -> list[Member]:
    """Every combination of the grid's values, named by the last part of each path."""
    if not grid:
        return []
    paths = list(grid)
    members = []
    for values in itertools.product(*(grid[p] for p in paths)):
        label = ",".join(f"{p.rsplit('.', 1)[-1]}={v}" for p, v in zip(paths, values))
        members.append(Member(member_slug(label), dict(zip(paths, values))))
    return members


def load_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file; ScenarioError names the key and what would fix it."""
    path = Path(path)
    label = path.name
    if not path.exists():
        raise ScenarioError([InputProblem(str(path), None, None, "sweep file not found.", "give the path of a sweep YAML file.")])
    try:
        raw = yaml.safe_load(path.read_text())
        spec = SweepFile(**(raw if isinstance(raw, dict) else {}))
    except yaml.YAMLError as exc:
        raise ScenarioError([InputProblem(label, None, None, f"is not valid YAML: {exc}", "fix the YAML syntax.")]) from None
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
    members = [Member(member_slug(n), dict(o or {})) for n, o in scenarios.items()] + grid_members(grid)
    for key, values in grid.items():
        if not values:
            problems.append(InputProblem(label, None, f"grid.{key}", "has no values.", "list at least one value."))
    if not members:
        problems.append(InputProblem(label, None, "scenarios", "the sweep has no scenarios.", "add named scenarios or a grid."))
    seen: set[str] = set()
    for member in members:
        if member.name in seen:
            problems.append(InputProblem(label, None, f"scenarios.{member.name}", "two members have the same folder name.", "rename one of them."))
        seen.add(member.name)
        for override_path, value in member.overrides.items():
            try:
                parse_override(override_path, value)
            except OverrideError as exc:
                message, _, fix = str(exc).partition(" Fix: ")
                problems.append(InputProblem(label, None, f"{member.name}.{override_path}", message, fix))
    if problems:
        raise ScenarioError(problems)
    return Sweep(name, base, members, dict(options or {}), source)
