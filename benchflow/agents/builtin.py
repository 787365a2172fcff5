"""The built-in agents: `oracle` runs the task's solution, `nop` does nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchflow.agents.base import AgentConnection, AgentContext, StepOutcome
from benchflow.config import Role
from benchflow.errors import AgentExecutionError, AgentTimeout, TaskInvalidError
from benchflow.sandbox.base import SYSTEM_PATH
from benchflow.steps import Step

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


async def place_solution(ctx: AgentContext) -> None:
    """Put the solution the oracle runs now (a step's, else the task's) at /oracle, once."""
    wanted = ctx.solution_dir or ctx.task.solution_dir
    if wanted is None or ctx.extras.get("oracle:placed") == wanted:
        return
    await ctx.sandbox.exec(["rm", "-rf", ORACLE_DIR], user="root", timeout=60,
                           env={"PATH": SYSTEM_PATH})
    await ctx.sandbox.upload(wanted, ORACLE_DIR)
    ctx.extras["oracle:placed"] = wanted


class _OracleConnection:
    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        ctx, oracle = self.ctx, self.ctx.task.config.oracle
        await place_solution(ctx)
        timeout = ctx.scaled(oracle.timeout_sec or ctx.task.config.agent.timeout_sec)
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
    """Copies the task's solution to /oracle and runs `bash /oracle/solve.sh` once."""

    name = "oracle"

    async def install(self, ctx: AgentContext) -> None:
        folder = "oracle" if ctx.task.layout == "native" else "solution"
        if ctx.task.solution_dir is None and not ctx.task.steps:
            raise TaskInvalidError(f"{ctx.task.path}: the oracle needs a solution; add "
                                   f"{folder}/solve.sh")
        for step in ctx.task.steps:
            if step.solution_dir is None and ctx.task.solution_dir is None:
                raise TaskInvalidError(f"{ctx.task.path}: the oracle needs a solution for step "
                                       f"{step.name!r}; add steps/{step.name}/{folder}/solve.sh")
        await place_solution(ctx)

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        yield _OracleConnection(ctx)
