"""`benchflow agents list` and `benchflow agents show NAME`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from benchflow.cli.agents import app

runner = CliRunner()


def test_list_shows_builtins_and_manifests() -> None:
    result = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in ("oracle", "nop", "claude", "codex", "gemini", "opencode", "scripted"):
        assert name in result.output
    assert "0.23.1" in result.output and "claude-code" in result.output


def test_show_reports_credentials_without_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-very-secret")
    result = runner.invoke(app, ["show", "claude-code"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "@zed-industries/claude-agent-acp" in result.output
    assert "claude-sonnet-4-5" in result.output and "ANTHROPIC_MODEL" in result.output
    assert "set" in result.output and "missing" in result.output  # the OAuth token is not set
    assert "sk-very-secret" not in result.output


def test_show_unknown_agent_exits_2_listing_agents() -> None:
    result = runner.invoke(app, ["show", "claud"])
    assert result.exit_code == 2
    assert "claude" in result.output and "oracle" in result.output


def test_show_builtin() -> None:
    result = runner.invoke(app, ["show", "oracle"])
    assert result.exit_code == 0 and "built-in" in result.output
