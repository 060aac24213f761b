"""The one place that chooses matplotlib's backend: every module of dcplace that draws
imports pyplot from here (`from dcplace.reports.mpl import plt`).

Agg renders to files with no display, so maps and reports work on servers, in CI and over
SSH; it is selected before pyplot is first imported by dcplace.
"""

from __future__ import annotations

import matplotlib

BACKEND = "Agg"

matplotlib.use(BACKEND)

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["BACKEND", "plt"]
