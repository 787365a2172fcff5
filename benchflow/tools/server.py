"""The tool sandbox server: typed tools by resource type, one session per task, over HTTP
and over MCP (streamable HTTP), so the model agent and ACP agents use the same tools.

```bash
benchflow tools serve --port 18890            # or: python -m benchflow.tools.server --port 18890
```

HTTP (JSON):

| route | does |
| --- | --- |
| `GET /health` | `{"ok": true, "tools": [...]}` |
| `GET /tools` | every tool: name, resource type, description, JSON-schema parameters |
| `POST /sessions` | `{tools, resource_types, resource_init_configs, kwargs, timeout_sec}` -> `{session_id, tools}` (400 naming the known tools for an unknown one) |
| `POST /sessions/{id}/call` | `{name, arguments}` -> `{text, images (base64 PNG), is_error}` |
| `DELETE /sessions/{id}` | closes the session (its sandboxes stop) |
| `/mcp?session=ID` | MCP streamable HTTP: the session's tools (without `session`: every tool, in one shared session) |

A server started for one rollout (`ToolServer(open_sessions=False)`, what benchflow starts
for ACP agents on the sandbox network's gateway) serves only the sessions its owner opened
in-process (`ToolServer.open_session`): no shared MCP session, and `POST /sessions` /
`DELETE` answer 403, so an agent reaching it uses the tools it was given and no others.

`--config FILE` (YAML/JSON, AgentFlow's `sandbox_config_path`) holds the server's default
resource settings: `{"resources": {"web": {"corpus": "/data/corpus"}}}`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from benchflow import bounds as B
from benchflow._service import ThreadedService
from benchflow.errors import BenchflowError, ConfigError
from benchflow.tools.base import TOOL_NAMES, load_spec
from benchflow.tools.session import ToolSession, unwrap_config

log = logging.getLogger(__name__)

DEFAULT_PORT = 18890


def load_server_config(path: str | Path | None) -> dict[str, Any]:
    """The `resources` defaults of a server config file (empty without a file).

    Raises:
        ConfigError: unreadable or not a mapping with `resources`.
    """
    if path is None:
        return {}
    from benchflow._config_files import read_config_file

    data = read_config_file(Path(path), "tool server config")
    if not isinstance(data, dict) or set(data) - {"resources"} or \
            not isinstance(data.get("resources", {}), dict):
        raise ConfigError(f"{path}: a tool server config is {{\"resources\": {{\"<type>\": "
                          "{...settings}}}}")
    resources = dict(data.get("resources", {}))
    _check_numbers(resources, path)
    return resources


_NUMBERS = {"cpus": (float, 0.0, B.MAX_CPUS), "memory_mb": (int, 1, B.MAX_MEMORY_MB),
            "timeout_sec": (float, 0.0, B.MAX_SECONDS)}
"""A resource's numeric settings: type, exclusive low (floats) or lowest (ints), highest."""


def _check_numbers(resources: Mapping[str, Any], source: object) -> None:
    """Each resource type's `cpus`, `memory_mb` and `timeout_sec` within their ranges
    (docs/reference/bounds.md).

    Raises:
        ConfigError: one is not a number or out of range, naming `source` and the key.
    """
    for kind, settings in resources.items():
        for key, value in unwrap_config(settings).items():
            if key not in _NUMBERS:
                continue
            typ, low, high = _NUMBERS[key]
            number = isinstance(value, (int, float)) and not isinstance(value, bool) and (
                typ is float or isinstance(value, int))
            if not number or not (low < value <= high if typ is float else low <= value <= high):
                span = (f"above {low:g}, up to {high:,}" if typ is float
                        else f"from {low} to {high:,}")
                raise ConfigError(f"{source}: resources.{kind}.{key} {value!r}: give a number "
                                  f"{span}")


class ToolHost:
    """The sessions of one server."""

    def __init__(self, defaults: Mapping[str, Any] | None = None) -> None:
        self.defaults = dict(defaults or {})
        self.sessions: dict[str, ToolSession] = {}

    def open(self, body: Mapping[str, Any]) -> ToolSession:
        """A new session from a request body.

        Raises:
            ConfigError: an unknown tool or resource type, or a bad field.
        """
        tools = body.get("tools", list(TOOL_NAMES))
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise ConfigError("`tools` must be a list of tool names")
        configs = body.get("resource_init_configs") or {}
        kwargs = body.get("kwargs") or {}
        if not isinstance(configs, dict) or not isinstance(kwargs, dict):
            raise ConfigError("`resource_init_configs` and `kwargs` must be objects")
        session = ToolSession(tools, resource_types=body.get("resource_types") or [],
                              init_configs=configs, kwargs=kwargs, defaults=self.defaults,
                              timeout_sec=float(body.get("timeout_sec", 120)))
        self.sessions[session.id] = session
        return session

    async def close(self, session_id: str) -> bool:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        await session.close()
        return True

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)


def _describe(name: str) -> dict[str, Any]:
    spec = load_spec(name)
    return {"name": spec.name, "resource_type": spec.resource_type,
            "function_name": spec.function_name, "description": spec.description,
            "parameters": spec.parameters}


def _mcp_server(tools_host: ToolHost, shared: bool = True) -> Any:
    """The MCP server (the `mcp` SDK's low-level Server) over the host's sessions
    (`shared`: a request without `?session=` uses one shared session of every tool)."""
    import base64

    from mcp import types
    from mcp.server.lowlevel import Server

    server: Any = Server("benchflow-tools")

    def session_of() -> ToolSession:
        request = server.request_context.request
        wanted = request.query_params.get("session") if request is not None else None
        if wanted:
            session = tools_host.sessions.get(wanted)
            if session is None:
                raise ValueError(f"no tool session {wanted!r}")
            return session
        if not shared:
            raise ValueError("this server serves given sessions only: add ?session=ID")
        common = tools_host.sessions.get("mcp-shared")
        if common is None:
            common = tools_host.open({})
            tools_host.sessions["mcp-shared"] = tools_host.sessions.pop(common.id)
            common.id = "mcp-shared"
        return common

    @server.list_tools()
    async def list_tools() -> list[Any]:
        return [types.Tool(name=spec.function_name, description=spec.description,
                           inputSchema=spec.parameters) for spec in session_of().specs.values()]

    @server.call_tool(validate_input=False)  # the tool reports bad arguments to the model
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        result = await session_of().call(name, dict(arguments or {}))
        content: list[Any] = [types.TextContent(type="text", text=result.text)]
        content += [types.ImageContent(type="image", data=base64.b64encode(png).decode(),
                                       mimeType="image/png") for png in result.images]
        return types.CallToolResult(content=content, isError=result.is_error)

    return server


def create_app(host: ToolHost | None = None, *, bind_host: str = "127.0.0.1",
               open_sessions: bool = True) -> Any:
    """The server's ASGI app (Starlette): the HTTP routes and the MCP endpoint
    (`open_sessions=False`: clients can neither open nor close sessions, see above)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    tools_host = host or ToolHost()
    manager = StreamableHTTPSessionManager(app=_mcp_server(tools_host, shared=open_sessions),
                                           json_response=True, stateless=True)
    closed_door = JSONResponse({"error": "this server serves given sessions only"},
                               status_code=403)
    no_stream = JSONResponse({"error": "MCP over POST only (stateless, no GET stream)"},
                             status_code=405, headers={"Allow": "POST"})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "tools": list(TOOL_NAMES)})

    async def tools(request: Request) -> JSONResponse:
        try:
            return JSONResponse([_describe(n) for n in TOOL_NAMES])
        except BenchflowError as exc:
            return JSONResponse({"error": str(exc)}, status_code=500)

    async def open_session(request: Request) -> JSONResponse:
        if not open_sessions:
            return closed_door
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ConfigError("the body must be a JSON object")
            session = tools_host.open(body)
        except (ValueError, BenchflowError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"session_id": session.id,
                             "tools": [_describe(n) for n in session.specs]})

    async def call(request: Request) -> JSONResponse:
        session = tools_host.sessions.get(request.path_params["sid"])
        if session is None:
            return JSONResponse({"error": "no such session"}, status_code=404)
        try:
            body = await request.json()
            name, arguments = body["name"], body.get("arguments") or {}
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "the body is {name, arguments}"}, status_code=400)
        try:
            result = await session.call(str(name), arguments if isinstance(arguments, dict)
                                        else {})
        except BenchflowError as exc:  # a tool's settings are wrong (e.g. a missing key)
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(result.to_json())

    async def close(request: Request) -> JSONResponse:
        if not open_sessions:
            return closed_door
        closed = await tools_host.close(request.path_params["sid"])
        return JSONResponse({"closed": closed}, status_code=200 if closed else 404)

    async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("method") != "POST":
            # No GET stream (MCP allows 405: a stateless server sends nothing unasked). The
            # SDK's would be sse-starlette 2's (openreward pins it), whose shutdown event is
            # bound to the first event loop: every other tool server of the process (a
            # job's parallel rollouts) failed its streams.
            await no_stream(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                await tools_host.close_all()  # no session's sandbox outlives the server

    app = Starlette(routes=[
        Route("/health", health), Route("/tools", tools),
        Route("/sessions", open_session, methods=["POST"]),
        Route("/sessions/{sid}/call", call, methods=["POST"]),
        Route("/sessions/{sid}", close, methods=["DELETE"]),
        Mount("/mcp", app=mcp_endpoint)], lifespan=lifespan)
    app.state.tool_host = tools_host
    _ = bind_host
    return app


class ToolServer(ThreadedService):
    """The server in a thread of this process, on `port` (0: a free port).

    ```python
    with ToolServer(defaults={"web": {"corpus": "docs/"}}) as server:
        server.url   # http://127.0.0.1:PORT
    ```

    `open_sessions=False`: only sessions opened with `open_session()` are served.
    """

    what = "the tool server"

    def __init__(self, defaults: Mapping[str, Any] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, open_sessions: bool = True) -> None:
        super().__init__(host, port)
        self.open_sessions = open_sessions
        self.tool_host = ToolHost(defaults)
        self._server: Any = None
        self._loop: Any = None

    def open_session(self, body: Mapping[str, Any]) -> str:
        """Open a session (the `POST /sessions` body) in the server's own event loop and
        return its id. Blocking: call it from a worker thread of an async caller.

        Raises:
            ConfigError: an unknown tool or resource type, or a bad field.
        """
        import asyncio

        if self._loop is None:
            raise ConfigError(f"the tool server on {self.host}:{self.port} is not running")

        async def opened() -> str:
            return self.tool_host.open(body).id

        return asyncio.run_coroutine_threadsafe(opened(), self._loop).result(timeout=60)

    def _serve(self) -> None:
        import socket

        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        # log_config=None: uvicorn's dictConfig would close every handler of this process
        # (the rollouts' rollout.log files among them); a client left connected (an agent's
        # stream) must not hold stop() up
        config = uvicorn.Config(create_app(self.tool_host, bind_host=self.host,
                                           open_sessions=self.open_sessions),
                                log_level="warning", lifespan="on", log_config=None,
                                timeout_graceful_shutdown=10)
        self._server = uvicorn.Server(config)
        started = threading.Event()
        original = self._server.startup

        async def startup(sockets: Any = None) -> None:
            import asyncio

            self._loop = asyncio.get_running_loop()  # where open_session() opens sessions
            await original(sockets=sockets)
            started.set()

        self._server.startup = startup
        self._run_thread(self._server.run, sockets=[sock])
        if not started.wait(timeout=60) or self._server.should_exit:
            raise ConfigError(f"the tool server did not start on {self.host}:{self.port}")

    def _shutdown(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._server = self._loop = None


def serve(port: int = DEFAULT_PORT, host: str = "127.0.0.1",
          config_path: str | None = None) -> None:
    """Run the server until interrupted (uvicorn)."""
    import uvicorn

    app = create_app(ToolHost(load_server_config(config_path)), bind_host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchflow.tools.server",
                                     description="benchflow's tool sandbox server")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--config", default=None, help="server config (YAML/JSON)")
    args = parser.parse_args(argv)
    try:
        serve(args.port, args.host, args.config)
    except ConfigError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()


__all__ = ["DEFAULT_PORT", "ToolHost", "ToolServer", "create_app", "load_server_config", "main", "serve"]
