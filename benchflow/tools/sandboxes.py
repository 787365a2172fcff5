"""The Docker sandbox a tool session's `code` and `vm` tools run in.

One sandbox per session and resource type, started on first use from the resource's
`image` (a pre-built image) or its default Dockerfile (`benchflow/tools/images/<type>/`,
built once and cached by content), with the network off unless the resource's
`allow_internet` is true; stopped (and removed) when the session closes. Nothing here
knows the backend: it is `environment` of the resource's settings (default docker).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.factory import create_sandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings
from benchflow.tools.session import ToolSession

IMAGES = Path(__file__).parent / "images"
LABEL_TOOL_SESSION = "benchflow.tool-session"


class SessionSandbox:
    """A started sandbox owned by a session (closed with it)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    async def aclose(self) -> None:
        await self.sandbox.stop(delete=True)


async def session_sandbox(session: ToolSession, resource_type: str,
                          init: Any = None) -> Sandbox:
    """The session's sandbox for `resource_type`, started (and `init`ed) on first use."""

    async def start() -> SessionSandbox:
        config = session.config(resource_type)
        image = config.get("image")
        labels = {LABEL_TOOL_SESSION: session.id, **{str(k): str(v) for k, v in
                                                      dict(config.get("labels", {})).items()}}
        spec = SandboxSpec(
            name=f"bf-tools-{resource_type}",
            environment_dir=None if image else IMAGES / resource_type,
            docker_image=image, workdir=config.get("workdir", "/workspace"),
            cpus=float(config.get("cpus", 1.0)), memory_mb=int(config.get("memory_mb", 1024)),
            labels=labels, extra_ca_certs=get_settings().extra_ca_certs,
            network_policy="public" if config.get("allow_internet") else "none")
        sandbox = create_sandbox(str(config.get("environment", "docker")), spec)
        owned = SessionSandbox(sandbox)
        try:
            await sandbox.start()
            if init is not None:
                await init(sandbox, config)
        except BaseException:
            await owned.aclose()
            raise
        return owned

    owned: SessionSandbox = await session.shared(f"sandbox:{resource_type}", start)
    return owned.sandbox


__all__ = ["IMAGES", "LABEL_TOOL_SESSION", "SessionSandbox", "session_sandbox"]
