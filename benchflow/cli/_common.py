"""Shared CLI plumbing: exit codes, user-facing errors, the console."""

from __future__ import annotations

import contextlib
import errno
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import typer
from pydantic import ValidationError

from benchflow.errors import BenchflowError, ConfigError, ResultsWriteError

if TYPE_CHECKING:
    from rich.console import Console

    console: Console
    err_console: Console

EXIT_OK = 0
EXIT_ROLLOUT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


def __getattr__(name: str) -> object:
    """`console` and `err_console`, made (and rich imported, ~15 ms) on first use:
    `benchflow run` starts its first sandbox before it prints anything."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in globals():
        return globals()[name]
    from rich.console import Console

    # no :emoji: codes: names and messages are printed as they are (and rich's emoji table,
    # a few ms to import, is never loaded)
    globals().update(console=Console(emoji=False),
                     err_console=Console(stderr=True, emoji=False))
    return globals()[name]


def _stderr(markup: str, *, escaped: str = "") -> None:
    """`markup` then `escaped` (rich markup in it escaped: messages name TOML tables such as
    [verifier.env], which rich would eat) on stderr, one line."""
    from rich.markup import escape

    __getattr__("err_console").print(markup + escape(escaped), highlight=False,
                                     soft_wrap=True)


def _validation_message(exc: ValidationError) -> str:
    """A pydantic ValidationError as `invalid <model>: field: problem; ...` (no traceback)."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: "
        f"{err['msg'].removeprefix('Value error, ')}" for err in exc.errors())
    return f"invalid {exc.title}: {problems}"


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Bad input -> one clear message on stderr and exit 2; infrastructure errors -> exit 1.

    Bad input is a `ConfigError` (task, job file, agent, option), a pydantic
    `ValidationError` of any config, or a path the OS refuses (`OSError`).
    """
    try:
        yield
    except ConfigError as exc:
        _stderr("[bold red]error:[/] ", escaped=str(exc))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ValidationError as exc:
        _stderr(f"[bold red]error:[/] {_validation_message(exc)}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # not bad input: the disk is full
            _stderr(f"[bold red]error:[/] {exc.filename or ''}: {exc.strerror}: free space "
                    "there and run again")
            raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
        _stderr(f"[bold red]error:[/] {exc.filename or ''}: {exc.strerror or exc}: check the "
                "path")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ResultsWriteError as exc:
        _stderr("[bold red]error:[/] ", escaped=str(exc))
        raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
    except BenchflowError as exc:
        _stderr(f"[bold red]error ({exc.error_type}):[/] ", escaped=str(exc))
        raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
    except KeyboardInterrupt:
        _stderr("[yellow]cancelled[/]")
        raise typer.Exit(EXIT_CANCELLED) from None


class _Console:
    handler: logging.Handler | None = None
    explicit = False


def configure_logging(level: str | None) -> None:
    """Console shows `level` and up (default warning); rollout.log files get INFO and up
    regardless. An explicit `--log-level` wins over a job file's `log_level`."""
    if _Console.handler is None:
        _Console.handler = logging.StreamHandler(sys.stderr)
        _Console.handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(_Console.handler)
    _Console.explicit = level is not None
    _apply(level or "warning")


def set_console_level(level: str) -> None:
    """A job file's `log_level`: the console's level, unless `--log-level` was given."""
    if not _Console.explicit:
        _apply(level)


def _apply(level: str) -> None:
    value = logging.getLevelName(level.upper())
    if _Console.handler is not None:
        _Console.handler.setLevel(value)
    logging.getLogger("benchflow").setLevel(min(logging.INFO, value))
