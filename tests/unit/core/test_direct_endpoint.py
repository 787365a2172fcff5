"""On backends whose `model-only` is an outbound allowlist (modal), the sandbox calls the
model endpoint itself: the endpoint's host becomes the spec's allowlist, and endpoints
only the host reaches are refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.agents.agent_env import PROVIDER_API_KEY_ENV, PROVIDER_BASE_URL_ENV, AgentEndpoint
from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.rollout.model_endpoint import RolloutNetwork

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.anyio


def _network(tmp_path: Path, endpoint: ModelEndpoint, **extra: object) -> RolloutNetwork:
    config = RolloutConfig(task_path=REPO / "tasks" / "hello-world",
                           scenes=[Scene.single(agent="oracle")], environment="modal",
                           model_endpoint=endpoint, network="model-only", **extra)
    return RolloutNetwork(config, allow_internet=True, job_name="j", log_dir=tmp_path,
                          capture_path=tmp_path / "model_calls.jsonl")


async def test_the_endpoints_host_is_the_allowlist(tmp_path, monkeypatch):
    monkeypatch.setenv("BF_TEST_KEY", "sk-test")
    net = _network(tmp_path, ModelEndpoint(base_url="https://llm.example.com/v1",
                                           api_key_env="BF_TEST_KEY"))
    await net.open()
    try:
        assert net.agent_endpoint == AgentEndpoint("https://llm.example.com", "sk-test")
        assert net.agent_endpoint.for_role("any").sandbox_env() == {
            PROVIDER_BASE_URL_ENV: "https://llm.example.com", PROVIDER_API_KEY_ENV: "sk-test"}
        assert net.sandbox_fields(online_install=False) == {
            "egress_allowlist": ("llm.example.com",), "network_policy": "model-only",
            "network": None, "isolate_services": True}
        # started public for an online install: the allowlist is in the spec for later
        assert net.sandbox_fields(online_install=True) == {
            "egress_allowlist": ("llm.example.com",), "isolate_services": True}
        assert net.network is None  # no docker network, no relay
    finally:
        await net.aclose()


@pytest.mark.parametrize(("endpoint", "extra", "message"), [
    (ModelEndpoint(base_url="http://127.0.0.1:8000/v1"), {}, "the host's loopback"),
    (ModelEndpoint(base_url="http://localhost:8000/v1"), {}, "the host's loopback"),
    (ModelEndpoint(base_url="https://llm.example.com/v1"), {"capture_model_calls": True},
     "capture_model_calls: on the modal backend"),
])
async def test_endpoints_the_sandbox_cannot_call_are_refused(tmp_path, endpoint, extra, message):
    net = _network(tmp_path, endpoint, **extra)
    with pytest.raises(ConfigError, match=message):
        await net.open()
    await net.aclose()


async def test_a_scripted_server_on_this_host_is_refused(tmp_path):
    script = REPO / "tasks" / "qa-example.script.yaml"
    net = _network(tmp_path, ModelEndpoint(script=script))
    with pytest.raises(ConfigError, match="--model-server: on the modal backend .* use --env "
                                          "docker"):
        await net.open()
