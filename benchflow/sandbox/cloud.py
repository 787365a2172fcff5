"""Cloud providers' credential checks.

`_CloudProvider.missing_credentials` names the variables to set; a provider without its own
adapter fails preflight and `create` with a `ConfigError` before anything starts. Daytona's
adapter (`benchflow.sandbox.daytona`) builds on `DaytonaCredentials`, Modal's
(`benchflow.sandbox.modal`) on `ModalCredentials`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from benchflow.errors import ConfigError
from benchflow.sandbox.base import Sandbox, SandboxCapabilities
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import host_env

_NOTHING = SandboxCapabilities(live_processes=False, root_exec=False, gpus=False,
                               snapshots=False, network_policies=frozenset({"public"}))


class _CloudProvider(SandboxProvider):
    capabilities = _NOTHING
    credential_sets: ClassVar[Sequence[Sequence[str]]]
    """Alternative sets of variables; any complete set is enough."""
    config_file: ClassVar[Path | None] = None

    def missing_credentials(self) -> list[str]:
        """The variables of the first set to set (empty when some set is complete)."""
        if self.config_file is not None and self.config_file.expanduser().is_file():
            return []
        for names in self.credential_sets:
            if all(host_env(n) for n in names):
                return []
        return [n for n in self.credential_sets[0] if not host_env(n)]

    def _unavailable(self) -> ConfigError:
        return ConfigError(f"the {self.name} sandbox backend is registered but its adapter is "
                           "not implemented in this version of benchflow: use --env docker")

    async def preflight(self) -> None:
        missing = self.missing_credentials()
        if missing:
            raise ConfigError(f"{self.name} credentials missing: set {' and '.join(missing)}")
        raise self._unavailable()

    def create(self, spec: SandboxSpec) -> Sandbox:
        raise self._unavailable()

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        raise self._unavailable()


class DaytonaCredentials(_CloudProvider):
    """Daytona credentials (`DAYTONA_API_KEY`, or `DAYTONA_JWT_TOKEN` with `DAYTONA_ORGANIZATION_ID`)."""

    name = "daytona"
    credential_sets = (("DAYTONA_API_KEY",), ("DAYTONA_JWT_TOKEN", "DAYTONA_ORGANIZATION_ID"))


class ModalCredentials(_CloudProvider):
    """Modal credentials: `MODAL_TOKEN_ID` and `MODAL_TOKEN_SECRET`, or the profile file the
    SDK reads (`MODAL_CONFIG_PATH`, default `~/.modal.toml`, written by `modal token set`)."""

    name = "modal"
    credential_sets = (("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"),)

    def missing_credentials(self) -> list[str]:
        config_file = Path(host_env("MODAL_CONFIG_PATH") or "~/.modal.toml").expanduser()
        if config_file.is_file():
            return []
        return super().missing_credentials()


__all__ = ["DaytonaCredentials", "ModalCredentials"]
