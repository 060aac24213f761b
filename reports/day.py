"""The day (issue 15, the clock): the report's section on load by UTC hour at each site and
cloud region, what is owned and what is rented, and the training the troughs absorbed.

Every figure comes from plan.json (`hourly`, `backfill`, `rentals`, `rent_assignments`,
`clock`, the KPIs) and the plan's inputs; nothing is re-solved. With the clock off and no
cloud regions the section is left out and every other output is as before.

    section = day_section(load_plan_layers("plan"))
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from dcplace.models.plan import Plan
from dcplace.models.records import Scenario
from dcplace.reports.layers import PlanLayers
from dcplace.reports.mpl import plt
from dcplace.reports.report import EXTRA_SECTIONS, Block, Image, Paragraphs, Section, Table, _png
from dcplace.reports.style import DAY_COLOURS, money, short_name, tok_s_text
from dcplace.reports.economics import HOURS, PlaceDay, class_economics, clock_facts, place_days, rental_by_use
from dcplace.reports.summary import clock_sentences

BANDS = ((0, 6), (6, 12), (12, 18), (18, 24))  # UTC hour bands of the utilisation table
MAX_OWNED_PANELS, MAX_RENTED_PANELS, PANEL_COLUMNS = 8, 4, 4


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def day_figure(days: list[PlaceDay]) -> tuple[Figure, int]:
    """Small multiples of the day at the largest owned sites and cloud regions: GPUs busy
    serving and lent to training under the GPUs installed, GPUs rented; returns the figure and
    the number of places shown."""
    shown = [d for d in days if d.kind == "owned"][:MAX_OWNED_PANELS] + [d for d in days if d.kind == "rented"][:MAX_RENTED_PANELS]
    n = max(len(shown), 1)
    cols = min(PANEL_COLUMNS, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(11.0, 0.6 + 2.05 * rows), dpi=100, squeeze=False)
    x = np.arange(HOURS + 1)
    for ax, d in zip(axes.flat, shown):
        step = lambda v: np.append(v, v[-1])  # noqa: E731 - a value per hour, drawn as steps to hour 24
        if d.kind == "owned":
            ax.fill_between(x, 0, step(d.serving_gpus), step="post", color=DAY_COLOURS["serving"], alpha=0.85, lw=0)
            ax.fill_between(x, step(d.serving_gpus), step(d.serving_gpus + d.lent_gpus), step="post", color=DAY_COLOURS["lent"],
                            alpha=0.85, lw=0)
            ax.step(x, np.full(HOURS + 1, d.installed_gpus), where="post", color=DAY_COLOURS["installed"], lw=1.2)
            top = max(d.installed_gpus, float((d.serving_gpus + d.lent_gpus).max()), 1.0)
            busy = d.use(0, HOURS)
            note = f"{d.installed_gpus:,.0f} GPUs, {busy:.0%} busy (day mean)" if busy is not None else ""
        else:
            ax.fill_between(x, 0, step(d.serving_gpus), step="post", color=DAY_COLOURS["rented"], alpha=0.9, lw=0)
            top = max(float(d.serving_gpus.max()), 1.0)
            note = f"rented, at most {d.serving_gpus.max():,.0f} GPUs"
        ax.set_title(_short(d.name) + (" (cloud)" if d.kind == "rented" else ""), loc="left", fontsize=9, fontweight="bold",
                     parse_math=False, pad=13)
        ax.text(0.0, 1.015, note, transform=ax.transAxes, fontsize=8, va="bottom", ha="left", color="#4a5560", parse_math=False)
        ax.set_xlim(0, HOURS)
        ax.set_ylim(0, top * 1.12)
        ax.set_xticks([0, 6, 12, 18, 24])
        ax.tick_params(labelsize=8)
        ax.axvline(d.peak_hour + 0.5, color="#5a6570", lw=0.6, ls=":")
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="y", alpha=0.25)
    for ax in list(axes.flat)[len(shown):]:
        ax.set_axis_off()
    for ax in axes[-1]:
        if ax.axison:
            ax.set_xlabel("hour of the day, UTC", fontsize=8)
    for ax in axes[:, 0]:
        if ax.axison:
            ax.set_ylabel("GPUs", fontsize=8)
    owned, rented = [d for d in shown if d.kind == "owned"], [d for d in shown if d.kind == "rented"]
    handles = []
    if owned:
        handles += [Patch(color=DAY_COLOURS["serving"], label="GPUs busy serving"),
                    Line2D([], [], color=DAY_COLOURS["installed"], lw=1.2, label="inference GPUs installed")]
    if any(d.lent_gpus.max() > 0 for d in owned):
        handles.append(Patch(color=DAY_COLOURS["lent"], label="GPUs lent to interruptible training"))
    if rented:
        handles.append(Patch(color=DAY_COLOURS["rented"], label="GPUs rented (cloud region)"))
    handles.append(Line2D([], [], color="#5a6570", lw=0.6, ls=":", label="busiest hour (most GPUs busy)"))
    fig.legend(handles=handles, loc="upper left", ncols=len(handles), fontsize=8, frameon=False, bbox_to_anchor=(0.0, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.32 / fig.get_figheight()), h_pad=1.6)
    return fig, len(shown)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.0%}"


def use_rows(days: list[PlaceDay]) -> tuple[list[str], list[list[str]], list[bool]]:
    """GPUs busy by UTC hour band per place, its busiest hour, peak tok/s, GPU-hours lent."""
    columns = ["Site or cloud region", "Owned or rented", "Inference GPUs, installed or rented", "Peak load", "Busiest hour UTC (local)", "Busy at busiest hour",
               "Busy over the day"] + [f"{a:02d}–{b:02d} UTC" for a, b in BANDS] + ["Lent to training, GPU-hours a day (physical GPUs)"]
    rows = []
    for d in days:
        h = d.peak_hour
        rows.append([d.name, "owned" if d.kind == "owned" else "rented", f"{d.gpus:,.0f}", tok_s_text(d.peak_tok_s),
                     f"{h:02d}:00 ({d.local_time(h)})", _pct(d.use(h, h + 1)), _pct(d.use(0, HOURS))]
                    + [_pct(d.use(a, b)) for a, b in BANDS] + [f"{d.lent_gpu_hours_per_day:,.0f}" if d.kind == "owned" else "—"])
    numeric = [False, False] + [True] * 10
    # Columns that would say nothing: "owned" on every row, no GPU lent anywhere.
    keep = [j for j in range(len(columns))
            if not (j == 1 and all(d.kind == "owned" for d in days)) and not (j == len(columns) - 1 and not any(d.lent_gpu_hours_per_day > 0 for d in days))]
    return [columns[j] for j in keep], [[r[j] for j in keep] for r in rows], [numeric[j] for j in keep]


def build_or_rent_rows(plan: Plan, scenario: Scenario) -> tuple[list[str], list[list[str]], list[bool]]:
    """Per class: peak tok/s served from owned sites and from cloud regions, owned and rented cost."""
    rented = rental_by_use(plan)
    owned_tok: dict[str, float] = defaultdict(float)
    cloud_tok: dict[str, float] = defaultdict(float)
    for a in plan.assignments:
        owned_tok[a.workload] += a.served_tok_s
    for a in plan.rent_assignments:
        cloud_tok[a.workload] += a.served_tok_s
    columns = ["Use", "Peak tok/s, owned sites", "Peak tok/s, cloud", "Owned / yr", "Rented / yr", "Rented share of cost",
               "$ per M tokens"]
    rows = []
    total_owned = total_rented = 0.0
    for c in class_economics(plan, scenario):
        if not (owned_tok[c.workload] or cloud_tok[c.workload] or c.cost_usd_per_year):
            continue
        r = rented.get(c.workload, 0.0)
        own = c.cost_usd_per_year - r
        total_owned, total_rented = total_owned + own, total_rented + r
        rows.append([c.name, tok_s_text(owned_tok[c.workload]), tok_s_text(cloud_tok[c.workload]), money(own), money(r),
                     f"{r / c.cost_usd_per_year:.0%}" if c.cost_usd_per_year > 0 else "—",
                     f"${c.usd_per_m_tokens:,.3f}" if c.tokens_per_year else "—"])
    train_rent = rented.get("training", 0.0)
    if train_rent > 0:
        total_rented += train_rent
        rows.append(["Training on rented GPUs", "—", "—", "—", money(train_rent), "", "—"])
    rows.append(["Total", "", "", money(total_owned), money(total_rented),
                 f"{total_rented / (total_owned + total_rented):.0%}" if total_owned + total_rented > 0 else "—", ""])
    return columns, rows, [False, True, True, True, True, True, True]


KIND_TEXT = {"on_demand": "on demand, by the hour", "reserved": "reserved, every hour", "training": "reserved, for a job"}


def rental_rows(plan: Plan, scenario: Scenario) -> tuple[list[str], list[list[str]], list[bool]]:
    """What is rented where: per cloud region, chip, kind and class (or job)."""
    clouds = {q.id: q for q in scenario.cloud_regions}
    chips = {c.id: short_name(c.name) for c in scenario.catalog.chips}
    classes = {w.id: w.name for w in scenario.catalog.workloads}
    jobs = {j.id: j.name for j in scenario.jobs}
    groups: dict[tuple, dict] = {}
    for ln in plan.rentals:
        key = (ln.cloud, ln.chip, ln.kind, ln.job if ln.kind == "training" else ln.workload)
        g = groups.setdefault(key, {"by_hour": defaultdict(float), "gpu_h": 0.0, "usd": 0.0})
        g["by_hour"][ln.hour_utc] += ln.gpus
        g["gpu_h"] += ln.gpu_hours_per_year
        g["usd"] += ln.usd_per_year
    columns = ["Cloud region", "Country", "Chip", "Rented", "For", "GPUs at peak", "GPU-hours / yr", "$ per GPU-hour", "Cost / yr"]
    rows = []
    for (cloud, chip, kind, what), g in sorted(groups.items(), key=lambda kv: (-kv[1]["usd"], kv[0])):
        q = clouds.get(cloud)
        peak = max(g["by_hour"].values()) if kind == "on_demand" else sum(g["by_hour"].values())
        rows.append([q.name if q else cloud, q.country if q else "", chips.get(chip, chip), KIND_TEXT.get(kind, kind),
                     (jobs.get(what, what) if kind == "training" else classes.get(what, what)) or "—", f"{peak:,.0f}",
                     f"{g['gpu_h']:,.0f}", f"${g['usd'] / g['gpu_h']:,.2f}" if g["gpu_h"] else "—", money(g["usd"])])
    rows.append(["Total", "", "", "", "", f"{plan.kpis.get('rented_gpus_peak', 0.0):,.0f}", f"{sum(g['gpu_h'] for g in groups.values()):,.0f}",
                 "", money(plan.kpis.get("rental_usd_per_year", sum(g["usd"] for g in groups.values())))])
    return columns, rows, [False, False, False, False, False, True, True, True, True]


def trough_rows(plan: Plan, scenario: Scenario) -> tuple[list[str], list[list[str]], list[bool]]:
    """Training in the troughs: per job and site, the hours used and the GPU-hours absorbed."""
    names = {s.id: s.name for s in plan.sites}
    chips = {c.id: short_name(c.name) for c in scenario.catalog.chips}
    jobs = {j.id: j for j in scenario.jobs}
    groups: dict[tuple, dict] = {}
    for b in plan.backfill:
        if b.gpus <= 1e-9:
            continue
        g = groups.setdefault((b.job, b.site, b.chip), {"hours": defaultdict(float), "gpus": 0.0, "h100": 0.0})
        g["hours"][b.hour_utc] = b.weight_h
        g["gpus"] = max(g["gpus"], b.gpus)
        g["h100"] += b.h100_gpu_hours_per_day
    columns = ["Job", "Site", "Chip", "Hours of the day used", "GPUs lent at most", "H100-eq GPU-hours / day", "Share of the job's need"]
    rows = []
    for (job, site, chip), g in sorted(groups.items(), key=lambda kv: (-kv[1]["h100"], kv[0])):
        need = jobs[job].daily_h100_hours if job in jobs else 0.0
        rows.append([jobs[job].name if job in jobs else job, names.get(site, site), chips.get(chip, chip),
                     f"{sum(g['hours'].values()):,.0f}", f"{g['gpus']:,.0f}", f"{g['h100']:,.0f}", f"{g['h100'] / need:.0%}" if need else "—"])
    rows.append(["Total", "", "", "", "", f"{plan.kpis.get('trough_h100_gpu_hours_per_day', 0.0):,.0f}", ""])
    return columns, rows, [False, False, False, True, True, True, True]


def _which(shown: int, total: int, noun: str) -> str:
    plural = noun + ("s" if total != 1 else "")
    return f"all {total} {plural}" if shown >= total else f"the largest {shown} of {total} {plural}"


def day_section(layers: PlanLayers) -> Section | None:
    """"The day": None unless the plan has the clock on."""
    plan, scenario = layers.plan, layers.scenario
    facts = clock_facts(plan, scenario)
    if facts is None or not facts.on:
        return None
    blocks: list[Block] = [Paragraphs(clock_sentences(facts) or ["The plan rents no capacity and has no clock."], "lead")]
    if facts.on and facts.peak_sum_tok_s > 0 and facts.saved_gpus >= 0.5:
        blocks.append(Paragraphs([
            f"In tok/s: the owned sites carry {tok_s_text(facts.coincident_tok_s)} at their busiest hours (each site and class "
            f"at its own) against {tok_s_text(facts.peak_sum_tok_s)} for the sum of the peaks, {facts.saved_share:.1%} less"
            + (" (" + ", ".join(f"{name} {v:.1%}" for name, v in facts.saved_share_by_class.items()) + ")"
               if len(facts.saved_share_by_class) > 1 else "")
            + f"; they hold {tok_s_text(facts.capacity_tok_s)} of capacity at the target utilization. A GPU serves far more "
            "tok/s of a light class than of a reasoning one, so the saving is stated in GPUs and MW: per site and class, the "
            "tok/s the peak sum adds times the site's GPUs (kW) per tok/s of capacity."], "note"))
    days = place_days(plan, scenario)
    if days:
        fig, shown = day_figure(days)
        try:
            png = _png(fig, 170)
        finally:
            plt.close(fig)
        owned = sum(d.kind == "owned" for d in days)
        rented = len(days) - owned
        lent = any(d.lent_gpus.max() > 0 for d in days if d.kind == "owned")
        shown_owned = min(owned, MAX_OWNED_PANELS)
        shown_rented = shown - shown_owned
        blocks.append(Image("day", "The day at the largest sites and cloud regions: GPUs busy serving, lent to training, "
                            "installed and rented, by UTC hour", max_height=430, png=png))
        hours = facts.hours
        how = ("each of the 24 UTC hours" if hours >= 24 else
               f"{hours} represented blocks of UTC hours, each carrying its busiest hour "
               f"(the blocks overstate {plan.clock.get('block_overstatement', 0.0):.1%} of the day's served tokens)")
        blocks.append(Paragraphs([
            "Shown: " + _which(shown_owned, owned, "owned site") + (" and " + _which(shown_rented, rented, "cloud region") if rented else "")
            + f" by GPUs (every one in the table below); the plan represents the day by {how}. "
            + ("Owned: GPUs busy serving (green)" + (" and lent to interruptible training (orange)" if lent else "")
               + " under the inference GPUs installed (line)" if owned else "")
            + ("; rented: GPUs rented in each hour (blue)" if rented else "") + "."], "note"))
        columns, rows, numeric = use_rows(days)
        blocks.append(Table("day-use", columns, rows, numeric, caption="The day at each site and cloud region: GPUs busy by UTC band"))
        blocks.append(Paragraphs([
            "Busy: GPUs busy serving as a share of the inference GPUs installed (all classes together; GPUs add up across "
            "classes, tok/s do not), mean over the hours of each UTC band"
            + ("; a cloud region: GPUs rented as a share of the most it rents at once" if rented else "")
            + ". The busiest hour has the most GPUs busy; local time is the standard time (no daylight saving) of the place's "
            "time zone, as the model reads the regions' profiles. "
            "Peak load: the most tok/s served in one hour."
            + (" Lent to training: GPU-hours a day that interruptible jobs run on the site's idle inference GPUs." if lent else "")],
            "note"))
    return Section("day", "The day", blocks, new_page=True)


def rent_section(layers: PlanLayers) -> Section | None:
    """"Build or rent": per class owned against rented cost, and what is rented where; only for a
    plan with the clock or rented capacity whose scenario offers cloud regions."""
    plan, scenario = layers.plan, layers.scenario
    facts = clock_facts(plan, scenario)
    if facts is None or not (plan.rentals or plan.rent_assignments or scenario.cloud_regions):
        return None
    if not (plan.rentals or plan.rent_assignments):
        return Section("rent", "Build or rent", [Paragraphs([
            f"The plan rents nothing from the {len(scenario.cloud_regions)} cloud regions offered: at their prices, owned racks "
            "serve every class's load for less (Per-workload economics has each class's cost)."], "body")])
    blocks: list[Block] = [Paragraphs([t for t in clock_sentences(facts) if "rents GPU-hours" in t]
                                      or ["The plan serves demand from cloud regions."], "body")]
    columns, rows, numeric = build_or_rent_rows(plan, scenario)
    blocks.append(Table("day-build-or-rent", columns, rows, numeric, caption="Build or rent, per class: owned against rented cost"))
    blocks.append(Paragraphs(["Per class: owned is the class's racks (chips, cooling, idle and busy energy, colocation) and "
                              "transport; rented is GPU-hours bought from cloud regions. Site and cooling-zone fixed costs are "
                              "left out, as in Per-workload economics."], "note"))
    if plan.rentals:
        columns, rows, numeric = rental_rows(plan, scenario)
        blocks.append(Paragraphs(["What is rented where:"], "body"))
        blocks.append(Table("day-rentals", columns, rows, numeric, caption="What is rented where"))
        blocks.append(Paragraphs(["On demand pays only for the GPU-hours of the hours it is used; reserved pays for every hour "
                                  "of the year. GPUs at peak: the most rented at once (the total: across all cloud regions in "
                                  "the same hour)."], "note"))
    return Section("rent", "Build or rent", blocks)


def trough_section(layers: PlanLayers) -> Section | None:
    """"Training in the troughs": GPU-hours a day interruptible jobs ran on idle inference GPUs."""
    plan, scenario = layers.plan, layers.scenario
    if not any(b.gpus > 1e-9 for b in plan.backfill):
        return None
    hours = plan.kpis.get("trough_h100_gpu_hours_per_day", 0.0)
    columns, rows, numeric = trough_rows(plan, scenario)
    return Section("troughs", "Training in the troughs", [
        Paragraphs([f"{hours:,.0f} H100-equivalent GPU-hours a day of interruptible training run on inference GPUs the served "
                    f"load leaves idle: about {hours / HOURS:,.0f} H100-equivalent GPUs busy around the clock that need no racks "
                    "of their own (the day's panels show the hours, in orange)."], "body"),
        Table("day-troughs", columns, rows, numeric, caption="Interruptible training on idle inference GPUs, by site"),
    ])


for _build in (day_section, rent_section, trough_section):
    if _build not in EXTRA_SECTIONS:
        EXTRA_SECTIONS.append(_build)

__all__ = ["PlaceDay", "day_figure", "day_section", "rent_section", "trough_section", "place_days", "use_rows", "build_or_rent_rows", "rental_rows", "trough_rows"]
