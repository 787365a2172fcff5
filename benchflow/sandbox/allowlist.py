"""Outbound allowlists of cloud sandboxes under the `model-only` network policy.

A spec's `egress_allowlist` names hosts; backends take IP networks (CIDRs) for addresses
and domain allow lists for names (Modal's `outbound_domain_allowlist`, Daytona's
`domain_allow_list`), so a name keeps working when its addresses change.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass


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


__all__ = ["Allowlist", "split_hosts"]
