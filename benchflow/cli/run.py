"""`benchflow run PATH`: rollouts of one agent on a task or a dataset folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from pydantic import ValidationError

from benchflow.agents.base import AgentDriver
from benchflow.agents.registry import check_scenes
from benchflow.cli._common import (
    EXIT_OK,
    EXIT_ROLLOUT_ERROR,
    console,
    err_console,
    user_errors,
)
from benchflow.cli.progress import JobProgress, results_table
from benchflow.config import RolloutConfig, Scene, load_scenes
from benchflow.errors import ConfigError
from benchflow.job import Job, JobResult, Trial
from benchflow.job.config import HttpAgentConfig, config_error
from benchflow.job.envvars import expand_env
from benchflow.job.plan import agent_drivers
from benchflow.job.pull import looks_like_spec, pull, registry_ref
from benchflow.mcp import load_mcp_config
from benchflow.rollout.model_endpoint import model_endpoint, scenes_for_check
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.rollout import default_job_name
from benchflow.sandbox.registry import check_backend, get_provider
from benchflow.sandbox.network import NETWORK_POLICIES
from benchflow.sandbox.spec import NetworkPolicy, PreservePolicy
from benchflow.rollout.events import combine
from benchflow.settings import host_env
from benchflow.skills import skills_from_paths
from benchflow.task import Task, load_task, resolve_run_target
from benchflow.telemetry import recorder

if TYPE_CHECKING:
    from benchflow.telemetry.otel import OtelRecorder


def run_command(
    path: Annotated[Path, typer.Argument(
        help="a task folder, a dataset folder of tasks, or a registry dataset NAME[@VERSION]")],
    agent: Annotated[str, typer.Option("-a", "--agent", help="agent name")] = "oracle",
    model: Annotated[str | None, typer.Option("-m", "--model", help="model id")] = None,
    attempts: Annotated[int, typer.Option("-k", "--attempts", min=1)] = 1,
    concurrency: Annotated[int, typer.Option("-n", "--concurrency", min=1)] = 4,
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir")] = Path("jobs"),
    job_name: Annotated[str | None, typer.Option("--job-name")] = None,
    env: Annotated[str, typer.Option("--env", help="sandbox backend: docker | daytona | modal | a plugin's")] = "docker",
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
    capture_model_calls: Annotated[bool, typer.Option(
        "--capture-model-calls", help="record every model request and response (with token "
        "ids and logprobs when returned) in each rollout's model_calls.jsonl; needs "
        "--model-server or --model-base-url")] = False,
    skill: Annotated[list[Path] | None, typer.Option(
        "--skill", help="a skill folder (with SKILL.md), or a folder of them, for every "
        "agent; repeatable")] = None,
    mcp_config: Annotated[Path | None, typer.Option(
        "--mcp-config", help="a Claude-style .mcp.json: its MCP servers go to every ACP "
        "agent, besides the task's")] = None,
    agent_endpoint: Annotated[str | None, typer.Option(
        "--agent-endpoint", help="with -a http: the URL receiving one POST per attempt")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="with -a http: 'Name: value' sent to the endpoint (values may use "
        "${VAR}; never written anywhere); repeatable")] = None,
    timeout_seconds: Annotated[float, typer.Option(
        "--timeout-seconds", min=0.001, help="with -a http: per-request timeout")] = 60.0,
    max_tasks: Annotated[int | None, typer.Option(
        "--max-tasks", min=1, help="run at most N tasks of the dataset")] = None,
    registry: Annotated[str | None, typer.Option(
        "--registry", help="for PATH = NAME[@VERSION]: the registry.json path or URL "
        "(default: BENCHFLOW_REGISTRY)")] = None,
    otel: Annotated[bool, typer.Option(
        "--otel", help="export OpenTelemetry spans over OTLP/HTTP (the otel extra; endpoint "
        "from OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318)")] = False,
) -> None:
    """Run AGENT on the task at PATH (or on every task of the dataset at PATH) and score it."""
    with user_errors():
        check_backend(env)
        dataset_name, tasks = _run_target(path, task_filter, registry)
        tasks = tasks[:max_tasks] if max_tasks else tasks
        drivers = http_drivers(agent, agent_endpoint, header, timeout_seconds)
        given_scenes = load_scenes(scenes_file) if scenes_file else None
        endpoint = model_endpoint(model_server, model_base_url, model_api_key_env)
        policy = _network(network)
        if capture_model_calls and endpoint is None:
            raise ConfigError("--capture-model-calls records calls through benchflow's model "
                              "server or relay: add --model-server SCRIPT or --model-base-url URL")
        skills = skills_from_paths(skill or [])  # a bad path fails before anything starts
        mcp_servers = load_mcp_config(mcp_config) if mcp_config else []
        trials = [
            Trial(RolloutConfig(task_path=task.path,
                                scenes=given_scenes or _task_scenes(task, agent, model),
                                environment=env,
                                dataset_name=dataset_name, attempt=attempt,
                                force_build=force_build,
                                preserve_env=_preserve(preserve_env),
                                extra_ca_certs=tuple(ca_cert) if ca_cert else None,
                                network=policy, model_endpoint=endpoint,
                                capture_model_calls=capture_model_calls,
                                skills=[s.source for s in skills],
                                mcp_servers=mcp_servers), task,
                  drivers=drivers)
            for task in tasks for attempt in range(1, attempts + 1)
        ]
        for trial in trials:  # bad agents and missing keys fail before any container starts
            check_scenes(scenes_for_check(trial.config), given=trial.drivers)
        name = job_name or default_job_name()
        spans = recorder(otel, name)
        job_result, results = anyio.run(_run_job, env, name, jobs_dir, trials, concurrency,
                                        spans)
    console.print(results_table(results))
    _summary(job_result, jobs_dir)
    raise typer.Exit(EXIT_ROLLOUT_ERROR if any(r.error for r in results) else EXIT_OK)


def _run_target(path: Path, task_filter: list[str] | None,
                registry: str | None) -> tuple[str, list[Task]]:
    """A folder as `resolve_run_target` reads it, or a registry dataset pulled (or reused)."""
    if not looks_like_spec(str(path)):
        return resolve_run_target(path, task_filter)
    pulled = pull(str(path), registry_ref(registry))
    wanted = task_filter or [t.name for t in pulled.tasks]
    by_name = {t.name: t for t in pulled.tasks}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise ConfigError(f"{pulled.name}@{pulled.version}: no task(s) "
                          f"{', '.join(map(repr, missing))} (tasks: {', '.join(by_name)})")
    return pulled.name, [load_task(by_name[n].path) for n in wanted]


def http_drivers(agent: str, endpoint: str | None, headers: list[str] | None,
                 timeout_sec: float) -> dict[str, AgentDriver]:
    """`-a http`'s driver from the command line (an `HttpAgentConfig`, as in a job file).

    Raises:
        ConfigError: `--agent-endpoint` missing for `-a http` (or given without it), a
            header not in `Name: value` form, or a `${VAR}` that is not set.
    """
    if agent != "http":
        if endpoint is not None or headers:
            raise ConfigError("--agent-endpoint and --header go with -a http")
        return {}
    if endpoint is None:
        raise ConfigError("-a http needs --agent-endpoint URL (the endpoint receiving the tasks)")
    parsed: dict[str, str] = {}
    for item in headers or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {name.strip() or '?'}: expected 'Name: value'")
        parsed[name.strip()] = value.strip()
    try:
        config = HttpAgentConfig(name="http", endpoint=endpoint, headers=parsed,
                                 timeout_sec=timeout_sec)
    except ValidationError as exc:
        raise config_error("command line (-a http)", exc) from None
    expanded = {}
    for name, value in config.headers.items():
        expanded[name], missing = expand_env(value, host_env)
        if missing:
            raise ConfigError(f"--header {name}: ${{{missing[0]}}} is not set; export it first")
    return agent_drivers(config, expanded)


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
                   concurrency: int, spans: OtelRecorder | None = None
                   ) -> tuple[JobResult, list[RolloutResult]]:
    await get_provider(env).preflight()
    with JobProgress(console, len(trials), job_name) as progress:
        job = Job(job_name, jobs_dir, trials, concurrency=concurrency,
                  listener=combine(progress, spans))
        if spans is not None:
            spans.run_id = job.run_id
        try:
            result = await job.run()
        finally:
            if spans is not None:
                spans.finish()
    return result, job.results


def _summary(result: JobResult, jobs_dir: Path) -> None:
    rate = "-" if result.pass_rate is None else f"{result.pass_rate:.0%}"
    mean = "-" if result.mean_reward is None else f"{result.mean_reward:.3f}"
    err_console.print(
        f"{result.completed_trials}/{result.total_trials} scored, {result.failed_trials} failed, "
        f"pass rate {rate}, mean reward {mean} — results in {jobs_dir / result.job_name}",
        highlight=False)
