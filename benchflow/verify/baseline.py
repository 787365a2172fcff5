"""The pre-agent baseline that hardening compares the sandbox against before the final verify.

`take_baseline()` runs once per rollout, after the agent is installed and before its first
turn. In one root exec it records, into a root-only folder of the sandbox: the processes
alive (later ones are the agent's), signatures and a copy of the workspace's build, test and
import-hook files, signatures of the interpreter's folders, the PATH folders and
/etc/ld.so.preload, and the image's own pytest plugins (`pytest11` distributions whose files
are root-owned and not user-writable) with the sha256 of their files. The plugins are read
from every Python environment the verifier could run pytest in: each python on the image's
PATH (kept to root-owned folders outside the workspace), the interpreter of each pytest
script there (a venv, a uv or pipx tool environment), and the interpreters the task's
test.sh names by absolute path (`named_tools()`). A signature holds the entry's ctime, which
user space cannot set, so any write, chmod, rename or replacement shows. Python keeps the
baseline's digest: `harden()` refuses a baseline that changed.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import Field

from benchflow._models import FrozenModel
from benchflow.sandbox.base import Sandbox
from benchflow.task import Task
from benchflow.task.models import HardeningConfig
from benchflow.verify._scripts import resource_text, run_script, script_text

BASELINE_DIR = "/var/lib/benchflow"
"""Where the baseline lives in the sandbox: root-owned, mode 0700."""

PLUGIN_LOADER_DIR = "/var/lib/benchflow-pytest"
"""Root-owned, world-readable: the module `-p benchflow_verifier_plugins` imports and the list
of the image's pytest plugins it loads (checked against the baseline's sha256 sums)."""

PLUGIN_LOADER = "benchflow_verifier_plugins"

VERIFIER_TOOLS_DIR = "/var/lib/benchflow-tools"
"""Where uv and pip build the verifier's tools during a verification (`tool_env()`):
`seal()` deletes and recreates it root-owned (0755) after the agent's processes are gone,
right before test.sh, so everything in it was installed from the package index by the
verifier itself. The loader trusts the `pytest11` plugins of distributions installed
there (the same path is written in benchflow_verifier_plugins.py)."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Baseline(FrozenModel):
    """What `take_baseline()` recorded; `harden()` and `verifier_env()` read it."""

    dir: str = BASELINE_DIR
    workspace: str | None = None
    """The workspace that was recorded; None when there is none (workdir `/`)."""
    digest: str = ""
    """The sha256 of each saved file and the stamp's ctime and inode, on one line; harden.sh
    refuses a baseline whose digest changed."""
    supported: bool = True
    """False when the image has no GNU find: only kill, env and log reset can run."""
    path: str = DEFAULT_PATH
    """The image's PATH, keeping only folders (and parents) root-owned and not group/other-writable."""
    pythonpath: str = ""
    """The image's PYTHONPATH, filtered the same way (workspace entries are kept)."""
    python: str | None = None
    interpreters: tuple[str, ...] = ()
    """The interpreters whose environments' pytest plugins were recorded (see the module)."""
    watched_dirs: tuple[str, ...] = ()
    """Python and /etc folders watched recursively."""
    n_workspace_files: int = 0
    n_system_entries: int = 0
    n_processes: int = 0
    pytest_plugin_dists: tuple[str, ...] = ()
    """Every distribution declaring `pytest11` entry points in the Python folders."""
    pytest_plugins: tuple[str, ...] = ()
    """The image's trusted plugin modules (root-owned, not user-writable, files digested):
    the hardened verifier loads exactly these, through `PLUGIN_LOADER`."""
    pytest_plugins_untrusted: tuple[str, ...] = ()
    """Plugin distributions left out, with why (e.g. a file the agent user could write)."""
    duration_sec: float = Field(default=0.0, ge=0)


def normalize_workspace(workspace: str | None) -> str | None:
    """An absolute, normalized workspace, or None for none (`/`, empty)."""
    if not workspace:
        return None
    norm = posixpath.normpath(workspace)
    if not norm.startswith("/") or norm == "/":
        return None
    return norm


_NAMED_TOOL = re.compile(
    r"(?<![\w.$/-])(/(?:[\w.+@-]+/)*bin)/(python[0-9.]*|pytest|py\.test|activate)(?![\w.-])")


def named_tools(scripts: Iterable[str]) -> tuple[str, ...]:
    """The interpreters and bin folders a task's verifier scripts name by absolute path
    (`/opt/venv/bin/pytest`, `/opt/venv/bin/python -m pytest`, `. /opt/venv/bin/activate`),
    so that the baseline also records the plugins of an environment not on the image's PATH.
    Only what the task itself wrote (the agent cannot edit it) is read."""
    found: dict[str, None] = {}
    for text in scripts:
        for match in _NAMED_TOOL.finditer(text):
            folder, name = match.groups()
            found[folder if name == "activate" else f"{folder}/{name}"] = None
    return tuple(found)


def task_named_tools(task: Task) -> tuple[str, ...]:
    """`named_tools()` of the task's test.sh files (the task's and each step's)."""
    folders = [task.verifier_dir, *(s.verifier_dir for s in task.steps if s.verifier_dir)]
    texts = []
    for folder in folders:
        try:
            texts.append((folder / "test.sh").read_text(errors="replace"))
        except OSError:
            continue
    return named_tools(texts)


BASELINE_TIMEOUT_SEC = 120.0
SCRUB_TIMEOUT_SEC = 300.0
"""baseline.sh's time, and what a git scrub in the same exec adds to it."""


async def take_baseline(sandbox: Sandbox, *, workspace: str | None,
                        config: HardeningConfig | None = None,
                        timeout: float = BASELINE_TIMEOUT_SEC,
                        named: Sequence[str] = (), scrub_git: bool = False) -> Baseline:
    """Record the pre-agent state hardening restores and checks against (one root exec).

    Call it after the agent is installed and its user created, right before the agent's
    first turn. `config` is accepted for symmetry; the baseline is always complete so that
    any combination of steps can run later. `named`: interpreters, pytest scripts or bin
    folders the task names (`named_tools()`), probed for plugins besides those on PATH.
    `scrub_git`: first, in the same exec, `scrub_git_history()` of the workspace (one round
    trip for both).

    Raises:
        VerifierError: the script failed (e.g. the sandbox cannot run commands as root).
    """
    del config
    ws = normalize_workspace(workspace)
    started = time.monotonic()
    # baseline.sh runs scrub_git.sh itself, first, when the workspace holds a repository
    args = baseline_args(ws, named=named, scrub_git=scrub_git)
    # The image's PATH, as baseline.sh records it: no agent has run yet.
    _, data = await run_script(sandbox, "baseline.sh", *args,
                               timeout=baseline_timeout(args, timeout), image_path=True)
    return baseline_from(data, ws, time.monotonic() - started)


def baseline_args(ws: str | None, *, named: Sequence[str], scrub_git: bool) -> list[str]:
    """baseline.sh's arguments (`ws` normalized; scrub_git.sh's text 6th, "" for none)."""
    scrub = script_text("scrub_git.sh") if scrub_git and ws is not None else ""
    return [BASELINE_DIR, ws or "/", resource_text("pyinfo.py"),
            resource_text(f"{PLUGIN_LOADER}.py"), PLUGIN_LOADER_DIR, scrub, *named]


def baseline_timeout(args: Sequence[str], timeout: float = BASELINE_TIMEOUT_SEC) -> float:
    """The time baseline.sh gets with `args` (`baseline_args`): more with a git scrub."""
    return timeout + (SCRUB_TIMEOUT_SEC if args[5] else 0)


def baseline_from(data: dict[str, Any], ws: str | None, duration: float) -> Baseline:
    """The `Baseline` of baseline.sh's JSON line (`ws`: the workspace it was given)."""
    return Baseline(
        dir=BASELINE_DIR,
        workspace=ws if data.get("workspace") else None,
        digest=str(data["digest"]),
        supported=bool(data.get("supported")),
        path=str(data.get("path") or DEFAULT_PATH),
        pythonpath=str(data.get("pythonpath") or ""),
        python=data.get("python") or None,
        interpreters=tuple(data.get("interpreters") or ()),
        watched_dirs=tuple(data.get("watched_dirs") or ()),
        n_workspace_files=int(data.get("n_workspace_files") or 0),
        n_system_entries=int(data.get("n_system_entries") or 0),
        n_processes=int(data.get("n_processes") or 0),
        pytest_plugin_dists=tuple(data.get("pytest_plugin_dists") or ()),
        pytest_plugins=tuple(data.get("pytest_plugins") or ()),
        pytest_plugins_untrusted=tuple(data.get("pytest_plugins_untrusted") or ()),
        duration_sec=duration,
    )


async def scrub_git_history(sandbox: Sandbox, *, workspace: str | None,
                            timeout: float = SCRUB_TIMEOUT_SEC) -> bool:
    """Keep only HEAD's history in the workspace repository, before the agent starts.

    Deletes every other ref (branches, tags, remotes, stash), expires reflogs and drops
    unreachable objects, so a solution committed later, on another branch or left in the
    reflog cannot be recovered. On by default (`verifier.hardening.scrub_git_history`); tasks
    that need their branches turn it off. Returns whether a
    repository was scrubbed (False: none at the workspace root, or no git in the image).

    Raises:
        VerifierError: git failed on the repository.
    """
    ws = normalize_workspace(workspace)
    if ws is None:
        return False
    _, data = await run_script(sandbox, "scrub_git.sh", ws, timeout=timeout)
    return bool(data.get("scrubbed"))
