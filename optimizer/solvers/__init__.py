"""Solvers: the model handed to HiGHS (directly) or Pyomo (for OR-Tools and inspection),
the solver registry, the LP-rounding warm start and the pricing of serving pairs.

Imports the model layer and the domain; nothing of solving, studies or reports.
"""
