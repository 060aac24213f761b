"""Writing report files: HTML from the templates, and staging so that a failure leaves
nothing half-written behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from jinja2 import Environment, PackageLoader, select_autoescape

_TEMPLATES = Environment(loader=PackageLoader("reports", "templates"), autoescape=select_autoescape(["html", "j2"]))


def render_html(template: str, **context: Any) -> str:
    """Render reports/templates/<template>; every value is HTML-escaped (autoescape is on)."""
    return _TEMPLATES.get_template(template).render(**context)


@dataclass
class Stage:
    """A temporary folder beside the destination; `moved` lists the files once placed."""

    dir: Path
    moved: list[Path] = field(default_factory=list)


@contextmanager
def staged_files(out_dir: str | Path) -> Iterator[Stage]:
    """Write into a temporary sibling of `out_dir`; on success move every file into place.

    Each file is moved with os.replace (atomic on one file system), so a reader sees the
    old file or the new one, never a partial one; on failure the stage is removed and
    `out_dir` is untouched.
    """
    out_dir = Path(out_dir).resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Stage(Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent)))
    try:
        yield stage
        out_dir.mkdir(exist_ok=True)
        for path in sorted(stage.dir.iterdir()):
            target = out_dir / path.name
            os.replace(path, target)
            stage.moved.append(target)
    finally:
        shutil.rmtree(stage.dir, ignore_errors=True)
