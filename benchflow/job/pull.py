"""Registry datasets by name: list them, pull them into the cache, run them.

`pull("my-bench@1.0")` fetches every task of the dataset (git, at the pinned
commits) into the shared cache and writes a lock file naming the folders and
commits:

```text
<cache_dir>/datasets/<registry hash>/<name>@<version>.json
```

A second pull finds the lock file and every folder present and fetches nothing
(no git process runs). `benchflow run NAME[@VERSION]` pulls (or reuses) and runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from benchflow.errors import ConfigError
from benchflow.job.config import RegistryRef
from benchflow.job.registry import Registry, fetch_task, load_registry
from benchflow.settings import get_settings

_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)(?:@(?P<version>[A-Za-z0-9_.+-]+))?$")


def registry_ref(value: str | None) -> RegistryRef:
    """A registry from `--registry PATH_OR_URL`, else `BENCHFLOW_REGISTRY`.

    Raises:
        ConfigError: neither is given.
    """
    value = value or get_settings().registry
    if not value:
        raise ConfigError("no registry: pass --registry PATH_OR_URL or set BENCHFLOW_REGISTRY "
                          "to a registry.json")
    if value.startswith(("http://", "https://", "file://")):
        return RegistryRef(url=value)
    return RegistryRef(path=Path(value).expanduser())


def registry_dir(ref: RegistryRef) -> Path | None:
    """The folder of a registry file on disk (its local tasks are relative to it)."""
    if ref.path is not None:
        return ref.path.expanduser().resolve().parent
    if ref.url is not None and ref.url.startswith("file://"):
        return Path(ref.url.removeprefix("file://")).resolve().parent
    return None


def parse_spec(spec: str) -> tuple[str, str | None]:
    """`name` or `name@version` -> (name, version or None).

    Raises:
        ConfigError: not of that form.
    """
    match = _SPEC.match(spec)
    if match is None:
        raise ConfigError(f"{spec!r}: expected a dataset as NAME or NAME@VERSION")
    return match["name"], match["version"]


def looks_like_spec(value: str) -> bool:
    """Whether a `benchflow run` target names a registry dataset rather than a folder."""
    return not Path(value).expanduser().exists() and _SPEC.match(value) is not None


@dataclass(frozen=True)
class PulledTask:
    name: str
    path: Path
    git_commit_id: str


@dataclass(frozen=True)
class PulledDataset:
    """A dataset in the cache: its tasks' folders; `fetched` is False when nothing was fetched."""

    name: str
    version: str
    tasks: list[PulledTask]
    fetched: bool
    lock_file: Path


def _lock_path(registry: Registry, name: str, version: str, cache_dir: Path) -> Path:
    key = hashlib.sha256(registry.source.encode()).hexdigest()[:16]
    return cache_dir / "datasets" / key / f"{name}@{version}.json"


def _read_lock(path: Path) -> list[PulledTask] | None:
    try:
        data = json.loads(path.read_text())
        tasks = [PulledTask(t["name"], Path(t["path"]), t["git_commit_id"]) for t in data["tasks"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return tasks if all(t.path.is_dir() for t in tasks) else None


def pull(spec: str, ref: RegistryRef, cache_dir: Path | None = None) -> PulledDataset:
    """Fetch dataset `spec` (NAME[@VERSION]) of the registry into the cache (idempotent).

    Raises:
        ConfigError: no such dataset or version, or git failed.
    """
    name, version = parse_spec(spec)
    cache_dir = cache_dir or get_settings().cache_dir
    registry = load_registry(ref)
    dataset = registry.find(name, version)
    lock = _lock_path(registry, dataset.name, dataset.version, cache_dir)
    cached = _read_lock(lock)
    if cached is not None:
        return PulledDataset(dataset.name, dataset.version, cached, fetched=False, lock_file=lock)
    tasks, seen = [], set()
    for task in dataset.tasks:
        if task.name in seen:  # a repeated name: the first entry wins, as in job files
            continue
        seen.add(task.name)
        try:
            path, commit = fetch_task(task, cache_dir, base=registry_dir(ref))
        except ConfigError as exc:
            raise ConfigError(f"{registry.source}: {dataset.name}@{dataset.version}: task "
                              f"{task.name!r}: {exc}") from None
        tasks.append(PulledTask(task.name, path, commit))
    lock.parent.mkdir(parents=True, exist_ok=True)
    tmp = lock.with_suffix(".tmp")
    tmp.write_text(json.dumps({"name": dataset.name, "version": dataset.version,
                               "registry": registry.source,
                               "tasks": [{"name": t.name, "path": str(t.path),
                                          "git_commit_id": t.git_commit_id} for t in tasks]},
                              indent=2))
    tmp.replace(lock)
    return PulledDataset(dataset.name, dataset.version, tasks, fetched=True, lock_file=lock)


__all__ = ["PulledDataset", "PulledTask", "looks_like_spec", "parse_spec", "pull",
           "registry_dir", "registry_ref"]
