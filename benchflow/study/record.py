"""A study folder on disk, and the reproducibility record it keeps.

```text
<studies_dir>/<study>/
├── study.yaml            the study file as given (byte for byte)
├── study.json            StudyRecord: settings, tasks, and per arm what ran (below)
└── <study>.<arm>/        one job folder per arm (config.json, manifest.json, result.json,
                          <agent>/<dataset>/<task>__<n>/ trials), as `benchflow jobs` writes
```

Per arm the record holds the resolved job config (secrets redacted), the agents with
the versions their manifests install, per role the agent and model planned and the
agents and models the results' `roles` say were used, each task's image id (as the sandbox backend reports
it) and git commit, and the benchflow and Python versions (`provenance` collects them).
"""

from __future__ import annotations

import platform
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from benchflow._models import StrictModel
from benchflow.errors import ConfigError
from benchflow.rollout.result import write_json_atomic

STUDY_FILE = "study.yaml"
RECORD = "study.json"


class AgentVersion(StrictModel):
    """An agent as installed: its manifest's version and package (built-ins: benchflow's)."""

    name: str
    version: str | None = None
    package: str | None = None


class RolePlan(StrictModel):
    """Who plays a role: as planned (`model` None: the agent's default), and what the
    results' `roles.<name>` say was used."""

    agent: str
    model: str | None = None
    agents_used: list[str] = Field(default_factory=list, description="roles.<name>.agent "
                                   "of the results")
    models_used: list[str] = Field(default_factory=list, description="roles.<name>.model "
                                   "of the results: the models actually used")


class TaskRecord(StrictModel):
    """A task as the arm ran it."""

    content_sha256: str | None = None
    git_commit: str | None = None
    image: str | None = Field(default=None, description="the sandbox image's id, when the "
                              "backend reports one (docker: the image id)")


class ArmRecord(StrictModel):
    """What one arm is: enough to run it again and to cite it."""

    name: str
    description: str | None = None
    job: str = Field(description="the arm's job folder, inside the study folder")
    config: dict = Field(default_factory=dict, description="the job config, secrets redacted")
    agents: list[AgentVersion] = Field(default_factory=list)
    roles: dict[str, RolePlan] = Field(default_factory=dict)
    models_used: list[str] = Field(default_factory=list)
    tasks: dict[str, TaskRecord] = Field(default_factory=dict)


class StudyRecord(StrictModel):
    """`study.json`: the study's settings and every arm's record."""

    schema_version: Literal[1] = 1
    name: str
    description: str | None = None
    baseline: str
    k: int
    tasks: list[str] = Field(default_factory=list, description="<dataset>/<task> keys")
    benchflow_version: str
    python_version: str = Field(default_factory=platform.python_version)
    platform: str = Field(default_factory=platform.platform)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    arms: list[ArmRecord] = Field(default_factory=list)

    def arm(self, name: str) -> ArmRecord | None:
        return next((a for a in self.arms if a.name == name), None)


def write_record(study_dir: Path, record: StudyRecord) -> None:
    write_json_atomic(study_dir / RECORD, record.model_dump_json(indent=2))


def read_record(study_dir: Path) -> StudyRecord:
    """The study's `study.json`.

    Raises:
        ConfigError: missing or unreadable.
    """
    path = study_dir / RECORD
    try:
        return StudyRecord.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        raise ConfigError(f"{study_dir}: no readable {RECORD} ({type(exc).__name__}): not a "
                          "study folder of `benchflow study`") from None


def is_study_dir(path: Path) -> bool:
    return (path / RECORD).is_file()


__all__ = ["RECORD", "STUDY_FILE", "AgentVersion", "ArmRecord", "RolePlan", "StudyRecord",
           "TaskRecord", "is_study_dir", "read_record", "write_record"]
