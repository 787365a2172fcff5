"""The event taxonomy an agent's trace is made of, and how events are bounded.

Every event is one JSON object:

```json
{"type": "message", "ts": "2025-01-01T00:00:00.000001Z", "seq": 3,
 "trace_id": "<32 hex>", "span_id": "<16 hex>", "parent_span_id": "<16 hex> | null",
 "name": "...", "data": {"role": "user", "content": "...", "internal": false}}
```

`seq` orders the events of one trace as the SDK emitted them (timestamps of two events
may be equal). The same shape is what the SDK's `before_send` receives and what
benchflow writes to a rollout's `trace_events.jsonl`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

START_TYPES = ("trace.start", "span.start", "llm.stream_start", "tool.call")
"""Events that open a span (the trace, a step, a streaming model call, a tool call)."""
END_TYPES = ("trace.end", "span.end", "llm.stream_end", "tool.result")
"""The events closing them, in the same order as `START_TYPES`."""
POINT_TYPES = ("message", "span.update", "llm.stream_chunk", "feedback", "user.signal",
               "identity.update", "metric", "error", "eval.result")
"""Events at one instant, inside a span."""
EVENT_TYPES = START_TYPES + END_TYPES + POINT_TYPES
"""Every event type of the taxonomy."""
CAPTURE_TYPES = ("metric", "error", "eval.result", "message", "feedback", "user.signal",
                 "identity.update", "span.update")
"""The types `Rollout.capture_event` accepts (point events; spans have their own methods)."""

TRUNCATED = "…[truncated {n} chars]"
"""What replaces the end of a string cut at `Limits.max_string_chars`."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what one trace may hold, so a runaway agent cannot flood the collector.

    Strings longer than `max_string_chars` are cut and end with `…[truncated N chars]`;
    an event whose JSON is still over `max_event_bytes` keeps only a preview of its data;
    a span keeps its first `max_events_per_span` point events (the rest are counted in
    its end event as `dropped_events`); containers deeper than `max_depth` become strings.
    Every event that lost something carries `"truncated": true` in its data.
    """

    max_string_chars: int = 16_384
    max_event_bytes: int = 65_536
    max_events_per_span: int = 1_000
    max_depth: int = 12


def now_ns() -> int:
    import time

    return time.time_ns()


def iso(ns: int) -> str:
    """An epoch time in ns as an ISO 8601 UTC string with microseconds."""
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def to_jsonable(value: Any, depth: int = 0, max_depth: int = 12) -> Any:
    """`value` as JSON data: pydantic models and dataclasses as dicts, other objects as str."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if depth >= max_depth:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, depth + 1, max_depth) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v, depth + 1, max_depth) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    dump = getattr(value, "model_dump", None)  # pydantic v2 (OpenAI's response objects)
    if callable(dump):
        try:
            return to_jsonable(dump(mode="json"), depth + 1, max_depth)
        except Exception:  # noqa: BLE001 - fall back to str() for odd models
            return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), depth + 1, max_depth)
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def scrub_data(data: Any, scrubber: Callable[[str], str]) -> Any:
    """`data` with `scrubber` applied to every string in it (keys are left alone)."""
    return _map_strings(data, scrubber)


def bound_event(event: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """`event` cut to `limits` (strings, then the whole event); marks `data.truncated`."""
    cut = False

    def clip(text: str) -> str:
        nonlocal cut
        if len(text) <= limits.max_string_chars:
            return text
        cut = True
        extra = len(text) - limits.max_string_chars
        return text[:limits.max_string_chars] + TRUNCATED.format(n=extra)

    data = _map_strings(event.get("data") or {}, clip)
    size = len(json.dumps(data, ensure_ascii=False))
    if size > limits.max_event_bytes:
        preview = json.dumps(data, ensure_ascii=False)[: limits.max_event_bytes // 2]
        data = {"preview": preview, "original_bytes": size}
        cut = True
    if cut:
        data["truncated"] = True
    return {**event, "data": data}


__all__ = ["CAPTURE_TYPES", "END_TYPES", "EVENT_TYPES", "Limits", "POINT_TYPES", "START_TYPES",
           "TRUNCATED", "bound_event", "iso", "now_ns", "scrub_data", "to_jsonable"]
