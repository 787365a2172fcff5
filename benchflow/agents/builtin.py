"""The built-in agents: `oracle` runs the task's solution, `nop` does nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchflow.agents.base import AgentConnection, AgentContext, StepOutcome
from benchflow.config import Role
from benchflow.errors import AgentExecutionError, AgentInstallError, AgentTimeout, TaskInvalidError
from benchflow.sandbox.base import SYSTEM_PATH
from benchflow.steps import Step

ORACLE_DIR = "/oracle"
SOLUTION_DIR = "/solution"
"""Harbor's mount point of the solution folder: a legacy solve.sh may use `/solution/...`."""
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
    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        ctx, oracle = self.ctx, self.ctx.task.config.oracle
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
    """Copies the task's solution to /oracle, links /solution (Harbor's path) to it, and
    runs `bash /oracle/solve.sh` once.

    When the oracle runs as root (the task names no agent user), the folder is made
    root-only, so another agent of the same rollout cannot read it.
    """

    name = "oracle"

    async def install(self, ctx: AgentContext) -> None:
        solution = ctx.task.solution_dir
        if solution is None:
            raise TaskInvalidError(f"{ctx.task.path}: the oracle needs a solution; add "
                                   f"{'oracle' if ctx.task.layout == 'native' else 'solution'}/solve.sh")
        await ctx.sandbox.upload(solution, ORACLE_DIR)
        # One root exec: /solution is a link to the upload; a root oracle's copy is root-only.
        script = f'rm -rf {SOLUTION_DIR} && ln -s {ORACLE_DIR} {SOLUTION_DIR}'
        if not ctx.task.config.agent.user:
            script += f' && chown -R 0:0 {ORACLE_DIR} && chmod -R go-rwx {ORACLE_DIR}'
        result = await ctx.sandbox.exec(["sh", "-c", script], user="root",
                                        env={"PATH": SYSTEM_PATH}, timeout=60)
        if not result.ok:
            raise AgentInstallError(f"placing the solution at {SOLUTION_DIR} failed: "
                                    f"{result.text(1000)}")

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        yield _OracleConnection(ctx)
