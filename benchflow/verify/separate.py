"""Separate verifier environments: the tests run in a fresh sandbox the agent never touched.

After the agent finishes, the task's collect hooks run and its declared `artifacts` (from
`main`, then, with `main` stopped, from the other compose services: `verify/collect.py`)
and the agent sandbox's `/logs` are copied out (kept under the rollout's `artifacts/`), a
new sandbox is started from the verifier's own image (its `tests/Dockerfile`, a
`[verifier.environment] docker_image`, or else the task's environment), `/logs` is
restored and the artifacts are put back at their paths, and test.sh runs there. Nothing the agent did reaches the verifier except what
the task chose to carry over: not its processes, not a patched interpreter, not a planted
reward file, not a symlink in a carried-over folder leading to the verifier's own files
(such links are dropped). This is benchflow's strongest verification mode (Terminal-Bench 3
requires it).

With hardening on, the fresh sandbox's own state is the baseline: a carried-over file that
plants a conftest.py, a .pth or a pytest plugin is restored or removed as in the shared mode.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchflow.sandbox.base import SYSTEM_PATH, Sandbox
from benchflow.sandbox.factory import create_sandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.task.collection import CollectionPass
from benchflow.task.models import Artifact, CollectHook, HardeningConfig
from benchflow.verify.baseline import named_tools, take_baseline
from benchflow.verify.collect import (
    collect_artifacts,
    collect_main,
    collect_services,
    drop_escaping_links,
    missing_lines,
)
from benchflow.verify.hardening import verify_hardened
from benchflow.verify.runner import VerifierOutcome, VerifierRun, verify

log = logging.getLogger(__name__)

_STOP_TIMEOUT_SEC = 60.0
_LOGS = "/logs"


@dataclass(frozen=True)
class SeparateVerifier:
    """Where a separate verifier runs and what it is given."""

    environment: str
    """The sandbox backend (the rollout's)."""
    spec: SandboxSpec
    """The verifier sandbox: its image, resources and labels."""
    artifacts: Sequence[Artifact]
    artifacts_dir: Path
    """Host folder the artifacts are kept in (`<rollout>/artifacts/`, per step for steps)."""
    hooks: Sequence[CollectHook] = ()
    """Collect hooks run before the artifacts are taken (Harbor's `[[verifier.collect]]`)."""
    stop_main: bool = True
    """Stop the agent's `main` before taking the other services' evidence (Harbor: when the
    agent's sandbox has no further use, i.e. not before a later step)."""
    provider_config: Mapping[str, Any] = field(default_factory=dict)
    """The rollout's `provider_config` (the backend's settings apply to this sandbox too)."""
    image_holds_tests: bool = False
    """The image is the verifier's own (a tests/Dockerfile or a declared docker_image): Harbor
    runs the test.sh the image holds instead of uploading the task's, so one should be there."""


async def _harbor_test_script(fresh: Sandbox, mount: str) -> list[str]:
    """A warning when the verifier's own image has no test.sh: benchflow uploads the task's
    tests anyway, but Harbor would run the image's and find none (reward file missing)."""
    script = f"{mount}/test.sh"
    found = await fresh.exec(["test", "-f", script], user="root", timeout=60,
                             env={"PATH": SYSTEM_PATH})
    if found.ok:
        return []
    line = (f"the verifier's image has no {script}: benchflow uploaded the task's tests, but "
            "Harbor runs the image's own tests when it builds the verifier from tests/Dockerfile "
            f"or a [verifier.environment] docker_image, and fails there; COPY them to {mount}/ "
            "in that image")
    log.warning("%s", line)
    return [line]


def _named_tools(verifier_dir: Path) -> tuple[str, ...]:
    try:
        return named_tools([(verifier_dir / "test.sh").read_text(errors="replace")])
    except OSError:
        return ()


def _clear_artifact_paths(logs_copy: Path, artifacts: Sequence[Artifact]) -> None:
    """Drop from the carried-over /logs whatever a declared artifact puts back: the agent's
    /logs never stands in for (or adds to) a file a service holds."""
    for artifact in artifacts:
        rel = os.path.relpath(artifact.source, _LOGS)
        if rel == ".":
            shutil.rmtree(logs_copy, ignore_errors=True)
        elif not rel.startswith(".."):
            target = logs_copy / rel
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()


async def verify_separately(agent_sandbox: Sandbox, verifier: SeparateVerifier,
                            run: VerifierRun, out_dir: Path, logs_dir: Path, *,
                            hardened: bool, config: HardeningConfig,
                            pytest_plugins: Sequence[str] = (),
                            main_env: Mapping[str, str] | None = None,
                            ) -> tuple[VerifierOutcome, list[str]]:
    """Collect (hooks, artifacts from main and from the other services), carry it and /logs
    over to a fresh verifier sandbox and verify there.

    Returns the outcome and the warnings for `result.json`: a failed collect hook, a declared
    artifact that did not exist, a symlink dropped because it led out of what is carried
    over. The verifier sandbox is always removed.

    Raises:
        SandboxError: the verifier sandbox did not build or start; `main` could not be
            stopped before the services' evidence was taken.
        VerifierTampered, VerifierError and its subclasses: as the shared verify.
    """
    one = CollectionPass(tuple(verifier.hooks), tuple(verifier.artifacts))
    got = await collect_main(agent_sandbox, one, verifier.artifacts_dir, main_env=main_env)
    fresh = create_sandbox(verifier.environment, verifier.spec, dict(verifier.provider_config))
    with tempfile.TemporaryDirectory(prefix="bf-separate-") as tmp:
        logs_copy = Path(tmp) / "logs"
        await agent_sandbox.download(_LOGS, logs_copy)
        got.dropped += [_LOGS + str(link)[len(str(logs_copy)):]
                        for link in drop_escaping_links(logs_copy)]
        got.extend(await collect_services(agent_sandbox, one, verifier.artifacts_dir,
                                          stop_main=verifier.stop_main))
        _clear_artifact_paths(logs_copy, verifier.artifacts)
        warnings = got.warnings + missing_lines(got.missing, "the separate verifier")
        warnings += [f"{path} is a symlink leading out of what is carried over; the separate "
                     "verifier ran without it" for path in got.dropped]
        for line in warnings:
            log.warning("%s", line)
        try:
            await fresh.start()
            if verifier.image_holds_tests:
                warnings += await _harbor_test_script(fresh, run.mount)
            baseline = (await take_baseline(fresh, workspace=fresh.workdir, config=config,
                                            named=_named_tools(run.verifier_dir))
                        if hardened else None)
            # /logs first: a declared artifact (a service's file) is put back over it
            for child in sorted(logs_copy.iterdir()) if logs_copy.is_dir() else []:
                if child.name != "verifier":
                    await fresh.upload(child, f"{_LOGS}/{child.name}")
            for artifact in verifier.artifacts:
                kept = verifier.artifacts_dir / artifact.kept_as
                if artifact not in got.missing and kept.exists():
                    await fresh.upload(kept, artifact.source)
            run = dataclasses.replace(run, cwd=fresh.workdir)
            if baseline is not None:
                done = await verify_hardened(fresh, run, out_dir, logs_dir, baseline=baseline,
                                             agent_user=None, config=config,
                                             pytest_plugins=pytest_plugins)
                return done.outcome, warnings
            return await verify(fresh, run, logs_dir), warnings
        finally:
            with anyio.move_on_after(_STOP_TIMEOUT_SEC, shield=True):
                await fresh.stop(delete=True)


__all__ = ["SeparateVerifier", "collect_artifacts", "drop_escaping_links",
           "verify_separately"]
