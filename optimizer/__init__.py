"""The optimizer, in layers that import one way (tests/test_layers.py keeps it so):

    model    index sets, costs, latency, formulation (no solver import)
    solvers  HiGHS and Pyomo forms, the solver registry, warm start, pricing
    solving  precheck, solve, extract, diagnose, pipeline (one scenario)
    studies  batch runs and trade-off curves (many scenarios)
    check    the independent checker: imports nothing of dcplace
"""

from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions, solve

__all__ = ["InfeasibleScenario", "NoPlanFound", "SolveOptions", "solve"]
