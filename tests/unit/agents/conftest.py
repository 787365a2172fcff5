"""Fixtures for agent manifest, catalog and driver tests (no Docker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
AGENTS = REPO / "agents"

CREDENTIAL_VARS = (
    "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY",
    "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY",
    "BENCHFLOW_PROVIDER_API_KEY", "BENCHFLOW_PROVIDER_BASE_URL", "BENCHFLOW_AGENTS_PATH",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credential or agents path leaks in from the developer's shell."""
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)


def write_agent(folder: Path, toml: str, files: dict[str, str] | None = None) -> Path:
    """An agent folder holding `agent.toml` (and `files`); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.toml").write_text(toml)
    for name, text in (files or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, 0o644)
    return folder


MINIMAL = """
name = "{name}"
version = "1.0"
[launch]
argv = ["my-agent"]
"""
