"""`benchflow run PATH`: rollouts of one agent on a task, a dataset folder or a QA dataset file.

One orchestration path: the options become a `JobConfig` (one agent, one local dataset)
that runs through the same job machinery as `benchflow jobs run` (retries, Ctrl-C and
skipped trials, `jobs resume`, the job's result.json and metrics).
"""

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from benchflow import bounds as B
from benchflow.cli._common import user_errors
from benchflow.errors import ConfigError

if TYPE_CHECKING:
    from benchflow.roles import RoleAgent

# The job machinery is imported where the command runs (`main()` imports it with the app,
# GC-paused, unless help is asked): `benchflow run --help` and a usage error stay light.


class Preserve(enum.StrEnum):
    never = "never"
    always = "always"
    on_failure = "on_failure"


class Network(enum.StrEnum):
    public = "public"
    none = "none"
    model_only = "model-only"


def run_command(
    path: Annotated[Path, typer.Argument(help="a task folder, a dataset folder of tasks, a QA "
                                         "dataset (.jsonl/.json) or NAME[@VERSION]")],
    agent: Annotated[list[str] | None, typer.Option(
        "-a", "--agent", help="agent name (default oracle); it plays every role the task "
        "declares, unless --role says otherwise")] = None,
    model: Annotated[str | None, typer.Option("-m", "--model", help="model id")] = None,
    role: Annotated[list[str] | None, typer.Option(
        "--role", help="NAME=AGENT[:MODEL]: the agent (and model) playing one of the task's "
        "roles, keeping its scenes and prompts; repeatable, e.g. --role "
        "coder=claude:claude-sonnet-4-6 --role reviewer=codex:gpt-5.4")] = None,
    attempts: Annotated[int, typer.Option("-k", "--attempts", min=1, max=B.MAX_ATTEMPTS)] = 1,
    concurrency: Annotated[int, typer.Option("-n", "--concurrency", "--n-concurrent", min=1,
                                             max=B.MAX_CONCURRENCY)] = B.DEFAULT_CONCURRENCY,
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir")] = Path("jobs"),
    job_name: Annotated[str | None, typer.Option("--job-name")] = None,
    env: Annotated[str, typer.Option("--env", help="docker | daytona | modal | a plugin's")] = "docker",
    force_build: Annotated[bool, typer.Option("--force-build")] = False,
    preserve_env: Annotated[Preserve, typer.Option("--preserve-env")] = Preserve.never,
    ca_cert: Annotated[list[str] | None, typer.Option(
        "--ca-cert", help="extra CA certificate (PEM) for sandboxes; repeatable; 'none' for "
        "none (default: BENCHFLOW_EXTRA_CA_CERTS, else the host's "
        "/usr/local/share/ca-certificates/*.crt)")] = None,
    task_filter: Annotated[list[str] | None, typer.Option(
        "-t", "--task", help="run only this task of a dataset; repeatable")] = None,
    scenes_file: Annotated[Path | None, typer.Option(
        "--scenes", help="YAML file of scenes (roles and turns) to run instead of the task's "
        "own scenes or one turn")] = None,
    network: Annotated[Network | None, typer.Option(
        "--network", help="default: the task's; model-only with --model-server")] = None,
    model_server: Annotated[Path | None, typer.Option(
        "--model-server", help="YAML script of a scripted model server, started for each "
        "rollout; agents are pointed at it")] = None,
    model_base_url: Annotated[str | None, typer.Option(
        "--model-base-url", help="a real model endpoint's URL (vLLM, a gateway) for the "
        "agents")] = None,
    model_api_key_env: Annotated[str | None, typer.Option(
        "--model-api-key-env", help="host variable holding --model-base-url's key")] = None,
    timeout_multiplier: Annotated[float, typer.Option(
        "--timeout-multiplier", min=0.001, max=B.MAX_TIMEOUT_MULTIPLIER, help="multiply every task timeout")] = 1.0,
    max_retries: Annotated[int, typer.Option(
        "--max-retries", min=0, max=B.MAX_RETRIES, help="retries of transient infrastructure failures")] = 3,
    capture_model_calls: Annotated[bool, typer.Option(
        "--capture-model-calls", help="record every model request and response (with token "
        "ids and logprobs when returned) in each rollout's model_calls.jsonl; needs "
        "--model-server or --model-base-url")] = False,
    capture_tokens: Annotated[str | None, typer.Option(
        "--capture-tokens", help="vllm | sglang: ask --model-base-url for token ids and "
        "logprobs (in that server's options) on every call and record them; implies "
        "--capture-model-calls")] = None,
    skill: Annotated[list[Path] | None, typer.Option(
        "--skill", help="a skill folder (with SKILL.md), or a folder of them, for every "
        "agent; repeatable")] = None,
    mcp_config: Annotated[Path | None, typer.Option(
        "--mcp-config", help="a Claude-style .mcp.json: its MCP servers go to every ACP "
        "agent, besides the task's")] = None,
    harden: Annotated[bool | None, typer.Option(
        "--harden/--no-harden", help="force verifier hardening on for any agent (the oracle "
        "too: check a task survives it) or off (recorded as a warning in result.json); "
        "default: on unless the agent is oracle or nop")] = None,
    snapshot_turns: Annotated[bool, typer.Option(
        "--snapshot-turns", help="snapshot the sandbox at every turn boundary, for "
        "`benchflow fork` and `benchflow jobs regrade` (removed by `benchflow jobs rm`)")
    ] = False,
    agent_endpoint: Annotated[str | None, typer.Option(
        "--agent-endpoint", help="with -a http: the URL receiving one POST per attempt")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="with -a http: 'Name: value' sent to the endpoint (values may use "
        "${VAR}; never written anywhere); repeatable")] = None,
    timeout_seconds: Annotated[float, typer.Option(
        "--timeout-seconds", min=0.001, max=B.MAX_SECONDS, help="with -a http: per-request timeout")] = 60.0,
    max_tasks: Annotated[int | None, typer.Option(
        "--max-tasks", min=1, max=B.MAX_TASKS, help="run at most N tasks of the dataset")] = None,
    registry: Annotated[str | None, typer.Option(
        "--registry", help="for PATH = NAME[@VERSION]: the registry.json path or URL "
        "(default: BENCHFLOW_REGISTRY)")] = None,
    trace_listen: Annotated[str | None, typer.Option(
        "--trace-listen", help="with -a http: where to receive the endpoint's OTLP/HTTP "
        "traces (filed into each attempt's trace_events.jsonl): HOST:PORT, or none "
        "(default 127.0.0.1:4318)")] = None,
    otel: Annotated[bool, typer.Option(
        "--otel", help="export OpenTelemetry spans over OTLP/HTTP (the otel extra; endpoint "
        "from OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318)")] = False,
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
        "--tool", help="a tool, repeatable. The model agent: shell, read_file, write_file "
        "(default: all on tasks, none on QA items) or the tool server's; an ACP agent: the "
        "tool server's (web:search, doc:read, ...), served to it over MCP")] = None,
    tool_config: Annotated[Path | None, typer.Option(
        "--tool-config", help="with --tool for an ACP agent: the tools' settings, a tool "
        "server config ({resources: {web: {corpus: DIR}}})")] = None,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, max=B.MAX_TURNS, help="model agent: model calls per prompt")] = None,
) -> None:
    """Run AGENT on the task at PATH (or on every task of the dataset at PATH) and score it."""
    with user_errors():
        from benchflow.roles import parse_role_options
        from benchflow.sandbox.registry import check_backend

        check_backend(env)  # one line naming the registered backends, before anything else
        roles = parse_role_options(role or [])
        agent_name = one_agent(agent, roles)
        prepared = _prepare(
            path, agent=agent_name, model=model, roles=roles, attempts=attempts, concurrency=concurrency,
            jobs_dir=jobs_dir, job_name=job_name, env=env, force_build=force_build,
            preserve_env=preserve_env.value, ca_cert=ca_cert, task_filter=task_filter,
            scenes_file=scenes_file, network=network.value if network else None,
            model_server=model_server, model_base_url=model_base_url,
            model_api_key_env=model_api_key_env, timeout_multiplier=timeout_multiplier,
            max_retries=max_retries, skill=skill, mcp_config=mcp_config,
            capture_model_calls=capture_model_calls or capture_tokens is not None,
            capture_tokens=capture_tokens, harden=harden, snapshot_turns=snapshot_turns,
            http=_http_agent(agent_name or "", agent_endpoint, header, timeout_seconds),
            max_tasks=max_tasks, registry=registry,
            qa=QaOptions(metric, answer_pattern, judge_model),
            judge=(judge_base_url, judge_api_key_env, judge_model),
            tools=None if tools is None else [t for t in tools if t != "none"],
            max_turns=max_turns, tool_config=tool_config)
        if trace_listen is not None:
            from benchflow.traces.listener import parse_listen

            parse_listen(trace_listen)  # a bad address fails before anything starts
        code = run_new_job(prepared, otel=otel, trace_listen=trace_listen)
    raise typer.Exit(code)


def run_new_job(prepared: Any, *, otel: bool, trace_listen: str | None) -> int:
    """`jobs.run_prepared` for a new job, its first trial's sandbox starting as soon as the
    job is open (`start_first_sandbox`), while the rest of the command (the progress, the
    job loop, the rollout machinery) is imported and set up; the exit code."""
    from benchflow.cli._common import set_console_level
    from benchflow.job.runner import opened_job, start_first_sandbox
    from benchflow.sandbox.early import discard_early

    set_console_level(prepared.config.log_level)
    with opened_job(prepared, resuming=False) as provider:
        try:
            early = start_first_sandbox(prepared)
            if early is not None:  # its first requests out before the imports take the GIL
                early.until_backend_waits()
            import benchflow.rollout.rollout  # noqa: F401 - what the trials run
            from benchflow.cli import jobs

            result, job = jobs.run_opened(prepared, provider, resuming=False, otel=otel,
                                          trace_listen=trace_listen)
        finally:  # not claimed: the first trial did not run (cancelled), or bad input
            discard_early()
    return jobs.report(prepared, result, job)


def one_agent(agents: list[str] | None, roles: dict[str, Any]) -> str | None:
    """The one `-a` agent (default `oracle`; None when --role gives the roles alone).

    Raises:
        ConfigError: `-a` given twice, or a comma-separated list.
    """
    from benchflow.roles import ROLE_OPTION_HELP

    agents = agents or []
    if len(agents) > 1:
        raise ConfigError(f"-a/--agent given {len(agents)} times ({', '.join(agents)}): one "
                          "agent plays every role; to give roles different agents use "
                          f"{ROLE_OPTION_HELP}")
    if agents and "," in agents[0]:
        raise ConfigError(f"-a {agents[0]}: one agent name per -a; to give roles different "
                          f"agents use {ROLE_OPTION_HELP}")
    if agents:
        return agents[0]
    return None if roles else "oracle"


def _prepare(path: Path, **opts: Any) -> Any:
    from benchflow.job.config import parse_job_config, with_absolute_paths
    from benchflow.job.runner import prepare_job
    from benchflow.rollout.model_endpoint import model_endpoint
    from benchflow.skills import skills_from_paths

    endpoint = model_endpoint(opts["model_server"], opts["model_base_url"],
                              opts["model_api_key_env"])
    endpoint = with_token_capture(endpoint, opts.pop("capture_tokens", None))
    judge = _judge_endpoint(*opts.pop("judge"), fallback=endpoint)
    skills_from_paths(opts["skill"] or [])  # a bad skill path fails before anything starts
    if opts["capture_model_calls"] and endpoint is None:
        raise ConfigError("--capture-model-calls records calls through benchflow's model "
                          "server or relay: add --model-server SCRIPT or --model-base-url URL")
    endpoint_keys = ("model_server", "model_base_url", "model_api_key_env")
    data = run_job_data(path, **{k: v for k, v in opts.items() if k not in endpoint_keys})
    if endpoint is not None:
        data["model_endpoint"] = endpoint.model_dump(mode="python", exclude_none=True)
    if judge is not None:
        data["judge_endpoint"] = judge.model_dump(mode="python", exclude_none=True)
    try:
        config = with_absolute_paths(parse_job_config(data, "command line"))
    except ConfigError as exc:
        raise ConfigError(_as_options(str(exc))) from None
    return prepare_job(config, source="command line")


_OPTION_OF_FIELD = {
    "agents[0].name": "-a/--agent", "agents[0].model": "-m/--model",
    "agents[0].roles": "--role", "agents[0].agent": "-a/--agent",
    "agents[0].scenes": "--scenes", "n_attempts": "-k/--attempts",
    "n_concurrent_trials": "-n/--concurrency", "jobs_dir": "--jobs-dir", "name": "--job-name",
    "environment.type": "--env", "environment.preserve_env": "--preserve-env",
    "environment.network": "--network", "environment.extra_ca_certs": "--ca-cert",
    "datasets[0].tasks": "-t/--task", "datasets[0].path": "PATH",
    "timeout_multiplier": "--timeout-multiplier", "retry.max_attempts": "--max-retries",
    "skills": "--skill", "mcp_config": "--mcp-config", "harden": "--harden/--no-harden",
    "tool_config": "--tool-config",
    "agents[0]": "-a/--agent", "agents[0].tools": "--tool", "agents[0].max_turns": "--max-turns",
    "datasets[0].metric": "--metric", "datasets[0].max_tasks": "--max-tasks", "datasets[0].answer_pattern": "--answer-pattern",
    "judge_endpoint": "--judge-base-url",
}


def _as_options(message: str) -> str:
    """A job-file validation message in the command line's terms (fields -> options)."""
    prefix = "command line: invalid job file: "
    if not message.startswith(prefix):
        return message
    out = []
    for part in message.removeprefix(prefix).split("; "):
        field, sep, problem = part.partition(": ")
        option = next((o for f, o in _OPTION_OF_FIELD.items()
                       if field == f or field.startswith(f + "[")), None)
        out.append(f"{option}: {problem}" if sep and option else part)
    return "invalid options: " + "; ".join(out)


def _http_agent(agent: str, endpoint: str | None, headers: list[str] | None,
                timeout_sec: float) -> dict[str, Any] | None:
    """`-a http`'s agent entry (as a job file's `{kind: http, ...}`), or None for other agents.

    Raises:
        ConfigError: `--agent-endpoint` missing for `-a http` (or given without it), or a
            header not in `Name: value` form.
    """
    if agent != "http":
        if endpoint is not None or headers:
            raise ConfigError("--agent-endpoint and --header go with -a http")
        return None
    if endpoint is None:
        raise ConfigError("-a http needs --agent-endpoint URL (the endpoint receiving the tasks)")
    parsed: dict[str, str] = {}
    for item in headers or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {name.strip() or '?'}: expected 'Name: value'")
        parsed[name.strip()] = value.strip()
    return {"name": "http", "kind": "http", "endpoint": endpoint, "headers": parsed,
            "timeout_sec": timeout_sec}


def _dataset(path: Path, task_filter: list[str] | None, max_tasks: int | None,
             registry: str | None, qa: "QaOptions") -> dict[str, Any]:
    """The job's one dataset: a task folder, a dataset folder, a QA dataset file, or
    NAME[@VERSION] of a registry (pulled into the cache first; a second run fetches nothing)."""
    from benchflow.task import is_task_dir, resolve_run_target

    limit = {} if max_tasks is None else {"max_tasks": max_tasks}
    if not Path(path).expanduser().is_dir():  # a folder is neither a QA file nor NAME@VERSION
        from benchflow.job.pull import looks_like_spec, parse_spec, pull, registry_ref
        from benchflow.task.qa import is_qa_file

        if is_qa_file(path):
            return {"qa": Path(path).expanduser().resolve(), "metric": qa.metric,
                    "answer_pattern": qa.answer_pattern, "judge_model": qa.judge_model,
                    "tasks": task_filter, **limit}
        if looks_like_spec(str(path)):
            ref = registry_ref(registry)
            pulled = pull(str(path), ref)
            name, version = parse_spec(str(path))
            return {"registry": ref.model_dump(mode="python", exclude_none=True), "name": name,
                    "version": version or pulled.version, "tasks": task_filter, **limit}
    _, tasks = resolve_run_target(path, task_filter)
    if is_task_dir(path):
        return {"path": tasks[0].path.parent, "tasks": [tasks[0].path.name]}
    return {"path": Path(path).expanduser().resolve(), "tasks": task_filter, **limit}


def with_token_capture(endpoint: Any, dialect: str | None) -> Any:
    """`endpoint` asking for token ids in `dialect`'s options (`--capture-tokens`).

    Raises:
        ConfigError: an unknown dialect, or no real endpoint to ask.
    """
    if dialect is None:
        return endpoint
    from benchflow.model_server.token_data import TOKEN_DIALECTS

    if dialect not in TOKEN_DIALECTS:
        raise ConfigError(f"--capture-tokens {dialect!r}: choose {' or '.join(TOKEN_DIALECTS)}")
    if endpoint is None or endpoint.base_url is None:
        raise ConfigError("--capture-tokens asks a real endpoint for token ids: add "
                          "--model-base-url URL (a vLLM or SGLang server)")
    return endpoint.model_copy(update={"request_tokens": dialect})


def run_job_data(path: Path, *, agent: str | None, model: str | None, attempts: int,
                 concurrency: int,
                 jobs_dir: Path, job_name: str | None, env: str, force_build: bool,
                 preserve_env: str, ca_cert: list[str] | None, task_filter: list[str] | None,
                 scenes_file: Path | None, network: str | None, timeout_multiplier: float,
                 max_retries: int, skill: list[Path] | None = None,
                 mcp_config: Path | None = None,
                 capture_model_calls: bool = False,
                 harden: bool | None = None, http: dict[str, Any] | None = None,
                 snapshot_turns: bool = False,
                 max_tasks: int | None = None, registry: str | None = None,
                 qa: "QaOptions | None" = None, tools: list[str] | None = None,
                 max_turns: int | None = None,
                 roles: "dict[str, RoleAgent] | None" = None,
                 tool_config: Path | None = None) -> dict[str, Any]:
    """The job file `benchflow run PATH ...` stands for, as a mapping to validate.

    Raises:
        TaskNotFoundError, TaskInvalidError: PATH is not a task or dataset folder.
        ConfigError: a bad task filter.
    """
    from benchflow.agents.builtin import BUILTIN_AGENT_NAMES
    from benchflow.paths import default_job_name

    dataset = _dataset(path, task_filter, max_tasks, registry, qa or QaOptions())
    if roles:
        if http is not None:
            raise ConfigError("--role assigns registered agents to a task's roles; -a http "
                              "takes no --role")
        spec: dict[str, Any] = {"roles": {name: str(given) for name, given in roles.items()}}
        if agent is not None:
            spec["agent"] = agent
        if model is not None:
            spec["model"] = model
    else:
        agent = agent or "oracle"
        spec = http or {"name": agent}
        if http is None and agent not in BUILTIN_AGENT_NAMES and model is not None:
            spec["model"] = model
    if tools is not None:
        spec["tools"] = tools
    if max_turns is not None:
        spec["max_turns"] = max_turns
    if scenes_file is not None:
        spec["scenes"] = scenes_file
    environment: dict[str, Any] = {"type": env, "force_build": force_build,
                                   "preserve_env": preserve_env, "network": network}
    if ca_cert is not None:
        environment["extra_ca_certs"] = [] if ca_cert == ["none"] else [Path(c) for c in ca_cert]
    return {
        "name": job_name or _free_job_name(jobs_dir, default_job_name()),
        "jobs_dir": jobs_dir, "n_attempts": attempts, "n_concurrent_trials": concurrency,
        "timeout_multiplier": timeout_multiplier,
        "retry": {"max_attempts": max_retries},
        "environment": environment, "agents": [spec], "datasets": [dataset],
        "skills": list(skill or []), "mcp_config": mcp_config, "tool_config": tool_config,
        "capture_model_calls": capture_model_calls,
        **({} if harden is None else {"harden": harden}),
        **({"snapshot_turns": True} if snapshot_turns else {}),
    }


@dataclass(frozen=True)
class QaOptions:
    """How `benchflow run DATA.jsonl` scores a QA dataset (a job file's `{qa: ...}` keys)."""

    metric: str = "exact_match"
    answer_pattern: str | None = None
    judge_model: str | None = None


def _judge_endpoint(base_url: str | None, api_key_env: str | None, model: str | None, *,
                    fallback: Any) -> Any:
    """--judge-base-url / --judge-api-key-env / --judge-model as an endpoint; None: the
    run's model endpoint judges (with --judge-model's model when given).

    Raises:
        ConfigError: --judge-api-key-env without --judge-base-url, or a bad URL.
    """
    from benchflow.config import ModelEndpoint

    if base_url is None:
        if api_key_env:
            raise ConfigError("--judge-api-key-env needs --judge-base-url")
        if model and fallback is not None and fallback.base_url is not None:
            return fallback.model_copy(update={"model": model})
        return None
    try:
        return ModelEndpoint(base_url=base_url, api_key_env=api_key_env, model=model)
    except ValueError as exc:
        raise ConfigError(f"--judge-base-url {base_url!r}: {exc}") from None


def _free_job_name(jobs_dir: Path, name: str) -> str:
    """`name`, or `name-2`, `name-3`... when a job of that name already exists."""
    candidate, n = name, 1
    while (jobs_dir / candidate).exists():
        n += 1
        candidate = f"{name}-{n}"
    return candidate
