"""The fixed environment the verifier runs in, whatever the agent left on disk.

The agent cannot set the verifier's environment, but it can write files that an
environment variable or a default search makes the verifier load: a trojan earlier on
PATH, a `sitecustomize.py` or `.pth` on the import path, `addopts` in a pytest.ini, a
plugin pytest discovers by entry point. `verifier_env()` pins every such variable; the
image's own pytest plugins (recorded before the agent ran) are loaded explicitly.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
from collections.abc import Mapping, Sequence

from benchflow.task.models import HardeningConfig
from benchflow.verify.baseline import DEFAULT_PATH, PLUGIN_LOADER, PLUGIN_LOADER_DIR, Baseline

log = logging.getLogger(__name__)

FIXED_KEYS = frozenset({
    "PATH", "PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONSTARTUP", "LD_PRELOAD", "LD_AUDIT",
    "BASH_ENV", "ENV", "HOME",
})
"""Variables `verifier_env()` sets; a task's own value for one of them is ignored."""


def pytest_addopts(*, workspace: str, verifier_dir: str, pytest_plugins: Sequence[str] = (),
                   image_plugins: bool = False) -> str:
    """PYTEST_ADDOPTS: no ini file, conftests only from the verifier folder down, no cache,
    and only the plugins the task declares plus, with `image_plugins`, the loader of the
    image's own plugins recorded in the baseline (auto-loading is off)."""
    args = ["-c", "/dev/null", f"--confcutdir={verifier_dir}", f"--rootdir={workspace}",
            "-p", "no:cacheprovider"]
    if image_plugins:
        args += ["-p", PLUGIN_LOADER]
    for plugin in pytest_plugins:
        args += ["-p", plugin]
    return shlex.join(args)


def _within(path: str, folder: str) -> bool:
    path = posixpath.normpath(path)
    return folder != "/" and (path == folder or path.startswith(folder + "/"))


def verifier_env(*, workspace: str | None, verifier_dir: str, task_env: Mapping[str, str],
                 pytest_plugins: Sequence[str] = (), config: HardeningConfig,
                 baseline: Baseline | None = None) -> dict[str, str]:
    """The environment of test.sh: the task's variables, then the fixed ones on top.

    PATH and PYTHONPATH are the image's, filtered at baseline time to folders that are
    root-owned and not group/other-writable up to `/` (PYTHONPATH also keeps workspace
    entries, as does a task's own PYTHONPATH; a task's PATH is ignored: put extra folders in
    the image's ENV). When the baseline recorded image plugins, PYTHONPATH starts with the
    root-owned loader folder and PYTEST_ADDOPTS loads the loader, which imports exactly
    those plugins from the site folder they were recorded in. With
    `config.fixed_verifier_env` off, `task_env` is returned as is.
    """
    env = dict(task_env)
    if not config.fixed_verifier_env:
        return env
    ws = workspace or "/"
    ignored = sorted(key for key in env if key in FIXED_KEYS and key != "PYTHONPATH")
    if ignored:
        log.warning("verifier env: the task's %s ignored (fixed_verifier_env is on)",
                    ", ".join(ignored))
    image_plugins = bool(baseline and baseline.pytest_plugins)
    pythonpath = [PLUGIN_LOADER_DIR] if image_plugins else []
    pythonpath += [p for p in (baseline.pythonpath if baseline else "").split(":") if p]
    for entry in env.get("PYTHONPATH", "").split(":"):
        if entry and workspace and _within(entry, workspace) and entry not in pythonpath:
            pythonpath.append(entry)
        elif entry and entry not in pythonpath:
            log.warning("verifier env: PYTHONPATH entry %r dropped (outside the workspace)", entry)
    fixed = {
        "PATH": (baseline.path if baseline and baseline.path else DEFAULT_PATH),
        "PYTHONPATH": ":".join(pythonpath),
        "PYTEST_ADDOPTS": pytest_addopts(workspace=ws, verifier_dir=verifier_dir,
                                         pytest_plugins=pytest_plugins,
                                         image_plugins=image_plugins),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONSTARTUP": "",
        "LD_PRELOAD": "",
        "LD_AUDIT": "",
        "BASH_ENV": "",
        "ENV": "",
        "HOME": "/root",
    }
    return {**env, **fixed}
