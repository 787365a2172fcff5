"""A sandbox's start over the daemon's socket without the SDK (`sandbox/docker/engine.py`)
and the SDK's own path (any setup that is not a plain local socket) make the same container
and fail with the same words, on the real daemon."""

from __future__ import annotations

import re

import docker
import pytest

from benchflow.errors import SandboxStartError
from benchflow.sandbox.docker import engine
from benchflow.sandbox.docker.calls import remove_or_stop
from benchflow.sandbox.docker.sandbox import DockerSandbox
from benchflow.sandbox.labels import LABEL_JOB
from benchflow.sandbox.spec import SandboxSpec

from .conftest import job_containers

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

BASE = "debian:bookworm-slim"


def use_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """`socket`: the plain local setup; `sdk`: DOCKER_TLS_VERIFY set empty, which the SDK
    reads as no TLS on the same socket and `engine` leaves to the SDK."""
    if path == "sdk":
        monkeypatch.setenv("DOCKER_TLS_VERIFY", "")
    else:
        monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    assert (engine.local_socket() is None) is (path == "sdk")


def made(info: dict) -> dict:
    config, host = info["Config"], info["HostConfig"]
    return {"config": {k: config.get(k) for k in ("Image", "Cmd", "Env", "Labels",
                                                  "WorkingDir")},
            "host": {k: host.get(k) for k in ("Memory", "NanoCpus", "PidsLimit", "Init",
                                              "NetworkMode", "Runtime", "StorageOpt")}}


async def test_both_paths_make_the_same_container(monkeypatch, job_name, tmp_path):
    spec = SandboxSpec(name="socket-path", docker_image=BASE, workdir="/app", cpus=0.5,
                       memory_mb=256, pids_limit=128, env={"GREETING": "hi there"},
                       labels={LABEL_JOB: job_name})
    seen = {}
    for path in ("socket", "sdk"):
        use_path(monkeypatch, path)
        sandbox = DockerSandbox(spec)
        await sandbox.start()
        try:
            result = await sandbox.exec(["sh", "-c", 'echo "$GREETING"; pwd'])
            assert result.ok and result.stdout.split() == [b"hi", b"there", b"/app"]
            failed = await sandbox.exec(["sh", "-c", "echo oops >&2; exit 3"], user="nobody",
                                        cwd="/tmp", env={"X": "1"})
            assert (failed.exit_code, failed.stderr) == (3, b"oops\n")
            await sandbox.upload_bytes(b"payload", "/app/in/file.txt")
            await sandbox.download("/app/in", tmp_path / path)
            assert (tmp_path / path / "file.txt").read_bytes() == b"payload"
            assert await sandbox.disk_usage_mb() >= 0
            info = docker.from_env().api.inspect_container(sandbox.container_id)
            seen[path] = made(info)
        finally:
            container_id = sandbox.container_id
            await sandbox.stop()
        remove_or_stop(container_id, True)  # once more: gone already (a 404) is fine
        assert job_containers(job_name) == []
    assert seen["socket"] == seen["sdk"]
    assert seen["socket"]["host"]["Memory"] == 256 << 20  # the comparison sees the options


async def test_a_refused_create_reads_the_same_both_ways(monkeypatch, job_name):
    spec = SandboxSpec(name="refused", docker_image=BASE, runtime="no-such-runtime",
                       storage_mb=None, labels={LABEL_JOB: job_name})
    messages = {}
    for path in ("socket", "sdk"):
        use_path(monkeypatch, path)
        with pytest.raises(SandboxStartError) as refused:
            await DockerSandbox(spec).start()
        assert not refused.value.transient  # a 4xx: the same refusal again
        messages[path] = re.sub(r"bf-refused-[0-9a-f]+", "NAME", str(refused.value))
    assert messages["socket"] == messages["sdk"]
    assert "no-such-runtime" in messages["socket"]
