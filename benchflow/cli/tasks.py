"""`benchflow tasks ...`: inspect and check task folders."""

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from benchflow.cli._common import console, user_errors
from benchflow.task import Task, is_task_dir, load_dataset, load_task
from benchflow.task.qa import is_qa_file, load_qa_items

app = typer.Typer(help="Inspect and check tasks.", no_args_is_help=True)


@app.command("check")
def check(path: Annotated[Path, typer.Argument(
        help="a task folder, a dataset folder or a QA dataset (.jsonl / .json)")]) -> None:
    """Load the task(s) at PATH and report what is wrong, without starting any container."""
    with user_errors():
        if is_qa_file(path):
            items = load_qa_items(path)
            scored = sum(1 for item in items if item.has_answer)
            console.print(f"{path}: {len(items)} QA items ok ({scored} with a ground truth)",
                          highlight=False)
            return
        if is_task_dir(path):
            tasks, invalid = [load_task(path)], {}
        else:
            dataset = load_dataset(path, skip_invalid=True)
            tasks, invalid = dataset.tasks, dataset.invalid
    table = Table(title=f"tasks in {path}")
    for column in ("task", "layout", "image", "verifier", "oracle", "status"):
        table.add_column(column)
    for task in tasks:
        image = task.config.sandbox.docker_image or "environment/Dockerfile"
        table.add_row(task.name, task.layout, image, task.verifier_mount,
                      _has_oracle(task), "[green]ok[/]")
    for name, error in invalid.items():
        table.add_row(name, "-", "-", "-", "-", f"[red]{error}[/]")
    console.print(table)
    if invalid:
        raise typer.Exit(2)


def _has_oracle(task: Task) -> str:
    """Whether the oracle can run: the task's solution, or one for every step."""
    if task.steps:
        solved = all(s.solution_dir or task.solution_dir for s in task.steps)
        return f"{'yes' if solved else 'no'} ({len(task.steps)} steps)"
    return "yes" if task.solution_dir else "no"
