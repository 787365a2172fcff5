"""`benchflow run` starts fast because it imports only what a task run needs: the modules
of other commands, optional SDKs and the QA / registry / resume / LLM-judge / user-loop
machinery load on demand. `tests/integration/test_cli_run_imports.py` checks a whole
oracle run on Docker; this checks everything `run` imports before it starts anything."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable

import pytest

NEVER_FOR_A_TASK_RUN = {
    # optional SDKs and servers
    "acp", "openai", "anthropic", "google.genai", "starlette", "uvicorn", "ray",
    "opentelemetry", "daytona", "modal", "rapidfuzz", "jinja2",
    # the other commands
    "benchflow.cli.tasks", "benchflow.cli.agents", "benchflow.cli.sandbox",
    "benchflow.cli.datasets", "benchflow.cli.view", "benchflow.cli.export",
    "benchflow.cli.model_server", "benchflow.model_server", "benchflow.view",
    # what only some runs need
    "benchflow.acp", "benchflow.task.qa", "benchflow.rollout.qa", "benchflow.job.registry",
    "benchflow.job.pull", "benchflow.job.resume", "benchflow.verify.judged",
    "benchflow.verify.llm_judge", "benchflow.rollout.user_loop", "benchflow.users",
    "benchflow.telemetry.otel", "benchflow.traces", "benchflow.tracing",
    "benchflow.rollout.fork", "benchflow.rollout.snapshots",  # fork / --snapshot-turns
    "benchflow.rollout.replay", "benchflow.trajectory.conversation",  # a fork's histories
    "benchflow.agents.model_agent", "benchflow.agents.model_tools",  # the model agent
    "benchflow.agents.catalog", "benchflow.agents.manifest",  # registered (manifest) agents
    "benchflow.trajectory.tool_calls",  # an ACP agent's tool calls
    # studies and their statistics and figures (benchflow study / compare)
    "benchflow.study", "benchflow.cli.study", "benchflow.cli.compare", "scipy", "numpy",
    "matplotlib",
    # the progress bar (a terminal only)
    "rich.progress", "rich.live",
}


NEVER_FOR_ONE_ROLLOUT = {
    "uvloop",  # a job loop for one rollout in flight is the standard one (benchflow.job.loop)
    # the Docker SDK: a plain rollout's requests go over the daemon's local socket without it
    # (`benchflow.sandbox.docker.engine`); builds, pulls, snapshots, networks, volumes and
    # live processes import it
    "docker", "requests", "urllib3",
}
"""What a whole run of one rollout does not import either (checked by the integration test)."""


def loaded_by(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\n"
                          "print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def forbidden(loaded: set[str], never: Iterable[str] = NEVER_FOR_A_TASK_RUN) -> list[str]:
    """The modules of `loaded` that are, or are under, one of `never`."""
    return sorted(m for m in loaded if any(m == f or m.startswith(f + ".") for f in never))


def test_the_run_command_imports_nothing_a_task_run_does_not_need():
    loaded = loaded_by("from benchflow.cli.main import build_app\n"
                       "build_app('run')\n"
                       "import benchflow.cli.jobs  # what run_command imports to run the job\n"
                       "import benchflow.rollout.rollout  # what it imports as the job starts")
    assert "benchflow.cli.run" in loaded and "benchflow.rollout.rollout" in loaded
    assert forbidden(loaded) == []
    assert "yaml" not in loaded  # imported where a task.md, verifier.md or scenes file is read


WHILE_THE_SANDBOX_STARTS = {
    # what `benchflow run` imports while its first sandbox starts (`benchflow.sandbox.early`):
    # the rollout machinery, the job's progress and summary, rich; planning the job and
    # starting that sandbox must not need them
    "benchflow.rollout.rollout", "benchflow.rollout.turns", "benchflow.rollout.sessions",
    "benchflow.rollout.task_steps", "benchflow.verify.runner", "benchflow.verify.baseline",
    "benchflow.verify.hardening", "benchflow.verify.soft", "benchflow.agents.skill_placement",
    "benchflow.rollout.phases", "benchflow.rollout.strategies", "benchflow.cli.jobs",
    "benchflow.cli.progress", "rich",
}


def test_starting_the_first_sandbox_needs_none_of_the_rollout_machinery():
    # everything `benchflow run` imports before `start_first_sandbox`: the command (parsed,
    # its user errors ready), the job's planning (configs, task, agents' names), the
    # spec and the docker provider
    loaded = loaded_by("from benchflow.cli.main import build_app\n"
                       "build_app('run')\n"
                       "from benchflow.cli._common import user_errors, set_console_level\n"
                       "from benchflow.job.runner import opened_job, start_first_sandbox\n"
                       "from benchflow.sandbox.registry import provider_class\n"
                       "provider_class('docker')")
    assert {"benchflow.job.runner", "benchflow.rollout.sandbox_spec", "benchflow.sandbox.early",
            "benchflow.sandbox.docker.sandbox", "benchflow.sandbox.docker.engine"} <= loaded
    assert forbidden(loaded, WHILE_THE_SANDBOX_STARTS) == []
    assert forbidden(loaded, NEVER_FOR_ONE_ROLLOUT) == []


def test_the_machinery_pin_can_fail():
    assert forbidden({"benchflow.rollout.rollout", "rich.console", "benchflow.task"},
                     WHILE_THE_SANDBOX_STARTS) == ["benchflow.rollout.rollout", "rich.console"]


def test_run_help_imports_none_of_the_job_machinery():
    # typer reads run_command's signature for the help; the job machinery (task, job,
    # rollout, sandbox, Docker SDK) is imported only to run it
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('MODULES', ' '.join(sorted(sys.modules))))\n"
            "sys.argv = ['benchflow', 'run', '--help']\n"
            "from benchflow.cli.main import main\nmain()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "Usage: benchflow run" in out
    loaded = set(out.rsplit("MODULES", 1)[1].split())
    assert "benchflow.cli.run" in loaded
    assert forbidden(loaded, ("benchflow.cli.jobs", "benchflow.job.job", "benchflow.job.config",
                              "benchflow.rollout", "benchflow.task", "benchflow.sandbox",
                              "docker", "yaml", "anyio")) == []


def test_version_imports_neither_typer_nor_a_command():
    loaded = loaded_by("import sys\nsys.argv = ['benchflow', '--version']\n"
                       "from benchflow.cli.main import main\nmain()")
    assert not {m for m in loaded if m.split(".")[0] in ("typer", "rich", "pydantic", "docker")}
    assert not {m for m in loaded if m.startswith("benchflow.cli.") and m != "benchflow.cli.main"}


@pytest.mark.parametrize("name", ["benchflow.job.resume", "rich.progress"])
def test_the_pin_can_fail(name):
    assert forbidden({name, "benchflow.cli.run"}) == [name]


def test_gc_is_paused_while_the_command_imports_then_frozen_and_back_on():
    code = ("import gc\nfrom benchflow.job.limits import imports_gc_paused\n"
            "with imports_gc_paused():\n    inside = gc.isenabled()\n    import benchflow.cli.run\n"
            "print(inside, gc.isenabled(), gc.get_freeze_count() > 1000)\n"
            "gc.disable()\nwith imports_gc_paused():\n    pass\nprint(gc.isenabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "True", "False"]  # a disabled collector stays off


def test_a_run_parses_its_options_under_the_jobs_collector_settings():
    # young collections wait for 10,000 new objects from the start of the command, not
    # only once the job runs: parsing the options and loading the configs made ~25
    code = ("import gc, sys\nimport benchflow.cli.main as m\n"
            "seen = []\nm.build_app = lambda only=None: lambda: seen.append(gc.get_threshold())\n"
            "for argv in (['run', 'x'], ['jobs', 'run', 'x.yaml'], ['tasks', 'list']):\n"
            "    sys.argv = ['benchflow', *argv]\n    m.main()\n"
            "print(seen, gc.get_threshold())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    from benchflow.job.limits import _DEFAULT_THRESHOLDS, JOB_GC_THRESHOLDS

    jobs, default = list(JOB_GC_THRESHOLDS), list(_DEFAULT_THRESHOLDS)
    assert out == f"{[tuple(jobs), tuple(jobs), tuple(default)]} {tuple(default)}"


def test_command_modules_evaluate_their_annotations_once():
    # typer reads a command's signature several times, and with postponed annotations
    # (`from __future__ import annotations`) each read evaluates every typer.Option again:
    # ~20 ms of `benchflow run`'s startup
    from pathlib import Path

    import benchflow.cli

    postponed = [path.name for path in Path(benchflow.cli.__file__).parent.glob("*.py")
                 if "typer.Option(" in (text := path.read_text())
                 and "from __future__ import annotations" in text]
    assert postponed == []


RUN_MODEL_MODULES = (
    "benchflow._models", "benchflow.config", "benchflow.mcp", "benchflow.roles",
    "benchflow.tools.acp", "benchflow.task.models",
    "benchflow.task.scenes", "benchflow.task.verifier_doc", "benchflow.sandbox.spec",
    "benchflow.sandbox.ledger", "benchflow.job.config", "benchflow.job.models",
    "benchflow.job.store", "benchflow.rollout.result", "benchflow.trajectory.events",
)
"""The modules of the pydantic models `benchflow run` defines (~80 of its ~88)."""


def test_the_runs_model_modules_evaluate_their_annotations_once():
    # pydantic evaluates a model's string annotations (compiled and eval'd one by one) when
    # the class is made; with postponed annotations that was ~9 ms of `benchflow run`'s
    # startup for these modules, against ~1 ms for Python evaluating them itself
    import importlib.util
    from pathlib import Path

    loaded = loaded_by("from benchflow.cli.main import build_app\nbuild_app('run')\n"
                       "import benchflow.cli.jobs")
    assert set(RUN_MODEL_MODULES) <= loaded
    postponed = [name for name in RUN_MODEL_MODULES
                 if "from __future__ import annotations" in
                 Path(importlib.util.find_spec(name).origin).read_text()]
    assert postponed == []


def test_a_light_module_of_the_job_package_does_not_load_the_job_machinery():
    loaded = loaded_by("import benchflow.job.limits, benchflow.job.loop")
    assert "benchflow.job.job" not in loaded and "benchflow.job.config" not in loaded
    names = loaded_by("import benchflow.job as j\nassert all(getattr(j, n) for n in j.__all__)")
    assert "benchflow.job.job" in names and "benchflow.job.resume" in names
