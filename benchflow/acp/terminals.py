"""The client's `terminal/*` methods, served by processes in the sandbox.

An agent that asks its client to run a command gets a process in the sandbox, as
the agent's user, whose stdout and stderr (one pipe, so their lines keep the order they
were written in, as in a terminal) are drained continuously into a buffer
capped at the requested byte limit (oldest output dropped first, cut at a UTF-8
character boundary, as the ACP spec asks).
"""

from __future__ import annotations

import itertools
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
from acp import RequestError
from anyio.abc import ByteReceiveStream, TaskGroup

from benchflow.acp.launch import with_umask
from benchflow.sandbox.base import LiveProcess, Sandbox

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
MAX_OUTPUT_LIMIT = 16 * 1024 * 1024


@dataclass
class ExitStatus:
    exit_code: int | None
    signal: str | None


@dataclass
class _Terminal:
    id: str
    process: LiveProcess
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    status: ExitStatus | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    def append(self, chunk: bytes) -> None:
        self.output.extend(chunk)
        excess = len(self.output) - self.limit
        if excess > 0:
            del self.output[:excess]
            self.truncated = True

    def text(self) -> str:
        data = bytes(self.output)
        if self.truncated:  # the cut may have split a character: skip continuation bytes
            start = 0
            while start < len(data) and start < 4 and (data[start] & 0xC0) == 0x80:
                start += 1
            data = data[start:]
        return data.decode("utf-8", "replace")


def _exit_status(code: int) -> ExitStatus:
    if code < 0:
        try:
            return ExitStatus(exit_code=None, signal=signal.Signals(-code).name)
        except ValueError:
            return ExitStatus(exit_code=None, signal=str(-code))
    return ExitStatus(exit_code=code, signal=None)


class TerminalManager:
    """The terminals one ACP session created; `aclose()` kills whatever is left."""

    def __init__(
        self,
        sandbox: Sandbox,
        task_group: TaskGroup,
        *,
        user: str | None,
        cwd: str,
        default_limit: int = DEFAULT_OUTPUT_LIMIT,
        max_limit: int = MAX_OUTPUT_LIMIT,
        umask: str | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._umask = umask
        self._tg = task_group
        self._user = user
        self._cwd = cwd
        self._default_limit = default_limit
        self._max_limit = max_limit
        self._terminals: dict[str, _Terminal] = {}
        self._ids = itertools.count(1)
        self.n_created = 0

    async def create(
        self,
        command: str,
        args: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
    ) -> str:
        """Start `command args...` (or `sh -c command` when no args are given); return its id."""
        argv = [command, *args] if args else ["sh", "-c", command]
        argv = ["sh", "-c", 'exec "$@" 2>&1', "sh", *argv]  # one stream, in write order
        limit = min(
            output_byte_limit if output_byte_limit is not None else self._default_limit,
            self._max_limit,
        )
        process = await self._sandbox.open_process(
            with_umask(argv, self._umask), user=self._user, cwd=cwd or self._cwd,
            env=env or None
        )
        terminal = _Terminal(id=f"term-{next(self._ids)}", process=process, limit=max(limit, 0))
        self._terminals[terminal.id] = terminal
        self.n_created += 1
        try:
            await process.stdin.aclose()  # terminal commands get no input
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        self._tg.start_soon(self._pump, terminal, name=f"acp-terminal-{terminal.id}")
        return terminal.id

    async def _pump(self, terminal: _Terminal) -> None:
        async def drain(stream: ByteReceiveStream) -> None:
            try:
                async for chunk in stream:
                    terminal.append(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, terminal.process.stdout)
                tg.start_soon(drain, terminal.process.stderr)
            terminal.status = _exit_status(await terminal.process.wait())
        except Exception:  # a sandbox failure ends this terminal, never the session
            logger.exception("terminal %s failed", terminal.id)
        finally:
            terminal.done.set()

    def _get(self, terminal_id: str) -> _Terminal:
        try:
            return self._terminals[terminal_id]
        except KeyError:
            raise RequestError.invalid_params(
                {"terminalId": terminal_id, "details": "unknown terminal"}
            ) from None

    def output(self, terminal_id: str) -> tuple[str, bool, ExitStatus | None]:
        """Output so far, whether it was truncated, and the exit status once it exited."""
        terminal = self._get(terminal_id)
        return terminal.text(), terminal.truncated, terminal.status

    async def wait_for_exit(self, terminal_id: str) -> ExitStatus:
        terminal = self._get(terminal_id)
        await terminal.done.wait()
        return terminal.status or ExitStatus(exit_code=None, signal=None)

    async def kill(self, terminal_id: str) -> None:
        terminal = self._get(terminal_id)
        if not terminal.done.is_set():
            await terminal.process.kill()

    async def release(self, terminal_id: str) -> None:
        """Kill the command if it still runs and forget the terminal."""
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is None:
            return
        await self._close(terminal)

    async def _close(self, terminal: _Terminal) -> None:
        with anyio.CancelScope(shield=True):
            if not terminal.done.is_set():
                await terminal.process.kill()
            await terminal.process.aclose()

    async def aclose(self) -> None:
        terminals, self._terminals = list(self._terminals.values()), {}
        for terminal in terminals:
            await self._close(terminal)


__all__ = ["DEFAULT_OUTPUT_LIMIT", "ExitStatus", "TerminalManager"]
