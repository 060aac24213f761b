"""The domain: validated records, the scenario file format, and the plan."""

from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.checks import scenario_warnings
from dcplace.models.costmatrix import scenario_from_cost_matrix
from dcplace.models.files import default_scenario_path, export_default, load_scenario, with_footprint, write_scenario
from dcplace.models.frames import scenario_from_frames
from dcplace.models.records import (
    Catalog,
    Chip,
    Clock,
    CloudRegion,
    Cooling,
    Economics,
    Fabric,
    FootprintLine,
    Latency,
    PairCost,
    Policies,
    Profile,
    RackConfig,
    Region,
    Scenario,
    Site,
    Throughput,
    TrainingJob,
    Workload,
)

__all__ = [
    "Catalog", "Chip", "Clock", "CloudRegion", "Cooling", "Economics", "Fabric", "FootprintLine", "InputProblem", "Latency", "PairCost", "Policies", "Profile",
    "RackConfig", "Region", "Scenario", "ScenarioError", "Site", "Throughput", "TrainingJob",
    "Workload", "default_scenario_path", "export_default", "load_scenario", "scenario_from_cost_matrix",
    "scenario_from_frames", "scenario_warnings", "with_footprint", "write_scenario",
]
