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

EXIT_OK = 0
EXIT_ROLLOUT_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130


def __getattr__(name: str) -> Console:
    """`console` and `err_console`, each made on first use: rich (~15 ms to import) stays
    off `benchflow run`'s way to its first sandbox (`progress.prewarm` loads it while the
    sandbox starts). No :emoji: codes: names and messages are printed as they are (and
    rich's emoji table, a few ms to import, is never loaded)."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _console(name)


def _console(name: str) -> Console:
    if name not in globals():
        from rich.console import Console

        globals()[name] = Console(stderr=name == "err_console", emoji=False)
    return globals()[name]


def _error(markup: str) -> None:
    _console("err_console").print(markup, highlight=False, soft_wrap=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


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
        # escaped: messages name TOML tables such as [verifier.env], which rich would eat
        _error(f"[bold red]error:[/] {_escape(str(exc))}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ValidationError as exc:
        _error(f"[bold red]error:[/] {_validation_message(exc)}")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # not bad input: the disk is full
            _error(f"[bold red]error:[/] {exc.filename or ''}: {exc.strerror}: free space there "
                   "and run again")
            raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
        _error(f"[bold red]error:[/] {exc.filename or ''}: {exc.strerror or exc}: check the path")
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ResultsWriteError as exc:
        _error(f"[bold red]error:[/] {_escape(str(exc))}")
        raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
    except BenchflowError as exc:
        _error(f"[bold red]error ({exc.error_type}):[/] {_escape(str(exc))}")
        raise typer.Exit(EXIT_ROLLOUT_ERROR) from None
    except KeyboardInterrupt:
        _console("err_console").print("[yellow]cancelled[/]")
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
