"""OpenTelemetry export of a job's rollouts (optional `otel` extra): importing
`benchflow.telemetry` never pulls in OpenTelemetry. The trace ids themselves are
`benchflow.trace_ids` (below every layer that stamps them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchflow.errors import ConfigError
from benchflow.settings import get_settings

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


__all__ = ["recorder"]
