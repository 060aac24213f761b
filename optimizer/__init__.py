"""Latency, the placement MIP, solving, plan extraction and the independent checker."""

from optimizer.solve import InfeasibleScenario, SolveOptions, solve

__all__ = ["InfeasibleScenario", "SolveOptions", "solve"]
