"""Versions of dcplace and the packages a plan depends on: one helper for plans and benchmarks."""

from __future__ import annotations

from importlib import metadata

PACKAGES = ("dcplace", "pyomo", "highspy", "ortools", "geopandas", "shapely", "networkx", "pandas", "numpy", "pydantic")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """name -> installed version ('not installed' when absent)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def versions_line(names: tuple[str, ...] = PACKAGES) -> str:
    """'dcplace 0.1.0, pyomo 6.10.1, ...' for a benchmark's header."""
    return ", ".join(f"{name} {version}" for name, version in package_versions(names).items())
