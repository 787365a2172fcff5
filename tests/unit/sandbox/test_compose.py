"""The compose sandbox's generated files (no Docker): main as Harbor's base makes it,
labels on every service and on the network, and the group's network policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import ConfigError
from benchflow.sandbox.docker import compose
from benchflow.sandbox.docker.compose import LABEL_GROUP, ComposeSandbox, project_name
from benchflow.sandbox.spec import SandboxSpec


def sandbox(tmp_path: Path, **fields: object) -> ComposeSandbox:
    (tmp_path / "docker-compose.yaml").write_text("services: {}\n")
    spec = SandboxSpec(name="Hello MCP!", environment_dir=tmp_path, workdir="/app",
                       compose_file=tmp_path / "docker-compose.yaml", env={"A": "1"},
                       labels={"benchflow.job": "j", "benchflow.rollout": "r"}, **fields)
    return ComposeSandbox(spec)


def test_project_names_are_unique_and_valid():
    spec = SandboxSpec(name="Hello MCP!")
    one, two = project_name(spec), project_name(spec)
    assert one != two and one.startswith("bf-hello-mcp-")
    assert all(c.isalnum() or c in "-_" for c in one) and one == one.lower()


def test_main_is_harbors_base_service(tmp_path):
    base = sandbox(tmp_path)._base("benchflow/t:1")
    assert base == {"services": {"main": {"image": "benchflow/t:1",
                                          "command": ["sleep", "infinity"],
                                          "pull_policy": "never"}}}


@pytest.mark.parametrize(("policy", "isolate", "internal"), [
    ("public", False, False), ("none", True, True), ("public", True, True)])
def test_every_service_and_the_network_are_labelled_and_policed(tmp_path, policy, isolate,
                                                                internal):
    box = sandbox(tmp_path, network_policy=policy, isolate_services=isolate)
    overlay = box._overlay({"main": {}, "db": {}}, {"db": "benchflow/t-db:1"})
    labels = {"benchflow.managed": "true", "benchflow.job": "j", "benchflow.rollout": "r"}
    assert overlay["services"]["db"] == {"labels": labels, "image": "benchflow/t-db:1"}
    main = overlay["services"]["main"]
    # the value reaches compose in its process's environment, never in a file
    assert (main["labels"], main["init"]) == (labels, True)
    assert main["environment"] == {"A": "${BENCHFLOW_MAIN_ENV_0}"}
    assert box._compose_env()["BENCHFLOW_MAIN_ENV_0"] == "1"
    assert (main["working_dir"], main["mem_limit"], main["pids_limit"]) == ("/app", "2048m",
                                                                             4096)
    network = overlay["networks"]["default"]
    assert network["internal"] is internal
    assert network["labels"] == {**labels, LABEL_GROUP: box.project}
    assert "networks" not in main  # only the group's network


def test_model_only_adds_the_model_network_to_main_alone(tmp_path):
    box = sandbox(tmp_path, network_policy="model-only", isolate_services=True,
                  network="benchflow-model-only-abc")
    overlay = box._overlay({"main": {}, "db": {}}, {})
    assert overlay["services"]["main"]["networks"] == ["default", "benchflow_model"]
    assert "networks" not in overlay["services"]["db"]
    assert overlay["networks"]["benchflow_model"] == {"name": "benchflow-model-only-abc",
                                                      "external": True}
    assert overlay["networks"]["default"]["internal"] is True


def test_a_missing_compose_says_what_to_install_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(compose.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(compose.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError) as caught:
        compose.compose_command()
    assert "pip install 'benchflow[compose]'" in str(caught.value)
    assert "\n" not in str(caught.value)
