"""The job folder on disk: config, manifest, lock and the trials' result files.

```text
<jobs_dir>/<job>/
├── config.json        the job file as JSON (defaults filled, secrets redacted)
├── manifest.json      what resume checks: agents, models, task content hashes
├── result.json        JobResult
├── .lock              pid of the process running the job (stale ones are taken over)
└── <agent>/<dataset>/<task>__<n>/result.json
```
"""

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from benchflow._models import StrictModel
from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig
from benchflow.job.datasets import ResolvedDataset
from benchflow.job.envvars import is_env_template
from benchflow.rollout.result import RolloutResult, write_json_atomic
from benchflow.rollout.secrets import redact
from benchflow.sandbox.owner import pid_alive

CONFIG = "config.json"
MANIFEST = "manifest.json"
RESULT = "result.json"
LOCK = ".lock"


def redacted_job_config(config: JobConfig) -> dict[str, Any]:
    """The job config as a JSON-safe dict with secret-looking env values (and every http
    agent header value) replaced by `***`.

    Values made only of `${VAR}` references name secrets without holding them, so they
    are kept (resume expands them again from the host environment).
    """
    data: dict[str, Any] = redact(config.model_dump(mode="json"), keep=is_env_template)
    return data


class AgentFingerprint(StrictModel):
    """What must not change between a job and its resume, per agent."""

    kind: str
    model: str | None = None
    sha256: str


class Manifest(StrictModel):
    """Saved when a job starts; `benchflow jobs resume` refuses when it no longer matches."""

    schema_version: Literal[1] = 1
    job_name: str
    n_attempts: int
    agents: dict[str, AgentFingerprint] = Field(default_factory=dict)
    tasks: dict[str, str | None] = Field(default_factory=dict,
                                         description="<dataset>/<task> -> content sha256")

    @classmethod
    def build(cls, config: JobConfig, datasets: list[ResolvedDataset]) -> "Manifest":
        agents = {}
        for agent, dumped in zip(config.agents, redacted_job_config(config)["agents"], strict=True):
            blob = json.dumps(dumped, sort_keys=True).encode()
            agents[agent.name] = AgentFingerprint(
                kind=agent.kind,
                model=agent.model if agent.kind in ("registered", "roles") else None, sha256=hashlib.sha256(blob).hexdigest())
        tasks = {f"{d.name}/{t.name}": t.content_hash() for d in datasets for t in d.tasks}
        return cls(job_name=config.name, n_attempts=config.n_attempts, agents=agents, tasks=tasks)

    def differences(self, other: "Manifest") -> list[str]:
        """Human-readable differences from `other` (the current state), empty if none."""
        out = []
        if self.n_attempts != other.n_attempts:
            out.append(f"n_attempts {self.n_attempts} -> {other.n_attempts}")
        for name in sorted(self.agents.keys() | other.agents.keys()):
            old, new = self.agents.get(name), other.agents.get(name)
            if old is None or new is None:
                out.append(f"agent {name!r} {'added' if old is None else 'removed'}")
            elif old.model != new.model:
                out.append(f"agent {name!r} model {old.model!r} -> {new.model!r}")
            elif old != new:
                out.append(f"agent {name!r} definition changed")
        changed = sorted(k for k in self.tasks.keys() & other.tasks.keys()
                         if self.tasks[k] != other.tasks[k])
        if changed:
            out.append(f"task contents changed: {', '.join(changed)}")
        for label, keys in (("tasks added", other.tasks.keys() - self.tasks.keys()),
                            ("tasks removed", self.tasks.keys() - other.tasks.keys())):
            if keys:
                out.append(f"{label}: {', '.join(sorted(keys))}")
        return out


def write_job_files(job_dir: Path, config: JobConfig, manifest: Manifest) -> None:
    """config.json and manifest.json, written when a job starts."""
    job_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(job_dir / CONFIG, json.dumps(redacted_job_config(config), indent=2))
    write_json_atomic(job_dir / MANIFEST, manifest.model_dump_json(indent=2))


def read_manifest(job_dir: Path) -> Manifest:
    """The manifest saved when the job started.

    Raises:
        ConfigError: missing or unreadable (not a job folder of `benchflow jobs run`).
    """
    path = job_dir / MANIFEST
    try:
        return Manifest.model_validate_json(path.read_text())
    except (OSError, ValidationError) as exc:
        raise ConfigError(f"{job_dir}: no readable {MANIFEST} ({type(exc).__name__}): only jobs "
                          "started by `benchflow jobs run` can be resumed") from None


def read_trial_result(path: Path) -> RolloutResult | None:
    """A trial's result.json, or None when missing or half-written (a crash mid-write)."""
    try:
        return RolloutResult.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def iter_trial_results(job_dir: Path) -> Iterator[RolloutResult]:
    """Every readable `<agent>/<dataset>/<task>__<n>/result.json` of a job folder."""
    for path in sorted(job_dir.glob("*/*/*/" + RESULT)):
        if path.parent.name.rpartition("__")[2].isdigit():
            result = read_trial_result(path)
            if result is not None:
                yield result


@contextlib.contextmanager
def job_lock(job_dir: Path) -> Iterator[None]:
    """Hold `<job>/.lock` while running, so one job folder never runs twice at once.

    Raises:
        ConfigError: another live process holds the lock.
    """
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / LOCK
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(path.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and pid_alive(pid):
                raise ConfigError(f"{job_dir}: the job is already running (process {pid}); "
                                  "wait for it or stop it first") from None
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        break
    else:
        raise ConfigError(f"{job_dir}: cannot take {LOCK}: another process keeps creating it")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


__all__ = ["AgentFingerprint", "Manifest", "iter_trial_results", "job_lock", "read_manifest",
           "read_trial_result", "redacted_job_config", "write_job_files"]
