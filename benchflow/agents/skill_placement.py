"""Putting skills where an agent discovers them, inside the sandbox.

Every skill of a rollout is first staged under `/opt/benchflow/skills/<name>/` (host skills
uploaded, sandbox skills copied); before each session, the agent's skills folder
(`<home>/<manifest.skills_dir>`) is made to hold exactly that step's skills, root-owned
and read-only for the agent user. Its parent folders stay the agent user's, so the
agent's own configuration there remains writable.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable, Sequence
from pathlib import Path

from benchflow.errors import AgentInstallError
from benchflow.sandbox.base import SYSTEM_PATH, Sandbox
from benchflow.skills import Skill

SKILLS_STAGE = "/opt/benchflow/skills"
_SCRIPT = (Path(__file__).parent / "scripts" / "skills.sh").read_text()
_TIMEOUT_SEC = 120.0
log = logging.getLogger(__name__)


class SkillStage:
    """The skills staged in one rollout's sandbox, by name."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.names: set[str] = set()

    async def add_host(self, skills: Iterable[Skill]) -> None:
        """Upload host skill folders into the stage.

        Raises:
            AgentInstallError: the stage could not be written.
        """
        for skill in skills:
            dst = f"{SKILLS_STAGE}/{skill.name}"
            await self._root(["rm", "-rf", dst], f"replace staged skill {skill.name}")
            await self.sandbox.upload(skill.source, dst)
            self.names.add(skill.name)
            await self._root(["sh", "-c", _SCRIPT, "skills.sh", "seal", dst],
                             f"make staged skill {skill.name} read-only")

    async def add_sandbox_dir(self, folder: str) -> list[str]:
        """Stage each `<folder>/<name>/` holding a SKILL.md; returns their names (sorted)."""
        out = await self._root(["sh", "-c", _SCRIPT, "skills.sh", "stage", folder, SKILLS_STAGE],
                               f"stage skills of {folder}")
        names = sorted(line for line in out.splitlines() if line)
        self.names.update(names)
        return names

    async def place(self, *, user: str, home: str, skills_dir: str,
                    names: Sequence[str]) -> None:
        """Make `<home>/<skills_dir>` hold exactly `names` (each staged before).

        Raises:
            AgentInstallError: a copy failed or a name was never staged.
        """
        target = posixpath.join(home, skills_dir)
        parent = posixpath.dirname(target)
        made = await self.sandbox.exec(["mkdir", "-p", parent], user=user, timeout=_TIMEOUT_SEC,
                                       env={"PATH": SYSTEM_PATH})
        if not made.ok:
            raise AgentInstallError(f"cannot create {parent} as {user}: {made.text(500)}")
        await self._root(["sh", "-c", _SCRIPT, "skills.sh", "place", SKILLS_STAGE, target,
                          *names], f"place skills in {target}")

    async def _root(self, argv: list[str], what: str) -> str:
        result = await self.sandbox.exec(argv, user="root", timeout=_TIMEOUT_SEC,
                                         env={"PATH": SYSTEM_PATH})
        if not result.ok:
            raise AgentInstallError(f"skills: cannot {what}: {result.text(1000)}")
        return result.stdout.decode("utf-8", "replace")


__all__ = ["SKILLS_STAGE", "SkillStage"]
