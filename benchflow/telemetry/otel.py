"""OpenTelemetry spans of a job, built from what the rollouts recorded (the `otel` extra).

`OtelRecorder` is a `RolloutListener`: when a rollout ends it emits, with the
recorded start and end times,

```text
rollout <name>                          root of the rollout's trace (its trace id and root span id)
├── environment_setup | agent_setup | agent_execution | verifier    phases that ran
│   └── (agent_execution) step <scene>/<role>/turn <n>              span id = the trajectory's
│       └── execute_tool <title>                                    tool call span ids
```

and `finish()` ends a `job <name>` span. Each rollout has its own W3C trace id, so
the job span is not their parent: every rollout span carries a link to it (and
`benchflow.run_id`). Attributes follow the GenAI semantic conventions where one
applies (`gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.usage.*`,
`gen_ai.tool.call.id`, `error.type`).

Importing this module imports OpenTelemetry: only `benchflow.telemetry.recorder()`
does, and only when telemetry is asked for. Export problems are logged, never raised.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import PHASES, RolloutResult
from benchflow.trajectory.events import Event
from benchflow.trajectory.reader import iter_events

log = logging.getLogger(__name__)


class _PresetIds(IdGenerator):
    """Random ids, except the next ones when preset (so spans keep benchflow's ids)."""

    def __init__(self) -> None:
        self.trace_id: int | None = None
        self.span_id: int | None = None

    def generate_trace_id(self) -> int:
        value, self.trace_id = self.trace_id, None
        return value or random.getrandbits(128) or 1

    def generate_span_id(self) -> int:
        value, self.span_id = self.span_id, None
        return value or random.getrandbits(64) or 1


def _ns(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1e9)


def _attrs(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class OtelRecorder:
    """Turns rollout results and trajectories into spans; give it as a job's listener."""

    def __init__(self, exporter: SpanExporter | None = None, *,
                 processor: SpanProcessor | None = None, job_name: str = "job",
                 run_id: str | None = None) -> None:
        self._ids = _PresetIds()
        self._lock = threading.Lock()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "benchflow"}),
                                       id_generator=self._ids)
        if processor is None:
            assert exporter is not None, "give an exporter or a processor"
            processor = BatchSpanProcessor(exporter)
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("benchflow")
        self.job_name = job_name
        self.run_id = run_id
        self._job_span: trace.Span | None = None

    def _span(self, name: str, *, trace_id: str | None = None, span_id: str | None = None,
              parent: trace.Span | None = None, start: datetime | None = None,
              attributes: dict[str, Any] | None = None, links: list[Link] | None = None,
              kind: SpanKind = SpanKind.INTERNAL) -> trace.Span:
        self._ids.trace_id = int(trace_id, 16) if trace_id else None
        self._ids.span_id = int(span_id, 16) if span_id else None
        context = trace.set_span_in_context(parent) if parent is not None else \
            trace.set_span_in_context(trace.INVALID_SPAN)
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes,
                                      links=links, start_time=_ns(start))

    def job_span(self, start: datetime | None = None) -> trace.Span:
        """The job's span (started on the first rollout, ended by `finish`)."""
        if self._job_span is None:
            self._job_span = self._span(f"job {self.job_name}", start=start, attributes=_attrs(
                **{"benchflow.job.name": self.job_name, "benchflow.run_id": self.run_id}))
        return self._job_span

    def __call__(self, event: RolloutEvent) -> None:
        if event.kind is not RolloutEventKind.END or event.result is None:
            return
        try:
            with self._lock:
                self.record_rollout(event.result)
        except Exception:  # noqa: BLE001 - telemetry never fails a rollout
            log.warning("telemetry: could not record %s", event.rollout_name, exc_info=True)

    def record_rollout(self, r: RolloutResult) -> None:
        """Emit the spans of one finished rollout."""
        ts = r.timestamps
        job = self.job_span(ts.started_at)
        if self.run_id is None:
            self.run_id = r.run_id
            job.set_attribute("benchflow.run_id", r.run_id or "")
        common = _attrs(**{"benchflow.task.name": r.task_name,
                           "benchflow.dataset.name": r.dataset_name,
                           "gen_ai.agent.name": r.agent_name, "gen_ai.request.model": r.model})
        root = self._span(
            f"rollout {r.rollout_name}", trace_id=r.trace_id, span_id=r.span_id,
            start=ts.started_at, links=[Link(job.get_span_context())],
            attributes={**common, **_attrs(**{
                "benchflow.rollout.name": r.rollout_name, "benchflow.run_id": r.run_id,
                "benchflow.attempt": r.attempt, "benchflow.reward": r.reward,
                "benchflow.cost": r.cost, "benchflow.n_tool_calls": r.n_tool_calls,
                "gen_ai.usage.input_tokens": r.tokens.input if r.tokens else None,
                "gen_ai.usage.output_tokens": r.tokens.output if r.tokens else None})})
        for name, value in (r.rewards or {}).items():
            root.set_attribute(f"benchflow.rewards.{name}", value)
        for phase in PHASES:
            started = getattr(ts, f"{phase}_started_at")
            if started is None:
                continue
            span = self._span(phase, parent=root, start=started, attributes=common)
            if phase == "agent_execution" and r.trajectory_path:
                self._record_steps(span, r, common)
            if r.error is not None and r.error.phase == phase:
                span.set_status(Status(StatusCode.ERROR, r.error.message[:500]))
                span.set_attribute("error.type", r.error.type)
            span.end(_ns(getattr(ts, f"{phase}_ended_at")))
        if r.error is not None:
            root.set_status(Status(StatusCode.ERROR, r.error.message[:500]))
            root.set_attribute("error.type", r.error.type)
        root.end(_ns(ts.ended_at))

    def _record_steps(self, phase: trace.Span, r: RolloutResult, common: dict[str, Any]) -> None:
        """Step and tool call spans from the trajectory (their span ids are the events')."""
        steps: dict[str, list[Event]] = {}
        tools: dict[str, tuple[str | None, list[Event]]] = {}
        current: str | None = None
        for event in _events(Path(r.trajectory_path or "")):
            if event.span_id is None or event.span_id == r.span_id:
                continue
            tool_call_id = getattr(event, "tool_call_id", None)
            if tool_call_id:
                tools.setdefault(event.span_id, (current, []))[1].append(event)
            else:
                current = event.span_id
                steps.setdefault(event.span_id, []).append(event)
        step_spans: dict[str, trace.Span] = {}
        for span_id, events in steps.items():
            first = events[0]
            span = self._span(
                f"step {first.scene}/{first.role}/turn {first.turn}", parent=phase,
                span_id=span_id, start=first.ts, attributes={**common, **_attrs(**{
                    "benchflow.scene": first.scene, "benchflow.role": first.role,
                    "benchflow.turn": first.turn, "benchflow.round": first.round,
                    "benchflow.n_events": len(events)})})
            step_spans[span_id] = span
        for span_id, (parent_id, events) in tools.items():
            first = events[0]
            title = next((e.title for e in events if getattr(e, "title", None)), None)
            status = next((e.status for e in reversed(events) if getattr(e, "status", None)),
                          None)
            span = self._span(f"execute_tool {title or first.tool_call_id}",  # type: ignore[attr-defined]
                              parent=step_spans.get(parent_id or "", phase), span_id=span_id,
                              start=first.ts, attributes=_attrs(**{
                                  "gen_ai.operation.name": "execute_tool",
                                  "gen_ai.tool.name": title,
                                  "gen_ai.tool.call.id": first.tool_call_id,  # type: ignore[attr-defined]
                                  "benchflow.tool.status": status}))
            if status == "failed":
                span.set_status(Status(StatusCode.ERROR))
            span.end(_ns(events[-1].ts))
        for span_id, span in step_spans.items():
            span.end(_ns(steps[span_id][-1].ts))

    def finish(self) -> None:
        """End the job span and flush every span (call once, after the job)."""
        try:
            with self._lock:
                if self._job_span is not None:
                    self._job_span.end()
            self.provider.force_flush()
            self.provider.shutdown()
        except Exception:  # noqa: BLE001 - telemetry never fails a job
            log.warning("telemetry: could not export the job's spans", exc_info=True)


def _events(path: Path) -> Iterator[Event]:
    if path.is_file():
        yield from iter_events(path)


def otlp_recorder(endpoint: str | None, job_name: str) -> OtelRecorder:
    """A recorder exporting over OTLP/HTTP (protobuf) to `endpoint`, or the OTEL_* env default."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return OtelRecorder(OTLPSpanExporter(endpoint=endpoint), job_name=job_name)


__all__ = ["OtelRecorder", "otlp_recorder"]
