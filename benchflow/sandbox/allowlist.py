"""Outbound allowlists of cloud sandboxes under the `model-only` network policy.

A spec's `egress_allowlist` names hosts; a backend takes IP networks (CIDRs) and, where it
has them, domain names. Names are resolved when the sandbox is created: every address the
name has then is allowed, each as a single-address network.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import anyio.to_thread

from benchflow.errors import SandboxStartError


@dataclass(frozen=True)
class Allowlist:
    """Networks and domain names a sandbox may reach (nothing else)."""

    cidrs: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.cidrs and not self.domains


def _network(host: str) -> str | None:
    try:
        return ipaddress.ip_network(host.strip("[]"), strict=False).with_prefixlen
    except ValueError:
        return None


def split_hosts(hosts: Iterable[str]) -> Allowlist:
    """IP literals as networks, names as domains (for backends that take domain names)."""
    cidrs, domains = [], []
    for host in hosts:
        network = _network(host)
        (cidrs if network is not None else domains).append(network or host.lower())
    return Allowlist(tuple(dict.fromkeys(cidrs)), tuple(dict.fromkeys(domains)))


async def resolve_hosts(hosts: Iterable[str]) -> Allowlist:
    """Every host as networks only: names resolved to their current addresses.

    Raises:
        SandboxStartError: a name does not resolve (retryable only when the resolver said
            "try again").
    """
    split = split_hosts(hosts)
    cidrs = list(split.cidrs)
    for name in split.domains:
        try:
            infos = await anyio.to_thread.run_sync(socket.getaddrinfo, name, None)
        except socket.gaierror as exc:
            raise SandboxStartError(f"model-only: the endpoint host {name!r} does not "
                                    f"resolve ({exc}): check --model-base-url",
                                    transient=exc.errno == socket.EAI_AGAIN) from None
        cidrs += [ipaddress.ip_network(info[4][0]).with_prefixlen for info in infos]
    return Allowlist(tuple(dict.fromkeys(cidrs)))


__all__ = ["Allowlist", "resolve_hosts", "split_hosts"]
