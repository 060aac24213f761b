"""Scenario inheritance (`extends`) and overrides by path, applied before validation.

A scenario file may extend another and change any parameter or table cell:

```yaml
name: us-power-plus-30
extends: ../world/scenario.yaml        # or "default" for the embedded default
overrides:
  economics.carbon_price_usd_per_t: 50            # a parameter
  sites[country=US].power_price_usd_per_mwh: "*1.3"   # a column, rows where country == US
  sites[ashburn].power_limit_kw: 300000           # one cell (row by id)
  regions.rtt_budget_chat_ms: "-5"                # a whole column, shifted
  policies.forbidden_sites: [dallas]
```

Paths: `economics.KEY`, `latency.KEY`, `policies.KEY`, `clock.KEY`, `name`, `description`, and
`TABLE[SELECTOR].COLUMN` or `TABLE.COLUMN` for TABLE in sites, regions, jobs, pair_costs,
profiles, cloud_regions;
SELECTOR is a row id or `column=value`. Values: a number, list or plain string sets the
value; a string `"*k"` multiplies it by k, `"+k"` / `"-k"` adds or subtracts k. Overrides
are applied in order (the base's first), to the raw values, so the scenario's own
validation then checks the result and names the file, row and field of any bad value.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

SECTIONS = ("economics", "latency", "policies", "clock")
TOP_LEVEL = ("name", "description")
TABLES = ("sites", "regions", "jobs", "pair_costs", "profiles", "cloud_regions")
_PATH = re.compile(r"^(?P<table>[a-z_]+)(\[(?P<selector>[^\]]+)\])?\.(?P<column>[A-Za-z0-9_]+)$")
_ARITHMETIC = re.compile(r"^\s*(?P<op>[*+-])\s*(?P<number>[0-9.eE+-]+)\s*$")


class OverrideError(ValueError):
    """An override path or value that cannot apply: `message` says what, `fix` what would fix it."""

    def __init__(self, message: str, fix: str = ""):
        self.message, self.fix = message, fix
        super().__init__(f"{message} Fix: {fix}" if fix else message)


@dataclass(frozen=True)
class Override:
    """One `path: value` entry, parsed."""

    path: str
    value: Any
    kind: str  # "top", "section" or "table"
    target: str  # top-level key, section name or table name
    key: str  # key within the section, or the column
    selector: tuple[str, str] | None = None  # (column, value) rows to change; None = every row

    def apply_to(self, current: Any) -> Any:
        """The new value given the current one (arithmetic needs a number)."""
        op = arithmetic(self.value)
        if op is None:
            return self.value
        symbol, number = op
        if current is None or current == "":
            raise OverrideError(f"the value is empty, so it cannot be changed by '{self.value}'.", "set a number instead.")
        try:
            base = float(current)
        except (TypeError, ValueError):
            raise OverrideError(f"'{current}' is not a number, so '{self.value}' cannot apply.", "set the value instead.") from None
        return base * number if symbol == "*" else base + number if symbol == "+" else base - number


def arithmetic(value: Any) -> tuple[str, float] | None:
    """('*', 1.3) for "*1.3", ('+', 5.0) for "+5", ('-', 5.0) for "-5"; None for a plain value."""
    if not isinstance(value, str):
        return None
    match = _ARITHMETIC.match(value)
    if match is None:
        return None
    try:
        return match["op"], float(match["number"])
    except ValueError:
        return None


def parse_override(path: str, value: Any) -> Override:
    """Parse one override path; raises OverrideError naming what would fix it."""
    path = str(path).strip()
    if path in TOP_LEVEL:
        return Override(path, value, "top", path, path)
    head, _, rest = path.partition(".")
    if head in SECTIONS and rest and "[" not in path:
        return Override(path, value, "section", head, rest)
    match = _PATH.match(path)
    if match is None or match["table"] not in TABLES:
        close = difflib.get_close_matches(head.split("[")[0], [*SECTIONS, *TABLES, *TOP_LEVEL], n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise OverrideError(
            f"override path '{path}' is not understood.",
            f"{hint}use " + ", ".join(f"{section}.KEY" for section in SECTIONS) + ", name, description, TABLE.COLUMN or "
            "TABLE[ID or column=value].COLUMN with TABLE one of " + ", ".join(TABLES) + ".",
        )
    selector = None
    if match["selector"]:
        column, eq, wanted = match["selector"].partition("=")
        selector = (column.strip(), wanted.strip()) if eq else ("id", match["selector"].strip())
    return Override(path, value, "table", match["table"], match["column"], selector)


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """`--set PATH=VALUE` options as an overrides mapping; VALUE is read as YAML (24, true,
    [a, b], '*1.1'). Raises OverrideError naming the option that lacks its '='."""
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        path, sep, text = str(item).partition("=")
        if not sep or not path.strip():
            raise OverrideError(f"--set '{item}' is not PATH=VALUE.", "write e.g. --set clock.hours=24 or --set 'sites[ashburn].power_limit_kw=*1.2'.")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        out[path.strip()] = value
    return out


def parse_overrides(entries: dict[str, Any]) -> list[Override]:
    return [parse_override(path, value) for path, value in entries.items()]


def apply_to_section(section: dict[str, Any], override: Override, default: Any = None) -> dict[str, Any]:
    """A copy of a YAML section (economics, latency, policies) with the override applied."""
    out = dict(section)
    out[override.key] = override.apply_to(out.get(override.key, default))
    return out


def apply_to_rows(rows: list[dict[str, Any]], columns: list[str], override: Override, known_columns: set[str]) -> int:
    """Apply a table override in place to raw rows; returns how many rows changed.

    A column the table lacks may be set if the record knows it (it is added, empty
    elsewhere); a selector that matches no row is an error, since it is nearly always a typo.
    """
    if override.key not in columns:
        if override.key not in known_columns:
            close = difflib.get_close_matches(override.key, sorted(known_columns | set(columns)), n=1)
            hint = f"did you mean '{close[0]}'?" if close else "use a column of the table."
            raise OverrideError(f"table {override.target} has no column '{override.key}'.", hint)
        columns.append(override.key)
    if override.selector is not None and override.selector[0] not in columns:
        raise OverrideError(f"table {override.target} has no column '{override.selector[0]}' to select rows by.", "select by id or an existing column.")
    changed = 0
    for row in rows:
        if override.selector is not None and str(row.get(override.selector[0]) or "") != override.selector[1]:
            continue
        row[override.key] = override.apply_to(row.get(override.key))
        changed += 1
    if changed == 0:
        raise OverrideError(f"no row of {override.target} has {override.selector[0]} = '{override.selector[1]}'.", "check the id or value.")
    return changed
