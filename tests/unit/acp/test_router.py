"""The client side's router (`acp/router.py`) answers as the ACP SDK's own router does."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp import RequestError, connect_to_agent
from acp.client.router import build_client_router

from benchflow.acp.router import ClientRouter, connect

pytestmark = pytest.mark.anyio


class Client:
    """Answers what a client answers, noting each call (method name, arguments)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def read_text_file(self, **kwargs: Any) -> dict[str, str]:
        self.calls.append(("read_text_file", kwargs))
        return {"content": "hi"}

    async def session_update(self, **kwargs: Any) -> None:
        self.calls.append(("session_update", kwargs))

    async def release_terminal(self, **kwargs: Any) -> None:
        self.calls.append(("release_terminal", kwargs))

    async def ext_method(self, name: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("ext_method", {"name": name, **payload}))
        return {"ok": True}


MESSAGES: list[tuple[str, Any, bool]] = [
    ("fs/read_text_file", {"sessionId": "s", "path": "/app/a", "line": 2, "_meta": {"k": 1}},
     False),
    ("session/update", {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                                                     "content": {"type": "text", "text": "x"}}},
     True),
    ("terminal/release", {"sessionId": "s", "terminalId": "t"}, False),  # None -> {}
    ("terminal/output", {"sessionId": "s", "terminalId": "t"}, False),  # optional, absent
    ("_vendor/thing", {"a": 1}, False),  # an extension
    ("_vendor/note", {"a": 1}, True),  # an extension notification, no handler
]
FAILING: list[tuple[str, Any, bool]] = [
    ("fs/write_text_file", {"sessionId": "s", "path": "/a", "content": ""}, False),  # absent
    ("no/such", {}, False),
    ("elicitation/create", {"message": "m"}, False),  # unstable: off
    ("fs/read_text_file", {"path": 3}, False),  # bad params
]


async def answer(handler: Any, message: tuple[str, Any, bool]) -> tuple[str, Any]:
    try:
        return "ok", await handler(*message)
    except RequestError as exc:
        return "error", exc.code
    except Exception as exc:  # noqa: BLE001 - compared by type
        return "raised", type(exc).__name__


async def test_requests_notifications_and_extensions_are_dispatched_as_the_sdk_does():
    ours, theirs = Client(), Client()
    sdk = build_client_router(theirs)
    for message in MESSAGES:
        assert await answer(ClientRouter(ours), message) == await answer(sdk, message), message
    assert ours.calls == theirs.calls and len(ours.calls) == 4
    assert ours.calls[0] == ("read_text_file", {"session_id": "s", "path": "/app/a", "line": 2,
                                                "limit": None, "k": 1})


async def test_what_the_sdk_refuses_is_refused_alike():
    ours, theirs = Client(), Client()
    sdk = build_client_router(theirs)
    for message in FAILING:
        expected = await answer(sdk, message)
        assert await answer(ClientRouter(ours), message) == expected, message
        assert expected[0] != "ok"
    assert ours.calls == theirs.calls == []



class _Transport:
    """A transport whose agent says nothing until closed."""

    def __init__(self) -> None:
        self.closed = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        pass

    async def receive(self) -> dict[str, Any] | None:
        await self.closed.wait()
        return None

    async def close(self) -> None:
        self.closed.set()


class _Hooked(Client):
    def __init__(self) -> None:
        super().__init__()
        self.connected: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        self.connected.append(conn)


def _shape(obj: Any) -> dict[str, str]:
    return {name: type(value).__name__ for name, value in vars(obj).items()}


async def test_connect_makes_the_connection_the_sdk_makes_routed_by_ours():
    # connect() builds the SDK's ClientSideConnection without calling its __init__: a new
    # SDK release that changes what __init__ makes shows up here
    ours, theirs = _Hooked(), _Hooked()
    mine, sdk = connect(ours, _Transport()), connect_to_agent(theirs, _Transport())
    try:
        assert type(mine) is type(sdk)
        assert _shape(mine) == _shape(sdk)
        assert _shape(mine._session_updates) == _shape(sdk._session_updates)
        assert mine._session_updates._client is ours
        handler_shape = {**_shape(sdk._conn), "_handler": "ClientRouter"}
        assert _shape(mine._conn) == handler_shape
        assert mine._conn._handler.client is mine._session_updates
        assert mine._conn._transport is not sdk._conn._transport
        assert (ours.connected, theirs.connected) == ([mine], [sdk])
    finally:
        await mine.close()
        await sdk.close()
