"""Reading the YAML files (scenario and sweep) strictly.

PyYAML keeps the last of two equal keys in a mapping without a word: a second
`policies:` block silently replaces the first. The loader here records every duplicate
key with both line numbers instead. JSON is YAML, so a file written by `json.dump` is read
too; its emoji arrive as UTF-16 surrogate pairs ("\\ud83d\\ude80"), joined here into the
characters they stand for (a lone surrogate is a problem naming the key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dcplace.models.errors import DANGLING_LINK, ProblemLog, unreadable
from dcplace.models.tables import _SURROGATE, _surrogate_at, join_surrogates


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that records duplicate mapping keys: (key, first line, second line)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[str, int, int]] = []

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                try:
                    key = self.construct_object(key_node, deep=True)
                    hash(key)
                except (TypeError, yaml.YAMLError):
                    continue
                line = key_node.start_mark.line + 1
                if key in first:
                    self.duplicates.append((str(key), first[key], line))
                else:
                    first[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path, label: str, log: ProblemLog, what: str = "scenario") -> Any:
    """The parsed YAML document, or None with the problems logged (not found, a folder,
    not valid YAML, duplicate keys, a broken escape)."""
    if path.is_dir():
        inside = path / f"{what}.yaml"
        hint = f"give the {what}.yaml inside it: {inside}." if inside.is_file() else f"give the path of a {what} YAML file, not a folder."
        log.add(str(path), None, None, f"is a folder, not a {what} file.", hint)
        return None
    if not path.exists():
        if path.is_symlink():
            log.add(str(path), None, None, DANGLING_LINK, f"point the link at the {what} YAML file, or give the file's own path.")
        else:
            log.add(str(path), None, None, f"{what} file not found.", f"give the path of a {what} YAML file.")
        return None
    try:
        text = path.read_text(encoding="utf-8-sig")
    except PermissionError:
        log.add(label, None, None, *unreadable(path))
        return None
    except UnicodeDecodeError as exc:
        data = path.read_bytes()
        line = data[: exc.start].count(b"\n") + 1
        log.add(label, line, None, f"is not UTF-8 text (line {line} holds the byte 0x{data[exc.start:exc.start + 1].hex()}).", "save it as UTF-8.")
        return None
    loader = StrictLoader(text)
    try:
        raw = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        log.add(label, mark.line + 1 if mark else None, None, f"is not valid YAML: {getattr(exc, 'problem', None) or exc}.", "fix the YAML syntax.")
        return None
    finally:
        loader.dispose()
    for key, first, second in loader.duplicates:
        log.add(label, second, key, f"key '{key}' is given twice, on line {first} and on line {second}; YAML would keep only the last.",
                "merge the two into one (keep one key).")
    if loader.duplicates:
        return None
    return _join(raw, label, log, "")


def _join(value: Any, label: str, log: ProblemLog, where: str) -> Any:
    """Surrogate pairs joined in every string of the document (keys too)."""
    if isinstance(value, str):
        try:
            return join_surrogates(value)
        except UnicodeError:
            log.add(label, None, where or None, f"holds a broken character escape (a lone UTF-16 surrogate, {_surrogate_at(value)}).",
                    "write the character itself, or a complete surrogate pair such as \\ud83d\\ude80.")
            return value
    if isinstance(value, dict):
        return {_join(k, label, log, where): _join(v, label, log, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, label, log, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


__all__ = ["StrictLoader", "read_yaml", "_SURROGATE"]
