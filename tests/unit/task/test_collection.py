"""Harbor's `[[verifier.collect]]` hooks and artifacts taken from a compose service: how
task.toml is read, what the loader refuses, and the order of a collection pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import TaskInvalidError
from benchflow.task import load_task
from benchflow.task.collection import collection_pass
from benchflow.task.legacy import parse_task_toml
from benchflow.task.models import TaskConfigWarning

SIDECAR = '''version = "1.0"
artifacts = [
    { source = "/var/log/api/orders.log", service = "api" },
    { source = "/tmp/stats.json", service = "api" },
    "/app/out.txt",
]

[verifier]
environment_mode = "separate"

[[verifier.collect]]
service = "api"
command = "curl -s http://localhost:8000/stats > /tmp/stats.json"
timeout_sec = 30.0

[[verifier.collect]]
command = "sync"
user = 1000
'''


def test_collect_hooks_are_read_with_harbors_defaults():
    config = parse_task_toml(SIDECAR, "t.toml")
    api, main = config.verifier.collect
    assert (api.service, api.timeout_sec, api.user) == ("api", 30.0, None)
    assert api.command.startswith("curl -s")
    assert (main.service, main.timeout_sec, main.user) == ("main", 60.0, "1000")
    assert [a.from_service for a in config.artifacts] == ["api", "api", "main"]


def test_an_unknown_key_in_a_collect_hook_warns_as_harbor_ignores_it():
    with pytest.warns(TaskConfigWarning, match=r"'verifier.collect\[0\].shell' is not supported"):
        config = parse_task_toml('version = "1.0"\n[[verifier.collect]]\ncommand = "x"\n'
                                 'shell = "zsh"\n', "t.toml")
    assert config.verifier.collect[0].command == "x"


def test_a_step_adds_its_hooks_and_artifacts_after_the_tasks():
    config = parse_task_toml(
        SIDECAR + '[[steps]]\nname = "one"\nartifacts = [{ source = "/srv/db", service = "db" }]'
        '\n[[steps.verifier.collect]]\nservice = "db"\ncommand = "dump"\n', "t.toml")
    one = collection_pass(config, config.steps[0])
    assert [h.command for h in one.hooks] == [config.verifier.collect[0].command, "sync", "dump"]
    assert [a.source for a in one.artifacts][-1] == "/srv/db"
    assert one.services == {"api", "db"}
    assert [h.service for h in one.in_main().hooks] == ["main"]
    assert [a.source for a in one.in_services().artifacts] == [
        "/var/log/api/orders.log", "/tmp/stats.json", "/srv/db"]
    assert collection_pass(config).services == {"api"}


def make_task(root: Path, toml: str, compose: bool) -> Path:
    task = root / "t"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    if compose:
        (task / "environment" / "docker-compose.yaml").write_text(
            "services:\n  api:\n    image: debian:bookworm-slim\n")
    (task / "tests").mkdir()
    (task / "tests" / "test.sh").write_text("#!/bin/sh\n")
    (task / "instruction.md").write_text("do it\n")
    (task / "task.toml").write_text(toml)
    return task


def test_a_compose_task_with_sidecar_collection_loads(tmp_path):
    task = load_task(make_task(tmp_path, SIDECAR, compose=True))
    assert task.compose_file is not None
    assert collection_pass(task.config).services == {"api"}


def test_a_service_without_a_compose_file_is_refused_naming_it(tmp_path):
    with pytest.raises(TaskInvalidError, match=r"task.toml: artifacts or \[\[verifier.collect\]\] "
                       r"name the compose service\(s\) 'api', but environment/ has no "
                       r"docker-compose.yaml"):
        load_task(make_task(tmp_path, SIDECAR, compose=False))


@pytest.mark.parametrize("main", ['"/tmp/stats.json"', '"/tmp"',
                                  '{ source = "/app/s.json", destination = "tmp/stats.json" }'])
def test_a_main_file_landing_where_a_services_goes_is_refused(tmp_path, main):
    toml = SIDECAR.replace('    "/app/out.txt",\n', f"    {main},\n")
    with pytest.raises(TaskInvalidError, match=r"from service 'api' and .* from service 'main' "
                       r"land on the same path .* take them from different paths"):
        load_task(make_task(tmp_path, toml, compose=True))


def test_hooks_in_main_need_no_compose_file(tmp_path):
    toml = 'version = "1.0"\nartifacts = ["/app/x.sha256"]\n[[verifier.collect]]\ncommand = "x"\n'
    task = load_task(make_task(tmp_path, toml, compose=False))
    assert task.compose_file is None and collection_pass(task.config).services == set()
