"""The public surface: `__all__` lists exactly what the package exports on purpose."""

from __future__ import annotations

import subprocess
import sys

import benchflow

EXPORTED = {
    "BaseUser", "BenchflowError", "ConfigError", "FunctionUser", "Job", "JobResult", "LLMUser",
    "McpServer",
    "Role",
    "Rollout", "RolloutConfig", "RolloutResult", "RolloutStream", "RoundResult", "RunResult", "Scene", "Step",
    "Task", "Turn", "__version__", "desugar", "load_task", "run", "stream",
}


def test_the_exported_set_is_pinned():
    assert set(benchflow.__all__) == EXPORTED
    assert len(set(benchflow.__all__)) == len(benchflow.__all__)


def test_all_names_exist():
    for name in benchflow.__all__:
        assert getattr(benchflow, name) is not None, name
    from benchflow.rollout import Rollout, run
    assert benchflow.Rollout is Rollout and benchflow.run is run


def test_run_result_is_the_rollout_result():
    assert benchflow.RunResult is benchflow.RolloutResult


def test_unknown_names_raise_attribute_error():
    try:
        benchflow.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_no_undeclared_public_modules_leak_into_all():
    exported = {n for n in dir(benchflow) if not n.startswith("_")}
    modules = {"agents", "cli", "config", "errors", "job", "paths", "rollout", "sandbox",
               "settings", "steps", "task", "verify", "trajectory", "acp", "users", "telemetry",
               "model_server", "mcp", "skills", "view", "models", "qa", "tracing", "traces",
               "train", "roles", "study", "tools", "bounds", "trace_ids", "hosted"}
    assert exported - set(benchflow.__all__) <= modules


def _imported_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


def test_importing_task_or_trajectory_loads_neither_acp_nor_docker():
    for statement in ("import benchflow.task", "import benchflow.trajectory"):
        loaded = _imported_after(statement)
        heavy = {m for m in loaded if m.split(".")[0] in ("acp", "docker")}
        assert not heavy, (statement, sorted(heavy)[:5])
