"""Command agents: an agent given in a job file as two bash scripts.

The install script (optional) is copied into the sandbox and run as root within
`agent.install_timeout_sec`; the execute script is copied in and run from the working
directory within `agent.timeout_sec`, as the task's agent user (root when the task
names none). Both see the agent's `env` and `$ROLLOUT_TASK_INSTRUCTION`, the path of
the instruction inside the sandbox. Output lands in the trial's `setup/` and
`command/` folders:

```text
<trial>/setup/{stdout,stderr}.txt      install script
<trial>/command/{stdout,stderr}.txt    execute script
```

A non-zero exit is agent_install_failed / agent_execution_failed, a deadline is
agent_install_timeout / agent_execution_timeout; either way the verifier is skipped.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from benchflow.agents.base import AgentConnection, AgentContext, StepOutcome
from benchflow.config import Role
from benchflow.errors import (
    AgentExecutionError,
    AgentInstallError,
    AgentInstallTimeout,
    AgentTimeout,
)
from benchflow.sandbox.output import OutputCapture, exec_captured
from benchflow.steps import Step

SCRIPT_DIR = "/tmp/.benchflow/agents"
"""Where the scripts are copied inside the sandbox (`<dir>/<agent>/{install,execute}.sh`)."""

_OUTPUT_LIMIT = 100_000
_MEMORY_LIMIT = 1 << 20
"""Per stream, what is held in memory of a script's output (the files get all of it)."""


def _elapsed(started: float) -> float:
    return round(time.monotonic() - started, 3)


def output_capture(folder: Path) -> OutputCapture:
    """`<folder>/{stdout,stderr}.txt`, written as the script prints (a timed-out or killed
    script's output is kept up to its last byte), its tail in memory."""
    return OutputCapture(folder / "stdout.txt", folder / "stderr.txt", _MEMORY_LIMIT)


class _CommandConnection:
    def __init__(self, agent: CommandAgent, ctx: AgentContext) -> None:
        self.agent = agent
        self.ctx = ctx

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        ctx, agent = self.ctx, self.agent
        env = agent.env_for(ctx, step.role.name, step.role.env)
        if step.prompt != ctx.task.instruction:  # a scene's own prompt: hand its file over
            prompt_path = f"{agent.script_dir}/prompt-{step.scene_index}-{step.turn_index}.md"
            await ctx.sandbox.upload_bytes(step.prompt.encode(), prompt_path, mode=0o644)
            env["ROLLOUT_TASK_INSTRUCTION"] = prompt_path
        script = f"{agent.script_dir}/execute.sh"
        await ctx.sandbox.upload_bytes(agent.execute.encode(), script, mode=0o755)
        if ctx.trajectory is not None:  # the prompt, as ACP agents record it (who works now)
            ctx.trajectory.record("user_message", text=step.prompt, scene=step.scene,
                                  role=step.role.name, turn=step.turn_index, round=round)
        timeout = ctx.turn_timeout_sec(step.role.timeout_sec)
        started = time.monotonic()
        result = await exec_captured(ctx.sandbox, ["bash", script],
                                     output_capture(ctx.paths.command_dir),
                                     user=ctx.agent_user or "root", cwd=ctx.workdir, env=env,
                                     timeout=timeout)
        if ctx.trajectory is not None:
            ctx.trajectory.record("command", command=f"bash {script}", exit_code=result.exit_code,
                                  output=result.text(_OUTPUT_LIMIT),
                                  duration_sec=_elapsed(started), scene=step.scene,
                                  role=step.role.name, turn=step.turn_index,
                                  round=round)
        if result.timed_out:
            raise AgentTimeout("agent", timeout, f"agent {agent.name!r}: the execute script "
                               f"exceeded its timeout of {timeout:g} s")
        if result.exit_code != 0:
            raise AgentExecutionError(f"agent {agent.name!r}: the execute script exited with code "
                                      f"{result.exit_code}; output tail:\n{result.text(1500)}")
        return StepOutcome(stop_reason="end_turn")


class CommandAgent:
    """An `AgentDriver` running a job file's `install` and `execute` bash scripts.

    `env` must already be expanded (the job expands `${VAR}` from the host before
    anything starts); its values reach the scripts through the exec environment,
    never a command line.
    """

    def __init__(self, name: str, execute: str, install: str | None = None,
                 env: Mapping[str, str] | None = None, description: str | None = None) -> None:
        self.name = name
        self.execute = execute
        self.install_script = install
        self.env = dict(env or {})
        self.description = description
        self.script_dir = f"{SCRIPT_DIR}/{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"

    def env_for(self, ctx: AgentContext, role: str | None = None,
                role_env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The scripts' environment: the rollout's, the role's model endpoint (its key), the
        role's, the agent's, then the instruction path."""
        endpoint = (ctx.agent_endpoint.for_role(role).sandbox_env()
                    if ctx.agent_endpoint and role else {})
        return {**ctx.env, **endpoint, **(role_env or {}), **self.env,
                "ROLLOUT_TASK_INSTRUCTION": ctx.instruction_path}

    async def install(self, ctx: AgentContext) -> None:
        """Copy the install script in and run it as root.

        Raises:
            AgentInstallTimeout: past `agent.install_timeout_sec` (times the multiplier).
            AgentInstallError: the script exited non-zero.
        """
        if not self.install_script:
            return
        script = f"{self.script_dir}/install.sh"
        await ctx.sandbox.upload_bytes(self.install_script.encode(), script, mode=0o755)
        timeout = ctx.install_timeout_sec
        started = time.monotonic()
        result = await exec_captured(ctx.sandbox, ["bash", script],
                                     output_capture(ctx.paths.setup_dir), user="root",
                                     cwd=ctx.workdir, env=self.env_for(ctx), timeout=timeout)
        if ctx.trajectory is not None:
            ctx.trajectory.record("command", command=f"bash {script}", exit_code=result.exit_code,
                                  output=result.text(_OUTPUT_LIMIT),
                                  duration_sec=_elapsed(started))
        if result.timed_out:
            raise AgentInstallTimeout("agent_install", timeout, f"agent {self.name!r}: the install "
                                      f"script exceeded its timeout of {timeout:g} s")
        if result.exit_code != 0:
            raise AgentInstallError(f"agent {self.name!r}: the install script exited with code "
                                    f"{result.exit_code}; output tail:\n{result.text(1500)}")

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        """A session: each prompt runs the execute script once."""
        yield _CommandConnection(self, ctx)


__all__ = ["SCRIPT_DIR", "CommandAgent", "output_capture"]
