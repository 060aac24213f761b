"""Latency, the placement MIP, solving, plan extraction and the independent checker."""

from optimizer.solve import InfeasibleScenario, NoPlanFound, SolveOptions, solve

__all__ = ["InfeasibleScenario", "NoPlanFound", "SolveOptions", "solve"]
