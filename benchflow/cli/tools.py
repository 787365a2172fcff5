"""`benchflow tools serve|list`: the tool sandbox server (web, doc, code, vm tools)."""

from pathlib import Path
from typing import Annotated

import typer

from benchflow import bounds as B
from benchflow.cli._common import console, user_errors

app = typer.Typer(no_args_is_help=True, help="The tool sandbox server (AgentFlow's sandbox).")


@app.command("serve")
def serve_command(
    port: Annotated[int, typer.Option("--port", min=0, max=B.MAX_PORT,
                                      help="port to listen on")] = 18890,
    host: Annotated[str, typer.Option("--host", help="address; the Docker gateway lets "
                                      "sandboxed agents reach its MCP endpoint")] = "127.0.0.1",
    config: Annotated[Path | None, typer.Option(
        "--config", help="server config: {resources: {<type>: settings}} (YAML/JSON)")] = None,
) -> None:
    """Serve web:search, web:browse, doc:read, code:run and vm:* over HTTP and MCP."""
    from benchflow.tools.server import load_server_config, serve

    with user_errors():
        load_server_config(config)  # a bad file fails before the port is taken
        console.print(f"tool server on http://{host}:{port} (MCP: /mcp)")
        serve(port, host, str(config) if config else None)


@app.command("list")
def list_command() -> None:
    """List the tools and what each does."""
    from benchflow.tools.base import TOOL_NAMES, load_spec

    with user_errors():
        for name in TOOL_NAMES:
            console.print(f"{name:<15} {load_spec(name).description}")
