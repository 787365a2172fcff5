"""Trace identity (always available) and OpenTelemetry export (optional `otel` extra).

`ids` has no third-party imports: importing `benchflow.telemetry` never pulls in
OpenTelemetry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchflow.errors import ConfigError
from benchflow.settings import get_settings
from benchflow.telemetry.ids import (
    TraceIds,
    new_run_id,
    new_span_id,
    new_trace_id,
    tool_call_span_id,
    traceparent,
)

if TYPE_CHECKING:
    from benchflow.telemetry.otel import OtelRecorder


def recorder(enabled: bool, job_name: str) -> OtelRecorder | None:
    """The span recorder for a job when `--otel` is given or an OTLP endpoint is configured
    (`OTEL_EXPORTER_OTLP_ENDPOINT`); otherwise None, and OpenTelemetry is never imported.

    Raises:
        ConfigError: telemetry asked for without the `otel` extra installed.
    """
    if not enabled and get_settings().otlp_endpoint is None:
        return None
    try:
        from benchflow.telemetry.otel import otlp_recorder
    except ImportError as exc:
        raise ConfigError(f"OpenTelemetry export needs the otel extra ({exc.name} is missing): "
                          "pip install 'benchflow[otel]', or drop --otel / unset "
                          "OTEL_EXPORTER_OTLP_ENDPOINT") from None
    return otlp_recorder(None, job_name)


__all__ = ["TraceIds", "recorder", "new_run_id", "new_span_id", "new_trace_id", "tool_call_span_id",
           "traceparent"]
