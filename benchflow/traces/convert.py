"""Received spans -> events of the tracing taxonomy (the lines of `trace_events.jsonl`).

A span from benchflow's SDKs (Python or TypeScript) carries its start and end events in
`rollout.start` / `rollout.end` and its point events as span events with `rollout.event`:
they are read back as sent. Any other OpenTelemetry span is mapped:

| span | events |
|---|---|
| `gen_ai.operation.name` chat / text_completion / generate_content | `span.start` (span_type llm, model, provider) and `span.end` (usage from `gen_ai.usage.*`) |
| `gen_ai.operation.name` execute_tool | `tool.call` (tool name, call id, arguments) and `tool.result` |
| anything else | `span.start` (its attributes) and `span.end` |
| its span event `exception` | `error` (`exception.type`, `exception.message`) |
| its other span events | `span.update` (`event`: the name, `attributes`) |

The ids (trace, span, parent) always come from the OTLP span itself, never from the JSON.
"""

from __future__ import annotations

import json
from typing import Any

from benchflow.tracing._taxonomy import EVENT_TYPES, iso
from benchflow.traces.otlp import ReceivedSpan

_LLM_OPERATIONS = ("chat", "text_completion", "generate_content")


def _clean(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _base(span: ReceivedSpan, type: str, ns: int) -> dict[str, Any]:
    return {"type": type, "ts": iso(ns), "seq": None, "trace_id": span.trace_id,
            "span_id": span.span_id, "parent_span_id": span.parent_span_id,
            "name": span.name, "data": {}}


def _sdk_event(span: ReceivedSpan, raw: Any, fallback_ns: int) -> dict[str, Any] | None:
    """An event the SDK serialized, with the span's ids; None when it does not parse."""
    try:
        sent = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    if not isinstance(sent, dict) or sent.get("type") not in EVENT_TYPES:
        return None
    event = _base(span, sent["type"], fallback_ns)
    if isinstance(sent.get("ts"), str):
        event["ts"] = sent["ts"]
    if isinstance(sent.get("seq"), int):
        event["seq"] = sent["seq"]
    if isinstance(sent.get("name"), str):
        event["name"] = sent["name"]
    event["data"] = sent.get("data") if isinstance(sent.get("data"), dict) else {}
    return event


def _foreign_events(span: ReceivedSpan) -> list[dict[str, Any]]:
    a = span.attributes
    operation = a.get("gen_ai.operation.name")
    status = {2: "error", 1: "ok"}.get(span.status_code, "ok")
    error = span.status_message or None
    if operation in _LLM_OPERATIONS:
        start_type, end_type = "span.start", "span.end"
        start = _clean(span_type="llm", model=a.get("gen_ai.request.model"),
                       provider=a.get("gen_ai.provider.name") or a.get("gen_ai.system"),
                       attributes=a)
        usage = _clean(input_tokens=a.get("gen_ai.usage.input_tokens"),
                       output_tokens=a.get("gen_ai.usage.output_tokens"))
        end = _clean(usage=usage or None, model=a.get("gen_ai.response.model"), status=status,
                     error=error)
    elif operation == "execute_tool":
        start_type, end_type = "tool.call", "tool.result"
        start = _clean(tool_name=a.get("gen_ai.tool.name") or span.name,
                       tool_call_id=a.get("gen_ai.tool.call.id"),
                       arguments=a.get("gen_ai.tool.call.arguments"), attributes=a)
        end = _clean(tool_call_id=a.get("gen_ai.tool.call.id"),
                     output=a.get("gen_ai.tool.call.result"), status=status, error=error)
    else:
        start_type, end_type = "span.start", "span.end"
        start = _clean(span_type="span", attributes=a or None)
        end = _clean(status=status, error=error)
    end["duration_ms"] = (span.end_ns - span.start_ns) / 1e6
    first = _base(span, start_type, span.start_ns)
    first["data"] = start
    out = [first]
    for e in span.events:
        if e.name == "exception":
            event = _base(span, "error", e.time_ns)
            event["data"] = _clean(error_type=e.attributes.get("exception.type"),
                                   message=e.attributes.get("exception.message"))
        else:
            event = _base(span, "span.update", e.time_ns)
            event["data"] = _clean(event=e.name, attributes=e.attributes or None)
        out.append(event)
    last = _base(span, end_type, span.end_ns)
    last["data"] = end
    out.append(last)
    return out


def span_events(span: ReceivedSpan) -> tuple[list[dict[str, Any]], bool]:
    """The taxonomy events of one span, and whether it came from benchflow's SDK."""
    source = {"service": span.resource.get("service.name")}
    if span.attributes.get("rollout.kind") is not None:
        events = []
        start = _sdk_event(span, span.attributes.get("rollout.start"), span.start_ns)
        if start is not None:
            events.append(start)
        for e in span.events:
            event = _sdk_event(span, e.attributes.get("rollout.event"), e.time_ns)
            if event is not None:
                events.append(event)
        end = _sdk_event(span, span.attributes.get("rollout.end"), span.end_ns)
        if end is not None:
            events.append(end)
        if start is not None:
            return [{**e, "source": "sdk", **source} for e in events], True
    return [{**e, "source": "otel", **source} for e in _foreign_events(span)], False


__all__ = ["span_events"]
