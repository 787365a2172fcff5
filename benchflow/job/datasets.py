"""A job's datasets resolved to task folders, before any trial starts.

Local datasets are folders of tasks (named after the folder); registry datasets are
fetched with git (see `registry`). A `tasks` filter keeps the named tasks in its
order; a name the dataset lacks fails the job before it starts, listing every such
name. A task that fails to load stays in the plan with its error, so the job records
it as a task_invalid (or task_not_found) trial that starts no container.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchflow.errors import ConfigError, TaskInvalidError, TaskNotFoundError
from benchflow.job.config import DatasetConfig, JobConfig, LocalDatasetConfig, QaDatasetConfig
from benchflow.task import Task, load_dataset, load_task
from benchflow._suggest import suggest


@dataclass(frozen=True)
class TaskEntry:
    """One task of a resolved dataset: loaded (`task`) or not (`error`)."""

    name: str
    """The task folder name: the `<task>` of `<task>__<n>/`."""
    path: Path
    task: Task | None = None
    error: ConfigError | None = None
    git_commit_id: str | None = None
    """The registry's commit for registry tasks; None for local ones (the rollout
    records the HEAD of the task's repository itself)."""

    def content_hash(self) -> str | None:
        """The task folder's content hash, or None when it did not load."""
        return self.task.content_hash() if self.task is not None else None


@dataclass(frozen=True)
class ResolvedDataset:
    """A dataset's name and its tasks, in run order."""

    name: str
    tasks: list[TaskEntry]


def _missing_error(where: str, label: str, missing: list[str], known: list[str]) -> ConfigError:
    notes = []
    for name in missing:
        guess = suggest(name, known)
        notes.append(f"'{name}'" + (f" (did you mean '{guess}'?)" if guess else ""))
    return ConfigError(f"{where}.tasks: task(s) not found in dataset {label}: {', '.join(notes)}; "
                       "remove them from the filter or fix their spelling")


def _local(spec: LocalDatasetConfig, where: str) -> ResolvedDataset:
    try:
        dataset = load_dataset(spec.path.expanduser(), spec.tasks, skip_invalid=True)
    except ConfigError as exc:  # missing folder, missing filter names
        raise ConfigError(f"{where} ({spec.path}): {exc}") from None
    loaded = {t.path.name: t for t in dataset.tasks}
    order = spec.tasks if spec.tasks is not None else sorted([*loaded, *dataset.invalid])
    entries = []
    for name in order:
        if name in loaded:
            entries.append(TaskEntry(name, loaded[name].path, task=loaded[name]))
        else:
            entries.append(TaskEntry(name, dataset.path / name, error=dataset.invalid[name]))
    return ResolvedDataset(dataset.name, entries)


def _load(path: Path) -> tuple[Task | None, ConfigError | None]:
    try:
        return load_task(path), None
    except (TaskInvalidError, TaskNotFoundError) as exc:
        return None, exc


def _registry(spec: DatasetConfig, where: str, cache_dir: Path | None) -> ResolvedDataset:
    assert not isinstance(spec, LocalDatasetConfig)
    from benchflow.job.pull import registry_dir  # on demand
    from benchflow.job.registry import RegistryTask, fetch_task, load_registry

    dataset = load_registry(spec.registry).find(spec.name, spec.version)
    by_name: dict[str, RegistryTask] = {}
    for task in dataset.tasks:  # a repeated name: the first entry wins
        by_name.setdefault(task.name, task)
    wanted = spec.tasks if spec.tasks is not None else list(by_name)
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise _missing_error(where, f"{dataset.name} {dataset.version}", missing, list(by_name))
    wanted = wanted[:spec.max_tasks]  # fetch only what runs
    entries = []
    for name in wanted:
        try:
            path, commit = fetch_task(by_name[name], cache_dir, base=registry_dir(spec.registry))
        except ConfigError as exc:
            raise ConfigError(f"{where}: task {name!r}: {exc}") from None
        task, error = _load(path)
        entries.append(TaskEntry(path.name, path, task=task, error=error, git_commit_id=commit))
    return ResolvedDataset(dataset.name, entries)


def _qa(spec: QaDatasetConfig, where: str) -> ResolvedDataset:
    # QA machinery on demand: a task run never imports it
    from benchflow.task.qa import QaScoring, load_qa_items, select_items
    from benchflow.task.qa_tasks import qa_dataset_name, qa_task
    from benchflow.verify.answers import check_scoring

    path = spec.qa.expanduser()
    try:
        scoring = check_scoring(QaScoring(metric=spec.metric,
                                          extra_metrics=tuple(spec.extra_metrics),
                                          answer_pattern=spec.answer_pattern,
                                          judge_model=spec.judge_model), f"{where}.metric")
        items = select_items(load_qa_items(path), spec.tasks, where=f"{where}.tasks")
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    tasks = [qa_task(item, path, scoring, spec.image) for item in items]
    return ResolvedDataset(qa_dataset_name(path),
                           [TaskEntry(t.path.name, t.path, task=t) for t in tasks])


def resolve_datasets(config: JobConfig, cache_dir: Path | None = None,
                     source: Path | str = "job") -> list[ResolvedDataset]:
    """Every dataset of the job, filtered and fetched, in job-file order.

    Raises:
        ConfigError: a dataset is missing, a filter names unknown tasks, a registry or
            git fetch fails, or two datasets share a name (they would share a folder).
    """
    resolved: list[ResolvedDataset] = []
    for index, spec in enumerate(config.datasets):
        where = f"{source}: datasets[{index}]"
        if isinstance(spec, LocalDatasetConfig):
            dataset = _local(spec, where)
        elif isinstance(spec, QaDatasetConfig):
            dataset = _qa(spec, where)
        else:
            dataset = _registry(spec, where, cache_dir)
        resolved.append(ResolvedDataset(dataset.name, dataset.tasks[:spec.max_tasks]))
    names = [d.name for d in resolved]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{source}: datasets: several datasets are named {', '.join(dupes)}; "
                          "results are stored per dataset name, so rename one folder")
    for dataset in resolved:
        folders = [t.name for t in dataset.tasks]
        clash = sorted({n for n in folders if folders.count(n) > 1})
        if clash:
            raise ConfigError(f"{source}: dataset {dataset.name}: several tasks live in folders "
                              f"named {', '.join(clash)}; their trial folders would collide")
    return resolved


__all__ = ["ResolvedDataset", "TaskEntry", "resolve_datasets"]
