#!/usr/bin/env python3
"""Build /tmp/clockdata/profiles.csv: hourly demand shape (local time) per inference class.

Source: Microsoft Azure LLM inference trace 2024 (Azure/AzurePublicDataset,
AzureLLMInferenceDataset2024.md; DynamoLLM, Stojkovic et al., HPCA 2025), CC-BY 4.0.
  code trace: 2024-05-10 00:00 .. 2024-05-16 23:59:59 UTC, 16,803,695 requests
  conv trace: 2024-05-12 00:00 .. 2024-05-18 23:59:59 UTC, 27,303,999 requests
TIMESTAMP values carry an explicit +00:00 offset (UTC).

Two modes
---------
--raw DIR       (preferred; NOT what produced the delivered table) reads
                AzureLLMInferenceTrace_{code,conv}_1week.csv from DIR and counts
                requests / tokens per UTC hour exactly.
--notebook NB   (what produced the delivered table) the 1-week CSVs are only linked
                from the repository (Azure blob storage, not reachable from the build
                machine), so the per-minute series are DIGITISED from the PNG plots
                embedded in Microsoft's own notebook
                analysis/AzureLLMInferenceDataset2024.ipynb (repo commit
                b469a113cedca53ddc3bdea71a143dc4b7d8700c). Those plots are
                'invocations per minute' (cells 18) and 'input/output tokens per minute'
                (cell 19) computed by Microsoft from the full week-long CSVs.
                Get the notebook with:
                  git --git-dir <mirror> show b469a11:analysis/AzureLLMInferenceDataset2024.ipynb > nb.ipynb

Method (both modes): series per minute -> mean per UTC hour-of-day over the 7 days
(all days; weekday-only also reported) -> shift to local time with a fixed offset
(default UTC-4 = US Eastern Daylight Time, the offset in force in May 2024; ASSUMPTION,
the dataset docs do not state where users are) -> normalise so max = 1.0.

Digitisation: for every pixel column inside the axes, the pixels of the plotted line
(matplotlib default colours: C0 blue #1f77b4 = requests / input tokens, C1 orange
#ff7f0e = output tokens) are found; the column value is the mid-point of the line's
vertical extent, converted with a linear fit through the axis zero (bottom spine) and
the horizontal grid lines at the tick values read off the figure. Column centres are
mapped linearly between the left spine (first day 00:00 UTC) and right spine (day 8
00:00 UTC), as labelled on the figure's x axis.
"""
import argparse
import base64
import io
import json
import sys

import numpy as np
import pandas as pd

TZ_OFFSET_DEFAULT = -4  # US Eastern Daylight Time in May 2024 (assumption, see README)

# figure geometry checked by eye on the images at commit b469a11 (tick labels):
FIGS = {
    # key: (cell index, output image index within cell, t0 UTC, t1 UTC, y tick values of grid lines
    #       (bottom->top, excluding 0), legend mask (x0, x1, y0, y1) or None)
    "code_req": (18, 0, "2024-05-10", "2024-05-17", [1000, 2000, 3000, 4000, 5000, 6000], None),
    "conv_req": (18, 1, "2024-05-12", "2024-05-19", [1000, 2000, 3000, 4000, 5000], None),
    "code_tok": (19, 0, "2024-05-10", "2024-05-17",
                 [2e6, 4e6, 6e6, 8e6, 10e6, 12e6, 14e6, 16e6], (62, 175, 33, 92)),
    "conv_tok": (19, 1, "2024-05-12", "2024-05-19",
                 [1e6, 2e6, 3e6, 4e6, 5e6, 6e6, 7e6, 8e6], (425, 543, 33, 92)),
}


def nb_images(nb_path):
    nb = json.load(open(nb_path))
    out = {}
    for ci, c in enumerate(nb["cells"]):
        k = 0
        for o in c.get("outputs", []):
            if "data" in o and "image/png" in o["data"]:
                out[(ci, k)] = base64.b64decode(o["data"]["image/png"])
                k += 1
    return out


def digitise(png_bytes, t0, t1, yticks, legend_mask, colour):
    from PIL import Image
    a = np.asarray(Image.open(io.BytesIO(png_bytes)).convert("RGB")).astype(int)
    H, W, _ = a.shape
    blk = a.sum(2) < 100
    srows = np.where(blk.sum(1) > W * 0.5)[0]
    scols = np.where(blk.sum(0) > H * 0.4)[0]
    ytop, ybot = srows.min(), srows.max()
    xl, xr = scols.min(), scols.max()
    grey = (np.abs(a - 176) < 8).all(2)
    grows = np.where(grey[:, xl + 1:xr].sum(1) > (xr - xl) * 0.3)[0]
    grows = sorted(grows, reverse=True)  # bottom -> top
    if len(grows) != len(yticks):
        raise SystemExit(f"grid rows {grows} do not match ticks {yticks}")
    py = np.array([ybot] + list(grows), float)
    vy = np.array([0.0] + list(yticks))
    slope, icpt = np.polyfit(py, vy, 1)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    if colour == "blue":
        m = (b - r > 60) & (b - g > 20)
    else:  # orange
        m = (r - b > 100) & (r - g > 40)
    m[: ytop + 1, :] = False
    m[ybot:, :] = False
    if legend_mask:
        x0, x1, y0, y1 = legend_mask
        m[y0:y1, x0:x1] = False
    t0 = pd.Timestamp(t0, tz="UTC")
    t1 = pd.Timestamp(t1, tz="UTC")
    rows = []
    for c in range(xl + 1, xr):
        ys = np.where(m[:, c])[0]
        if len(ys) == 0:
            continue
        val = slope * (ys.min() + ys.max()) / 2.0 + icpt
        frac = (c + 0.5 - xl) / (xr - xl)
        rows.append((t0 + (t1 - t0) * frac, max(val, 0.0)))
    s = pd.Series([v for _, v in rows], index=pd.DatetimeIndex([t for t, _ in rows]))
    # drop the final column(s) after 23:59 of the last day (partial last minute)
    return s[s.index < t1]


def hourly_profile(s_per_min):
    """mean per UTC hour-of-day over all days, and over weekdays only."""
    df = pd.DataFrame({"v": s_per_min})
    df["hour"] = df.index.hour
    df["wd"] = df.index.day_of_week < 5
    allp = df.groupby("hour")["v"].mean()
    wdp = df[df.wd].groupby("hour")["v"].mean()
    return allp, wdp


def from_raw(raw_dir):
    series = {}
    for cls in ("code", "conv"):
        d = pd.read_csv(f"{raw_dir}/AzureLLMInferenceTrace_{cls}_1week.csv",
                        parse_dates=["TIMESTAMP"], date_format="mixed")
        d["m"] = d["TIMESTAMP"].dt.floor("min")
        g = d.groupby("m")
        series[f"{cls}_req"] = g.size().astype(float)
        series[f"{cls}_tok"] = g["ContextTokens"].sum() + g["GeneratedTokens"].sum()
    return series


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notebook")
    ap.add_argument("--raw")
    ap.add_argument("--tz-offset", type=int, default=TZ_OFFSET_DEFAULT)
    ap.add_argument("--out", default="/tmp/clockdata")
    ap.add_argument("--commit", default="b469a113cedca53ddc3bdea71a143dc4b7d8700c")
    args = ap.parse_args()

    if args.raw:
        series = from_raw(args.raw)
        how = "exact counts from the 1-week CSVs"
    elif args.notebook:
        imgs = nb_images(args.notebook)
        series = {}
        for key, (ci, k, t0, t1, ticks, mask) in FIGS.items():
            if key.endswith("_req"):
                series[key] = digitise(imgs[(ci, k)], t0, t1, ticks, mask, "blue")
            else:
                inp = digitise(imgs[(ci, k)], t0, t1, ticks, mask, "blue")
                outp = digitise(imgs[(ci, k)], t0, t1, ticks, mask, "orange")
                series[key] = inp.add(outp.reindex(inp.index, method="nearest"), fill_value=0)
        how = f"digitised from the per-minute plots in analysis/AzureLLMInferenceDataset2024.ipynb @ {args.commit[:7]}"
    else:
        sys.exit("give --raw DIR or --notebook NB")

    wl_name = {"conv": "chat", "code": "reasoning"}
    src = {
        "conv": ("Azure LLM inference trace 2024, conversation (AzureLLMInferenceTrace_conv_1week, "
                 "2024-05-12..18 UTC; Azure/AzurePublicDataset, CC-BY 4.0); requests/hour, 7-day mean; "),
        "code": ("STAND-IN: Azure LLM inference trace 2024, coding (AzureLLMInferenceTrace_code_1week, "
                 "2024-05-10..16 UTC; Azure/AzurePublicDataset, CC-BY 4.0) used for 'reasoning' - no public "
                 "reasoning-model trace with timestamps found; requests/hour, 7-day mean; "),
    }
    tzrule = f"local = UTC{args.tz_offset:+d} (US Eastern Daylight, assumption); {how}"
    out_rows, tok_rows, summary = [], [], []
    for cls in ("conv", "code"):
        for metric, rows in (("req", out_rows), ("tok", tok_rows)):
            allp, wdp = hourly_profile(series[f"{cls}_{metric}"])
            for lbl, p in (("all", allp), ("weekday", wdp)):
                summary.append(dict(trace=cls, metric=metric, days=lbl,
                                    peak_utc_hour=int(p.idxmax()), trough_utc_hour=int(p.idxmin()),
                                    peak_per_min=round(p.max(), 1), trough_per_min=round(p.min(), 1),
                                    peak_to_trough=round(p.max() / p.min(), 2)))
            loc = allp.copy()
            loc.index = (loc.index + args.tz_offset) % 24
            loc = loc.sort_index()
            norm = loc / loc.max()
            for h, v in norm.items():
                s = src[cls].replace("requests/hour", "tokens (context+generated)/hour") if metric == "tok" else src[cls]
                rows.append(dict(workload=wl_name[cls], local_hour=int(h), load=round(float(v), 3),
                                 source=s + tzrule))
    pd.DataFrame(out_rows).to_csv(f"{args.out}/profiles.csv", index=False)
    pd.DataFrame(tok_rows).to_csv(f"{args.out}/profiles_tokens.csv", index=False)
    sm = pd.DataFrame(summary)
    sm.to_csv(f"{args.out}/profiles_summary.csv", index=False)
    # UTC hour-of-day table, un-normalised, for remapping to another timezone
    utc = {}
    for cls in ("conv", "code"):
        for metric in ("req", "tok"):
            allp, wdp = hourly_profile(series[f"{cls}_{metric}"])
            utc[f"{cls}_{metric}_per_min_all"] = allp.round(1)
            utc[f"{cls}_{metric}_per_min_weekday"] = wdp.round(1)
    pd.DataFrame(utc).rename_axis("utc_hour").to_csv(f"{args.out}/profiles_utc_hourly.csv")
    print(sm.to_string())
    # validation hook: hourly request counts on 2024-05-10 UTC (code) for comparison with
    # the exact counts printed in a third-party notebook (see README)
    s = series["code_req"]
    v = s[(s.index >= "2024-05-10") & (s.index < "2024-05-10 10:00")]
    print("code 2024-05-10 UTC hours 0-9, digitised requests/hour:",
          (v.groupby(v.index.hour).mean() * 60).round(0).astype(int).tolist())


if __name__ == "__main__":
    main()
