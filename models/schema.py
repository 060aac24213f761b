"""The JSON Schema of a scenario YAML file, so that editors can validate and complete it.

`scenario_json_schema()` is pydantic's schema of the file's top level (`ScenarioFile`) with
each section (economics, latency, policies, clock, periods) replaced by the schema of the record
that validates it, so an editor knows every key, its type, its range and what it means (each
field's `fix` text becomes its `description`). `extends` is folded in before the top level is
validated (models/scenario_file.py) and is declared here too.

`dcplace data schema` writes it; `dcplace data export` writes it beside the exported
scenario.yaml as `scenario.schema.json` and stamps the reference editors read into the YAML
(`# yaml-language-server: $schema=scenario.schema.json`, the comment the YAML language server
of VS Code and others reads). The schema says what a file may hold; the loader still does
every check (ranges across columns, references between tables, files that exist).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dcplace.models.records import Clock, Economics, Latency, Period, Policies

SCHEMA_FILE_NAME = "scenario.schema.json"
SCHEMA_ID = "https://github.com/dcplace/dcplace/scenario.schema.json"
SCHEMA_STAMP = f"# yaml-language-server: $schema={SCHEMA_FILE_NAME}"

_SECTIONS = {"economics": Economics, "latency": Latency, "policies": Policies, "clock": Clock}


def _described(node: Any) -> Any:
    """Every `fix` text of a field (json_schema_extra) also as its `description`, for editors."""
    if isinstance(node, dict):
        out = {k: _described(v) for k, v in node.items()}
        if isinstance(out.get("fix"), str) and "description" not in out:
            out["description"] = out["fix"]
        return out
    if isinstance(node, list):
        return [_described(v) for v in node]
    return node


def _inline(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A record's schema with its own $defs moved into the shared `defs`."""
    schema = dict(schema)
    defs.update(schema.pop("$defs", {}))
    return schema


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario YAML file (README.md, "Scenario format")."""
    from dcplace.models.scenario_file import ScenarioFile

    schema = ScenarioFile.model_json_schema()
    defs: dict[str, Any] = dict(schema.pop("$defs", {}))
    props = schema["properties"]
    for key, model in _SECTIONS.items():
        section = _inline(model.model_json_schema(), defs)
        section.pop("title", None)
        props[key] = {**section, "title": key.capitalize(), "default": {}}
    period = _inline(Period.model_json_schema(), defs)
    defs["Period"] = period
    props["periods"] = {"type": "array", "items": {"$ref": "#/$defs/Period"}, "default": [],
                        "description": "Planning periods (docs/periods.md); empty = one annualized year."}
    props["extends"] = {"type": "string", "description": "A base scenario file (relative to this one) or 'default': its keys "
                        "first, this file's on top (docs/batch.md)."}
    for key in ("sites", "regions", "jobs", "pair_costs", "footprint", "profiles", "cloud_regions"):
        if key in props:
            props[key]["description"] = (f"The {key} table: a .csv, .xlsx (first sheet, or 'book.xlsx#Sheet'), .parquet, "
                                         ".geojson or .gpkg file, relative to this YAML.")
    props["catalog"]["description"] = "A catalog folder (chips.csv, rack_configs.csv, ...), relative to this YAML; omitted = the embedded catalog."
    # a file that `extends` another takes the keys it lacks from its base
    required = schema.pop("required", [])
    schema["anyOf"] = [{"required": ["extends"]}, {"required": required}]
    out = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "dcplace scenario",
        "description": "A dcplace scenario file (README.md, 'Scenario format'). Written by `dcplace data schema`.",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }
    if defs:
        out["$defs"] = defs
    return _described(out)


def schema_text() -> str:
    return json.dumps(scenario_json_schema(), indent=2, sort_keys=False) + "\n"


def is_dcplace_schema(path: Path) -> bool:
    """Whether `path` is a schema file dcplace wrote (so that writing it again replaces nothing of the user's)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("$id") == SCHEMA_ID
    except (OSError, ValueError, AttributeError):
        return False


def stamp_schema(yaml_path: Path) -> None:
    """Put the schema reference editors read on the first line of a scenario YAML (once)."""
    text = yaml_path.read_text(encoding="utf-8")
    if not text.startswith("# yaml-language-server:"):
        yaml_path.write_text(f"{SCHEMA_STAMP}\n{text}", encoding="utf-8")


def write_schema(path: str | Path) -> Path:
    """Write the schema to `path`: a new file, or one dcplace wrote before (OutputRefused otherwise,
    so that no file of the user's is replaced). Written beside and moved into place whole."""
    import os
    import tempfile

    from dcplace.models.outputs import OutputRefused

    path = Path(path)
    if path.is_symlink() or path.is_dir() or (path.exists() and not is_dcplace_schema(path)):
        raise OutputRefused(path, "is there and is not a schema dcplace wrote.", "give a new file name, or remove it first.")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(schema_text())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
