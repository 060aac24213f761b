"""What every part of the checker shares: tolerances, the day's hours, and a few small readers
of cells and numbers. Written here, not imported: the checker shares no code with dcplace."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

REL_TOL = 1e-6
ABS_TOL = 1e-6
GAP_TOL = 1e-9  # on the relative gap: status "optimal" needs gap <= mip_gap + GAP_TOL
HOURS_PER_DAY = 24
SECONDS_PER_HOUR = 3600.0
# Columns of the input tables read as text whatever they hold (an id "1" stays "1").
TEXT_COLUMNS = ("id", "name", "country", "chip", "workload", "region", "site", "from", "to",
                "cooling_allowed", "allowed_countries", "eligible_chips", "config", "cooling", "fabric")
# The plan's CSVs are for spreadsheets: text that a spreadsheet would run as a formula (it
# starts with = + - @, tab or CR, after any quotes) carries one more leading ' there (OWASP;
# docs/plan-format.md), while plan.json keeps it exact. Written out here, not imported: the
# checker shares no code with what it checks.
SPREADSHEET_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """How a plan CSV shows the text `text` (plan.json's value)."""
    return "'" + text if text.lstrip("'").startswith(SPREADSHEET_FORMULA_START) else text


def close(a: float, b: float, rel: float = REL_TOL, abs_: float = ABS_TOL) -> bool:
    """a and b within the larger of an absolute and a relative tolerance."""
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def split_list(cell) -> list[str]:
    """The items of a ';'-separated cell (a blank cell: none)."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return []
    return [p.strip() for p in str(cell).split(";") if p.strip()]


def cell_text(cell) -> str:
    """A text cell as written, "" for an empty one (NaN as pandas reads it, None in plan.json)."""
    return ";".join(split_list(cell))


def haversine_km(lat1, lon1, lat2, lon2) -> float:
    """Great-circle km on the IUGG mean sphere: the checker's own copy of models/geo.py's (it imports nothing of dcplace)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(min(1.0, math.sqrt(a)))


def sha256_file(path: Path) -> tuple[str, int]:
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), len(data)


def is_number(value) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
