"""The model: index sets, costs, latency and the formulation, written into a LinearModel.

Imports the domain (dcplace.models) and nothing of the solvers: a reader can study the
mathematics here without any solver installed.
"""
