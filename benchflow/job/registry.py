"""Registries: `registry.json` lists datasets whose tasks live in git repositories.

```json
[{"name": "my-bench", "version": "1.0", "description": "...",
  "tasks": [{"name": "hello-world", "git_url": "https://example.com/tasks.git",
             "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
             "path": "tasks/hello-world"}]}]
```

A task without `git_url` is a folder beside the registry file (`path` relative to it): the
registry benchflow ships (`tasks/registry.json`) lists its example tasks that way.
Tasks are fetched with git at their pinned commit (or the remote's HEAD when none
is pinned) into a cache shared by every job and reused:

```text
<cache_dir>/git/<sha256(git_url)[:16]>/<commit>/    a checkout at <commit>, .git kept
```
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from benchflow.errors import ConfigError
from benchflow.job.config import RegistryRef
from benchflow.settings import get_settings, host_environ

log = logging.getLogger(__name__)

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_GIT_TIMEOUT_SEC = 600.0
_FETCH_TIMEOUT_SEC = 30.0
_PROTOCOLS = "file:git:http:https:ssh"
"""Transports git may use for registry tasks (never `ext::`, which runs commands)."""


def _as_str(value: object) -> object:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class _Lenient(BaseModel):
    """Registry files are shared with other tools: unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class RegistryTask(_Lenient):
    """One task of a registry dataset: a folder at `path` of `git_url` at `git_commit_id`
    (or, without `git_url`, the folder `path` relative to a local registry file)."""

    name: str
    git_url: str | None = None
    git_commit_id: str | None = None
    path: str = ""


class RegistryDataset(_Lenient):
    """One (name, version) of a registry; several versions of one name may coexist."""

    name: str
    version: Annotated[str, BeforeValidator(_as_str)] = "head"
    description: str | None = None
    tasks: list[RegistryTask] = Field(default_factory=list)


class Registry(_Lenient):
    """A parsed registry.json."""

    source: str
    datasets: list[RegistryDataset]

    def find(self, name: str, version: str | None) -> RegistryDataset:
        """The dataset `name` at `version` (version may be omitted when only one exists).

        Raises:
            ConfigError: no such name or version; the message lists what exists.
        """
        same_name = [d for d in self.datasets if d.name == name]
        if not same_name:
            known = ", ".join(sorted({d.name for d in self.datasets})) or "none"
            raise ConfigError(f"{self.source}: no dataset named {name!r} (datasets: {known})")
        versions = [d.version for d in same_name]
        if version is None:
            if len(same_name) > 1:
                raise ConfigError(f"{self.source}: dataset {name!r} has versions "
                                  f"{', '.join(versions)}: set `version` in the job file")
            return same_name[0]
        for dataset in same_name:
            if dataset.version == version:
                return dataset
        raise ConfigError(f"{self.source}: dataset {name!r} has no version {version!r} "
                          f"(versions: {', '.join(versions)})")


def _read_source(ref: RegistryRef) -> tuple[str, str]:
    if ref.path is not None:
        path = ref.path.expanduser()
        try:
            return str(path), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"registry {path}: cannot be read ({exc}): check the path") from None
    assert ref.url is not None
    if not ref.url.startswith(("http://", "https://", "file://")):
        raise ConfigError(f"registry url {ref.url!r}: use an http(s):// or file:// URL")
    try:
        with urllib.request.urlopen(ref.url, timeout=_FETCH_TIMEOUT_SEC) as response:
            return ref.url, response.read().decode("utf-8")
    except (urllib.error.URLError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"registry {ref.url}: cannot be fetched ({exc})") from None


def load_registry(ref: RegistryRef) -> Registry:
    """Read and parse a registry.json from a path or URL.

    Raises:
        ConfigError: unreadable, not JSON, or not a list of datasets.
    """
    source, text = _read_source(ref)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"registry {source}: not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise ConfigError(f"registry {source}: expected a JSON list of datasets")
    try:
        return Registry(source=source, datasets=data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        raise ConfigError(f"registry {source}: [{where}]: {first['msg']}") from None


# -- git ----------------------------------------------------------------------------------


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**host_environ(), "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": _PROTOCOLS}
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_SEC, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"git {args[0]} failed: {exc}") from None
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()[-800:]}")
    return proc.stdout.strip()


def resolve_head(git_url: str) -> str:
    """The commit the remote's HEAD points at (for tasks without a pinned commit)."""
    out = _git("ls-remote", git_url, "HEAD")
    if not out:
        raise ConfigError(f"{git_url}: the repository has no HEAD: pin git_commit_id")
    return out.split()[0]


def _checkout(git_url: str, commit: str, target: Path) -> None:
    _git("init", "-q", str(target))
    _git("remote", "add", "origin", git_url, cwd=target)
    try:  # a shallow fetch of just the commit, when the server allows it
        _git("fetch", "-q", "--depth", "1", "origin", commit, cwd=target)
        _git("checkout", "-q", "--detach", "FETCH_HEAD", cwd=target)
    except ConfigError:
        _git("fetch", "-q", "origin", cwd=target)
        _git("checkout", "-q", "--detach", commit, cwd=target)


def fetch_repo(git_url: str, commit: str | None, cache_dir: Path | None = None) -> tuple[Path, str]:
    """A checkout of `git_url` at `commit` in the cache; returns (folder, full commit id).

    Reused when already cached; populated atomically (a temporary folder renamed into
    place), so concurrent jobs and interrupted fetches never leave a half checkout.

    Raises:
        ConfigError: git failed (unknown repository or commit, no git, no network).
    """
    if git_url.startswith("-") or not git_url.strip():
        raise ConfigError(f"git_url {git_url!r} is not a repository URL")
    if commit is not None and not _SHA.fullmatch(commit):
        raise ConfigError(f"{git_url}: git_commit_id {commit!r} is not a commit id (hex)")
    commit = commit or resolve_head(git_url)
    root = (cache_dir or get_settings().cache_dir) / "git"
    folder = root / hashlib.sha256(git_url.encode()).hexdigest()[:16] / commit
    if (folder / ".git").is_dir():
        return folder, _git("rev-parse", "HEAD", cwd=folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{commit}-{secrets.token_hex(4)}"
    try:
        log.info("fetching %s at %s", git_url, commit)
        _checkout(git_url, commit, tmp)
        full = _git("rev-parse", "HEAD", cwd=tmp)
        if not full.startswith(commit):
            raise ConfigError(f"{git_url}: checked out {full}, not {commit}")
        try:
            os.rename(tmp, folder)
        except OSError:  # another job cached it first
            if not (folder / ".git").is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder, full


LOCAL_COMMIT = "local"
"""The `git_commit_id` recorded for a task that is a local folder."""


def fetch_task(task: RegistryTask, cache_dir: Path | None = None,
               base: Path | None = None) -> tuple[Path, str]:
    """The local folder of a registry task (fetched if needed) and its commit id.

    The folder may not exist (a wrong `path`); loading it then gives task_not_found.
    `base` is the folder of a local registry file, for tasks without `git_url`.

    Raises:
        ConfigError: git failed, or a task without `git_url` in a registry fetched by URL.
    """
    if task.git_url is None:
        if base is None:
            raise ConfigError(f"registry task {task.name!r}: no git_url (a local task folder "
                              "needs a registry file on disk)")
        return (base / task.path).resolve(), LOCAL_COMMIT
    repo, commit = fetch_repo(task.git_url, task.git_commit_id, cache_dir)
    relative = Path(task.path.strip("/") or ".")
    if relative.is_absolute() or ".." in relative.parts:
        raise ConfigError(f"registry task {task.name!r}: path {task.path!r} must stay inside "
                          "its repository")
    folder = repo / relative
    resolved, root = os.path.realpath(folder), os.path.realpath(repo)
    if resolved != root and not resolved.startswith(root + os.sep):
        raise ConfigError(f"registry task {task.name!r}: path {task.path!r} leads through a "
                          f"symbolic link out of its repository ({task.git_url}): refused")
    return folder, commit


__all__ = [
    "LOCAL_COMMIT",
    "Registry",
    "RegistryDataset",
    "RegistryTask",
    "fetch_repo",
    "fetch_task",
    "load_registry",
    "resolve_head",
]
