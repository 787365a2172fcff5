"""Where a rollout writes, as code.

```text
<jobs_dir>/<job_name>/
├── config.json                      the job's config, secrets redacted
├── result.json                      job aggregates
└── <agent>/<dataset>/<task>__<attempt>/      RolloutPaths.root
    ├── config.json                  the resolved rollout config, secrets redacted
    ├── result.json                  RolloutResult (written once, when the rollout ends)
    ├── error.txt                    traceback/details of a fatal error
    ├── rollout.log                  this rollout's log records
    ├── setup/{stdout,stderr}.txt    agent install output
    ├── command/{stdout,stderr}.txt  agent execution output (oracle, command agents)
    ├── agent/<role>.stderr.txt      ACP agents' stderr, drained live (when it wrote any)
    ├── build.log                    image build log (when built here)
    ├── trajectory/acp_trajectory.jsonl
    ├── user_rounds.jsonl            one line per round of a user loop
    ├── model_calls.jsonl            every model request/response (--capture-model-calls)
    ├── verifier/                    hardening.json, round-<n>/ of a user loop's soft verifies
    └── logs/                        the container's /logs, collected whenever a sandbox started
        ├── agent/
        └── verifier/                reward files, and test.sh's {stdout,stderr}.txt
```
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))


def write_bytes(path: Path | str, data: bytes) -> None:
    """`Path(path).write_bytes(data)` in three system calls (open, write, close), not
    seven: Python's buffered file also asks fstat, isatty and the position twice. The
    rollout's files are written in worker threads, and a worker gives the GIL up at each
    call; with the event loop busy it gets it back only after the switch interval (5 ms).
    """
    fd = os.open(path, _NEW_FILE, 0o666)
    try:
        view = memoryview(data)
        while view:  # a regular file takes it all at once but for a full disk (raised)
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def default_job_name() -> str:
    """A job's name when none is given: its start time, `YYYY-MM-DD__HH-MM-SS`."""
    return datetime.now().strftime("%Y-%m-%d__%H-%M-%S")


def task_and_dataset(folder: Path, dataset_name: str | None = None) -> tuple[str, str]:
    """A task's name and its dataset's as the job spec's layout uses them: the task
    folder's name (a task.md `name` may hold "/") and, unless given, its parent's."""
    return folder.name, dataset_name or folder.parent.name


def rollout_name(agent: str, dataset: str, task: str, attempt: int) -> str:
    """`<agent>/<dataset>/<task>__<attempt>`: the rollout's name, and its folder under the job."""
    return f"{agent}/{dataset}/{task}__{attempt}"


@dataclass(frozen=True)
class RolloutPaths:
    """The files of one rollout, rooted at `<jobs_dir>/<job>/<agent>/<dataset>/<task>__<n>/`."""

    root: Path

    @classmethod
    def for_trial(cls, jobs_dir: Path, job_name: str, agent: str, dataset: str, task: str,
                  attempt: int) -> RolloutPaths:
        return cls(jobs_dir / job_name / rollout_name(agent, dataset, task, attempt))

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def error(self) -> Path:
        return self.root / "error.txt"

    @property
    def log(self) -> Path:
        return self.root / "rollout.log"

    @property
    def setup_dir(self) -> Path:
        return self.root / "setup"

    @property
    def command_dir(self) -> Path:
        return self.root / "command"

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def build_log(self) -> Path:
        return self.root / "build.log"

    @property
    def trajectory(self) -> Path:
        return self.root / "trajectory" / "acp_trajectory.jsonl"

    @property
    def user_rounds(self) -> Path:
        return self.root / "user_rounds.jsonl"

    @property
    def model_calls(self) -> Path:
        return self.root / "model_calls.jsonl"

    @property
    def verifier_dir(self) -> Path:
        return self.root / "verifier"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def verifier_logs_dir(self) -> Path:
        """`logs/verifier/`: the reward files and test.sh's stdout.txt / stderr.txt."""
        return self.logs_dir / "verifier"

    def mkdirs(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
