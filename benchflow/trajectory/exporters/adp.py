"""The Agent Data Protocol (ADP), written as standardized schema version `1.2.0`.

ADP (neulab/agent-data-protocol) has no package on PyPI; its schema is the pydantic models
in the repository's `schema/` folder. These models mirror them for what benchflow writes:
a `Trajectory` (`schema_version`, `id`, `content`, `details`) whose content is actions
(`message_action`, `api_action`) and observations (`text_observation`), every model
`extra="forbid"`, each `class_` fixed, an observation's `tool_call_id` naming an earlier
action. A role's chat becomes: user prompts -> `text_observation` (source `user`), agent
text -> `message_action` (thoughts as `reasoning_content`), a tool call -> `api_action`
(`function` = the ACP kind, `kwargs` = its input) answered by a `text_observation` (source
`environment`, same `tool_call_id`). The rollout's reward goes on the last action
(`reward`, ADP's per-step signal) and with benchflow's metadata in `details`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from benchflow.trajectory.exporters.segments import AgentStep, Step, UserStep

ADP_VERSION = "1.2.0"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Action(_Model):
    reasoning_content: str | None = None
    tool_call_id: str | None = None
    reward: float | None = None
    description: str | None = None


class AdpMessageAction(_Action):
    class_: Literal["message_action"] = "message_action"
    content: str


class AdpApiAction(_Action):
    class_: Literal["api_action"] = "api_action"
    function: str
    kwargs: dict[str, Any]


class AdpTextObservation(_Model):
    class_: Literal["text_observation"] = "text_observation"
    content: str
    source: Literal["user", "agent", "environment"]
    name: str | None = None
    tool_call_id: str | None = None
    reward: float | None = None


AdpItem = AdpMessageAction | AdpApiAction | AdpTextObservation


class AdpTrajectory(_Model):
    schema_version: Literal["1.2.0", "1.1.0", "1.0.0"] = ADP_VERSION
    id: str
    content: list[AdpItem] = Field(min_length=1)
    details: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _linked(self) -> AdpTrajectory:
        called: set[str] = set()
        for i, item in enumerate(self.content):
            if isinstance(item, AdpApiAction) and item.tool_call_id:
                called.add(item.tool_call_id)
            if isinstance(item, AdpTextObservation) and item.tool_call_id \
                    and item.tool_call_id not in called:
                raise ValueError(f"content[{i}].tool_call_id {item.tool_call_id!r} names no "
                                 "earlier api_action")
        return self


def _kwargs(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return {} if value is None else {"input": value}


def adp_trajectory(steps: list[Step], *, trajectory_id: str, reward: float | None,
                   details: dict[str, Any]) -> AdpTrajectory:
    """One ADP trajectory from a role's chat (see the module docstring)."""
    content: list[AdpItem] = []
    for step in steps:
        if isinstance(step, UserStep):
            content.append(AdpTextObservation(content=step.text, source="user"))
            continue
        assert isinstance(step, AgentStep)
        reasoning = step.reasoning or None
        if step.text or not step.calls:
            content.append(AdpMessageAction(content=step.text, reasoning_content=reasoning))
            reasoning = None
        for call in step.calls:
            content.append(AdpApiAction(function=call.name, kwargs=_kwargs(call.input),
                                        tool_call_id=call.id, reasoning_content=reasoning,
                                        description=call.title or None))
            reasoning = None
            content.append(AdpTextObservation(content=call.output, source="environment",
                                              tool_call_id=call.id))
    actions = [item for item in content if not isinstance(item, AdpTextObservation)]
    if actions and reward is not None:
        actions[-1].reward = reward
    return AdpTrajectory(id=trajectory_id, content=content, details=details)


__all__ = ["ADP_VERSION", "AdpApiAction", "AdpMessageAction", "AdpTextObservation",
           "AdpTrajectory", "adp_trajectory"]
