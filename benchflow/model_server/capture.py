"""Exact model-call capture: every request and response through the model server or relay.

With capture on (`--capture-model-calls`, `RolloutConfig.capture_model_calls`), each call
becomes one line of `<rollout>/model_calls.jsonl`:

```json
{"seq": 0, "ts": "2026-01-01T00:00:00Z", "source": "relay", "scene": "main", "role": "coder",
 "turn": 0, "round": null, "method": "POST", "path": "/v1/chat/completions", "status": 200,
 "duration_sec": 0.41, "stream": true, "request": {"model": "...", "messages": [...],
 "tools": [...], "temperature": 0.2}, "response": {"choices": [{"message": {...},
 "finish_reason": "stop", "logprobs": {...}, "token_ids": [...]}], "usage": {...}},
 "usage": {...}, "prompt_token_ids": [...], "completion_token_ids": [...],
 "logprobs": [-0.01, ...], "prompt_logprobs": [...]}
```

Streamed responses (server-sent events) are reassembled into the response the same call
would have returned unstreamed (OpenAI Chat Completions, Anthropic Messages; the Responses
API's final `response.completed`; other streams keep their events). Token ids and
log-probabilities are lifted out when the upstream returns them, unchanged, with a
`token_data` marker (`exact` | `absent`) on every call: see `token_data.py` for what the
relay asks vLLM and SGLang for (`ModelEndpoint.request_tokens`).
Headers are never recorded; request and response bodies go through the `scrub` function
given (the rollout passes a `Scrubber`: API keys and secret-named fields masked). The
caller (scene, role, turn, round, agent, model) comes from the key the call carried
(`traffic.ModelTraffic.where`), never from timing.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchflow.model_server.token_data import token_fields
from benchflow.model_server.wire import api_of, reassemble_gemini

MODEL_CALLS = "model_calls.jsonl"
MAX_CAPTURE_BYTES = 64 * 1024 * 1024
"""A response larger than this is recorded as truncated (the agent still gets all of it)."""

Place = Callable[[], dict[str, Any]]
Scrub = Callable[[Any], Any]


def _decoded(data: bytes, encoding: str | None) -> bytes:
    encoding = (encoding or "").strip().lower()
    try:
        if encoding == "gzip":
            return gzip.decompress(data)
        if encoding == "deflate":
            return zlib.decompress(data)
    except (OSError, zlib.error, EOFError):
        return data
    return data


def _json(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return data.decode("utf-8", "replace")


def sse_events(data: bytes) -> list[Any]:
    """The `data:` payloads of a server-sent-events body, JSON-decoded where possible."""
    out: list[Any] = []
    for block in data.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            continue
        payload = b"\n".join(lines)
        if payload.strip() == b"[DONE]":
            continue
        out.append(_json(payload))
    return out


def _merge_tool_call(calls: dict[int, dict[str, Any]], delta: dict[str, Any]) -> None:
    index = delta.get("index", len(calls))
    call = calls.setdefault(index, {"id": None, "type": "function",
                                    "function": {"name": "", "arguments": ""}})
    if delta.get("id"):
        call["id"] = delta["id"]
    if delta.get("type"):
        call["type"] = delta["type"]
    function = delta.get("function") or {}
    if function.get("name"):
        call["function"]["name"] += function["name"]
    if function.get("arguments"):
        call["function"]["arguments"] += function["arguments"]


def reassemble_openai_chat(events: list[Any]) -> dict[str, Any]:
    """Chat Completions chunks -> the `chat.completion` they add up to (content, reasoning,
    tool calls, logprobs, vLLM token ids, usage)."""
    response: dict[str, Any] = {"object": "chat.completion"}
    choices: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[int, dict[str, Any]]] = {}
    for chunk in events:
        if not isinstance(chunk, dict):
            continue
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) is not None:
                response[key] = chunk[key]
        for key in ("usage", "prompt_token_ids", "prompt_logprobs"):
            if chunk.get(key) is not None:
                response[key] = chunk[key]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            out = choices.setdefault(index, {"index": index, "message": {"role": "assistant",
                                                                         "content": ""},
                                             "finish_reason": None})
            delta = choice.get("delta") or {}
            message = out["message"]
            if delta.get("role"):
                message["role"] = delta["role"]
            if delta.get("content"):
                message["content"] += delta["content"]
            for key in ("reasoning_content", "reasoning"):
                if delta.get(key):
                    message[key] = message.get(key, "") + delta[key]
            for call in delta.get("tool_calls") or []:
                _merge_tool_call(calls.setdefault(index, {}), call)
            if choice.get("finish_reason"):
                out["finish_reason"] = choice["finish_reason"]
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                merged = out.setdefault("logprobs", {"content": []})
                merged["content"].extend(logprobs.get("content") or [])
            if choice.get("token_ids"):
                out.setdefault("token_ids", []).extend(choice["token_ids"])
    for index, by_index in calls.items():
        choices[index]["message"]["tool_calls"] = [by_index[i] for i in sorted(by_index)]
    response["choices"] = [choices[i] for i in sorted(choices)]
    return response


def reassemble_anthropic(events: list[Any]) -> dict[str, Any]:
    """Anthropic Messages stream events -> the message they add up to."""
    message: dict[str, Any] = {"type": "message", "content": []}
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start":
            message.update({k: v for k, v in (event.get("message") or {}).items()
                            if k != "content"})
        elif kind == "content_block_start":
            blocks[event.get("index", len(blocks))] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            block = blocks.setdefault(event.get("index", 0), {"type": "text", "text": ""})
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "input_json_delta":
                i = event.get("index", 0)
                partial_json[i] = partial_json.get(i, "") + delta.get("partial_json", "")
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            if event.get("usage"):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    for i, text in partial_json.items():
        blocks[i]["input"] = _json(text.encode()) if text else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def reassemble(path: str, events: list[Any]) -> Any:
    """The unstreamed response a stream adds up to, by API (by the request path)."""
    api = api_of(path)
    if api == "openai-chat":
        return reassemble_openai_chat(events)
    if api == "anthropic":
        return reassemble_anthropic(events)
    if api == "gemini":
        return reassemble_gemini(events)
    if api == "openai-responses":
        for event in reversed(events):
            if isinstance(event, dict) and event.get("type") in ("response.completed",
                                                                 "response.incomplete"):
                return event.get("response")
    return {"events": events}


def parse_body(data: bytes, encoding: str | None = None) -> Any:
    """A request or unstreamed response body as JSON (its text when it is not JSON)."""
    return _json(_decoded(data, encoding))


def parse_response(path: str, data: bytes, content_type: str | None,
                   encoding: str | None = None) -> tuple[bool, Any]:
    """(streamed, the response) of a call: a stream reassembled into the response it adds
    up to (`reassemble`), else the JSON body."""
    data = _decoded(data, encoding)
    stream = "text/event-stream" in (content_type or "")
    return stream, (reassemble(path, sse_events(data)) if stream else _json(data))


class ModelCallLog:
    """Appends one line per model call to `path` (`model_calls.jsonl`). Thread-safe: the
    server and relay answer each request on its own thread.

    Args:
        path: the `model_calls.jsonl` file.
        scrub: masks secrets in a JSON value (`benchflow.rollout.secrets.Scrubber`).
        place: returns the caller's scene, role, turn and round.
    """

    def __init__(self, path: Path, scrub: Scrub, place: Place | None = None) -> None:
        self.path = Path(path)
        self.place: Place = place or (dict)
        self._scrub = scrub
        self._lock = threading.Lock()
        self._seq = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, *, source: str, method: str, path: str, status: int, started: float,
               request: bytes, response: bytes, content_type: str | None,
               truncated: bool = False, request_encoding: str | None = None,
               response_encoding: str | None = None,
               where: dict[str, Any] | None = None,
               parsed: tuple[Any, tuple[bool, Any]] | None = None) -> dict[str, Any]:
        """Write one call. `started` is `time.time()` when the request arrived, `where` the
        caller (`ModelTraffic.where`: scene, role, turn, round, agent, model, from the key
        the call carried); the encodings are the bodies' `Content-Encoding` (gzip and
        deflate are decoded). `parsed`: the request and `parse_response()` of the response
        when the caller already has them."""
        if parsed is None:
            parsed = (parse_body(request, request_encoding),
                      parse_response(path, response, content_type, response_encoding))
        request_json, (stream, body) = parsed
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(started, UTC).isoformat().replace("+00:00", "Z"),
            "source": source, **(where if where is not None else self.where()), "method": method, "path": path,
            "status": status, "duration_sec": round(time.time() - started, 4),
            "stream": stream, "request": request_json, "response": body,
            **token_fields(body),
        }
        if truncated:
            entry["response_truncated"] = True
        entry = self._scrub(entry)
        with self._lock:
            entry = {"seq": self._seq, **entry}
            self._seq += 1
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return entry

    def where(self) -> dict[str, Any]:
        """The current prompt's scene, role, turn and round from `place()` (None when
        unknown): only for a server without per-role keys (`ModelTraffic`)."""
        try:
            place = self.place() or {}
        except Exception:  # noqa: BLE001 - attribution must never break the agent's call
            place = {}
        return {k: place.get(k) for k in ("scene", "role", "turn", "round")}


__all__ = ["MAX_CAPTURE_BYTES", "MODEL_CALLS", "ModelCallLog", "parse_body", "parse_response",
           "reassemble", "sse_events", "token_fields"]
