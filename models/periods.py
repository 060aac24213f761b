"""A multi-period scenario as one single-year scenario per period (docs/periods.md).

Each period's scenario is an ordinary Scenario: the optimizer builds today's model over it,
and its plan is an ordinary plan, checked by the ordinary checker. What changes from the
scenario's tables to a period's is stated here, once:

* demand: every region's class demand times `period.demand[class]` (1 when not named);
* power: a site with `power_from_year` after the period's first year has no power in the
  period (capacity must be there for the whole period, so power arriving mid-period counts
  from the next one); `power_steps_mw` sets the limit from each step's year on; a site
  without steps has its power_limit_kw times `period.power_limit_factor`;
* prices: every site's power price times `period.power_price_factor`; `period.economics`
  replaces the economics keys it names;
* chips: a chip with `available_from_year` after the period's first year is not in the
  period's catalog (nor its rack configurations and throughput rows);
* jobs: a job runs in the periods from `from_year` to `to_year` (start years, inclusive),
  on its GPUs times `period.demand["training"]` (1 when not named).
"""

from __future__ import annotations

from dcplace.models.checks import record_row
from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.records import Period, Scenario, Site
from dcplace.models.scenario_file import scenario_hash


def site_power_kw(site: Site, year: int, limit_factor: float = 1.0) -> float:
    """The site's power limit in a period starting in `year`; 0 before its power arrives. A site
    with power steps follows them; one without has power_limit_kw x the period's limit factor."""
    if site.power_from_year is not None and site.power_from_year > year:
        return 0.0
    if not site.power_steps_mw:
        return site.power_limit_kw * limit_factor
    power_kw = site.power_limit_kw
    for step_year, mw in site.power_steps_mw:
        if step_year <= year:
            power_kw = mw * 1000.0
    return power_kw


def _file(scenario: Scenario, table: str) -> str:
    return scenario.files.get(table) or table


def _row(scenario: Scenario, table: str, record_id: str) -> int | None:
    index = next((i for i, r in enumerate(getattr(scenario, table)) if r.id == record_id), None)
    return None if index is None else record_row(scenario, table, index)


def _in_period(job, year: int) -> bool:
    return not ((job.from_year is not None and job.from_year > year) or (job.to_year is not None and job.to_year < year))


def period_scenario(scenario: Scenario, period: Period) -> Scenario:
    """The single-year scenario of `period` (module docstring); raises ScenarioError when the
    period cannot hold the scenario's policies (a forced site without power, a job with no chip)."""
    problems: list[InputProblem] = []
    unpowered = {s.id for s in scenario.sites if site_power_kw(s, period.year, period.power_limit_factor) <= 0}
    if unpowered and unpowered >= {s.id for s in scenario.sites}:
        first = min(s.power_from_year for s in scenario.sites if s.power_from_year is not None)
        problems.append(InputProblem(_file(scenario, "sites"), None, "power_from_year",
                                     f"no site has power in period {period.year}: the first arrives in {first}.",
                                     f"start the periods in {first} or later, or give a site power by {period.year}."))
    for s in sorted(unpowered & set(scenario.policies.forced_sites)):
        problems.append(InputProblem(_file(scenario, "sites"), _row(scenario, "sites", s), "power_from_year",
                                     f"site '{s}' is forced open but has no power in period {period.year}.",
                                     "give it power by then, or start the forced_sites policy later (a period's policies)."))
    sites = tuple(s.model_copy(update={
        "power_limit_kw": site_power_kw(s, period.year, period.power_limit_factor) or s.power_limit_kw,
        "power_price_usd_per_mwh": s.power_price_usd_per_mwh * period.power_price_factor,
    }) for s in scenario.sites)
    regions = tuple(r.model_copy(update={"demand_tok_s": {w: d * period.demand.get(w, 1.0) for w, d in r.demand_tok_s.items()}})
                    for r in scenario.regions)
    catalog = scenario.catalog
    gone = {c.id for c in catalog.chips if c.available_from_year is not None and c.available_from_year > period.year}
    if gone:
        racks = tuple(k for k in catalog.rack_configs if k.chip not in gone)
        catalog = catalog.model_copy(update={
            "chips": tuple(c for c in catalog.chips if c.id not in gone), "rack_configs": racks,
            "throughput": tuple(t for t in catalog.throughput if t.chip not in gone)})
    jobs = []
    for job in scenario.jobs:
        if not _in_period(job, period.year):
            continue
        if job.eligible_chips and gone:
            chips = tuple(c for c in job.eligible_chips if c not in gone)
            if not chips:
                problems.append(InputProblem(_file(scenario, "jobs"), _row(scenario, "jobs", job.id), "eligible_chips",
                                             f"job '{job.id}' runs in period {period.year} but none of its chips "
                                             f"({', '.join(job.eligible_chips)}) is available then.",
                                             "name a chip available by then, or start the job later (from_year)."))
                continue
            job = job.model_copy(update={"eligible_chips": chips})
        if period.demand.get("training", 1.0) != 1.0:
            job = job.model_copy(update={"gpus_h100_equiv": job.gpus_h100_equiv * period.demand["training"]})
        jobs.append(job)
    if problems:
        raise ScenarioError(problems)
    policies = scenario.policies.model_copy(update={
        "forbidden_sites": tuple(sorted(set(scenario.policies.forbidden_sites) | unpowered))})
    # period.economics holds values validated (and typed) against Economics when the scenario was read
    economics = scenario.economics.model_copy(update=period.economics) if period.economics else scenario.economics
    single = scenario.model_copy(update={
        "name": f"{scenario.name}@{period.year}", "sites": sites, "regions": regions, "catalog": catalog, "jobs": tuple(jobs),
        "policies": policies, "economics": economics, "periods": (),
        "cloud_regions": tuple(q for q in scenario.cloud_regions if q.chip not in gone)})
    return single.model_copy(update={"content_hash": scenario_hash(single)})


def period_scenarios(scenario: Scenario) -> list[tuple[Period, Scenario]]:
    """Every period with its single-year scenario, in order; problems of every period at once."""
    out, problems = [], []
    years = [p.year for p in scenario.periods]
    for job in scenario.jobs:
        if not years or any(_in_period(job, year) for year in years):
            continue
        if job.from_year is not None and job.from_year > years[-1]:
            field, why = "from_year", f"from_year {job.from_year} is after the last period's start"
        elif job.to_year is not None and job.to_year < years[0]:
            field, why = "to_year", f"to_year {job.to_year} is before the first period's start"
        else:
            field, why = "from_year", f"no period starts from {job.from_year} to {job.to_year}"
        problems.append(InputProblem(_file(scenario, "jobs"), _row(scenario, "jobs", job.id), field,
                                     f"job '{job.id}' runs in no period: {why}; the periods start in {', '.join(map(str, years))}.",
                                     "give years that hold a period's start, leave them empty, or drop the job."))
    for period in scenario.periods:
        try:
            out.append((period, period_scenario(scenario, period)))
        except ScenarioError as exc:
            problems += exc.problems
    if problems:
        raise ScenarioError(problems)
    return out
