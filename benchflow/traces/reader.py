"""Reading a rollout's `trace_events.jsonl`: events in order, and the span tree.

The file is in arrival order (a span's events arrive when it ends); `read_events` sorts
them by trace, time and the SDK's `seq`. `span_tree` rebuilds the nesting from the
parent ids: a span whose parent never arrived is shown as a root.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchflow.tracing._taxonomy import END_TYPES, START_TYPES

_START = set(START_TYPES)
_END = set(END_TYPES)


def iter_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The events of `path` as written; unreadable lines are skipped."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                yield event


def _order(event: dict[str, Any]) -> tuple[str, str, int, int]:
    kind = 0 if event["type"] in _START else 2 if event["type"] in _END else 1
    seq = event.get("seq")
    return (str(event.get("trace_id")), str(event.get("ts")),
            seq if isinstance(seq, int) else -1, kind)


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of a trace file, in the order they happened."""
    return sorted(iter_lines(path), key=_order)


@dataclass
class SpanNode:
    """One span of a trace and what happened in it."""

    span_id: str
    name: str
    type: str
    """The start event's type (trace.start, span.start, llm.stream_start, tool.call)."""
    start: dict[str, Any]
    end: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    children: list[SpanNode] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """trace, llm, tool or span (what to draw it as)."""
        if self.type == "trace.start":
            return "trace"
        if self.type == "tool.call":
            return "tool"
        if self.type == "llm.stream_start" or self.start.get("data", {}).get("span_type") == "llm":
            return "llm"
        return "span"

    @property
    def status(self) -> str:
        return str(((self.end or {}).get("data") or {}).get("status") or
                   ("open" if self.end is None else "ok"))

    @property
    def duration_ms(self) -> float | None:
        value = ((self.end or {}).get("data") or {}).get("duration_ms")
        return value if isinstance(value, int | float) else None

    @property
    def timeline(self) -> list[tuple[str, Any]]:
        """Point events and child spans in the order they happened: ("event", event) or
        ("span", SpanNode)."""
        def key(event: dict[str, Any]) -> tuple[str, int]:
            seq = event.get("seq")
            return str(event.get("ts")), seq if isinstance(seq, int) else -1

        items = [(key(e), "event", e) for e in self.events]
        items += [(key(c.start), "span", c) for c in self.children]
        return [(kind, item) for _, kind, item in sorted(items, key=lambda t: t[0])]

    @property
    def usage(self) -> dict[str, Any] | None:
        return ((self.end or {}).get("data") or {}).get("usage")


def span_tree(events: list[dict[str, Any]]) -> list[SpanNode]:
    """The roots of the trace(s) in `events` (sorted), children in start order."""
    nodes: dict[str, SpanNode] = {}
    parents: dict[str, str | None] = {}
    loose: list[dict[str, Any]] = []
    for event in events:
        span_id = str(event.get("span_id"))
        if event["type"] in _START and span_id not in nodes:
            nodes[span_id] = SpanNode(span_id, str(event.get("name")), event["type"], event)
            parents[span_id] = event.get("parent_span_id")
        elif span_id in nodes and event["type"] in _END:
            nodes[span_id].end = event
        elif span_id in nodes:
            nodes[span_id].events.append(event)
        else:
            loose.append(event)
    for event in loose:  # a point event before its span's start (clock skew)
        if str(event.get("span_id")) in nodes:
            nodes[str(event["span_id"])].events.append(event)
    roots = []
    for span_id, node in nodes.items():
        parent = nodes.get(str(parents[span_id])) if parents[span_id] else None
        (parent.children if parent is not None else roots).append(node)
    return roots


__all__ = ["SpanNode", "iter_lines", "read_events", "span_tree"]
