"""`benchflow model-server SCRIPT`: serve a scripted model for offline agent runs."""

from pathlib import Path
from typing import Annotated

import typer

from benchflow import bounds as B
from benchflow.cli._common import console, user_errors
from benchflow.model_server import serve_forever


def model_server_command(
    script: Annotated[Path, typer.Argument(help="the YAML script of steps")],
    host: Annotated[str, typer.Option("--host", help="address to listen on; use the Docker "
                                      "network gateway so sandboxes reach it")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=B.MAX_PORT,
                                      help="0 picks a free port")] = 0,
    log_dir: Annotated[Path | None, typer.Option("--log-dir", help="where requests.jsonl goes")] = None,
) -> None:
    """Speak Anthropic, OpenAI and Gemini wire formats, answering from SCRIPT, until Ctrl-C."""
    with user_errors():
        serve_forever(script, host, port, log_dir,
                      on_ready=lambda url: console.print(f"model server listening on {url}"))
