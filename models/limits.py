"""How large a scenario dcplace can plan on this machine (issue 50 item 6).

The optimizer's index (optimizer.model.index) holds, for every region-site pair, its distance
and round trip (float64) and whether each class may be served and re-served over it: dense
tables over regions x sites. Measured at 526 regions x 3,000 and x 10,000 sites: about 350
bytes a pair at the peak of the build. A scenario whose pairs need more memory than the machine
has available is refused before its rows are validated, with the number of sites it can hold
and how to cut the list, instead of failing minutes later on an allocation (a 1,000,000-row
sites table: "MemoryError: Unable to allocate 3.92 GiB" after 2 min 19 s at 5.2 GB).
"""

from __future__ import annotations

import os
import resource

from dcplace.models.errors import InputProblem

INDEX_BYTES_PER_PAIR = 400  # the measured ~350 bytes a region-site pair, with room for the solve's own use
MEMORY_SHARE = 0.8  # of the available memory, for the index: the rest for Python, the rows and the model


def available_memory_bytes() -> int | None:
    """Memory this process may still take: the system's available memory (/proc/meminfo), and
    at most its address-space limit (ulimit -v) less what it has; None where unknown."""
    found = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        try:
            with open("/proc/self/statm") as fh:
                used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            used = 0
        found.append(max(soft - used, 0))
    return min(found) if found else None


def size_problem(n_regions: int, n_sites: int, sites_label: str, available_bytes: int | None = None) -> InputProblem | None:
    """A problem naming the sites table when regions x sites need more memory than is available
    (None when they fit, or when the available memory cannot be known)."""
    available = available_memory_bytes() if available_bytes is None else available_bytes
    pairs = n_regions * n_sites
    need = pairs * INDEX_BYTES_PER_PAIR
    if available is None or need <= MEMORY_SHARE * available:
        return None
    most = int(MEMORY_SHARE * available / INDEX_BYTES_PER_PAIR / max(n_regions, 1))
    return InputProblem(
        sites_label, None, None,
        f"{n_regions:,} regions x {n_sites:,} sites are {pairs:,} region-site pairs; planning holds each pair's distance, "
        f"round trip and eligibility in memory (about {INDEX_BYTES_PER_PAIR} bytes a pair: {need / 1e9:,.1f} GB) and this "
        f"machine has {available / 1e9:,.1f} GB available, enough for about {most:,} sites with these {n_regions:,} regions.",
        f"cut the sites list to at most {most:,} rows (keep the candidates that matter: by country, power or price), or "
        "plan fewer regions, or split the world into separate scenarios (one per continent), or run on a machine with "
        "more memory.")
