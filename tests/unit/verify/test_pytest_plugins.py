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
from benchflow.verify.baseline import PLUGIN_LOADER, PLUGIN_LOADER_DIR, VERIFIER_TOOLS_DIR, Baseline
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
def test_the_verifier_env_always_loads_the_loader_with_a_baseline(plugins):
    """With no image plugin, the loader still runs: uvx may install one at verify time."""
    baseline = Baseline(workspace="/app", digest="d" * 64, path="/usr/bin:/bin",
                        pythonpath="/app", pytest_plugins=plugins)
    env = verifier_env(workspace="/app", verifier_dir="/tests", task_env={},
                       pytest_plugins=["xdist"], config=HardeningConfig(), baseline=baseline)
    args = shlex.split(env["PYTEST_ADDOPTS"])
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert args[-4:] == ["-p", PLUGIN_LOADER, "-p", "xdist"]
    assert env["PYTHONPATH"] == f"{PLUGIN_LOADER_DIR}:/app"


def test_without_a_baseline_there_is_no_loader():
    env = verifier_env(workspace="/app", verifier_dir="/tests", task_env={},
                       pytest_plugins=["xdist"], config=HardeningConfig(), baseline=None)
    args = shlex.split(env["PYTEST_ADDOPTS"])
    assert PLUGIN_LOADER not in args and args[-2:] == ["-p", "xdist"]
    assert PLUGIN_LOADER_DIR not in env["PYTHONPATH"]

# -- plugins installed at verify time (uvx -w pytest-json-ctrf ...) ------------------------


def tools_site(tools: Path) -> Path:
    """A uv-built environment's site folder under the verifier's tools folder."""
    site = tools / "uv-cache" / "archive-v0" / "abc" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    return site


def reload_with_tools(loader: ModuleType, tools: Path, *, safe: bool = True) -> list[str]:
    loader.TOOLS = str(tools)
    if safe:  # tmp_path sits under the world-writable /tmp; in the sandbox it is root's 0755
        loader._safe = lambda path: True
    return loader._allowed()


def test_the_loader_trusts_plugins_installed_into_the_tools_folder(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    site = tools_site(tools)
    make_dist(site, "pytest_json_ctrf", "ctrf_mod")
    other = tmp_path / "elsewhere"  # the same kind of dist outside the tools folder
    other.mkdir()
    make_dist(other, "evilplug", "evil_mod")
    monkeypatch.setattr(sys, "path", [str(other), str(site), *sys.path])
    loader = load_loader(tmp_path / "loader", [])
    assert reload_with_tools(loader, tools) == ["ctrf_mod"]


def test_a_tools_plugin_shadowed_outside_the_tools_folder_is_refused(tmp_path, monkeypatch,
                                                                    capsys):
    tools, ws = tmp_path / "tools", tmp_path / "ws"
    site = tools_site(tools)
    make_dist(site, "pytest_json_ctrf", "ctrf_mod")
    ws.mkdir()
    (ws / "ctrf_mod.py").write_text("FAKE = 1\n")  # the agent's module, earlier on sys.path
    monkeypatch.setattr(sys, "path", [str(ws), str(site), *sys.path])
    loader = load_loader(tmp_path / "loader", [])
    assert reload_with_tools(loader, tools) == []
    assert f"ctrf_mod not loaded: found at {ws}/ctrf_mod.py" in capsys.readouterr().err


def test_a_tools_folder_others_can_write_is_not_trusted(tmp_path, monkeypatch):
    tools = tmp_path / "tools"  # under /tmp (sticky, world-writable): never trusted
    site = tools_site(tools)
    make_dist(site, "pytest_json_ctrf", "ctrf_mod")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    loader = load_loader(tmp_path / "loader", [])
    assert reload_with_tools(loader, tools, safe=False) == []


def test_the_loader_and_benchflow_name_the_same_tools_folder(tmp_path):
    loader = load_loader(tmp_path / "loader", [])
    assert loader.TOOLS == VERIFIER_TOOLS_DIR
