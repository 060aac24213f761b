"""The placement MIP: one small function per variable group and constraint family.

Notation (all index sets are the sparse lists of optimizer.index):
  S sites, R regions, W inference classes, K rack configs, C cooling types, F fabrics,
  J training jobs, X chips. serve = {(r,w,s)}, inf = {(s,k,c,w)}, trn = {(s,k,c,f)},
  place = {(j,s,f,x)}, zones = {(s,c)}.

Inference capacity is kept per class: a rack serves one workload class, because a model
is deployed onto dedicated hardware; pooling fractions of a rack across classes would
understate the integer rounding that real deployments pay.

Each family is registered once (`@family`, optimizer.model.families: its name is the name
of its rows, with its checker method and how the diagnosis may relax it; docs/formulation.md
is generated from the registry) and writes its rows into an optimizer.linear.LinearModel
once; `build_model(ix)`
returns it, `to_highs` hands it to HiGHS as one sparse matrix and `to_pyomo` turns it into
a Pyomo ConcreteModel with the same names (`m.share[r, w, s]`, `m.demand_met[r, w]`,
`m.cost["energy"]`) for anyone who wants to inspect or extend the model.
"""

from __future__ import annotations

import numpy as np

from dcplace.optimizer.model.clock import serving_options, trough_jobs
from dcplace.optimizer.model.clock_families import add_clock_variables, clock_costs, clock_emissions  # registers the clock's families
from dcplace.optimizer.model.costs import COST_CATEGORIES, transport_usd_per_year
from dcplace.optimizer.model.families import BOUNDS, REGISTRY, Relax, family, flagged
from dcplace.optimizer.model.index import IndexSets
from dcplace.optimizer.model.linear import LinearModel


def add_variables(lm: LinearModel, ix: IndexSets) -> None:
    """open[s], zone[s,c] binary; racks_inf, racks_trn integer in [0, rack_limit]; share in [0, max share]; place binary."""
    sites = sorted(ix.sites)
    lm.add_block("open", sites, 0.0, 1.0, "binary")
    lm.add_block("zone", ix.zones, 0.0, 1.0, "binary")
    lm.add_block("racks_inf", ix.inf_racks, 0.0, [ix.rack_limit[s, k, c] for s, k, c, _ in ix.inf_racks], "integer")
    lm.add_block("racks_trn", ix.trn_racks, 0.0, [ix.rack_limit[s, k, c] for s, k, c, _ in ix.trn_racks], "integer")
    lm.add_block("share", ix.serve, 0.0, ix.scenario.policies.max_share_per_site, "continuous")
    lm.add_block("place", ix.place, 0.0, 1.0, "binary")
    if ix.build:  # self-build of training campuses: only sites index.add_build_sites keeps
        lm.add_block("build", ix.build, 0.0, 1.0, "binary")
        lm.add_block("built_kw", ix.build, 0.0, [ix.build_limit_kw[s] for s in ix.build], "continuous")
    add_clock_variables(lm, ix)

# ---------------------------------------------------------------- diagnosis messages


def _power(kw: float) -> str:
    return f"{kw / 1000:,.1f} MW" if kw >= 1000 else f"{kw:,.1f} kW"


def _file(ix: IndexSets, table: str) -> str:
    return ix.scenario.files.get(table) or f"{table}.csv"


def _demand_fields(ix: IndexSets, key, share: float) -> dict:
    r, w = key
    region = ix.regions[r]
    return dict(region=region.name, w=w, demand=f"{region.demand_tok_s[w]:,.0f}", short=f"{share * region.demand_tok_s[w]:,.0f}",
                budget=f"{region.rtt_budget_ms[w]:g}")


def _job_fields(ix: IndexSets, j, _amount: float) -> dict:
    job = ix.jobs[j]
    return dict(job=job.name, gpus=f"{job.gpus_h100_equiv:,.0f}")


def _power_fields(ix: IndexSets, s, kw: float) -> dict:
    site = ix.sites[s]
    return dict(site=site.name, limit=_power(site.power_limit_kw), over=_power(kw), needed=_power(site.power_limit_kw + kw),
                file=_file(ix, "sites"))


def _space_fields(ix: IndexSets, s, racks: float) -> dict:
    site = ix.sites[s]
    return dict(site=site.name, floor=f"{site.floor_racks:,}", over=f"{racks:,.0f}", file=_file(ix, "sites"))


def _policy_fields(ix: IndexSets, _key, amount: float) -> dict:
    pol = ix.scenario.policies
    return dict(cap=f"{pol.carbon_cap_t_per_year or 0:,.0f}", budget=f"{pol.capex_budget_usd or 0:,.0f}",
                min_sites=pol.min_sites, max_sites=pol.max_sites, amount=f"{amount:,.0f}")


MISSION = 1e6  # unserved demand and unplaced jobs are the last resort: any limit moves first

@family(priced=True, checker="check_demand", relax=Relax(
    "short", "share of the region's demand", lambda ix, key: 1.0,
    "region {region} '{w}' demand {demand} tok/s is short by {short} tok/s within {budget} ms: add power or floor space "
    "at a site within reach, or widen the budget", _demand_fields, "regions.csv demand_<class>_tok_s or rtt_budget_<class>_ms",
    weight=MISSION))
def demand_met(lm: LinearModel, ix: IndexSets) -> None:
    """sum_s share[r,w,s] + sum_q rent_share[r,w,q] = 1   for every (r,w) with demand > 0 (q: cloud regions, optimizer.model.clock).
    With routing per hour (clock.routing hour) hourly_demand_met holds for every hour instead, and implies this row."""
    if ix.clock.hourly_routing:
        return
    keys = [key for key, _, _ in serving_options(ix)]
    row_of = {key: i for i, key in enumerate(keys)}
    share, rent = lm.blocks["share"], lm.blocks.get("rent_share")
    rows = [row_of[r, w] for r, w, _ in ix.serve] + ([row_of[r, w] for r, w, _ in rent.keys] if rent else [])
    cols = np.arange(share.start, share.stop).tolist() + (np.arange(rent.start, rent.stop).tolist() if rent else [])
    lm.add_entries("demand_met", keys, rows, cols, np.ones(len(cols)), lower=1.0, upper=1.0)


@family(priced=True, checker="check_power_and_space", not_relaxed="implied by inference_capacity, density_needs_zone and "
        "zone_needs_open in the MIP; it only tightens the LP relaxation, so relaxing it would move no limit", lp_lazy=True,
        lp_lazy_group=lambda pair: pair[2])  # a site's links: an LP that breaks one moves the load to its next fractional site
def share_needs_open(lm: LinearModel, ix: IndexSets) -> None:
    """share[r,w,s] - max_share * open[s] <= 0   per pair (the strong link: it keeps the LP relaxation tight, where one aggregated row per site lets a tenth-open site carry all its load)."""
    cap = ix.scenario.policies.max_share_per_site
    share, opened = lm.blocks["share"], lm.blocks["open"]
    n = len(ix.serve)
    open_col = np.array([opened.start + opened.pos[s] if s in opened.pos else -1 for s in ix.site_pos], dtype=np.int64)
    site_col = open_col[ix.serve_positions()[1]]
    if n and site_col.min() < 0:
        raise ValueError("a serving pair names a site with no open column")
    cols = np.column_stack([np.arange(share.start, share.start + n, dtype=np.int32), site_col])
    lm.add_rows("share_needs_open", ix.serve, cols, np.array([1.0, -cap]), upper=0.0)  # one row per pair, as add_row


@family(priced=True, checker="check_inference_capacity", not_relaxed="a law of the model, not a limit a user sets: "
        "capacity is what the racks serve; the limits behind it (power, floor, demand) are relaxed instead")
def inference_capacity(lm: LinearModel, ix: IndexSets) -> None:
    """sum_r share[r,w,s] * demand[r,w] - sum_{k,c} racks_inf[s,k,c,w] * tok_s[k,w] <= 0   for every (s,w) with racks.

    tok_s[k,w] is a rack's tokens/s at the target utilization. The row exists wherever
    racks could serve w, even when no pair is in the model yet, so that its dual prices
    pairs left out of a candidate-restricted model (optimizer.pairs). With the clock on,
    hourly_serving takes its place (optimizer.model.clock_families).
    """
    if ix.clock.on:
        return
    keys = list(ix.inf_by_sw)
    share, racks = lm.blocks["share"], lm.blocks["racks_inf"]
    classes = {w: i for i, w in enumerate(ix.workloads)}
    row_at = np.full((len(ix.site_pos), len(classes)), -1, dtype=np.int64)  # (site, class) -> row, -1: no racks there
    for i, (s, w) in enumerate(keys):
        row_at[ix.site_pos[s], classes[w]] = i
    _, site_pos, class_pos = ix.serve_positions()
    served_row = row_at[site_pos, class_pos]
    served = np.flatnonzero(served_row >= 0)
    rack_row = [row_at[ix.site_pos[s], classes[w]] for s, _, _, w in racks.keys]
    rows = np.concatenate([served_row[served], np.asarray(rack_row, dtype=np.int64)])
    cols = np.concatenate([share.start + served, np.arange(racks.start, racks.stop)])
    coefs = np.concatenate([ix.serve_demand_tok_s()[served], [-ix.tok_s_per_rack[k, w] for _, k, _, w in racks.keys]])
    lm.add_entries("inference_capacity", keys, rows, cols, coefs, upper=0.0)


@family(checker="check_training", not_relaxed="a law of the model: a job runs on installed GPUs; "
        "the limits behind it (power, floor, job placement) are relaxed instead")
def training_capacity(lm: LinearModel, ix: IndexSets) -> None:
    """sum_j place[j,s,f,x] * gpus_h100[j] - eff[f] * h100_equiv[x] * sum_{k of x, c} racks_trn[s,k,c,f] * gpus[k] <= 0."""
    racks = ix.trn_by_sfchip
    for (s, f, x), jobs in ix.place_by_sfchip.items():
        need = [(lm.col("place", (j, s, f, x)), ix.jobs[j].gpus_h100_equiv) for j in jobs]
        have = [(lm.col("racks_trn", (s, k, c, f)), -ix.h100_per_rack(k, f)) for k, c in racks.get((s, f, x), [])]
        lm.add_row("training_capacity", (s, f, x), need + have, upper=0.0)


@family(checker="check_training", relax=Relax(
    "short", "the job (0 to 1)", lambda ix, key: 1.0,
    "training job {job} ({gpus} H100-equivalent GPUs) cannot be placed whole at any site", _job_fields,
    "jobs.csv gpus_h100_equiv, eligible_chips, min_fabric_tier or allowed_countries", weight=MISSION))
def job_placed_once(lm: LinearModel, ix: IndexSets) -> None:
    """sum_{s,f,x} place[j,s,f,x] + sum_q rent_trn[j,q] = 1: every job runs whole, in one site (or one cloud region,
    on reserved rented GPUs), on one fabric and chip. An interruptible job with the clock on may instead run in the
    troughs: its row is <= 1 and trough_job_hours asks for its GPU-hours."""
    options = ix.place_by_job
    rented: dict[str, list[str]] = {}
    for j, q in ix.clock.rent_train:
        rented.setdefault(j, []).append(q)
    troughs = set(trough_jobs(ix))
    for j in ix.jobs:
        row = [(lm.col("place", (j, *o)), 1.0) for o in options.get(j, [])]
        row += [(lm.col("rent_trn", (j, q)), 1.0) for q in rented.get(j, [])]
        lm.add_row("job_placed_once", j, row, lower=0.0 if j in troughs else 1.0, upper=1.0)


@family(checker="check_density", not_relaxed="links racks to the zone that pays for them; "
        "its big-M widens with power and floor in the elastic model, so the site limits are what moves")
def density_needs_zone(lm: LinearModel, ix: IndexSets) -> None:
    """sum_w racks_inf[s,k,c,w] + sum_f racks_trn[s,k,c,f] - M[s,k,c] * zone[s,c] <= 0.

    Density itself is enforced by pruning (a rack exists only in a cooling that can hold
    it); this links racks to a built zone with M = the most racks of k the site's floor and
    power admit in a c zone, the tightest valid bound.
    """
    inf = ix.inf_by_skc
    trn = ix.trn_by_skc
    for (s, k, c), limit in ix.rack_limit.items():
        racks = [(lm.col("racks_inf", (s, k, c, w)), 1.0) for w in inf.get((s, k, c), [])]
        racks += [(lm.col("racks_trn", (s, k, c, f)), 1.0) for f in trn.get((s, k, c), [])]
        lm.add_row("density_needs_zone", (s, k, c), racks + [(lm.col("zone", (s, c)), -float(limit))], upper=0.0)


@family(checker="check_power_and_space", not_relaxed="a zone is part of the site it is built in; "
        "nothing a user sets can loosen it")
def zone_needs_open(lm: LinearModel, ix: IndexSets) -> None:
    """zone[s,c] - open[s] <= 0."""
    for s, c in ix.zones:
        lm.add_row("zone_needs_open", (s, c), [(lm.col("zone", (s, c)), 1.0), (lm.col("open", s), -1.0)], upper=0.0)


@family(optimality=True, checker="check_power_and_space", not_relaxed="holds for a cheapest plan, limits nothing a user sets: an "
        "open site without a zone holds no rack, and closing it saves its fixed cost; it only tightens the LP relaxation")
def open_site_has_zone(lm: LinearModel, ix: IndexSets) -> None:
    """sum_c zone[s,c] - open[s] >= 0   for every site with a zone option, unless forced open or min_sites > 0.

    Not a law of every plan but of a cheapest one. A site open with no zone holds no rack
    (density_needs_zone), so it serves nothing, lends nothing, trains nothing and backs up
    nothing; closing it keeps every other row and saves fixed_cost_usd_per_year >= 0. So
    some optimum meets the row, and the optimum's cost is unchanged. What it buys is the LP
    bound: there a few racks pay a few hundredths of a zone (density_needs_zone's M is the
    most racks the site holds) while the site is open almost whole, so zones are nearly
    free; with the row, every open site pays at least one zone. The exceptions are where
    an idle open site can be asked for: a forced site, min_sites, and multi-period plans,
    whose halls are built ahead; those, and studies that hold a given plan's decisions fixed,
    build without it (`build_model(ix, cheapest=False)`).
    """
    if ix.scenario.policies.min_sites > 0:
        return
    forced = set(ix.scenario.policies.forced_sites)
    zones: dict[str, list[int]] = {}
    for s, c in ix.zones:
        zones.setdefault(s, []).append(lm.col("zone", (s, c)))
    for s in sorted(zones):
        if s not in forced:
            lm.add_row("open_site_has_zone", s, [(col, 1.0) for col in zones[s]] + [(lm.col("open", s), -1.0)], lower=0.0)


@family(checker="check_density", not_relaxed="implied by training_capacity and density_needs_zone in the MIP; "
        "it only tightens the LP relaxation, so relaxing it would move no limit")
def place_needs_zone(lm: LinearModel, ix: IndexSets) -> None:
    """sum_f place[j,s,f,x] - sum_{c in C(s,x)} zone[s,c] <= 0   for every (j,s,x) with a placement option,
    C(s,x) = the cooling types of the training racks of chip x at s.

    The strong link of a placement (share_needs_open's twin for training): a job placed at s
    runs on racks of its chip, which stand in a zone that holds them. In the MIP
    training_capacity and density_needs_zone imply it; in the LP a whole job could otherwise
    sit at a site opened a hundredth, on a liquid zone built a hundredth (density_needs_zone's
    M is the most racks the site holds), and the rounded start kept that site for the job
    (the default with the clock: Tokyo, open 0.009 in the LP, then $2.5 M a year of site and
    zone in the plan, where Seoul served at $0.14 M more in the LP).
    """
    racks = ix.trn_by_sfchip
    coolings: dict[tuple[str, str], set[str]] = {}
    for (s, _, x), options in racks.items():
        coolings.setdefault((s, x), set()).update(c for _, c in options)
    placements: dict[tuple[str, str, str], list[int]] = {}
    for j, s, f, x in ix.place:
        placements.setdefault((j, s, x), []).append(lm.col("place", (j, s, f, x)))
    for (j, s, x), cols in placements.items():
        zones = [lm.col("zone", (s, c)) for c in sorted(coolings.get((s, x), ()))]
        lm.add_row("place_needs_zone", (j, s, x), [(col, 1.0) for col in cols] + [(col, -1.0) for col in zones], upper=0.0)


REACH_CHUNK = 1024  # regions per block of reachable_peak_tok_s's product (16 MB of floats at 2,000 sites)


def reachable_peak_tok_s(ix: IndexSets) -> dict[str, np.ndarray]:
    """Class -> per site (scenario order): the most load its eligible regions could put on it at
    once, max_h sum_r max_share * demand[r,w] * p[r,w,h] over every eligible pair, not only the
    pairs a candidate-restricted model holds (p = 1 with the clock off)."""
    cap = ix.scenario.policies.max_share_per_site
    out = {}
    for w, mask in ix.eligible.items():
        load = np.zeros((len(ix.region_pos), len(ix.clock.hours) if ix.clock.on else 1))
        for r, i in ix.region_pos.items():
            if ix.demand(r, w) > 0:
                load[i] = ix.demand(r, w) * (ix.clock.profile(r, w) if ix.clock.on else 1.0)
        by_hour = np.zeros((mask.shape[1], load.shape[1]))
        for lo in range(0, mask.shape[0], REACH_CHUNK):  # a block of regions at a time: the mask as floats stays small
            by_hour += mask[lo:lo + REACH_CHUNK].T.astype(float) @ load[lo:lo + REACH_CHUNK]
        out[w] = cap * by_hour.max(axis=1) if by_hour.size else np.zeros(mask.shape[1])
    return out


@family(optimality=True, checker="check_density", not_relaxed="holds for a cheapest plan, limits nothing a user sets: a rack beyond the "
        "load a site can ever be asked for is removed at no cost; it only tightens the LP relaxation")
def zone_racks_within_reach(lm: LinearModel, ix: IndexSets) -> None:
    """sum_{k in N} racks_inf[s,k,c,w] * tok_s[k,w] - (U[s,w] + T[s,w]) * zone[s,c] <= 0   for every (s,c,w) with racks in N,
    N = the rack configs at (s,w) that lend no GPUs to jobs in the troughs, U[s,w] = reachable_peak_tok_s (the most
    load s could serve at one hour), T[s,w] = max_{k in N} tok_s[k,w].

    Not a law of every plan but of a cheapest one (as open_site_has_zone). Let C be the
    capacity of N at (s,w) and P the largest hourly load there (P <= U). If C >= P + T, take
    one rack of the configuration of N that uses the most energy per token: N's other racks
    still hold P, so every hour's load fits on them, with the tokens the rack served moved to
    racks using no more energy per token (and what other racks lend stays where it is); chips,
    colocation, cooling capex and idle energy fall, nothing rises, and no row breaks (power,
    floor, carbon and capex only lose terms). So some optimum has C < P + T <= U + T in every
    zone, and the optimum's cost is unchanged. Racks that may lend to interruptible jobs are
    left out (racks may be built to lend), and so are classes that must survive a site loss
    (their racks hold spare). What it buys is the LP bound: density_needs_zone's M is the
    most racks the site holds, so there a rack costs only a sliver of its zone; here the
    sliver is its share of the load the site can reach.
    """
    for (s, w), (limit, configs) in sorted(reach_limits(ix).items()):
        by_cooling: dict[str, list[str]] = {}
        for k, c in ix.inf_by_sw[s, w]:
            if k in configs:
                by_cooling.setdefault(c, []).append(k)
        for c, ks in sorted(by_cooling.items()):
            terms = [(lm.col("racks_inf", (s, k, c, w)), ix.tok_s_per_rack[k, w] / limit) for k in ks]
            lm.add_row("zone_racks_within_reach", (s, c, w), terms + [(lm.col("zone", (s, c)), -1.0)], upper=0.0)


def reach_limits(ix: IndexSets) -> dict[tuple[str, str], tuple[float, frozenset[str]]]:
    """(s, w) -> (U + T in tok/s, N) of zone_racks_within_reach: N the rack configs at (s,w) that lend
    no GPUs to jobs in the troughs, for classes that need not survive a site loss (the warm start
    rounds within these limits too)."""
    survive = set(ix.scenario.policies.survive_site_loss)
    lends = {(s, g, w) for _, s, g, w, _ in ix.clock.backfill} if ix.clock.on else set()
    configs: dict[tuple[str, str], set[str]] = {}
    for s, k, c, w in ix.inf_racks:
        if w not in survive and (s, ix.clock.energy_group.get(k), w) not in lends:
            configs.setdefault((s, w), set()).add(k)
    if not configs:
        return {}
    reach = reachable_peak_tok_s(ix)
    return {(s, w): (float(reach[w][ix.site_pos[s]]) + max(ix.tok_s_per_rack[k, w] for k in ks), frozenset(ks))
            for (s, w), ks in configs.items()}


def _site_racks(lm: LinearModel, ix: IndexSets, s: str, weight) -> list[tuple[int, float]]:
    inf = [(lm.col("racks_inf", key), weight(key)) for key in ix.inf_by_site.get(s, [])]
    return inf + [(lm.col("racks_trn", key), weight(key)) for key in ix.trn_by_site.get(s, [])]


@family(checker="check_power_and_space", relax=Relax(
    "over", "kW", lambda ix, s: ix.sites[s].power_limit_kw,
    "site {site} power {limit} is over by {over}: raise power_limit_kw in {file} to at least {needed}", _power_fields,
    "sites.csv power_limit_kw"))
def site_power(lm: LinearModel, ix: IndexSets) -> None:
    """sum racks * kw_per_rack[k] * PUE[s,c] - power_limit_kw[s] * open[s] <= 0   (sites with racks
    whose floor could draw more than the limit).

    Where floor_racks[s] x the largest facility kW of any rack the site may hold is within
    power_limit_kw[s], the row is implied by site_space and is not written: sum racks * kW * PUE
    <= max(kW * PUE) * sum racks <= max(kW * PUE) * floor_racks * open <= power_limit_kw * open.
    Such a limit is a big-M far above anything the site can draw, and it misled the solver: with
    1e9 kW (a cost-matrix instance) HiGHS proved 'optimal' a plan 3e-5 above the optimum
    (benchmarks/race.py's generated instances). The checker still checks every site's power."""
    for s in sorted(ix.sites):
        site = ix.sites[s]
        load = _site_racks(lm, ix, s, lambda key: ix.racks[key[1]].kw_per_rack * site.pue(ix.cooling[key[2]]))
        if load and site.power_limit_kw < site.floor_racks * max(kw for _, kw in load):
            lm.add_row("site_power", s, load + [(lm.col("open", s), -site.power_limit_kw)], upper=0.0)


@family(checker="check_power_and_space", relax=Relax(
    "over", "racks", lambda ix, s: max(ix.sites[s].floor_racks, 1),
    "site {site} floor space {floor} racks is over by {over} racks (floor_racks in {file})", _space_fields,
    "sites.csv floor_racks"))
def site_space(lm: LinearModel, ix: IndexSets) -> None:
    """sum racks - floor_racks[s] * open[s] <= 0   (sites with racks)."""
    for s in sorted(ix.sites):
        racks = _site_racks(lm, ix, s, lambda key: 1.0)
        if racks:
            lm.add_row("site_space", s, racks + [(lm.col("open", s), -float(ix.sites[s].floor_racks))], upper=0.0)


# ------------------------------------------------------------------------- self-build
# Tenure of training capacity (docs/formulation.md): a site leases (colocation, per rack) or
# self-builds a campus for built_kw[s] kW of its training IT load. The objective charges
# built_kw[s] * (build_usd_per_kw_year[s] - 12 * colocation_usd_per_kw_month[s]) (the build
# cost in "self_build", the colocation it replaces as a credit in "colocation") plus
# build[s] * campus_fixed_usd_per_year. The variables exist only at index.add_build_sites' sites.


@family(checker="check_self_build", not_relaxed="a law of the model: a campus is built for training racks that "
        "exist; building nothing (lease) is always feasible, so it never causes infeasibility")
def self_build_within_training(lm: LinearModel, ix: IndexSets) -> None:
    """built_kw[s] - sum_{k,c,f} racks_trn[s,k,c,f] * kw_per_rack[k] <= 0   for s in build
    (the campus replaces colocation only on the training IT kW at s)."""
    racks = ix.trn_by_site
    for s in ix.build:
        load = [(lm.col("racks_trn", key), -ix.racks[key[1]].kw_per_rack) for key in racks[s]]
        lm.add_row("self_build_within_training", s, [(lm.col("built_kw", s), 1.0)] + load, upper=0.0)


@family(checker="check_self_build", not_relaxed="links built kW to the campus decision; its M is the most "
        "training IT kW the site's power and floor admit, so power and floor are what the diagnosis moves")
def self_build_needs_campus(lm: LinearModel, ix: IndexSets) -> None:
    """built_kw[s] - M[s] * build[s] <= 0   for s in build, M[s] = min(power_limit_kw[s] / min PUE,
    floor_racks[s] * max kw_per_rack) over the site's training rack options (the tightest valid M)."""
    for s in ix.build:
        lm.add_row("self_build_needs_campus", s, [(lm.col("built_kw", s), 1.0), (lm.col("build", s), -ix.build_limit_kw[s])],
                   upper=0.0)


@family(checker="check_self_build", not_relaxed="a campus below the minimum is simply not built: the site "
        "leases instead, so the row never makes a plan infeasible")
def self_build_min_campus(lm: LinearModel, ix: IndexSets) -> None:
    """built_kw[s] - min_campus_kw * build[s] >= 0   for s in build (if min_campus_mw > 0): nobody self-builds
    a campus smaller than economics.min_campus_mw."""
    if ix.min_campus_kw <= 0:
        return
    for s in ix.build:
        lm.add_row("self_build_min_campus", s, [(lm.col("built_kw", s), 1.0), (lm.col("build", s), -ix.min_campus_kw)],
                   lower=0.0)


# --------------------------------------------------------------------------- policies


def _all_racks(lm: LinearModel, ix: IndexSets, per_rack) -> list[tuple[int, float]]:
    inf = [(lm.col("racks_inf", key), per_rack(e)) for key, e in ix.inf_econ.items()]
    return inf + [(lm.col("racks_trn", key), per_rack(e)) for key, e in ix.trn_econ.items()]


@family(checker="check_policies", section="policies", relax=Relax(
    "over", "t CO2/yr", lambda ix, _: max(ix.scenario.policies.carbon_cap_t_per_year or 0.0, 1.0),
    "carbon cap {cap} t CO2/yr is exceeded by {amount} t CO2/yr", _policy_fields, "policies.carbon_cap_t_per_year"))
def carbon_cap(lm: LinearModel, ix: IndexSets) -> None:
    """sum racks * emissions_t_per_rack <= carbon_cap_t_per_year   (if set)."""
    cap = ix.scenario.policies.carbon_cap_t_per_year
    if cap is not None:
        lm.add_row("carbon_cap", None, _all_racks(lm, ix, lambda e: e.emissions_t_per_year) + clock_emissions(lm, ix), upper=cap)


@family(checker="check_policies", section="policies", relax=Relax(
    "over", "USD", lambda ix, _: max(ix.scenario.policies.capex_budget_usd or 0.0, 1000.0),
    "capex budget ${budget} is exceeded by ${amount}", _policy_fields, "policies.capex_budget_usd"))
def capex_budget(lm: LinearModel, ix: IndexSets) -> None:
    """sum racks * upfront_capex_per_rack <= capex_budget_usd   (if set; upfront, not annualized)."""
    budget = ix.scenario.policies.capex_budget_usd
    if budget is not None:
        lm.add_row("capex_budget", None, _all_racks(lm, ix, lambda e: e.upfront_capex_usd), upper=budget)


@family(checker="check_policies", section="policies", relax=Relax(
    "short", "sites", lambda ix, _: max(ix.scenario.policies.min_sites, 1),
    "min_sites {min_sites} cannot be met: {amount} candidate site(s) short", _policy_fields, "policies.min_sites"))
def min_sites(lm: LinearModel, ix: IndexSets) -> None:
    """sum_s open[s] >= min_sites   (if min_sites > 0)."""
    pol = ix.scenario.policies
    if pol.min_sites > 0:
        lm.add_row("min_sites", None, [(lm.col("open", s), 1.0) for s in sorted(ix.sites)], lower=float(pol.min_sites))


@family(checker="check_policies", section="policies", relax=Relax(
    "over", "sites", lambda ix, _: max(ix.scenario.policies.max_sites or 0, 1),
    "max_sites {max_sites} is exceeded by {amount} site(s)", _policy_fields, "policies.max_sites"))
def max_sites(lm: LinearModel, ix: IndexSets) -> None:
    """sum_s open[s] <= max_sites   (if set)."""
    pol = ix.scenario.policies
    if pol.max_sites is not None:
        lm.add_row("max_sites", None, [(lm.col("open", s), 1.0) for s in sorted(ix.sites)], upper=float(pol.max_sites))


@family(checker="check_policies", section="policies", writes=BOUNDS, not_relaxed="a forced site is fixed "
        "open by its bounds (no row); the limits it collides with (max_sites, budgets) are relaxed instead")
def forced_sites(lm: LinearModel, ix: IndexSets) -> None:
    """open[s] = 1 for forced sites (forbidden sites have no variables at all)."""
    for s in ix.scenario.policies.forced_sites:
        lm.fix("open", s, 1.0)


@family(checker="check_footprint", section="policies", writes=BOUNDS, not_relaxed="today's footprint is held as it is "
        "(docs/as-is.md): what it cannot serve is named as unserved demand or an unplaced job, what breaks a limit as that limit")
def as_is_footprint(lm: LinearModel, ix: IndexSets) -> None:
    """open[s] = 1 at the sites of today's footprint and 0 elsewhere; zone[s,c] = 1 for each cooling its
    racks use and 0 elsewhere; racks_inf and racks_trn = today's rack counts (the index holds no other
    rack: index.footprint_keys). Only with a footprint (models.records.FootprintLine): the as-is baseline."""
    lines = ix.scenario.footprint
    if not lines:
        return
    sites = {ln.site for ln in lines}
    zones = {(ln.site, ln.cooling) for ln in lines}
    for s in ix.sites:
        lm.fix("open", s, float(s in sites))
    for key in ix.zones:
        lm.fix("zone", key, float(key in zones))
    for ln in lines:
        if ln.purpose == "inference":
            lm.fix("racks_inf", (ln.site, ln.config, ln.cooling, ln.workload), float(ln.racks))
        else:
            lm.fix("racks_trn", (ln.site, ln.config, ln.cooling, ln.fabric), float(ln.racks))


@family(checker="check_policies", section="policies", not_relaxed="a yes/no policy with no amount to move; "
        "switch policies.single_purpose_sites off to see what it costs")
def single_purpose_sites(lm: LinearModel, ix: IndexSets) -> None:
    """hosts_inf[s] + hosts_trn[s] - open[s] <= 0                              key (one, s);
    sum_{k,c,w} racks_inf[s,k,c,w] - floor_racks[s] * hosts_inf[s] <= 0      key (inference, s);
    sum_{k,c,f} racks_trn[s,k,c,f] - floor_racks[s] * hosts_trn[s] <= 0      key (training, s)."""
    if not ix.scenario.policies.single_purpose_sites:
        return
    sites = sorted(ix.sites)
    lm.add_block("hosts_inf", sites, 0.0, 1.0, "binary")
    lm.add_block("hosts_trn", sites, 0.0, 1.0, "binary")
    name = "single_purpose_sites"
    for s in sites:
        lm.add_row(name, ("one", s), [(lm.col("hosts_inf", s), 1.0), (lm.col("hosts_trn", s), 1.0), (lm.col("open", s), -1.0)], upper=0.0)
    for role, block, keys, hosts in (("inference", "racks_inf", ix.inf_by_site, "hosts_inf"), ("training", "racks_trn", ix.trn_by_site, "hosts_trn")):
        for s in sites:
            if s in keys:
                racks = [(lm.col(block, key), 1.0) for key in keys[s]]
                lm.add_row(name, (role, s), racks + [(lm.col(hosts, s), -float(ix.sites[s].floor_racks))], upper=0.0)


# -------------------------------------------------------------------------- objective


def objective(lm: LinearModel, ix: IndexSets) -> None:
    """min sum of the annualized cost categories in optimizer.costs.COST_CATEGORIES."""
    for s in sorted(ix.sites):
        lm.add_cost("site_fixed", lm.col("open", s), ix.sites[s].fixed_cost_usd_per_year)
    for s, c in ix.zones:
        lm.add_cost("cooling_zones", lm.col("zone", (s, c)), ix.cooling[c].zone_fixed_usd_per_year)
    for block, table in (("racks_inf", ix.inf_econ), ("racks_trn", ix.trn_econ)):
        for key, econ in table.items():
            j = lm.col(block, key)
            for category, value in econ.cost_usd_per_year.items():
                lm.add_cost(category, j, value)
    economics = ix.scenario.economics
    for s in ix.build:  # self-build: the campus's cost, and the colocation it replaces on built_kw
        lm.add_cost("self_build", lm.col("built_kw", s), ix.build_usd_per_kw_year[s])
        lm.add_cost("colocation", lm.col("built_kw", s), -12.0 * ix.sites[s].colocation_usd_per_kw_month)
        lm.add_cost("self_build", lm.col("build", s), economics.campus_fixed_usd_per_year)
    if economics.transport_usd_per_tok_s_1000km_year or ix.pair_cost:
        share, n = lm.blocks["share"], len(ix.serve)
        # transport_usd_per_year over every pair at once (the same arithmetic, element by element)
        demand = ix.serve_demand_tok_s()
        region_pos, site_pos, _ = ix.serve_positions()
        km = ix.distance_km[region_pos, site_pos]
        pair = np.fromiter((ix.pair_cost.get(key, 0.0) for key in ix.serve), dtype=float, count=n)
        cost = transport_usd_per_year(demand, np.asarray(km, dtype=float), economics, pair)
        lm.add_costs("transport", range(share.start, share.start + n), cost)
    clock_costs(lm, ix)


import dcplace.optimizer.model.clock_families  # noqa: E402,F401 - registers the hourly families (imported above already: they come first)
import dcplace.optimizer.model.failover  # noqa: E402,F401 - registers the resilience families
import dcplace.optimizer.model.periods  # noqa: E402,F401 - registers the families that tie periods (built by build_periods_model)

FAMILIES = tuple(f.builder for f in REGISTRY.values() if f.section != "periods")  # build_model's families, in build order


def build_model(ix: IndexSets, without: tuple[str, ...] | frozenset = (), cheapest: bool = True) -> LinearModel:
    """The full MIP over the sparse index sets of `ix`: every registered family, in order.
    `without` leaves families out by name (tests/test_registry.py shows what each one holds).

    `cheapest=False` builds a model whose plan is not free to be a cheapest one (a multi-period
    model, a plan's decisions held fixed or judged as they are, near-optimal alternatives, the
    elastic diagnosis, whose objective is the moves and whose demand may go unserved): without
    the families registered `optimality=True`, which hold for some cheapest plan of one period,
    not for every plan (open_site_has_zone, zone_racks_within_reach), or only for plans that
    serve all demand from whole sites and survive every loss (failover_open_spread). A scenario
    with today's footprint held fixed is built so always."""
    unknown = set(without) - set(REGISTRY)
    if unknown:
        raise KeyError(f"no constraint family named {sorted(unknown)}; registered: {', '.join(REGISTRY)}")
    if not cheapest or ix.scenario.footprint:
        without = (*without, *flagged("optimality"))
    lm = LinearModel(ix.scenario.name)
    lm.cost_categories = COST_CATEGORIES
    add_variables(lm, ix)
    for name, fam in REGISTRY.items():
        if name not in without and fam.section != "periods":  # the periods' ties: optimizer.model.periods
            fam.builder(lm, ix)
    objective(lm, ix)
    return lm


__all__ = ["build_model", "FAMILIES", "reach_limits"]
