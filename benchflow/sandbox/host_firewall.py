"""Host firewall rules that keep `model-only` sandboxes away from the host's other services.

Docker gives every bridge network, internal ones too, a gateway address on the host and
a default route to it. A container on an `--internal` network cannot reach the outside,
but it can reach every host address (the gateway, `docker0`, the host's own interfaces)
and so every host service listening on `0.0.0.0`. One iptables chain per model-only
network closes that: packets arriving from the network's bridge interface are accepted
only for the TCP ports of the model endpoints served to it, and refused otherwise.
Packets bound elsewhere (FORWARD) are refused too, rather than dropped by docker's
isolation rules: an agent's DNS lookup or connection then fails at once instead of
waiting for a timeout.

```text
INPUT    -i bf-mo-<hash> -j BF-MO-<hash>
FORWARD  -i bf-mo-<hash> -j BF-MO-<hash>
BF-MO-<hash>  -p tcp -d <gateway> --dport <model port> -j ACCEPT    (one per endpoint)
              -p tcp -j REJECT --reject-with tcp-reset
              -j REJECT                                             (icmp port unreachable)
```

Needs root and the `iptables` command on the Docker host (the host benchflow runs on).
Every call is a short blocking subprocess: call these from a worker thread.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

from benchflow.errors import SandboxStartError

log = logging.getLogger(__name__)

_TIMEOUT_SEC = 30.0
_HOOKS = ("INPUT", "FORWARD")


def available() -> str | None:
    """None when rules can be installed here, else why not (for the error message)."""
    if shutil.which("iptables") is None:
        return "the iptables command is not installed on this host"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "benchflow is not running as root, so it cannot add iptables rules"
    return None


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["iptables", "-w", *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_TIMEOUT_SEC,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxStartError(f"`{' '.join(argv)}` failed: {exc}") from exc
    if check and done.returncode != 0:
        raise SandboxStartError(f"`{' '.join(argv)}` failed (exit {done.returncode}): "
                                f"{done.stderr.strip()}")
    return done


def _has(*rule: str) -> bool:
    return _iptables("-C", *rule, check=False).returncode == 0


def install(chain: str, bridge: str) -> None:
    """Create (or reset) `chain`, refusing everything from `bridge`; hook it into INPUT
    and FORWARD.

    Raises:
        SandboxStartError: an iptables command failed.
    """
    if _iptables("-n", "-L", chain, check=False).returncode != 0:
        _iptables("-N", chain)
    _iptables("-F", chain)
    _iptables("-A", chain, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")
    _iptables("-A", chain, "-j", "REJECT")
    for hook in _HOOKS:
        if not _has(hook, "-i", bridge, "-j", chain):
            _iptables("-I", hook, "1", "-i", bridge, "-j", chain)


def installed(chain: str, bridge: str) -> bool:
    """Whether `chain` is hooked into INPUT or FORWARD for `bridge`."""
    return any(_has(hook, "-i", bridge, "-j", chain) for hook in _HOOKS)


def allow(chain: str, gateway: str, port: int) -> None:
    """Let the network reach `gateway:port` (TCP), the model endpoint.

    Raises:
        SandboxStartError: an iptables command failed.
    """
    rule = ("-p", "tcp", "-d", gateway, "--dport", str(port), "-j", "ACCEPT")
    if not _has(chain, *rule):
        _iptables("-I", chain, "1", *rule)


def revoke(chain: str, gateway: str, port: int) -> None:
    """Undo `allow` (a missing rule is fine). Never raises: logged instead."""
    rule = ("-p", "tcp", "-d", gateway, "--dport", str(port), "-j", "ACCEPT")
    try:
        while _has(chain, *rule):
            _iptables("-D", chain, *rule)
    except SandboxStartError as exc:
        log.warning("could not remove the firewall rule for port %s: %s", port, exc)


def remove(chain: str, bridge: str) -> None:
    """Unhook and delete `chain` (missing pieces are fine). Never raises: logged instead."""
    try:
        for hook in _HOOKS:
            while _has(hook, "-i", bridge, "-j", chain):
                _iptables("-D", hook, "-i", bridge, "-j", chain)
        if _iptables("-n", "-L", chain, check=False).returncode == 0:
            _iptables("-F", chain)
            _iptables("-X", chain)
    except SandboxStartError as exc:
        log.warning("could not remove the firewall chain %s: %s", chain, exc)


__all__ = ["allow", "available", "install", "installed", "remove", "revoke"]
