"""`rollout login`, `rollout check`, `rollout benchmarks list|pull|run` (also under `benchflow`).

`benchmarks run NAME` is `benchflow run <workspace dataset> -a http` with the login's
endpoint and token unless given: one path, two front doors.
"""

import sys
from pathlib import Path
from typing import Annotated

import typer

from benchflow import bounds as B
from benchflow.cli._common import EXIT_ROLLOUT_ERROR, console, err_console, user_errors
from benchflow.errors import ConfigError

RegistryOption = Annotated[str | None, typer.Option(
    "--registry", help="registry.json path or URL (default: rollout login's, "
    "BENCHFLOW_REGISTRY, else the example datasets shipped with benchflow)")]
WorkspaceOption = Annotated[Path | None, typer.Option(
    "--workspace", help="the workspace folder (default: rollout login's, else ./workspace)")]


def login_command(
    endpoint: Annotated[str | None, typer.Option(
        "--endpoint", help="your agent endpoint (the URL receiving the tasks)")] = None,
    token_env: Annotated[str | None, typer.Option(
        "--token-env", help="read the endpoint token from this host variable at run time "
        "(nothing secret is stored)")] = None,
    token_stdin: Annotated[bool, typer.Option(
        "--token-stdin", help="read the token from standard input instead of a prompt")] = False,
    registry: RegistryOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """Store the endpoint, its token and the registry (a 0600 file in the config folder)."""
    from benchflow.hosted.login import LoginConfig, load_login, save_login

    with user_errors():
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"--endpoint {endpoint!r}: use an http(s):// URL")
        old = load_login()
        token = None
        if token_env is None:
            if token_stdin or not sys.stdin.isatty():
                token = sys.stdin.readline().strip()
            else:
                token = typer.prompt("endpoint token", hide_input=True, default="",
                                     show_default=False).strip()
            token = token or old.token
        config = LoginConfig(
            endpoint=endpoint or old.endpoint, token=token, token_env=token_env,
            registry=registry or old.registry,
            workspace=str(workspace) if workspace else old.workspace)
        path = save_login(config)
    how = f"token from ${token_env}" if token_env else ("token stored" if token else "no token")
    console.print(f"saved {path} (mode 0600): endpoint {config.endpoint or '-'}, {how}, "
                  f"registry {config.registry or 'default'}", highlight=False)


def check_command(
    endpoint: Annotated[str | None, typer.Option(
        "--agent-endpoint", "--endpoint", help="check this endpoint (default: login's)")] = None,
    registry: RegistryOption = None,
) -> None:
    """Check Docker, the registry, the credentials and the endpoint: one line each; exit 1
    when any fails."""
    from benchflow.hosted.checks import run_checks
    from benchflow.hosted.login import load_login

    with user_errors():
        config = load_login()
    checks = run_checks(config, endpoint=endpoint, registry=registry)
    for check in checks:
        console.print(check.line, highlight=False, markup=False, soft_wrap=True)
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_ROLLOUT_ERROR)


benchmarks = typer.Typer(name="benchmarks", no_args_is_help=True,
                         help="Runnable benchmark packages: list, pull into a workspace, run "
                         "against your HTTP endpoint.")


def _workspace(value: Path | None) -> Path:
    from benchflow.hosted.login import load_login
    from benchflow.hosted.workspace import DEFAULT_WORKSPACE

    if value is not None:
        return value
    stored = load_login().workspace
    return Path(stored).expanduser() if stored else DEFAULT_WORKSPACE


def _registry(value: str | None):  # -> RegistryRef
    from benchflow.hosted.login import load_login
    from benchflow.hosted.workspace import default_registry_ref

    return default_registry_ref(value or load_login().registry)


@benchmarks.command("list")
def list_command(registry: RegistryOption = None) -> None:
    """List the registry's benchmark packages."""
    from benchflow.job.registry import load_registry

    from benchflow.cli.datasets import registry_table

    with user_errors():
        loaded = load_registry(_registry(registry))
    console.print(registry_table(loaded, "benchmark"))


@benchmarks.command("pull")
def pull_command(
    benchmark: Annotated[str, typer.Argument(help="NAME or NAME@VERSION")],
    registry: RegistryOption = None,
    workspace: WorkspaceOption = None,
) -> None:
    """Add BENCHMARK to the workspace as a dataset plus its verifiers (idempotent)."""
    from benchflow.hosted.workspace import pull_benchmark

    with user_errors():
        pulled = pull_benchmark(benchmark, _registry(registry), _workspace(workspace))
    state = "added" if pulled.copied else "already in the workspace"
    console.print(f"{pulled.key}: {len(pulled.tasks)} task(s) {state} ({pulled.folder})",
                  highlight=False)


@benchmarks.command("run")
def run_command(
    benchmark: Annotated[str, typer.Argument(help="NAME or NAME@VERSION")],
    agent_endpoint: Annotated[str | None, typer.Option(
        "--agent-endpoint", help="the HTTP endpoint receiving each task (default: login's)")
    ] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="'Name: value' forwarded to the endpoint (default: the login's "
        "token as Authorization: Bearer); repeatable")] = None,
    max_tasks: Annotated[int | None, typer.Option("--max-tasks", min=1, max=B.MAX_TASKS)] = None,
    timeout_seconds: Annotated[float, typer.Option("--timeout-seconds", min=0.001,
                                                   max=B.MAX_SECONDS)] = 60.0,
    registry: RegistryOption = None,
    workspace: WorkspaceOption = None,
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir")] = Path("jobs"),
    job_name: Annotated[str | None, typer.Option("--job-name")] = None,
    trace_listen: Annotated[str | None, typer.Option(
        "--trace-listen", help="HOST:PORT for the endpoint's OTLP traces, or none")] = None,
) -> None:
    """Pull BENCHMARK if needed, then POST each task to the endpoint (`run -a http`)."""
    from benchflow.cli.run import run_command
    from benchflow.hosted.login import load_login
    from benchflow.hosted.workspace import pull_benchmark

    with user_errors():
        config = load_login()
        endpoint = agent_endpoint or config.endpoint
        if endpoint is None:
            raise ConfigError("no endpoint: pass --agent-endpoint URL or `rollout login "
                              "--endpoint URL`")
        pulled = pull_benchmark(benchmark, _registry(registry), _workspace(workspace))
    headers = list(header or [])
    if not headers and config.auth_header():
        headers = [f"Authorization: {config.auth_header()}"]
    args = ["run", str(pulled.folder), "-a", "http", "--agent-endpoint", endpoint,
            "--timeout-seconds", str(timeout_seconds), "--jobs-dir", str(jobs_dir)]
    for value in headers:
        args += ["--header", value]
    for option, value in (("--max-tasks", max_tasks), ("--job-name", job_name),
                          ("--trace-listen", trace_listen)):
        if value is not None:
            args += [option, str(value)]
    err_console.print(f"running {pulled.key} against {endpoint}", highlight=False)
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command("run")(run_command)
    command = typer.main.get_command(app)  # one command: the app is `run` itself
    code = command.main(args=args[1:], prog_name="rollout run", standalone_mode=False)
    raise typer.Exit(code or 0)
