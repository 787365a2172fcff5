"""`acpx/<agent>`: a registered ACP agent driven through ACPX inside the sandbox.

ACPX (npm `acpx`) is a headless ACP *client* with persistent sessions: it is not an ACP
agent, so benchflow cannot speak ACP to it. The closest faithful mode is what this driver
does: it installs the agent as usual plus ACPX, and per session

- names an ACPX session (`sessions new --name`), whose queue owner keeps the agent process
  and its ACP session alive between prompts (multi-turn memory, reconnects when the agent
  died: ACPX's crash recovery);
- sends each step as `acpx --format json prompt -s NAME` with the prompt on stdin, and
  records the ACP messages ACPX prints (one JSON-RPC message a line) through the same
  recorder as a direct session, so the trajectory has the same events;
- closes the ACPX session at the end and kills what is left.

ACPX answers the agent's fs, terminal and permission requests itself (`--approve-all`),
inside the sandbox, instead of benchflow's client.
"""

from __future__ import annotations

import json
import logging
import secrets
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from benchflow.acp.process import AgentProcess
from benchflow.acp.recorder import UpdateRecorder
from benchflow.agents import python_wheels
from benchflow.agents.acp_driver import (
    AcpAgentDriver,
    LaunchPrep,
    append_setup_log,
    kill_session_processes,
)
from benchflow.agents.base import AgentConnection, AgentContext, StepOutcome
from benchflow.agents.templates import render_string
from benchflow.config import Role
from benchflow.errors import AgentExecutionError, AgentInstallError, AgentTimeout
from benchflow.sandbox.base import ExecResult
from benchflow.settings import get_settings
from benchflow.steps import Step

ACPX_PACKAGE = "acpx"
ACPX_VERSION = "0.19.1"
ACPX_NODE_MAJOR = 23
"""ACPX needs Node.js >= 22.13; a major of 23 or more guarantees it."""
_MAX_LINE = 64 * 1024 * 1024
_CLOSE_TIMEOUT_SEC = 30.0
log = logging.getLogger(__name__)


class AcpxDriver:
    """Runs the manifest agent `inner` through ACPX. One instance may serve many rollouts."""

    def __init__(self, inner: AcpAgentDriver, name: str) -> None:
        self.inner = inner
        self.manifest = inner.manifest
        self.name = name  # `acpx/<inner>`

    @property
    def skills_dir(self) -> str | None:
        return self.inner.skills_dir

    async def install(self, ctx: AgentContext) -> None:
        """Install the agent, then Node.js >= 23 and ACPX (npm, globally).

        Raises:
            AgentInstallError, AgentInstallTimeout: as `AcpAgentDriver.install`, or ACPX's
                install failed (output in `setup/`).
        """
        await self.inner.install(ctx)
        platform = await python_wheels.probe_platform(ctx.sandbox)
        line = await python_wheels.ensure_node(ctx.sandbox, platform, ACPX_NODE_MAJOR,
                                               get_settings().cache_dir)
        append_setup_log(ctx, "node for acpx", ExecResult(0, line.encode(), b""))
        script = render_string('#!/bin/sh\nset -eu\n{% include "npm_global.sh.j2" %}\n', {
            "name": ACPX_PACKAGE, "package": ACPX_PACKAGE, "version": ACPX_VERSION,
            "binary": "acpx", "marker": f"/opt/benchflow/installed/{ACPX_PACKAGE}"},
            where="the acpx install script")
        result = await ctx.sandbox.exec(["sh", "-c", script, "install-acpx"], user="root",
                                        cwd="/", timeout=ctx.install_timeout_sec)
        append_setup_log(ctx, f"install acpx {ACPX_VERSION}", result)
        if not result.ok:
            raise AgentInstallError(f"installing acpx {ACPX_VERSION} failed (exit "
                                    f"{result.exit_code}); output tail:\n{result.text(2000)}")

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        """Name an ACPX session for `role`; each prompt runs through it.

        Raises:
            ConfigError: credentials are missing.
        """
        prep = await self.inner.prepare_launch(ctx, role)
        if ctx.mcp_servers:
            log.warning("agent %s: MCP servers are not passed through ACPX; not given %s",
                        self.name, ", ".join(s.name for s in ctx.mcp_servers))
        recorder = UpdateRecorder(ctx.trajectory, scene=scene, role=role.name)
        connection = AcpxConnection(ctx, prep, role, recorder,
                                    session=f"benchflow-{secrets.token_hex(6)}")
        try:
            await connection.run_acpx(["sessions", "new", "--name", connection.session],
                                      timeout=prep.timeouts.handshake_sec or 120.0)
            yield connection
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT_SEC):
                try:
                    await connection.run_acpx(["sessions", "close", connection.session],
                                              timeout=_CLOSE_TIMEOUT_SEC)
                except (AgentExecutionError, AgentTimeout) as exc:
                    log.warning("closing ACPX session %s: %s", connection.session, exc)
            recorder.flush_pending()
            await kill_session_processes(ctx, prep.user, prep.marker)


class AcpxConnection:
    """One ACPX session of a role: each `prompt` is one `acpx prompt` process."""

    def __init__(self, ctx: AgentContext, prep: LaunchPrep, role: Role,
                 recorder: UpdateRecorder, *, session: str) -> None:
        self.ctx, self.prep, self.role, self.recorder = ctx, prep, role, recorder
        self.session = session
        plan = prep.plan
        self.base_argv = ["acpx", "--format", "json", "--json-strict", "--approve-all",
                          "--cwd", ctx.workdir, "--agent", shlex.join(plan.argv)]
        if plan.acp_model:
            self.base_argv += ["--model", plan.acp_model]
        self.env = {**prep.env, **plan.credentials.env}

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        """Send the step's prompt through ACPX and record what it relays.

        Raises:
            AgentTimeout: the turn exceeded the role's wall-clock budget.
            AgentExecutionError: ACPX failed or ended without the prompt's answer.
        """
        rec = self.recorder
        rec.begin_turn(step.turn_index, round, step.session_turn)
        rec.record("user_message", text=step.prompt)
        wall = self.ctx.turn_timeout_sec(self.role.timeout_sec)
        reply = await self.run_acpx(["prompt", "-s", self.session], stdin=step.prompt,
                                    timeout=wall, record=True)
        stop = reply.get("stopReason")
        if stop is None:
            raise AgentExecutionError(f"acpx ended the prompt without an answer: {reply}")
        return StepOutcome(stop_reason=str(stop), n_tool_calls=rec.turn_tool_calls,
                           agent_text=rec.turn_text())

    async def run_acpx(self, args: list[str], *, timeout: float | None, stdin: str = "",
                       record: bool = False) -> dict[str, Any]:
        """Run one acpx command to its end; returns the last JSON-RPC result it printed.

        Raises:
            AgentTimeout: past `timeout` (the process is killed).
            AgentExecutionError: a non-zero exit or a JSON-RPC error line.
        """
        ctx = self.ctx
        process = await AgentProcess.launch(
            ctx.sandbox, [*self.base_argv, *args], self.env, cwd=ctx.workdir,
            user=self.prep.user.name, umask=self.prep.umask,
            stderr_path=ctx.paths.agent_dir / f"{self.role.name}.acpx.stderr.txt")
        last: dict[str, Any] = {}
        errors: list[str] = []
        try:
            with anyio.fail_after(timeout):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(process.run)
                    await process.live.stdin.send(stdin.encode())
                    await process.live.stdin.aclose()
                    lines = BufferedByteReceiveStream(process.live.stdout)
                    while True:
                        try:
                            raw = await lines.receive_until(b"\n", _MAX_LINE)
                        except (anyio.EndOfStream, anyio.IncompleteRead):
                            break
                        message = _json(raw)
                        if message is None:
                            continue
                        if record:
                            self.recorder.on_receive(message)
                        if isinstance(message.get("result"), dict):
                            last = message["result"]
                        elif "error" in message and message.get("id") is None:
                            errors.append(json.dumps(message["error"])[:2000])
                        elif isinstance(message.get("action"), str):
                            last = message
        except TimeoutError as exc:
            raise AgentTimeout("agent", timeout or 0.0,
                               f"acpx {args[0]} exceeded {timeout:g} s") from exc
        finally:
            await process.kill()  # releases the streams; a finished process is left alone
        code = process.exit_code
        if code not in (0, None) or errors:
            raise AgentExecutionError(
                f"acpx {' '.join(args[:2])} failed (exit {code}): "
                f"{'; '.join(errors) or process.stderr_tail(2000)}")
        return last


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        log.debug("acpx printed a non-JSON line: %.200r", raw)
        return None
    return value if isinstance(value, dict) else None


__all__ = ["ACPX_VERSION", "AcpxConnection", "AcpxDriver"]
