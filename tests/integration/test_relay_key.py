"""Under `model-only` with a relay, the sandbox holds a per-rollout key only the relay
accepts, never the upstream key (issue 24, item 6).

A real rollout on Docker: `--model-base-url` points at an upstream HTTP server of this
test on the host's loopback (which no sandbox reaches), with its key in a host variable.
A command agent in the sandbox calls the relay with the key it was given (bash's
/dev/tcp), once more with a guessed key, and writes the SHA-256 of its key and its first
characters to /logs. Checked: the relay answered the agent's call and refused the guess;
the upstream received the call with the upstream key; the sandbox's key is a `benchflow-`
token that is neither the upstream key nor the host-side placeholder.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from benchflow import Rollout, RolloutConfig, Scene
from benchflow.agents.command import CommandAgent
from benchflow.config import ModelEndpoint
from benchflow.rollout.model_endpoint import NO_API_KEY
from benchflow.sandbox import host_firewall

from .conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

UPSTREAM_KEY = "sk-upstream-5e1f0c9a7b3d"

CALL_RELAY = r"""
set -u
url=${BENCHFLOW_PROVIDER_BASE_URL#http://}
host=${url%%:*}
port=${url##*:}
port=${port%%/*}
body='{"model":"m","messages":[{"role":"user","content":"hi"}]}'
call() {  # call KEY: the relay's status line
    exec 3<>"/dev/tcp/$host/$port"
    {
        printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n' "$url"
        printf 'Authorization: Bearer %s\r\nContent-Type: application/json\r\n' "$1"
        printf 'Content-Length: %s\r\nConnection: close\r\n\r\n%s' "${#body}" "$body"
    } >&3
    head -n 1 <&3 | tr -d '\r'
    exec 3<&-
}
call "$BENCHFLOW_PROVIDER_API_KEY" > /logs/agent/status.txt
call sk-guessed > /logs/agent/guess.txt
printf %s "$BENCHFLOW_PROVIDER_API_KEY" | sha256sum | cut -c1-64 > /logs/agent/key.sha256
printf %s "$BENCHFLOW_PROVIDER_API_KEY" | cut -c1-10 > /logs/agent/key.prefix
echo 'Hello, world!' > /app/hello.txt
"""


class _Upstream(BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Upstream.seen.append(self.headers.get("Authorization"))
        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@pytest.fixture
def upstream() -> Iterator[str]:
    _Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def test_the_sandbox_gets_a_relay_only_key_never_the_upstream_key(
        tmp_path, job_label, upstream, monkeypatch):
    reason = host_firewall.available()
    if reason is not None:
        pytest.skip(f"model-only needs the host firewall: {reason}")
    monkeypatch.setenv("BF_RELAY_UPSTREAM_KEY", UPSTREAM_KEY)
    config = RolloutConfig(
        task_path=TASKS / "hello-world", scenes=[Scene.single(agent="caller")],
        jobs_dir=tmp_path / "jobs", job_name=f"{job_label}-relay-key", network="model-only",
        model_endpoint=ModelEndpoint(base_url=upstream, api_key_env="BF_RELAY_UPSTREAM_KEY"))
    rollout = Rollout(config, drivers={"caller": CommandAgent("caller", CALL_RELAY)})
    result = await rollout.run()
    assert result.error is None and result.reward == 1.0, result.error

    logs = rollout.paths.logs_dir / "agent"
    assert (logs / "status.txt").read_text().split()[1] == "200"  # the relay took its key
    assert (logs / "guess.txt").read_text().split()[1] == "401"  # and no other
    assert _Upstream.seen == [f"Bearer {UPSTREAM_KEY}"]  # swapped on the host
    held = (logs / "key.sha256").read_text().strip()
    assert held not in (_sha(UPSTREAM_KEY), _sha(NO_API_KEY))
    assert (logs / "key.prefix").read_text().strip() == "benchflow-"
    written = b"".join(p.read_bytes() for p in rollout.paths.root.rglob("*") if p.is_file())
    assert UPSTREAM_KEY.encode() not in written
