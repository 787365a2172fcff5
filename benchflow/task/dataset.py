"""Datasets: a folder of task folders, optionally filtered by task (folder) name.

```text
<dataset>/            Dataset.name == "<dataset>"
├── hello-world/      task.md or task.toml -> a task
├── fix-the-bug/
└── notes/            neither -> not a task, skipped
```
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchflow.errors import ConfigError, TaskInvalidError, TaskNotFoundError
from benchflow.task import _files
from benchflow._suggest import short_repr, suggest
from benchflow.task.loader import Task, is_task_dir, load_task

TASK_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*")
"""What a name in a dataset's `tasks` filter must look like (matched in full)."""


@dataclass(frozen=True)
class Dataset:
    """The tasks of one dataset folder, in folder-name order (or the filter's order).

    `invalid` maps folder names to the error of each task that failed to load; it is
    filled only by `load_dataset(..., skip_invalid=True)`.
    """

    name: str
    path: Path
    tasks: list[Task]
    invalid: dict[str, ConfigError] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)


def _check_filter(tasks: Sequence[str]) -> list[str]:
    """Validate filter names and drop duplicates, keeping the first occurrence."""
    if isinstance(tasks, str) or not isinstance(tasks, Sequence):
        raise ConfigError(f"tasks filter must be a list of task names, got {type(tasks).__name__}")
    bad = [t for t in tasks if not isinstance(t, str) or not TASK_NAME.fullmatch(t)]
    if bad:
        shown = ", ".join(short_repr(t) for t in bad)
        raise ConfigError(
            f"invalid task name(s) in tasks filter: {shown}: a name starts with a letter or "
            "digit and holds only letters, digits, '_' and '-' (the task's folder name)"
        )
    return list(dict.fromkeys(tasks))


def _task_folders(root: Path) -> dict[str, Path]:
    try:
        children = sorted(root.iterdir())
    except OSError as exc:
        raise TaskNotFoundError(f"{root}: cannot list the dataset folder ({exc})") from exc
    return {
        child.name: child
        for child in children
        if not child.name.startswith(".") and is_task_dir(child)
    }


def load_dataset(
    path: Path | str, tasks: list[str] | None = None, *, skip_invalid: bool = False
) -> Dataset:
    """Load every task folder of a dataset folder, or only the named ones.

    Args:
        path: the dataset folder; each subfolder holding task.md or task.toml is a task.
        tasks: folder names to keep, in this order (duplicates dropped); None keeps all.
        skip_invalid: collect tasks that fail to load in `Dataset.invalid` instead of
            raising (a job records them as task_invalid rollouts).

    Raises:
        TaskNotFoundError: the folder is missing or holds no task folder.
        ConfigError: a filter name is malformed or names no task of the dataset.
        TaskInvalidError: a selected task is malformed (unless `skip_invalid`).
    """
    wanted = _check_filter(tasks) if tasks is not None else None
    given = Path(path)
    if not _files.is_dir(given):
        raise TaskNotFoundError(f"{given}: no such dataset folder: check the path")
    root = given.resolve()
    folders = _task_folders(root)
    if wanted is None:
        if not folders:
            hint = (
                ": it is a task folder itself; run it directly or use its parent folder"
                if is_task_dir(root)
                else ": a task folder holds task.md or task.toml"
            )
            raise TaskNotFoundError(f"{given}: no task folders in this dataset{hint}")
        wanted = list(folders)
    missing = [name for name in wanted if name not in folders]
    if missing:
        notes = []
        for name in missing:
            guess = suggest(name, folders)
            notes.append(f"'{name}'" + (f" (did you mean '{guess}'?)" if guess else ""))
        raise ConfigError(
            f"{given}: task(s) not found in dataset: {', '.join(notes)}; "
            "filter names are the task folder names"
        )
    loaded: list[Task] = []
    invalid: dict[str, ConfigError] = {}
    for name in wanted:
        try:
            loaded.append(load_task(folders[name]))
        except (TaskInvalidError, TaskNotFoundError) as exc:
            if not skip_invalid:
                raise
            invalid[name] = exc
    return Dataset(name=root.name, path=root, tasks=loaded, invalid=invalid)


def resolve_run_target(path: Path | str, tasks: list[str] | None = None) -> tuple[str, list[Task]]:
    """What `benchflow run PATH` runs: (dataset name, tasks) for a task or a dataset folder.

    A single task folder belongs to the dataset named after its parent folder. A
    `tasks` filter applies to datasets; for a single task it must name that task.

    Raises:
        TaskNotFoundError, TaskInvalidError, ConfigError: as `load_task` / `load_dataset`.
    """
    if is_task_dir(path):
        task = load_task(path)
        if tasks is not None:
            missing = [n for n in _check_filter(tasks) if n != task.path.name]
            if missing:
                raise ConfigError(
                    f"{path}: is a single task folder ('{task.path.name}'); the tasks filter "
                    f"also names {', '.join(repr(n) for n in missing)}: pass the dataset folder"
                )
        return task.path.parent.name, [task]
    dataset = load_dataset(path, tasks)
    return dataset.name, dataset.tasks


__all__ = ["TASK_NAME", "Dataset", "load_dataset", "resolve_run_target"]
