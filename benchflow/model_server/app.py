"""Route one HTTP request to its wire format, answer it from the script and log it.

Transport-free: `ScriptedModelApp.handle(method, target, body)` returns an `HttpReply`, so
the routing and logging are tested without sockets; `server.py` only moves bytes.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from benchflow.model_server import anthropic, gemini, openai_chat, openai_responses
from benchflow.model_server.conversation import Conversation, RequestError
from benchflow.model_server.replies import plan_reply
from benchflow.model_server.script import Script
from benchflow.model_server.wire import CallTokens

logger = logging.getLogger(__name__)

REQUEST_LOG = "requests.jsonl"

ENDPOINTS = (
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "POST /v1/chat/completions",
    "POST /v1/responses",
    "POST /v1beta/models/{model}:generateContent",
    "POST /v1beta/models/{model}:streamGenerateContent?alt=sse",
    "POST /v1beta/models/{model}:countTokens",
    "GET /v1/models",
    "GET /v1/models/{model}",
)

_GEMINI = re.compile(
    r"/models/(?P<model>[^:]+):(?P<method>generateContent|streamGenerateContent|countTokens)$"
)
_MODELS = re.compile(r"/(?P<version>v\d+(?:alpha|beta)?\d*)/models(?:/(?P<model>[^:]+))?$")


@dataclass
class HttpReply:
    """A response to write: a JSON body, or server-sent events when `events` is set."""

    status: int
    body: Any = None
    events: list[bytes] | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    request: Any = None
    """The request body as parsed (JSON), for whoever counts and notes calls."""
    tokens: CallTokens | None = None
    """The tokens of a scripted answer (its estimated input and output)."""

    @property
    def content_type(self) -> str:
        return "text/event-stream" if self.events is not None else "application/json"

    def payload(self) -> bytes:
        return json.dumps(self.body, ensure_ascii=False).encode()


class RequestLog:
    """Appends one JSON line per request (`summary` + `body`) to `<log_dir>/requests.jsonl`."""

    def __init__(self, log_dir: str | Path | None) -> None:
        self.path = Path(log_dir) / REQUEST_LOG if log_dir is not None else None
        self.summaries: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, summary: dict[str, Any], body: Any) -> dict[str, Any]:
        with self._lock:
            summary = {"seq": len(self.summaries), **summary}
            self.summaries.append(summary)
            if self.path is not None:
                line = json.dumps({"summary": summary, "body": body}, ensure_ascii=False)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
        return summary


class ScriptedModelApp:
    """Answers provider API requests from a `Script` and logs every request."""

    def __init__(self, script: Script, log_dir: str | Path | None = None) -> None:
        self.script = script
        self.log = RequestLog(log_dir)
        self._faults = [[fault, fault.times] for fault in script.faults]
        self._faults_lock = threading.Lock()

    def _next_fault(self) -> RequestError | None:
        """The injected error for this model request, while the script's faults last."""
        with self._faults_lock:
            for pending in self._faults:
                if pending[1] > 0:
                    pending[1] -= 1
                    return RequestError(pending[0].message, status=pending[0].status)
        return None

    def handle(
        self, method: str, target: str, body: bytes, content_encoding: str | None = None,
        role: str | None = None,
    ) -> HttpReply:
        """Answer one request; never raises (a bug becomes a logged 500). `role`: the
        role whose key the request carried (rules may target it)."""
        started = time.time()
        parts = urlsplit(target)
        path = parts.path.rstrip("/") or "/"
        query = parse_qs(parts.query)
        parsed: Any = body.decode("utf-8", "replace") if body else None
        api = _api_of(path)
        try:
            if method in ("GET", "HEAD"):
                reply = self._get(path)
            elif method == "POST":
                body = _decode(body, content_encoding)
                parsed = _json_body(body)
                reply = self._post(path, query, parsed, role)
            else:
                raise RequestError(
                    f"method {method} is not supported; endpoints: {', '.join(ENDPOINTS)}",
                    status=405,
                )
        except RequestError as exc:
            reply = HttpReply(
                exc.status, _error_module(api).error_body(exc.status, exc.message, exc.param)
            )
            reply.summary = {"answer": "error", "error": exc.message}
        except Exception as exc:  # a server bug must still answer the agent and be logged
            logger.exception("model server failed on %s %s", method, path)
            message = f"scripted model server error: {type(exc).__name__}: {exc}"
            reply = HttpReply(500, _error_module(api).error_body(500, message))
            reply.summary = {"answer": "error", "error": message}
        summary = {
            "ts": started,
            "method": method,
            "path": target,
            "api": api,
            **({"role": role} if role is not None else {}),
            "status": reply.status,
            **reply.summary,
            "duration_sec": round(time.time() - started, 6),
        }
        reply.summary = self.log.write(summary, parsed)
        reply.request = parsed
        return reply

    def _get(self, path: str) -> HttpReply:
        if path in ("/", "/health", "/healthz"):
            return HttpReply(
                200, {"status": "ok", "script": self.script.name}, summary={"answer": "health"}
            )
        match = _MODELS.search(path)
        if match is None:
            raise RequestError(
                f"no GET endpoint at {path}; endpoints: {', '.join(ENDPOINTS)}", status=404
            )
        if match["model"]:
            name = match["model"].removeprefix("models/")
            return HttpReply(200, model_entry(name), summary={"answer": "model", "model": name})
        entries = [model_entry(m) for m in self.script.models]
        listing = {
            "object": "list",
            "data": entries,
            "models": entries,
            "has_more": False,
            "first_id": entries[0]["id"] if entries else None,
            "last_id": entries[-1]["id"] if entries else None,
        }
        return HttpReply(200, listing, summary={"answer": "models"})

    def _post(self, path: str, query: dict[str, list[str]], body: dict[str, Any],
              role: str | None = None) -> HttpReply:
        if path.endswith("/messages/count_tokens"):
            return HttpReply(200, anthropic.count_tokens(body), summary={"answer": "count_tokens"})
        if path.endswith("/messages"):
            return self._answer(anthropic, anthropic.parse_request(body), role)
        if path.endswith("/chat/completions"):
            return self._answer(openai_chat, openai_chat.parse_request(body), role)
        if path.endswith("/responses"):
            return self._answer(openai_responses, openai_responses.parse_request(body), role)
        match = _GEMINI.search(path)
        if match:
            model = match["model"].removeprefix("models/")
            if match["method"] == "countTokens":
                return HttpReply(
                    200, gemini.count_tokens(body, model), summary={"answer": "count_tokens"}
                )
            stream = match["method"] == "streamGenerateContent"
            if stream and query.get("alt", [""])[0] != "sse":
                raise RequestError(
                    "streamGenerateContent is served as SSE only; add `?alt=sse` to the URL",
                    param="alt",
                )
            return self._answer(gemini, gemini.parse_request(body, model, stream=stream), role)
        raise RequestError(
            f"no POST endpoint at {path}; endpoints: {', '.join(ENDPOINTS)}", status=404
        )

    def _answer(self, wire: ModuleType, conv: Conversation, role: str | None = None
                ) -> HttpReply:
        fault = self._next_fault()
        if fault is not None:
            raise fault
        conv.role = role
        reply = plan_reply(self.script, conv)
        summary = {
            "answer": reply.source,
            "model": conv.model,
            "stream": conv.stream,
            "tools": [t.name for t in conv.tools],
            "tool_results": conv.progress.tool_results,
            "finished_turns": conv.progress.finished_turns,
            **reply.summary(),
        }
        tokens = CallTokens(conv.input_tokens, reply.output_tokens)
        if conv.stream:
            return HttpReply(200, events=wire.render_events(reply, conv), summary=summary,
                             tokens=tokens)
        return HttpReply(200, wire.render(reply, conv), summary=summary, tokens=tokens)


def model_entry(name: str) -> dict[str, Any]:
    """One model as OpenAI, Anthropic and Gemini clients all read it (each ignores the others' keys)."""
    return {
        "id": name,
        "object": "model",
        "type": "model",
        "created": 1_700_000_000,
        "created_at": "2025-01-01T00:00:00Z",
        "owned_by": "benchflow",
        "display_name": name,
        "name": f"models/{name}",
        "displayName": name,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
    }


def _decode(body: bytes, encoding: str | None) -> bytes:
    encoding = (encoding or "identity").strip().lower()
    try:
        if encoding in ("identity", ""):
            return body
        if encoding in ("gzip", "x-gzip"):
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error) as exc:
        raise RequestError(f"the request body is not valid {encoding}: {exc}") from exc
    raise RequestError(
        f"Content-Encoding {encoding!r} is not supported; send identity, gzip or deflate",
        status=415,
    )


def _json_body(body: bytes) -> dict[str, Any]:
    if not body:
        raise RequestError("the request body is empty; expected a JSON object")
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RequestError(f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def _api_of(path: str) -> str:
    if "/messages" in path:
        return anthropic.API
    if path.endswith("/chat/completions"):
        return openai_chat.API
    if path.endswith("/responses"):
        return openai_responses.API
    if _GEMINI.search(path) or "/v1beta/" in path or "/v1alpha/" in path:
        return gemini.API
    return "unknown"


def _error_module(api: str) -> ModuleType:
    return {
        anthropic.API: anthropic,
        openai_chat.API: openai_chat,
        openai_responses.API: openai_chat,
        gemini.API: gemini,
    }.get(api, openai_chat)
