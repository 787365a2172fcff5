"""Harbor's Agent Trajectory Interchange Format (ATIF), written as version `ATIF-v1.6`.

The models mirror Harbor's published pydantic models (`harbor.models.trajectories`,
Harbor 0.24) field for field, restricted to what v1.6 defines, with the same validation
(`extra="forbid"`, agent-only step fields, sequential step ids, observation results that
name a tool call of their step). Tests also validate the output against the real `harbor`
package when it is importable (it needs Python >= 3.12).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from benchflow.trajectory.exporters.segments import AgentStep, Step, UserStep
from benchflow.trajectory.tool_calls import ToolCall

ATIF_VERSION = "ATIF-v1.6"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifAgent(_Model):
    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


class AtifToolCall(_Model):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]


class AtifObservationResult(_Model):
    source_call_id: str | None = None
    content: str | None = None


class AtifObservation(_Model):
    results: list[AtifObservationResult]


class AtifMetrics(_Model):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class AtifStep(_Model):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_only(self) -> AtifStep:
        if self.source != "agent":
            for name in ("model_name", "reasoning_content", "tool_calls", "metrics"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is only allowed on agent steps")
        return self


class AtifFinalMetrics(_Model):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class AtifTrajectory(_Model):
    schema_version: Literal["ATIF-v1.6"] = ATIF_VERSION
    session_id: str
    agent: AtifAgent
    steps: list[AtifStep] = Field(min_length=1)
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> AtifTrajectory:
        for i, step in enumerate(self.steps, start=1):
            if step.step_id != i:
                raise ValueError(f"steps[{i - 1}].step_id must be {i}")
            ids = {c.tool_call_id for c in step.tool_calls or []}
            for result in step.observation.results if step.observation else []:
                if result.source_call_id is not None and result.source_call_id not in ids:
                    raise ValueError(f"step {i}: observation names unknown tool call "
                                     f"{result.source_call_id!r}")
        return self


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


def _arguments(call: ToolCall) -> dict[str, Any]:
    value = json.loads(call.arguments)
    return value if isinstance(value, dict) else {"input": value}


def _call_extra(calls: list[ToolCall]) -> dict[str, Any]:
    extra: dict[str, Any] = {"tool_titles": {c.id: c.title for c in calls},
                             "tool_status": {c.id: c.status for c in calls}}
    exits = {c.id: c.exit_code for c in calls if c.exit_code is not None}
    names = {c.id: c.tool_name for c in calls if c.tool_name}
    if exits:
        extra["tool_exit_codes"] = exits
    if names:
        extra["tool_names"] = names
    return extra


def atif_trajectory(steps: list[Step], *, session_id: str, agent: str, model: str | None,
                    extra: dict[str, Any] | None = None) -> AtifTrajectory:
    """One ATIF trajectory from a role's chat. Tool results become the observation of the
    step that made the calls; per-turn usage becomes the step's metrics."""
    out: list[AtifStep] = []
    totals = {"prompt": 0, "completion": 0, "cost": 0.0, "any": False, "any_cost": False}
    for step in steps:
        n = len(out) + 1
        if isinstance(step, UserStep):
            out.append(AtifStep(step_id=n, timestamp=_iso(step.ts), source="user",
                                message=step.text))
            continue
        assert isinstance(step, AgentStep)
        metrics = None
        if step.usage is not None:
            metrics = AtifMetrics(prompt_tokens=step.usage.input_tokens,
                                  completion_tokens=step.usage.output_tokens,
                                  cached_tokens=step.usage.cached_read_tokens,
                                  cost_usd=step.usage.cost)
            totals["any"] = True
            totals["prompt"] += step.usage.input_tokens or 0
            totals["completion"] += step.usage.output_tokens or 0
            if step.usage.cost is not None:
                totals["any_cost"] = True
                totals["cost"] += step.usage.cost
        first_call = step.calls[0].started_at if step.calls else None
        out.append(AtifStep(
            step_id=n, timestamp=_iso(first_call), source="agent", model_name=model,
            message=step.text, reasoning_content=step.reasoning or None,
            tool_calls=[AtifToolCall(tool_call_id=c.id, function_name=c.name,
                                     arguments=_arguments(c)) for c in step.calls] or None,
            observation=AtifObservation(results=[
                AtifObservationResult(source_call_id=c.id, content=c.output)
                for c in step.calls]) if step.calls else None,
            metrics=metrics,
            extra=_call_extra(step.calls) if step.calls else None,
        ))
    final = AtifFinalMetrics(
        total_prompt_tokens=totals["prompt"] if totals["any"] else None,
        total_completion_tokens=totals["completion"] if totals["any"] else None,
        total_cost_usd=totals["cost"] if totals["any_cost"] else None,
        total_steps=len(out))
    return AtifTrajectory(session_id=session_id,
                          agent=AtifAgent(name=agent, version="unknown", model_name=model),
                          steps=out, final_metrics=final, extra=extra)
