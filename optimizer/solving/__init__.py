"""Solving one scenario: prechecks, the solve, plan extraction, the diagnosis of an
infeasible scenario, and the pipeline that writes and checks a plan folder."""
