"""Live progress for jobs: a rich display on a terminal, one plain line per rollout elsewhere."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import RolloutResult

if TYPE_CHECKING:
    from rich.progress import Progress


class JobProgress:
    """Subscribes to rollout events: done/total, pass rate, errors, elapsed."""

    def __init__(self, console: Console, total: int, title: str) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.passed = 0
        self.errors = 0
        self.started = time.monotonic()
        self.live = console.is_terminal
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
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=console,
                transient=False)
            self.task_id = self.progress.add_task(title, total=total, stats=self._stats())

    def _stats(self) -> str:
        rate = f"{self.passed / self.done:.0%}" if self.done else "-"
        return f"pass {rate}  errors {self.errors}"

    def __enter__(self) -> JobProgress:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, event: RolloutEvent) -> None:
        if event.kind is not RolloutEventKind.END or event.result is None:
            return
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
