"""Opening an ACP session: initialize, authenticate, session/new, model selection.

Kept apart from the session so that the choices it makes (which auth method,
which model value) are small pure functions, tested without an agent.
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.core import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    EnvVarAuthMethod,
    EnvVariable,
    FileSystemCapabilities,
    HttpHeader,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    McpServerStdio,
    SessionConfigOptionSelect,
    SseMcpServer,
)

from benchflow.errors import AgentProtocolError, ConfigError
from benchflow.mcp import McpServer

CLIENT_INFO = Implementation(name="benchflow", title="benchflow", version="0.1.0")
CLIENT_CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
)

Rpc = Callable[[str, Awaitable[Any]], Awaitable[Any]]
"""Awaits an SDK call named by its method, raising benchflow errors (the session's `_rpc`)."""


@dataclass(frozen=True)
class Initialized:
    """What initialize (+ authenticate) established about the agent."""

    agent_info: dict[str, Any] | None
    auth_method: str | None
    mcp_transports: frozenset[str] = frozenset({"stdio"})
    """MCP transports the agent accepts at session/new (stdio always; http, sse if advertised)."""
    load_session: bool = False
    """The agent advertises `session/load` (it can restore a session it saved)."""


@dataclass(frozen=True)
class OpenedSession:
    """What session/new (+ model selection) established."""

    session_id: str
    model_requested: str | None
    model_recorded: str | None
    model_selectable: bool
    model_state: dict[str, Any]
    """Recorded in the trajectory as the `agent_state` event named "model"."""


async def initialize_agent(
    conn: ClientSideConnection, rpc: Rpc, *, credentials: Mapping[str, str], auth_method: str | None
) -> Initialized:
    """initialize (advertising fs and terminal), then authenticate when a method fits.

    Raises:
        AgentProtocolError: another protocol version, or the agent refused a step.
        ConfigError: `auth_method` is not one the agent offers.
    """
    init: InitializeResponse = await rpc(
        "initialize",
        conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=CLIENT_CAPABILITIES,
            client_info=CLIENT_INFO,
        ),
    )
    if init.protocol_version != PROTOCOL_VERSION:
        raise AgentProtocolError(
            f"agent speaks ACP protocol version {init.protocol_version}; "
            f"benchflow speaks {PROTOCOL_VERSION}"
        )
    info = init.agent_info
    agent_info = info.model_dump(mode="json", by_alias=True, exclude_none=True) if info else None
    method = choose_auth(init, credentials, auth_method)
    if method is not None:
        await rpc("authenticate", conn.authenticate(method_id=method))
    caps = init.agent_capabilities
    return Initialized(agent_info, method, mcp_transports(init),
                       load_session=bool(caps is not None and caps.load_session))


def mcp_transports(init: InitializeResponse) -> frozenset[str]:
    """The MCP transports an agent accepts: stdio (every ACP agent), plus `http` and `sse`
    when its `agentCapabilities.mcpCapabilities` say so."""
    caps = init.agent_capabilities.mcp_capabilities if init.agent_capabilities else None
    extra = {name for name in ("http", "sse") if caps is not None and getattr(caps, name)}
    return frozenset({"stdio", *extra})


AcpMcpServer = McpServerStdio | HttpMcpServer | SseMcpServer


def acp_mcp_servers(servers: list[McpServer], accepted: frozenset[str]
                    ) -> tuple[list[AcpMcpServer], list[McpServer]]:
    """(servers in ACP's schema for session/new, servers dropped for their transport)."""
    sent: list[AcpMcpServer] = []
    dropped: list[McpServer] = []
    for server in servers:
        if server.acp_kind not in accepted:
            dropped.append(server)
        elif server.acp_kind == "stdio":
            assert server.command is not None
            sent.append(McpServerStdio(
                name=server.name, command=server.command, args=list(server.args),
                env=[EnvVariable(name=k, value=v) for k, v in server.env.items()]))
        else:
            headers = [HttpHeader(name=k, value=v) for k, v in server.headers.items()]
            cls = HttpMcpServer if server.acp_kind == "http" else SseMcpServer
            sent.append(cls(name=server.name, url=server.url or "", headers=headers,
                            type=server.acp_kind))
    return sent, dropped


async def open_session(
    conn: ClientSideConnection,
    rpc: Rpc,
    *,
    cwd: str,
    model: str | None,
    on_session: Callable[[str], None],
    mcp_servers: list[AcpMcpServer] | None = None,
) -> OpenedSession:
    """session/new in `cwd`, then select `model` when the agent offers a model option.

    `on_session(id)` runs as soon as session/new answers (updates buffered for the
    id are written then).

    Raises:
        ConfigError: the agent refused the model.
    """
    new = await rpc("session/new", conn.new_session(cwd=cwd, mcp_servers=mcp_servers or []))
    on_session(new.session_id)
    option = model_option(new.config_options or [])
    if option is None:
        state: dict[str, Any] = {"offered": False, "requested": model}
        return OpenedSession(new.session_id, model, model, False, state)
    values = option_values(option)
    current = option.current_value
    if model is not None and model != current:
        value = match_model(model, values)
        try:
            resp = await rpc(
                "session/set_config_option",
                conn.set_config_option(config_id=option.id, session_id=new.session_id, value=value),
            )
        except AgentProtocolError as exc:
            if isinstance(exc.__cause__, RequestError):
                raise ConfigError(
                    f"agent refused model {model!r} (offers {values}): {exc}"
                ) from exc
            raise
        updated = model_option(resp.config_options)
        current = updated.current_value if updated is not None else value
    state = {
        "offered": True,
        "configId": option.id,
        "requested": model,
        "currentValue": current,
        "options": values,
    }
    return OpenedSession(new.session_id, model, current, True, state)


async def load_session(
    conn: ClientSideConnection,
    rpc: Rpc,
    *,
    session_id: str,
    cwd: str,
    on_session: Callable[[str], None],
    mcp_servers: list[AcpMcpServer] | None = None,
) -> OpenedSession:
    """session/load of a session the agent saved (its history is replayed as updates,
    written to the trajectory as they come). The model is the session's own.

    Raises:
        AgentProtocolError: the agent refused (e.g. it does not have the session).
    """
    on_session(session_id)
    resp = await rpc("session/load", conn.load_session(cwd=cwd, session_id=session_id,
                                                       mcp_servers=mcp_servers or []))
    option = model_option(resp.config_options or [])
    current = option.current_value if option is not None else None
    state = {"offered": option is not None, "loaded": session_id, "currentValue": current}
    return OpenedSession(session_id, None, current, option is not None, state)


def choose_auth(
    init: InitializeResponse, credentials: Mapping[str, str], explicit: str | None
) -> str | None:
    """The auth method to use: `explicit` if given, else the first env-var method whose
    required variables are all among the credentials (and at least one is). None when
    no credential is configured or nothing fits: then no `authenticate` is sent."""
    methods = init.auth_methods or []
    ids = [m.id for m in methods]
    if explicit is not None:
        if explicit not in ids:
            raise ConfigError(f"agent offers auth methods {ids}, not {explicit!r}")
        return explicit
    if not credentials:
        return None
    for method in methods:
        if isinstance(method, EnvVarAuthMethod):
            names = [v.name for v in method.vars]
            required = [v.name for v in method.vars if not v.optional]
            if all(n in credentials for n in required) and any(n in credentials for n in names):
                return method.id
    return None


def model_option(options: list[Any]) -> SessionConfigOptionSelect | None:
    """The agent's model selector: the select option with id "model", else category "model"."""
    selects = [o for o in options if isinstance(o, SessionConfigOptionSelect)]
    by_id = next((o for o in selects if o.id == "model"), None)
    return by_id or next((o for o in selects if o.category == "model"), None)


def option_values(option: SessionConfigOptionSelect) -> list[str]:
    """Every selectable value, flattening option groups."""
    values: list[str] = []
    for item in option.options:
        group = getattr(item, "options", None)
        if isinstance(group, list):
            values.extend(str(o.value) for o in group)
        else:
            values.append(str(item.value))
    return values


def match_model(model: str, values: list[str]) -> str:
    """The offered value for `model`: exact, else same name without a `provider/` prefix,
    else `model` itself (the agent decides whether it accepts it)."""
    if model in values:
        return model
    bare = posixpath.basename(model)
    return next((v for v in values if posixpath.basename(v) == bare), model)


__all__ = [
    "AcpMcpServer",
    "Initialized",
    "OpenedSession",
    "acp_mcp_servers",
    "choose_auth",
    "initialize_agent",
    "match_model",
    "mcp_transports",
    "model_option",
    "open_session",
    "option_values",
]
