"""The agent-side tracing SDK: give each benchmark attempt (or production request) a
readable trace, exported as OpenTelemetry spans over OTLP/HTTP.

```python
from benchflow.tracing import Rollout, usage_from_openai

client = Rollout(agent_name="benchmark_agent", environment="benchmark")

with client.trace("benchmark_agent", trace_id=payload["attempt"]["traceId"]) as trace:
    trace.message(role="user", content=instruction)
    with trace.span("task", name="solve_benchmark_task") as task_span:
        with trace.llm("openai.responses", model="gpt-4.1-mini", provider="openai") as llm:
            response = ...
            llm.record_output(response)
            llm.set_usage(**usage_from_openai(response))
    trace.signal("benchmark.score", 1.0)
```

Importing this package loads neither OpenTelemetry, Docker, the ACP SDK nor the job
machinery; OpenTelemetry (the `otel` extra) is imported when the first span is exported.
The event taxonomy and API are listed in docs/reference/tracing-api.md.
"""

from benchflow.tracing._client import (
    BeforeSend,
    CheckResult,
    Event,
    LLMSpan,
    Rollout,
    Scrubber,
    Span,
    ToolCall,
    Trace,
    normalize_trace_id,
)
from benchflow.tracing._collector import DEFAULT_ENDPOINT
from benchflow.tracing._taxonomy import (
    CAPTURE_TYPES,
    END_TYPES,
    EVENT_TYPES,
    POINT_TYPES,
    START_TYPES,
    TRUNCATED,
    Limits,
)
from benchflow.tracing._usage import usage_from_openai

__all__ = [
    "CAPTURE_TYPES",
    "DEFAULT_ENDPOINT",
    "END_TYPES",
    "EVENT_TYPES",
    "POINT_TYPES",
    "START_TYPES",
    "TRUNCATED",
    "BeforeSend",
    "CheckResult",
    "Event",
    "LLMSpan",
    "Limits",
    "Rollout",
    "Scrubber",
    "Span",
    "ToolCall",
    "Trace",
    "normalize_trace_id",
    "usage_from_openai",
]
