"""How each agent is pointed at a model endpoint, and the rollout-level choices around it.

Pure: manifests rendered with `launch_plan`, policies and scenes computed without Docker.
The end-to-end runs are `tests/conformance/test_*_offline.py`.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.agent_env import AgentEndpoint, format_model, launch_plan, resolve_credentials
from benchflow.agents.builtin import OracleAgent
from benchflow.agents.catalog import get_manifest
from benchflow.agents.registry import check_scenes
from benchflow.cli.main import app
from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.rollout.model_endpoint import (
    NO_API_KEY,
    SCRIPTED_API_KEY,
    _on_loopback,
    endpoint_api_key,
    endpoint_root,
    model_endpoint,
    needs_network_install,
    resolve_policy,
    check_endpoint,
    for_endpoint,
    scenes_for_check,
)
from benchflow.sandbox.network import model_only_names

URL = "http://172.18.0.1:41234"
ENDPOINT = AgentEndpoint(URL, role_keys={"agent": "k-test"})
"""The typed endpoint a rollout gives its agents (role `agent`'s own key)."""
ENDPOINT_ENV = {"BENCHFLOW_PROVIDER_BASE_URL": URL, "BENCHFLOW_PROVIDER_API_KEY": "k-test"}
SCRIPT = Path(__file__).parents[2] / "conformance" / "two-step.yaml"


@pytest.fixture(autouse=True)
def _no_host_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                 "BENCHFLOW_PROVIDER_API_KEY", "BENCHFLOW_PROVIDER_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _plan(agent: str, endpoint: AgentEndpoint | None, model: str | None = None,
          role_env: dict[str, str] | None = None):
    manifest = get_manifest(agent)
    return launch_plan(manifest, model=format_model(manifest, model), role="agent",
                       role_env=role_env or {}, base_env={}, user="agent", home="/home/agent",
                       workdir="/app", endpoint=endpoint.for_role("agent") if endpoint else None)


def _codex_config(argv: list[str]) -> dict:
    """codex's `-c key=value` overrides, parsed as codex parses them (TOML values)."""
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    return tomllib.loads("\n".join(pairs))


def test_claude_gets_the_base_url_without_v1_and_the_key_as_credential():
    plan = _plan("claude", ENDPOINT)
    assert plan.env["ANTHROPIC_BASE_URL"] == URL
    assert plan.credentials.env == {"ANTHROPIC_API_KEY": "k-test"}
    assert plan.env["BENCHFLOW_PROVIDER_BASE_URL"] == URL  # what runs in the sandbox reads
    # the same settings in the role's own env give the same plan (and win over the endpoint)
    assert _plan("claude", None, role_env=ENDPOINT_ENV) == plan
    mine = _plan("claude", ENDPOINT, role_env={"BENCHFLOW_PROVIDER_API_KEY": "mine"})
    assert mine.credentials.env == {"ANTHROPIC_API_KEY": "mine"}
    assert (plan.env["IS_SANDBOX"], plan.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"]) == ("1", "1")


def test_gemini_gets_its_base_url_trust_and_no_relaunch():
    plan = _plan("gemini", ENDPOINT)
    assert plan.env["GOOGLE_GEMINI_BASE_URL"] == URL
    assert plan.credentials.env == {"GEMINI_API_KEY": "k-test"}
    assert plan.env["GEMINI_CLI_TRUST_WORKSPACE"] == plan.env["GEMINI_CLI_NO_RELAUNCH"] == "true"
    assert plan.argv[-2:] == ["--approval-mode", "yolo"]


def test_codex_uses_a_responses_provider_at_the_base_url():
    config = _codex_config(_plan("codex", ENDPOINT).argv)
    assert config["model_provider"] == "benchflow"
    assert config["model_providers"]["benchflow"] == {
        "name": "benchflow model endpoint", "base_url": f"{URL}/v1", "env_key": "OPENAI_API_KEY",
        "wire_api": "responses", "supports_websockets": False}
    assert config["sandbox_mode"] == "danger-full-access"
    assert config["model"] == get_manifest("codex").model.default


def test_codex_without_a_base_url_keeps_the_openai_provider(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    config = _codex_config(_plan("codex", None).argv)
    assert config["model_provider"] == "openai"


def test_opencode_gets_an_openai_compatible_provider_at_the_base_url():
    plan = _plan("opencode", ENDPOINT, model="benchflow/claude-sonnet-4-5")
    config = json.loads(plan.env["OPENCODE_CONFIG_CONTENT"])
    assert config["model"] == "benchflow/claude-sonnet-4-5"
    assert config["provider"]["benchflow"] == {
        "npm": "@ai-sdk/openai-compatible", "name": "benchflow model endpoint",
        "options": {"baseURL": f"{URL}/v1", "apiKey": "{env:OPENCODE_BENCHFLOW_API_KEY}"},
        "models": {"claude-sonnet-4-5": {"name": "claude-sonnet-4-5"}}}
    assert plan.credentials.env == {"OPENCODE_BENCHFLOW_API_KEY": "k-test"}
    assert plan.env["OPENCODE_DISABLE_MODELS_FETCH"] == "true"
    assert "k-test" not in plan.env["OPENCODE_CONFIG_CONTENT"]


def test_opencode_without_a_base_url_is_unchanged(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a")
    plan = _plan("opencode", None)
    config = json.loads(plan.env["OPENCODE_CONFIG_CONTENT"])
    assert config == {"model": "anthropic/claude-sonnet-4-5", "autoupdate": False,
                      "share": "disabled"}
    assert "OPENCODE_DISABLE_MODELS_FETCH" not in plan.env  # empty values are dropped


@pytest.mark.parametrize(("requested", "allow_internet", "endpoint", "expected"), [
    (None, True, None, "public"),
    (None, False, None, "none"),
    (None, True, "script", "model-only"),
    (None, True, "url", "public"),
    (None, False, "url", "model-only"),
    ("public", True, "script", "public"),
    ("model-only", True, None, "model-only"),
    ("none", False, None, "none"),
])
def test_network_policy_resolution(requested, allow_internet, endpoint, expected):
    ep = {"script": ModelEndpoint(script=SCRIPT), "url": ModelEndpoint(base_url="http://h:8000"),
          None: None}[endpoint]
    assert resolve_policy(requested, allow_internet, ep) == expected


def test_none_with_a_model_endpoint_is_a_config_error():
    with pytest.raises(ConfigError, match="model-only"):
        resolve_policy("none", True, ModelEndpoint(script=SCRIPT))


@pytest.mark.parametrize(("url", "root"), [
    ("http://h:8000/v1", "http://h:8000"), ("http://h:8000/v1/", "http://h:8000"),
    ("https://gw.example/openai/", "https://gw.example/openai"), ("http://h", "http://h")])
def test_endpoint_root_drops_v1(url, root):
    assert endpoint_root(url) == root


def test_endpoint_keys(monkeypatch):
    assert endpoint_api_key(ModelEndpoint(script=SCRIPT)) == SCRIPTED_API_KEY
    assert endpoint_api_key(ModelEndpoint(base_url="http://h")) == NO_API_KEY
    monkeypatch.setenv("MY_GATEWAY_KEY", "secret")
    assert endpoint_api_key(ModelEndpoint(base_url="http://h", api_key_env="MY_GATEWAY_KEY")) \
        == "secret"
    with pytest.raises(ConfigError, match="UNSET_KEY_VAR"):
        endpoint_api_key(ModelEndpoint(base_url="http://h", api_key_env="UNSET_KEY_VAR"))


def test_an_in_memory_key_is_used_and_never_dumped():
    from pydantic import SecretStr, ValidationError

    from benchflow.models.client import resolve_api_key

    endpoint = ModelEndpoint(base_url="http://h", api_key=SecretStr("per-rollout-token"))
    assert endpoint_api_key(endpoint) == resolve_api_key(endpoint) == "per-rollout-token"
    config = RolloutConfig(task_path=Path("t"), agent="oracle", model_endpoint=endpoint)
    assert "per-rollout-token" not in config.model_dump_json()
    assert "api_key" not in config.model_dump()["model_endpoint"]
    with pytest.raises(ValidationError, match="set one of"):
        ModelEndpoint(base_url="http://h", api_key_env="K", api_key=SecretStr("x"))
    with pytest.raises(ValidationError, match="scripted model needs no key"):
        ModelEndpoint(script=SCRIPT, api_key=SecretStr("x"))


def test_model_endpoint_options_are_checked():
    assert model_endpoint() is None
    assert model_endpoint(SCRIPT).script == SCRIPT.resolve()
    with pytest.raises(ConfigError, match="exactly one"):
        model_endpoint(SCRIPT, "http://h")
    with pytest.raises(ConfigError, match="needs --model-base-url"):
        model_endpoint(api_key_env="X")
    with pytest.raises(ConfigError, match="http"):
        model_endpoint(base_url="ftp://h")
    with pytest.raises(ConfigError):
        model_endpoint(Path("/nonexistent/script.yaml"))


def test_roles_are_pointed_at_the_endpoint():
    scenes = [Scene.single(agent="opencode", env={"BENCHFLOW_PROVIDER_API_KEY": "mine"}),
              Scene.single(agent="claude", model="claude-opus-4-1")]
    pointed = for_endpoint(scenes)
    opencode, claude = pointed[0].roles[0], pointed[1].roles[0]
    assert opencode.model == "benchflow/claude-sonnet-4-5"  # the manifest's default, re-homed
    assert opencode.env == {"BENCHFLOW_PROVIDER_API_KEY": "mine"}  # the role's own, untouched
    assert claude.model == "claude-opus-4-1" and claude.env == {}
    assert ENDPOINT.for_role("agent").sandbox_env() == ENDPOINT_ENV
    assert ENDPOINT.for_role("other").sandbox_env() == {"BENCHFLOW_PROVIDER_BASE_URL": URL}


def test_the_credentials_check_passes_with_only_the_endpoint():
    config = RolloutConfig(task_path=Path("t"), scenes=[
        Scene.single(agent=a) for a in ("claude", "codex", "gemini", "opencode")],
        model_endpoint=ModelEndpoint(script=SCRIPT))
    with pytest.raises(ConfigError):
        check_scenes(config.scenes)  # no keys on the host
    endpoint = check_endpoint(config)
    assert endpoint is not None
    check_scenes(scenes_for_check(config), endpoint=endpoint)
    for role in (s.roles[0] for s in scenes_for_check(config)):
        manifest = get_manifest(role.agent)
        resolve_credentials(manifest, role.model, role.env, endpoint.for_role(role.name))


def test_which_installs_need_the_network():
    assert needs_network_install([AcpAgentDriver(get_manifest("claude"))])
    assert not needs_network_install([AcpAgentDriver(get_manifest("scripted")), OracleAgent()])


def test_model_only_names_fit_docker_and_iptables_limits():
    network, bridge, chain = model_only_names("2026-01-01__00-00-00")
    assert network.startswith("benchflow-model-only-")
    assert len(bridge) <= 15 and len(chain) <= 28
    assert model_only_names("a") != model_only_names("b")


def test_run_rejects_a_bad_network_policy():
    task = Path(__file__).parents[3] / "tasks" / "hello-world"
    result = CliRunner().invoke(app, ["run", str(task), "--network", "intranet"])
    assert result.exit_code == 2
    assert "--network" in result.output and "model-only" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://127.0.0.1:8000/v1", True), ("http://localhost:8000", True), ("http://[::1]:80", True),
    ("http://172.17.0.1:8000", False), ("https://llm.example.com/v1", False)])
def test_loopback_endpoints_are_relayed(url, loopback):
    assert _on_loopback(url) is loopback
