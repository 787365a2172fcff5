"""benchflow as a `verifiers` environment (verifiers >= 0.4, its `verifiers.v1` API), for
`vf-eval` and prime-rl. The `verifiers` extra; the environment package that verifiers loads
by id is `environments/benchflow_env` (taskset id `benchflow-env`).

```bash
pip install 'benchflow[verifiers]' ./environments/benchflow_env
vf-eval benchflow-env --env.taskset.qa data.jsonl --env.taskset.metric f1_score \\
    -m my-policy --client.base-url http://127.0.0.1:8000/v1 --no-push
```

- `BenchflowTaskset`: a benchflow dataset (a QA file, or task folders with their scenes)
  as verifiers tasks; each task's data names the dataset and the task's place in it.
- `BenchflowHarness`: one verifiers rollout is one benchflow rollout of the task (a job of
  one, under `jobs_dir`), run in this process with verifiers' interception endpoint as the
  policy: every model call of every role goes through it, so verifiers records the turns
  (and, with a train client, the tokens) itself. The outcome lands in the trace's
  `info["benchflow"]` (job folder, rollout, reward, rewards, error).
- `BenchflowTask`: the reward is benchflow's verifier reward (the trainable role's credit
  with `--env.taskset.task.role`); the verifier's other rewards are metrics. A benchflow
  rollout that ended in an error fails the trace (no reward: trainers drop it).
- `BenchflowEnv`: the single seat, on the local `subprocess` runtime by default (benchflow
  starts its own sandboxes; verifiers' runtime only hosts the in-process harness).
- `load_environment(...)`: the environment from Python, as verifiers' loaders build it.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, SecretStr

try:
    import verifiers.v1 as vf
    from verifiers.v1.errors import HarnessError, TaskError
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("benchflow.train.verifiers needs the verifiers extra: pip install "
                      "'benchflow[verifiers]' ./environments/benchflow_env") from exc

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.job.retry import NO_RETRY
from benchflow.rollout.result import RolloutResult
from benchflow.task.qa import load_qa_items
from benchflow.train.batch import RolloutBatch
from benchflow.train.tasks import TrainTask, qa_train_tasks, train_tasks
from benchflow.trajectory.exporters.tokens import credit_for

log = logging.getLogger(__name__)

ENV_ID = "benchflow-env"
"""The verifiers id of the environment package (`environments/benchflow_env`)."""
PROMPT_MODEL = "policy"
"""The model name the taskset builds tasks with to read their prompts (rollouts use the
run's model)."""


class BenchflowSource(BaseModel):
    """Which benchflow dataset a task comes from, carried in each task's data so that the
    harness (in this or an env-server process) can rebuild the rollout."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    qa: str | None = None
    tasks: tuple[str, ...] = ()
    metric: str = "exact_match"
    answer_pattern: str | None = None
    agent: str = "model"
    environment: str = "docker"


@functools.lru_cache(maxsize=64)
def source_tasks(source: BenchflowSource, model: str) -> tuple[TrainTask, ...]:
    """The dataset's train tasks with `model` as every role's model. QA items without a
    ground truth are left out: they give no reward.

    Raises:
        ConfigError, TaskNotFoundError, TaskInvalidError: a bad dataset.
    """
    if (source.qa is None) == (not source.tasks):
        raise ConfigError("benchflow-env: give exactly one of --env.taskset.qa (a QA dataset "
                          "file) and --env.taskset.tasks (task folders)")
    if source.qa is None:
        return tuple(train_tasks([Path(p) for p in source.tasks], agent=source.agent,
                                 model=model, environment=source.environment))
    tasks = qa_train_tasks(source.qa, model=model, agent=source.agent, metric=source.metric,
                           answer_pattern=source.answer_pattern,
                           environment=source.environment)
    items = load_qa_items(Path(source.qa))
    return tuple(task for task, item in zip(tasks, items, strict=True) if item.has_answer)


# -- the task -------------------------------------------------------------------------------

class BenchflowData(vf.TaskData):
    """A benchflow task as verifiers data: its dataset and its position there (`index`);
    `name` is benchflow's task name, `prompt` its instruction."""

    source: BenchflowSource
    index: int = Field(ge=0)


class BenchflowTaskConfig(vf.TaskConfig):
    role: str | None = None
    """The trainable role: its credit (the verifier's `credit:<role>` reward) is the reward
    when the verifier writes one; else the rollout's reward."""


class BenchflowOutcome(BaseModel):
    """What the harness leaves in `trace.info["benchflow"]`."""

    job_dir: str
    rollout: str | None = None
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    error: str | None = None


def _outcome(trace: vf.Trace) -> BenchflowOutcome:
    raw = trace.info.get("benchflow")
    if raw is None:
        raise TaskError("the trace has no benchflow outcome: the benchflow harness did not run "
                        "(pin --env.agent.harness.id benchflow-env)")
    return BenchflowOutcome.model_validate(raw)


class BenchflowTask(vf.Task[BenchflowData, vf.State, BenchflowTaskConfig]):
    """Scored by benchflow's verifier, read from the rollout the harness ran."""

    NEEDS_CONTAINER = False

    @property
    def key(self) -> str:
        return f"{self.data.name}#{self.data.index}"

    @vf.reward(weight=1.0)
    async def benchflow(self, trace: vf.Trace) -> float:
        """The trainable role's credit, else the rollout's reward."""
        outcome = _outcome(trace)
        credit, _ = credit_for(outcome.rewards, outcome.reward, self.config.role)
        if credit is None:
            raise TaskError(f"benchflow rollout {outcome.rollout} has no reward "
                            f"(see {outcome.job_dir})")
        return credit

    @vf.metric
    async def benchflow_rewards(self, trace: vf.Trace) -> dict[str, float]:
        """Every reward the verifier wrote (metrics: recorded, not summed)."""
        return dict(_outcome(trace).rewards)


class BenchflowTasksetConfig(vf.TasksetConfig):
    """The benchflow dataset, under `--env.taskset.*`."""

    qa: Path | None = None
    """A QA dataset (.jsonl/.json/.csv): each item with a ground truth is a task."""
    tasks: list[Path] = Field(default_factory=list)
    """Task folders: each runs its own scenes (roles filled by `agent`), else one turn."""
    metric: str = "exact_match"
    """The QA answer metric: exact_match, f1_score, contains_answer, numeric_match,
    similarity."""
    answer_pattern: str | None = None
    """A regex whose first group is the answer in the model's reply (QA)."""
    agent: str = "model"
    """The benchflow agent playing each role ("model": the model agent; or an ACP agent
    such as opencode)."""
    environment: str = "docker"
    """benchflow's sandbox backend for tasks that need one."""
    task: BenchflowTaskConfig = BenchflowTaskConfig()

    def source(self) -> BenchflowSource:
        return BenchflowSource(
            qa=str(self.qa.expanduser().resolve()) if self.qa else None,
            tasks=tuple(str(p.expanduser().resolve()) for p in self.tasks),
            metric=self.metric, answer_pattern=self.answer_pattern, agent=self.agent,
            environment=self.environment)


class BenchflowTaskset(vf.Taskset[BenchflowTask, BenchflowTasksetConfig]):
    """A benchflow dataset's tasks (see `BenchflowTasksetConfig`)."""

    def load(self) -> list[BenchflowTask]:
        source = self.config.source()
        tasks = source_tasks(source, PROMPT_MODEL)
        if source.qa is not None and (left := len(load_qa_items(Path(source.qa))) - len(tasks)):
            log.warning("benchflow-env: %d items of %s have no answer and are left out", left,
                        source.qa)
        return [BenchflowTask(BenchflowData(id=task.name, name=task.name, prompt=task.prompt,
                                            source=source, index=index), self.config.task)
                for index, task in enumerate(tasks)]


# -- the harness ----------------------------------------------------------------------------

class BenchflowHarnessConfig(vf.HarnessConfig):
    jobs_dir: Path = Path("jobs")
    """Where each rollout's benchflow job folder goes (`<job_prefix>-<trace id>`)."""
    job_prefix: str = "vf"


class BenchflowHarness(vf.Harness[BenchflowHarnessConfig]):
    """Runs the task as a benchflow rollout whose policy endpoint is verifiers'
    interception (`endpoint`, with the rollout's `secret` as its key), in this process."""

    EXECUTES_CODE = False  # benchflow runs agents in its own sandboxes, not in this runtime
    NEEDS_CONTAINER = False
    APPENDS_SYSTEM_PROMPT = True

    async def launch(self, ctx: vf.ModelContext, trace: vf.Trace, runtime: vf.Runtime,
                     endpoint: str, secret: str, mcp_urls: dict[str, str],
                     data: vf.TaskData) -> vf.ProgramResult:
        bf = BenchflowData.model_validate(data.model_dump())
        # off the event loop: the first read of a large dataset must not stall the
        # interception serving the rollouts already running
        tasks = await anyio.to_thread.run_sync(source_tasks, bf.source, ctx.model)
        if bf.index >= len(tasks) or tasks[bf.index].name != bf.name:
            raise HarnessError(f"benchflow task {bf.name!r} is no longer at position "
                               f"{bf.index} of its dataset; reload the taskset")
        policy = ModelEndpoint(base_url=endpoint, model=ctx.model, api_key=SecretStr(secret))
        job_name = f"{self.config.job_prefix}-{trace.id[:12]}"
        # no benchflow retry: verifiers' own (`--env.agent.retries`) redo a rollout with a
        # fresh trace, where a retry here would add the failed attempt's calls to this one
        async with RolloutBatch([tasks[bf.index].trial(policy)], concurrency=1,
                                job_name=job_name, jobs_dir=self.config.jobs_dir,
                                retry=NO_RETRY) as batch:
            items = await batch.collect()
        result = items[0].result if items else None
        outcome = _record(trace, batch.job_dir, result)
        if outcome.error is not None:
            raise HarnessError(f"benchflow rollout {outcome.rollout or bf.name}: "
                               f"{outcome.error} (see {outcome.job_dir})")
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def _record(trace: vf.Trace, job_dir: Path, result: RolloutResult | None) -> BenchflowOutcome:
    job_dir = job_dir.resolve()
    if result is None:
        outcome = BenchflowOutcome(job_dir=str(job_dir), error="no result")
    else:
        error = (None if result.error is None
                 else f"{result.error.type}: {result.error.message}")
        outcome = BenchflowOutcome(job_dir=str(job_dir), rollout=result.rollout_name,
                                   reward=result.reward, rewards=result.rewards or {},
                                   error=error)
    trace.info["benchflow"] = outcome.model_dump(mode="json")
    return outcome


# -- the environment ------------------------------------------------------------------------

# The seat's default, its harness pinned so that `--env.agent.harness.jobs-dir` applies
# without naming the harness; model_copy, because validating a pinned harness imports the
# environment package, which is this module being defined.
_SEAT = vf.AgentConfig(runtime=vf.SubprocessConfig()).model_copy(
    update={"harness": BenchflowHarnessConfig(id=ENV_ID)})


class BenchflowEnvConfig(vf.SingleAgentEnvConfig):
    agent: vf.AgentConfig = _SEAT
    """The one seat: the benchflow harness on the local subprocess runtime."""


class BenchflowEnv(vf.SingleAgentEnv, vf.Env[BenchflowEnvConfig]):
    """The single-agent env with the benchflow seat's defaults."""


def load_environment(*, qa: str | Path | None = None, tasks: list[str | Path] | None = None,
                     metric: str = "exact_match", agent: str = "model",
                     role: str | None = None, environment: str = "docker",
                     answer_pattern: str | None = None, jobs_dir: str | Path = "jobs",
                     **env: Any) -> vf.Env:
    """The benchflow environment as verifiers builds it (`verifiers.v1.load_environment`):
    `env.serving()` then `env.run_slot(...)`, or hand its config to prime-rl.

    Raises:
        ConfigError: the environment package is not installed.
    """
    import importlib.util

    if importlib.util.find_spec(ENV_ID.replace("-", "_")) is None:
        raise ConfigError(f"the verifiers environment package {ENV_ID!r} is not installed: "
                          "pip install ./environments/benchflow_env")
    taskset = BenchflowTasksetConfig(
        id=ENV_ID, qa=Path(qa) if qa else None, tasks=[Path(p) for p in tasks or []],
        metric=metric, agent=agent, environment=environment, answer_pattern=answer_pattern,
        task=BenchflowTaskConfig(role=role))
    seat = vf.AgentConfig(runtime=vf.SubprocessConfig(),
                          harness=BenchflowHarnessConfig(id=ENV_ID, jobs_dir=Path(jobs_dir)))
    return vf.load_environment(BenchflowEnvConfig(taskset=taskset, agent=seat, **env))


__all__ = ["ENV_ID", "BenchflowData", "BenchflowEnv", "BenchflowEnvConfig", "BenchflowHarness",
           "BenchflowHarnessConfig", "BenchflowOutcome", "BenchflowSource", "BenchflowTask",
           "BenchflowTaskConfig", "BenchflowTaskset", "BenchflowTasksetConfig",
           "load_environment", "source_tasks"]
