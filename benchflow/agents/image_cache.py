"""Installed agents cached as Docker images, so later rollouts skip the install.

Installing the JS agents takes tens of seconds and hundreds of MB. After a rollout has
installed its ACP agents (and before any agent ran), its container is committed as
`benchflow-agent/<agents>:<key>`, the key hashing the task image's id, each agent's
manifest folder (so its version and install script) and the extra CA certificates. A
later rollout of the same task and agents starts from that image; its install then takes
every fast path (the user exists, node is there, the npm marker matches).

The rollout calls two functions around its phases (docker backend only; a no-op for
others, for built-in agents and when the cache is off):

```python
plan = await prepare_agent_image(sandbox, agent_names)   # before sandbox.start()
await sandbox.start()
...                                                      # driver.install(ctx) for each agent
await commit_agent_image(sandbox, plan)                  # after every install succeeded,
                                                         # before the first connect()
```

Remove cached images with `docker image rm $(docker images -q 'benchflow-agent/*')`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from benchflow.agents.catalog import load_catalog
from benchflow.agents.manifest import AgentManifest
from benchflow.errors import ConfigError, SandboxError
from benchflow.sandbox import certs, images
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.docker import (
    LABEL_JOB,
    LABEL_MANAGED,
    LABEL_ROLLOUT,
    DockerSandbox,
    docker_client,
    map_docker_errors,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

CACHE_REPOSITORY = "benchflow-agent"
LABEL_AGENT_CACHE = "benchflow.agent-cache"
_CACHE_RECIPE_VERSION = "1"


@dataclass(frozen=True)
class AgentImagePlan:
    """The cached image for one rollout's agents: its tag, and whether it already existed."""

    tag: str
    hit: bool
    base_image: str


def cache_tag(base_image_id: str, manifests: Sequence[AgentManifest], ca_digest: str = "") -> str:
    """`benchflow-agent/<names>:<16 hex>` for these agents on that base image."""
    ordered = sorted(manifests, key=lambda m: m.name)
    digest = hashlib.sha256(f"{_CACHE_RECIPE_VERSION}\0{base_image_id}\0{ca_digest}".encode())
    for manifest in ordered:
        digest.update(f"\0{manifest.name}\0{manifest.digest()}".encode())
    names = re.sub(r"[^a-z0-9_.-]+", "-", "_".join(m.name for m in ordered)) or "agents"
    return f"{CACHE_REPOSITORY}/{names[:100]}:{digest.hexdigest()[:16]}"


def _manifests(agent_names: Sequence[str]) -> list[AgentManifest]:
    catalog = load_catalog()
    found: dict[str, AgentManifest] = {}
    for name in agent_names:
        canonical = catalog.resolve(name)
        if canonical is not None and canonical in catalog.manifests:
            found[canonical] = catalog.manifests[canonical]
    return list(found.values())


async def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    with map_docker_errors():
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


async def prepare_agent_image(sandbox: Sandbox, agent_names: Sequence[str]
                              ) -> AgentImagePlan | None:
    """Before `sandbox.start()`: build or pull the task image, and when an image with these
    agents installed on it is cached, make the sandbox start from it.

    Returns None when there is nothing to cache (not a docker sandbox, already started,
    no ACP agent). Never fails the rollout for a cache problem: that is logged, and the
    rollout installs as usual. Image build errors of the task image itself propagate.
    """
    if not isinstance(sandbox, DockerSandbox) or sandbox.container_id is not None:
        return None
    manifests = _manifests(agent_names)
    if not manifests:
        return None
    base = sandbox.image or await sandbox.prepare_image()
    try:
        client = docker_client()
        base_id = (await _run(client.images.get, base)).id
        pems = certs.read_certs(sandbox.spec.extra_ca_certs)
        tag = cache_tag(base_id, manifests, certs.certs_digest(pems) if pems else "")
        hit = await _run(images.image_exists, client, tag)
    except (SandboxError, ConfigError) as exc:
        log.warning("agent image cache unavailable: %s", exc)
        return None
    if hit:
        log.info("starting from cached agent image %s", tag)
        sandbox.image = tag
    return AgentImagePlan(tag=tag, hit=hit, base_image=base)


async def commit_agent_image(sandbox: Sandbox, plan: AgentImagePlan | None) -> bool:
    """After every agent's install succeeded (and before any agent ran): commit the
    container as the plan's image. Returns whether an image was written; a failure to
    commit is logged, never raised."""
    if plan is None or plan.hit or not isinstance(sandbox, DockerSandbox):
        return False
    if sandbox.container_id is None:
        return False
    repository, _, tag = plan.tag.rpartition(":")
    try:
        container = await _run(docker_client().containers.get, sandbox.container_id)
        await _run(container.commit, repository=repository, tag=tag,
                   message=f"benchflow: agents installed on {plan.base_image}",
                   changes=[f"LABEL {LABEL_JOB}= {LABEL_ROLLOUT}="],
                   conf={"Labels": {LABEL_MANAGED: "true", LABEL_AGENT_CACHE: plan.base_image}})
    except SandboxError as exc:
        log.warning("could not cache the installed agents as %s: %s", plan.tag, exc)
        return False
    log.info("cached installed agents as %s", plan.tag)
    return True


__all__ = [
    "CACHE_REPOSITORY",
    "LABEL_AGENT_CACHE",
    "AgentImagePlan",
    "cache_tag",
    "commit_agent_image",
    "prepare_agent_image",
]
