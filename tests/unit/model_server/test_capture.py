"""Model-call capture: through the relay against a fake vLLM-style upstream on 127.0.0.1
that returns token ids and log-probabilities (plain and streamed), and through the scripted
model server; then SFT examples built from what was captured."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from benchflow.model_server import ModelServer, parse_script
from benchflow.model_server.capture import ModelCallLog, reassemble_anthropic, sse_events
from benchflow.model_server.relay import ModelRelay
from benchflow.rollout.secrets import Scrubber
from benchflow.trajectory.exporters import model_call_examples

from .conftest import SCRIPT

KEY = "sk-test-upstream-key-0123456789abcdef"
PROMPT_IDS = [151644, 872, 198, 3838]
COMPLETION = [("The", 785, -0.01), (" answer", 4226, -0.25), (" is", 374, -0.5),
              (" 42", 220, -1.5)]


def _logprob(token: str, lp: float) -> dict[str, Any]:
    return {"token": token, "logprob": lp, "bytes": list(token.encode()), "top_logprobs": []}


class _FakeVllm(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions like vLLM with `logprobs` and `return_token_ids`."""

    protocol_version = "HTTP/1.1"
    seen_auth: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen_auth.append(self.headers.get("Authorization", ""))
        assert body.get("logprobs") and body.get("return_token_ids")
        usage = {"prompt_tokens": len(PROMPT_IDS), "completion_tokens": len(COMPLETION),
                 "total_tokens": len(PROMPT_IDS) + len(COMPLETION)}
        if not body.get("stream"):
            payload = json.dumps({
                "id": "cmpl-1", "object": "chat.completion", "model": body["model"],
                "prompt_token_ids": PROMPT_IDS,
                "prompt_logprobs": [None, {"872": {"logprob": -3.2}}],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant",
                                         "content": "".join(t for t, _, _ in COMPLETION)},
                             "logprobs": {"content": [_logprob(t, lp) for t, _, lp in COMPLETION]},
                             "token_ids": [i for _, i, _ in COMPLETION]}],
                "usage": usage}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        chunks = [{"id": "cmpl-2", "model": body["model"], "prompt_token_ids": PROMPT_IDS,
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
        for token, token_id, lp in COMPLETION:
            chunks.append({"id": "cmpl-2", "choices": [{
                "index": 0, "delta": {"content": token}, "token_ids": [token_id],
                "logprobs": {"content": [_logprob(token, lp)]}}]})
        chunks.append({"id": "cmpl-2", "choices": [{"index": 0, "delta": {
            "tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                            "function": {"name": "bash", "arguments": "{\"cmd\": "}}]}}]})
        chunks.append({"id": "cmpl-2", "choices": [{"index": 0, "delta": {
            "tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]},
            "finish_reason": "tool_calls"}]})
        chunks.append({"id": "cmpl-2", "choices": [], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for data in [*(json.dumps(c) for c in chunks), "[DONE]"]:
            event = f"data: {data}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture
def vllm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeVllm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _calls(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_relay_captures_token_ids_and_logprobs(vllm: str, tmp_path: Path) -> None:
    place = {"scene": "main", "role": "coder", "turn": 0, "round": None}
    log = ModelCallLog(tmp_path / "model_calls.jsonl", Scrubber([]), place=lambda: place)
    request = {"model": "qwen", "messages": [{"role": "user", "content": "what is the answer?"}],
               "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
               "temperature": 0.3, "logprobs": True, "return_token_ids": True,
               "api_key": "inline-secret-value"}
    with ModelRelay(vllm, host="127.0.0.1", capture=log) as relay:
        plain = httpx.post(f"{relay.url}/v1/chat/completions", json=request,
                           headers={"Authorization": f"Bearer {KEY}"})
        place = {**place, "role": "reviewer", "turn": 1}
        streamed = httpx.post(f"{relay.url}/v1/chat/completions",
                              json={**request, "stream": True},
                              headers={"Authorization": f"Bearer {KEY}"})
    assert plain.status_code == streamed.status_code == 200
    assert plain.json()["choices"][0]["token_ids"] == [785, 4226, 374, 220]  # untouched
    assert _FakeVllm.seen_auth[-2:] == [f"Bearer {KEY}"] * 2  # the key reached the upstream

    text = (tmp_path / "model_calls.jsonl").read_text()
    assert KEY not in text and "inline-secret-value" not in text
    first, second = _calls(tmp_path / "model_calls.jsonl")
    assert (first["seq"], first["source"], first["role"], first["turn"]) == (0, "relay", "coder", 0)
    assert (second["role"], second["turn"], second["stream"]) == ("reviewer", 1, True)
    assert first["request"]["messages"] == request["messages"]
    assert first["request"]["tools"] == request["tools"]
    assert first["request"]["temperature"] == 0.3 and first["request"]["api_key"] == "***"
    for call in (first, second):
        assert call["prompt_token_ids"] == PROMPT_IDS
        assert call["completion_token_ids"] == [785, 4226, 374, 220]
        assert call["logprobs"] == [-0.01, -0.25, -0.5, -1.5]
        assert call["logprob_tokens"] == ["The", " answer", " is", " 42"]
        assert call["usage"]["completion_tokens"] == 4
        assert call["duration_sec"] >= 0 and call["status"] == 200
    assert first["prompt_logprobs"] == [None, {"872": {"logprob": -3.2}}]
    tokens = first["response"]["choices"][0]["logprobs"]["content"]
    assert [t["token"] for t in tokens] == ["The", " answer", " is", " 42"]  # data, not secrets
    message = second["response"]["choices"][0]["message"]  # the stream, reassembled
    assert message["content"] == "The answer is 42"
    assert message["tool_calls"] == [{"id": "call_9", "type": "function",
                                      "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}]
    assert second["response"]["choices"][0]["finish_reason"] == "tool_calls"

    examples = list(model_call_examples(tmp_path / "model_calls.jsonl"))
    assert [e["role"] for e in examples] == ["coder", "reviewer"]
    assert examples[1]["messages"] == [*request["messages"], {
        "role": "assistant", "content": "The answer is 42", "tool_calls": message["tool_calls"]}]
    assert examples[1]["tools"] == request["tools"]
    assert examples[1]["call"]["completion_token_ids"] == [785, 4226, 374, 220]


def test_scripted_model_server_captures_what_the_agent_saw(tmp_path: Path) -> None:
    log = ModelCallLog(tmp_path / "model_calls.jsonl", Scrubber([]),
                       place=lambda: {"role": "agent", "turn": 0})
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "be brief",
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": "Bash", "input_schema": {
                "type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}}]}
    with ModelServer(parse_script(SCRIPT), host="127.0.0.1", capture=log) as server:
        plain = httpx.post(f"{server.url}/v1/messages", json=body,
                           headers={"x-api-key": "sk-ant-secret-abcdefghijklmnop"})
        streamed = httpx.post(f"{server.url}/v1/messages", json={**body, "stream": True})
    assert plain.status_code == streamed.status_code == 200
    calls = _calls(tmp_path / "model_calls.jsonl")
    assert [c["source"] for c in calls] == ["model_server"] * 2
    assert calls[0]["response"] == plain.json()
    rebuilt = calls[1]["response"]  # the SSE stream, reassembled: the same step's answer
    assert rebuilt["content"][-1]["type"] == "tool_use"
    assert rebuilt["content"][-1]["input"] == {"command": "echo 42 > /app/answer.txt"}
    assert [b["type"] for b in rebuilt["content"]] == [b["type"] for b in plain.json()["content"]]
    assert "sk-ant-secret" not in (tmp_path / "model_calls.jsonl").read_text()
    examples = list(model_call_examples(tmp_path / "model_calls.jsonl"))
    assert examples[0]["messages"][0] == {"role": "system", "content": "be brief"}
    assert examples[0]["messages"][1] == {"role": "user", "content": "go"}
    reply = examples[0]["messages"][-1]
    assert reply["role"] == "assistant"
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == {
        "command": "echo 42 > /app/answer.txt"}
    assert examples[0]["tools"][0]["function"]["name"] == "Bash"


def test_sse_reassembly_of_anthropic_text_and_thinking() -> None:
    stream = b"".join(f"event: x\ndata: {json.dumps(e)}\n\n".encode() for e in [
        {"type": "message_start", "message": {"id": "m1", "role": "assistant",
                                              "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking",
                                                                      "thinking": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text",
                                                                      "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 2}},
    ])
    message = reassemble_anthropic(sse_events(stream))
    assert message["content"] == [{"type": "thinking", "thinking": "hmm"},
                                  {"type": "text", "text": "Hi"}]
    assert message["usage"] == {"input_tokens": 5, "output_tokens": 2}
    assert message["stop_reason"] == "end_turn"
