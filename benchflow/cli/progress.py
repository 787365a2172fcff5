"""Live progress for jobs: a rich display on a terminal, one plain line per rollout elsewhere.

Off a terminal nothing here imports rich before the first sandbox starts: `prewarm` then
imports it, with the modules a rollout needs only once its sandbox is up, in a thread
while the event loop waits on Docker (`benchflow run`'s startup is Python's imports;
these ~40 ms move off its way to the first sandbox).
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import RolloutResult
from benchflow.settings import host_env

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

AFTER_SANDBOX_START = (
    # the summary and each rollout's line
    "rich.console", "rich.table", "rich.markup",
    # the agent's start and the verifier: imported where they are first used
    "benchflow.rollout.acp_tools", "benchflow.verify.runner", "benchflow.verify.soft",
    "benchflow.verify.baseline", "benchflow.rollout.task_steps",
)
"""Modules a rollout first needs after its sandbox starts, imported by `prewarm`."""


def prewarm(modules: Sequence[str] = AFTER_SANDBOX_START) -> threading.Thread:
    """Import `modules` in a daemon thread, while the event loop's thread waits on Docker
    (the GIL is free then). A module another thread is importing is waited for, as any
    import is; two threads cannot wait on each other because these benchflow modules do
    not import one another in a cycle (`tests/unit/test_cli_imports.py`), and the CLI
    waits for the thread (`JobProgress`) before it prints with rich. An import error is
    left to the rollout, which meets it where it imports the module."""

    def run() -> None:
        for name in modules:
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - reported where the rollout imports it
                    return

    thread = threading.Thread(target=run, name="benchflow-prewarm", daemon=True)
    thread.start()
    return thread


def _may_be_terminal() -> bool:
    """False when rich would surely say stdout is no terminal (asked without importing it):
    not a tty, and neither TTY_COMPATIBLE=1 nor FORCE_COLOR set."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty or host_env("TTY_COMPATIBLE") == "1" or bool(host_env("FORCE_COLOR"))


class JobProgress:
    """Subscribes to rollout events: done/total, pass rate, errors, elapsed."""

    def __init__(self, console: Console | None, total: int, title: str) -> None:
        """`console`: None for the CLI's stdout console, made when first needed."""
        self._console = console
        self.total = total
        self.done = 0
        self.passed = 0
        self.errors = 0
        self.started = time.monotonic()
        self.prewarmed: threading.Thread | None = None
        self.live = (console.is_terminal if console is not None
                     else _may_be_terminal() and self.console.is_terminal)
        self.progress: Progress | None = None  # a bar on a terminal only; lines elsewhere
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=self.console,
                transient=False)
            self.task_id = self.progress.add_task(title, total=total, stats=self._stats())

    @property
    def console(self) -> Console:
        if self._console is None:
            from benchflow.cli._common import _console

            self._console = _console("console")
        return self._console

    def _stats(self) -> str:
        rate = f"{self.passed / self.done:.0%}" if self.done else "-"
        return f"pass {rate}  errors {self.errors}"

    def __enter__(self) -> JobProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._prewarmed()
        if self.progress is not None:
            self.progress.stop()

    def _prewarmed(self) -> None:
        """Wait for `prewarm` (done long before, as a rule): rich is then imported."""
        if self.prewarmed is not None:
            self.prewarmed.join()

    def __call__(self, event: RolloutEvent) -> None:
        if event.kind is RolloutEventKind.SANDBOX_START and self.prewarmed is None:
            self.prewarmed = prewarm()
        if event.kind is not RolloutEventKind.END or event.result is None:
            return
        self._prewarmed()
        result = event.result
        self.done += 1
        self.passed += result.passed
        self.errors += result.error is not None
        if self.progress is not None:
            self.progress.update(self.task_id, completed=self.done, stats=self._stats())
        else:
            self.console.print(f"[{self.done}/{self.total}] {_line(result)}  "
                               f"({time.monotonic() - self.started:.1f}s)", highlight=False)


def _line(r: RolloutResult) -> str:
    outcome = (f"error {r.error.type}" if r.error
               else "not scored" if r.reward is None else f"reward {r.reward:g}")
    return f"{r.rollout_name}: {outcome}"


def _short(text: str | None, limit: int = 40) -> str:
    from rich.markup import escape

    text = (text or "").replace("\n", " ")
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


def results_table(results: Sequence[RolloutResult]) -> Table:
    from rich.table import Table

    table = Table(title="rollouts")
    answers = any(r.answer is not None for r in results)
    columns = ("task", "agent", "attempt", *(("answer",) if answers else ()), "reward", "error",
               "seconds")
    for column in columns:
        table.add_column(column, justify="right" if column in ("reward", "seconds") else "left")
    for r in sorted(results, key=lambda r: (r.agent_name, r.dataset_name, r.task_name, r.attempt)):
        table.add_row(
            r.task_name, r.agent_name, str(r.attempt),
            *((_short(r.answer),) if answers else ()),
            ("-" if r.error else "not scored") if r.reward is None else f"{r.reward:g}",
            f"[red]{r.error.type}[/]" if r.error else "",
            f"{r.durations.total_sec:.1f}" if r.durations.total_sec is not None else "-",
        )
    return table
