"""The scenario file format, re-exported from where each concern lives:

- models/tables.py: reading tables (CSV, Parquet, GeoJSON, GeoPackage, frames) and row validation
- models/yamlio.py: the strict YAML reader (duplicate keys, surrogate pairs)
- models/scenario_file.py: the scenario YAML, extends/overrides, `load_scenario`, the one builder
- models/frames.py: `Scenario.from_frames` (tables in memory)
- models/writing.py: `write_scenario`, `export_default`

Kept so that `from dcplace.models.files import ...` goes on working.
"""

from __future__ import annotations

from dcplace.models.errors import InputProblem, ProblemLog, ScenarioError  # noqa: F401
from dcplace.models.scenario_file import (  # noqa: F401
    TABLE_KEYS,
    ScenarioFile,
    build_scenario,
    default_catalog_dir,
    default_scenario_path,
    load_scenario,
    parse_spec,
    scenario_hash,
    with_footprint,
)
from dcplace.models.tables import (  # noqa: F401
    CATALOG_TABLES,
    DOC_COLUMN_PREFIXES,
    GEO_SUFFIXES,
    TABLE_SUFFIXES,
    UNIT_ALTERNATIVES,
    RegionReshape,
    Table,
    catalog_from_tables,
    check_unique,
    frame_table,
    load_catalog,
    parse_rows,
    read_table,
    record_problems,
)
from dcplace.models.writing import export_default, write_scenario  # noqa: F401

__all__ = ["load_scenario", "write_scenario", "export_default", "default_scenario_path", "scenario_hash", "ScenarioError"]
