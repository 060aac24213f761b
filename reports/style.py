"""What every map, chart and console table shares: role colours, money and power formats,
base layers.

Light on purpose (geopandas loads only when the base map is asked for): the CLI imports
`money` from here, and every amount of money dcplace prints — terminal, HTML, PDF, maps —
goes through that one function.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import geopandas as gpd

# Colour-blind-safe (ColorBrewer Dark2), one per role a site can take.
ROLE_COLOURS = {"training": "#d95f02", "inference": "#1b9e77", "mixed": "#7570b3", "idle": "#a6761d"}
# Sites are also told apart by symbol, so the role reads without colour: matplotlib markers
# for the static map, plotly symbols for the interactive one (the same shapes).
ROLE_MARKERS = {"training": "s", "inference": "o", "mixed": "D", "idle": "^"}
ROLE_SYMBOLS = {"training": "square", "inference": "circle", "mixed": "diamond", "idle": "triangle-up"}
CLOSED_COLOUR = "#4d4d4d"  # outline of an unopened candidate (white inside), drawn above the demand dots
RISK_COLOUR = "#b2182b"  # the static map's ring around a site whose loss leaves demand short: no role or class colour
REGION_COLOUR = "#8a94a3"  # demand regions: a neutral slate, so the coloured flows and sites carry the story
# Flow lines by workload class, in catalog order; none of them is a role colour or the
# region colour, so a line never reads as a site.
CLASS_COLOURS = ("#2166ac", "#c51b7d", "#b8860b", "#1a9850", "#5e3c99", "#8c510a", "#4d4d4d")
LAND_COLOUR = "#e9e6df"
BORDER_COLOUR = "#ffffff"
OCEAN_COLOUR = "#f4f8fb"

# Figure and chart colours for the cost categories, in the plan's order.
CATEGORY_COLOURS = {
    "site_fixed": "#8c564b", "cooling_zones": "#c49c94", "chips": "#1f77b4", "cooling_capex": "#aec7e8",
    "energy": "#ff7f0e", "colocation": "#ffbb78", "fabric": "#2ca02c", "carbon": "#7f7f7f", "transport": "#9467bd",
    "rental": "#17becf",  # GPU-hours rented from cloud regions (the clock, issue 15)
    "self_build": "#e377c2",  # self-built training campuses (docs/plan-format.md)
}
# The day (reports.day, the interactive map's hour slider): GPUs busy serving, lent to training, rented.
DAY_COLOURS = {"serving": "#1b9e77", "lent": "#d95f02", "rented": "#17becf", "installed": "#2a3640"}


def money(usd: float) -> str:
    """US dollars in millions, two decimals: `$1,250.45 M` (`-$0.25 M` below zero); the unit
    executives read annual budgets in. The one money format of dcplace's outputs."""
    millions = usd / 1e6
    sign = "-" if round(millions, 2) < 0 else ""
    return f"{sign}${abs(millions):,.2f} M"


def mw_number(mw: float) -> str:
    """A table cell in MW: 12.3, 0.032 (three significant digits below 1 MW, so a small site
    does not read as zero)."""
    return f"{mw:,.1f}" if abs(mw) >= 1 or mw == 0 else f"{mw:.2g}" if abs(mw) >= 0.001 else "<0.001"


def mw_text(mw: float) -> str:
    """12 MW, 3.4 MW, 250 kW: enough digits that a small site does not read as zero."""
    return f"{mw:,.0f} MW" if mw >= 10 else f"{mw:.1f} MW" if mw >= 1 else f"{mw * 1000:,.0f} kW"


def class_colours(classes) -> dict[str, str]:
    """Workload class id -> line colour, in the order given (catalog order): the same class
    has the same colour on every map of a plan."""
    return {c: CLASS_COLOURS[i % len(CLASS_COLOURS)] for i, c in enumerate(dict.fromkeys(classes))}


def workload_classes(layers) -> dict[str, str]:
    """Workload class id -> its name for a plan's `PlanLayers`, in catalog order (then any
    other class an assignment line names): the order `class_colours` is given."""
    names = {w.id: w.name for w in layers.scenario.catalog.workloads}
    for c in layers.assignments["workload"]:
        names.setdefault(c, c)
    return names


def nice_floor(value: float) -> float:
    """The largest of 1, 2, 5 x 10^k not above `value` (value > 0)."""
    exponent = math.floor(math.log10(value))
    for mantissa in (5, 2, 1):
        if mantissa * 10 ** exponent <= value * (1 + 1e-9):
            return mantissa * 10.0 ** exponent
    return 10.0 ** exponent


def nice_ceil(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k not below `value` (value > 0)."""
    exponent = math.floor(math.log10(value))
    for mantissa in (1, 2, 5, 10):
        if mantissa * 10 ** exponent >= value * (1 - 1e-9):
            return mantissa * 10.0 ** exponent
    return 10.0 ** (exponent + 1)


def short_name(name: str) -> str:
    """A catalog name without its parenthesis, for tables and sentences: "Small-model chat", not
    "Small-model chat (7-8B class: Llama 3.1 8B)"; "GB200", not "GB200 (NVL72 ...)"."""
    return name.split(" (")[0]


def tok_s_text(tok_s: float) -> str:
    """2.5 M tok/s, 500 k tok/s, 800 tok/s."""
    if tok_s >= 1e6:
        return f"{tok_s / 1e6:,.3g} M tok/s"
    if tok_s >= 1e3:
        return f"{tok_s / 1e3:,.3g} k tok/s"
    return f"{tok_s:,.0f} tok/s"


@dataclass(frozen=True)
class FlowScale:
    """Flow line width proportional to tok/s served: `per_unit` tok/s per unit of width
    (points on the static map, pixels on the interactive one), never thinner than `min_width`
    so a small flow stays visible. `references` are the tok/s the legends show."""

    per_unit: float
    min_width: float
    max_width: float
    references: tuple[float, ...]

    def width(self, tok_s):
        import numpy as np

        return np.maximum(self.min_width, np.asarray(tok_s, dtype=float) / self.per_unit)

    def text(self, unit: str) -> str:
        return f"width ∝ tok/s: 1 {unit} per {tok_s_text(self.per_unit)}, at least {self.min_width:g} {unit}"


def flow_scale(served_tok_s, max_width: float = 7.0, min_width: float = 0.3) -> FlowScale:
    """The scale for a plan's flows: a round number of tok/s per unit of width such that the
    largest flow is at most `max_width` wide; one to three round reference flows, each at
    least twice the minimum width, for the legend."""
    import numpy as np

    values = np.asarray(served_tok_s, dtype=float)
    top = float(values.max()) if values.size and np.isfinite(values).any() and values.max() > 0 else 1.0
    per_unit = nice_ceil(top / max_width)
    references = [nice_floor(top)]  # then the next two round numbers below it (2 M, 1 M, 500 k)
    while len(references) < 3:
        below = nice_floor(references[-1] * 0.99)
        if below / per_unit < 2 * min_width:
            break
        references.append(below)
    return FlowScale(per_unit, min_width, max_width, tuple(references))


def category_label(category: str) -> str:
    return category.replace("_", " ")


def geo_path(name: str) -> Path:
    """A file of data/geo/ (shipped in the package, never downloaded)."""
    return Path(str(resources.files("dcplace.data") / "geo" / name))


@lru_cache(maxsize=1)
def countries() -> gpd.GeoDataFrame:
    """Natural Earth 1:110m country polygons, EPSG:4326."""
    import geopandas as gpd

    return gpd.read_file(geo_path("ne_110m_countries.gpkg"), engine="pyogrio")


# Bidirectional embedding and override controls: in a name they reverse the text that follows
# them on the page ("Evil\u202etxt.exe"), so they are taken out of every text a page shows.
BIDI_CONTROLS = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def without_bidi_controls(text: str) -> str:
    return text.translate(BIDI_CONTROLS)


# Names as every output shows them (report, maps, terminal). A name is data of any length, but
# a 5,000-character site name made the report's PDF layout measure it by characters for
# minutes, and no page or label holds it: shown, it is cut to DISPLAY_NAME_CHARS with '…'.
# Terminal control characters (ESC starts colour sequences; matplotlib has no glyph for it and
# warned "Glyph 27 missing" with the raw byte) are shown as escapes such as \x1b. The data
# (plan.json, the CSVs, GIS exports) keep every name exactly.
DISPLAY_NAME_CHARS = 80
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible_controls(text: str, newlines: bool = False) -> str:
    """`text` with every control character shown as an escape (`\\x1b`); line breaks kept when
    `newlines` (for multi-line messages)."""

    def visible(m: re.Match) -> str:
        ch = m.group()
        if newlines and ch == "\n":
            return ch
        return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"

    return CONTROL_CHARACTERS.sub(visible, text)


_C0_C1 = re.compile("[\x00-\x1f\x7f-\x9f]")


def display_name(name: object, limit: int = DISPLAY_NAME_CHARS) -> str:
    """A name as an output shows it: C0/C1 control characters as escapes (bidirectional controls
    are each medium's: pages drop them, the terminal escapes them), at most `limit` characters (a
    longer one ends in '…'). Idempotent, so an output may apply it to names already cut."""
    text = _C0_C1.sub(lambda m: f"\\x{ord(m.group()):02x}", str(name))
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
