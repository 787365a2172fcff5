"""Per-role identity and usage of a rollout: who played each role and what it used.

`role_identities(scenes)` names each role's agent and the model it actually uses (the
agent's default when the run gave none). A `RoleLedger` adds up each answered prompt per
role; after each prompt it also

- writes the turn's tokens as counted by benchflow's model server or relay (`usage` event,
  `source: model_calls`) when the agent reported none over ACP (codex, gemini);
- writes `tool_result` events for the turn's tool calls whose ACP updates carried no
  arguments or output (gemini), from the calls as the agent sent them to the model.

`finish(result)` fills `result.roles` and makes the totals the sums over roles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from benchflow.agents.base import StepOutcome
from benchflow.config import ModelEndpoint, Scene
from benchflow.rollout.result import RoleResult, RolloutResult, Tokens
from benchflow.trajectory.events import RoleIdentity, Usage
from benchflow.trajectory.writer import TrajectoryWriter

if TYPE_CHECKING:  # the model server loads only when a rollout has an endpoint
    from benchflow.model_server.traffic import ModelTraffic

_NO_MODEL = ("oracle", "nop")
_ACPX = "acpx/"


def default_model(agent: str, endpoint: ModelEndpoint | None = None) -> str | None:
    """The model `agent` uses when the run names none: its manifest's `model.default`, the
    endpoint's model for the built-in `model` agent, None for the oracle and nop."""
    if agent in _NO_MODEL:
        return None
    if agent == "model":
        return endpoint.model if endpoint is not None else None
    from benchflow.agents.catalog import load_catalog  # registered agents only

    catalog = load_catalog()
    name = catalog.resolve(agent.removeprefix(_ACPX))
    manifest = catalog.manifests.get(name) if name else None
    return manifest.model.default if manifest is not None else None


def configured_roles(scenes: Iterable[Scene]) -> frozenset[str]:
    """The roles whose model the run names."""
    return frozenset(role.name for scene in scenes for role in scene.roles if role.model)


def role_identities(scenes: Iterable[Scene], endpoint: ModelEndpoint | None = None
                    ) -> dict[str, RoleIdentity]:
    """Each role's agent and model, by role name (a role in several scenes with different
    agents or models gets them joined with `+`)."""
    agents: dict[str, list[str]] = {}
    models: dict[str, list[str]] = {}
    for scene in scenes:
        for role in scene.roles:
            agents.setdefault(role.name, [])
            models.setdefault(role.name, [])
            if role.agent not in agents[role.name]:
                agents[role.name].append(role.agent)
            model = role.model or default_model(role.agent, endpoint)
            if model and model not in models[role.name]:
                models[role.name].append(model)
    return {name: RoleIdentity(agent="+".join(agents[name]),
                               model="+".join(models[name]) or None) for name in agents}


def rollout_model(identities: dict[str, RoleIdentity]) -> str | None:
    """The rollout's `model`: the models its roles used, `+`-joined (None: none known)."""
    models = dict.fromkeys(m for i in identities.values() if i.model for m in i.model.split("+"))
    return "+".join(models) or None


def _add_cost(total: float | None, cost: float) -> float:
    return round((total or 0.0) + cost, 12)


@dataclass
class _Tally:
    n_prompts: int = 0
    n_tool_calls: int = 0
    input: int = 0
    output: int = 0
    cost: float | None = None
    reported: bool = False


@dataclass
class RoleLedger:
    """Counts of each role, prompt by prompt (see the module docstring).

    `traffic` is the rollout's `ModelTraffic` (None without benchflow's model server or
    relay): its per-role token counts and tool results fill what agents do not report.
    """

    identities: dict[str, RoleIdentity]
    traffic: ModelTraffic | None = None
    configured: frozenset[str] = frozenset()
    """Roles whose model the run named (the others use their agent's default, which the
    model calls may show to be another model: it is then the one reported)."""
    _tallies: dict[str, _Tally] = field(default_factory=dict)

    def record(self, role: str, outcome: StepOutcome, writer: TrajectoryWriter | None = None,
               *, scene: str | None = None, turn: int | None = None,
               session_turn: int | None = None, round: int | None = None) -> None:
        """Add one answered prompt of `role`; write what the model calls add to it."""
        tally = self._tallies.setdefault(role, _Tally())
        tally.n_prompts += 1
        tally.n_tool_calls += outcome.n_tool_calls
        tally.input += outcome.input_tokens
        tally.output += outcome.output_tokens
        tally.reported = tally.reported or outcome.reported_usage
        if outcome.cost is not None:
            tally.cost = _add_cost(tally.cost, outcome.cost)
        traffic = self.traffic
        if traffic is None:
            return
        place = {"scene": scene, "role": role, "turn": turn, "session_turn": session_turn,
                 "round": round}
        counted = traffic.take_tokens(role)
        seen = traffic.take_tool_io(role)
        if writer is None or writer.closed:
            return
        if counted is not None and not outcome.reported_usage:
            writer.record("usage", scope="turn", source="model_calls",
                          usage=Usage(input_tokens=counted.input, output_tokens=counted.output,
                                      cached_read_tokens=counted.cached or None), **place)
        if not (outcome.incomplete_tool_calls and seen):
            return
        from benchflow.trajectory.tool_calls import matches_wire_id  # ACP agents' calls only

        for call_id in outcome.incomplete_tool_calls:
            match = next((io for wire_id, io in seen.items()
                          if matches_wire_id(call_id, wire_id)), None)
            if match is not None:
                writer.record("tool_result", tool_call_id=call_id, call_id=match.call_id, name=match.name, arguments=match.arguments,
                              output=match.output, **place)

    def results(self) -> dict[str, RoleResult]:
        """Every role (in the order roles were declared) with its counts and usage."""
        totals = self.traffic.totals() if self.traffic is not None else {}
        out: dict[str, RoleResult] = {}
        for name, identity in self.identities.items():
            tally = self._tallies.get(name, _Tally())
            tokens, source = None, None
            if tally.reported or tally.input or tally.output:
                tokens, source = Tokens(input=tally.input, output=tally.output), "acp"
            elif name in totals and not totals[name].empty:
                counted = totals[name]
                tokens = Tokens(input=counted.input, output=counted.output, cached=counted.cached)
                source = "model_calls"
            model = identity.model
            if name not in self.configured and self.traffic is not None:
                model = self.traffic.main_model(name) or model
            out[name] = RoleResult(agent=identity.agent, model=model, tokens=tokens,
                                   cost=tally.cost, n_prompts=tally.n_prompts,
                                   n_tool_calls=tally.n_tool_calls, usage_source=source)
        return out

    def finish(self, result: RolloutResult) -> None:
        """Fill `result.roles` (and `result.model`); the totals become the sums over roles."""
        roles = self.results()
        if not roles:
            return
        result.roles = roles
        result.model = rollout_model({n: RoleIdentity(agent=r.agent, model=r.model)
                                      for n, r in roles.items()}) or result.model
        with_tokens = [r.tokens for r in roles.values() if r.tokens is not None]
        result.tokens = Tokens(input=sum(t.input for t in with_tokens),
                               output=sum(t.output for t in with_tokens),
                               cached=sum(t.cached for t in with_tokens)) if with_tokens else None
        costs = [r.cost for r in roles.values() if r.cost is not None]
        if result.sandbox_cost is not None:  # the provider's share (Modal, Daytona)
            costs.append(result.sandbox_cost)
        result.cost = round(sum(costs), 12) if costs else None
        result.n_prompts = sum(r.n_prompts for r in roles.values())
        result.n_tool_calls = sum(r.n_tool_calls for r in roles.values())


__all__ = ["RoleLedger", "configured_roles", "default_model", "role_identities",
           "rollout_model"]
