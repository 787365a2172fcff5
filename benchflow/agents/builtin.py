"""The built-in agents: `oracle` runs the task's solution, `nop` does nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from benchflow.agents.base import AgentConnection, AgentContext, StepOutcome
from benchflow.config import Role
from benchflow.errors import AgentExecutionError, AgentTimeout, TaskInvalidError
from benchflow.steps import Step

if TYPE_CHECKING:
    from benchflow.task import Task

BuiltinAgentName = Literal["oracle", "nop"]
"""The built-in agents' names (the one list; a command agent may not take them)."""
BUILTIN_AGENT_NAMES: tuple[str, ...] = get_args(BuiltinAgentName)

ORACLE_DIR = "/oracle"
ORACLE_LOG = "/logs/agent/oracle.txt"


class _NopConnection:
    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        return StepOutcome(stop_reason="end_turn")


class NopAgent:
    """Does nothing, so a task's 0-reward path can be checked."""

    name = "nop"

    async def install(self, ctx: AgentContext) -> None:
        return None

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        yield _NopConnection()


class _OracleConnection:
    def __init__(self, ctx: AgentContext, ran: set[Path]) -> None:
        self.ctx = ctx
        self.ran = ran

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        ctx, oracle = self.ctx, self.ctx.task.config.oracle
        # One solution run per rollout, however many turns, scenes or rounds prompt it.
        if ctx.paths.root in self.ran:
            return StepOutcome(stop_reason="end_turn")
        self.ran.add(ctx.paths.root)
        timeout = ctx.bounded(ctx.scaled(oracle.timeout_sec or ctx.task.config.agent.timeout_sec))
        # The oracle is trusted: root unless the task names its agent user.
        user = ctx.task.config.agent.user or "root"
        script = f'bash {ORACLE_DIR}/solve.sh 2>&1 | tee {ORACLE_LOG}; exit "${{PIPESTATUS[0]}}"'
        env = {**ctx.env, **oracle.env}
        started = time.monotonic()
        result = await ctx.sandbox.exec(["bash", "-c", script], user=user, cwd=ctx.workdir,
                                        env=env, timeout=timeout)
        out = ctx.paths.command_dir
        out.mkdir(parents=True, exist_ok=True)
        (out / "stdout.txt").write_bytes(result.stdout)
        (out / "stderr.txt").write_bytes(result.stderr)
        if ctx.trajectory is not None:
            ctx.trajectory.record("oracle", command=f"bash {ORACLE_DIR}/solve.sh",
                                  exit_code=result.exit_code, output=result.text(100_000),
                                  duration_sec=time.monotonic() - started,
                                  scene=step.scene, role=step.role.name, turn=step.turn_index,
                                  round=round)
        if result.timed_out:
            raise AgentTimeout("agent", timeout, f"oracle solve.sh exceeded its timeout of {timeout:g} s")
        if result.exit_code != 0:
            raise AgentExecutionError(f"oracle solve.sh exited with code {result.exit_code}; "
                                      f"output tail:\n{result.text(1500)}")
        return StepOutcome(stop_reason="end_turn")


class OracleAgent:
    """Copies the task's solution to /oracle and runs `bash /oracle/solve.sh` once per
    rollout, whatever the scenes: later turns of the oracle are answered without a run."""

    name = "oracle"

    def __init__(self) -> None:
        self._ran: set[Path] = set()  # rollout folders whose solution already ran

    @staticmethod
    def check_task(task: Task) -> Path:
        """The task's solution folder; checked before any container starts.

        Raises:
            TaskInvalidError: the task has no solve.sh.
        """
        if task.solution_dir is None:
            folder = "oracle" if task.layout == "native" else "solution"
            raise TaskInvalidError(f"{task.path}: the oracle needs a solution; add "
                                   f"{folder}/solve.sh")
        return task.solution_dir

    async def install(self, ctx: AgentContext) -> None:
        await ctx.sandbox.upload(self.check_task(ctx.task), ORACLE_DIR)

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        yield _OracleConnection(ctx, self._ran)
