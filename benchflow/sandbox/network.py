"""Network policies of docker sandboxes: `public`, `none` and `model-only`.

| policy | the sandbox reaches |
|---|---|
| `public` | what docker's default bridge reaches (the default) |
| `none` | nothing: no interface but loopback (`network_mode="none"`, or every network disconnected) |
| `model-only` | only the model endpoint: an internal network whose gateway serves it |

`model-only` attaches the container to `benchflow-model-only-<hash>`, an `internal` docker
network (no route out, no inter-container traffic) labelled `benchflow.managed=true`. The
host holds the network's gateway address, so the model endpoint listens there, and a host
firewall chain (`host_firewall`) refuses every other port of the host from that network.
One network serves every rollout of a job in this process (reference-counted); the last
release removes it with its firewall chain, and `benchflow sandbox cleanup` removes what a
crashed run left.

A rollout whose agent install needs the network (npm) starts its container on the public
bridge and calls `isolate()` before the agent runs; otherwise the container is created with
its policy (`SandboxSpec.network_policy`).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

from benchflow.errors import ConfigError, SandboxStartError, SandboxTeardownError
from benchflow.sandbox import host_firewall
from benchflow.sandbox.base import PolicySandbox
from benchflow.sandbox.docker.errors import docker_call, docker_client
from benchflow.sandbox.labels import LABEL_JOB, LABEL_MANAGED
from benchflow.sandbox.owner import LABEL_JOB_ID, LABEL_OWNER, CleanupReport, CleanupScope, Owner
from benchflow.sandbox.spec import NetworkPolicy

log = logging.getLogger(__name__)

NETWORK_POLICIES: tuple[NetworkPolicy, ...] = ("public", "none", "model-only")
MODEL_ONLY_PREFIX = "benchflow-model-only-"
LABEL_NETWORK_POLICY = "benchflow.network-policy"
LABEL_FIREWALL_CHAIN = "benchflow.firewall-chain"
LABEL_BRIDGE = "benchflow.bridge"

_SIOCGIFADDR = 0x8915
_lock = threading.Lock()
_refs: dict[str, int] = {}


@dataclass(frozen=True)
class ModelOnlyNetwork:
    """An internal docker network and the host side of it: gateway, bridge, firewall chain."""

    name: str
    gateway: str
    bridge: str
    chain: str


def model_only_names(key: str) -> tuple[str, str, str]:
    """(network, bridge interface, firewall chain) names for `key` (the job instance id)."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"{MODEL_ONLY_PREFIX}{digest[:12]}", f"bf-mo-{digest[:9]}", f"BF-MO-{digest[:12]}"


def _interface_ipv4(name: str) -> str | None:
    """The IPv4 address of the host interface `name` (Linux), else None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR,
                                 struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(packed[20:24])


def _gateway(network: Any) -> str:
    for config in network.attrs.get("IPAM", {}).get("Config") or []:
        gateway = config.get("Gateway")
        if gateway and ":" not in gateway:
            return str(gateway)
    # docker's default bridge records no gateway: it is the address of its interface
    bridge = (network.attrs.get("Options") or {}).get("com.docker.network.bridge.name")
    address = _interface_ipv4(bridge) if bridge else None
    if address:
        return address
    raise SandboxStartError(f"docker network {network.name} has no IPv4 gateway on this host")


def _acquire(key: str) -> ModelOnlyNetwork:
    import docker.errors  # here: a run without this policy needs no SDK to start a sandbox

    reason = host_firewall.available()
    if reason is not None:
        raise ConfigError(
            f"the model-only network policy needs a host firewall rule and {reason}; run "
            "benchflow as root on the Docker host, or use --network public")
    client = docker_client()
    name, bridge, chain = model_only_names(key)
    with _lock:
        try:
            network = client.networks.get(name)
            fresh = False
        except docker.errors.NotFound:
            try:
                network = client.networks.create(
                    name, driver="bridge", internal=True, check_duplicate=True,
                    labels={LABEL_MANAGED: "true", LABEL_JOB: key, LABEL_JOB_ID: key,
                            LABEL_OWNER: Owner.current().label(),
                            LABEL_NETWORK_POLICY: "model-only", LABEL_FIREWALL_CHAIN: chain,
                            LABEL_BRIDGE: bridge},
                    options={"com.docker.network.bridge.name": bridge,
                             "com.docker.network.bridge.enable_icc": "false"})
            except docker.errors.APIError as exc:  # created meanwhile by another process
                if exc.status_code != 409:
                    raise
                network = client.networks.get(name)
            network.reload()
            fresh = True
        gateway = _gateway(network)
        if fresh or not _refs.get(name):
            host_firewall.install(chain, bridge)
        _refs[name] = _refs.get(name, 0) + 1
    log.info("model-only network %s (gateway %s, bridge %s)", name, gateway, bridge)
    return ModelOnlyNetwork(name=name, gateway=gateway, bridge=bridge, chain=chain)


async def acquire_model_only_network(key: str) -> ModelOnlyNetwork:
    """Create, or reuse, the model-only network for `key` (the job name) and its firewall.

    Raises:
        ConfigError: the host firewall cannot be set up here (not root, no iptables).
        SandboxStartError: docker or iptables failed.
    """
    return await docker_call(_acquire, key, error=SandboxStartError)


def _release(network: ModelOnlyNetwork) -> None:
    with _lock:
        left = _refs.get(network.name, 1) - 1
        _refs[network.name] = max(left, 0)
        if left > 0:
            return
        _refs.pop(network.name, None)
        _remove_network(network.name, network.chain, network.bridge)


def _remove_network(name: str, chain: str | None, bridge: str | None) -> bool:
    import docker.errors

    try:
        docker_client().networks.get(name).remove()
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:  # still in use (by another process): keep it
        log.warning("could not remove network %s: %s", name, exc.explanation or exc)
        return False
    if chain and bridge:
        host_firewall.remove(chain, bridge)
    return True


async def release_model_only_network(network: ModelOnlyNetwork) -> None:
    """Drop one reference; the last one removes the network and its firewall chain."""
    await docker_call(_release, network, error=SandboxTeardownError)


async def allow_endpoint(network: ModelOnlyNetwork, port: int) -> None:
    """Let sandboxes on `network` reach `gateway:port` (a model endpoint on the host)."""
    await docker_call(host_firewall.allow, network.chain, network.gateway, port,
                error=SandboxStartError)


async def revoke_endpoint(network: ModelOnlyNetwork, port: int) -> None:
    """Undo `allow_endpoint` (never raises)."""
    await docker_call(host_firewall.revoke, network.chain, network.gateway, port,
                error=SandboxTeardownError)


async def network_gateway(name: str | None) -> str:
    """The host's address on docker network `name` (default: the default bridge), where a
    model endpoint listens for `public` sandboxes.

    Raises:
        SandboxStartError: no such network, or it has no IPv4 gateway.
    """
    network = await docker_call(docker_client().networks.get, name or "bridge",
                          error=SandboxStartError)
    return _gateway(network)


async def isolate(sandbox: PolicySandbox, policy: NetworkPolicy,
                  network: ModelOnlyNetwork | None = None) -> None:
    """Move a running sandbox to `policy`: `none` disconnects every network (loopback
    stays); `model-only` attaches `network` and disconnects the rest; `public` does nothing.

    Raises:
        SandboxStartError: docker refused.
    """
    if policy == "public" or sandbox.sandbox_id is None:
        return
    target = network.name if network is not None else None
    await sandbox.apply_network_policy(policy, target)
    log.info("sandbox isolated: %s%s", policy, f" ({target})" if target else "")


def _sweep(scope: CleanupScope) -> CleanupReport:
    client = docker_client()
    labels = [f"{LABEL_MANAGED}=true", f"{LABEL_NETWORK_POLICY}=model-only"]
    report = CleanupReport()
    for network in client.networks.list(filters={"label": labels}):
        net_labels = network.attrs.get("Labels") or {}
        if not scope.matches(net_labels):
            continue
        reason = scope.skip_reason(net_labels)
        with _lock:
            if _refs.get(network.name):
                continue  # in use by this process
            if reason is not None:
                report.skipped.append((network.name, reason))
            elif _remove_network(network.name, net_labels.get(LABEL_FIREWALL_CHAIN),
                                 net_labels.get(LABEL_BRIDGE)):
                report.removed.append(network.name)
    return report


async def sweep_networks(scope: CleanupScope) -> CleanupReport:
    """Remove the leftover model-only networks in `scope` and their firewall chains; a
    network whose owner still runs is kept (and reported) unless the scope forces it."""
    return await docker_call(_sweep, scope, error=SandboxTeardownError)


async def cleanup_networks(scope: CleanupScope | str | None = None) -> list[str]:
    """Remove benchflow's leftover model-only networks (of one job: its id or name)."""
    if not isinstance(scope, CleanupScope):
        scope = CleanupScope(job_name=scope)
    return (await sweep_networks(scope)).removed


__all__ = [
    "MODEL_ONLY_PREFIX",
    "NETWORK_POLICIES",
    "ModelOnlyNetwork",
    "NetworkPolicy",
    "acquire_model_only_network",
    "allow_endpoint",
    "cleanup_networks",
    "isolate",
    "model_only_names",
    "network_gateway",
    "release_model_only_network",
    "revoke_endpoint",
    "sweep_networks",
]
