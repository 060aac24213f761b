"""Annualized cost coefficients: what one rack, one zone, one site costs per year.

The formulation's objective and the plan's cost breakdown both read these, so the two
can never disagree; the independent checker (optimizer/checker/costs.py) recomputes them on its
own from the plan's inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from dcplace.models import Chip, Cooling, Economics, Fabric, RackConfig, Site

COST_CATEGORIES = (
    "site_fixed",
    "cooling_zones",
    "chips",
    "cooling_capex",
    "energy",
    "colocation",
    "self_build",
    "fabric",
    "carbon",
    "transport",
    "rental",
)


def crf(rate: float, years: float) -> float:
    """Capital recovery factor r(1+r)^n / ((1+r)^n - 1); 1/n when r = 0."""
    if rate == 0:
        return 1.0 / years
    growth = (1.0 + rate) ** years
    return rate * growth / (growth - 1.0)


@dataclass(frozen=True)
class RackEconomics:
    """Per-rack annual cost by category, energy and emissions, and upfront capex."""

    cost_usd_per_year: dict[str, float]
    facility_kw: float
    energy_mwh_per_year: float
    emissions_t_per_year: float
    upfront_capex_usd: float

    @property
    def total_usd_per_year(self) -> float:
        return sum(self.cost_usd_per_year.values())


def rack_economics(
    site: Site,
    rack: RackConfig,
    chip: Chip,
    cooling: Cooling,
    load_factor: float,
    economics: Economics,
    fabric: Fabric | None = None,
) -> RackEconomics:
    """Everything one rack of `rack` in a `cooling` zone at `site` costs and emits per year."""
    kw = rack.kw_per_rack
    facility_kw = kw * site.pue(cooling)
    energy_mwh = facility_kw * economics.hours_per_year * load_factor / 1000.0
    emissions_t = energy_mwh * site.grid_carbon_g_per_kwh / 1000.0  # MWh * g/kWh = kg; /1000 = t
    rate = economics.discount_rate
    cost = {
        "chips": rack.gpus_per_rack * chip.capex_usd_per_gpu * crf(rate, chip.life_years),
        "cooling_capex": kw * cooling.capex_usd_per_kw * crf(rate, cooling.life_years),
        "energy": energy_mwh * site.power_price_usd_per_mwh,
        "colocation": kw * site.colocation_usd_per_kw_month * 12.0,
        "carbon": emissions_t * economics.carbon_price_usd_per_t,
        "fabric": rack.gpus_per_rack * fabric.cost_usd_per_gpu * crf(rate, fabric.life_years) if fabric else 0.0,
    }
    upfront = rack.gpus_per_rack * chip.capex_usd_per_gpu + kw * cooling.capex_usd_per_kw
    if fabric:
        upfront += rack.gpus_per_rack * fabric.cost_usd_per_gpu
    return RackEconomics(cost, facility_kw, energy_mwh, emissions_t, upfront)


def build_usd_per_kw_year(build_usd_per_mw: float, economics: Economics) -> float:
    """Annual cost of one kW of IT load in a self-built campus: the build cost per kW annualized
    over the campus's life, CRF(discount_rate, build_life_years), plus the annual O&M share."""
    return build_usd_per_mw / 1000.0 * (crf(economics.discount_rate, economics.build_life_years) + economics.build_om_share_per_year)


def site_build_usd_per_mw(site: Site, economics: Economics) -> float | None:
    """The site's own build cost, else the economics default; None: the site cannot self-build
    (no cost given, or economics.self_build is off)."""
    if not economics.self_build:
        return None
    return site.build_usd_per_mw if site.build_usd_per_mw is not None else economics.build_usd_per_mw


def transport_usd_per_year(demand_tok_s: float, distance_km: float, economics: Economics, pair_usd_per_year: float = 0.0) -> float:
    """Network transport cost of serving all of `demand_tok_s` over `distance_km`: the
    distance rate of `economics` plus any cost given for the (region, class, site) pair."""
    return demand_tok_s * distance_km / 1000.0 * economics.transport_usd_per_tok_s_1000km_year + pair_usd_per_year
