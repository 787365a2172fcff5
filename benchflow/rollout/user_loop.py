"""The multi-round loop: a user prompts, the agent works in a fresh session, a soft
verify scores the round, and the user decides the next prompt."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchflow.agents.base import AgentContext, AgentDriver, StepOutcome
from benchflow.config import ModelEndpoint, Role, RolloutConfig
from benchflow.steps import Step
from benchflow.task import Task
from benchflow.trajectory.reader import iter_events
from benchflow.users import BaseUser, LLMUser, RoundResult, resolve, user_from_frontmatter
from benchflow.verify.soft import SoftVerifyResult

log = logging.getLogger(__name__)


ScoreRound = Callable[[int], Awaitable[SoftVerifyResult]]
OnPrompt = Callable[[Step, StepOutcome, int], None]


async def run_user_loop(*, user: BaseUser, driver: AgentDriver, ctx: AgentContext, role: Role,
                        scene: str, instruction: str, solution: str | None, max_rounds: int,
                        score_round: ScoreRound, rounds_log: Path,
                        on_prompt: OnPrompt | None = None) -> tuple[int, int]:
    """Run rounds until the user returns None or `max_rounds` ran; returns (prompts, tool calls).

    `score_round(round)` is the soft verify between rounds (non-destructive);
    `on_prompt(step, outcome, round)` sees each answered prompt (the rollout's counters).
    """
    await resolve(user.setup(instruction, solution))  # sync or async, as the user wrote it
    result: RoundResult | None = None
    n_prompts = n_tool_calls = 0
    for round_index in range(max_rounds):
        prompt = await resolve(user.run(round_index, instruction, result))
        if prompt is None:
            break
        step = Step(scene=scene, scene_index=0, turn_index=round_index, role=role, prompt=prompt)
        async with driver.connect(ctx, role, scene) as connection:
            outcome = await connection.prompt(step, round=round_index)
        if on_prompt is not None:
            on_prompt(step, outcome, round_index)
        n_prompts += 1
        n_tool_calls += outcome.n_tool_calls
        soft = await score_round(round_index)
        result = RoundResult(
            round=round_index, trajectory=_round_events(ctx, round_index),
            rewards=soft.rewards, verifier_output=soft.output,
            verifier_error=soft.error_type and f"{soft.error_type}: {soft.message or ''}",
            n_tool_calls=outcome.n_tool_calls)
        _log_round(rounds_log, prompt, result)
    return n_prompts, n_tool_calls


def resolve_user(config: RolloutConfig, task: Task, endpoint: ModelEndpoint | None
                 ) -> tuple[BaseUser, int]:
    """The rollout's user (the config's, else the task's frontmatter `user:`) and its round
    limit; an `LLMUser` without an endpoint gets the rollout's model endpoint."""
    user = config.user
    if user is None:
        user = user_from_frontmatter(task.raw_frontmatter.get("user"), str(task.config_file))
    max_rounds = config.max_user_rounds
    if isinstance(user, LLMUser):
        user.with_endpoint(endpoint)
        max_rounds = user.max_rounds or max_rounds
    return user, max_rounds


def _round_events(ctx: AgentContext, round_index: int) -> tuple:
    if ctx.trajectory is None or not ctx.trajectory.path.exists():
        return ()
    ctx.trajectory.flush()  # the round's last updates may still be held (FLUSH_INTERVAL_SEC)
    return tuple(e for e in iter_events(ctx.trajectory.path) if e.round == round_index)


def _log_round(path: Path, prompt: str, result: RoundResult) -> None:
    record = {"round": result.round, "prompt": prompt, "rewards": result.rewards,
              "verifier_error": result.verifier_error, "n_tool_calls": result.n_tool_calls,
              "n_events": len(result.trajectory), "verifier_output": result.verifier_output[-4000:]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
