"""Export filters and metadata per role, on the recorded two-role rollouts of real agents
(`tests/golden/job`): keep what codex produced, drop what claude produced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.job.export import ExportFilters, export_job
from tests.golden.record import GOLDEN_JOB

runner = CliRunner()


def _meta(path: Path) -> list[tuple[str, str, str]]:
    return [(r["metadata"]["rollout_agent"], r["metadata"]["role"], r["metadata"]["agent"])
            for r in map(json.loads, path.read_text().splitlines())]


@pytest.mark.parametrize(("filters", "expected"), [
    (ExportFilters(agents=("codex",)), [("claude+codex", "reviewer", "codex")]),
    (ExportFilters(agents=("claude", "opencode")),
     [("claude+codex", "coder", "claude"), ("gemini+opencode", "reviewer", "opencode")]),
    (ExportFilters(agents=("claude+codex",)),  # the rollout's label keeps all its roles
     [("claude+codex", "coder", "claude"), ("claude+codex", "reviewer", "codex")]),
    (ExportFilters(models=("gpt-5.3-codex",)), [("claude+codex", "reviewer", "codex")]),
    (ExportFilters(agents=("gemini",), roles=("reviewer",)), []),
])
def test_agent_and_model_filters_apply_per_role(tmp_path, filters, expected) -> None:
    out = tmp_path / "out.jsonl"
    stats = export_job(GOLDEN_JOB, "sft", out, filters)
    assert _meta(out) == expected
    assert stats.rollouts + stats.skipped_rollouts == 2


def test_model_call_lines_keep_one_role_and_name_its_agent(tmp_path) -> None:
    out = tmp_path / "calls.jsonl"
    stats = export_job(GOLDEN_JOB, "sft", out, ExportFilters(agents=("gemini",)), "model-calls")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines and {(r["metadata"]["agent"], r["metadata"]["api"]) for r in lines} == {
        ("gemini", "gemini")}
    assert all(r["messages"][-1]["role"] == "assistant" for r in lines)
    assert not stats.skipped_calls  # gemini and opencode make no call that gives no line


def test_export_command_names_what_it_skipped(tmp_path) -> None:
    out = tmp_path / "calls.jsonl"
    result = runner.invoke(app, ["export", str(GOLDEN_JOB), "--from", "model-calls",
                                 "-o", str(out), "--agent", "codex"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "wrote 3 lines from 1 rollouts" in text and "(1 rollouts filtered out)" in text
    # claude's health probes (HEAD /) in the kept rollout: counted and named
    assert "2 model calls skipped: 2 not a model reply (HEAD /)" in text


def test_summary_shows_a_roles_table_marking_counted_tokens() -> None:
    from rich.console import Console

    from benchflow.cli.jobs import roles_table
    from benchflow.job.store import iter_trial_results

    table = roles_table(list(iter_trial_results(GOLDEN_JOB)))
    assert table is not None
    console = Console(width=80, record=True)
    console.print(table)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    rows = {line.split("│")[2].strip(): line for line in text.splitlines() if "│" in line
            and line.split("│")[2].strip() in ("coder", "reviewer")}
    assert "codex" in text and "gemini" in text and "opencode" in text
    assert "24634*" in text  # codex's tokens, counted by the model server
    assert "counted by benchflow's model server" in text
    assert rows
