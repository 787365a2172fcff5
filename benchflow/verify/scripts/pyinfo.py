"""Describe the image's Python for baseline.sh: its library folders, guarded module names and
the pytest plugins the image installed.

baseline.sh runs this text as `PYTHON -I -S -c TEXT ROOTS_FILE MODULES_FILE PLUGINS_FILE
SUMS_FILE [PYTHONPATH]`, as root and before the agent starts, once for each interpreter the
verifier could run pytest with (each python on the safe PATH, the interpreter of each pytest
script there, those the task names). `-S` skips `site`, so a virtual environment (a venv,
a uv or pipx tool environment: a `pyvenv.cfg` next to or above the interpreter, as
`site.venv()` finds it) is recognized here and its site-packages read, with the base
installation's when it includes the system site-packages. PYTHONPATH is the image's,
filtered to folders the agent cannot write. Each file gets its lines appended, once all
is known (an interpreter that cannot run this text, a Python 2, appends nothing: one
process, no temporary files to copy). ROOTS_FILE receives the folders Python
imports from (site-packages, the standard library, lib-dynload), one per line, whether or
not they exist yet: a root agent could create one. MODULES_FILE receives the top-level
module names a file the agent adds to the workspace or a site folder must not shadow: the
standard library, the test runners and the installed pytest plugins. PLUGINS_FILE receives
one line per `pytest11` entry point of a distribution whose files are all root-owned and not
group/other-writable (up to `/`): `module<TAB>site folder<TAB>distribution folder`; an
untrusted one is written as `!<TAB>distribution folder<TAB>why`. SUMS_FILE receives the
sha256 of every file of the trusted ones, in `sha256sum -c` format.
"""

import configparser
import hashlib
import os
import pkgutil
import site
import sys

TOOLS = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments",
         "exceptiongroup", "tomli", "colorama", "_virtualenv", "_distutils_hack", "sitecustomize",
         "usercustomize", "benchflow_verifier_plugins")
"""The test runner and what it imports at startup (also in an environment uvx builds)."""
MAX_FILES = 5000


def safe(path, checked):
    """PATH and every folder above it are root-owned and not group/other-writable."""
    while True:
        if path in checked:
            ok = checked[path]
        else:
            try:
                st = os.lstat(path)
                ok = st.st_uid == 0 and not st.st_mode & 0o022
            except OSError:
                ok = False
            checked[path] = ok
        if not ok:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def entry_points(dist_dir):
    """The `pytest11` entry points of one .dist-info/.egg-info folder: [(name, module)]."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None, strict=False)
    parser.optionxform = str
    try:
        parser.read(os.path.join(dist_dir, "entry_points.txt"), encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return []
    if not parser.has_section("pytest11"):
        return []
    return [(name, value.split(":")[0].strip()) for name, value in parser.items("pytest11")]


def dist_files(root, dist_dir, modules):
    """The files of a distribution inside ROOT: its RECORD (or installed-files.txt), its
    metadata folder and the top-level packages its plugins live in."""
    files = set()
    record = os.path.join(dist_dir, "RECORD")
    listing = os.path.join(dist_dir, "installed-files.txt")
    if os.path.isfile(record):
        with open(record, encoding="utf-8", errors="replace") as f:
            names = [line.split(",")[0] for line in f if line.strip()]
        files.update(os.path.normpath(os.path.join(root, n)) for n in names)
    elif os.path.isfile(listing):
        with open(listing, encoding="utf-8", errors="replace") as f:
            files.update(os.path.normpath(os.path.join(dist_dir, n.strip())) for n in f if n.strip())
    for name in os.listdir(dist_dir):
        files.add(os.path.join(dist_dir, name))
    for module in modules:
        top = os.path.join(root, module.split(".")[0])
        if os.path.isfile(top + ".py"):
            files.add(top + ".py")
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files.update(os.path.join(folder, n) for n in names if not n.endswith((".pyc", ".pyo")))
    inside = os.path.join(os.path.realpath(root), "")
    return sorted(f for f in files if os.path.isfile(f) and not os.path.islink(f)
                  and os.path.realpath(f).startswith(inside)
                  and not any(c in f for c in "\n\r\t\\"))


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def plugins(roots, plugins_file, sums_file):
    """Record the trusted pytest11 plugins (see the module docstring); their module names."""
    checked = {}
    names = set()
    lines, sums = [], []
    for root in roots:
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith((".dist-info", ".egg-info")) or any(c in entry for c in "\n\r\t"):
                continue
            dist_dir = os.path.join(root, entry)
            eps = entry_points(dist_dir) if os.path.isdir(dist_dir) else []
            if not eps:
                continue
            modules = [m for _, m in eps]
            files = dist_files(root, dist_dir, modules)
            bad = next((f for f in [dist_dir, *files] if not safe(f, checked)), None)
            if bad is not None or len(files) > MAX_FILES:
                why = f"not root-owned or writable: {bad}" if bad else "too many files"
                lines.append(f"!\t{dist_dir}\t{why}")
                continue
            for module in modules:
                lines.append(f"{module}\t{root}\t{dist_dir}")
                names.add(module.split(".")[0])
            sums.extend(f"{digest(f)}  {f}" for f in files)
    with open(plugins_file, "a") as out:
        out.writelines(f"{line}\n" for line in lines)
    with open(sums_file, "a") as out:
        out.writelines(f"{line}\n" for line in sorted(set(sums)))
    return names


def venv_prefix():
    """The virtual environment this interpreter belongs to, as `site.venv()` finds it:
    (its folder, whether it includes the system site-packages), or (None, True)."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable or ""))
    for folder in (exe_dir, os.path.dirname(exe_dir)):
        cfg = os.path.join(folder, "pyvenv.cfg")
        if not os.path.isfile(cfg):
            continue
        system = False
        with open(cfg, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition("=")
                if sep and key.strip().lower() == "include-system-site-packages":
                    system = value.strip().lower() == "true"
        return os.path.dirname(exe_dir), system
    return None, True


def site_folders():
    """The site-packages folders this interpreter would import from with `site` on. A
    venv's are spelled out as CPython's `site` does (Debian's patched `getsitepackages`
    would name dist-packages folders for a prefix)."""
    prefix, system = venv_prefix()
    folders = []
    if prefix:
        version = "python%d.%d" % sys.version_info[:2]
        for libdir in dict.fromkeys((getattr(sys, "platlibdir", "lib"), "lib")):
            folders.append(os.path.join(prefix, libdir, version, "site-packages"))
    if system:
        folders += site.getsitepackages()
    return folders


def main(roots_file, modules_file, plugins_file, sums_file, pythonpath=""):
    roots = []
    for path in [*site_folders(), *sys.path, *pythonpath.split(":")]:
        if path and os.path.isabs(path) and not path.endswith(".zip") and path not in roots:
            roots.append(path)
    stdlib = os.path.dirname(os.__file__)
    names = set(getattr(sys, "stdlib_module_names", ()))
    if not names:  # Python < 3.10
        names = {m.name for m in pkgutil.iter_modules([stdlib])}
    names |= set(sys.builtin_module_names) | set(TOOLS)
    names.discard("test")  # the CPython regression suite; a workspace's own test/ is common
    names |= plugins([r for r in roots if r != stdlib and os.path.isdir(r)], plugins_file,
                     sums_file)
    with open(roots_file, "a") as out:
        out.writelines(f"{r}\n" for r in roots)
    with open(modules_file, "a") as out:
        out.writelines(f"{n}\n" for n in sorted(names))


if __name__ == "__main__":
    main(*sys.argv[1:6])
