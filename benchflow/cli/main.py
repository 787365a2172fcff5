"""The `benchflow` command line.

Startup imports only what the command needs: `benchflow --version` imports neither typer
nor any subcommand, and `benchflow run ...` builds the app with the `run` command only
(so `tasks`, `agents` and the model server are never imported for it), with the job
machinery it runs, except for `benchflow run --help`. `--help` and unknown commands get
the whole app.
"""

import atexit
import enum
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from benchflow.job.limits import imports_gc_paused, job_gc

if TYPE_CHECKING:
    import typer

COMMANDS = ("run", "model-server", "view", "export", "tasks", "sandbox", "jobs", "agents",
            "datasets", "traces", "login", "check", "benchmarks", "study", "compare", "tools",
            "fork")
_ROOT_OPTIONS_WITH_VALUE = ("--log-level",)


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"


def _version_text() -> str:
    from benchflow._version import package_version

    return f"benchflow {package_version()}"


def _register(app: "typer.Typer", name: str) -> None:
    if name == "run":
        from benchflow.cli.run import run_command
        app.command("run")(run_command)
    elif name == "model-server":
        from benchflow.cli.model_server import model_server_command
        app.command("model-server")(model_server_command)
    elif name == "view":
        from benchflow.cli.view import view_command
        app.command("view")(view_command)
    elif name == "export":
        from benchflow.cli.export import export_command
        app.command("export")(export_command)
    elif name == "fork":
        from benchflow.cli.fork import fork_command
        app.command("fork")(fork_command)
    elif name == "tasks":
        from benchflow.cli import tasks
        app.add_typer(tasks.app, name="tasks")
    elif name == "sandbox":
        from benchflow.cli import sandbox
        app.add_typer(sandbox.app, name="sandbox")
    elif name == "datasets":
        from benchflow.cli import datasets
        app.add_typer(datasets.app, name="datasets")
    elif name == "jobs":
        from benchflow.cli import jobs
        app.add_typer(jobs.app, name="jobs")
    elif name == "agents":
        from benchflow.cli import agents
        app.add_typer(agents.app, name="agents")
    elif name == "traces":
        from benchflow.cli import traces
        app.add_typer(traces.app, name="traces")
    elif name in ("login", "check", "benchmarks"):  # the `rollout` command's own
        from benchflow.cli import hosted
        if name == "benchmarks":
            app.add_typer(hosted.benchmarks, name="benchmarks")
        else:
            app.command(name)(hosted.login_command if name == "login" else hosted.check_command)
    elif name == "study":
        from benchflow.cli.study import study_command
        app.command("study")(study_command)
    elif name == "compare":
        from benchflow.cli.compare import compare_command
        app.command("compare")(compare_command)
    elif name == "tools":
        from benchflow.cli import tools
        app.add_typer(tools.app, name="tools")


def build_app(only: str | None = None) -> "typer.Typer":
    """The typer app with every command, or with `only` that one (faster to start)."""
    import typer

    from benchflow.cli._common import configure_logging

    app = typer.Typer(
        name="benchflow", no_args_is_help=True, pretty_exceptions_enable=False,
        help="Run AI coding agents on containerized tasks, score them, keep their trajectories.",
    )

    def _version(value: bool) -> None:
        if value:
            typer.echo(_version_text())
            raise typer.Exit()

    @app.callback()
    def _root(
        version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                              help="print the version and exit")] = False,
        log_level: Annotated[LogLevel | None, typer.Option(
            "--log-level", help="console log level (default: warning, or a job file's "
            "log_level); rollout.log always records info and up")] = None,
    ) -> None:
        configure_logging(log_level.value if log_level else None)

    for name in COMMANDS if only is None else (only,):
        _register(app, name)
    return app


def _command_of(args: list[str]) -> str | None:
    """The subcommand named on the command line, if any (skipping root options)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _ROOT_OPTIONS_WITH_VALUE:
            skip = True
        elif arg.startswith("-"):
            continue
        else:
            return arg if arg in COMMANDS else None
    return None


def __getattr__(name: str) -> object:
    if name == "app":  # the whole app, for tests and `typer ... utils docs`
        return build_app()
    raise AttributeError(name)


def main() -> None:
    """Console-script entry point of `benchflow` and `rollout` (the same app);
    `benchflow job.yaml ...` means `benchflow jobs run job.yaml ...`."""
    args = sys.argv[1:]
    if args == ["--version"]:
        print(_version_text())
        return
    if args and args[0].endswith((".yaml", ".yml", ".json")) and Path(args[0]).is_file():
        sys.argv[1:1] = ["jobs", "run"]
        args = sys.argv[1:]
    wants_help = any(a in ("--help", "-h") for a in args[:1])
    command = None if wants_help else _command_of(args)
    try:
        with imports_gc_paused():
            app = build_app(command)
            if command == "run" and not {"--help", "-h"} & set(args):
                # what `run` plans the job and starts its first sandbox with, GC-paused (the
                # rest, `benchflow.cli.jobs` and the rollout machinery, while it starts)
                import benchflow.job.runner  # noqa: F401
        if command in ("run", "jobs"):
            with job_gc():  # the job's collector settings from the start: parsing the
                app()  # options and loading the configs made ~20 young collections
        else:
            app()
    except SystemExit as exc:
        _exit_now(exc)
        raise


def _exit_now(exc: SystemExit) -> None:
    """End the process as `exc` would, without the interpreter's teardown.

    Freeing every module and object at exit costs ~150 ms after a run (pydantic schemas,
    the Docker SDK); the output is written by then. Exit handlers run first (logging
    flushes its files, temporary folders are removed), then the standard streams are
    flushed. Returns (the caller re-raises) while a non-daemon thread still runs (the
    interpreter then joins it as usual) or under a profiler or tracer (which write their
    results after the program ends).
    """
    if sys.getprofile() is not None or sys.gettrace() is not None or any(
            t.is_alive() and not t.daemon for t in threading.enumerate()
            if t is not threading.main_thread()):
        return
    code = exc.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)
