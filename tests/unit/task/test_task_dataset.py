"""Datasets: folder scanning, the tasks filter rules, resolve_run_target."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import ConfigError, TaskInvalidError, TaskNotFoundError
from benchflow.task import Dataset, load_dataset, resolve_run_target


@pytest.fixture
def dataset(tmp_path: Path, writers) -> Path:
    write_native, write_legacy = writers
    root = tmp_path / "my-bench"
    write_native(root, "charlie", frontmatter=None)
    write_legacy(root, "alpha")
    write_native(root, "bravo", frontmatter="task:\n  name: Bravo Task\n")
    (root / "notes").mkdir()  # not a task
    (root / "README.md").write_text("hi")
    write_native(root, ".hidden")
    return root


def test_all_tasks_sorted_by_folder_name(dataset: Path) -> None:
    ds = load_dataset(dataset)
    assert isinstance(ds, Dataset)
    assert (ds.name, ds.path) == ("my-bench", dataset.resolve())
    assert [t.path.name for t in ds.tasks] == ["alpha", "bravo", "charlie"]
    assert [t.name for t in ds] == ["alpha", "Bravo Task", "charlie"]
    assert [t.layout for t in ds.tasks] == ["legacy", "native", "native"]
    assert len(ds) == 3 and ds.invalid == {}


def test_filter_keeps_its_order_and_drops_duplicates(dataset: Path) -> None:
    ds = load_dataset(str(dataset), tasks=["charlie", "alpha", "charlie"])
    assert [t.path.name for t in ds.tasks] == ["charlie", "alpha"]


def test_filter_lists_every_missing_task(dataset: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_dataset(dataset, tasks=["alpha", "charly", "zulu", "notes"])
    message = str(info.value)
    assert (
        "task(s) not found in dataset: 'charly' (did you mean 'charlie'?), 'zulu', 'notes'"
        in message
    )
    assert "alpha" not in message.split("dataset:", 1)[1].split(";")[0]
    assert not isinstance(info.value, (TaskInvalidError, TaskNotFoundError))


@pytest.mark.parametrize("bad", ["-lead", "_x", "has space", "a/b", "", "ünï", "x\n", 3])
def test_filter_names_must_match_the_pattern(dataset: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match="invalid task name"):
        load_dataset(dataset, tasks=["alpha", bad])  # type: ignore[list-item]


def test_filter_must_be_a_list(dataset: Path) -> None:
    with pytest.raises(ConfigError, match="must be a list of task names"):
        load_dataset(dataset, tasks="alpha")  # type: ignore[arg-type]


def test_empty_filter_selects_nothing(dataset: Path) -> None:
    assert load_dataset(dataset, tasks=[]).tasks == []


def test_invalid_task_raises_unless_skipped(dataset: Path, writers) -> None:
    write_native, _ = writers
    write_native(dataset, "broken", test_sh=False)
    with pytest.raises(TaskInvalidError, match=r"broken/verifier/test\.sh: missing"):
        load_dataset(dataset)
    assert [t.path.name for t in load_dataset(dataset, tasks=["alpha"]).tasks] == ["alpha"]
    ds = load_dataset(dataset, skip_invalid=True)
    assert [t.path.name for t in ds.tasks] == ["alpha", "bravo", "charlie"]
    assert list(ds.invalid) == ["broken"]
    assert isinstance(ds.invalid["broken"], TaskInvalidError)


def test_missing_and_empty_datasets(tmp_path: Path, writers) -> None:
    with pytest.raises(TaskNotFoundError, match="no such dataset folder"):
        load_dataset(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskNotFoundError, match="no task folders in this dataset"):
        load_dataset(tmp_path / "empty")
    task = writers[0](tmp_path, "solo")
    with pytest.raises(TaskNotFoundError, match="it is a task folder itself"):
        load_dataset(task)


def test_resolve_run_target_for_a_task(dataset: Path) -> None:
    name, tasks = resolve_run_target(dataset / "bravo")
    assert name == "my-bench"
    assert [t.name for t in tasks] == ["Bravo Task"]
    assert resolve_run_target(dataset / "bravo", tasks=["bravo"])[1][0].path.name == "bravo"
    with pytest.raises(ConfigError, match=r"single task folder \('bravo'\).*'alpha'"):
        resolve_run_target(dataset / "bravo", tasks=["alpha"])


def test_resolve_run_target_for_a_dataset(dataset: Path) -> None:
    name, tasks = resolve_run_target(str(dataset), tasks=["bravo"])
    assert name == "my-bench"
    assert [t.path.name for t in tasks] == ["bravo"]
    assert [t.path.name for t in resolve_run_target(dataset)[1]] == ["alpha", "bravo", "charlie"]


def test_resolve_run_target_missing(tmp_path: Path) -> None:
    with pytest.raises(TaskNotFoundError):
        resolve_run_target(tmp_path / "missing")
