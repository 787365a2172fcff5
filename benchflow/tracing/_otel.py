"""Export of ended spans as OpenTelemetry spans over OTLP/HTTP (the `otel` extra).

One SDK span -> one OpenTelemetry span with the SDK's own ids (trace id, span id,
parent span id), its real start and end times, and

| attribute | holds |
|---|---|
| `rollout.kind` | trace, span, llm or tool |
| `rollout.start`, `rollout.end` | the start and end events (JSON, taxonomy shape) |
| `gen_ai.*`, `enduser.id`, `session.id` | the GenAI / general semantic conventions' mirror of them, for other OTel tools |

Point events (messages, chunks, feedback, signals, errors...) are span events named by
their type, with the event as JSON in `rollout.event`. benchflow's trace listener turns
these back into taxonomy events; any OTLP backend shows them as a normal span tree.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from benchflow.tracing._collector import collector_headers, traces_url
from benchflow.tracing._taxonomy import Limits

if TYPE_CHECKING:
    from benchflow.tracing._client import _Node

SCOPE = "benchflow.tracing"


class _PresetIds(IdGenerator):
    """Hands out the ids the SDK chose (per thread: set right before start_span)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def preset(self, trace_id: int, span_id: int) -> None:
        self._local.trace_id, self._local.span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        return self._local.__dict__.pop("trace_id", None) or 1

    def generate_span_id(self) -> int:
        return self._local.__dict__.pop("span_id", None) or 1


def _ns(iso: str) -> int:
    moment = datetime.fromisoformat(iso)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _conventions(node: _Node) -> dict[str, Any]:
    """The semantic-convention attributes of a span, from its (post-hook) events."""
    start = (node.start_event or {}).get("data") or {}
    end = (node.end_event or {}).get("data") or {}
    usage = end.get("usage") or {}
    found: dict[str, Any] = {
        "gen_ai.operation.name": {"llm": "chat", "tool": "execute_tool",
                                  "trace": "invoke_agent"}.get(node.kind),
        "gen_ai.agent.name": start.get("agent_name"),
        "gen_ai.request.model": start.get("model"),
        "gen_ai.response.model": end.get("model"),
        "gen_ai.provider.name": start.get("provider"),
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.tool.name": start.get("tool_name"),
        "gen_ai.tool.call.id": start.get("tool_call_id"),
        "gen_ai.conversation.id": start.get("conversation_id"),
        "enduser.id": start.get("user_id"),
        "session.id": start.get("session_id"),
        "rollout.span_type": start.get("span_type"),
        "rollout.external_trace_id": start.get("external_trace_id"),
    }
    return {k: v for k, v in found.items() if isinstance(v, str | int | float | bool)}


class OtelExport:
    """A TracerProvider of its own (never the global one) exporting the SDK's spans."""

    def __init__(self, *, service_name: str, environment: str | None, endpoint: str | None,
                 api_key: str | None, headers: Mapping[str, str] | None,
                 exporter: SpanExporter | None, processors: Iterable[SpanProcessor],
                 limits: Limits) -> None:
        self._ids = _PresetIds()
        attributes = {"service.name": service_name}
        if environment:
            attributes["deployment.environment.name"] = environment
        self.provider = TracerProvider(
            resource=Resource.create(attributes), id_generator=self._ids,
            shutdown_on_exit=False,
            span_limits=SpanLimits(max_events=limits.max_events_per_span + 16,
                                   max_span_attributes=64, max_event_attributes=8))
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=traces_url(endpoint),
                                        headers=collector_headers(api_key, headers))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        for processor in processors:
            self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer(SCOPE)
        self._lock = threading.Lock()

    def export(self, node: _Node) -> None:
        """Emit `node` (ended) as one OpenTelemetry span."""
        trace_id, span_id = int(node.trace_id, 16), int(node.span_id, 16)
        if node.parent_span_id is None:
            context = otel_trace.set_span_in_context(otel_trace.INVALID_SPAN)
        else:
            parent = SpanContext(trace_id, int(node.parent_span_id, 16), is_remote=False,
                                 trace_flags=TraceFlags(TraceFlags.SAMPLED))
            context = otel_trace.set_span_in_context(NonRecordingSpan(parent))
        attributes: dict[str, Any] = {"rollout.kind": node.kind, **_conventions(node)}
        if node.start_event is not None:
            attributes["rollout.start"] = _json(node.start_event)
        if node.end_event is not None:
            attributes["rollout.end"] = _json(node.end_event)
        with self._lock:  # the preset ids belong to this start_span
            self._ids.preset(trace_id, span_id)
            span = self.tracer.start_span(node.name, context=context, attributes=attributes,
                                          start_time=node.start_ns)
        for event in node.events:
            span.add_event(event["type"], {"rollout.event": _json(event)},
                           timestamp=_ns(event["ts"]))
        end = (node.end_event or {}).get("data") or {}
        if end.get("status") == "error":
            span.set_status(Status(StatusCode.ERROR, str(end.get("error") or "")[:500]))
        span.end(end_time=node.end_ns)

    def flush(self, timeout_sec: float) -> bool:
        return self.provider.force_flush(int(timeout_sec * 1000))

    def shutdown(self) -> None:
        self.provider.shutdown()


__all__ = ["OtelExport", "SCOPE"]
