"""The modal `SandboxProvider`: preflight, sandboxes, and cleanup of leftovers."""

from __future__ import annotations

import importlib.util
import logging
import threading
from typing import Any

import anyio

from benchflow.errors import ConfigError, SandboxTeardownError
from benchflow.sandbox.cloud import ModalCredentials
from benchflow.sandbox.labels import LABEL_MANAGED
from benchflow.sandbox.modal.config import ModalConfig
from benchflow.sandbox.modal.errors import map_modal_errors
from benchflow.sandbox.modal.sandbox import CAPABILITIES, ModalSandbox, lookup_app, sdk
from benchflow.sandbox.owner import CleanupReport, CleanupScope
from benchflow.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)


class ModalSandboxProvider(ModalCredentials):
    """Modal sandboxes (credentials: `MODAL_TOKEN_ID` + `MODAL_TOKEN_SECRET` or
    `~/.modal.toml`; settings in `ModalConfig`)."""

    capabilities = CAPABILITIES
    config_model = ModalConfig

    def __init__(self, provider_config: dict[str, Any] | None = None) -> None:
        super().__init__(provider_config)
        try:
            self.config = ModalConfig.model_validate(self.provider_config)
        except ValueError as exc:
            raise ConfigError(f"provider_config for modal: {exc}") from None

    async def preflight(self) -> None:
        missing = self.missing_credentials()
        if missing:
            raise ConfigError(f"{self.name} credentials missing: set {' and '.join(missing)}")
        if importlib.util.find_spec(self.config.sdk_module.partition(".")[0]) is None:
            raise ConfigError("the modal SDK is not installed: pip install 'benchflow[modal]'")

    def create(self, spec: SandboxSpec) -> ModalSandbox:
        return ModalSandbox(spec, self.config)

    async def remove_snapshots(self, names: list[str]) -> list[str]:
        """Forget the snapshot names (Modal keeps image ids, unnamed, and collects unused
        ones itself)."""
        from benchflow.sandbox.modal.snapshots import SnapshotIndex

        index = SnapshotIndex(self.config)
        removed = [name for name in names if index.get(name) is not None]
        for name in removed:
            index.forget(name)
        return removed

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        """Terminate the leftover sandboxes of the app tagged by benchflow (of `job_name`)."""
        return (await self.sweep(CleanupScope(job_name=job_name))).removed

    async def sweep(self, scope: CleanupScope) -> CleanupReport:
        """Terminate the running sandboxes in `scope` whose owner lease allows it."""
        from modal import exception

        report = CleanupReport()
        with map_modal_errors(SandboxTeardownError):
            try:
                app = await lookup_app(self.config, create=False)
            except exception.NotFoundError:
                return report  # no app: nothing was ever made
            tags = {LABEL_MANAGED: "true"}
            if scope.job_name is not None and scope.job_id is None:
                from benchflow.sandbox.labels import LABEL_JOB

                tags[LABEL_JOB] = scope.job_name
            async for box in sdk(self.config).Sandbox.list.aio(app_id=app.app_id, tags=tags):
                labels = await box.get_tags.aio()
                if not scope.matches(labels):
                    continue
                reason = scope.skip_reason(labels)
                if reason is not None:
                    report.skipped.append((str(box.object_id), reason))
                    continue
                await box.terminate.aio()
                report.removed.append(str(box.object_id))
        return report

    async def cleanup_ids(self, sandbox_ids: list[str]) -> list[str]:
        """Terminate the sandboxes with these ids that still run; returns those."""
        from modal import exception

        removed = []
        with map_modal_errors(SandboxTeardownError):
            for sandbox_id in sandbox_ids:
                try:
                    box = await sdk(self.config).Sandbox.from_id.aio(sandbox_id)
                    if await box.poll.aio() is not None:
                        continue  # finished already
                    await box.terminate.aio()
                except exception.NotFoundError:
                    continue
                removed.append(sandbox_id)
        return removed

    def cleanup_now(self, job_name: str) -> list[str]:
        return self.sweep_now(CleanupScope(job_name=job_name)).removed

    def sweep_now(self, scope: CleanupScope) -> CleanupReport:
        """Blocking sweep while the process exits (a fresh event loop in a thread, at most
        30 s); never raises."""
        found = CleanupReport()

        def run() -> None:
            try:
                found.extend(anyio.run(self.sweep, scope))
            except Exception as exc:  # noqa: BLE001 - best effort on the way out
                log.warning("could not terminate the modal sandboxes of %s: %s",
                            scope.job_id or scope.job_name, exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(30)
        return found


__all__ = ["ModalSandboxProvider"]
