"""Model ids, launch env/argv and the strict template renderer (pure functions)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchflow.agents.agent_env import format_model, launch_plan, resolve_credentials
from benchflow.agents.catalog import get_manifest
from benchflow.agents.manifest import load_manifest
from benchflow.agents.templates import SHARED_SCRIPTS, quote, render_file, render_string
from benchflow.errors import ConfigError

from .conftest import AGENTS, MINIMAL, write_agent

HOSTILE = ["$(touch /tmp/pwned)", "'; rm -rf / #", "`id`", "a\nb", '"quoted"', "--flag"]


@pytest.mark.parametrize(("agent", "model", "expected"), [
    ("claude", "anthropic/claude-opus-4-1", "claude-opus-4-1"),
    ("claude", "claude-opus-4-1", "claude-opus-4-1"),
    ("claude", None, "claude-sonnet-4-5"),
    ("codex", "openai/gpt-5", "gpt-5"),
    ("gemini", "google/gemini-2.5-flash", "gemini-2.5-flash"),
    ("opencode", "claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
    ("opencode", "openai/gpt-5", "openai/gpt-5"),
    ("scripted", "./dir/script.yaml", "./dir/script.yaml"),
    ("scripted", None, None),
])
def test_model_id_format(agent: str, model: str | None, expected: str | None) -> None:
    assert format_model(get_manifest(agent), model) == expected


def test_launch_plan_maps_model_provider_and_keeps_credentials_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = get_manifest("claude")
    monkeypatch.setenv("BENCHFLOW_PROVIDER_BASE_URL", "http://model-server:8000")
    monkeypatch.setenv("BENCHFLOW_PROVIDER_API_KEY", "sk-provider")
    plan = launch_plan(manifest, model="claude-opus-4-1", role="coder",
                       role_env={"EXTRA": "1", "IS_SANDBOX": "0"},
                       base_env={"ROLLOUT_TASK_INSTRUCTION": "/tmp/i.md"}, user="agent",
                       home="/home/agent", workdir="/app")
    assert plan.argv == ["claude-agent-acp"]
    assert plan.env["ANTHROPIC_MODEL"] == "claude-opus-4-1"
    assert plan.env["ANTHROPIC_BASE_URL"] == "http://model-server:8000"
    assert plan.env["IS_SANDBOX"] == "0"  # the role's env wins
    assert (plan.env["HOME"], plan.env["USER"], plan.env["BENCHFLOW_ROLE"]) == (
        "/home/agent", "agent", "coder")
    assert plan.env["ROLLOUT_TASK_INSTRUCTION"] == "/tmp/i.md" and plan.env["EXTRA"] == "1"
    assert "ANTHROPIC_API_KEY" not in plan.env  # it travels as a credential
    assert plan.credentials.env == {"ANTHROPIC_API_KEY": "sk-provider"}
    assert "sk-provider" not in repr(plan) and plan.acp_model == "claude-opus-4-1"  # env and ACP


def test_launch_templates_render_model_and_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    codex = launch_plan(get_manifest("codex"), model="gpt-5", role="r", role_env={},
                        base_env={}, user="agent", home="/h", workdir="/w")
    assert codex.argv[:3] == ["codex-acp", "-c", 'model="gpt-5"']
    assert 'model_provider="openai"' in codex.argv  # no base URL: codex's own provider
    assert codex.auth_method == "openai-api-key"
    scripted = launch_plan(get_manifest("scripted"), model="/opt/s.json", role="r", role_env={},
                           base_env={}, user="agent", home="/h", workdir="/w",
                           python_path="/opt/benchflow/python/abc")
    assert scripted.argv == ["python3", "/opt/benchflow/agents/scripted/agent.py"]
    assert scripted.env["PYTHONPATH"] == "/opt/benchflow/python/abc"
    assert scripted.acp_model == "/opt/s.json"
    assert scripted.env["SCRIPTED_AGENT_MODEL"] == "/opt/s.json"
    bare = launch_plan(get_manifest("scripted"), model=None, role="r", role_env={}, base_env={},
                       user="agent", home="/h", workdir="/w")
    assert "SCRIPTED_AGENT_MODEL" not in bare.env  # an empty template value is dropped
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    opencode = launch_plan(get_manifest("opencode"), model='anthropic/x"y', role="r",
                           role_env={}, base_env={}, user="agent", home="/h", workdir="/w")
    assert opencode.env["OPENCODE_CONFIG_CONTENT"].startswith('{"model": "anthropic/x\\"y"')


def test_credential_files_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = MINIMAL.format(name="f") + """
[[credentials]]
env = ["F_KEY"]
[[credentials]]
files = [{host = "%s", sandbox = ".f/auth.json"}]
auth_method = "file-login"
""" % (tmp_path / "auth.json")
    manifest = load_manifest(write_agent(tmp_path / "f", toml))
    with pytest.raises(ConfigError, match=r"F_KEY or the file .*auth.json"):
        resolve_credentials(manifest, None)
    (tmp_path / "auth.json").write_text("{}")
    creds = resolve_credentials(manifest, None)
    assert creds.files == [(tmp_path / "auth.json", ".f/auth.json")]
    assert creds.auth_method == "file-login" and creds.env == {}
    monkeypatch.setenv("F_KEY", "v")
    assert resolve_credentials(manifest, None).env == {"F_KEY": "v"}


@given(st.text())
def test_quote_round_trips_through_the_shell(value: str) -> None:
    assert shlex.split(quote(value)) == [value]


def test_renderer_is_strict(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="undefined"):
        render_string("{{ nope }}", {}, where="x")
    with pytest.raises(ConfigError, match="syntax"):
        render_string("{{ ", {}, where="x")
    (tmp_path / "t.sh.j2").write_text("{% include 'missing.j2' %}")
    with pytest.raises(ConfigError, match="missing.j2"):
        render_file(tmp_path / "t.sh.j2", {})


def _context(value: str) -> dict[str, str]:
    return {"name": "agent", "version": value, "package": value, "binary": value,
            "marker": f"/opt/m/{value}", "agent_dir": f"/opt/{value}", "python_path": value,
            "prefix": f"/opt/p/{value}", "user": "agent", "home": "/home/agent"}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "opencode", "scripted"])
@pytest.mark.parametrize("value", HOSTILE)
def test_install_templates_quote_hostile_values(agent: str, value: str, tmp_path: Path) -> None:
    manifest = load_manifest(AGENTS / agent)
    assert manifest.install.script is not None
    script = render_file(AGENTS / agent / manifest.install.script, _context(value))
    assert script.startswith("#!/bin/sh\n")
    quoted = [f"agent {value} is already installed", f"/opt/p/{value}/bin/{value}",
              f"/opt/p/{value}/lib/openssl3/libssl.so.3", f"/opt/p/{value}/lib/openssl3",
              f"/usr/local/bin/{value}", f"/opt/{value}/agent.py", f"{value}@{value}",
              f"/opt/m/{value}", f"/opt/p/{value}", f"/opt/{value}", value]
    remaining = script
    for text in quoted:  # longest first: each hostile value may appear only shell-quoted
        remaining = remaining.replace(quote(text), "")
    assert value not in remaining, script
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed")
    path = tmp_path / "install.sh"
    path.write_text(script)
    result = subprocess.run([shellcheck, "-S", "warning", str(path)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_shared_scripts_exist() -> None:
    names = {p.name for p in SHARED_SCRIPTS.iterdir()}
    assert {"npm_global.sh.j2", "link_node.sh", "probe_platform.sh", "kill_marked.sh"} <= names
