"""SFT examples from captured model calls (`model_calls.jsonl`): exactly what the model saw.

Each successful chat call becomes one example: the request's `messages` (and `tools`) plus
the reply as the final assistant message. OpenAI Chat Completions calls are taken as they
are; Anthropic Messages calls are converted (system, text, tool_use -> `tool_calls`,
tool_result -> `tool` messages). Token ids and log-probabilities, when captured, ride along
in the example's `call` metadata, aligned with the assistant reply.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_TOKEN_KEYS = ("usage", "prompt_token_ids", "completion_token_ids", "logprobs",
               "logprob_tokens", "prompt_logprobs")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content
                       if isinstance(b, dict) and b.get("type") in ("text", "input_text",
                                                                    "output_text"))
    return ""


def _anthropic_messages(request: dict[str, Any], reply: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = _text(request.get("system"))
    if system:
        out.append({"role": "system", "content": system})
    for message in [*request.get("messages", []), {"role": "assistant", **reply}]:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        if message.get("role") == "assistant":
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"),
                                   "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            entry: dict[str, Any] = {"role": "assistant", "content": _text(blocks)}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                            "content": _text(block.get("content"))})
        text = _text([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
        if text:
            out.append({"role": "user", "content": text})
    return out


def _openai_tools_from_anthropic(tools: Any) -> list[dict[str, Any]] | None:
    if not isinstance(tools, list):
        return None
    return [{"type": "function", "function": {"name": t.get("name"),
                                              "description": t.get("description", ""),
                                              "parameters": t.get("input_schema", {})}}
            for t in tools if isinstance(t, dict)]


def example_from_call(call: dict[str, Any]) -> dict[str, Any] | None:
    """One SFT example from one captured call, or None (not a chat call, or it failed)."""
    request, response = call.get("request"), call.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        return None
    if not (200 <= int(call.get("status") or 0) < 300):
        return None
    path = str(call.get("path", "")).split("?")[0]
    if path.endswith("/chat/completions"):
        choices = response.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return None
        reply = {k: v for k, v in (choices[0].get("message") or {}).items()
                 if k in ("role", "content", "tool_calls", "reasoning_content")}
        reply.setdefault("role", "assistant")
        messages = [*request.get("messages", []), reply]
        tools = request.get("tools")
    elif path.endswith("/messages") and "content" in response:
        messages = _anthropic_messages(request, {"content": response.get("content")})
        tools = _openai_tools_from_anthropic(request.get("tools"))
    else:
        return None
    example: dict[str, Any] = {"messages": messages}
    if tools:
        example["tools"] = tools
    example["role"] = call.get("role")
    example["call"] = {"call_seq": call.get("seq"), "path": path, "scene": call.get("scene"),
                       "turn": call.get("turn"), "round": call.get("round"),
                       "request_model": request.get("model"),
                       **{k: call[k] for k in _TOKEN_KEYS if call.get(k) is not None}}
    return example


def model_call_examples(path: Path) -> Iterator[dict[str, Any]]:
    """Examples from a `model_calls.jsonl` file, in call order (nothing if it is absent)."""
    if not path.is_file():
        return
    with path.open("rb") as fh:
        for line in fh:
            try:
                call = json.loads(line)
            except ValueError:
                continue  # a torn last line
            example = example_from_call(call) if isinstance(call, dict) else None
            if example is not None:
                yield example
