"""The relay a model-only sandbox uses to reach a real endpoint: here a scripted server on
loopback stands in for the endpoint (no traffic leaves this machine)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from benchflow.errors import ConfigError
from benchflow.model_server import ModelServer, parse_script
from benchflow.model_server.relay import ModelRelay

from .conftest import SCRIPT


@pytest.fixture
def upstream() -> Iterator[ModelServer]:
    with ModelServer(parse_script(SCRIPT), host="127.0.0.1") as server:
        yield server


def test_relays_plain_and_streamed_requests_with_a_path_prefix(upstream, tmp_path):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100,
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": "Bash", "input_schema": {
                "type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}}]}
    with ModelRelay(f"{upstream.url}/", host="127.0.0.1", log_dir=tmp_path) as relay:
        plain = httpx.post(f"{relay.url}/v1/messages", json=body,
                           headers={"x-api-key": "sk-secret"})
        streamed = httpx.post(f"{relay.url}/v1/messages", json={**body, "stream": True},
                              headers={"x-api-key": "sk-secret"})
        missing = httpx.get(f"{relay.url}/nowhere")
    assert plain.status_code == 200
    assert plain.json()["content"][0]["input"] == {"command": "echo 42 > /app/answer.txt"}
    assert streamed.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "message_stop" in streamed.text
    assert missing.status_code == 404  # the endpoint's answer, passed through
    assert [r["answer"] for r in upstream.requests] == ["step", "step", "error"]
    logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(r["summary"]["path"], r["summary"]["status"]) for r in logged] == [
        ("/v1/messages", 200), ("/v1/messages", 200), ("/nowhere", 404)]
    assert "sk-secret" not in (tmp_path / "requests.jsonl").read_text()
    assert "messages" not in logged[0]  # summaries only: no bodies


def test_an_unreachable_endpoint_is_a_502(tmp_path):
    with ModelServer(parse_script(SCRIPT), host="127.0.0.1") as gone:
        url = gone.url
    with ModelRelay(url, host="127.0.0.1") as relay:
        reply = httpx.get(f"{relay.url}/v1/models")
    assert reply.status_code == 502
    assert "benchflow model relay" in reply.json()["error"]["message"]
    assert relay.requests[0]["status"] == 502


def test_only_http_endpoints():
    with pytest.raises(ConfigError, match="http"):
        ModelRelay("ftp://example.invalid")
