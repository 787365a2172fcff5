"""The one boundary where ACP SDK and transport exceptions become benchflow errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from acp import RequestError
from pydantic import ValidationError

from benchflow.errors import AgentExecutionError, AgentProtocolError

FOREIGN_ERRORS: tuple[type[BaseException], ...] = (
    RequestError,
    ConnectionError,
    ValidationError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)
"""Every foreign exception class `map_acp_errors()` translates (tests check each)."""


class AgentExitedError(AgentExecutionError):
    """The agent process exited while benchflow was waiting on it (mid-prompt or handshake).

    `exit_code` is the process's exit status (None if it could not be read) and
    `stderr_tail` the last lines it wrote to stderr; both are in the message too.
    """

    def __init__(self, exit_code: int | None, stderr_tail: str, during: str = "a prompt") -> None:
        tail = stderr_tail.strip()
        super().__init__(
            f"agent exited with code {exit_code} during {during}"
            + (f"; stderr tail:\n{tail}" if tail else "")
        )
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


def translate_acp_error(exc: BaseException, context: str = "ACP") -> AgentProtocolError | None:
    """The benchflow error for a foreign ACP/transport exception, or None if it is not one."""
    if isinstance(exc, RequestError):
        detail = f" ({exc.data})" if exc.data else ""
        return AgentProtocolError(f"{context}: agent answered error {exc.code}: {exc}{detail}")
    if isinstance(exc, ValidationError):
        return AgentProtocolError(f"{context}: agent sent an invalid message: {exc}")
    if isinstance(
        exc,
        ConnectionError | anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream,
    ):
        return AgentProtocolError(
            f"{context}: connection to the agent closed ({type(exc).__name__}: {exc})"
        )
    return None


@contextmanager
def map_acp_errors(context: str = "ACP") -> Iterator[None]:
    """Translate SDK/transport exceptions raised inside the block to `AgentProtocolError`.

    `RequestError` (a JSON-RPC error answer) keeps its code in the message; a
    closed connection or broken pipe means the agent went away. The session, which
    can tell a dead process from a protocol fault, raises `AgentExitedError` instead
    when the process is gone. The original exception is the `__cause__`.
    """
    try:
        yield
    except FOREIGN_ERRORS as exc:
        mapped = translate_acp_error(exc, context)
        assert mapped is not None
        raise mapped from exc


__all__ = ["FOREIGN_ERRORS", "AgentExitedError", "map_acp_errors", "translate_acp_error"]
