"""The domain: validated records, the scenario file format, and the plan."""

from dcplace.models.errors import InputProblem, ScenarioError
from dcplace.models.files import default_scenario_path, export_default, load_scenario, write_scenario
from dcplace.models.records import (
    Catalog,
    Chip,
    Cooling,
    Economics,
    Fabric,
    Latency,
    PairCost,
    Policies,
    RackConfig,
    Region,
    Scenario,
    Site,
    Throughput,
    TrainingJob,
    Workload,
)

__all__ = [
    "Catalog", "Chip", "Cooling", "Economics", "Fabric", "InputProblem", "Latency", "PairCost", "Policies",
    "RackConfig", "Region", "Scenario", "ScenarioError", "Site", "Throughput", "TrainingJob",
    "Workload", "default_scenario_path", "export_default", "load_scenario", "write_scenario",
]
