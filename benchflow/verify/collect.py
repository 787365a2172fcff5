"""Taking what the verifier needs out of the sandbox after the agent's turn, in Harbor's
order: collect hooks (`[[verifier.collect]]`) and artifacts of `main` (the agent's
sandbox) first; then, when the task names other compose services, optionally `main` is
stopped (a separate verifier's last use of the agent's sandbox: no process the agent left
can act while the services' evidence is taken), the services' hooks run and their
artifacts are copied out of their own file systems.

Best effort, as in Harbor: a hook that fails or times out, or an artifact that does not
exist, is a warning; the verifier decides what a missing file means. Every copy is
extracted safely (no path leaves its destination) and loses the symlinks that lead out of
it. What only the agent could not have written: a service's files, when no volume or host
folder writable in `main` holds them (otherwise a warning says so).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchflow.errors import BenchflowError, SandboxExecError
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, Sandbox, ServiceSandbox
from benchflow.task.collection import CollectionPass
from benchflow.task.models import MAIN_SERVICE, Artifact, CollectHook

log = logging.getLogger(__name__)

_OUTPUT_TAIL = 500


@dataclass
class Collected:
    """What a collection pass could not take, and what `result.json` should say about it."""

    missing: list[Artifact] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    """Symlinks dropped because they led out of their artifact, as `service:path`."""
    warnings: list[str] = field(default_factory=list)
    """Failed hooks, and artifacts `main` could write although a service holds them."""

    def extend(self, other: Collected) -> None:
        self.missing += other.missing
        self.dropped += other.dropped
        self.warnings += other.warnings


def drop_escaping_links(root: Path) -> list[Path]:
    """Delete every symlink in the host copy `root` (a file or a folder) whose target is not
    inside `root`; returns them.

    A carried-over file must not become a window onto the verifier's sandbox: a report
    that is a link to `/tests/expected.json` would be read by the tests as the answer.
    """
    links = [root] if root.is_symlink() else []
    if root.is_dir() and not root.is_symlink():
        links += [p for p in root.rglob("*") if p.is_symlink()]
    # Resolved through the copy itself: inside `root` the host copy has the sandbox's shape,
    # so a link through another link (`b -> .`, `c -> b/../x`) is judged where it really leads.
    base = os.path.realpath(root)
    dropped = []
    for link in links:
        resolved = os.path.realpath(link)
        if link == root or os.path.isabs(os.readlink(link)) or not (
                resolved == base or resolved.startswith(base + os.sep)):
            link.unlink()
            dropped.append(link)
    return dropped


def _dropped(source: str, kept: Path) -> list[str]:
    return [source + str(link)[len(str(kept)):] for link in drop_escaping_links(kept)]


async def collect_artifacts(sandbox: Sandbox, artifacts: Sequence[Artifact],
                            dest: Path) -> tuple[list[str], list[str]]:
    """Copy each artifact out of `sandbox` (main) into `dest/<kept_as>`.

    Returns the sources that did not exist (a missing artifact is not an error: the verifier
    decides what it means) and the symlinks dropped because they led out of their artifact
    (as sandbox paths).
    """
    missing, dropped = [], []
    for artifact in artifacts:
        exists = await sandbox.exec(["test", "-e", artifact.source], user="root", timeout=60,
                                    env={"PATH": SYSTEM_PATH})
        if not exists.ok:
            missing.append(artifact.source)
            continue
        kept = dest / artifact.kept_as
        await sandbox.download(artifact.source, kept)
        dropped += _dropped(artifact.source, kept)
    return missing, dropped


def _hook_warning(hook: CollectHook, problem: str) -> str:
    return (f"collect hook in service {hook.service!r} ({hook.command!r}) {problem}; the "
            "verifier ran with what it left")


async def _run_hook(sandbox: Sandbox, hook: CollectHook,
                    main_env: Mapping[str, str] | None) -> ExecResult:
    if hook.service == MAIN_SERVICE:
        return await sandbox.exec(["bash", "-c", hook.command], user=hook.user,
                                  cwd=sandbox.workdir, env=main_env, timeout=hook.timeout_sec)
    if not isinstance(sandbox, ServiceSandbox):
        raise SandboxExecError("this sandbox runs no compose services")
    return await sandbox.service_exec(hook.service, hook.command, user=hook.user,
                                      timeout=hook.timeout_sec)


async def run_hooks(sandbox: Sandbox, hooks: Sequence[CollectHook], *,
                    main_env: Mapping[str, str] | None = None) -> list[str]:
    """Run each hook in its service, in order; returns a warning per failed hook (never
    raises for a hook: Harbor's best effort). `main_env`: the environment of hooks in main
    (under hardening the verifier's fixed one, so no command the agent planted on PATH runs)."""
    warnings = []
    for hook in hooks:
        try:
            done = await _run_hook(sandbox, hook, main_env)
        except BenchflowError as exc:
            warnings.append(_hook_warning(hook, f"could not run: {exc}"))
            continue
        log.info("collect hook in %s (%s): exit %s%s", hook.service, hook.command,
                 done.exit_code, f"\n{done.text(_OUTPUT_TAIL)}" if done.text().strip() else "")
        if done.timed_out:
            warnings.append(_hook_warning(hook, f"timed out after {hook.timeout_sec:g} s"))
        elif not done.ok:
            warnings.append(_hook_warning(hook, f"exited with code {done.exit_code}"))
    return warnings


async def collect_main(sandbox: Sandbox, one: CollectionPass, dest: Path, *,
                       main_env: Mapping[str, str] | None = None) -> Collected:
    """Main's hooks, then main's artifacts into `dest`."""
    main = one.in_main()
    got = Collected(warnings=await run_hooks(sandbox, main.hooks, main_env=main_env))
    missing, dropped = await collect_artifacts(sandbox, main.artifacts, dest)
    got.missing += [a for a in main.artifacts if a.source in missing]
    got.dropped += dropped
    return got


async def collect_services(sandbox: Sandbox, one: CollectionPass, dest: Path, *,
                           stop_main: bool) -> Collected:
    """The other services' hooks, then their artifacts into `dest`; with `stop_main`, `main`
    is stopped first (when there is anything to take).

    Raises:
        SandboxExecError: `main` could not be stopped (what the services hold could still be
            changed by a process the agent left).
    """
    services = one.in_services()
    got = Collected()
    if not services.hooks and not services.artifacts:
        return got
    if not isinstance(sandbox, ServiceSandbox):
        got.warnings.append(f"the compose services {sorted(one.services)} are not running in "
                            "this sandbox; nothing was taken from them")
        got.missing += list(services.artifacts)
        return got
    if stop_main:
        await sandbox.stop_main()
        log.info("main stopped before taking evidence from %s", ", ".join(sorted(one.services)))
    got.warnings += await run_hooks(sandbox, services.hooks)
    for artifact in services.artifacts:
        service, kept = artifact.from_service, dest / artifact.kept_as
        try:
            found = await sandbox.service_download(service, artifact.source, kept)
        except BenchflowError as exc:
            log.warning("could not take %s from %s: %s", artifact.source, service, exc)
            found = False
        if not found:
            got.missing.append(artifact)
            continue
        got.dropped += [f"{service}:{p}" for p in _dropped(artifact.source, kept)]
        why = sandbox.main_can_write(service, artifact.source)
        if why is not None:
            got.warnings.append(f"artifact {artifact.source} from service {service!r}: {why}, "
                                "so the agent could have written it; the verifier should not "
                                "trust it more than main's files")
    return got


def missing_lines(missing: Sequence[Artifact], verifier: str) -> list[str]:
    """One `result.json` warning per artifact that did not exist where it was declared."""
    return [f"artifact {a.source} did not exist in "
            + ("the agent's sandbox" if a.from_service == MAIN_SERVICE
               else f"service {a.from_service!r}")
            + f"; {verifier} ran without it" for a in missing]


__all__ = ["Collected", "collect_artifacts", "collect_main", "collect_services",
           "drop_escaping_links", "missing_lines", "run_hooks"]
