"""Installed agents cached as sandbox snapshots (Docker images, Modal filesystem snapshots), so
later rollouts skip the install.

On a backend with volumes (docker), agents whose manifest says `install.layer` are cached
one by one instead (`layers.py`: a volume per agent, mounted into any pairing); what is
below is for the others, and for every agent on backends with snapshots only (Modal).

Installing the JS agents takes tens of seconds and hundreds of MB. After a rollout has
installed its ACP agents (and before any agent ran), its container is committed as
`benchflow-agent/<agents>:<key>`, the key hashing the task image's id, each agent's
manifest folder (so its version and install script) and the extra CA certificates. A
later rollout of the same task and agents starts from that image; its install then takes
every fast path (the user exists, node is there, the npm marker matches).

The rollout calls two functions around its phases (a no-op on backends without the
`snapshots` capability, where agents are installed in every rollout, for built-in agents
and when the cache is off); `result.json`'s `agent_install_cache` says which happened:

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

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from benchflow.agents.layers import AgentLayer
from benchflow.errors import ConfigError, SandboxError
from benchflow.sandbox import certs
from benchflow.sandbox.base import Sandbox, SnapshotSandbox

if TYPE_CHECKING:
    from benchflow.agents.manifest import AgentManifest

log = logging.getLogger(__name__)

CACHE_REPOSITORY = "benchflow-agent"
_CACHE_RECIPE_VERSION = "1"


AgentInstallCache = Literal["hit", "saved", "installed"]
"""What the agent install cache did in a rollout (`RolloutResult.agent_install_cache`):
started from a snapshot with the agents installed, installed them and saved a snapshot,
or installed them without a snapshot (the backend has none, the cache is off or failed)."""


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


def _manifests(agent_names: Sequence[str], layered: bool = False) -> list[AgentManifest]:
    """The manifests of the registered agents among `agent_names`; with `layered`, those
    cached as layers (`layers.py`) are left out."""
    return [m for m in _registered(agent_names) if not (layered and m.install.layer)]


def _registered(agent_names: Sequence[str]) -> list[AgentManifest]:
    from benchflow.agents.registry import BUILTIN_AGENTS

    agent_names = [n for n in agent_names if n not in BUILTIN_AGENTS]  # as get_driver does
    if not agent_names:  # built-in agents only: no catalog to read
        return []
    from benchflow.agents.catalog import load_catalog

    catalog = load_catalog()
    found: dict[str, AgentManifest] = {}
    for name in agent_names:
        canonical = catalog.resolve(name)
        if canonical is not None and canonical in catalog.manifests:
            found[canonical] = catalog.manifests[canonical]
    return list(found.values())


async def prepare_agent_image(sandbox: Sandbox, agent_names: Sequence[str]
                              ) -> AgentImagePlan | None:
    """Before `sandbox.start()`: prepare the task image, and when a snapshot with these
    agents installed on it exists, make the sandbox start from it.

    Returns None when there is nothing to cache (no snapshot capability, already started,
    no ACP agent). Never fails the rollout for a cache problem: that is logged, and the
    rollout installs as usual. Image build errors of the task image itself propagate.
    """
    if (not sandbox.capabilities.snapshots or not isinstance(sandbox, SnapshotSandbox)
            or sandbox.sandbox_id is not None):
        return None
    manifests = _manifests(agent_names, layered=sandbox.capabilities.volumes)
    if not manifests:
        return None
    base_id = await sandbox.snapshot_base()
    base = sandbox.image or base_id
    try:
        pems = certs.read_certs(sandbox.spec.extra_ca_certs)
        tag = cache_tag(base_id, manifests, certs.certs_digest(pems) if pems else "")
        hit = await sandbox.snapshot_exists(tag)
    except (SandboxError, ConfigError) as exc:
        log.warning("agent image cache unavailable: %s", exc)
        return None
    if hit:
        log.info("starting from cached agent image %s", tag)
        sandbox.start_from_snapshot(tag)
    return AgentImagePlan(tag=tag, hit=hit, base_image=base)


async def commit_agent_image(sandbox: Sandbox, plan: AgentImagePlan | None) -> bool:
    """After every agent's install succeeded (and before any agent ran): save the sandbox
    as the plan's snapshot. Returns whether one was written; a failure is logged, never
    raised."""
    if plan is None or plan.hit or not isinstance(sandbox, SnapshotSandbox):
        return False
    if sandbox.sandbox_id is None:
        return False
    try:
        await sandbox.save_snapshot(plan.tag, f"benchflow: agents installed on {plan.base_image}")
    except SandboxError as exc:
        log.warning("could not cache the installed agents as %s: %s", plan.tag, exc)
        return False
    log.info("cached installed agents as %s", plan.tag)
    return True


def install_cache_outcome(plan: AgentImagePlan | None, saved: bool,
                          layers: Sequence[AgentLayer] = ()) -> AgentInstallCache:
    """What to record once the registered agents are installed (see `AgentInstallCache`):
    `installed` when any was installed without being cached, else `saved` when any was
    cached now (a snapshot saved, a layer filled), else `hit`."""
    if (plan is None and not layers) or (plan is not None and not plan.hit and not saved):
        return "installed"
    if saved or any(layer.filled for layer in layers):
        return "saved"
    return "hit"


__all__ = [
    "CACHE_REPOSITORY",
    "AgentImagePlan",
    "AgentInstallCache",
    "cache_tag",
    "commit_agent_image",
    "install_cache_outcome",
    "prepare_agent_image",
]
