"""The public surface: `__all__` lists exactly what the package exports on purpose."""

from __future__ import annotations

import benchflow


def test_all_names_exist_and_are_public():
    for name in benchflow.__all__:
        assert hasattr(benchflow, name), name
    assert len(set(benchflow.__all__)) == len(benchflow.__all__)


def test_core_names_are_exported():
    expected = {"run", "Rollout", "RolloutConfig", "Scene", "Role", "Turn", "RolloutResult", "Job"}
    assert expected <= set(benchflow.__all__)


def test_no_undeclared_public_modules_leak_into_all():
    exported = {n for n in dir(benchflow) if not n.startswith("_")}
    modules = {"agents", "cli", "config", "errors", "job", "paths", "rollout", "sandbox",
               "settings", "steps", "task", "verify", "trajectory", "acp", "users",
               "model_server", "models", "qa"}
    assert exported - set(benchflow.__all__) <= modules
