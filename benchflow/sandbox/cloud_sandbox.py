"""What the cloud backends' sandboxes (Daytona, Modal) share: the spec's certificates and
env, the cost meter, the cloud ledger, commands as another user, and uploads as one tar
unpacked in place. Each backend adds its SDK: create, exec, files, live processes.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, ClassVar

import anyio

from benchflow.errors import SandboxExecError
from benchflow.sandbox import archive, certs, ledger
from benchflow.sandbox.base import ExecResult, SandboxCapabilities
from benchflow.sandbox.cost import SandboxMeter
from benchflow.sandbox.labels import LABEL_ROLLOUT
from benchflow.sandbox.spec import SandboxSpec

INIT_STEPS = ("mkdir -p /logs/agent /logs/verifier /tmp/.benchflow", "chmod 777 /logs/agent",
              "chmod 700 /logs/verifier", "chmod 1777 /tmp/.benchflow")
"""benchflow's folders in a fresh sandbox (what the docker backend's image gets)."""


class CloudSandbox:
    """The common half of a cloud backend's sandbox. Subclasses set `backend` and
    `capabilities` and implement `exec`, `_write_file` (raw bytes to a path, its folder
    existing) and the SDK's create and stop."""

    backend: ClassVar[str]
    capabilities: ClassVar[SandboxCapabilities]

    def __init__(self, spec: SandboxSpec, config: Any, meter: SandboxMeter) -> None:
        self.spec = spec
        self.config = config
        self.meter = meter
        self.image: str | None = None
        self.workdir = spec.workdir or "/"
        self._box: Any = None
        self._pems = certs.read_certs(spec.extra_ca_certs)
        self._env = {**(certs.CA_ENV if self._pems else {}), **spec.env}

    @property
    def cost_usd(self) -> float | None:
        """The provider's charge for this sandbox so far (its lifetime at the configured
        rates)."""
        return self.meter.cost_usd

    def _record(self, event: Any, token: str, sandbox_id: str | None = None) -> None:
        ledger.record(self.spec.ledger_path, ledger.LedgerEntry(
            event=event, provider=self.backend, rollout=self.spec.labels.get(LABEL_ROLLOUT, ""),
            sandbox_id=sandbox_id, create_token=token))

    def _require(self) -> Any:
        if self._box is None:
            raise SandboxExecError("sandbox is not started")
        return self._box

    @staticmethod
    def _as_user(argv: list[str], user: str | None) -> list[str]:
        return argv if not user or user == "root" else ["runuser", "-u", user, "--", *argv]

    async def exec(self, cmd: Any, *, user: str | None = None, cwd: str | None = None,
                   env: Any = None, timeout: float | None = None) -> ExecResult:
        raise NotImplementedError

    async def _write_file(self, data: bytes, path: str) -> None:
        raise NotImplementedError

    async def upload(self, src: Path, dst: str) -> None:
        """A tar of `src` unpacked at `dst` (modes and folders kept)."""
        if not src.exists():
            raise SandboxExecError(f"upload source {src} does not exist")
        await self._upload_tar(await anyio.to_thread.run_sync(archive.tar_path, src, dst), dst)

    async def _upload_tar(self, data: bytes, what: str) -> None:
        """Unpack the tar `data` at / (as root: owners and modes as archived)."""
        self._require()
        tmp = f"/tmp/.benchflow/up-{secrets.token_hex(6)}.tar"
        await self._write_file(data, tmp)
        result = await self.exec(["sh", "-c", f"tar -xf {tmp} -C / ; rc=$?; rm -f {tmp}; exit $rc"],
                                 user="root")
        if not result.ok:
            raise SandboxExecError(f"upload to {what} failed: {result.text(2000)}")


__all__ = ["INIT_STEPS", "CloudSandbox"]
