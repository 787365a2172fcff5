"""`rollout benchmarks pull`: a registry dataset and its verifiers, copied into a workspace.

```text
<workspace>/
├── workspace.json                         {"datasets": {"<name>@<version>": {...}}}
└── datasets/<name>@<version>/<task>/      each task's folder, verifier included
```

`workspace.json` lists, per dataset, the registry it came from and each task's
verifier (`verifier/` of a native task, `tests/` of a legacy one, with its files).
Pulling again finds the dataset there and copies nothing. The registry is
`--registry`, else `rollout login --registry`, else `BENCHFLOW_REGISTRY`, else the
one shipped with benchflow (`tasks/registry.json`, the example datasets).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchflow.errors import ConfigError
from benchflow.job.config import RegistryRef
from benchflow.settings import get_settings

WORKSPACE_FILE = "workspace.json"
DEFAULT_WORKSPACE = Path("workspace")
_VERIFIER_DIRS = ("verifier", "tests")


def shipped_registry() -> Path | None:
    """The registry shipped with benchflow: the wheel's `_tasks`, else the source tree's."""
    package = Path(__file__).resolve().parents[1]
    for folder in (package / "_tasks", package.parent / "tasks"):
        if (folder / "registry.json").is_file():
            return folder / "registry.json"
    return None


def default_registry_ref(value: str | None) -> RegistryRef:
    """`value`, else `BENCHFLOW_REGISTRY`, else the shipped registry.

    Raises:
        ConfigError: none of them (an install without the example tasks).
    """
    from benchflow.job.pull import registry_ref

    if value or get_settings().registry:
        return registry_ref(value)
    shipped = shipped_registry()
    if shipped is None:
        raise ConfigError("no registry: pass --registry PATH_OR_URL, `rollout login "
                          "--registry`, or set BENCHFLOW_REGISTRY")
    return RegistryRef(path=shipped)


@dataclass(frozen=True)
class PulledBenchmark:
    """A dataset in a workspace; `copied` is False when it was there already."""

    key: str
    folder: Path
    tasks: list[str]
    copied: bool


def _verifier(task_dir: Path) -> dict[str, Any] | None:
    for name in _VERIFIER_DIRS:
        folder = task_dir / name
        if folder.is_dir():
            files = sorted(str(p.relative_to(task_dir)) for p in folder.rglob("*") if p.is_file())
            return {"path": name, "files": files}
    return None


def _read_manifest(workspace: Path) -> dict[str, Any]:
    path = workspace / WORKSPACE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {"datasets": {}}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a workspace file ({exc}): remove it or choose "
                          "another --workspace") from None
    if not isinstance(data, dict) or not isinstance(data.get("datasets"), dict):
        raise ConfigError(f"{path}: not a workspace file (no `datasets` object)")
    return data


def pull_benchmark(spec: str, ref: RegistryRef, workspace: Path) -> PulledBenchmark:
    """Add dataset `spec` (NAME[@VERSION]) and its verifiers to `workspace` (idempotent).

    Raises:
        ConfigError: no such dataset, a task that cannot be fetched, a bad workspace file.
    """
    from benchflow.job.pull import pull

    manifest = _read_manifest(workspace)
    pulled = pull(spec, ref)
    key = f"{pulled.name}@{pulled.version}"
    folder = workspace / "datasets" / key
    entry = manifest["datasets"].get(key)
    if entry is not None and all((folder / t).is_dir() for t in entry.get("tasks", {})):
        return PulledBenchmark(key, folder, list(entry["tasks"]), copied=False)
    tasks: dict[str, Any] = {}
    staging = folder.with_name(f".{key}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for task in pulled.tasks:
            if not task.path.is_dir():
                raise ConfigError(f"{key}: task {task.name!r}: {task.path} is not a folder")
            shutil.copytree(task.path, staging / task.name, symlinks=True,
                            ignore=shutil.ignore_patterns(".git"))
            tasks[task.name] = {"git_commit_id": task.git_commit_id,
                                "verifier": _verifier(staging / task.name)}
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    manifest["datasets"][key] = {"registry": str(ref.path or ref.url), "tasks": tasks}
    (workspace / WORKSPACE_FILE).write_text(json.dumps(manifest, indent=2))
    return PulledBenchmark(key, folder, list(tasks), copied=True)


__all__ = ["DEFAULT_WORKSPACE", "WORKSPACE_FILE", "PulledBenchmark", "default_registry_ref",
           "pull_benchmark", "shipped_registry"]
