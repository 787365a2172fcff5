"""Describe the image's Python for baseline.sh: its library folders and guarded module names.

baseline.sh runs this text as `python3 -I -S -c TEXT ROOTS_FILE MODULES_FILE`, as root and
before the agent starts. ROOTS_FILE receives the folders Python imports from (site-packages,
the standard library, lib-dynload), one per line, whether or not they exist yet: a root agent
could create one. MODULES_FILE receives the top-level module names a file the agent adds to
the workspace or a site folder must not shadow: the standard library and the test runners.
"""

import os
import pkgutil
import site
import sys

TOOLS = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "sitecustomize", "usercustomize")


def main(roots_file: str, modules_file: str) -> None:
    roots: list[str] = []
    for path in [*site.getsitepackages(), *sys.path]:
        if path and os.path.isabs(path) and not path.endswith(".zip") and path not in roots:
            roots.append(path)
    stdlib = os.path.dirname(os.__file__)
    names = set(getattr(sys, "stdlib_module_names", ()))
    if not names:  # Python < 3.10
        names = {m.name for m in pkgutil.iter_modules([stdlib])}
    names |= set(sys.builtin_module_names) | set(TOOLS)
    names.discard("test")  # the CPython regression suite; a workspace's own test/ is common
    with open(roots_file, "w") as out:
        out.writelines(f"{r}\n" for r in roots)
    with open(modules_file, "w") as out:
        out.writelines(f"{n}\n" for n in sorted(names))


main(sys.argv[1], sys.argv[2])
