"""One ACP connection to an agent process in a sandbox, and the prompts sent over it.

`AcpSession.open()` starts the agent (secrets through a sourced-and-deleted env
file), drains its stderr and runs the handshake (`handshake.py`). `prompt()` runs
one turn under the idle and wall-clock timeouts; every update is written to the
trajectory as it arrives, by the transport hook (`recorder.py`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import anyio
from acp import RequestError, text_block
from acp.core import ClientSideConnection
from acp.schema import PromptResponse
from anyio.abc import TaskGroup

from benchflow.acp.client import BenchflowClient
from benchflow.acp.errors import FOREIGN_ERRORS, AgentExitedError, translate_acp_error
from benchflow.acp.fs import SandboxFs
from benchflow.acp.handshake import (
    AcpMcpServer,
    acp_mcp_servers,
    initialize_agent,
    load_session,
    open_session,
)
from benchflow.acp.permissions import PermissionPolicy
from benchflow.acp.process import AgentProcess
from benchflow.acp.prompt_watch import PromptWatch
from benchflow.acp.recorder import UpdateRecorder
from benchflow.acp.router import connect
from benchflow.acp.terminals import TerminalManager
from benchflow.acp.transport import ProcessTransport, StdoutNoise
from benchflow.errors import AgentError, AgentProtocolError, AgentTimeout, ConfigError
from benchflow.mcp import McpServer
from benchflow.sandbox.base import Sandbox
from benchflow.trajectory.events import Usage, usage_from_acp
from benchflow.trajectory.writer import TrajectoryWriter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcpTimeouts:
    """Deadlines of one ACP session, in seconds (None = no limit).

    `handshake_sec` bounds initialize + authenticate + session/new + model selection.
    `idle_sec` fails a prompt when nothing arrives from the agent for that long
    while no tool call is running. `wall_sec` is the role's budget, counted from
    `open()`: every prompt must end before it. On a timeout the session sends
    session/cancel, waits `cancel_grace_sec` for the agent to stop, then kills it.
    """

    handshake_sec: float | None = 60.0
    idle_sec: float | None = None
    wall_sec: float | None = None
    cancel_grace_sec: float = 5.0
    close_grace_sec: float = 5.0


@dataclass(frozen=True)
class PromptOutcome:
    """How one prompt (turn) ended. `agent_text` keeps the last 1,000,000 characters."""

    stop_reason: str
    n_tool_calls: int
    usage: Usage | None
    agent_text: str
    duration_sec: float
    incomplete_tool_calls: list[str] = field(default_factory=list)
    """Ids of the turn's tool calls whose updates carried no arguments or no output."""


class AcpSession:
    """A live ACP session with an agent running in a sandbox. Create with `open()`.

    After the handshake: `session_id`, `agent_info` (the agent's name/title/version),
    `auth_method`, `model_requested`, `model_recorded` (the agent's current model
    value after selection, or the requested model when the agent offers none) and
    `model_selectable`. Totals over the session: `usage_total`, `n_tool_calls`.
    """

    def __init__(
        self,
        agent: AgentProcess,
        *,
        cwd: str,
        role: str,
        timeouts: AcpTimeouts,
        recorder: UpdateRecorder,
        noise: StdoutNoise,
    ) -> None:
        self.agent = agent
        self.cwd = cwd
        self.role = role
        self.timeouts = timeouts
        self.noise = noise
        self._recorder = recorder
        started = anyio.current_time()
        self._deadline = None if timeouts.wall_sec is None else started + timeouts.wall_sec
        self._conn: ClientSideConnection | None = None
        self._tg: TaskGroup | None = None
        self._closed_reason: str | None = None
        self._turn_wall: float | None = None
        self.session_id: str | None = None
        self.agent_info: dict[str, Any] | None = None
        self.auth_method: str | None = None
        self.model_requested: str | None = None
        self.model_recorded: str | None = None
        self.model_selectable = False
        self.usage_total: Usage | None = None
        self.resumed = False
        """The session was restored with session/load (`open(resume=...)`)."""
        self.mcp_servers: list[str] = []
        """Names of the MCP servers given to the agent at session/new."""

    @property
    def n_tool_calls(self) -> int:
        return self._recorder.n_tool_calls

    @property
    def stdout_noise(self) -> list[str]:
        """The last non-JSON lines the agent printed on stdout (all are in the noise file)."""
        return list(self.noise.recent)

    def stderr_tail(self, max_bytes: int = 2048) -> str:
        return self.agent.stderr_tail(max_bytes)

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        sandbox: Sandbox,
        *,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        role: str = "default",
        scene: str | None = "main",
        trajectory: TrajectoryWriter | None = None,
        stderr_path: Path | None = None,
        stdout_noise_path: Path | None = None,
        permission_policy: PermissionPolicy | None = None,
        timeouts: AcpTimeouts | None = None,
        model: str | None = None,
        credentials: Mapping[str, str] | None = None,
        auth_method: str | None = None,
        mcp_servers: Sequence[McpServer] = (),
        umask: str | None = None,
        resume: str | None = None,
    ) -> AsyncIterator[AcpSession]:
        """Start the agent, run the handshake, yield the session; stop the agent on exit.

        `env` and `credentials` reach the agent only through a 0600 env file it
        sources and deletes; `credentials` also pick the auth method. Non-JSON stdout
        lines go to `stdout_noise_path` (default: `<role>.stdout-noise.txt` beside
        `stderr_path`). fs and terminal requests run in `sandbox` as `user`.
        `mcp_servers` go to session/new, those of transports the agent does not accept
        dropped with a warning naming the agent (a ConfigError for a `required` one). `umask`
        applies to the agent and to the files and commands it asks the client for. `resume`:
        a session id the agent saved (in its sandbox files) to restore with session/load
        instead of starting a new one, when the agent supports it (`resumed` says whether it
        did).

        Raises:
            AgentTimeout: the handshake exceeded `timeouts.handshake_sec`
                (phase "agent_handshake").
            AgentExitedError: the agent exited during the handshake.
            AgentProtocolError: the agent broke the protocol or refused a step.
            ConfigError: the agent refused the requested model or auth method, or does not
                accept a `required` MCP server's transport.
        """
        timeouts = timeouts or AcpTimeouts()
        if stderr_path is not None and stdout_noise_path is None:
            stdout_noise_path = stderr_path.with_name(f"{role}.stdout-noise.txt")
        recorder = UpdateRecorder(trajectory, scene=scene, role=role)
        agent = await AgentProcess.launch(
            sandbox,
            argv,
            {**(env or {}), **(credentials or {})},
            cwd=cwd,
            user=user,
            stderr_path=stderr_path,
            umask=umask,
        )
        session = cls(
            agent,
            cwd=cwd,
            role=role,
            timeouts=timeouts,
            recorder=recorder,
            noise=StdoutNoise(stdout_noise_path),
        )
        try:
            try:
                async with anyio.create_task_group() as tg:
                    session._tg = tg  # a prompt's timeout handling runs here (prompt_watch.py)
                    tg.start_soon(agent.drain_stderr, name=f"acp-agent-{role}")
                    terminals = TerminalManager(sandbox, tg, user=user, cwd=cwd, umask=umask)
                    policy = permission_policy or PermissionPolicy.auto_approve()
                    client = BenchflowClient(
                        recorder, policy, SandboxFs(sandbox, user=user, cwd=cwd, umask=umask),
                        terminals
                    )
                    transport = ProcessTransport(
                        agent.live, on_receive=recorder.on_receive,
                        on_updates=recorder.on_updates, on_drained=recorder.flush,
                        noise=session.noise,
                    )
                    session._conn = connect(client, transport)  # one router object
                    try:
                        await session._handshake(model, credentials or {}, auth_method,
                                                 list(mcp_servers), resume)
                        yield session
                    finally:
                        with anyio.CancelScope(shield=True):
                            await terminals.aclose()
                            await session._shutdown()
                        tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # anyio wraps what leaves a task group; the session's tasks never raise,
                # so a group of one is the caller's own error (e.g. `AgentTimeout` from
                # `prompt()`), which must reach the caller as itself (inline, not a
                # context manager: one async generator less per session in flight)
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from None
                raise
        finally:
            recorder.flush_pending()
            session.noise.close()

    async def _handshake(
        self, model: str | None, credentials: Mapping[str, str], auth_method: str | None,
        mcp_servers: list[McpServer], resume: str | None = None,
    ) -> None:
        async def steps() -> None:
            init = await initialize_agent(
                self._connection(), self._rpc, credentials=credentials, auth_method=auth_method
            )
            self.agent_info, self.auth_method = init.agent_info, init.auth_method
            sent, dropped = acp_mcp_servers(mcp_servers, init.mcp_transports)
            name = (self.agent_info or {}).get("name") or self.role
            needed = [s for s in dropped if s.required]
            if needed:
                raise ConfigError(
                    f"agent {name} does not accept MCP servers over {needed[0].transport}, "
                    f"so it cannot get the required MCP server {needed[0].name!r}: use an "
                    "agent whose ACP mcpCapabilities accept them (claude, codex, gemini, "
                    "opencode and scripted take http)")
            if dropped:
                logger.warning("agent %s does not accept MCP servers over %s: not given %s",
                               name, ", ".join(sorted({s.transport for s in dropped})),
                               ", ".join(s.name for s in dropped))
            self.mcp_servers = [s.name for s in mcp_servers if s not in dropped]
            if resume is not None and init.load_session and await self._load(resume, sent):
                return
            await self._open_session(model, sent)

        await self._bounded(steps)

    async def _bounded(self, steps: Callable[[], Awaitable[None]]) -> None:
        """Run handshake steps under `handshake_sec`; record and raise their failures."""
        limit = self.timeouts.handshake_sec
        try:
            with anyio.fail_after(limit):
                await steps()
        except TimeoutError as exc:
            message = f"ACP handshake with the agent took longer than {limit:g} s"
            self._closed_reason = "handshake timeout"
            self._record_error(AgentTimeout.error_type, message)
            await self.agent.kill()
            raise AgentTimeout("agent_handshake", limit or 0.0, message) from exc
        except AgentError as err:
            self._record_agent_error(err)
            raise

    async def _open_session(self, model: str | None,
                            mcp_servers: list[AcpMcpServer] | None = None) -> None:
        opened = await open_session(
            self._connection(),
            self._rpc,
            cwd=self.cwd,
            model=model,
            on_session=self._recorder.add_session,
            mcp_servers=mcp_servers,
        )
        self.session_id = opened.session_id
        self.model_requested = opened.model_requested
        self.model_recorded = opened.model_recorded
        self.model_selectable = opened.model_selectable
        self._recorder.record(
            "agent_state", session_id=self.session_id, name="model", update=opened.model_state
        )

    async def _load(self, session_id: str, mcp_servers: list[AcpMcpServer]) -> bool:
        """session/load `session_id`; False (and a warning) when the agent refuses."""
        try:
            opened = await load_session(self._connection(), self._rpc, session_id=session_id,
                                        cwd=self.cwd, on_session=self._recorder.add_session,
                                        mcp_servers=mcp_servers)
        except AgentProtocolError as exc:
            logger.warning("agent could not load session %s (starting a new one): %s",
                           session_id, exc)
            return False
        self.session_id, self.resumed = opened.session_id, True
        self.model_recorded, self.model_selectable = opened.model_recorded, opened.model_selectable
        self._recorder.record("agent_state", session_id=self.session_id, name="session_load",
                              update=opened.model_state)
        return True

    async def new_session(self, model: str | None = None) -> str:
        """Start a fresh ACP session on the same agent process (a new round: no memory
        of earlier prompts). Selects `model`, else the model requested at `open()`.

        Raises:
            AgentProtocolError: the session is closed, or the agent refused.
            AgentExitedError: the agent died.
            ConfigError: the agent refused the model.
        """
        if self._closed_reason is not None:
            raise AgentProtocolError(f"ACP session is closed ({self._closed_reason})")
        await self._bounded(
            lambda: self._open_session(model if model is not None else self.model_requested)
        )
        return self._session_id()

    async def _shutdown(self) -> None:
        """Close the connection (the agent sees EOF), give it a moment, then kill it."""
        self._closed_reason = self._closed_reason or "closed"
        if self._conn is not None:
            try:
                await self._conn.close()
            except Exception:  # the connection is going away either way
                logger.debug("error closing the ACP connection", exc_info=True)
        await self.agent.wait_exited(self.timeouts.close_grace_sec, stderr_sec=0)
        await self.agent.kill()

    # ------------------------------------------------------------------ prompts

    async def prompt(self, text: str, *, turn: int = 0, round: int | None = None,
                     session_turn: int | None = None,
                     wall_sec: float | None = None) -> PromptOutcome:
        """Send one prompt and wait for the turn to end.

        `wall_sec` bounds this prompt (within the session's own `timeouts.wall_sec`,
        counted from `open()`).

        Raises:
            AgentTimeout: idle (phase "agent_idle") or wall-clock (phase "agent")
                timeout; the agent was sent session/cancel, then killed.
            AgentExitedError: the agent process died during the turn.
            AgentProtocolError: the agent answered the prompt with an error, or
                the session was already closed by an earlier failure.
        """
        if self._closed_reason is not None:
            raise AgentProtocolError(f"ACP session is closed ({self._closed_reason})")
        rec = self._recorder
        rec.begin_turn(turn, round, session_turn)
        rec.record("user_message", session_id=self.session_id, text=text)
        deadline, self._turn_wall = self._deadline, None
        if wall_sec is not None:
            own = anyio.current_time() + wall_sec
            if deadline is None or own < deadline:
                deadline, self._turn_wall = own, wall_sec
        cost_before = rec.session_cost
        started = anyio.current_time()
        # the limits are watched by a loop timer, not a task of their own (prompt_watch.py)
        assert self._tg is not None  # set by open()
        watch = PromptWatch(rec, self.timeouts.idle_sec, deadline, self._tg, self._timed_out)
        response: PromptResponse | None = None
        error: Exception | None = None
        try:
            with watch.scope:
                watch.start()
                try:
                    response = await self._connection().prompt(
                        session_id=self._session_id(), prompt=[text_block(text)]
                    )
                except Exception as exc:  # noqa: BLE001 - mapped and raised below
                    error = exc
                finally:
                    watch.ended()
            reason = await watch.stop()
        except anyio.get_cancelled_exc_class():
            watch.cancel()
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(self.timeouts.cancel_grace_sec),
            ):
                await self._send_cancel()
            raise
        if reason is not None:
            self._fail_timeout(reason, watch.cancel_sent, response)
        if error is not None:
            await self._fail_error(error)
        assert response is not None
        usage = self._turn_usage(response, cost_before)
        return PromptOutcome(
            stop_reason=response.stop_reason,
            n_tool_calls=rec.turn_tool_calls,
            usage=usage,
            agent_text=rec.turn_text(),
            duration_sec=anyio.current_time() - started,
            incomplete_tool_calls=rec.incomplete_tool_calls(),
        )

    async def _send_cancel(self) -> bool:
        if self._conn is None or self.session_id is None:
            return False
        try:
            await self._conn.cancel(session_id=self.session_id)
        except FOREIGN_ERRORS:
            logger.debug("session/cancel could not be sent", exc_info=True)
            return False
        return True

    async def _timed_out(self, watch: PromptWatch) -> bool:
        """A prompt's limit was reached: send session/cancel, give the agent
        `cancel_grace_sec` to end the turn, kill it, stop the prompt. True if the
        cancel was sent."""
        sent = False
        with anyio.move_on_after(self.timeouts.cancel_grace_sec):
            sent = await self._send_cancel()
            await watch.wait_ended()
        await self.agent.kill()
        if not watch.is_ended:
            watch.scope.cancel()
        return sent

    def _fail_timeout(self, reason: str, cancel_sent: bool,
                      response: PromptResponse | None) -> NoReturn:
        self._closed_reason = f"{reason} timeout"
        if reason == "idle":
            limit, phase = self.timeouts.idle_sec or 0.0, "agent_idle"
            message = f"agent sent nothing for {limit:g} s while no tool call was running"
        else:
            limit, phase = self.timeouts.wall_sec or 0.0, "agent"
            if self._turn_wall is not None:
                limit = self._turn_wall
            message = f"agent exceeded its wall-clock timeout of {limit:g} s"
        self._record_error(
            AgentTimeout.error_type,
            message,
            cancel_sent=cancel_sent,
            stop_reason=response.stop_reason if response is not None else None,
        )
        raise AgentTimeout(phase, limit, message)

    async def _fail_error(self, exc: Exception) -> NoReturn:
        self._closed_reason = "agent error"
        if not isinstance(exc, FOREIGN_ERRORS):
            raise exc
        err = await self._translate(exc, "session/prompt")
        self._record_agent_error(err)
        raise err from exc

    def _turn_usage(self, response: PromptResponse, cost_before: float | None) -> Usage | None:
        """Tokens from the prompt response; cost as the growth of the agent's cumulative cost."""
        rec = self._recorder
        usage = None
        if response.usage is not None:
            usage = usage_from_acp(response.usage.model_dump(mode="json", by_alias=True))
        if rec.session_cost is not None:
            cost = round(rec.session_cost - (cost_before or 0.0), 12)
            usage = (usage or Usage()).model_copy(
                update={"cost": cost, "currency": rec.cost_currency}
            )
        if usage is not None:
            rec.record("usage", session_id=self.session_id, usage=usage, scope="turn",
                       source="acp")
            self.usage_total = usage if self.usage_total is None else self.usage_total + usage
        return usage

    # ------------------------------------------------------------------ helpers

    def _connection(self) -> ClientSideConnection:
        if self._conn is None:
            raise AgentProtocolError("ACP connection is not open")
        return self._conn

    def _session_id(self) -> str:
        if self.session_id is None:
            raise AgentProtocolError("no ACP session (session/new did not complete)")
        return self.session_id

    async def _rpc(self, what: str, awaitable: Any) -> Any:
        """Await an SDK call; its failure is raised as a benchflow error (see `_translate`)."""
        try:
            return await awaitable
        except FOREIGN_ERRORS as exc:
            raise await self._translate(exc, what) from exc

    async def _translate(self, exc: BaseException, what: str) -> AgentError:
        """`AgentExitedError` when the connection failed because the agent died, else the
        mapped protocol error. Waits briefly for the exit code and the rest of stderr."""
        mapped = translate_acp_error(exc, what) or AgentProtocolError(f"{what}: {exc!r}")
        if isinstance(exc, RequestError) or not await self.agent.wait_exited(2.0):
            return mapped
        self._closed_reason = "agent exited"
        return AgentExitedError(self.agent.exit_code, self.agent.stderr_tail(), during=what)

    def _record_agent_error(self, err: AgentError) -> None:
        if isinstance(err, AgentExitedError):
            self._record_error(
                err.error_type, str(err), exit_code=err.exit_code, stderr_tail=err.stderr_tail
            )
        else:
            self._record_error(err.error_type, str(err))

    def _record_error(self, error_type: str, message: str, **fields: Any) -> None:
        self._recorder.record(
            "error", session_id=self.session_id, error_type=error_type, message=message, **fields
        )


__all__ = ["AcpSession", "AcpTimeouts", "PromptOutcome"]
