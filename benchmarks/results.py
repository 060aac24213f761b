"""RESULTS.md is written by several benchmark scripts: each owns a marked section.

run.py rewrites the file but keeps the marked sections of the others; a script that owns a
section replaces only that section.
"""

from __future__ import annotations

import re
from pathlib import Path

_SECTION = re.compile(r"<!-- section:(?P<name>[a-z0-9-]+) -->\n.*?<!-- /section:(?P=name) -->\n", re.S)


def marked_sections(text: str) -> list[str]:
    """The marked sections of a RESULTS.md text, in order."""
    return [m.group(0) for m in _SECTION.finditer(text)]


def replace_section(path: Path, name: str, body: str) -> None:
    """Put `body` into the section `name` of `path` (appended if the section is new)."""
    block = f"<!-- section:{name} -->\n{body.rstrip()}\n<!-- /section:{name} -->\n"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    pattern = re.compile(rf"<!-- section:{re.escape(name)} -->\n.*?<!-- /section:{re.escape(name)} -->\n", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block
    path.write_text(text)
