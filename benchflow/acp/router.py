"""The client side's request router, without a hundred objects per connection.

The ACP SDK's `ClientSideConnection` builds a `MessageRouter` for each connection: eleven
routes, each a closure over the client (about 100 objects the garbage collector tracks),
alive as long as the session. With hundreds of rollouts in flight each holding a session,
a full collection walks all of them. `connect` makes the SDK's connection and hands its
messages to one `ClientRouter` instead: the routes are a table built once per process, and
the handler looks the client's method up per message. Same dispatch as the SDK's router
(agent-client-protocol 0.12): the stable client methods, extension methods ("_name"), the
optional terminal methods' defaults; the unstable elicitation methods are not found, as
the SDK answers when its unstable protocol is off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp import RequestError
from acp.client.connection import ClientSideConnection, _SessionUpdateTracker
from acp.connection import Connection
from acp.meta import CLIENT_METHODS
from acp.schema import (
    CreateTerminalRequest,
    KillTerminalRequest,
    ReadTextFileRequest,
    ReleaseTerminalRequest,
    RequestPermissionRequest,
    SessionNotification,
    TerminalOutputRequest,
    WaitForTerminalExitRequest,
    WriteTextFileRequest,
)
from acp.utils import normalize_result
from pydantic import BaseModel

_Route = tuple[type[BaseModel], str, bool, Any, Callable[[Any], Any] | None]
"""(params model, client method, optional, result when the client lacks it, adapt)."""

_REQUESTS: dict[str, _Route] = {
    CLIENT_METHODS["fs_write_text_file"]: (WriteTextFileRequest, "write_text_file", False,
                                           None, None),
    CLIENT_METHODS["fs_read_text_file"]: (ReadTextFileRequest, "read_text_file", False,
                                          None, None),
    CLIENT_METHODS["session_request_permission"]: (RequestPermissionRequest,
                                                   "request_permission", False, None, None),
    CLIENT_METHODS["terminal_create"]: (CreateTerminalRequest, "create_terminal", True,
                                        None, None),
    CLIENT_METHODS["terminal_output"]: (TerminalOutputRequest, "terminal_output", True,
                                        None, None),
    CLIENT_METHODS["terminal_release"]: (ReleaseTerminalRequest, "release_terminal", True,
                                         {}, normalize_result),
    CLIENT_METHODS["terminal_wait_for_exit"]: (WaitForTerminalExitRequest,
                                               "wait_for_terminal_exit", True, None, None),
    CLIENT_METHODS["terminal_kill"]: (KillTerminalRequest, "kill_terminal", True, {},
                                      normalize_result),
}
_NOTIFICATIONS: dict[str, _Route] = {
    CLIENT_METHODS["session_update"]: (SessionNotification, "session_update", False, None,
                                       None),
}


class ClientRouter:
    """Dispatches the agent's requests and notifications to `client`'s methods."""

    __slots__ = ("client",)

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __call__(self, method: str, params: Any | None, is_notification: bool) -> Any:
        if isinstance(method, str) and method.startswith("_"):  # an extension
            ext = getattr(self.client, "ext_notification" if is_notification else "ext_method",
                          None)
            if ext is None:
                if is_notification:
                    return None
                raise RequestError.method_not_found(method)
            return await ext(method[1:], params if isinstance(params, dict) else {})
        route = (_NOTIFICATIONS if is_notification else _REQUESTS).get(method)
        if route is None:
            raise RequestError.method_not_found(method)
        model, attr, optional, default, adapt = route
        func = getattr(self.client, attr, None)
        if func is None:
            if optional:
                return default
            raise RequestError.method_not_found(method)
        request = model.model_validate(params)
        kwargs = {k: getattr(request, k) for k in type(request).model_fields if k != "field_meta"}
        if meta := getattr(request, "field_meta", None):
            kwargs.update(meta)
        result = await func(**kwargs)
        return adapt(result) if adapt is not None and not is_notification else result


def connect(client: Any, transport: Any) -> ClientSideConnection:
    """`acp.connect_to_agent(client, transport)`, its messages routed by a `ClientRouter`
    (over the SDK's session-update tracker, which `prompt` waits on).

    Made as the SDK's `ClientSideConnection.__init__` makes it from a transport, without
    the router it would build and drop and its runtime-checkable `isinstance(transport,
    Transport)` (together ~95 us a connection on Python 3.11; `tests/unit/acp/test_router.py`
    checks that both make the same connection)."""
    conn = ClientSideConnection.__new__(ClientSideConnection)
    conn._session_updates = _SessionUpdateTracker(client)  # noqa: SLF001 - see above
    conn._conn = Connection(ClientRouter(conn._session_updates), transport)  # noqa: SLF001
    if on_connect := getattr(client, "on_connect", None):
        on_connect(conn)
    return conn


__all__ = ["ClientRouter", "connect"]
