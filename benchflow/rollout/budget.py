"""The agent phase's one budget: `agent.timeout_sec` x `timeout_multiplier` for the whole
phase of a rollout, across every turn, scene and user round (not per session or prompt).

A role's own `timeout_sec` is a smaller budget for each of its turns, inside the phase's.
Drivers read what is left through `AgentContext.agent_timeout_sec` / `turn_timeout_sec`,
so a command that runs in the sandbox never outlives the phase either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import anyio

from benchflow.agents.base import AgentContext
from benchflow.errors import AgentTimeout
from benchflow.task import Task


def agent_phase_budget(task: Task, agents: Iterable[str], multiplier: float) -> float:
    """The phase's seconds: the task's agent timeout; an oracle-only rollout uses the
    task's `oracle.timeout_sec` when it sets one."""
    seconds = task.config.agent.timeout_sec
    if set(agents) == {"oracle"} and task.config.oracle.timeout_sec:
        seconds = task.config.oracle.timeout_sec
    return seconds * multiplier


@contextlib.contextmanager
def agent_phase_deadline(ctx: AgentContext, budget_sec: float) -> Iterator[None]:
    """Bound the block by `budget_sec`; running out raises `AgentTimeout` (phase "agent").

    Raises:
        AgentTimeout: the agent phase used its whole budget.
    """
    ctx.agent_deadline = anyio.current_time() + budget_sec  # the clock fail_after reads
    try:
        with anyio.fail_after(budget_sec):
            yield
    except TimeoutError as exc:
        raise AgentTimeout("agent", budget_sec, f"the agent phase exceeded agent.timeout_sec "
                           f"({budget_sec:g} s with the multiplier) across all its turns"
                           ) from exc
    finally:
        ctx.agent_deadline = None


__all__ = ["agent_phase_budget", "agent_phase_deadline"]
