"""The fixed environment the verifier runs in, whatever the agent left on disk.

The agent cannot set the verifier's environment, but it can write files that an
environment variable or a default search makes the verifier load: a trojan earlier on
PATH, a `sitecustomize.py` or `.pth` on the import path, `addopts` in a pytest.ini, a
plugin pytest discovers by entry point, a uv or pip configuration, cache or managed
Python that a verifier installing its tools at verify time (Terminal-Bench 2's
`uvx -w pytest-json-ctrf pytest --ctrf ...`) would use. `verifier_env()` pins every such
variable: uv and pip read no configuration file and build into `VERIFIER_TOOLS_DIR`, which
`seal()` recreates root-owned right before test.sh. The image's own pytest plugins
(recorded before the agent ran) and those of distributions installed into that folder
during the verification are loaded explicitly, by `benchflow_verifier_plugins`.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
from collections.abc import Mapping, Sequence

from benchflow.task.models import HardeningConfig
from benchflow.verify.baseline import (
    DEFAULT_PATH,
    PLUGIN_LOADER,
    PLUGIN_LOADER_DIR,
    VERIFIER_TOOLS_DIR,
    Baseline,
)

log = logging.getLogger(__name__)

FIXED_KEYS = frozenset({
    "PATH", "PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONSTARTUP", "LD_PRELOAD", "LD_AUDIT",
    "BASH_ENV", "ENV", "HOME",
})
"""Variables `verifier_env()` sets; a task's own value for one of them is ignored."""


def tool_env(tools_dir: str = VERIFIER_TOOLS_DIR) -> dict[str, str]:
    """uv and pip as the verifier runs them: no configuration file is read (a `uv.toml` or
    `pip.conf` the agent planted could name another index, wheels or cache), and every cache,
    tool environment and managed Python is built anew under `tools_dir`, a folder only
    root can write that `seal()` recreates before test.sh. So `uvx` installs from the
    package index (through the image's CA variables, which stay as they are). A task's own
    `[verifier.env]` value for one of these wins (the agent cannot edit the task): e.g.
    `UV_CACHE_DIR` for a cache the image filled for offline verification; plugins installed
    outside `tools_dir` are then loaded only when the task declares them."""
    return {
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": f"{tools_dir}/uv-cache",
        "UV_TOOL_DIR": f"{tools_dir}/uv-tools",
        "UV_PYTHON_INSTALL_DIR": f"{tools_dir}/uv-python",
        "PIP_CONFIG_FILE": "/dev/null",
        "PIP_CACHE_DIR": f"{tools_dir}/pip-cache",
    }


def pytest_addopts(*, workspace: str, verifier_dir: str, pytest_plugins: Sequence[str] = (),
                   loader: bool = False) -> str:
    """PYTEST_ADDOPTS: no ini file, conftests only from the verifier folder down, no cache,
    and only the plugins the task declares plus, with `loader`, the loader of the
    image's own plugins recorded in the baseline and of those installed into
    `VERIFIER_TOOLS_DIR` during the verification (auto-loading is off)."""
    args = ["-c", "/dev/null", f"--confcutdir={verifier_dir}", f"--rootdir={workspace}",
            "-p", "no:cacheprovider"]
    if loader:
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
    the image's ENV). With a baseline, PYTHONPATH starts with the root-owned loader folder
    the baseline wrote and PYTEST_ADDOPTS loads the loader, which imports exactly the
    image's plugins from the site folder they were recorded in, and the `pytest11` plugins
    of distributions found on `sys.path` inside `VERIFIER_TOOLS_DIR` (what `uvx -w ...`
    installed there during this verification). uv and pip get `tool_env()`, under the
    task's own values. With
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
    loader = baseline is not None
    pythonpath = [PLUGIN_LOADER_DIR] if loader else []
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
                                         loader=loader),
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
    return {**tool_env(), **env, **fixed}
