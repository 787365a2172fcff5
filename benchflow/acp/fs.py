"""The client's `fs/read_text_file` and `fs/write_text_file`, served from the sandbox.

Both run inside the sandbox as the agent's user, so the agent can read and write
exactly what its own shell could (a file it cannot write, e.g. the verifier's,
stays unwritable through ACP too). Paths travel as arguments, never interpolated
into the shell script. Reads are capped: a larger file must be read by lines.
"""

from __future__ import annotations

import contextlib
import posixpath

import anyio
from acp import RequestError
from anyio.abc import ByteReceiveStream

from benchflow.acp.launch import with_umask
from benchflow.sandbox.base import Sandbox

DEFAULT_MAX_READ_BYTES = 10 * 1024 * 1024
FS_TIMEOUT_SEC = 60.0

_READ = (
    'p="$1"; [ -f "$p" ] || { echo "no such file: $p" >&2; exit 66; }; '
    '[ -r "$p" ] || { echo "permission denied: $p" >&2; exit 77; }; '
    'if [ -n "$2" ]; then sed -n "$2" "$p"; else cat "$p"; fi | head -c "$3"'
)
_WRITE = 'p="$1"; mkdir -p -- "$(dirname -- "$p")" && cat > "$p"'


class SandboxFs:
    """Text file access for the agent, as `user`, relative paths against `cwd`."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        user: str | None,
        cwd: str,
        max_read_bytes: int = DEFAULT_MAX_READ_BYTES,
        umask: str | None = None,
    ) -> None:
        self._sandbox = sandbox
        self._user = user
        self._umask = umask
        self._cwd = cwd
        self.max_read_bytes = max_read_bytes

    def resolve(self, path: str) -> str:
        return path if posixpath.isabs(path) else posixpath.join(self._cwd, path)

    async def read_text(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        """The file's text, or `limit` lines from the 1-based `line`.

        Raises:
            RequestError: missing file (resource not found), unreadable, or larger
                than `max_read_bytes` (the agent should page with line/limit).
        """
        path = self.resolve(path)
        start = max(line or 1, 1)
        if limit is not None and limit <= 0:
            return ""
        if limit is not None:
            sed_range = f"{start},{start + limit - 1}p"
        elif start > 1:
            sed_range = f"{start},$p"
        else:
            sed_range = ""
        result = await self._sandbox.exec(
            ["sh", "-c", _READ, "sh", path, sed_range, str(self.max_read_bytes + 1)],
            user=self._user,
            cwd=self._cwd,
            timeout=FS_TIMEOUT_SEC,
        )
        if result.exit_code == 66:
            raise RequestError.resource_not_found(path)
        if not result.ok:
            raise RequestError.internal_error({"path": path, "details": result.text(2000).strip()})
        if len(result.stdout) > self.max_read_bytes:
            raise RequestError.invalid_params(
                {
                    "path": path,
                    "details": f"over {self.max_read_bytes} bytes; read it in parts (line/limit)",
                }
            )
        return result.stdout.decode("utf-8", "replace")

    async def write_text(self, path: str, content: str) -> None:
        """Create or replace the file (and its parent directories) as the agent's user.

        Raises:
            RequestError: the write failed (permissions, read-only path...).
        """
        path = self.resolve(path)
        # Content travels on stdin of a live process (never in argv): `Sandbox.exec` need
        # not support stdin, while a live process is what ACP itself runs on.
        process = await self._sandbox.open_process(
            with_umask(["sh", "-c", _WRITE, "sh", path], self._umask), user=self._user,
            cwd=self._cwd
        )
        errors = bytearray()

        async def drain(stream: ByteReceiveStream, keep: bool) -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                async for chunk in stream:
                    if keep and len(errors) < 4096:
                        errors.extend(chunk)

        try:
            with anyio.fail_after(FS_TIMEOUT_SEC):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(drain, process.stdout, False)
                    tg.start_soon(drain, process.stderr, True)
                    with contextlib.suppress(anyio.BrokenResourceError, BrokenPipeError):
                        await process.stdin.send(content.encode())
                    with contextlib.suppress(anyio.BrokenResourceError, BrokenPipeError):
                        await process.stdin.aclose()
                    code = await process.wait()
        except TimeoutError:
            raise RequestError.internal_error(
                {"path": path, "details": "write timed out"}
            ) from None
        finally:
            await process.aclose()
        if code != 0:
            details = errors.decode("utf-8", "replace").strip() or f"exit code {code}"
            raise RequestError.internal_error({"path": path, "details": details})


__all__ = ["DEFAULT_MAX_READ_BYTES", "SandboxFs"]
