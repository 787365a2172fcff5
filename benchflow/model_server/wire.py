"""What benchflow reads out of model calls, for each provider's wire format.

Four APIs pass through benchflow's model server and relay: Anthropic Messages
(`/v1/messages`), OpenAI Chat Completions (`/v1/chat/completions`), OpenAI Responses
(`/v1/responses`) and Gemini (`/v1beta/models/<m>:generateContent` and
`:streamGenerateContent`). From a call this module reads:

- `api_of(path)`: which of them a request path is;
- `call_usage(path, response)`: the tokens of one (reassembled) response;
- `tool_io(path, request)`: the tool calls a request's conversation holds, with their
  arguments and the results the agent sent back (gemini reports neither over ACP);
- `reassemble_gemini(events)`: a streamed Gemini response as the one it adds up to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Api = Literal["anthropic", "openai-chat", "openai-responses", "gemini", "unknown"]

MAX_TOOL_OUTPUT_CHARS = 200_000
"""A tool result kept from a model call is cut to this many characters."""


def api_of(path: str) -> Api:
    """The wire API of a request path (query string ignored)."""
    path = path.split("?")[0].rstrip("/")
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    if ":generateContent" in path or ":streamGenerateContent" in path:
        return "gemini"
    return "unknown"


def request_model(path: str, request: Any) -> str | None:
    """The model a request asks for: its `model` field, or Gemini's `models/<m>:` path."""
    if isinstance(request, dict) and isinstance(request.get("model"), str):
        return request["model"]
    if "/models/" in path:
        return path.split("/models/", 1)[1].split(":", 1)[0].split("?", 1)[0] or None
    return None


@dataclass(frozen=True)
class CallTokens:
    """The tokens of one model call: `input` counts every prompt token (cached ones too)."""

    input: int = 0
    output: int = 0
    cached: int = 0

    def __add__(self, other: CallTokens) -> CallTokens:
        return CallTokens(self.input + other.input, self.output + other.output,
                          self.cached + other.cached)

    @property
    def empty(self) -> bool:
        return not (self.input or self.output or self.cached)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _get(obj: Any, camel: str) -> Any:
    """A Gemini field by its camelCase name or its snake_case twin."""
    if not isinstance(obj, dict):
        return None
    if camel in obj:
        return obj[camel]
    return obj.get("".join("_" + c.lower() if c.isupper() else c for c in camel))


def call_usage(path: str, response: Any) -> CallTokens | None:
    """The tokens a (reassembled) response reports, or None when it reports none."""
    if not isinstance(response, dict):
        return None
    api = api_of(path)
    if api == "gemini":
        meta = _get(response, "usageMetadata")
        if not isinstance(meta, dict):
            return None
        return CallTokens(_int(_get(meta, "promptTokenCount")),
                          _int(_get(meta, "candidatesTokenCount"))
                          + _int(_get(meta, "thoughtsTokenCount")),
                          _int(_get(meta, "cachedContentTokenCount")))
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None
    if api == "anthropic":
        cached = _int(usage.get("cache_read_input_tokens"))
        written = _int(usage.get("cache_creation_input_tokens"))
        return CallTokens(_int(usage.get("input_tokens")) + cached + written,
                          _int(usage.get("output_tokens")), cached)
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # chat completions
        details = usage.get("prompt_tokens_details") or {}
        return CallTokens(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")),
                          _int(details.get("cached_tokens")) if isinstance(details, dict) else 0)
    details = usage.get("input_tokens_details") or {}  # responses
    return CallTokens(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                      _int(details.get("cached_tokens")) if isinstance(details, dict) else 0)


def reassemble_gemini(events: list[Any]) -> dict[str, Any]:
    """Streamed `GenerateContentResponse` chunks as one response: the parts of the first
    candidate in order (consecutive text merged), its finish reason, the last usage."""
    parts: list[dict[str, Any]] = []
    response: dict[str, Any] = {}
    finish = None
    for chunk in events:
        if not isinstance(chunk, dict):
            continue
        for key in ("modelVersion", "responseId"):
            if chunk.get(key) is not None:
                response[key] = chunk[key]
        usage = _get(chunk, "usageMetadata")
        if usage is not None:
            response["usageMetadata"] = usage
        for candidate in chunk.get("candidates") or []:
            if not isinstance(candidate, dict) or candidate.get("index", 0) != 0:
                continue
            finish = _get(candidate, "finishReason") or finish
            for part in (candidate.get("content") or {}).get("parts") or []:
                if not isinstance(part, dict):
                    continue
                last = parts[-1] if parts else None
                if ("text" in part and last is not None and "text" in last
                        and bool(part.get("thought")) == bool(last.get("thought"))
                        and len(part) == len(last)):
                    last["text"] += part["text"]
                else:
                    parts.append(dict(part))
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **response}


@dataclass(frozen=True)
class ToolIO:
    """One tool call found in a request's conversation: its id on the wire, the tool's
    name, the arguments the model gave and the result the agent sent back."""

    call_id: str
    name: str | None = None
    arguments: dict[str, Any] | None = None
    output: str | None = None


def _text(value: Any) -> str:
    """The text of a tool result in any API's shape (a string, content parts, an object)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text(v.get("text", "") if isinstance(v, dict) and "text" in v else v)
                       for v in value)
    if isinstance(value, dict):
        for key in ("output", "content", "result", "text"):
            if key in value:
                return _text(value[key])
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def _loads(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return None


def _add(found: dict[str, ToolIO], call_id: Any, **fields: Any) -> None:
    if not isinstance(call_id, str) or not call_id:
        return
    old = found.get(call_id) or ToolIO(call_id)
    output = fields.get("output")
    if isinstance(output, str) and len(output) > MAX_TOOL_OUTPUT_CHARS:
        fields["output"] = output[:MAX_TOOL_OUTPUT_CHARS]
    found[call_id] = ToolIO(call_id, **{
        k: fields.get(k) if fields.get(k) is not None else getattr(old, k)
        for k in ("name", "arguments", "output")})


def tool_io(path: str, request: Any) -> list[ToolIO]:
    """The tool calls (and their results) in a request's conversation, in order."""
    if not isinstance(request, dict):
        return []
    found: dict[str, ToolIO] = {}
    api = api_of(path)
    if api == "anthropic":
        for message in request.get("messages") or []:
            for block in (message.get("content") if isinstance(message, dict) else None) or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    _add(found, block.get("id"), name=block.get("name"),
                         arguments=_loads(block.get("input")))
                elif block.get("type") == "tool_result":
                    _add(found, block.get("tool_use_id"), output=_text(block.get("content")))
    elif api == "openai-chat":
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                _add(found, call.get("id"), name=function.get("name"),
                     arguments=_loads(function.get("arguments")))
            if message.get("role") == "tool":
                _add(found, message.get("tool_call_id"), output=_text(message.get("content")))
    elif api == "openai-responses":
        items = request.get("input")
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            kind = str(item.get("type", ""))
            if kind.endswith("_output"):
                _add(found, item.get("call_id"), output=_text(item.get("output")))
            elif kind.endswith("call"):
                args = item.get("arguments", item.get("input", item.get("action")))
                _add(found, item.get("call_id"), name=item.get("name") or kind,
                     arguments=_loads(args))
    elif api == "gemini":
        for content in request.get("contents") or []:
            for part in (content.get("parts") if isinstance(content, dict) else None) or []:
                call, result = _get(part, "functionCall"), _get(part, "functionResponse")
                if isinstance(call, dict):
                    _add(found, call.get("id"), name=call.get("name"),
                         arguments=_loads(call.get("args")))
                if isinstance(result, dict):
                    _add(found, result.get("id"), name=result.get("name"),
                         output=_text(result.get("response")))
    return list(found.values())


__all__ = ["Api", "CallTokens", "ToolIO", "api_of", "call_usage", "reassemble_gemini",
           "request_model", "tool_io"]
