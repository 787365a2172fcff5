"""The capability table in docs/how-to/cloud-sandboxes.md is the one the code generates."""

from __future__ import annotations

from pathlib import Path

from benchflow.sandbox.registry import capability_table

DOC = Path(__file__).resolve().parents[3] / "docs" / "how-to" / "cloud-sandboxes.md"


def test_capability_table_in_the_docs_matches_the_code():
    text = DOC.read_text()
    start = text.index("<!-- capability-table:start -->\n") + len("<!-- capability-table:start -->\n")
    end = text.index("<!-- capability-table:end -->")
    assert text[start:end] == capability_table()
    assert "| docker | yes | yes | public, none, model-only | yes | yes |" in text
