"""The built-in agents: `oracle` runs the task's solution, `nop` does nothing."""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from benchflow.agents.base import BUILTIN_CAPABILITIES, AgentConnection, AgentContext, StepOutcome
from benchflow.config import Role
from benchflow.errors import AgentExecutionError, AgentInstallError, AgentTimeout, TaskInvalidError
from benchflow.sandbox.base import SYSTEM_PATH
from benchflow.sandbox.spec import SpecTree
from benchflow.steps import Step

if TYPE_CHECKING:
    from benchflow.task import Task

BuiltinAgentName = Literal["oracle", "nop"]
"""The built-in agents' names (the one list; a command agent may not take them)."""
BUILTIN_AGENT_NAMES: tuple[str, ...] = get_args(BuiltinAgentName)

ORACLE_DIR = "/oracle"
SOLUTION_DIR = "/solution"
"""Harbor's path of the solution folder: a link to ORACLE_DIR, so `/solution/...` works."""
ORACLE_LOG = "/logs/agent/oracle.txt"
_LOG_LIMIT = 10 * 1024 * 1024
"""The end of solve.sh's output kept in the rollout (its log stays whole in /logs)."""


class _NopConnection:
    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        return StepOutcome(stop_reason="end_turn")


class NopAgent:
    """Does nothing, so a task's 0-reward path can be checked."""

    name = "nop"
    capabilities = BUILTIN_CAPABILITIES

    async def install(self, ctx: AgentContext) -> None:
        return None

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        yield _NopConnection()


def solution_tree(task: Task, drivers: Collection[object]) -> SpecTree | None:
    """The task's solution as a tree the sandbox's start places (its one initial upload)
    at /oracle, with /solution a link to it and the same owner and modes as
    `place_solution` gives, or None where it must be placed at install as before: a
    multi-step task (a solution per step), or a rollout with any agent but the built-in
    ones (an agent's install must not see the solution, nor the agent image cache keep it)."""
    if (task.solution_dir is None or task.steps
            or not any(isinstance(d, OracleAgent) for d in drivers)
            or not all(isinstance(d, (OracleAgent, NopAgent)) for d in drivers)):
        return None
    return SpecTree(src=task.solution_dir, dst=ORACLE_DIR, link=SOLUTION_DIR,
                    root_only=not task.config.agent.user)


def solution_placed(ctx: AgentContext, tree: SpecTree) -> None:
    """Record that the sandbox's start placed `tree` (from `solution_tree`)."""
    ctx.oracle_placed = tree.src


async def place_solution(ctx: AgentContext) -> None:
    """Put the solution the oracle runs now (a step's, else the task's) at /oracle, once,
    with /solution (Harbor's path) a link to it. A root oracle's copy is root-only, so no
    other agent of the rollout can read it."""
    wanted = ctx.solution_dir or ctx.task.solution_dir
    if wanted is None or ctx.oracle_placed == wanted:
        return
    # Uploaded next to /oracle, then moved in one exec (an upload and an exec, not three calls)
    sandbox = ctx.require_sandbox("the oracle")
    stage = f"/tmp/.benchflow/oracle-{secrets.token_hex(6)}"
    await sandbox.upload(wanted, stage)
    script = (f"rm -rf {ORACLE_DIR} {SOLUTION_DIR} && mv {stage} {ORACLE_DIR}"
              f" && ln -s {ORACLE_DIR} {SOLUTION_DIR}")
    if not ctx.task.config.agent.user:
        script += f" && chown -R 0:0 {ORACLE_DIR} && chmod -R go-rwx {ORACLE_DIR}"
    result = await sandbox.exec(["sh", "-c", script], user="root", timeout=60,
                                env={"PATH": SYSTEM_PATH})
    if not result.ok:
        raise AgentInstallError(f"could not place the solution at {ORACLE_DIR}: "
                                  f"{result.text(1000)}")
    ctx.oracle_placed = wanted


class _OracleConnection:
    def __init__(self, ctx: AgentContext, ran: set[tuple[Path, Path | None]]) -> None:
        self.ctx = ctx
        self.ran = ran

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        ctx, oracle = self.ctx, self.ctx.task.config.oracle
        # One run of each solution per rollout (a multi-step task has one per step),
        # however many turns, scenes or rounds prompt the oracle.
        key = (ctx.paths.root, ctx.solution_dir or ctx.task.solution_dir)
        if key in self.ran:
            return StepOutcome(stop_reason="end_turn")
        self.ran.add(key)
        await place_solution(ctx)
        timeout = ctx.bounded(ctx.scaled(oracle.timeout_sec or ctx.task.config.agent.timeout_sec))
        # The oracle is trusted: root unless the task names its agent user.
        user = ctx.task.config.agent.user or "root"
        # Output to the log file only, its end printed once solve.sh exits (same exec: one
        # round trip): a server or database solve.sh leaves running holds no pipe of this
        # exec open, so the run ends when solve.sh does (hardening kills such leftovers
        # before the verifier, as any agent's).
        script = (f"bash {ORACLE_DIR}/solve.sh > {ORACLE_LOG} 2>&1 < /dev/null; code=$?; "
                  f"tail -c {_LOG_LIMIT} {ORACLE_LOG} 2>/dev/null; exit $code")
        env = {**ctx.env, **oracle.env}
        started = time.monotonic()
        if ctx.harden_fold is not None and not ctx.harden_fold.ran:  # baseline, solve, harden
            result = await ctx.harden_fold.run(ctx.sandbox, ["bash", "-c", script], user=user,
                                               cwd=ctx.workdir, env=env, timeout=timeout)
        else:
            result = await ctx.sandbox.exec(["bash", "-c", script], user=user, cwd=ctx.workdir,
                                            env=env, timeout=timeout)
        if result.timed_out:  # killed before its tail: read the log in an exec of its own
            log = await ctx.sandbox.exec(["tail", "-c", str(_LOG_LIMIT), ORACLE_LOG],
                                         user="root", timeout=60, env={"PATH": SYSTEM_PATH})
            result = dataclasses.replace(result, stdout=log.stdout + result.stdout)
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
    capabilities = BUILTIN_CAPABILITIES

    def __init__(self) -> None:
        self._ran: set[tuple[Path, Path | None]] = set()  # (rollout folder, solution) that ran

    @staticmethod
    def check_task(task: Task) -> None:
        """The task has a solution (for every step of a multi-step task); checked before
        any container starts.

        Raises:
            TaskInvalidError: a solve.sh is missing.
        """
        folder = "oracle" if task.layout == "native" else "solution"
        if task.solution_dir is None and not task.steps:
            raise TaskInvalidError(f"{task.path}: the oracle needs a solution; add "
                                   f"{folder}/solve.sh")
        for step in task.steps:
            if step.solution_dir is None and task.solution_dir is None:
                raise TaskInvalidError(f"{task.path}: the oracle needs a solution for step "
                                       f"{step.name!r}; add steps/{step.name}/{folder}/solve.sh")

    async def install(self, ctx: AgentContext) -> None:
        self.check_task(ctx.task)
        await place_solution(ctx)

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        yield _OracleConnection(ctx, self._ran)
