"""Daemon faults decided without a daemon: builds cut short, sandboxes left to reclaim."""

from __future__ import annotations

import anyio
import docker.errors
import pytest
import requests.exceptions
import urllib3.exceptions

from benchflow.errors import SandboxBuildError, SandboxBuildTimeout, SandboxTeardownError
from benchflow.job import signals
from benchflow.sandbox.docker.images import _until_read_timeout
from benchflow.sandbox.owner import CleanupReport, CleanupScope
from benchflow.sandbox.provider import SandboxProvider

TIMEOUT = SandboxBuildTimeout("environment build", 5, "exceeded")


def _stream(exc: BaseException):
    yield {"stream": "Step 1/3"}
    raise exc


def test_a_lost_daemon_during_a_build_is_retryable_and_a_deadline_is_a_timeout():
    with pytest.raises(SandboxBuildError) as lost:
        list(_until_read_timeout(_stream(requests.exceptions.ConnectionError(
            "Connection aborted")), TIMEOUT))
    assert lost.value.retryable and not isinstance(lost.value, SandboxBuildTimeout)
    read_timeout = urllib3.exceptions.ReadTimeoutError(None, "/build", "read timed out")
    for exc in (read_timeout, requests.exceptions.ConnectionError(read_timeout)):
        with pytest.raises(SandboxBuildTimeout):
            list(_until_read_timeout(_stream(exc), TIMEOUT))


class AwayProvider(SandboxProvider):
    """A backend whose daemon is away until `back` is set."""

    name = "away"
    capabilities = None  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.pending = ["box-1", "box-2"]
        self.back = False
        self.reclaimed: list[str] = []

    def create(self, spec):  # pragma: no cover - not used
        raise NotImplementedError

    async def cleanup(self, job_name=None):
        return []

    async def sweep(self, scope: CleanupScope) -> CleanupReport:
        return CleanupReport()

    async def reclaim(self) -> list[str]:
        if not self.back:
            raise SandboxTeardownError("lost connection to the docker daemon", transient=True)
        gone, self.pending = self.pending, []
        self.reclaimed += gone
        return gone


@pytest.mark.anyio
async def test_the_job_reclaims_sandboxes_once_the_daemon_is_back(monkeypatch):
    provider = AwayProvider()
    await signals._reclaim(provider)  # still away: nothing raised, nothing lost
    assert provider.pending == ["box-1", "box-2"]
    provider.back = True
    monkeypatch.setattr(signals, "RECLAIM_INTERVAL_SEC", 0.001)
    with anyio.move_on_after(5):  # the loop keeps going: stop it once it has reclaimed
        async with anyio.create_task_group() as tg:
            tg.start_soon(signals._reclaim_loop, provider)
            while not provider.reclaimed:
                await anyio.sleep(0.001)
            tg.cancel_scope.cancel()
    assert provider.reclaimed == ["box-1", "box-2"]


class _StoppedContainerApi:
    """docker-py's low-level API for a container that stopped under the rollout."""

    def exec_create(self, container, cmd, **kwargs):
        response = requests.Response()
        response.status_code = 409
        raise docker.errors.APIError("Conflict", response,
                                     explanation=f"Container {container} is not running")


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["socket", "sdk"])
async def test_a_command_in_a_container_that_stopped_under_it_is_retryable(monkeypatch, path):
    from benchflow.errors import SandboxExecError
    from benchflow.sandbox.docker import calls, engine
    from benchflow.sandbox.docker import sandbox as docker_sandbox
    from benchflow.sandbox.spec import SandboxSpec

    client = type("Client", (), {"api": _StoppedContainerApi()})()
    monkeypatch.setattr(calls, "docker_client", lambda: client)  # a live process: the SDK's
    if path == "socket":  # the daemon's 409 over the local socket (engine.py)
        def refuse(container, *args, **kwargs):
            raise engine.Refused(409, f"Container {container} is not running")

        monkeypatch.setattr(engine, "exec_create", refuse)
    else:
        monkeypatch.setattr(engine, "local_socket", lambda: None)
    sandbox = docker_sandbox.DockerSandbox(SandboxSpec(name="t", extra_ca_certs=[]))
    sandbox.container_id = "c0ffee"
    for run in (lambda: sandbox.exec(["true"]), lambda: sandbox.open_process(["sleep", "1"])):
        with pytest.raises(SandboxExecError) as stopped:
            await run()
        assert stopped.value.retryable and "stopped under benchflow" in str(stopped.value)
        assert "is not running" in str(stopped.value)
