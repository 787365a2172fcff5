"""Separate-verifier mode: score a copy of the workspace in a fresh container.

Nothing the agent did outside the workspace reaches the verifier: not its processes, not
a patched interpreter, not /etc/ld.so.preload, not a daemon a root agent left behind. The
workspace is downloaded from the agent's sandbox (symlinks leading outside it are dropped
on the way), copied into a new container of the same image, and verified there with the
same hardening, so that workspace-level injections (conftest.py, pytest.ini, shadowing
modules, .pyc files) are still restored or removed against the image's own state.

What a solution installed outside the workspace (packages, system files) does not come
along: use this mode for tasks whose answer lives in the workspace.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

from benchflow.errors import ConfigError
from benchflow.sandbox.base import Sandbox
from benchflow.task.models import HardeningConfig
from benchflow.verify.baseline import normalize_workspace, take_baseline
from benchflow.verify.hardening import HardenedOutcome, verify_hardened
from benchflow.verify.runner import VerifierRun

_STOP_TIMEOUT_SEC = 60.0


async def verify_in_fresh_sandbox(sandbox: Sandbox, run: VerifierRun, out_dir: Path,
                                  logs_dir: Path, *, workspace: str, config: HardeningConfig,
                                  pytest_plugins: Sequence[str] = (),
                                  labels: dict[str, str] | None = None) -> HardenedOutcome:
    """Verify a copy of `workspace` in a new sandbox (same backend) of `sandbox`'s image.

    The new container carries `sandbox`'s labels (plus `labels`) and is always removed.

    Raises:
        ConfigError: no workspace, or `sandbox` has no image yet.
        VerifierTampered, VerifierError and its subclasses: as `verify_hardened()`.
    """
    ws = normalize_workspace(workspace)
    if ws is None:
        raise ConfigError("separate-verifier mode needs a workspace (sandbox.workdir) other than /")
    if sandbox.image is None:
        raise ConfigError("separate-verifier mode needs the agent sandbox's image")
    spec = sandbox.spec.model_copy(update={
        "name": f"{sandbox.spec.name}-verify", "docker_image": sandbox.image,
        "environment_dir": None, "force_build": False,
        "labels": {**sandbox.spec.labels, **(labels or {})}})
    fresh = sandbox.fork(spec)
    fresh.image = sandbox.image
    with tempfile.TemporaryDirectory(prefix="bf-separate-") as tmp:
        copy = Path(tmp) / "workspace"
        await sandbox.download(ws, copy)
        try:
            await fresh.start()
            baseline = await take_baseline(fresh, workspace=ws, config=config)
            await fresh.exec(["sh", "-c", 'find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +',
                              "sh", ws], user="root", timeout=120)
            await fresh.upload(copy, ws)
            return await verify_hardened(fresh, run, out_dir, logs_dir, baseline=baseline,
                                         agent_user=None, config=config,
                                         pytest_plugins=pytest_plugins)
        finally:
            with anyio.move_on_after(_STOP_TIMEOUT_SEC, shield=True):
                await fresh.stop(delete=True)


__all__ = ["verify_in_fresh_sandbox"]
