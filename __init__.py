"""dcplace: where AI compute goes. The public API, one import away:

    import dcplace
    scenario = dcplace.load_scenario()                 # the embedded default, or a YAML path
    plan = dcplace.solve(scenario, dcplace.SolveOptions(time_limit_s=120))
    plan, report = dcplace.solve_to_folder(scenario, "plan")
    today = dcplace.solve(dcplace.with_footprint(scenario, "footprint.csv"))  # the as-is baseline: today's racks held
    dcplace.check_plan_folder("plan").ok

Step by step (what `solve` does): `build_index` -> `build_model` -> `to_highs` / `to_pyomo`
-> solve -> `extract`. In memory: `Scenario.from_frames(...)`, `scenario_from_cost_matrix(...)` in;
`plan.frames()` (pandas) and `plan_layers(plan, scenario)` (GeoPandas) out.

The folders of the repository are its subpackages: models/ (dcplace.models), optimizer/
(dcplace.optimizer), reports/ (dcplace.reports), data/ (dcplace.data), cli.py (dcplace.cli).
"""

from dcplace.models import (InputProblem, Scenario, ScenarioError, export_default, load_scenario, scenario_from_cost_matrix,
                            scenario_from_frames, with_footprint, write_scenario)
from dcplace.models.outputs import OutputRefused
from dcplace.models.plan import Plan, read_plan
from dcplace.models.schema import scenario_json_schema
from dcplace.optimizer.checker import CheckReport, check_plan_folder
from dcplace.optimizer.model.formulation import build_model
from dcplace.optimizer.model.index import build_index
from dcplace.optimizer.solvers.pyomo_model import to_pyomo
from dcplace.optimizer.solvers.highs_model import to_highs
from dcplace.optimizer.solving.extract import extract
from dcplace.optimizer.solving.pipeline import PlanCheckFailed, solve_to_folder
from dcplace.optimizer.solving.solve import InfeasibleScenario, NoPlanFound, SolveOptions, solve

__all__ = [
    "CheckReport", "InfeasibleScenario", "InputProblem", "NoPlanFound", "OutputRefused", "Plan", "PlanCheckFailed",
    "Scenario", "ScenarioError", "SolveOptions", "build_index", "build_model", "check_plan_folder", "export_default",
    "extract", "load_scenario", "plan_layers", "read_plan", "scenario_from_cost_matrix", "scenario_from_frames",
    "scenario_json_schema", "solve", "solve_to_folder", "to_highs", "to_pyomo", "with_footprint", "write_scenario",
]


def __getattr__(name: str):
    """`plan_layers` loads geopandas and pyproj on first use (PEP 562), not on `import dcplace`."""
    if name == "plan_layers":
        from dcplace.reports.layers import plan_layers

        globals()[name] = plan_layers
        return plan_layers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
