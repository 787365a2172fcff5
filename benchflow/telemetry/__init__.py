"""Trace identity (always available) and OpenTelemetry export (optional `otel` extra).

`ids` has no third-party imports: importing `benchflow.telemetry` never pulls in
OpenTelemetry.
"""

from benchflow.telemetry.ids import (
    TraceIds,
    new_run_id,
    new_span_id,
    new_trace_id,
    tool_call_span_id,
    traceparent,
)

__all__ = ["TraceIds", "new_run_id", "new_span_id", "new_trace_id", "tool_call_span_id",
           "traceparent"]
