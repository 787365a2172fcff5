"""The daytona `SandboxProvider`: credentials, preflight, sandbox creation and cleanup."""

from __future__ import annotations

import importlib.util
from typing import Any

from benchflow.errors import ConfigError, SandboxTeardownError
from benchflow.sandbox.cloud import DaytonaCredentials as _DaytonaCredentials
from benchflow.sandbox.daytona.config import DaytonaConfig
from benchflow.sandbox.daytona.errors import map_daytona_errors
from benchflow.sandbox.daytona.sandbox import CAPABILITIES, DaytonaSandbox, client_factory
from benchflow.sandbox.labels import LABEL_MANAGED
from benchflow.sandbox.owner import CleanupReport, CleanupScope
from benchflow.sandbox.spec import SandboxSpec


class DaytonaSandboxProvider(_DaytonaCredentials):
    """Daytona sandboxes (credentials: `DAYTONA_API_KEY`; keys in `DaytonaConfig`)."""

    capabilities = CAPABILITIES
    config_model = DaytonaConfig

    def __init__(self, provider_config: dict[str, Any] | None = None) -> None:
        super().__init__(provider_config)
        try:
            self.config = DaytonaConfig.model_validate(self.provider_config)
        except ValueError as exc:
            raise ConfigError(f"provider_config for daytona: {exc}") from None

    async def preflight(self) -> None:
        missing = self.missing_credentials()
        if missing:
            raise ConfigError(f"{self.name} credentials missing: set {' and '.join(missing)}")
        if self.config.client_factory is None and importlib.util.find_spec("daytona") is None:
            raise ConfigError("the daytona SDK is not installed: pip install 'benchflow[daytona]'")

    def create(self, spec: SandboxSpec) -> DaytonaSandbox:
        return DaytonaSandbox(spec, self.config)

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        """Delete the leftover sandboxes labelled by benchflow (of `job_name`); their ids."""
        return (await self.sweep(CleanupScope(job_name=job_name))).removed

    async def sweep(self, scope: CleanupScope) -> CleanupReport:
        """Delete the sandboxes in `scope` whose owner lease allows it (see `CleanupScope`)."""
        import daytona

        client = client_factory(self.config)()
        report = CleanupReport()
        with map_daytona_errors(SandboxTeardownError):
            query = daytona.ListSandboxesQuery(labels={LABEL_MANAGED: "true"})
            async for box in client.list(query):
                labels = dict(box.labels or {})
                if not scope.matches(labels):
                    continue
                reason = scope.skip_reason(labels)
                if reason is not None:
                    report.skipped.append((str(box.id), reason))
                    continue
                await client.delete(box)
                report.removed.append(str(box.id))
        return report

    async def cleanup_ids(self, sandbox_ids: list[str]) -> list[str]:
        return await _delete_ids(client_factory(self.config)(), sandbox_ids)


async def _delete_ids(client: Any, sandbox_ids: list[str]) -> list[str]:
    import daytona

    removed = []
    with map_daytona_errors(SandboxTeardownError):
        for sandbox_id in sandbox_ids:
            try:
                await client.delete(await client.get(sandbox_id))
            except daytona.DaytonaNotFoundError:
                continue
            removed.append(sandbox_id)
    return removed


__all__ = ["DaytonaSandboxProvider"]
