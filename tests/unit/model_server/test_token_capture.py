"""Token-level capture through the relay: the relay asks a vLLM- or SGLang-style upstream on
127.0.0.1 for token ids and log-probabilities in that server's own options, and records
what came back unchanged, with a `token_data` marker; calls without token data are marked
`absent`, never tokenised by benchflow."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from benchflow.config import ModelEndpoint, RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.model_server.capture import ModelCallLog
from benchflow.model_server.relay import ModelRelay
from benchflow.model_server.token_data import token_fields, with_token_options
from benchflow.rollout.model_endpoint import capture_log
from benchflow.rollout.secrets import Scrubber

PROMPT_IDS = [11, 12, 13, 14, 15]
COMPLETION = [(21, -0.5), (22, -1.25), (2, -0.01)]


def _sse(handler: BaseHTTPRequestHandler, chunks: list[dict[str, Any]]) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for data in [*(json.dumps(c) for c in chunks), "[DONE]"]:
        event = f"data: {data}\n\n".encode()
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
    handler.wfile.write(b"0\r\n\r\n")


def _json(handler: BaseHTTPRequestHandler, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class _Upstream(BaseHTTPRequestHandler):
    """vLLM or SGLang: token data only when the request asked for it in its options."""

    protocol_version = "HTTP/1.1"
    dialect: ClassVar[str] = "vllm"
    bodies: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        text = {"role": "assistant", "content": "ok"}
        logprobs = {"content": [{"token": f"t{i}", "logprob": lp, "top_logprobs": []}
                                for i, lp in COMPLETION]} if body.get("logprobs") else None
        if self.dialect == "vllm":
            asked = body.get("return_token_ids") is True
            if body.get("stream"):
                chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": text}],
                                                 **({"prompt_token_ids": PROMPT_IDS}
                                                    if asked else {})}]
                for token_id, lp in COMPLETION:
                    chunks.append({"choices": [{
                        "index": 0, "delta": {"content": "."},
                        **({"token_ids": [token_id]} if asked else {}),
                        "logprobs": {"content": [{"token": f"t{token_id}", "logprob": lp}]}}]})
                _sse(self, chunks)
                return
            choice: dict[str, Any] = {"index": 0, "message": text, "finish_reason": "stop",
                                      "logprobs": logprobs}
            extra: dict[str, Any] = {}
            if asked:
                choice["token_ids"] = [i for i, _ in COMPLETION]
                extra["prompt_token_ids"] = PROMPT_IDS
            _json(self, {"object": "chat.completion", "choices": [choice], **extra})
            return
        # SGLang: ids on the choice, with return_prompt_token_ids + return_meta_info
        if body.get("stream"):
            assert "return_prompt_token_ids" not in body  # SGLang would refuse the call
            _sse(self, [{"choices": [{"index": 0, "delta": text, "finish_reason": "stop"}]}])
            return
        choice = {"index": 0, "message": text, "finish_reason": "stop", "logprobs": logprobs}
        if body.get("return_prompt_token_ids"):
            choice["prompt_token_ids"] = PROMPT_IDS
        if body.get("return_meta_info"):
            choice["meta_info"] = {"output_token_logprobs": [[lp, i, f"t{i}"]
                                                             for i, lp in COMPLETION]}
        _json(self, {"object": "chat.completion", "choices": [choice]})


@pytest.fixture
def upstream() -> Iterator[type[_Upstream]]:
    handler = type("Upstream", (_Upstream,), {"bodies": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield handler
    server.shutdown()
    server.server_close()


def _relay_calls(upstream: type[_Upstream], tmp_path: Path, dialect: str | None,
                 requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    log = ModelCallLog(tmp_path / "model_calls.jsonl", Scrubber([]),
                       place=lambda: {"scene": "main", "role": "coder", "turn": 0})
    with ModelRelay(upstream.url, capture=log,  # type: ignore[attr-defined]
                    request_tokens=dialect) as relay:  # type: ignore[arg-type]
        for request in requests:
            reply = httpx.post(f"{relay.url}/v1/chat/completions", json=request)
            assert reply.status_code == 200
    return [json.loads(line) for line in log.path.read_text().splitlines()]


CHAT = {"model": "policy", "messages": [{"role": "user", "content": "2+2?"}]}


def test_relay_asks_vllm_for_token_ids_and_records_them_unchanged(upstream, tmp_path):
    upstream.dialect = "vllm"
    calls = _relay_calls(upstream, tmp_path, "vllm", [CHAT, {**CHAT, "stream": True}])
    assert [b["return_token_ids"] for b in upstream.bodies] == [True, True]
    assert all(b["logprobs"] is True for b in upstream.bodies)
    assert upstream.bodies[0]["messages"] == CHAT["messages"]  # nothing else changed
    for call in calls:
        assert call["token_data"] == "exact"
        assert call["prompt_token_ids"] == PROMPT_IDS
        assert call["completion_token_ids"] == [i for i, _ in COMPLETION]
        assert call["logprobs"] == [lp for _, lp in COMPLETION]
        assert call["request"]["return_token_ids"] is True  # the request as sent upstream
        assert (call["role"], call["turn"]) == ("coder", 0)


def test_relay_asks_sglang_in_its_own_options(upstream, tmp_path):
    upstream.dialect = "sglang"
    calls = _relay_calls(upstream, tmp_path, "sglang", [CHAT])
    sent = upstream.bodies[0]
    assert sent["return_prompt_token_ids"] is True and sent["return_meta_info"] is True
    assert "return_token_ids" not in sent  # vLLM's spelling never reaches SGLang
    assert calls[0]["token_data"] == "exact"
    assert calls[0]["prompt_token_ids"] == PROMPT_IDS
    assert calls[0]["completion_token_ids"] == [i for i, _ in COMPLETION]
    assert calls[0]["logprobs"] == [lp for _, lp in COMPLETION]


def test_streamed_sglang_calls_are_not_asked_and_marked_absent(upstream, tmp_path):
    """SGLang refuses its token options on streamed calls: the relay leaves them out and
    the call is recorded without token data, never tokenised by benchflow."""
    upstream.dialect = "sglang"
    calls = _relay_calls(upstream, tmp_path, "sglang", [{**CHAT, "stream": True}])
    sent = upstream.bodies[0]
    assert sent["logprobs"] is True and "return_meta_info" not in sent
    assert calls[0]["token_data"] == "absent"
    assert calls[0]["response"]["choices"][0]["message"]["content"] == "ok"


def test_without_token_options_calls_are_marked_absent(upstream, tmp_path):
    upstream.dialect = "vllm"
    calls = _relay_calls(upstream, tmp_path, None, [CHAT])
    assert "return_token_ids" not in upstream.bodies[0]
    assert calls[0]["token_data"] == "absent"
    assert "prompt_token_ids" not in calls[0] and "completion_token_ids" not in calls[0]


def test_token_options_touch_only_json_generation_calls():
    raw = b'{"model": "m", "prompt": "hi"}'
    assert with_token_options(b"not json", "/v1/chat/completions", "vllm") == b"not json"
    assert with_token_options(raw, "/v1/embeddings", "vllm") == raw
    text = json.loads(with_token_options(raw, "/v1/completions", "vllm"))
    assert text["logprobs"] == 0 and text["return_token_ids"] is True
    kept = json.loads(with_token_options(b'{"logprobs": true, "top_logprobs": 5}',
                                         "/v1/chat/completions?x=1", "vllm"))
    assert kept["top_logprobs"] == 5


def test_token_fields_reads_vllm_token_id_strings_and_flags_mismatches():
    response = {"prompt_token_ids": [1, 2], "choices": [{"logprobs": {"content": [
        {"token": "token_id:7", "logprob": -0.1}, {"token": "token_id:8", "logprob": -0.2}]}}]}
    fields = token_fields(response)
    assert fields["completion_token_ids"] == [7, 8] and fields["token_data"] == "exact"
    broken = {"prompt_token_ids": [1], "choices": [{"token_ids": [7, 8],
                                                    "logprobs": {"content": [{"logprob": -1}]}}]}
    assert token_fields(broken)["token_data"] == "absent"  # 2 tokens, 1 logprob
    assert token_fields("not json")["token_data"] == "absent"


def test_request_tokens_needs_a_real_endpoint_and_a_capture(tmp_path):
    with pytest.raises(ValueError, match="request_tokens"):
        ModelEndpoint(script=tmp_path / "s.yaml", request_tokens="vllm")
    endpoint = ModelEndpoint(base_url="http://127.0.0.1:8000/v1", request_tokens="vllm")
    config = RolloutConfig(task_path=tmp_path, scenes=[Scene.single(agent="model")],
                           model_endpoint=endpoint)
    with pytest.raises(ConfigError, match="capture_model_calls"):
        capture_log(config, tmp_path / "model_calls.jsonl")
    captured = config.model_copy(update={"capture_model_calls": True})
    assert capture_log(captured, tmp_path / "model_calls.jsonl") is not None


def test_qa_run_without_sandbox_captures_tokens_through_a_loopback_relay(upstream, tmp_path):
    """`benchflow run data.jsonl -a model --capture-tokens vllm`: no sandbox, yet every call
    passes a relay on 127.0.0.1 that asks for token ids and records them, per role/turn."""
    from typer.testing import CliRunner

    from benchflow.cli.main import app

    upstream.dialect = "vllm"
    data = tmp_path / "qa.jsonl"
    data.write_text('{"id": "q1", "question": "2+2?", "answer": "ok"}\n')
    result = CliRunner().invoke(app, [
        "run", str(data), "-a", "model", "-m", "policy", "--model-base-url",
        f"{upstream.url}/v1", "--capture-tokens", "vllm", "--jobs-dir", str(tmp_path / "jobs"),
        "--job-name", "tok", "--env", "daytona"])  # a sandbox would need Daytona: none starts
    assert result.exit_code == 0, result.output
    rollout = tmp_path / "jobs" / "tok" / "model" / "qa" / "q1__1"
    calls = [json.loads(line) for line in (rollout / "model_calls.jsonl").read_text().splitlines()]
    assert len(calls) == 1 and upstream.bodies[0]["return_token_ids"] is True
    assert calls[0]["token_data"] == "exact"
    assert calls[0]["completion_token_ids"] == [i for i, _ in COMPLETION]
    assert (calls[0]["role"], calls[0]["turn"]) == (_single_role(rollout), 0)
    assert json.loads((rollout / "result.json").read_text())["reward"] == 1.0


def _single_role(rollout: Path) -> str:
    events = (rollout / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()
    return next(json.loads(e)["role"] for e in events if '"user_message"' in e)


@pytest.mark.parametrize(("args", "message"), [
    (["--capture-tokens", "tgi"], "choose vllm or sglang"),
    (["--capture-tokens", "vllm", "--model-server", "s.yaml"], "--model-base-url"),
])
def test_bad_capture_tokens_exit_2(tmp_path, args, message):
    from typer.testing import CliRunner

    from benchflow.cli.main import app

    data = tmp_path / "qa.jsonl"
    data.write_text('{"id": "q1", "question": "2+2?", "answer": "4"}\n')
    script = tmp_path / "s.yaml"
    script.write_text("name: s\nsteps: [{text: hi}]\n")
    base = [] if "--model-server" in args else ["--model-base-url", "http://127.0.0.1:9/v1"]
    result = CliRunner().invoke(app, ["run", str(data), "-a", "model", "-m", "m", *base,
                                      *[str(script) if a == "s.yaml" else a for a in args],
                                      "--jobs-dir", str(tmp_path / "jobs")])
    assert result.exit_code == 2, result.output
    assert message in result.output
