"""References between a scenario's tables and sections, checked as it is read (each problem
names file, row and field): pair costs name known sites, regions and classes; sites name
known coolings, jobs known training chips, policies known sites and classes; cloud regions
take no site's id."""

from __future__ import annotations

from dcplace.models.errors import ProblemLog
from dcplace.models.records import Catalog, FootprintLine, Policies
from dcplace.models.tables import Table, known_hint, parse_rows


def check_pairs(pairs, label: str, sites, regions, catalog: Catalog | None, log: ProblemLog) -> None:
    """Pair costs must name known regions, sites and workloads, once each."""
    known = {"region": {r.id for _, r in regions}, "site": {s.id for _, s in sites}}
    known["workload"] = {w.id for w in catalog.workloads} if catalog else set()
    seen: dict[tuple[str, str, str], int] = {}
    for row, pair in pairs:
        for field, ids in known.items():
            if getattr(pair, field) not in ids:
                log.add(label, row, field, f"unknown {field} '{getattr(pair, field)}'.", f"use an id from the {field}s table.")
        key = (pair.region, pair.site, pair.workload)
        if key in seen:
            log.add(label, row, "region", f"cost for {key} already given in row {seen[key]}.", "keep one row per region, site and workload.")
        seen.setdefault(key, row)


def check_cloud_ids(clouds, label: str, sites, log: ProblemLog) -> None:
    """A cloud region's id is no site's: the plan's hourly, rental and assignment tables name both by id."""
    site_ids = {s.id for _, s in sites}
    for row, cloud in clouds:
        if cloud.id in site_ids:
            log.add(label, row, "id", f"cloud region id '{cloud.id}' is also a site's id: the plan's hourly, rental "
                    "and assignment tables name sites and cloud regions by id.", "give the cloud region an id no site has.")


def cross_check(spec, label: str, catalog: Catalog, sites, jobs, policies: Policies, log: ProblemLog) -> None:
    """References between tables: cooling names, chip names, site ids in policies."""
    cooling_ids = {c.id for c in catalog.cooling}
    chip_ids = {c.id for c in catalog.chips}
    site_ids = {s.id for _, s in sites}
    for row, site in sites:
        for c in site.cooling_allowed:
            if c not in cooling_ids:
                log.add(spec.sites, row, "cooling_allowed", f"site '{site.id}' allows unknown cooling '{c}'.", known_hint("cooling types", cooling_ids))
    for row, job in jobs:
        for chip in job.eligible_chips:
            if chip not in chip_ids:
                log.add(spec.jobs or "jobs", row, "eligible_chips", f"job '{job.id}' names unknown chip '{chip}'.", known_hint("chips", chip_ids))
            elif not next(c for c in catalog.chips if c.id == chip).h100_equiv:
                log.add(spec.jobs or "jobs", row, "eligible_chips", f"job '{job.id}' names chip '{chip}', which has h100_equiv 0 (not a training chip).", "name a training chip, or give the chip an h100_equiv.")
    for key in ("forced_sites", "forbidden_sites"):
        for sid in getattr(policies, key):
            if sid not in site_ids:
                log.add(label, None, f"policies.{key}", f"unknown site '{sid}'.", "use ids from the sites table.")
    workload_ids = {w.id for w in catalog.workloads}
    for key in ("survive_site_loss", "failover_rtt_ms"):  # resilience policies name workload classes
        for w in getattr(policies, key):
            if w not in workload_ids:
                log.add(label, None, f"policies.{key}", f"unknown workload class '{w}'.", known_hint("workload classes", workload_ids))
    both = set(policies.forced_sites) & set(policies.forbidden_sites)
    if both:
        log.add(label, None, "policies.forced_sites", f"sites both forced and forbidden: {', '.join(sorted(both))}.", "remove them from one of the two lists.")
    if policies.max_sites is not None and policies.max_sites < policies.min_sites:
        log.add(label, None, "policies.max_sites", f"max_sites {policies.max_sites} < min_sites {policies.min_sites}.", "raise max_sites or lower min_sites.")


def check_footprint(lines: list[tuple[int, FootprintLine]], label: str, sites, catalog: Catalog, policies: Policies,
                    log: ProblemLog) -> None:
    """Today's footprint (docs/as-is.md) names known sites, rack configurations, cooling types the site
    allows and that can cool the rack, and for each line either an inference class the chip serves or a
    training fabric of a training chip; one line per (site, config, cooling, class or fabric)."""
    site_of = {s.id: s for _, s in sites}
    configs = {k.id: k for k in catalog.rack_configs}
    cooling = {c.id: c for c in catalog.cooling}
    chips = {c.id: c for c in catalog.chips}
    classes = {w.id for w in catalog.workloads}
    fabrics = {f.id for f in catalog.fabrics}
    serves = {(t.chip, t.workload) for t in catalog.throughput if t.tok_s_per_gpu > 0}
    seen: dict[tuple, int] = {}
    for row, line in lines:
        site, config, cool = site_of.get(line.site), configs.get(line.config), cooling.get(line.cooling)
        if site is None:
            log.add(label, row, "site", f"unknown site '{line.site}'.", known_hint("sites", site_of))
        elif line.site in policies.forbidden_sites:
            log.add(label, row, "site", f"site '{line.site}' is in policies.forbidden_sites, so it cannot be open today.",
                    "drop it from forbidden_sites, or from the footprint.")
        if config is None:
            log.add(label, row, "config", f"unknown rack configuration '{line.config}'.", known_hint("rack configurations", configs))
        if cool is None:
            log.add(label, row, "cooling", f"unknown cooling type '{line.cooling}'.", known_hint("cooling types", cooling))
        elif site is not None and line.cooling not in site.cooling_allowed:
            log.add(label, row, "cooling", f"site '{line.site}' does not allow cooling '{line.cooling}' "
                    f"(cooling_allowed: {';'.join(site.cooling_allowed)}).", "name a cooling the site allows, or allow it in the sites table.")
        elif config is not None and config.kw_per_rack > cool.max_kw_per_rack:
            log.add(label, row, "cooling", f"'{line.cooling}' cools at most {cool.max_kw_per_rack:g} kW a rack; '{line.config}' "
                    f"draws {config.kw_per_rack:g} kW.", "name a cooling type that holds the rack (liquid for dense racks).")
        if bool(line.workload) == bool(line.fabric):
            log.add(label, row, "workload", "give either workload (inference racks) or fabric (training racks), not "
                    f"{'both' if line.workload else 'neither'}.", "inference racks name the class they serve; training racks their fabric.")
        elif line.workload and line.workload not in classes:
            log.add(label, row, "workload", f"unknown inference class '{line.workload}'.", known_hint("workload classes", classes))
        elif line.workload and config is not None and (config.chip, line.workload) not in serves:
            log.add(label, row, "workload", f"chip '{config.chip}' of '{line.config}' has no throughput for '{line.workload}'.",
                    "name a class the chip serves (the catalog's throughput table), or another configuration.")
        elif line.fabric and line.fabric not in fabrics:
            log.add(label, row, "fabric", f"unknown fabric '{line.fabric}'.", known_hint("fabrics", fabrics))
        elif line.fabric and config is not None and not getattr(chips.get(config.chip), "h100_equiv", 0):
            log.add(label, row, "fabric", f"chip '{config.chip}' of '{line.config}' is not a training chip (h100_equiv 0).",
                    "give inference racks a workload instead of a fabric, or name a training configuration.")
        key = (line.site, line.config, line.cooling, line.workload, line.fabric)
        if key in seen:
            log.add(label, row, "racks", f"this site, configuration, cooling and class or fabric is already in row {seen[key]}.",
                    "keep one row per site, configuration, cooling and class or fabric (add the racks up).")
        seen.setdefault(key, row)


def footprint_rows(table: Table | None, label: str, sites, catalog: Catalog | None, policies: Policies,
                   log: ProblemLog) -> list[tuple[int, FootprintLine]]:
    """The footprint table's lines, each validated and checked against the scenario (problems logged)."""
    if table is None:
        return []
    lines = parse_rows(table, FootprintLine, log)
    if catalog is not None:
        check_footprint(lines, label, sites, catalog, policies, log)
    if not table.rows:
        log.add(label, None, None, "has no rows: today's footprint needs at least one site with racks.",
                "list today's racks, one row per site, configuration, cooling and class or fabric (docs/as-is.md).")
    return lines
