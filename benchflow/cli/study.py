"""`benchflow study STUDY`: run a study file's arms over the same tasks and attempts (or
resume it: the same file again, or the study folder), then print the comparison.

Exit codes: 0 every trial ran without error, 1 some trial ended in an error, 2 bad input
(study file, arms, a study that changed since it started), 130 cancelled.
"""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.console import Console

from benchflow import bounds as B
from benchflow.cli._common import (
    EXIT_CANCELLED,
    EXIT_OK,
    EXIT_ROLLOUT_ERROR,
    console,
    err_console,
    user_errors,
)
from benchflow.rollout.events import RolloutEvent, RolloutEventKind, RolloutListener

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from benchflow.rollout.result import RolloutResult
    from benchflow.study.runner import PreparedStudy, StudyArm


class StudyProgress:
    """One progress bar per arm (done/total, pass rate, errors) on a terminal; one plain
    line per finished trial elsewhere."""

    def __init__(self, console: Console, study: "PreparedStudy") -> None:
        self.console = console
        self.started = time.monotonic()
        self.totals = {a.name: len(a.prepared.to_run) for a in study.arms}
        self.done = dict.fromkeys(self.totals, 0)
        self.passed = dict.fromkeys(self.totals, 0)
        self.errors = dict.fromkeys(self.totals, 0)
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        if console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=console)
            for name, total in self.totals.items():
                self.tasks[name] = self.progress.add_task(name, total=total,
                                                          stats=self._stats(name))

    def _stats(self, arm: str) -> str:
        done = self.done[arm]
        rate = f"{self.passed[arm] / done:.0%}" if done else "-"
        return f"pass {rate}  errors {self.errors[arm]}"

    def __enter__(self) -> "StudyProgress":
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def listener(self, arm: str) -> RolloutListener:
        def on_event(event: RolloutEvent) -> None:
            if event.kind is not RolloutEventKind.END or event.result is None:
                return
            result = event.result
            self.done[arm] += 1
            self.passed[arm] += result.passed
            self.errors[arm] += result.error is not None
            if self.progress is not None:
                self.progress.update(self.tasks[arm], completed=self.done[arm],
                                     stats=self._stats(arm))
                return
            outcome = (f"error {result.error.type}" if result.error
                       else "not scored" if result.reward is None else f"reward {result.reward:g}")
            self.console.print(f"[{arm} {self.done[arm]}/{self.totals[arm]}] "
                               f"{result.rollout_name}: {outcome}  "
                               f"({time.monotonic() - self.started:.1f}s)", highlight=False,
                               markup=False)

        return on_event


def _notify(message: str) -> None:
    err_console.print(f"[yellow]{message}[/]", highlight=False)


def _print_report(study: "PreparedStudy") -> None:
    """The comparison of the arms (when the `study` extra is installed)."""
    from benchflow.cli.compare import Format, build_comparison, render, rich_report
    from benchflow.errors import ConfigError

    try:
        comparison = build_comparison([study.study_dir], baseline=None, errors="exclude",
                                      seed=0, resamples=10_000, confidence=0.95)
    except ConfigError as exc:
        err_console.print(f"no comparison: {exc}", highlight=False, soft_wrap=True)
        return
    if console.is_terminal:
        console.print(rich_report(comparison))
    else:
        console.out(render(comparison, Format.table), end="", highlight=False)


def _run(source: Path, studies_dir: Path | None, n_concurrent: int | None,
         retry_errors: bool, report: bool) -> int:
    from benchflow.cli.jobs import summary_table
    from benchflow.job.loop import run_job_loop
    from benchflow.study.runner import (
        finish_record,
        prepare_study,
        providers,
        run_study,
        start_study,
        study_locks,
    )

    study = prepare_study(source, studies_dir=studies_dir, n_concurrent=n_concurrent,
                          retry_errors=retry_errors)
    if study.resuming:
        err_console.print(f"resuming {study.study_dir}: {study.finished} trial(s) already "
                          f"finished; running {study.to_run}", highlight=False)
    by_arm = providers(study)
    checked: set[str] = set()
    for arm in study.arms:  # credentials and daemons, before anything is written
        environment = arm.prepared.config.environment.type
        if arm.prepared.needs_sandboxes and environment not in checked:
            anyio.run(by_arm[arm.name].preflight)
            checked.add(environment)
    with study_locks(study):
        start_study(study)
        with StudyProgress(console, study) as progress:
            results = run_job_loop(lambda: run_study(study, progress.listener, _notify))
        run_job_loop(lambda: finish_record(study))
    trials = [r for arm in study.arms for r in _arm_results(arm)]
    cancelled = any(r.cancelled for r in results.values())
    if report and not cancelled:
        _print_report(study)
    else:
        console.print(summary_table(trials, title=f"study {study.spec.name}"))
    err_console.print(f"results in {study.study_dir}; compare them again with `benchflow "
                      f"compare {study.study_dir}`", highlight=False)
    if cancelled:
        return EXIT_CANCELLED
    return EXIT_ROLLOUT_ERROR if any(t.error for t in trials) else EXIT_OK


def _arm_results(arm: "StudyArm") -> "list[RolloutResult]":
    from benchflow.job.store import iter_trial_results

    return list(iter_trial_results(arm.prepared.job_dir))


def study_command(
    source: Annotated[Path, typer.Argument(
        metavar="STUDY", help="a study file (YAML), or a study folder to resume")],
    n_concurrent: Annotated[int | None, typer.Option(
        "-n", "--concurrency", "--n-concurrent", min=1, max=B.MAX_CONCURRENCY,
        help="trials at once, shared by the arms (default: "
        "the study's n_concurrent_trials)")] = None,
    studies_dir: Annotated[Path | None, typer.Option(
        "--studies-dir", help="override studies_dir (where the study folder goes)")] = None,
    retry_errors: Annotated[bool, typer.Option(
        "--retry-errors", help="on resume, also run again the trials that ended in an "
        "error")] = False,
    report: Annotated[bool, typer.Option(
        "--report/--no-report", help="print the comparison of the arms at the end")] = True,
) -> None:
    """Run a study's arms over the same tasks and attempts; run it again to resume.

    Arms are named run configurations (agents, models, roles, scenes, skills, flags); they
    run side by side in one study folder, and the comparison is printed at the end.
    """
    code = EXIT_OK
    with user_errors():
        code = _run(source, studies_dir, n_concurrent, retry_errors, report)
    raise typer.Exit(code)


__all__ = ["StudyProgress", "study_command"]
