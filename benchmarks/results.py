"""RESULTS.md is written by several benchmark scripts: each owns a marked section.

run.py rewrites the file but keeps the marked sections of the others; a script that owns a
section replaces only that section. Every write goes to a temporary file beside RESULTS.md
that then replaces it in one step (`write_atomically`): a run stopped while writing leaves
the old file whole, never half of one.
"""

from __future__ import annotations

import os
import re
import tempfile
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
    write_atomically(path, text)


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` by way of a temporary file in the same folder and os.replace."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
