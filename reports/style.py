"""What every map, chart and console table shares: role colours, money and power formats,
base layers.

Light on purpose (geopandas loads only when the base map is asked for): the CLI imports
`money` from here, and every amount of money dcplace prints — terminal, HTML, PDF, maps —
goes through that one function.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import geopandas as gpd

# Colour-blind-safe (ColorBrewer Dark2), one per role a site can take.
ROLE_COLOURS = {"training": "#d95f02", "inference": "#1b9e77", "mixed": "#7570b3", "idle": "#a6761d"}
CLOSED_COLOUR = "#9a9a9a"
REGION_COLOUR = "#4a6fa5"
LAND_COLOUR = "#e9e6df"
BORDER_COLOUR = "#ffffff"
OCEAN_COLOUR = "#f4f8fb"

# Figure and chart colours for the cost categories, in the plan's order.
CATEGORY_COLOURS = {
    "site_fixed": "#8c564b", "cooling_zones": "#c49c94", "chips": "#1f77b4", "cooling_capex": "#aec7e8",
    "energy": "#ff7f0e", "colocation": "#ffbb78", "fabric": "#2ca02c", "carbon": "#7f7f7f", "transport": "#9467bd",
}


def money(usd: float) -> str:
    """US dollars in millions, two decimals: `$1,250.45 M` (`-$0.25 M` below zero); the unit
    executives read annual budgets in. The one money format of dcplace's outputs."""
    millions = usd / 1e6
    sign = "-" if round(millions, 2) < 0 else ""
    return f"{sign}${abs(millions):,.2f} M"


def mw_text(mw: float) -> str:
    """12 MW, 3.4 MW, 250 kW: enough digits that a small site does not read as zero."""
    return f"{mw:,.0f} MW" if mw >= 10 else f"{mw:.1f} MW" if mw >= 1 else f"{mw * 1000:,.0f} kW"


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
