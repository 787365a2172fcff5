"""Named volumes on the docker backend: filled once, then only mounted read-only.

They hold the per-agent install layers (`benchflow.agents.layers`). A volume `NAME` is
filled by a short-lived container of the task's image that mounts it read-write; it counts
as complete once the empty volume `NAME.complete` exists, which is created only after the
fill succeeded (volumes cannot be renamed, and labels cannot change: a second volume is the
one atomic "done" docker offers). A fill that died half-way leaves `NAME` without its
marker; the next fill empties it and starts over.

One filler at a time per volume, across processes: the filler first creates a container
named `bf-fill-NAME` (never started: a lock docker makes atomic, 409 for everyone else),
labelled with when it expires (a process killed mid-fill cannot hold it for longer), and
removes it when done. Within a process an `anyio.Lock` per volume keeps the waiters off
the daemon.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import docker.errors

from benchflow.errors import SandboxStartError
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.docker.errors import docker_call, docker_client

if TYPE_CHECKING:
    from benchflow.sandbox.docker.sandbox import DockerSandbox
from benchflow.sandbox.labels import LABEL_MANAGED

log = logging.getLogger(__name__)

COMPLETE_SUFFIX = ".complete"
LABEL_VOLUME = "benchflow.volume"
"""On volumes benchflow made (the value says what they hold): remove them all with
`docker volume rm $(docker volume ls -q -f label=benchflow.volume)`."""
LABEL_LOCK_EXPIRES = "benchflow.lock-expires"
_LOCK_PREFIX = "bf-fill-"
_POLL_SEC = 1.0
_locks: dict[str, anyio.Lock] = {}
_ready: set[str] = set()
"""Volumes seen complete in this process (complete volumes never change)."""


def _exists(client: docker.DockerClient, name: str) -> bool:
    try:
        client.api.inspect_volume(name)
    except docker.errors.NotFound:
        return False
    return True


async def volume_ready(name: str) -> bool:
    """Whether volume `name` was filled completely (its marker volume exists)."""
    if name in _ready:
        return True
    if await docker_call(_exists, docker_client(), name + COMPLETE_SUFFIX):
        _ready.add(name)
        return True
    return False


def _claim(client: docker.DockerClient, image: str, lock: str, ttl_sec: float,
           labels: dict[str, str]) -> bool:
    """Create the lock container; False when another holds it (an expired one is removed)."""
    try:
        client.api.create_container(
            image, command=["true"], name=lock, labels={
                **labels, LABEL_MANAGED: "true", LABEL_LOCK_EXPIRES: f"{time.time() + ttl_sec:.0f}"})
        return True
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
    try:
        held = client.api.inspect_container(lock)
    except docker.errors.NotFound:
        return False  # released meanwhile: the caller looks again
    expires = float((held.get("Config", {}).get("Labels") or {}).get(LABEL_LOCK_EXPIRES) or 0)
    if expires < time.time():
        log.warning("removing the expired fill lock %s (its process died?)", lock)
        _release(client, lock)
    return False


async def _wait_for_filler(lock: str) -> None:
    """Another process holds `lock`: look again in a moment."""
    log.debug("waiting for %s", lock)
    await anyio.sleep(_POLL_SEC)


def _release(client: docker.DockerClient, lock: str) -> None:
    try:
        client.api.remove_container(lock, force=True)
    except docker.errors.NotFound:
        pass


def _create_volume(client: docker.DockerClient, name: str, what: str) -> None:
    client.volumes.create(name, labels={LABEL_MANAGED: "true", LABEL_VOLUME: what})


async def fill_volume(sandbox: DockerSandbox, name: str, target: str,
                      fill: Callable[[Sandbox], Awaitable[None]], ttl_sec: float) -> bool:
    """`VolumeSandbox.fill_volume` for docker (see the module docstring); `ttl_sec` bounds
    how long the lock is honoured.

    Raises:
        SandboxStartError: the filler container could not start.
        Whatever `fill` raised.
    """
    client = docker_client()
    lock = f"{_LOCK_PREFIX}{name}"[:128]
    async with _locks.setdefault(name, anyio.Lock()):
        image = sandbox.image or await sandbox.prepare_image()
        while True:
            if await volume_ready(name):
                return False
            if await docker_call(_claim, client, image, lock, ttl_sec, dict(sandbox.spec.labels),
                                 error=SandboxStartError):
                break
            await _wait_for_filler(lock)
        try:
            if await volume_ready(name):  # filled between our look and the claim
                return False
            await docker_call(_create_volume, client, name, target, error=SandboxStartError)
            async with sandbox.scratch({name: target}) as filler:
                emptied = await filler.exec(["find", target, "-mindepth", "1", "-delete"],
                                            user="root", timeout=300)
                if not emptied.ok:
                    raise SandboxStartError(f"cannot empty volume {name}: {emptied.text(500)}")
                await fill(filler)
            await docker_call(_create_volume, client, name + COMPLETE_SUFFIX, target,
                              error=SandboxStartError)
            _ready.add(name)
            return True
        finally:
            with anyio.CancelScope(shield=True):
                await docker_call(_release, client, lock, error=SandboxStartError)


__all__ = ["COMPLETE_SUFFIX", "LABEL_VOLUME", "fill_volume", "volume_ready"]
