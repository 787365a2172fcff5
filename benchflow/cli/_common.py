"""Shared CLI plumbing: exit codes, user-facing errors, the console."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.markup import escape

from benchflow.errors import BenchflowError, ConfigError

EXIT_OK = 0
EXIT_ROLLOUT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130

console = Console()
err_console = Console(stderr=True)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Bad input -> one clear line on stderr and exit 2; infrastructure errors -> exit 1."""
    try:
        yield
    except ConfigError as exc:
        # escaped: messages name TOML tables such as [verifier.env], which rich would eat
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except BenchflowError as exc:
        err_console.print(f"[bold red]error ({exc.error_type}):[/] {escape(str(exc))}",
                          highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
    except KeyboardInterrupt:
        err_console.print("[yellow]cancelled[/]")
        raise typer.Exit(EXIT_CANCELLED) from None


def configure_logging(level: str) -> None:
    """Console shows `level` and up; rollout.log files get INFO and up regardless."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level.upper())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger("benchflow").setLevel(min(logging.INFO, logging.getLevelName(level.upper())))
