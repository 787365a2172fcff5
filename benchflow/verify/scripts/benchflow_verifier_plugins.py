"""benchflow's pytest plugin loader for the hardened verifier (`-p benchflow_verifier_plugins`).

Hardening turns pytest's plugin autoload off, so no plugin the agent installed can load.
This module, placed by the pre-agent baseline in a root-owned folder put first on the
verifier's PYTHONPATH, brings back exactly the plugins the image installed: `plugins.txt`
next to it lists each `pytest11` module with the site folder it was recorded in (one line
per Python environment that has it: the system's, /usr/local's, a venv or tool environment
on PATH). A module is loaded (through `pytest_plugins`, never through entry points, which
the agent could add) only when this interpreter finds it in one of those folders. One found
elsewhere first on `sys.path` (shadowed by a file the agent wrote) or not found at all
(another interpreter's plugin) is left out.

It also loads the `pytest11` plugins of distributions installed during this verification
into `TOOLS` (what Terminal-Bench 2's `uvx -w pytest-json-ctrf pytest --ctrf ...` builds from
the package index): the folder is recreated empty and root-owned after the agent's processes
are gone, and uv and pip read no configuration there, so nothing in it is the agent's. Such
a plugin loads only from a `sys.path` entry inside `TOOLS` whose distribution and module are
root-owned and not writable by others, and only when its module resolves inside `TOOLS`.
"""

import configparser
import os
import sys
from importlib.machinery import PathFinder

_HERE = os.path.dirname(os.path.realpath(__file__))

TOOLS = "/var/lib/benchflow-tools"
"""benchflow.verify.baseline.VERIFIER_TOOLS_DIR"""


def _inside(path, root):
    return os.path.realpath(path).startswith(os.path.join(os.path.realpath(root), ""))


def _safe(path):
    """PATH and every folder above it are root-owned and not group/other-writable."""
    path = os.path.realpath(path)
    while True:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if st.st_uid != 0 or st.st_mode & 0o022:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _places(module):
    """Where this interpreter imports MODULE's top-level package from, first on sys.path."""
    spec = PathFinder.find_spec(module.split(".")[0], sys.path)
    if spec is None:
        return None
    return list(spec.submodule_search_locations or []) or [spec.origin or ""]


def _entry_points(dist):
    """The modules of the `pytest11` entry points of one .dist-info folder."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False)
    parser.optionxform = str
    try:
        parser.read(os.path.join(dist, "entry_points.txt"), encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return []
    if not parser.has_section("pytest11"):
        return []
    return [value.split(":")[0].strip() for _, value in parser.items("pytest11")]


def _installed(found):
    """Append to FOUND the pytest11 modules of distributions installed into TOOLS."""
    if not os.path.isdir(TOOLS) or not _safe(TOOLS):
        return
    for entry in list(sys.path):
        if not entry or not _inside(entry, TOOLS) or not os.path.isdir(entry):
            continue
        for name in sorted(os.listdir(entry)):
            dist = os.path.join(entry, name)
            if not name.endswith(".dist-info") or not os.path.isdir(dist):
                continue
            for module in _entry_points(dist):
                if not module or module in found:
                    continue
                places = _places(module)
                if places and all(p and _inside(p, TOOLS) and _safe(p) for p in places) \
                        and _safe(dist):
                    found.append(module)
                else:
                    sys.stderr.write(f"benchflow: pytest plugin {module} not loaded: found at "
                                     f"{places[0] if places else '?'}, not in {TOOLS}\n")


def _allowed():
    try:
        with open(os.path.join(_HERE, "plugins.txt"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    roots = {}  # module -> the site folders it was recorded in (one per environment)
    for line in lines:
        module, _, root = line.partition("\t")
        if module and root:
            roots.setdefault(module, []).append(root)
    found = []
    for module, folders in roots.items():
        places = _places(module)
        if places is None:
            continue  # not installed for this interpreter: another environment's plugin
        if places and any(all(p and _inside(p, root) for p in places) for root in folders):
            found.append(module)
        else:
            sys.stderr.write(f"benchflow: pytest plugin {module} not loaded: found at "
                             f"{places[0] if places else '?'}, not in {', '.join(folders)}\n")
    _installed(found)
    return found


pytest_plugins = _allowed()
