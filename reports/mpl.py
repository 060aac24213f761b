"""The one place that chooses matplotlib's backend: every module of dcplace that draws
imports pyplot from here (`from dcplace.reports.mpl import plt`).

Agg renders to files with no display, so maps and reports work on servers, in CI and over
SSH; it is selected before pyplot is first imported, unless the caller (a notebook) already
imported pyplot with a backend of its own.
"""

from __future__ import annotations

import sys

import matplotlib

BACKEND = "Agg"

if "matplotlib.pyplot" not in sys.modules:
    # A notebook that already drew with its own backend keeps it (savefig works with any);
    # a server, CI or a terminal gets Agg before pyplot is first imported.
    matplotlib.use(BACKEND)

import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["BACKEND", "plt"]
