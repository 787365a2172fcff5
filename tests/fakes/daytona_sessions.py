"""Session commands of the fake `daytona` SDK (`tests/fakes/daytona_sdk.py`), run for real.

As the Daytona daemon does (apps/daemon/pkg/session), a command of a session writes one
log in which every stdout/stderr line is prefixed with `STDOUT_PREFIX`/`STDERR_PREFIX`
(a last line without a newline gets one); input goes to the command's stdin with a
newline appended when missing and, unless `suppress_input_echo`, is echoed into the log
as stdout; the stdin never reaches EOF; the follow-logs stream replays the log from the
start and ends once the command has an exit code; deleting a session kills every process
the session started (its process tree). Underneath, a command is a `docker exec` with
an attached stdin socket, and the log stream is demultiplexed by the SDK's own code.

Failure injection: `StreamDrop`s in `FakeAsyncDaytona.stream_drops` end a matching
command's log stream early, once each (cleanly, or with an error as a non-1000 close).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
import daytona
from daytona._utils.stream import _std_demux_loop
from daytona.common.errors import create_daytona_error
from daytona.common.process import STDERR_PREFIX, STDOUT_PREFIX, SessionExecuteResponse
from daytona_toolbox_api_client_async import Command

from benchflow.sandbox.docker.process import DockerProcess

_CHUNK = 64 * 1024
"""Bytes per websocket message of the log stream."""
_KILL_TREE = r"""
all=" $(cat "$1" 2>/dev/null) "
again=1
while [ "$again" = 1 ]; do
    again=0
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        case "$all" in *" $p "*) continue ;; esac
        pp=$(sed 's/.*) [A-Za-z] //' "$d/stat" 2>/dev/null | cut -d' ' -f1)
        case "$all" in *" $pp "*) all="$all$p "; again=1 ;; esac
    done
done
kill -KILL $all 2>/dev/null
rm -f "$1"
exit 0
"""


@dataclass
class StreamDrop:
    """End a command's log stream early, once, as a dropped websocket does."""

    match: str
    """A substring of the session command (e.g. the agent's `agent.py`)."""
    after_chunks: int
    """Log messages delivered by the stream before it drops."""
    error: BaseException | None = None
    """Raised by the stream (a non-1000 close); None: a clean close (code 1000), too early."""


@dataclass
class _Command:
    id: str
    command: str
    suppress_input_echo: bool
    pidfile: str
    process: DockerProcess | None = None
    log: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    changed: anyio.Event = field(default_factory=anyio.Event)

    def append(self, data: bytes) -> None:
        self.log.extend(data)
        self.changed.set()
        self.changed = anyio.Event()


@dataclass
class _Session:
    commands: dict[str, _Command] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class SessionCommands:
    """The session half of the fake `AsyncProcess` (mixed into `FakeProcess`)."""

    _sessions: ClassVar[dict[tuple[str, str], _Session]] = {}
    stream_drops: ClassVar[list[StreamDrop]] = []
    _container: Any

    async def _enter(self, method: str) -> None:
        """The failure injector's hook (`FakeProcess` provides it)."""
        raise NotImplementedError

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get((self._container.id, session_id))
        if session is None:
            raise daytona.DaytonaNotFoundError("session not found", status_code=404)
        return session

    def _command(self, session_id: str, command_id: str) -> _Command:
        command = self._session(session_id).commands.get(command_id)
        if command is None:
            raise daytona.DaytonaNotFoundError("command not found", status_code=404)
        return command

    async def create_session(self, session_id: str, request_timeout: float | None = None) -> None:
        await self._enter("process.create_session")
        key = (self._container.id, session_id)
        if key in self._sessions:
            raise daytona.DaytonaConflictError("session already exists", status_code=409)
        self._sessions[key] = _Session()

    async def execute_session_command(self, session_id: str, req: daytona.SessionExecuteRequest,
                                      timeout: int | None = None) -> SessionExecuteResponse:
        await self._enter("process.execute_session_command")
        from tests.fakes.daytona_sdk import _io

        session = self._session(session_id)
        cmd_id = f"cmd-{len(session.commands)}-{id(session):x}"
        command = _Command(cmd_id, req.command, bool(req.suppress_input_echo),
                           f"/tmp/.fake-daytona-{session_id}-{cmd_id}.pid")
        session.commands[cmd_id] = command
        api = self._container.client.api
        argv = ["/bin/sh", "-c", 'echo $$ > "$0"; exec /bin/sh -c "$1"', command.pidfile,
                req.command]
        exec_id = (await _io(api.exec_create, self._container.id, argv, stdin=True,
                             user="root"))["Id"]
        sock = await _io(api.exec_start, exec_id, socket=True)

        async def exit_code() -> int | None:
            info = await _io(api.exec_inspect, exec_id)
            return None if info["Running"] else int(info["ExitCode"] or 0)

        async def no_kill() -> None:
            return None

        command.process = DockerProcess(getattr(sock, "_sock", sock), sock, exit_code, no_kill)
        session.tasks.append(asyncio.get_running_loop().create_task(_run(command)))
        if req.run_async:
            return SessionExecuteResponse.model_construct(cmd_id=cmd_id, output=None, stdout="",
                                                          stderr="", exit_code=None)
        while command.exit_code is None:
            await command.changed.wait()
        output = bytes(command.log).replace(STDOUT_PREFIX, b"").replace(STDERR_PREFIX, b"")
        return SessionExecuteResponse.model_construct(
            cmd_id=cmd_id, output=output.decode("utf-8", "replace"), stdout="", stderr="",
            exit_code=command.exit_code)

    async def get_session_command(self, session_id: str, command_id: str,
                                  request_timeout: float | None = None) -> Command:
        await self._enter("process.get_session_command")
        command = self._command(session_id, command_id)
        return Command(command=command.command, exit_code=command.exit_code, id=command.id)

    async def send_session_command_input(self, session_id: str, command_id: str, data: str,
                                         request_timeout: float | None = None) -> None:
        await self._enter("process.send_session_command_input")
        command = self._command(session_id, command_id)
        if command.exit_code is not None or command.process is None:
            raise create_daytona_error(
                f"command has already completed with exit code {command.exit_code}",
                status_code=410)
        if not data.endswith("\n"):
            data += "\n"  # as the daemon does, "for commands like `read`"
        try:
            await command.process.stdin.send(data.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise create_daytona_error(f"failed to write to input pipe: {exc}",
                                       status_code=500) from exc
        if not command.suppress_input_echo:
            command.append(STDOUT_PREFIX + data.encode())

    async def get_session_command_logs_async(self, session_id: str, command_id: str,
                                             on_stdout: Any, on_stderr: Any) -> None:
        await self._enter("process.get_session_command_logs_async")
        command = self._command(session_id, command_id)
        offset, delivered = 0, 0

        async def recv() -> bytes | None:
            nonlocal offset, delivered
            for drop in self.stream_drops:  # a connection drops whether or not data flows
                if drop.match in command.command and delivered >= drop.after_chunks:
                    self.stream_drops.remove(drop)
                    if drop.error is not None:
                        raise drop.error
                    return None
            while offset >= len(command.log):
                if command.exit_code is not None:
                    return None  # close 1000
                await command.changed.wait()
            chunk = bytes(command.log[offset:offset + _CHUNK])
            offset += len(chunk)
            delivered += 1
            return chunk

        await _std_demux_loop(recv, on_stdout, on_stderr)

    async def delete_session(self, session_id: str, request_timeout: float | None = None) -> None:
        await self._enter("process.delete_session")
        from tests.fakes.daytona_sdk import _io

        session = self._session(session_id)
        for command in session.commands.values():
            if command.exit_code is None:
                await _io(self._container.exec_run, ["/bin/sh", "-c", _KILL_TREE, "kill_tree",
                                                     command.pidfile], user="root")
        for task in session.tasks:
            with anyio.move_on_after(5):
                await asyncio.wait([task])
        self._sessions.pop((self._container.id, session_id), None)


async def _run(command: _Command) -> None:
    """Copy the command's output into its log, line by line, then record the exit code."""
    process = command.process
    assert process is not None

    async def label(stream: Any, prefix: bytes) -> None:
        pending = b""
        try:
            async for chunk in stream:
                *lines, pending = (pending + chunk).split(b"\n")
                if lines:
                    command.append(b"".join(prefix + line + b"\n" for line in lines))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        if pending:
            command.append(prefix + pending + b"\n")

    code = -1  # unless the command is seen to exit
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(label, process.stdout, STDOUT_PREFIX)
            tg.start_soon(label, process.stderr, STDERR_PREFIX)
        try:
            code = await process.wait()
        except daytona.DaytonaError:  # the sandbox went away under the command
            pass
    finally:
        command.exit_code = code
        command.changed.set()
        with anyio.CancelScope(shield=True):
            await process.aclose()
