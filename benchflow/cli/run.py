"""`benchflow run PATH`: rollouts of one agent on a task or a dataset folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import anyio
import typer

from benchflow.agents.base import driver_needs_sandbox
from benchflow.agents.model_agent import ModelAgent, ModelAgentConfig, check_tools
from benchflow.agents.registry import check_scenes
from benchflow.cli._common import (
    EXIT_OK,
    EXIT_ROLLOUT_ERROR,
    console,
    err_console,
    user_errors,
)
from benchflow.cli.progress import JobProgress, results_table
from benchflow.config import ModelEndpoint, RolloutConfig, Scene, load_scenes
from benchflow.errors import ConfigError
from benchflow.job import Job, JobResult, Trial
from benchflow.job.qa_trials import qa_trials
from benchflow.rollout.model_endpoint import model_endpoint, scenes_for_check
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.rollout import default_job_name
from benchflow.sandbox.docker import preflight
from benchflow.sandbox.network import NETWORK_POLICIES
from benchflow.sandbox.spec import NetworkPolicy, PreservePolicy
from benchflow.task import Task, resolve_run_target
from benchflow.task.qa import QaScoring, is_qa_file, load_qa_items, select_items


def run_command(
    path: Annotated[Path, typer.Argument(
        help="a task folder, a dataset folder of tasks, or a QA dataset (.jsonl / .json)")],
    agent: Annotated[str, typer.Option("-a", "--agent", help="agent name")] = "oracle",
    model: Annotated[str | None, typer.Option("-m", "--model", help="model id")] = None,
    attempts: Annotated[int, typer.Option("-k", "--attempts", min=1)] = 1,
    concurrency: Annotated[int, typer.Option("-n", "--concurrency", min=1)] = 4,
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir")] = Path("jobs"),
    job_name: Annotated[str | None, typer.Option("--job-name")] = None,
    env: Annotated[str, typer.Option("--env", help="docker | daytona | modal")] = "docker",
    force_build: Annotated[bool, typer.Option("--force-build")] = False,
    preserve_env: Annotated[str, typer.Option("--preserve-env",
                                              help="never | always | on_failure")] = "never",
    ca_cert: Annotated[list[Path] | None, typer.Option(
        "--ca-cert", help="extra CA certificate (PEM) for sandboxes; repeatable")] = None,
    task_filter: Annotated[list[str] | None, typer.Option(
        "-t", "--task", help="run only this task of a dataset; repeatable")] = None,
    scenes_file: Annotated[Path | None, typer.Option(
        "--scenes", help="YAML file of scenes (roles and turns) to run instead of one turn")] = None,
    network: Annotated[str | None, typer.Option(
        "--network", help="public | none | model-only (default: the task's; model-only with "
        "--model-server)")] = None,
    model_server: Annotated[Path | None, typer.Option(
        "--model-server", help="YAML script of a scripted model server, started for each "
        "rollout; agents are pointed at it")] = None,
    model_base_url: Annotated[str | None, typer.Option(
        "--model-base-url", help="a real model endpoint's URL (vLLM, a gateway) for the "
        "agents")] = None,
    model_api_key_env: Annotated[str | None, typer.Option(
        "--model-api-key-env", help="host variable holding --model-base-url's key")] = None,
    metric: Annotated[str, typer.Option(
        "--metric", help="QA datasets: exact_match | f1_score | contains_answer | "
        "numeric_match | similarity | llm_judgement")] = "exact_match",
    answer_pattern: Annotated[str | None, typer.Option(
        "--answer-pattern", help="QA datasets: regex cutting the answer out of the reply "
        "(its first group)")] = None,
    judge_model: Annotated[str | None, typer.Option(
        "--judge-model", help="the LLM judge's model (llm_judgement, llm-judge verifiers)")
    ] = None,
    judge_base_url: Annotated[str | None, typer.Option(
        "--judge-base-url", help="the LLM judge's endpoint (default: --model-base-url)")
    ] = None,
    judge_api_key_env: Annotated[str | None, typer.Option(
        "--judge-api-key-env", help="host variable holding --judge-base-url's key")] = None,
    tools: Annotated[list[str] | None, typer.Option(
        "--tool", help="model agent: a tool (shell, read_file, write_file); repeatable. "
        "Default: all on tasks, none on QA items")] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="model agent: model calls per prompt")] = None,
) -> None:
    """Run AGENT on the task at PATH (or on every task of the dataset at PATH) and score it."""
    with user_errors():
        endpoint = model_endpoint(model_server, model_base_url, model_api_key_env)
        policy = _network(network)
        if is_qa_file(path):
            trials = _qa_trials(path, agent, model, attempts, env, task_filter, endpoint,
                                QaScoring(metric=metric, answer_pattern=answer_pattern,
                                          judge_model=judge_model,
                                          judge_endpoint=_judge_endpoint(
                                              judge_base_url, judge_api_key_env, judge_model,
                                              None)),
                                _model_agent(tools, max_turns, qa=True), jobs_dir)
            job_result, results = anyio.run(_run_job, env if _uses_docker(trials) else "none",
                                            job_name or default_job_name(), jobs_dir, trials,
                                            concurrency)
            console.print(results_table(results))
            _summary(job_result, jobs_dir)
            raise typer.Exit(EXIT_ROLLOUT_ERROR if any(r.error for r in results) else EXIT_OK)
        dataset_name, tasks = resolve_run_target(path, task_filter)
        given_scenes = load_scenes(scenes_file) if scenes_file else None
        model_agent = _model_agent(tools, max_turns, qa=False)
        judge = _judge_endpoint(judge_base_url, judge_api_key_env, judge_model, endpoint)
        drivers = {"model": ModelAgent(model_agent)} if model_agent is not None else {}
        trials = [
            Trial(RolloutConfig(task_path=task.path,
                                scenes=given_scenes or _task_scenes(task, agent, model),
                                environment=env,
                                dataset_name=dataset_name, attempt=attempt,
                                force_build=force_build,
                                preserve_env=_preserve(preserve_env),
                                extra_ca_certs=tuple(ca_cert) if ca_cert else None,
                                network=policy, model_endpoint=endpoint,
                                judge_endpoint=judge), task,
                  drivers=drivers)
            for task in tasks for attempt in range(1, attempts + 1)
        ]
        for trial in trials:  # bad agents and missing keys fail before any container starts
            check_scenes(scenes_for_check(trial.config))
        job_result, results = anyio.run(_run_job, env, job_name or default_job_name(), jobs_dir,
                                        trials, concurrency)
    console.print(results_table(results))
    _summary(job_result, jobs_dir)
    raise typer.Exit(EXIT_ROLLOUT_ERROR if any(r.error for r in results) else EXIT_OK)


def _model_agent(tools: list[str] | None, max_turns: int | None, *, qa: bool
                 ) -> ModelAgentConfig | None:
    """The model agent's settings from --tool / --max-turns (None: its defaults)."""
    if tools is None and max_turns is None:
        return ModelAgentConfig(tools=[]) if qa else None
    fields: dict[str, object] = {}
    if tools is not None:
        fields["tools"] = check_tools([t for t in tools if t != "none"], "--tool")
    elif qa:
        fields["tools"] = []
    if max_turns is not None:
        fields["max_turns"] = max_turns
    return ModelAgentConfig.model_validate(fields)


def _qa_trials(path: Path, agent: str, model: str | None, attempts: int, env: str,
               task_filter: list[str] | None, endpoint: ModelEndpoint | None,
               scoring: QaScoring, model_agent: ModelAgentConfig | None,
               jobs_dir: Path) -> list[Trial]:
    """Trials of a QA dataset file; bad items fail here, before anything runs."""
    items = select_items(load_qa_items(path), task_filter, where="--task")
    trials = qa_trials(path, items, agent=agent, model=model, scoring=scoring,
                       endpoint=endpoint, attempts=attempts, environment=env,
                       model_agent=model_agent, metric_where="--metric")
    check_scenes(scenes_for_check(trials[0].config), given=trials[0].drivers)
    return trials


def _judge_endpoint(base_url: str | None, api_key_env: str | None, model: str | None,
                    fallback: ModelEndpoint | None) -> ModelEndpoint | None:
    """--judge-base-url / --judge-api-key-env / --judge-model as an endpoint (None: the
    run's model endpoint is used as it is)."""
    if base_url is None:
        if api_key_env:
            raise ConfigError("--judge-api-key-env needs --judge-base-url")
        if model and fallback is not None and fallback.base_url is not None:
            return fallback.model_copy(update={"model": model})
        return None
    try:
        return ModelEndpoint(base_url=base_url, api_key_env=api_key_env, model=model)
    except ValueError as exc:
        raise ConfigError(f"--judge-base-url {base_url!r}: {exc}") from exc


def _uses_docker(trials: list[Trial]) -> bool:
    """Whether any QA trial starts a sandbox (only then is Docker checked)."""
    return any(driver_needs_sandbox(d) for t in trials for d in t.drivers.values()) or any(
        role.agent not in t.drivers for t in trials for s in t.config.scenes for role in s.roles)


def _task_scenes(task: Task, agent: str, model: str | None) -> list[Scene]:
    """The task's own scenes (roles filled from -a/-m), else one turn of AGENT."""
    if task.scenes is not None:
        return task.scenes.to_scenes(agent, model)
    return [Scene.single(agent=agent, model=model)]


def _network(value: str | None) -> NetworkPolicy | None:
    if value is not None and value not in NETWORK_POLICIES:
        raise ConfigError(f"--network must be {', '.join(NETWORK_POLICIES)} (got {value!r})")
    return value  # type: ignore[return-value]


def _preserve(value: str) -> PreservePolicy:
    if value not in ("never", "always", "on_failure"):
        raise ConfigError(f"--preserve-env must be never, always or on_failure (got {value!r})")
    return value  # type: ignore[return-value]


async def _run_job(env: str, job_name: str, jobs_dir: Path, trials: list[Trial],
                   concurrency: int) -> tuple[JobResult, list[RolloutResult]]:
    if env == "docker":
        await preflight()
    with JobProgress(console, len(trials), job_name) as progress:
        job = Job(job_name, jobs_dir, trials, concurrency=concurrency, listener=progress)
        result = await job.run()
    return result, job.results


def _summary(result: JobResult, jobs_dir: Path) -> None:
    rate = "-" if result.pass_rate is None else f"{result.pass_rate:.0%}"
    mean = "-" if result.mean_reward is None else f"{result.mean_reward:.3f}"
    err_console.print(
        f"{result.completed_trials}/{result.total_trials} scored, {result.failed_trials} failed, "
        f"pass rate {rate}, mean reward {mean} — results in {jobs_dir / result.job_name}",
        highlight=False)
