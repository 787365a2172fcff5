"""Outbound allowlists enforced for real on the SDK fakes' local containers.

Cloud sandboxes take an outbound allowlist (Modal's `outbound_cidr_allowlist` and
`outbound_domain_allowlist`, Daytona's `network_allow_list`); the fakes apply it with
iptables inside the container's network namespace, entered from the host (`nsenter`), so
nothing in the container can undo it: loopback and replies stay open, the allowed
networks are accepted, everything else is rejected at once. Names are resolved here,
when the rule is made.
"""

from __future__ import annotations

import ipaddress
import socket
import subprocess
from collections.abc import Sequence
from typing import Any


def _networks(cidrs: Sequence[str], domains: Sequence[str]) -> list[ipaddress.IPv4Network
                                                                    | ipaddress.IPv6Network]:
    networks = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    for name in domains:
        networks += [ipaddress.ip_network(info[4][0])
                     for info in socket.getaddrinfo(name, None)]
    return networks


def restrict_egress(container: Any, cidrs: Sequence[str] = (),
                    domains: Sequence[str] = ()) -> None:
    """Allow `container` to reach only `cidrs` and `domains` (plus loopback and replies)."""
    container.reload()
    pid = container.attrs["State"]["Pid"]
    networks = _networks(cidrs, domains)
    for tool, version in (("iptables", 4), ("ip6tables", 6)):
        rules = [["-F", "OUTPUT"], ["-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"],
                 ["-A", "OUTPUT", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED",
                  "-j", "ACCEPT"]]
        rules += [["-A", "OUTPUT", "-d", str(n), "-j", "ACCEPT"]
                  for n in networks if n.version == version]
        rules.append(["-A", "OUTPUT", "-j", "REJECT"])
        for rule in rules:
            subprocess.run(["nsenter", "-t", str(pid), "-n", tool, "-w", *rule],
                           check=True, capture_output=True, timeout=30)


__all__ = ["restrict_egress"]
