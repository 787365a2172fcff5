"""Agent installs as layers: one cached volume per agent, version and platform, composed
per rollout, so a pairing never seen before starts as fast as one agent alone.

An agent whose manifest says `install.layer = true` installs everything under its own
folder (`/opt/benchflow/agents/<name>`: the npm prefix, Node.js when the image has none,
python wheels, its files). On a backend with the `volumes` capability (docker) that folder
is a named volume, `benchflow-agent-<name>-<version>-<key>`; the key hashes the manifest
(its folder and the shared install scripts) and what of the image the install depends on:
architecture, C library and its version, the image's node (or none) for JS agents, its
python for python agents. So the claude layer serves every task image of one platform,
alone or beside any other agent.

Before the rollout's sandbox starts, `prepare_layers` makes sure each layer is filled (a
missing one is installed once, by the agent's own install, in a short-lived container of
the task's image that no agent ever runs in) and mounts them all read-only. The
rollout's install then only links each layer onto PATH (and runs the script's fast path).
What the platform of an image is, is probed once per image and kept in
`<cache_dir>/platforms/`.

Remove the layers with `docker volume rm $(docker volume ls -q -f label=benchflow.volume)`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from benchflow.agents import python_wheels
from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.base import AgentContext
from benchflow.paths import RolloutPaths
from benchflow.sandbox.base import Sandbox, VolumeSandbox
from benchflow.settings import get_settings
from benchflow.task import Task

if TYPE_CHECKING:
    from benchflow.agents.manifest import AgentManifest

log = logging.getLogger(__name__)

LAYER_PREFIX = "benchflow-agent-"
_LAYER_RECIPE_VERSION = "1"
_FILL_TTL_MARGIN_SEC = 300.0
_platforms: dict[str, python_wheels.SandboxPlatform] = {}


@dataclass(frozen=True)
class LayerPlan:
    """The layers mounted into a rollout's sandbox, and the image's platform they are for."""

    layers: tuple[AgentLayer, ...] = ()
    platform: python_wheels.SandboxPlatform | None = None

    @property
    def agents(self) -> frozenset[str]:
        return frozenset(layer.agent for layer in self.layers)


@dataclass(frozen=True)
class AgentLayer:
    """One agent's install layer as a rollout uses it."""

    agent: str
    volume: str
    target: str
    """Where it is mounted: the agent's folder (`AgentManifest.sandbox_dir`)."""
    filled: bool
    """Installed by this rollout (False: it was cached)."""


def layer_key(manifest: AgentManifest, platform: python_wheels.SandboxPlatform) -> str:
    """16 hex digits: the manifest's digest and what of the image its install depends on."""
    parts = [_LAYER_RECIPE_VERSION, manifest.name, manifest.digest(), platform.arch,
             platform.libc, repr(platform.libc_version)]
    if manifest.install.node:
        fits = python_wheels.image_node_fits(platform, manifest.install.node)
        parts.append(f"node {platform.node_major}" if fits
                     else f"node {python_wheels.NODE_WHEEL}")
    if manifest.install.python:
        parts.append(f"python {platform.python}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def layer_volume(manifest: AgentManifest, platform: python_wheels.SandboxPlatform) -> str:
    """`benchflow-agent-<name>-<version>-<key>`: the agent's layer for this platform."""
    version = re.sub(r"[^a-zA-Z0-9_.-]+", "-", manifest.version)
    return f"{LAYER_PREFIX}{manifest.name}-{version}-{layer_key(manifest, platform)}"[:200]


async def image_platform(sandbox: VolumeSandbox) -> python_wheels.SandboxPlatform:
    """What the sandbox's image offers (probed once per image id, in a scratch sandbox)."""
    image_id = await sandbox.snapshot_base()
    known = _platforms.get(image_id)
    if known is not None:
        return known
    path = get_settings().cache_dir / "platforms" / f"{re.sub(r'[^a-zA-Z0-9]+', '-', image_id)}.json"
    platform = await anyio.to_thread.run_sync(_read_platform, path)
    if platform is None:
        async with sandbox.scratch() as box:
            platform = await python_wheels.probe_platform(box)
        await anyio.to_thread.run_sync(_write_platform, path, platform)
    _platforms[image_id] = platform
    return platform


def _read_platform(path: Path) -> python_wheels.SandboxPlatform | None:
    try:
        data = json.loads(path.read_text())
        for key in ("libc_version", "python"):
            data[key] = tuple(data[key]) if data.get(key) else None
        return python_wheels.SandboxPlatform(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_platform(path: Path, platform: python_wheels.SandboxPlatform) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(platform)))
    tmp.replace(path)


def layered_drivers(sandbox: Sandbox, drivers: Sequence[object]) -> list[AcpAgentDriver]:
    """The drivers whose agents this sandbox gets as layers (none without `volumes`)."""
    if not sandbox.capabilities.volumes or not isinstance(sandbox, VolumeSandbox):
        return []
    found = {d.manifest.name: d for d in drivers
             if isinstance(d, AcpAgentDriver) and d.manifest.install.layer}
    return list(found.values())


async def prepare_layers(sandbox: Sandbox, drivers: Sequence[object], task: Task,
                         paths: RolloutPaths, timeout_multiplier: float = 1.0) -> LayerPlan:
    """Before `sandbox.start()`: fill the missing layers of the layered agents (at once)
    and mount every one read-only. A fill installs the agent as the rollout would, on a
    scratch sandbox, for `task` (its agent user, install timeout), logging to `paths`.

    Returns the layers mounted (none on a backend without volumes) and the platform.

    Raises:
        AgentInstallError, AgentInstallTimeout: an agent's install failed while filling its
            layer (its output is in the rollout's `setup/`).
        SandboxStartError: a scratch sandbox could not start.
    """
    layered = layered_drivers(sandbox, drivers)
    if not layered or sandbox.sandbox_id is not None:
        return LayerPlan()
    assert isinstance(sandbox, VolumeSandbox)
    platform = await image_platform(sandbox)
    layers: dict[str, AgentLayer] = {}

    def context(box: Sandbox) -> AgentContext:
        return AgentContext(sandbox=box, task=task, paths=paths, workdir=box.workdir,
                            agent_user=task.config.agent.user, instruction_path="",
                            timeout_multiplier=timeout_multiplier)

    async def ensure(driver: AcpAgentDriver) -> None:
        m = driver.manifest
        volume = layer_volume(m, platform)
        filled = False
        if not await sandbox.volume_ready(volume):
            log.info("installing %s %s into its layer %s", m.name, m.version, volume)

            async def fill(scratch: Sandbox) -> None:
                await driver.install(context(scratch))

            ttl = driver.install_timeout_sec(context(sandbox)) + _FILL_TTL_MARGIN_SEC
            filled = await sandbox.fill_volume(volume, m.sandbox_dir, fill, ttl_sec=ttl)
        layers[m.name] = AgentLayer(agent=m.name, volume=volume, target=m.sandbox_dir,
                                    filled=filled)

    failed: list[Exception] = []

    async def guarded(driver: AcpAgentDriver) -> None:
        try:
            await ensure(driver)
        except Exception as exc:  # noqa: BLE001 - the first failure is the rollout's error
            failed.append(exc)
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:  # missing layers fill side by side
        for driver in layered:
            tg.start_soon(guarded, driver)
    if failed:
        raise failed[0]
    for driver in layered:
        layer = layers[driver.manifest.name]
        sandbox.mount_volume(layer.volume, layer.target)
    return LayerPlan(tuple(layers[d.manifest.name] for d in layered), platform)


__all__ = ["LAYER_PREFIX", "AgentLayer", "LayerPlan", "image_platform", "layer_key", "layer_volume",
           "layered_drivers", "prepare_layers"]
