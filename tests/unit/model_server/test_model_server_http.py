"""The HTTP server: request log, routing errors, body encodings, start/stop from sync and async code."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from pathlib import Path

import anyio
import httpx
import pytest

from benchflow.errors import ConfigError
from benchflow.model_server import ModelServer, Script, serve_forever

CLAUDE_REQUEST = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [
        {
            "name": "Bash",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_every_request_is_logged_with_summary_and_body(server: ModelServer, tmp_path: Path) -> None:
    with httpx.Client(base_url=server.url) as http:
        assert http.post("/v1/messages?beta=true", json=CLAUDE_REQUEST).status_code == 200
        assert http.post("/v1/messages", content=b"{not json").status_code == 400
    assert server.log_path == tmp_path / "rollout" / "requests.jsonl"
    lines = [json.loads(line) for line in server.log_path.read_text().splitlines()]
    assert [line["summary"]["seq"] for line in lines] == [0, 1]
    first = lines[0]["summary"]
    assert first["api"] == "anthropic" and first["status"] == 200 and first["answer"] == "step"
    assert first["step"] == 0 and first["tool"] == "Bash" and first["tool_results"] == 0
    assert first["arguments"] == {"command": "echo 42 > /app/answer.txt"}
    assert lines[0]["body"] == CLAUDE_REQUEST
    second = lines[1]["summary"]
    assert second["status"] == 400 and "not valid JSON" in second["error"]
    assert lines[1]["body"] == "{not json"
    assert server.requests == [line["summary"] for line in lines]


def test_unknown_endpoint_and_method_are_named(server: ModelServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        missing = http.post("/v2/complete", json={})
        assert missing.status_code == 404
        assert "no POST endpoint at /v2/complete" in missing.json()["error"]["message"]
        assert "/v1/chat/completions" in missing.json()["error"]["message"]
        assert http.delete("/v1/messages").status_code == 405
        stream = http.post(
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent", json={"contents": []}
        )
        assert stream.status_code == 400 and "alt=sse" in stream.json()["error"]["message"]
        assert http.get("/").json() == {"status": "ok", "script": "write-then-read"}
        head = http.head("/v1/models")
        assert head.status_code == 200 and head.content == b""


def test_gzip_and_chunked_bodies(server: ModelServer) -> None:
    body = json.dumps(CLAUDE_REQUEST).encode()
    with httpx.Client(base_url=server.url) as http:
        zipped = http.post(
            "/v1/messages",
            content=gzip.compress(body),
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )
        assert zipped.status_code == 200 and zipped.json()["stop_reason"] == "tool_use"
        chunked = http.post("/v1/messages", content=iter([body[:10], body[10:]]))
        assert chunked.status_code == 200 and chunked.json()["content"][0]["name"] == "Bash"
        zstd = http.post("/v1/messages", content=body, headers={"Content-Encoding": "zstd"})
        assert zstd.status_code == 415 and "zstd" in zstd.json()["error"]["message"]


def test_keep_alive_connections_do_not_outlive_stop(script: Script) -> None:
    server = ModelServer(script)
    url = server.start()
    assert server.start() == url  # idempotent
    with httpx.Client(base_url=url) as http:
        assert http.get("/v1/models").status_code == 200  # leaves a keep-alive connection open
        server.stop()
        server.stop()
        with pytest.raises(httpx.TransportError):
            http.get("/v1/models")
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.url


def test_port_in_use_is_a_config_error(script: Script) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            ModelServer(script, port=port).start()


@pytest.mark.anyio
async def test_async_context_manager_serves_while_the_loop_runs(script: Script) -> None:
    async with ModelServer(script) as server, httpx.AsyncClient(base_url=server.url) as http:
        with anyio.fail_after(120):  # a deadlock guard, not a speed claim
            replies = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    replies.append(
                        (await http.post("/v1/messages", json=CLAUDE_REQUEST)).status_code
                    )

                for _ in range(4):
                    tg.start_soon(call)
    assert replies == [200] * 4
    assert len(server.requests) == 4


def test_serve_forever_runs_until_stopped(tmp_path: Path) -> None:
    script_path = tmp_path / "s.yaml"
    script_path.write_text("steps:\n  - text: hello\n")
    stop = threading.Event()
    urls: list[str] = []

    def ready(url: str) -> None:
        urls.append(url)
        with httpx.Client(base_url=url) as http:
            reply = http.post(
                "/v1/chat/completions",
                json={"model": "gpt-5", "messages": [{"role": "user", "content": "x"}]},
            )
            urls.append(reply.json()["choices"][0]["message"]["content"])
        stop.set()

    thread = threading.Thread(
        target=serve_forever,
        args=(script_path, "127.0.0.1", 0, tmp_path),
        kwargs={"on_ready": ready, "stop_event": stop},
    )
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert urls[0].startswith("http://127.0.0.1:") and urls[1] == "Scripted session"
    assert (tmp_path / "requests.jsonl").exists()
