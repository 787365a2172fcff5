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
    ├── agent/<role>.stderr.txt      ACP agents' stderr, drained live
    ├── build.log                    image build log (when built here)
    ├── trajectory/acp_trajectory.jsonl
    ├── user_rounds.jsonl            one line per round of a user loop
    ├── model_calls.jsonl            every model request/response (--capture-model-calls)
    ├── verifier/{stdout,stderr}.txt verifier output
    └── logs/                        the container's /logs (agent/, verifier/)
```
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RolloutPaths:
    """The files of one rollout, rooted at `<jobs_dir>/<job>/<agent>/<dataset>/<task>__<n>/`."""

    root: Path

    @classmethod
    def for_trial(cls, jobs_dir: Path, job_name: str, agent: str, dataset: str, task: str,
                  attempt: int) -> RolloutPaths:
        return cls(jobs_dir / job_name / agent / dataset / f"{task}__{attempt}")

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

    def mkdirs(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
