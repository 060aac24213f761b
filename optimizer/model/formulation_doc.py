"""Write docs/formulation.md from the constraint-family registry:

    python -m dcplace.optimizer.model.formulation_doc --write docs/formulation.md

Its own module because the registry fills when the formulation is imported; the registry
module itself imports nothing of the formulation (no cycle), and running this file as a
script registers every family once, in the package's modules.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import dcplace.optimizer.model.formulation  # noqa: F401  (registers every family)
from dcplace.optimizer.model.families import render_markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write docs/formulation.md from the constraint-family registry.")
    parser.add_argument("--write", metavar="PATH", help="write the document here (default: print it)")
    args = parser.parse_args(argv)
    text = render_markdown()
    if args.write:
        Path(args.write).write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
