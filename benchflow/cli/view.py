"""`benchflow view`: browse jobs in a local web app, or export a static copy."""

from pathlib import Path
from typing import Annotated

import typer

from benchflow.cli._common import EXIT_BAD_INPUT, console, err_console, user_errors


def view_command(
    jobs_dir: Annotated[Path, typer.Argument(help="the jobs folder")] = Path("jobs"),
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="port to listen on (0: any free port)")] = 8700,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
    export: Annotated[Path | None, typer.Option(
        "--export", help="write a static copy to this folder instead of serving")] = None,
) -> None:
    """Browse jobs, trials and trajectories in a web browser."""
    with user_errors():
        if not jobs_dir.is_dir():
            err_console.print(f"[bold red]error:[/] {jobs_dir}: no such jobs folder "
                              "(pass the folder given to --jobs-dir; default ./jobs)",
                              highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_BAD_INPUT)
        if export is not None:
            from benchflow.view import export_site

            n = export_site(jobs_dir, export)
            console.print(f"wrote {n} pages to {export}; open {export / 'index.html'}")
            return
        try:
            import starlette  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError:
            err_console.print("[bold red]error:[/] benchflow view needs the `view` extra: "
                              "pip install 'benchflow[view]'", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        from benchflow.view import serve

        serve(jobs_dir.resolve(), host=host, port=port, ready=lambda url: console.print(
            f"benchflow view: {url}  (jobs in {jobs_dir}; Ctrl-C stops)", highlight=False))
