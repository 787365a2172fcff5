"""The oracle parity lab's preparation logic (labs/harbor-parity/run.py), without Docker or mirrors.

The lab itself needs local mirrors of third-party repositories, so it is not part of the test
suite (`make parity`); these tests pin what it may change in a task (only image references)
and that a fresh machine gets exit 2 with instructions instead of a traceback.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_lab() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harbor_parity_lab",
                                                  REPO / "labs" / "harbor-parity" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lab = _load_lab()
SUBS, TASKS = lab.load_manifest()


def test_manifest_has_twenty_pinned_third_party_tasks() -> None:
    third_party = [spec for spec in TASKS if not spec.local]
    assert len(third_party) >= 20
    for spec in third_party:
        assert len(spec.commit) == 40 and all(c in "0123456789abcdef" for c in spec.commit)
        assert "/" in spec.repo and spec.license and spec.category
    for spec in TASKS:
        if spec.local:  # this repository's fixtures of real tasks' shapes
            assert (REPO / spec.local / "task.toml").is_file() and not spec.repo


def test_uv_from_pypi_and_named_rewrites_change_only_what_they_say(tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "TASKS_DIR", tmp_path / "tasks")
    source = tmp_path / "src"
    (source / "environment").mkdir(parents=True)
    (source / "task.toml").write_text("[environment]\n")
    (source / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (source / "solve.sh").write_text(
        "curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh\nsource $HOME/.local/bin/env\n"
        "uv run --with mcp python3 x.py\n")
    monkeypatch.setattr(lab, "REPO_ROOT", tmp_path)
    spec = lab.TaskSpec(id="t", license="x", category="x", local="src", uv_from_pypi=True,
                        rewrites=(("--with mcp ", "--with 'mcp<2' "),))
    changes = lab.prepare_task(spec, None, SUBS)
    lines = (tmp_path / "tasks" / "t" / "solve.sh").read_text().splitlines()
    assert lines[0] == lab.UV_FROM_PYPI and "astral.sh" not in lines[0]
    assert lines[1:] == ["source $HOME/.local/bin/env", "uv run --with 'mcp<2' python3 x.py"]
    assert changes == ["environment/Dockerfile: FROM debian:bookworm-slim -> bf-parity/os:bookworm",
                       "solve.sh: astral.sh uv installer -> uv from PyPI",
                       "solve.sh: '--with mcp ' -> \"--with 'mcp<2' \""]


def test_dockerfile_substitution_changes_only_image_references() -> None:
    text = ("FROM python:3.13-slim-bookworm@sha256:" + "a" * 64 + " AS build\n"
            "RUN pip install pytest==8.4.1 pytest-json-ctrf==0.3.5\n"
            "COPY --from=ghcr.io/astral-sh/uv:latest /uv /uvx /bin/\n"
            "FROM --platform=linux/amd64 ubuntu:24.04\n"
            "COPY --from=build /usr/local /usr/local\n"
            "WORKDIR /app\n")
    out, changes = lab.substitute_dockerfile(text, SUBS, "t/Dockerfile")
    assert out.splitlines() == [
        "FROM bf-parity/python:3-slim AS build",
        "RUN pip install pytest==8.4.1 pytest-json-ctrf==0.3.5",
        "COPY --from=bf-parity/uv:latest /uv /uvx /bin/",
        "FROM --platform=linux/amd64 bf-parity/os:bookworm",
        "COPY --from=build /usr/local /usr/local",
        "WORKDIR /app",
    ]
    assert len(changes) == 3


def test_unknown_base_image_stops_preparation_naming_file_and_image() -> None:
    with pytest.raises(SystemExit, match=r"t/Dockerfile: image 'nvidia/cuda:12' has no subst"):
        lab.substitute_dockerfile("FROM nvidia/cuda:12\n", SUBS, "t/Dockerfile")


def test_task_toml_docker_image_is_substituted() -> None:
    out, changes = lab.substitute_task_toml(
        '[environment]\ndocker_image = "ubuntu:24.04"\ncpus = 1\n', SUBS, "t/task.toml")
    assert 'docker_image = "bf-parity/os:bookworm"' in out and "cpus = 1" in out
    assert changes == ["docker_image ubuntu:24.04 -> bf-parity/os:bookworm"]


def test_prepare_exports_the_pinned_commit_and_substitutes(tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "mirror" / "someone+tasks" / "repo"
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    task = repo / "t1"
    (task / "environment").mkdir(parents=True)
    (task / "task.toml").write_text("[environment]\n")
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, env=env)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    (task / "environment" / "Dockerfile").write_text("FROM later:1\n")  # not committed
    monkeypatch.setattr(lab, "TASKS_DIR", tmp_path / "tasks")
    spec = lab.TaskSpec(id="t1", repo="someone/tasks", commit=commit, path="t1",
                        license="none stated", category="x")
    git_dirs = lab.check_mirrors(tmp_path / "mirror", [spec])
    changes = lab.prepare_task(spec, git_dirs["someone/tasks"], SUBS)
    prepared = (tmp_path / "tasks" / "t1" / "environment" / "Dockerfile").read_text()
    assert prepared == "FROM bf-parity/os:bookworm\nWORKDIR /app\n"
    assert changes == ["environment/Dockerfile: FROM ubuntu:24.04 -> bf-parity/os:bookworm"]


def test_missing_mirrors_exit_2_with_instructions(tmp_path: Path, capsys) -> None:
    assert lab.main(["--mirrors", str(tmp_path), "--prepare-only"]) == 2
    err = capsys.readouterr().err
    assert "fetch github:<owner>/<name>" in err and "MJinXiang/Agent_harness" in err
    assert "Traceback" not in err


def test_agreement_tells_refusals_rewards_and_missing_rewards_apart() -> None:
    cell = lab.Cell
    refused_both = lab.Row("t", plain=cell(error="task_invalid"),
                           hardened=cell(error="task_invalid"),
                           harbor=cell(error="FileNotFoundError",
                                       detail="Solution script not found: /x/solution/solve.sh"))
    assert lab.agreement(refused_both, harbor_ran=True) == "yes"
    ran_vs_refused = lab.Row("t", plain=cell(error="verifier_failed"),
                             hardened=cell(error="verifier_failed"), harbor=cell(error="refused"))
    assert lab.agreement(ran_vs_refused, harbor_ran=True) == "NO"
    hardening_zeroes = lab.Row("t", plain=cell(reward=1.0), hardened=cell(reward=0.0),
                               harbor=cell(reward=1.0))
    assert lab.agreement(hardening_zeroes, harbor_ran=True) == "NO"
    harbor_cannot = lab.Row("t", plain=cell(reward=1.0), hardened=cell(reward=1.0),
                            harbor=cell(error=lab.CANNOT_RUN))
    assert lab.agreement(harbor_cannot, harbor_ran=True) == "yes (bf only)"
