"""The clock's part of a plan: hourly load and capacity, the dispatch, troughs lent to
training, rented GPU-hours (optimizer.model.clock, docs/clock.md).

Racks are rounded as in optimizer.solving.extract; every figure is recomputed from the
rounded racks and the column values, never read off the objective.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from dcplace.models.plan import Assignment, BackfillLine, DispatchLine, HourLine, RentalLine, RouteLine
from dcplace.optimizer.model.clock import HOURS_PER_DAY, busy_kw_per_gpu, dispatch, rented_training_gpus, tok_s_per_gpu
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel


def _block(x: np.ndarray, lm: LinearModel, name: str, tol: float = 1e-9) -> dict:
    if name not in lm.blocks:
        return {}
    b = lm.blocks[name]
    values = x[b.start:b.stop]
    return {b.keys[i]: float(values[i]) for i in np.flatnonzero(values > tol)}


def _installed(x, lm, ix: IndexSets) -> dict[tuple, float]:
    """(s, g, c, w) -> GPUs of dispatch group g installed for class w in a c zone at s."""
    out: dict[tuple, float] = defaultdict(float)
    for (s, k, c, w), n in _block(x, lm, "racks_inf", 0.5).items():
        out[s, ix.clock.energy_group[k], c, w] += round(n) * ix.racks[k].gpus_per_rack
    return dict(out)


def hourly_shares(x, lm, ix: IndexSets) -> np.ndarray:
    """Serving pairs x represented hours: each pair's share in each hour, clipped to [0, 1]. With routing per
    hour the share_h columns (ordered pair by pair, hour by hour: ClockSets.share_h); else the day's share
    repeated in every hour."""
    ck = ix.clock
    if ck.hourly_routing:
        b = lm.blocks["share_h"]
        if b.keys != ck.share_h or b.stop - b.start != len(ix.serve) * len(ck.hours):
            raise RuntimeError("share_h columns are not the serving pairs x represented hours they were built as")
        values = x[b.start:b.stop].reshape(len(ix.serve), len(ck.hours))
    else:
        day = x[lm.blocks["share"].start:lm.blocks["share"].stop]
        values = np.repeat(day[:, None], len(ck.hours), axis=1)
    return np.clip(np.where(values > 1e-9, values, 0.0), 0.0, 1.0)


def day_shares(x, lm, ix: IndexSets) -> np.ndarray:
    """Each serving pair's share of the day: its share, or with routing per hour the hours' weighted mean
    sum_h (w_h / 24) share_h (what hourly_share_mean makes the share column; recomputed so that it is exact)."""
    if not ix.clock.hourly_routing:
        return x[lm.blocks["share"].start:lm.blocks["share"].stop]
    ck = ix.clock
    weights = np.array([ck.weight_h[h] for h in ck.hours]) / HOURS_PER_DAY
    return hourly_shares(x, lm, ix) @ weights


def _loads(x, lm, ix: IndexSets) -> dict[tuple, float]:
    """(s, w, h) -> tok/s of load the shares put on each site in each represented hour."""
    ck = ix.clock
    out: dict[tuple, float] = defaultdict(float)
    shares = hourly_shares(x, lm, ix)
    for i in np.flatnonzero(shares.max(axis=1) > 0):
        r, w, s = ix.serve[i]
        for a, h in enumerate(ck.hours):
            out[s, w, h] += float(shares[i, a]) * ix.demand(r, w) * ck.p(r, w, h)
    return dict(out)


def routing_lines(x, lm, ix: IndexSets) -> list[RouteLine]:
    """With routing per hour: one line per serving pair and represented hour with a share."""
    ck = ix.clock
    if not ck.hourly_routing:
        return []
    shares = hourly_shares(x, lm, ix)
    out = []
    for i, a in zip(*np.nonzero(shares)):
        r, w, s = ix.serve[i]
        h = ck.hours[a]
        share = float(shares[i, a])
        out.append(RouteLine(region=r, workload=w, site=s, hour_utc=h, weight_h=ck.weight_h[h], share=share,
                             served_tok_s=share * ix.demand(r, w) * ck.p(r, w, h)))
    return out


def _lent(x, lm) -> dict[tuple, float]:
    out: dict[tuple, float] = defaultdict(float)
    for (j, s, g, w, h), v in _block(x, lm, "backfill").items():
        out[s, g, w, h] += v
    return dict(out)


def _dispatch(x, lm, ix: IndexSets):
    """The plan's dispatch: the merit order of optimizer.model.clock.dispatch, or under a carbon
    cap the model's own busy GPUs (the cap was written on them), lent GPUs in the zones they leave free."""
    installed, loads, lent = _installed(x, lm, ix), _loads(x, lm, ix), _lent(x, lm)
    if "busy" not in lm.blocks:
        return installed, loads, lent, dispatch(ix, installed, lent, loads)
    busy = _block(x, lm, "busy")
    out: dict[tuple, tuple[float, float]] = {key: (v, 0.0) for key, v in busy.items()}
    for (s, g, w, h), owe in sorted(lent.items()):
        zones = sorted((c for (s2, g2, c, w2) in installed if (s2, g2, w2) == (s, g, w)), key=lambda c: (ix.sites[s].pue(ix.cooling[c]), c))
        for c in zones:
            serving, lending = out.get((s, g, c, w, h), (0.0, 0.0))
            take = min(owe, max(installed[s, g, c, w] - serving - lending, 0.0))
            if take > 0:
                out[s, g, c, w, h] = (serving, lending + take)
                owe -= take
    return installed, loads, lent, out


def busy_energy_by_site(x, lm, ix: IndexSets) -> list[tuple[str, float, float]]:
    """(site, MWh a year serving, MWh a year lent to training) of busy GPUs above the racks' idle share."""
    ck = ix.clock
    days = ck.days_per_year(ix.scenario)
    serving_mwh: dict[str, float] = defaultdict(float)
    lent_mwh: dict[str, float] = defaultdict(float)
    for (s, g, c, w, h), (serving, lent) in _dispatch(x, lm, ix)[3].items():
        kwh = busy_kw_per_gpu(ix, s, g, c) * ck.weight_h[h] * days / 1000.0
        serving_mwh[s] += serving * kwh
        lent_mwh[s] += lent * kwh
    return [(s, serving_mwh[s], lent_mwh[s]) for s in sorted(set(serving_mwh) | set(lent_mwh))]


def extract_clock(x: np.ndarray, lm: LinearModel, ix: IndexSets) -> dict:
    """Hourly lines, dispatch, backfill, rentals and the cloud-served assignments."""
    ck = ix.clock
    hourly, dispatch_lines, backfill = [], [], []
    if ck.on:
        installed, loads, lent, busy = _dispatch(x, lm, ix)
        capacity: dict[tuple, float] = defaultdict(float)
        for (s, g, c, w), n in installed.items():
            capacity[s, w] += n * tok_s_per_gpu(ix, ck.group_chip[g], w)
        serving_by: dict[tuple, float] = defaultdict(float)
        lent_by: dict[tuple, float] = defaultdict(float)
        for (s, g, c, w, h), (serving, lending) in sorted(busy.items()):
            dispatch_lines.append(DispatchLine(site=s, group=g, chip=ck.group_chip[g], cooling=c, workload=w, hour_utc=h,
                                               serving_gpus=serving, lent_gpus=lending))
            serving_by[s, w, h] += serving
            lent_by[s, w, h] += lending
        for s, w in sorted(capacity):
            for h in ck.hours:
                hourly.append(HourLine(place=s, kind="owned", workload=w, hour_utc=h, weight_h=ck.weight_h[h],
                                       load_tok_s=loads.get((s, w, h), 0.0), capacity_tok_s=capacity[s, w],
                                       lent_gpus=lent_by[s, w, h], serving_gpus=serving_by[s, w, h]))
        for (j, s, g, w, h), gpus in sorted(_block(x, lm, "backfill").items()):
            backfill.append(BackfillLine(job=j, site=s, group=g, chip=ck.group_chip[g], workload=w, hour_utc=h,
                                         weight_h=ck.weight_h[h], gpus=gpus,
                                         h100_gpu_hours_per_day=gpus * ck.weight_h[h] * ix.chips[ck.group_chip[g]].h100_equiv))
    rentals, rent_assignments = _rentals(x, lm, ix, hourly)
    return {"clock": clock_summary(ix), "hourly": hourly, "dispatch": dispatch_lines, "backfill": backfill,
            "rentals": rentals, "rent_assignments": rent_assignments, "routing": routing_lines(x, lm, ix) if ck.on else []}


def _rentals(x, lm, ix: IndexSets, hourly: list) -> tuple[list, list]:
    ck, econ = ix.clock, ix.scenario.economics
    days = ck.days_per_year(ix.scenario)
    clouds = {q.id: (i, q) for i, q in enumerate(ix.scenario.cloud_regions)}
    rentals, assignments = [], []
    load: dict[tuple, float] = defaultdict(float)
    for (r, w, q), share in sorted(_block(x, lm, "rent_share").items()):
        share = min(1.0, share)
        region = ix.regions[r]
        assignments.append(Assignment(region=r, region_name=region.name, workload=w, site=q, share=share,
                                      served_tok_s=share * ix.demand(r, w), rtt_ms=float(ck.cloud_rtt_ms[ix.region_pos[r], clouds[q][0]]),
                                      rtt_budget_ms=region.rtt_budget_ms[w]))
        for h in ck.hours:
            load[q, w, h] += share * ix.demand(r, w) * ck.p(r, w, h)
    on_demand, reserved = _block(x, lm, "rent_od"), _block(x, lm, "rent_res")
    for (q, w, h), gpus in sorted(on_demand.items()):
        cloud = clouds[q][1]
        hours = ck.weight_h[h] * days
        rentals.append(RentalLine(cloud=q, chip=cloud.chip, kind="on_demand", workload=w, hour_utc=h, gpus=gpus,
                                  gpu_hours_per_year=gpus * hours, usd_per_year=gpus * hours * cloud.usd_per_gpu_hour_on_demand))
    for (q, w), gpus in sorted(reserved.items()):
        cloud = clouds[q][1]
        rentals.append(RentalLine(cloud=q, chip=cloud.chip, kind="reserved", workload=w, gpus=gpus,
                                  gpu_hours_per_year=gpus * econ.hours_per_year,
                                  usd_per_year=gpus * econ.hours_per_year * cloud.usd_per_gpu_hour_reserved))
    for (j, q), v in sorted(_block(x, lm, "rent_trn", 0.5).items()):
        cloud = clouds[q][1]
        gpus = rented_training_gpus(ix, j, cloud.chip)
        rentals.append(RentalLine(cloud=q, chip=cloud.chip, kind="training", job=j, gpus=gpus, gpu_hours_per_year=gpus * econ.hours_per_year,
                                  usd_per_year=gpus * econ.hours_per_year * cloud.usd_per_gpu_hour_reserved))
    for q, w in sorted({(q, w) for (q, w, _) in load}):
        tok = tok_s_per_gpu(ix, clouds[q][1].chip, w)
        for h in ck.hours:
            gpus = on_demand.get((q, w, h), 0.0) + reserved.get((q, w), 0.0)
            hourly.append(HourLine(place=q, kind="rented", workload=w, hour_utc=h, weight_h=ck.weight_h[h], load_tok_s=load[q, w, h],
                                   capacity_tok_s=gpus * tok, serving_gpus=gpus))
    return rentals, assignments


def clock_summary(ix: IndexSets) -> dict:
    """The represented day, recorded in the plan so that the checker and the reports need no model."""
    ck = ix.clock
    return {
        "on": ck.on,
        "hours": ix.scenario.clock.hours,
        "represented_hours_utc": ck.hours,
        "weight_h": {str(h): w for h, w in ck.weight_h.items()},
        "blocks_utc": {str(h): b for h, b in ck.blocks.items()},
        "block_overstatement": ck.block_overstatement,
        "idle_power_share": ix.scenario.clock.idle_power_share,
        "inference_fabric_tier": ix.scenario.clock.inference_fabric_tier,
        "routing": "hour" if ck.hourly_routing else "day",
        "utc_offsets_h": {r: {"offset_h": off, "basis": basis} for r, (off, basis) in sorted(ck.offsets_h.items())},
        "load_share": {f"{r}|{w}": [float(v) for v in p] for (r, w), p in sorted(ck.load_share.items())},
    }


def clock_kpis(ix: IndexSets, parts: dict) -> dict[str, float]:
    """Rented spend, trough GPU-hours, and the capacity the clock saves against the peak sum."""
    out = {
        "rental_usd_per_year": sum(ln.usd_per_year for ln in parts["rentals"]),
        "rented_gpus_peak": max((sum(ln.serving_gpus for ln in parts["hourly"] if ln.kind == "rented" and ln.hour_utc == h)
                                 for h in ix.clock.hours), default=0.0),
        "trough_h100_gpu_hours_per_day": sum(ln.h100_gpu_hours_per_day for ln in parts["backfill"]),
    }
    if ix.clock.on:
        owned = [ln for ln in parts["hourly"] if ln.kind == "owned"]
        out["owned_capacity_tok_s"] = sum({(ln.place, ln.workload): ln.capacity_tok_s for ln in owned}.values())
        peak_hour: dict = defaultdict(float)
        for ln in owned:
            peak_hour[ln.place, ln.workload] = max(peak_hour[ln.place, ln.workload], ln.load_tok_s)
        out["owned_coincident_peak_tok_s"] = sum(peak_hour.values())
    return out
