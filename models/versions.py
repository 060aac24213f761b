"""Versions of dcplace and the packages a plan depends on: one helper for plans and benchmarks."""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata

PACKAGES = ("dcplace", "pyomo", "highspy", "ortools", "geopandas", "shapely", "networkx", "pandas", "numpy", "pydantic")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """name -> installed version ('not installed' when absent).

    Looked up once per process and set of names (`_looked_up`): reading ten packages'
    metadata took about 13 ms, paid by every solve's plan record (benchmarks/RESULTS.md,
    OR-Library section). What is installed does not change under a running process."""
    return dict(_looked_up(tuple(names)))


@lru_cache(maxsize=None)
def _looked_up(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    out = []
    for name in names:
        try:
            out.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            out.append((name, "not installed"))
    return tuple(out)


def versions_line(names: tuple[str, ...] = PACKAGES) -> str:
    """'dcplace 0.1.0, pyomo 6.10.1, ...' for a benchmark's header."""
    return ", ".join(f"{name} {version}" for name, version in package_versions(names).items())
