"""What a rollout injects that is a secret, gathered for its one `Redactor`.

A rollout hands credentials to its sandbox and agents: the task's and MCP servers' env
templates resolved from the host, every role's env under a secret-looking name (a job
file's `${VAR}` values, the model endpoint's key or a per-role token), a command agent's
env, an http agent's headers. `rollout_redactor` collects them (with the host's secret
variables) so that everything the rollout writes is masked by one redactor: live
(trajectory lines, rollout.log, error text, result.json) and, as it ends, every file of
its folder (`mask_folder`: the agent's output, downloaded /logs, captured model calls).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from benchflow.agents.base import AgentDriver
from benchflow.agents.command import CommandAgent
from benchflow.agents.http import HttpAgent
from benchflow.config import Scene
from benchflow.rollout.secrets import Redactor, secret_values

_LIVE_FILES = ("rollout.log", "result.json")
"""Masked as they are written (rollout.log is still open when the folder is masked)."""


def rollout_redactor(secrets: Iterable[str], scenes: Iterable[Scene],
                     drivers: Mapping[str, AgentDriver]) -> Redactor:
    """The redactor of one rollout: `secrets` (task and MCP env values from the host), the
    secret-named env values of every role and command agent, every http agent header
    value, and the host's secret variables."""
    values = set(secrets)
    for scene in scenes:
        for role in scene.roles:
            values |= secret_values(role.env)
    for driver in drivers.values():
        if isinstance(driver, CommandAgent):
            values |= secret_values(driver.env)
        elif isinstance(driver, HttpAgent):  # any header may be a credential
            values |= {v for v in driver.headers.values() if v}
    return Redactor(values)


def mask_folder(redactor: Redactor, root: Path) -> list[Path]:
    """Mask the redactor's values in every file of a rollout's folder but those masked as
    they are written; returns the files that changed. Blocks: call in a worker thread."""
    return redactor.tree(root, skip=_LIVE_FILES)


__all__ = ["mask_folder", "rollout_redactor"]
