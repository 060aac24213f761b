"""The outage table in words and tables: the report's resilience section and what
`dcplace outages` prints (docs/resilience.md). The figures come from
optimizer.studies.outages; this module only formats them.

    table = outage_table("plan")
    columns, rows, numeric = site_rows(table)
"""

from __future__ import annotations

from dataclasses import dataclass

from dcplace.optimizer.studies.outages import AT_RISK_TOL_TOK_S, OutageTable
from dcplace.reports.layers import PlanLayers
from dcplace.reports.report import EXTRA_SECTIONS, Paragraphs, Section, Table
from dcplace.reports.style import short_name, tok_s_text

SITE_COLUMNS = ["Site lost", "Served there", "Re-served elsewhere", "At risk", "Regions at risk", "Fallback RTT (mean, all classes)",
                "Training jobs stalled", "Training job-days at risk", "Meets policy"]
SITE_NUMERIC = [False, True, True, True, False, True, False, True, False]
REGION_COLUMNS = ["Site lost", "Region", "Class", "Lost", "At risk", "RTT before", "Fallback RTT", "Failover budget"]
REGION_NUMERIC = [False, False, False, True, True, True, True, True]


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} ms"


def site_rows(table: OutageTable, top_regions: int = 3) -> tuple[list[str], list[list[str]], list[bool]]:
    """One row per open site: what its loss costs."""
    rows = []
    for o in sorted(table.outages, key=lambda o: (-o.at_risk_total_tok_s, -o.gpu_days_at_risk, o.site)):
        risky = o.regions_at_risk()
        named = ", ".join(f"{r.region_name} ({_class(table, r.workload)})" for r in risky[:top_regions])
        if len(risky) > top_regions:
            named += f" and {len(risky) - top_regions} more"
        jobs = ", ".join(_job_text(j) for j in o.jobs)
        policy = "—" if o.meets_policy is None else "yes" if o.meets_policy else "NO"
        rows.append([o.name, tok_s_text(o.lost_total_tok_s), tok_s_text(sum(o.reserved_tok_s.values())),
                     tok_s_text(o.at_risk_total_tok_s), named or "none", _ms(o.fallback_rtt_ms), jobs or "none",
                     f"{o.training_days_at_risk:,.1f}", policy])
    return SITE_COLUMNS, rows, SITE_NUMERIC


def _class(table: OutageTable, workload: str) -> str:
    return short_name(table.class_name(workload))


def _job_text(j) -> str:
    if j.troughs_share is not None:
        return f"{j.name} (in its troughs: {j.troughs_share:.0%} of its GPU-hours)"
    return f"{j.name}{' (standby ' + j.standby_site + ')' if j.standby_site else ''}"


def region_rows(table: OutageTable, limit: int = 40) -> tuple[list[str], list[list[str]], list[bool]]:
    """The (lost site, region, class) with demand at risk, largest first."""
    found = [(o, r) for o in table.outages for r in o.regions_at_risk()]
    found.sort(key=lambda pair: -pair[1].at_risk_tok_s)
    rows = [[o.name, r.region_name, _class(table, r.workload), tok_s_text(r.lost_tok_s), tok_s_text(r.at_risk_tok_s),
             _ms(r.normal_rtt_ms), _ms(r.fallback_rtt_ms), _ms(r.failover_budget_ms)] for o, r in found[:limit]]
    return REGION_COLUMNS, rows, REGION_NUMERIC


# `dcplace outages` on a terminal. Headers are broken where a narrow column may break them (a numeric
# column is as wide as its widest header line), and on a narrow terminal whole columns are left out,
# first to last in the drop order, as `solve` leaves out its own: the lost site and what is at risk stay.
TERMINAL_HEADERS = {"Served there": "Served\nthere", "Re-served elsewhere": "Re-served\nelsewhere",
                    "Fallback RTT (mean, all classes)": "Fallback RTT\n(mean, all\nclasses)",
                    "Training job-days at risk": "Training\njob-days\nat risk", "Meets policy": "Meets\npolicy",
                    "RTT before": "RTT\nbefore", "Fallback RTT": "Fallback\nRTT", "Failover budget": "Failover\nbudget"}
SITE_DROP_ORDER = ["Fallback RTT (mean, all classes)", "Re-served elsewhere", "Served there", "Training jobs stalled",
                   "Meets policy", "Regions at risk", "Training job-days at risk"]
REGION_DROP_ORDER = ["RTT before", "Lost", "Failover budget", "Fallback RTT", "Class"]
# The narrowest a list of names is shown: a name and its class over a line or two, not a word a line
# (the narrow terminal leaves other columns out first)
NAME_LIST_MIN_WIDTH = 24
NAME_LISTS = ("Regions at risk", "Training jobs stalled")


@dataclass(frozen=True)
class TerminalColumn:
    header: str  # broken where a narrow column may break it
    cells: list[str]
    numeric: bool
    min_width: int = 0  # a text column's narrowest (0: as wide as its longest word allows)


@dataclass(frozen=True)
class TerminalTable:
    """One table of `dcplace outages`: its title, columns, the headers in the order a narrow terminal
    leaves them out, and where every column can be read instead."""

    title: str
    columns: list[TerminalColumn]
    drop_order: list[str]
    full_table: str


def terminal_tables(table: OutageTable, regions: int = 20) -> list[TerminalTable]:
    """The tables `dcplace outages` prints: single-site losses, then (when `regions` > 0) the `regions`
    largest (lost site, region, class) with demand at risk. Without a policy, 'Meets policy' is all
    '—' and goes first."""
    def made(title, rows_of, drop_order, full_table):
        columns, rows, numeric = rows_of
        if not rows:
            return None
        headed = [TerminalColumn(TERMINAL_HEADERS.get(h, h), [row[i] for row in rows], numeric[i],
                                 NAME_LIST_MIN_WIDTH if h in NAME_LISTS else 0) for i, h in enumerate(columns)]
        return TerminalTable(title, headed, [TERMINAL_HEADERS.get(h, h) for h in drop_order], full_table)

    site_order = SITE_DROP_ORDER if table.survive_site_loss else ["Meets policy", *(h for h in SITE_DROP_ORDER if h != "Meets policy")]
    found = [made("Single-site losses", site_rows(table), site_order,
                  "the report's section 'What losing a site costs' (dcplace report) and the GIS export's outage_* fields "
                  "(dcplace export)"),
             made("Demand at risk", region_rows(table, regions) if regions else ([], [], []), REGION_DROP_ORDER,
                  "this command's output on a wider terminal (COLUMNS=160)")]
    return [t for t in found if t is not None]


def summary_lines(table: OutageTable) -> list[str]:
    """What the table says, in a few sentences."""
    out = []
    n = len(table.outages)
    worst = table.worst()
    if table.survive_site_loss:
        policy = ", ".join(f"{_class(table, w)} {a:.0%}" for w, a in sorted(table.survive_site_loss.items()))
        verdict = ("every single-site loss keeps it" if table.secure
                   else "some single-site losses break it (rows marked NO)")
        out.append(f"Policy: the classes {policy} of demand must survive the loss of any one open site; {verdict}.")
    else:
        out.append("The scenario asks no class to survive a site loss (policies.survive_site_loss); the table shows what "
                   "each loss would cost today.")
    if worst is not None and worst.at_risk_total_tok_s > 0:
        out.append(f"Of the {n} open sites, losing {worst.name} puts the most at risk: {tok_s_text(worst.at_risk_total_tok_s)} "
                   f"of {tok_s_text(worst.lost_total_tok_s)} it serves find no spare capacity within the failover budgets.")
        uncovered = sorted({w for o in table.outages for w, v in o.at_risk_tok_s.items() if v > AT_RISK_TOL_TOK_S and w not in table.survive_site_loss})
        if table.survive_site_loss and uncovered:
            share = sum(v for o in table.outages for w, v in o.at_risk_tok_s.items() if w in uncovered) \
                / max(sum(o.at_risk_total_tok_s for o in table.outages), 1e-9)
            out.append(f"{share:.0%} of the load at risk over all losses is {', '.join(_class(table, w) for w in uncovered)}, "
                       "which the policy does not ask to survive; a loss breaks the policy only where a class it names "
                       "is short (Meets policy).")
    elif n:
        out.append(f"Losing any one of the {n} open sites leaves no demand unserved within the failover budgets.")
    days = sum(o.training_days_at_risk for o in table.outages)
    if days:
        out.append(f"Training: a lost site stalls its jobs for {table.site_outage_days:g} days without a standby site, "
                   f"{table.standby_resume_days:g} with one; an interruptible job loses the GPU-hours the site's troughs gave "
                   "it for the outage. Job-days add up over the jobs a loss stalls.")
    return out


REPORT_REGION_ROWS = 15  # the report shows the largest; the command lists them all


def outages_section(layers: PlanLayers) -> Section | None:
    """The report's resilience section: what losing each open site costs."""
    table = layers.outages
    if not table.outages:
        return None
    columns, rows, numeric = site_rows(table)
    blocks = [Paragraphs(summary_lines(table)),
              Table("outages", columns, rows, numeric, flagged=[row[-1] == "NO" for row in rows],
                    caption="Losing one open site: tok/s left unserved, where its users fall back to and the training it stalls",
                    note="Re-served: by the other sites' spare capacity (built minus their own load) within each region's "
                    "failover budget, shortest round trips first (an LP per lost site). Fallback RTT: the round trip of what is "
                    "re-served, weighted by tok/s over all classes; each region's own budget is in the next table. docs/resilience.md.")]
    rcolumns, rrows, rnumeric = region_rows(table, limit=REPORT_REGION_ROWS)
    if rrows:
        total = sum(len(o.regions_at_risk()) for o in table.outages)
        shown = f"the largest {len(rrows)} of {total:,}" if total > len(rrows) else f"all {total}"
        blocks.append(Table("outage-regions", rcolumns, rrows, rnumeric, caption="Regions with demand at risk when a site is lost",
                            note=f"Regions with demand at risk, largest first: {shown} (every row: `dcplace outages PLAN`)."))
    return Section("resilience", "What losing a site costs", blocks)


if outages_section not in EXTRA_SECTIONS:
    EXTRA_SECTIONS.append(outages_section)

__all__ = ["outages_section", "site_rows", "region_rows", "summary_lines"]
