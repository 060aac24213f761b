"""Typed domain records: one validated row of an input table, or one section of a scenario.

Units are part of every name that could be doubted and are the units used everywhere
inside dcplace (see docs/units in README). Conversions from other input units (MW, for
example) happen once, in `models.tables`, never here or later.

Every numeric field carries its bounds, and where a wrong value usually means a unit
mistake the `fix` text says so; `models.tables` turns validation failures into
`InputProblem`s that name the file, the row and the field.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator


def _split_list(value: Any) -> Any:
    """Table cells hold lists as 'a;b;c'; YAML holds real lists. Empty means none."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(";") if part.strip())
    return value


NameList = Annotated[tuple[str, ...], BeforeValidator(_split_list)]


def _survive_map(value: Any) -> Any:
    """`survive_site_loss` as class -> share: a list (or 'a;b') of classes means share 1 each."""
    if value is None:
        return {}
    if isinstance(value, (str, list, tuple)):
        return {w: 1.0 for w in _split_list(value)}
    return value


SurviveMap = Annotated[dict[str, Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]], BeforeValidator(_survive_map)]


def _check_build_cost(value: float | None) -> float | None:
    """A construction cost per MW below $100,000 is a unit mistake (millions of USD per MW, or USD per kW)."""
    if value is not None and value < 1e5:
        raise ValueError(f"{value:g} USD per MW is implausibly low for building a datacenter; it looks like millions of USD "
                         "per MW or USD per kW (give USD per MW, e.g. 11700000)")
    return value


# A site's or the economics' self-build cost: USD per MW of IT load, checked for unit mistakes.
BuildCost = Annotated[float | None, AfterValidator(_check_build_cost)]


def _power_steps(value: Any) -> Any:
    """`power_steps_mw` as ((year, MW), ...): '2028:300;2030:600' in a table cell, a mapping in YAML."""
    if value is None or value == "":
        return ()
    if isinstance(value, dict):
        try:
            return tuple(sorted((int(y), float(mw)) for y, mw in value.items()))
        except (TypeError, ValueError):
            raise ValueError("give each power step as YEAR: MW with a whole year and a number of MW (e.g. {2028: 300})") from None
    if isinstance(value, str):
        steps = []
        for part in (p.strip() for p in value.split(";") if p.strip()):
            year, sep, mw = part.partition(":")
            if not sep:
                raise ValueError(f"'{part}' is not YEAR:MW (e.g. 2028:300)")
            try:
                steps.append((int(year), float(mw)))
            except ValueError:
                raise ValueError(f"'{part}' is not YEAR:MW with a whole year and a number of MW (e.g. 2028:300)") from None
        value = steps
    if isinstance(value, (list, tuple)):
        years = [step[0] if isinstance(step, (list, tuple)) and step else None for step in value]
        twice = sorted({y for y in years if y is not None and years.count(y) > 1})
        if twice:
            raise ValueError(f"year {twice[0]} has two power steps; give one limit per year")
        return tuple(sorted(value, key=lambda step: step[0] if isinstance(step, (list, tuple)) and step else 0))
    return value


PowerSteps = Annotated[tuple[tuple[Annotated[int, Field(ge=1900, le=2200)],
                                   Annotated[float, Field(gt=0, le=10_000, allow_inf_nan=False)]], ...],  # MW: 10 GW per site
                       BeforeValidator(_power_steps)]
Year = Annotated[int, Field(ge=1900, le=2200)]


# Physical ranges (issue 50 item 3): every number an input gives has an upper bound as well as
# a lower one, so that a slip (1e30, a value in another unit) is a problem naming its cell
# rather than a model HiGHS cannot solve. The bounds are generous: far above any real value,
# far below what upsets the solver's numerics.
POWER_LIMIT_KW_MAX = 1e7  # 10 GW per site: the largest campuses announced are about 5 GW
FLOOR_RACKS_MAX = 10_000_000  # rack positions per site: 10 GW at 1 kW per rack
USD_PER_YEAR_MAX = 1e12  # an annual cost or budget line: about the world's yearly datacenter spend, times three
USD_MAX = 1e13  # an upfront amount (a capex budget)
GPUS_MAX = 1e8  # GPUs of one job, one cluster or one cloud cap: a hundred times the largest cluster built
TOK_S_MAX = 1e12  # tokens per second: peak demand of one region and class, or one GPU's throughput
RTT_MS_MAX = 10_000.0  # a round trip: twice around the Earth in fibre is about 400 ms
TIER_MAX = 100  # fabric tiers are small integers
TOK_S_PER_USER_MAX = 1000.0  # one user's decode rate: fifteen times MLPerf's strictest bound (DeepSeek-R1 Interactive, TPOT 15 ms = 66.7 tok/s)
CARBON_PRICE_USD_PER_T_MAX = 1e9  # far above any policy's: the trade-off curve's least-carbon anchor prices carbon this high


def fix(text: str) -> dict[str, str]:
    """The hint shown with a validation failure of this field."""
    return {"fix": text}


def _admits_bool(annotation: Any) -> bool | None:
    """True if `annotation` takes a bool, False if it is a number that does not, None otherwise."""
    if annotation is bool:
        return True
    if annotation in (int, float):
        return False
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _admits_bool(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        found = {_admits_bool(a) for a in typing.get_args(annotation) if a is not type(None)}
        return True if True in found else (False if False in found else None)
    return None  # str, dict[...], tuple[...], Literal[...]


class Row(BaseModel):
    """Record's settings without its guard on every field (PairCost: m x n rows, one number each)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Record(Row):

    @field_validator("*", mode="before")
    @classmethod
    def _number_not_bool(cls, value: Any, info) -> Any:
        # pydantic reads true as 1 and false as 0 for a number: `clock: {hours: true}` would
        # silently become one block of the day
        if not isinstance(value, (bool, dict)):
            return value  # nearly every value: no field lookup (a cost matrix's pairs pass here 10,000 times on 50 x 50)
        field = cls.model_fields[info.field_name]
        if any(isinstance(m, BeforeValidator) for m in field.metadata):
            return value  # a field that parses its own input (survive_site_loss: {chat: true} is share 1)
        annotation = field.annotation
        if isinstance(value, bool) and _admits_bool(annotation) is False:
            raise ValueError("is a yes/no value (true/false), not a number")
        if isinstance(value, dict) and typing.get_origin(annotation) is dict:  # {class: number}, e.g. failover_rtt_ms
            number_type = typing.get_args(annotation)[1]
            yes_no = [key for key, v in value.items() if isinstance(v, bool)]
            if yes_no and _admits_bool(number_type) is False:
                raise ValueError(f"gives '{yes_no[0]}' a yes/no value (true/false), not a number")
        return value


# ----------------------------------------------------------------------------- tables


class Site(Record):
    """A candidate site: a datacenter market, campus or colocation hall."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    lat: float = Field(ge=-90, le=90, json_schema_extra=fix("latitude in decimal degrees, -90..90 (did you swap lat and lon?)"))
    lon: float = Field(ge=-180, le=180, json_schema_extra=fix("longitude in decimal degrees, -180..180"))
    country: str = Field(min_length=2, max_length=2, json_schema_extra=fix("ISO 3166-1 alpha-2 code, e.g. US, DE"))
    power_price_usd_per_mwh: float = Field(ge=0, json_schema_extra=fix("energy price in USD per MWh, e.g. 80"))
    grid_carbon_g_per_kwh: float = Field(ge=0, le=2000, json_schema_extra=fix("grid carbon intensity in g CO2 per kWh, 0..2000"))
    power_limit_kw: float = Field(gt=0, le=POWER_LIMIT_KW_MAX, json_schema_extra=fix(
        "facility power available in kW, at most 10 GW per site (or give power_limit_mw)"))
    floor_racks: int = Field(ge=0, le=FLOOR_RACKS_MAX, json_schema_extra=fix("floor space as a whole number of rack positions"))
    fixed_cost_usd_per_year: float = Field(ge=0, le=USD_PER_YEAR_MAX, json_schema_extra=fix(
        "annual fixed cost of opening the site, USD per year"))
    colocation_usd_per_kw_month: float = Field(ge=0, le=10_000, json_schema_extra=fix(
        "colocation or build cost, USD per kW of IT per month (e.g. 150; a value in the thousands is probably per year or per MW)"))
    cooling_allowed: NameList = Field(min_length=1, json_schema_extra=fix("cooling ids separated by ';', e.g. air;dlc"))
    pue_climate_factor: float = Field(default=1.0, gt=0, le=3, json_schema_extra=fix("multiplier on the cooling overhead (PUE - 1); 1 = the catalog's PUE"))
    build_usd_per_mw: BuildCost = Field(default=None, gt=0, le=1e9, json_schema_extra=fix(
        "cost to build a self-owned campus here, USD per MW of IT (critical) load, e.g. 11700000; empty = economics.build_usd_per_mw"))
    # time to power (docs/periods.md): read only when the scenario has periods
    power_from_year: Year | None = Field(default=None, json_schema_extra=fix(
        "first year the site has power (its grid connection is energized), e.g. 2028; empty = it has power now"))
    power_steps_mw: PowerSteps = Field(default=(), json_schema_extra=fix(
        "the site's power limit from given years on, YEAR:MW separated by ';', e.g. 2028:300;2030:600; empty = power_limit_kw throughout"))

    @field_validator("power_price_usd_per_mwh")
    @classmethod
    def _price_not_per_kwh(cls, value: float) -> float:
        if 0 < value < 5:
            raise ValueError(f"{value} USD/MWh is implausibly low; it looks like a price per kWh (multiply by 1000); "
                             "the physical range is 0, or 5 to 2,000 USD/MWh")
        if value > 2000:
            raise ValueError(f"{value} USD/MWh is implausibly high; it looks like a price in another unit (expected USD per MWh, "
                             "0, or 5 to 2,000)")
        return value

    def pue(self, cooling: Cooling) -> float:
        """Climate-adjusted PUE of a cooling type at this site: 1 + (PUE_c - 1) * factor."""
        return 1.0 + (cooling.pue - 1.0) * self.pue_climate_factor


class Region(Record):
    """A demand region: a population centre with peak inference demand per workload class."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    lat: float = Field(ge=-90, le=90, json_schema_extra=fix("latitude in decimal degrees, -90..90 (did you swap lat and lon?)"))
    lon: float = Field(ge=-180, le=180, json_schema_extra=fix("longitude in decimal degrees, -180..180"))
    country: str = Field(min_length=2, max_length=2, json_schema_extra=fix("ISO 3166-1 alpha-2 code, e.g. US, DE"))
    population: int = Field(default=0, ge=0, le=10_000_000_000, json_schema_extra=fix("people in the region"))
    demand_tok_s: dict[str, Annotated[float, Field(ge=0, le=TOK_S_MAX, allow_inf_nan=False)]] = Field(
        json_schema_extra=fix("peak demand in tokens per second, >= 0")
    )
    rtt_budget_ms: dict[str, Annotated[float, Field(gt=0, le=RTT_MS_MAX, allow_inf_nan=False)]] = Field(
        json_schema_extra=fix("round-trip latency budget in milliseconds, > 0 (a value in the thousands is probably microseconds)")
    )
    allowed_countries: NameList = Field(default=(), json_schema_extra=fix("ISO codes separated by ';'; empty = any country"))
    failover_rtt_ms: dict[str, Annotated[float, Field(gt=0, le=RTT_MS_MAX, allow_inf_nan=False)]] = Field(
        default={}, json_schema_extra=fix("round-trip budget in ms this region accepts while a site is down (failover_rtt_<class>_ms), > 0")
    )
    utc_offset_h: float | None = Field(default=None, ge=-12, le=14, json_schema_extra=fix(
        "the region's standard-time offset from UTC in hours, -12..14 (e.g. 5.5 for India); empty = from its time zone"))


class Chip(Record):
    """An accelerator model. h100_equiv = 0 marks a chip not used for training."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    vendor: str = ""
    capex_usd_per_gpu: float = Field(ge=0, le=10_000_000, json_schema_extra=fix("purchase price per GPU in USD"))
    life_years: float = Field(gt=0, le=30, json_schema_extra=fix("depreciation life in years"))
    h100_equiv: float = Field(ge=0, le=100, json_schema_extra=fix("training throughput relative to one H100 (0 = not a training chip)"))
    available_from_year: Year | None = Field(default=None, json_schema_extra=fix(
        "first year the chip can be bought (volume shipments), e.g. 2027; empty = available now (read only with periods)"))


class RackConfig(Record):
    """A chip x servers-per-rack configuration: fixes GPUs per rack and kW per rack."""

    id: str = Field(min_length=1)
    chip: str = Field(min_length=1)
    gpus_per_server: int = Field(gt=0, le=1000, json_schema_extra=fix("GPUs in one server (or one compute tray), e.g. 8"))
    servers_per_rack: int = Field(gt=0, le=1000, json_schema_extra=fix("servers (or compute trays) in one rack, e.g. 4"))
    server_kw: float = Field(gt=0, le=200, json_schema_extra=fix("server power in kW (a value in the thousands is probably watts)"))
    rack_overhead_kw: float = Field(default=0.0, ge=0, le=100, json_schema_extra=fix("switches and PDUs per rack, kW"))

    @property
    def gpus_per_rack(self) -> int:
        return self.gpus_per_server * self.servers_per_rack

    @property
    def kw_per_rack(self) -> float:
        return self.servers_per_rack * self.server_kw + self.rack_overhead_kw


class Cooling(Record):
    """A cooling type: how dense a rack it can hold, at what PUE and cost."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    max_kw_per_rack: float = Field(gt=0, le=1000, json_schema_extra=fix("highest rack density the cooling can hold, kW per rack"))
    pue: float = Field(ge=1, le=3, json_schema_extra=fix("power usage effectiveness, facility / IT energy, >= 1"))
    capex_usd_per_kw: float = Field(ge=0, le=100_000, json_schema_extra=fix("cooling capex per kW of IT, USD"))
    life_years: float = Field(gt=0, le=50)
    zone_fixed_usd_per_year: float = Field(ge=0, le=USD_PER_YEAR_MAX, json_schema_extra=fix("annual fixed cost of building a zone of this type at a site, USD"))
    # liquid-ready halls (docs/periods.md): one-time costs, read only when the scenario has periods
    ready_usd_per_kw: float = Field(default=0.0, ge=0, le=20000, json_schema_extra=fix(
        "one-time cost per kW of IT of building a site ready for this cooling when it is first built, USD per kW (0 = no premium)"))
    retrofit_usd_per_kw: float = Field(default=0.0, ge=0, le=20000, json_schema_extra=fix(
        "one-time cost per kW of IT of converting an operating site to this cooling when it was not built ready, USD per kW "
        "(0 = no retrofit cost; e.g. 2000)"))


class Fabric(Record):
    """A training fabric. Higher tier = better class (a job may demand a minimum tier)."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    tier: int = Field(ge=0, le=TIER_MAX)
    cost_usd_per_gpu: float = Field(ge=0, le=10_000_000, json_schema_extra=fix("fabric cost per GPU port in USD"))
    life_years: float = Field(gt=0, le=30)
    training_efficiency: float = Field(gt=0, le=1, json_schema_extra=fix("fraction of ideal scaling kept at cluster size, 0..1"))
    max_cluster_gpus: int = Field(gt=0, le=GPUS_MAX, json_schema_extra=fix("largest cluster the fabric carries, in GPUs"))


class Workload(Record):
    """An inference workload class."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    load_factor: float = Field(gt=0, le=1, json_schema_extra=fix("average / peak utilisation of capacity, 0..1"))
    interactivity_tok_s_per_user: float | None = Field(default=None, gt=0, le=TOK_S_PER_USER_MAX, json_schema_extra=fix(
        f"the tokens per second each user must see (1000 / time per output token in ms), > 0 and at most {TOK_S_PER_USER_MAX:,.0f}; "
        "needed when throughput.csv gives the class a curve (rows with tok_s_per_user)"))


class Throughput(Record):
    """Inference throughput of one GPU of a chip on one workload class: one fixed figure, or one
    point of a curve (tok_s_per_user given; several rows per chip and class), read at the class's
    interactivity target (models/interactivity.py)."""

    chip: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    tok_s_per_gpu: float = Field(gt=0, le=TOK_S_MAX, json_schema_extra=fix("tokens per second per GPU, > 0; omit the row if the chip cannot serve the class"))
    tok_s_per_user: float | None = Field(default=None, gt=0, le=TOK_S_PER_USER_MAX, json_schema_extra=fix(
        f"the per-user rate at which tok_s_per_gpu was measured, > 0 and at most {TOK_S_PER_USER_MAX:,.0f}; empty = one fixed figure "
        "for the chip and class"))


class TrainingJob(Record):
    """A training job that must run in one site, on one fabric and one chip type."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    gpus_h100_equiv: float = Field(gt=0, le=GPUS_MAX, json_schema_extra=fix("GPUs needed concurrently, in H100 equivalents"))
    eligible_chips: NameList = Field(default=(), json_schema_extra=fix("chip ids separated by ';'; empty = any training chip"))
    min_fabric_tier: int = Field(default=0, ge=0, le=TIER_MAX)
    allowed_countries: NameList = Field(default=(), json_schema_extra=fix("ISO codes separated by ';'; empty = any country"))
    standby_required: bool = Field(default=False, json_schema_extra=fix(
        "true: a second site must hold the capacity and fabric to resume the job if its site is lost; false: accept the delay"))
    interruptible: bool = Field(default=False, json_schema_extra=fix(
        "true: the job may run on inference GPUs in the hours the served load leaves them idle (needs the clock)"))
    gpu_hours_per_day: float | None = Field(default=None, gt=0, le=GPUS_MAX * 24, json_schema_extra=fix(
        "H100-equivalent GPU-hours the job needs per day when interruptible; empty = gpus_h100_equiv x 24"))

    from_year: Year | None = Field(default=None, json_schema_extra=fix(
        "first period (its start year) the job runs in; empty = from the first period (read only with periods)"))
    to_year: Year | None = Field(default=None, json_schema_extra=fix(
        "last period (its start year) the job runs in; empty = to the last period (read only with periods)"))

    @field_validator("to_year")
    @classmethod
    def _not_before_from_year(cls, value: int | None, info) -> int | None:
        first = info.data.get("from_year")
        if value is not None and first is not None and value < first:
            raise ValueError(f"to_year {value} is before from_year {first}: the job would run in no period")
        return value

    @property
    def daily_h100_hours(self) -> float:
        """H100-equivalent GPU-hours per day an interruptible job must get (docs/clock.md)."""
        return self.gpu_hours_per_day if self.gpu_hours_per_day is not None else self.gpus_h100_equiv * 24.0


class Profile(Record):
    """Demand at one local hour relative to the class's daily peak (docs/clock.md)."""

    workload: str = Field(min_length=1)
    local_hour: int = Field(ge=0, le=23, json_schema_extra=fix("hour of the local day, 0..23"))
    load: float = Field(ge=0, le=1, json_schema_extra=fix("demand at this hour / the day's peak, 0..1 (the peak hour is 1)"))
    region: str = Field(default="", json_schema_extra=fix("a region id for a region's own profile; empty = every region"))
    source: str = ""


class CloudRegion(Record):
    """Rentable GPU capacity: a public-cloud region offering one chip by the GPU-hour."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    provider: str = ""
    lat: float = Field(ge=-90, le=90, json_schema_extra=fix("latitude in decimal degrees, -90..90 (did you swap lat and lon?)"))
    lon: float = Field(ge=-180, le=180, json_schema_extra=fix("longitude in decimal degrees, -180..180"))
    country: str = Field(min_length=2, max_length=2, json_schema_extra=fix("ISO 3166-1 alpha-2 code, e.g. US, DE"))
    chip: str = Field(min_length=1)
    usd_per_gpu_hour_on_demand: float | None = Field(default=None, gt=0, le=1000, json_schema_extra=fix(
        "on-demand price in USD per GPU-hour (not per instance-hour); empty = not offered on demand"))
    usd_per_gpu_hour_reserved: float | None = Field(default=None, gt=0, le=1000, json_schema_extra=fix(
        "reserved (committed) price in USD per GPU-hour, paid for every hour of the year; empty = not offered"))
    cap_gpus: float | None = Field(default=None, gt=0, le=GPUS_MAX, json_schema_extra=fix("most GPUs rentable at once; empty = no cap"))
    fabric_tier: int = Field(default=0, ge=0, le=TIER_MAX, json_schema_extra=fix("tier of the cluster fabric the rented GPUs sit on (fabrics.csv tiers)"))
    period: str = ""
    source: str = ""


class PairCost(Row):
    """Network transport cost of serving all of a region's class demand from one site.

    A Row, not a Record: a cost matrix gives m x n of them, and Record's guard, a Python call per
    field of every row, was half the engine's time on OR-Library's 50 x 50 instances; its one
    number gets the same guard here."""

    region: str = Field(min_length=1)
    site: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    usd_per_year: float = Field(ge=0, le=USD_PER_YEAR_MAX, json_schema_extra=fix("annual cost of serving the whole class demand from the site, USD"))

    @field_validator("usd_per_year", mode="before")
    @classmethod
    def _cost_not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("is a yes/no value (true/false), not a number")
        return value


# ---------------------------------------------------------------- scenario sections


class Economics(Record):
    """Money and utilisation assumptions."""

    discount_rate: float = Field(default=0.08, ge=0, le=1)
    training_load_factor: float = Field(default=0.9, gt=0, le=1)
    inference_target_utilization: float = Field(
        default=0.7, gt=0, le=1, json_schema_extra=fix("share of a GPU's rated throughput planned at peak, 0..1")
    )
    # Wide ranges: a trade-off curve (optimizer.studies.pareto) steers with prices far above any policy's
    carbon_price_usd_per_t: float = Field(default=0.0, ge=0, le=CARBON_PRICE_USD_PER_T_MAX, json_schema_extra=fix(
        "price of a tonne of CO2 in USD, e.g. 100"))
    transport_usd_per_tok_s_1000km_year: float = Field(
        default=0.0, ge=0, le=1e9, json_schema_extra=fix("network transport cost, USD per year per (token/s of peak demand x 1000 km)")
    )
    hours_per_year: float = Field(default=8760.0, gt=0, le=8784)
    # self-build of training campuses (docs/formulation.md, self_build_*): off unless a build cost is given here or per
    # site, and self_build is true
    self_build: bool = Field(default=True, json_schema_extra=fix(
        "true: sites with a build cost (here or in sites.csv) may self-build a training campus; false: every site leases "
        "(the build costs stay in the scenario, unused)"))
    build_usd_per_mw: BuildCost = Field(default=None, gt=0, le=1e9, json_schema_extra=fix(
        "cost to build a self-owned campus, USD per MW of IT (critical) load, e.g. 11700000; empty = no self-build "
        "(sites.csv build_usd_per_mw may still give it per site)"))
    build_om_share_per_year: float = Field(default=0.0, ge=0, le=0.5, json_schema_extra=fix(
        "annual operation and maintenance of a self-built campus as a share of its build cost, 0..0.5 (e.g. 0.03 = 3 % a year)"))
    build_life_years: float = Field(default=20.0, gt=0, le=100, json_schema_extra=fix(
        "years over which a self-built campus is annualized with the CRF, > 0"))
    min_campus_mw: float = Field(default=0.0, ge=0, le=10_000, json_schema_extra=fix(
        "smallest campus anyone self-builds, MW of IT load (below it the site leases); >= 0"))
    campus_fixed_usd_per_year: float = Field(default=0.0, ge=0, le=USD_PER_YEAR_MAX, json_schema_extra=fix(
        "annual fixed cost of owning a campus at a site, USD per year, whatever its size"))


class Latency(Record):
    """How round-trip time between a region and a site is estimated."""

    route_factor: float = Field(default=2.1, ge=1, le=5, json_schema_extra=fix("fibre path length / great-circle distance, >= 1"))
    fiber_km_per_ms: float = Field(default=204.0, gt=0, le=300, json_schema_extra=fix("one-way propagation speed in fibre, km per ms"))
    overhead_ms: float = Field(default=5.0, ge=0, le=1000, json_schema_extra=fix(
        "fixed round-trip overhead in ms (queueing, last mile), e.g. 5"))
    backbone: str | None = Field(default=None, json_schema_extra=fix("a CSV of backbone edges: from,to,km"))


class Policies(Record):
    """Switchable business rules."""

    max_share_per_site: float = Field(default=1.0, gt=0, le=1, json_schema_extra=fix("largest share of a region's demand one site may serve, 0..1"))
    carbon_cap_t_per_year: float | None = Field(default=None, ge=0, le=1e11, json_schema_extra=fix(
        "most tonnes of CO2 a year the plan may emit (the world emits about 4e10)"))
    capex_budget_usd: float | None = Field(default=None, ge=0, le=USD_MAX, json_schema_extra=fix("upfront capital budget in USD (not annualized)"))
    min_sites: int = Field(default=0, ge=0, le=FLOOR_RACKS_MAX)
    max_sites: int | None = Field(default=None, ge=1, le=FLOOR_RACKS_MAX)
    forced_sites: NameList = ()
    forbidden_sites: NameList = ()
    single_purpose_sites: bool = False
    # resilience (docs/resilience.md): class -> share of each region's class demand that must still be served
    # after the loss of any one open site (1 = all of it); a class not named need not survive.
    survive_site_loss: SurviveMap = Field(default={}, json_schema_extra=fix(
        "class -> share of demand that must survive the loss of any one site, 0 < share <= 1 (e.g. {chat: 1, reasoning: 0.8}); "
        "a list of classes means 1 each"))
    failover_rtt_ms: dict[str, Annotated[float, Field(gt=0, le=RTT_MS_MAX, allow_inf_nan=False)]] = Field(default={}, json_schema_extra=fix(
        "class -> round-trip budget in ms while a site is down; default twice the region's rtt_budget_<class>_ms"))
    site_outage_days: float = Field(default=14.0, gt=0, le=365, json_schema_extra=fix("days a lost site stays down, for the outage table"))
    standby_resume_days: float = Field(default=1.0, ge=0, le=365, json_schema_extra=fix(
        "days a job with a standby site loses to resume there from its last checkpoint"))


class Clock(Record):
    """The day: hourly demand by local time (docs/clock.md). hours = 0 keeps one peak per class."""

    hours: int = Field(default=0, ge=0, le=24, json_schema_extra=fix(
        "0 = off (every site sized for the sum of the peaks it serves); 24 = every hour; 1..23 = that many representative blocks"))
    idle_power_share: float = Field(default=0.3, ge=0, le=1, json_schema_extra=fix(
        "share of its rated power an inference rack draws when it serves nothing, 0..1"))
    inference_fabric_tier: int = Field(default=1, ge=0, le=TIER_MAX, json_schema_extra=fix(
        "fabric tier inference racks sit on (fabrics.csv tiers): interruptible jobs needing more cannot use their troughs"))
    routing: Literal["day", "hour"] = Field(default="day", json_schema_extra=fix(
        "'day' (one share per region, class and site for the whole day, the anycast mapping operators publish) or 'hour' "
        "(a share per represented hour: load may move between sites over the day; a larger model, docs/clock.md)"))

    @property
    def on(self) -> bool:
        return self.hours > 0


class Period(Record):
    """One period of a multi-period plan (docs/periods.md): its first year, its length, and what
    changes in it relative to the scenario's tables."""

    year: Year = Field(json_schema_extra=fix("the period's first year, e.g. 2026"))
    years: int = Field(default=1, ge=1, le=20, json_schema_extra=fix("the period's length in years, 1..20"))
    demand: dict[str, Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)]] = Field(default={}, json_schema_extra=fix(
        "class -> multiplier on every region's demand in this period (e.g. {reasoning: 2.2}; training: on every job's GPUs); "
        "a class not named keeps 1"))
    power_price_factor: float = Field(default=1.0, gt=0, le=10, json_schema_extra=fix(
        "multiplier on every site's power price in this period, > 0"))
    power_limit_factor: float = Field(default=1.0, gt=0, le=100, json_schema_extra=fix(
        "multiplier on the power limit of every site without power_steps_mw in this period (market growth), > 0"))
    economics: dict[str, Any] = Field(default={}, json_schema_extra=fix(
        "economics keys that differ in this period (e.g. {carbon_price_usd_per_t: 80})"))
    source: str = ""


class Catalog(Record):
    """The hardware catalog: chips, rack configurations, cooling, fabrics, workloads."""

    chips: tuple[Chip, ...]
    rack_configs: tuple[RackConfig, ...]
    cooling: tuple[Cooling, ...]
    fabrics: tuple[Fabric, ...]
    workloads: tuple[Workload, ...]
    throughput: tuple[Throughput, ...]


class FootprintLine(Record):
    """One line of today's footprint (the as-is baseline, docs/as-is.md): racks of one configuration
    in one cooling zone at one site, serving one inference class or training on one fabric."""

    site: str = Field(min_length=1, json_schema_extra=fix("a site id from the sites table"))
    config: str = Field(min_length=1, json_schema_extra=fix("a rack configuration id from the catalog's rack_configs"))
    cooling: str = Field(min_length=1, json_schema_extra=fix("a cooling type id the site allows (cooling_allowed)"))
    workload: str = Field(default="", json_schema_extra=fix("the inference class the racks serve; empty for training racks"))
    fabric: str = Field(default="", json_schema_extra=fix("the training fabric of training racks; empty for inference racks"))
    racks: int = Field(ge=1, le=FLOOR_RACKS_MAX, json_schema_extra=fix("racks installed, a whole number of at least 1"))

    @property
    def purpose(self) -> str:
        return "training" if self.fabric else "inference"


class Scenario(Record):
    """A validated scenario: everything the optimizer needs, in dcplace's units.

    `files` maps each table ("sites", "regions", "jobs") to the file it came from, so that
    later checks can name it; rows keep their file order, so a CSV record i is on row i + 2.
    """

    name: str
    description: str = ""
    sites: tuple[Site, ...]
    regions: tuple[Region, ...]
    catalog: Catalog
    jobs: tuple[TrainingJob, ...] = ()
    pair_costs: tuple[PairCost, ...] = ()
    footprint: tuple[FootprintLine, ...] = ()  # today's sites and racks, held fixed: the as-is baseline (docs/as-is.md)
    profiles: tuple[Profile, ...] = ()
    cloud_regions: tuple[CloudRegion, ...] = ()
    clock: Clock = Clock()
    periods: tuple[Period, ...] = ()
    economics: Economics = Economics()
    latency: Latency = Latency()
    policies: Policies = Policies()
    backbone_edges: tuple[tuple[str, str, float], ...] = ()
    files: dict[str, str] = {}
    source_path: str = ""
    content_hash: str = ""
    # path -> value applied over the scenario's file (models/overrides.py): what makes it a variant,
    # not content (the hash is of the values they produce), so left out of model_dump and the hash
    overrides: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @classmethod
    def from_frames(cls, sites, regions, jobs=None, catalog=None, name: str = "in-memory", economics=None, latency=None,
                    policies=None, pair_costs=None, description: str = "") -> "Scenario":
        """A validated Scenario from pandas / GeoPandas DataFrames, with exactly the checks a
        scenario file gets (dcplace.models.frames); raises ScenarioError listing every problem."""
        return FRONT_DOORS["frames"](sites, regions, jobs=jobs, catalog=catalog, name=name, economics=economics,
                                     latency=latency, policies=policies, pair_costs=pair_costs, description=description)


# The builders behind Scenario's front doors live a layer above these records (they read
# tables and catalogs); each registers itself here when dcplace.models is imported, so the
# records never import them (tests/test_layers.py forbids the cycle).
FRONT_DOORS: dict[str, Any] = {}
