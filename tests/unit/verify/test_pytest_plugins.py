"""The image's own pytest plugins under hardening: what the baseline trusts (pyinfo.py) and
what the verifier's loader imports (benchflow_verifier_plugins.py).

Both run in the sandbox; here they run on the host against folders made for the test.
Containers: tests/integration/test_tb_template.py and the reward-hack matrix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benchflow.task.models import HardeningConfig
from benchflow.verify._scripts import resource_text
from benchflow.verify.baseline import PLUGIN_LOADER, PLUGIN_LOADER_DIR, Baseline
from benchflow.verify.verifier_env import verifier_env


def pyinfo() -> dict:
    namespace: dict = {"__name__": "pyinfo"}
    exec(compile(resource_text("pyinfo.py"), "pyinfo.py", "exec"), namespace)  # noqa: S102
    return namespace


def make_dist(site: Path, name: str, module: str) -> None:
    """A wheel-style install: the module, its dist-info with a pytest11 entry point, RECORD."""
    (site / f"{module}.py").write_text("X = 1\n")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[console_scripts]\nx = y\n\n[pytest11]\n"
                                           f"{name} = {module}\n")
    (info / "RECORD").write_text(f"{module}.py,,\n{info.name}/METADATA,,\n"
                                 f"{info.name}/entry_points.txt,,\n{info.name}/RECORD,,\n")


def test_trusted_plugins_are_recorded_with_the_sha256_of_their_files(tmp_path, monkeypatch):
    ns = pyinfo()
    site = tmp_path / "site"
    site.mkdir()
    make_dist(site, "goodplug", "goodplug_mod")
    (site / "other-2.0.dist-info").mkdir()  # no entry points: not a plugin
    ns["safe"] = lambda path, checked: True  # tmp_path is not root-owned all the way up
    plugins, sums = tmp_path / "plugins.tsv", tmp_path / "plugins.sums"
    names = ns["plugins"]([str(site)], str(plugins), str(sums))
    assert names == {"goodplug_mod"}
    assert plugins.read_text() == f"goodplug_mod\t{site}\t{site}/goodplug-1.0.dist-info\n"
    lines = dict(reversed(line.split("  ", 1)) for line in sums.read_text().splitlines())
    module = f"{site}/goodplug_mod.py"
    assert lines[module] == hashlib.sha256(b"X = 1\n").hexdigest()
    assert f"{site}/goodplug-1.0.dist-info/entry_points.txt" in lines


def test_a_plugin_under_a_writable_folder_is_not_trusted(tmp_path):
    ns = pyinfo()
    site = tmp_path / "site"  # under /tmp: world-writable, so the agent could change it
    site.mkdir()
    make_dist(site, "userplug", "userplug_mod")
    plugins, sums = tmp_path / "plugins.tsv", tmp_path / "plugins.sums"
    assert ns["plugins"]([str(site)], str(plugins), str(sums)) == set()
    kind, dist, why = plugins.read_text().strip().split("\t")
    assert (kind, dist) == ("!", f"{site}/userplug-1.0.dist-info")
    assert why.startswith("not root-owned or writable")
    assert sums.read_text() == ""


def load_loader(folder: Path, entries: list[tuple[str, Path]]) -> ModuleType:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{PLUGIN_LOADER}.py"
    path.write_text(resource_text(f"{PLUGIN_LOADER}.py"))
    (folder / "plugins.txt").write_text("".join(f"{m}\t{r}\n" for m, r in entries))
    spec = importlib.util.spec_from_file_location(f"bf_loader_{folder.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_loader_imports_only_recorded_plugins_from_their_site_folder(
        tmp_path, monkeypatch, capsys):
    site, shadow = tmp_path / "site", tmp_path / "ws"
    for folder in (site, shadow):
        folder.mkdir()
    (site / "realplug.py").write_text("")
    (site / "shadowed").mkdir()
    (site / "shadowed" / "__init__.py").write_text("")
    (shadow / "shadowed").mkdir()  # the agent's package of the same name, earlier on sys.path
    (shadow / "shadowed" / "__init__.py").write_text("")
    (site / "evil_unrecorded.py").write_text("")
    monkeypatch.setattr(sys, "path", [str(shadow), str(site), *sys.path])
    loader = load_loader(tmp_path / "loader", [("realplug", site), ("shadowed.main", site),
                                               ("missing_here", site)])
    assert loader.pytest_plugins == ["realplug"]
    assert "shadowed.main not loaded" in capsys.readouterr().err


def test_the_loader_without_a_list_loads_nothing(tmp_path):
    folder = tmp_path / "loader"
    loader = load_loader(folder, [])
    assert loader.pytest_plugins == []


@pytest.mark.parametrize("plugins", [(), ("ctrf.main",)])
def test_the_verifier_env_loads_the_loader_only_when_the_image_has_plugins(plugins):
    baseline = Baseline(workspace="/app", digest="d" * 64, path="/usr/bin:/bin",
                        pythonpath="/app", pytest_plugins=plugins)
    env = verifier_env(workspace="/app", verifier_dir="/tests", task_env={},
                       pytest_plugins=["xdist"], config=HardeningConfig(), baseline=baseline)
    args = shlex.split(env["PYTEST_ADDOPTS"])
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    if plugins:
        assert args[-4:] == ["-p", PLUGIN_LOADER, "-p", "xdist"]
        assert env["PYTHONPATH"] == f"{PLUGIN_LOADER_DIR}:/app"
    else:
        assert PLUGIN_LOADER not in args and args[-2:] == ["-p", "xdist"]
        assert env["PYTHONPATH"] == "/app"
