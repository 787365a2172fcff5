"""benchflow's pytest plugin loader for the hardened verifier (`-p benchflow_verifier_plugins`).

Hardening turns pytest's plugin autoload off, so no plugin the agent installed can load.
This module, placed by the pre-agent baseline in a root-owned folder put first on the
verifier's PYTHONPATH, brings back exactly the plugins the image installed: `plugins.txt`
next to it lists each `pytest11` module with the site folder it was recorded in. A module
is loaded (through `pytest_plugins`, never through entry points, which the agent could add)
only when this interpreter finds it in that folder. One found elsewhere first on `sys.path`
(shadowed by a file the agent wrote) or not found at all (another interpreter) is left out.
"""

import os
import sys
from importlib.machinery import PathFinder

_HERE = os.path.dirname(os.path.realpath(__file__))


def _inside(path, root):
    return os.path.realpath(path).startswith(os.path.join(os.path.realpath(root), ""))


def _allowed():
    try:
        with open(os.path.join(_HERE, "plugins.txt"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        module, _, root = line.partition("\t")
        if not module or not root or module in found:
            continue
        spec = PathFinder.find_spec(module.split(".")[0], sys.path)
        if spec is None:
            continue
        places = list(spec.submodule_search_locations or []) or [spec.origin or ""]
        if places and all(p and _inside(p, root) for p in places):
            found.append(module)
        else:
            sys.stderr.write(f"benchflow: pytest plugin {module} not loaded: found at "
                             f"{places[0] if places else '?'}, not in {root}\n")
    return found


pytest_plugins = _allowed()
