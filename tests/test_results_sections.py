"""benchmarks/RESULTS.md is shared: each script replaces only its own marked section."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import marked_sections, replace_section  # noqa: E402


def test_sections_are_replaced_in_place_and_kept_by_a_rewrite(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nOR-Library table\n")
    replace_section(path, "batch-throughput", "## Batch\n\nfirst")
    replace_section(path, "other", "## Other\n\nx")
    replace_section(path, "batch-throughput", "## Batch\n\nsecond")
    text = path.read_text()
    assert text.count("## Batch") == 1 and "second" in text and "first" not in text
    assert text.index("## Batch") < text.index("## Other")  # replaced where it was
    kept = marked_sections(text)
    assert len(kept) == 2 and kept[0].startswith("<!-- section:batch-throughput -->")
