"""The agent's process in the sandbox: launched without secrets in argv, stderr drained.

An undrained stderr pipe blocks an agent as soon as it logs a pipe's worth, so
`AgentProcess.drain_stderr()` (a task of the session) reads it continuously into
`agent/<role>.stderr.txt` (made at the first bytes: none for an agent that writes no
stderr) and keeps the tail for error messages. The exit is waited for
when someone asks (`wait_exited`: a session whose connection failed tells "the agent
died" from "the agent is slow"; closing gives the agent a grace period), not by a task
watching every agent for its whole session (on Docker that was an exec inspect every
50 ms); `run()` does both until the process ends, for a process run to its end.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import anyio

from benchflow.acp.launch import default_env_file_path, launch_command, with_umask
from benchflow.errors import SandboxExecError
from benchflow.sandbox.base import SYSTEM_PATH, LiveProcess, Sandbox

logger = logging.getLogger(__name__)

STDERR_TAIL_BYTES = 8192


class AgentProcess:
    """A running agent: its `LiveProcess`, exit status and stderr."""

    def __init__(self, live: LiveProcess, stderr_path: Path | None = None) -> None:
        self.live = live
        self.stderr_path = stderr_path
        self.exit_code: int | None = None
        self.exited = False
        """The process was seen to exit (`exit_code` is then its status, if readable)."""
        self.stderr_done = False
        """stderr has ended (or could not be read): `stderr_tail()` is complete."""
        self._stderr_waiter: anyio.Event | None = None  # made only when someone waits
        self._tail = bytearray()

    @classmethod
    async def launch(
        cls,
        sandbox: Sandbox,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        cwd: str,
        user: str | None,
        stderr_path: Path | None = None,
        umask: str | None = None,
    ) -> AgentProcess:
        """Upload the env file (0600, owned by `user`) and start the launcher with `argv`.

        Raises:
            SandboxExecError: the env file could not be handed to `user`.
            ConfigError: an env variable name is invalid.
        """
        env_file = default_env_file_path()
        launch_argv, env_bytes = launch_command(argv, env, env_file)
        await sandbox.upload_bytes(env_bytes, env_file, mode=0o600)
        if user not in (None, "root"):
            result = await sandbox.exec(
                ["chown", "--", str(user), env_file], user="root", timeout=30,
                env={"PATH": SYSTEM_PATH},
            )
            if not result.ok:
                await sandbox.exec(["rm", "-f", "--", env_file], user="root", timeout=30,
                                   env={"PATH": SYSTEM_PATH})
                raise SandboxExecError(
                    f"could not give the agent env file to user {user!r}: {result.text(500)}"
                )
        live = await sandbox.open_process(with_umask(launch_argv, umask), user=user, cwd=cwd)
        return cls(live, stderr_path)

    async def run(self) -> None:
        """Drain stderr and wait for the exit, until both are done. Never raises."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.drain_stderr)
            await self._wait_exit()

    async def drain_stderr(self) -> None:
        """Read stderr into the file and the tail until it ends. Never raises.

        The file (and its folder) is made when the first bytes arrive, as the stdout noise
        file is: an agent that writes nothing to stderr leaves no empty file (on a busy
        disk a new file or folder costs 0.2-0.8 ms of kernel CPU; with a thousand rollouts
        in flight that is most of what their folders cost). A file that cannot be made is
        logged and the drain goes on into the tail (an undrained pipe blocks the agent)."""
        file = None
        path = self.stderr_path
        try:
            async for chunk in self.live.stderr:
                if path is not None and file is None and chunk:
                    file = await _open_shielded(path)  # off the event loop (a busy disk)
                    path = None  # opened once, or not at all
                if file is not None:
                    file.write(chunk)
                    file.flush()
                self._tail.extend(chunk)
                if len(self._tail) > 2 * STDERR_TAIL_BYTES:
                    del self._tail[:-STDERR_TAIL_BYTES]
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            logger.debug("agent stderr closed", exc_info=True)
        finally:
            if file is not None:
                file.close()
            self.stderr_done = True
            if self._stderr_waiter is not None:
                self._stderr_waiter.set()

    async def _wait_exit(self) -> None:
        try:
            self.exit_code = await self.live.wait()
        except Exception:  # the sandbox failed us; treat the process as gone
            logger.warning("waiting for the agent process failed", exc_info=True)
        self.exited = True

    def stderr_tail(self, max_bytes: int = 2048) -> str:
        """The last bytes the agent wrote to stderr, decoded leniently."""
        return bytes(self._tail[-max_bytes:]).decode("utf-8", "replace")

    async def wait_exited(self, timeout: float | None, *, stderr_sec: float = 1.0) -> bool:
        """Wait up to `timeout` s for the exit, then up to `stderr_sec` for the rest of
        stderr; True if it exited."""
        if not self.exited:
            with anyio.move_on_after(timeout):
                await self._wait_exit()
        if self.exited and stderr_sec > 0 and not self.stderr_done:
            self._stderr_waiter = self._stderr_waiter or anyio.Event()
            with anyio.move_on_after(stderr_sec):
                await self._stderr_waiter.wait()
        return self.exited

    async def kill(self) -> None:
        """Kill the agent's process group and release it (shielded from cancellation)."""
        with anyio.CancelScope(shield=True):
            try:
                await self.live.kill()
                await self.wait_exited(2.0, stderr_sec=0)
                await self.live.aclose()
            except Exception:  # already gone, or the sandbox is going away
                logger.debug("error killing the agent process", exc_info=True)


__all__ = ["AgentProcess"]


def _open_append(path: Path) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("ab")


async def _open_shielded(path: Path) -> IO[bytes] | None:
    """`path` opened for appending in a worker thread, not cancelled with the file open;
    None (logged) when it cannot be made."""
    with anyio.CancelScope(shield=True):
        try:
            return await anyio.to_thread.run_sync(_open_append, path)
        except OSError:
            logger.warning("cannot write the agent's stderr to %s", path, exc_info=True)
            return None
