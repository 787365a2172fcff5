"""The tool server of a rollout's ACP agents (`RolloutConfig.acp_tools`).

Before the first agent step, benchflow starts a tool server in this process, listening
where the sandbox reaches the host (the sandbox network's gateway, `RolloutNetwork.
service_host()`; under `model-only` exactly its port is allowed), opens one session with
the configured tools and settings and the item's `kwargs`, and adds the session to the
context's MCP servers as `benchflow` (streamable HTTP, required: an agent that does not
accept HTTP MCP servers fails the rollout instead of running without the tools). The
server opens no other session (`ToolServer(open_sessions=False)`). The agents report the
calls as tool calls with their results in the trajectory. After the rollout the server
stops, and with it the session's sandboxes (`code:run`, `vm:*`).

Under any policy but `public`, `web:browse` defaults to `allow_internet: false` (the
sandbox's policy holds for the host-side fetches too; a resource setting may say
otherwise), and the session's Docker sandboxes carry the job's label (`benchflow sandbox
cleanup --job`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio

from benchflow.agents.base import driver_capabilities
from benchflow.errors import ConfigError
from benchflow.mcp import McpServer, merge_servers
from benchflow.sandbox.labels import LABEL_JOB
from benchflow.tools.acp import MCP_SERVER_NAME

if TYPE_CHECKING:
    from benchflow.rollout.rollout import Rollout

log = logging.getLogger(__name__)

def server_defaults(policy: str, job_name: str) -> dict[str, Any]:
    """The rollout's resource defaults, under every configured setting (see above)."""
    labels = {"labels": {LABEL_JOB: job_name}}
    defaults: dict[str, Any] = {"code": dict(labels), "vm": dict(labels)}
    if policy != "public":
        defaults["web"] = {"allow_internet": False}
    return defaults


async def open_acp_tools(rollout: Rollout) -> None:
    """Start the rollout's tool server and give its session to the ACP agents (a no-op
    without `acp_tools`, or when already open).

    Raises:
        ConfigError: no ACP agent would get the tools; the `tools` extra is missing; the
            sandbox cannot reach this host; a bad tool setting.
        SandboxStartError: docker refused the firewall rule.
    """
    config, ctx, network = rollout.config.acp_tools, rollout.ctx, rollout.network
    if config is None or ctx is None or ctx.tool_server is not None:
        return
    if not any(driver_capabilities(d).mcp_sessions for d in rollout.drivers.values()):
        raise ConfigError(f"tools {', '.join(config.tools)} are given to ACP agents over MCP, "
                          "and this rollout runs none (the model agent takes them as its "
                          "own `tools`)")
    if network is None or ctx.sandbox is None:
        raise ConfigError("tools for ACP agents need the agents' sandbox")
    from benchflow._extras import require

    require("starlette", "tools", "the tool server")
    from benchflow.tools.server import ToolServer

    server = ToolServer(defaults=server_defaults(network.policy, rollout.job_name),
                        host=await network.service_host(), open_sessions=False)
    ctx.tool_server = server  # stopped by close_acp_tools, whatever happens next
    await anyio.to_thread.run_sync(server.start)
    await network.allow_port(server.port)
    session_id = await anyio.to_thread.run_sync(server.open_session, {
        "tools": list(config.tools), "resource_types": list(config.resource_types),
        "resource_init_configs": dict(config.resource_init_configs),
        "kwargs": dict(ctx.task_input),
        "timeout_sec": ctx.scaled(config.timeout_sec)})
    url = f"{server.url}/mcp?session={session_id}"
    ctx.mcp_servers = merge_servers(ctx.mcp_servers, [McpServer(
        name=MCP_SERVER_NAME, transport="streamable-http", url=url, required=True)])
    log.info("tool server for the ACP agents: %s (%s; network %s)", url,
             ", ".join(config.tools), network.policy)


async def close_acp_tools(rollout: Rollout) -> None:
    """Stop the rollout's tool server and its session's sandboxes (never raises)."""
    ctx = rollout.ctx
    server = ctx.tool_server if ctx is not None else None
    if server is None:
        return
    ctx.tool_server = None
    with anyio.CancelScope(shield=True):
        try:
            await anyio.to_thread.run_sync(server.stop)
        except Exception as exc:  # noqa: BLE001 - never mask the rollout's outcome
            log.warning("could not stop the tool server: %s", exc)


__all__ = ["close_acp_tools", "open_acp_tools", "server_defaults"]
