"""The verifier strategies that take part in the rollout beyond running a command:
`ors-episode` (an Open Reward Standard environment the agent plays, opened before its
first turn) and `agent-judge` (an agent that scores after it). `script`, `reward-kit`
and `llm-judge` run through the usual verify (`verify/runner.py`, `verify/judged.py`)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from benchflow.rollout.rollout import Rollout

log = logging.getLogger(__name__)

async def open_strategy(rollout: Rollout) -> None:
    """Before the agent's first turn: the ORS episode, when the task is one."""
    task, ctx = rollout.task, rollout.ctx
    assert task is not None and ctx is not None
    if task.verifier_doc.strategy == "ors-episode" and ctx.ors_episode is None:
        from benchflow.verify.ors import start_episode

        ctx.ors_episode = await start_episode(task, rollout.paths.root / "ors" / "server.log")


async def strategy_rewards(rollout: Rollout) -> dict[str, float] | None:
    """The rewards of an `ors-episode` or `agent-judge` task (None: another strategy)."""
    task, ctx = rollout.task, rollout.ctx
    assert task is not None and ctx is not None
    strategy = task.verifier_doc.strategy
    if strategy == "ors-episode":
        episode = ctx.ors_episode
        if episode is None:
            from benchflow.errors import VerifierError

            raise VerifierError("the ORS episode never started")
        rewards: dict[str, float] = episode.rewards()
        rollout.paths.verifier_dir.mkdir(parents=True, exist_ok=True)
        (rollout.paths.verifier_dir / "ors.json").write_text(json.dumps(
            {"url": episode.url, "environment": task.verifier_doc.environment,
             "split": episode.split, "index": episode.index,
             "rewards_seen": episode.rewards_seen, "rewards": rewards}, indent=2))
        return rewards
    if strategy == "agent-judge":
        from benchflow.rollout.agent_judge import agent_judge

        return await agent_judge(rollout)
    return None


async def close_strategy(rollout: Rollout) -> None:
    """Stop the ORS environment's server (shielded; never raises)."""
    ctx = rollout.ctx
    episode = ctx.ors_episode if ctx is not None else None
    if episode is not None:
        ctx.ors_episode = None
        with anyio.CancelScope(shield=True):
            await episode.aclose()


__all__ = ["close_strategy", "open_strategy", "strategy_rewards"]
