"""`benchflow export` on a jobs folder written with benchflow's own models: SFT messages that
parse as OpenAI chat messages with paired tool calls, ShareGPT, ATIF (our mirror, and
Harbor's own models in a Python 3.12 venv: slow), filters, secrets."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from benchflow.errors import ConfigError
from benchflow.job.export import ExportFilters, export_job
from benchflow.trajectory.exporters import AtifTrajectory

from ..view.jobs_fixture import LONG_OUTPUT, make_jobs


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    return make_jobs(tmp_path / "jobs") / "job-a"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sft_one_line_per_role_with_paired_tool_calls(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "sft.jsonl"
    stats = export_job(job, "sft", out)
    records = lines(out)
    assert (stats.rollouts, stats.lines) == (2, 2)  # the errored rollout is excluded
    assert [r["metadata"]["role"] for r in records] == ["coder", "reviewer"]
    coder = records[0]
    assert coder["metadata"] | {} == {**coder["metadata"], "task": "t1", "agent": "scripted",
                                      "model": "m-1", "reward": 1.0, "dataset": "ds"}
    assert [m["role"] for m in coder["messages"]] == ["user", "assistant", "tool", "assistant"]
    call = coder["messages"][1]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "execute"
    assert json.loads(call["function"]["arguments"]) == {"command": "cat notes.txt"}
    assert coder["messages"][2] == {"role": "tool", "tool_call_id": call["id"],
                                    "content": LONG_OUTPUT}
    assert coder["messages"][3] == {"role": "assistant", "content": "Draft written."}
    # every tool call is answered by a tool message with its id, and ids are unique
    for record in records:
        asked = [c["id"] for m in record["messages"] for c in m.get("tool_calls", [])]
        answered = [m["tool_call_id"] for m in record["messages"] if m["role"] == "tool"]
        assert asked == answered and len(set(asked)) == len(asked)
        assert record["messages"][-1]["role"] == "assistant"


def test_sft_messages_validate_as_openai_chat_messages(job: Path, tmp_path: Path) -> None:
    openai_types = pytest.importorskip("openai.types.chat")
    adapter = TypeAdapter(list[openai_types.ChatCompletionMessageParam])
    export_job(job, "sft", tmp_path / "sft.jsonl")
    for record in lines(tmp_path / "sft.jsonl"):
        adapter.validate_python(record["messages"], strict=False)
        assert set(record) == {"messages", "metadata"}  # what TRL's SFTTrainer reads + extras


def test_sharegpt(job: Path, tmp_path: Path) -> None:
    export_job(job, "sharegpt", tmp_path / "sg.jsonl")
    turns = lines(tmp_path / "sg.jsonl")[0]["conversations"]
    assert [t["from"] for t in turns] == ["human", "function_call", "observation", "gpt"]
    assert json.loads(turns[1]["value"]) == {"name": "execute",
                                             "arguments": {"command": "cat notes.txt"}}
    assert turns[2]["value"] == LONG_OUTPUT


def test_atif_validates(job: Path, tmp_path: Path) -> None:
    export_job(job, "atif", tmp_path / "atif.jsonl")
    records = lines(tmp_path / "atif.jsonl")
    assert len(records) == 2
    for record in records:
        trajectory = AtifTrajectory.model_validate(record)
        assert trajectory.schema_version == "ATIF-v1.6"
        assert [s.step_id for s in trajectory.steps] == list(range(1, len(trajectory.steps) + 1))
    coder = AtifTrajectory.model_validate(records[0])
    assert [s.source for s in coder.steps] == ["user", "agent", "agent"]
    acting = coder.steps[1]
    assert acting.tool_calls and acting.observation
    assert acting.observation.results[0].source_call_id == acting.tool_calls[0].tool_call_id
    assert acting.reasoning_content == "I should think first"
    assert coder.steps[2].metrics is not None and coder.steps[2].metrics.prompt_tokens == 120
    assert coder.final_metrics is not None and coder.final_metrics.total_completion_tokens == 30


HARBOR = "harbor==0.24.0"  # the version labs/harbor-parity compares against
HARBOR_VENV = Path(__file__).resolve().parents[3] / ".harbor-venv"
VALIDATE = """
import json, sys
from harbor.models.trajectories import Trajectory
for line in open(sys.argv[1]):
    Trajectory.model_validate(json.loads(line))
print("harbor accepts", sum(1 for _ in open(sys.argv[1])), "trajectories")
"""


def _python_312() -> str | None:
    """A Python >= 3.12 that runs (pyenv's shims exist without the version selected)."""
    pyenv = sorted(map(str, Path.home().glob(".pyenv/versions/3.1[2-9].*/bin/python3")))
    found = [shutil.which(f"python3.{minor}") for minor in (12, 13, 14)]
    for python in [*pyenv, *filter(None, found)]:
        probe = subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                               capture_output=True, check=False)
        if probe.returncode == 0:
            return python
    return None


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first run installs Harbor and its dependencies
def test_atif_validates_against_harbor(job: Path, tmp_path: Path) -> None:
    """Harbor's own models accept our ATIF. Harbor needs Python >= 3.12, so it runs in its
    own venv (`.harbor-venv/`, made once from PyPI with a Python 3.12+ found on PATH or in
    pyenv), whatever Python runs the tests."""
    python = HARBOR_VENV / "bin" / "python"
    if not python.exists():
        base = _python_312()
        if base is None:
            pytest.skip("no Python >= 3.12 on PATH or in pyenv for Harbor's venv")
        subprocess.run([base, "-m", "venv", str(HARBOR_VENV)], check=True)
    version = HARBOR.split("==")[1]
    have = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                           f"assert m.version('harbor') == {version!r}"], capture_output=True,
                          check=False)
    if have.returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", HARBOR], check=True)
    export_job(job, "atif", tmp_path / "atif.jsonl")
    checked = subprocess.run([str(python), "-c", VALIDATE, str(tmp_path / "atif.jsonl")],
                             capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert checked.stdout.strip() == "harbor accepts 2 trajectories"


def test_atif_mirror_rejects_what_harbor_rejects() -> None:
    base = {"session_id": "s", "agent": {"name": "a", "version": "1"},
            "steps": [{"step_id": 1, "source": "user", "message": "hi"}]}
    AtifTrajectory.model_validate(base)
    bad = [
        {**base, "steps": []},
        {**base, "steps": [{"step_id": 2, "source": "user", "message": "hi"}]},
        {**base, "steps": [{"step_id": 1, "source": "user", "message": "hi",
                            "reasoning_content": "no"}]},
        {**base, "steps": [{"step_id": 1, "source": "agent", "message": "",
                            "observation": {"results": [{"source_call_id": "x"}]}}]},
        {**base, "surprise": 1},
    ]
    for record in bad:
        with pytest.raises(ValueError):
            AtifTrajectory.model_validate(record)


@pytest.mark.parametrize(("filters", "expected"), [
    (ExportFilters(), [("scripted", "t1", "coder"), ("scripted", "t1", "reviewer")]),
    (ExportFilters(roles=("reviewer",)), [("scripted", "t1", "reviewer")]),
    (ExportFilters(min_reward=1.0, roles=("coder",)), [("scripted", "t1", "coder")]),
    (ExportFilters(agents=("other",)), []),
    (ExportFilters(agents=("other",), errors="include"), []),  # errored: no trajectory
    (ExportFilters(datasets=("nope",)), []),
])
def test_filters(job: Path, tmp_path: Path, filters: ExportFilters,
                 expected: list[tuple[str, str, str]]) -> None:
    out = tmp_path / "f.jsonl"
    stats = export_job(job, "sft", out, filters)
    got = [(r["metadata"]["agent"], r["metadata"]["task"], r["metadata"]["role"])
           for r in lines(out)]
    assert got == expected
    assert stats.rollouts + stats.skipped_rollouts == 3


def test_errors_include_counts_the_errored_rollout(job: Path, tmp_path: Path) -> None:
    stats = export_job(job, "sft", tmp_path / "f.jsonl", ExportFilters(errors="include"))
    assert (stats.rollouts, stats.skipped_rollouts) == (3, 0)


def test_secrets_never_exported(job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    traj = job / "scripted" / "ds" / "t1__1" / "trajectory" / "acp_trajectory.jsonl"
    text = traj.read_text().replace("Draft written.", f"Draft written. token={secret} "
                                    "key=sk-abcdefghijklmnopqrstuvwxyz012345")
    traj.write_text(text)
    for fmt in ("sft", "sharegpt", "atif"):
        out = tmp_path / f"{fmt}.jsonl"
        export_job(job, fmt, out)  # type: ignore[arg-type]
        exported = out.read_text()
        assert "Draft written. token=***" in exported
        assert secret not in exported and "sk-abcdefghijklmnop" not in exported


def test_bad_input(job: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="format"):
        export_job(job, "csv", tmp_path / "x.jsonl")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no trial results"):
        export_job(job.parent, "sft", tmp_path / "x.jsonl")
    with pytest.raises(ConfigError, match="sft"):
        export_job(job, "atif", tmp_path / "x.jsonl", source="model-calls")
    assert not (tmp_path / "x.jsonl").exists()


def test_workspace_changes_go_into_the_role_lines_metadata_when_asked(job: Path,
                                                                     tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    export_job(job, "sft", plain)
    assert all("workspace_changes" not in json.loads(line)["metadata"]
               for line in plain.read_text().splitlines())
    out = tmp_path / "changes.jsonl"
    export_job(job, "sft", out, ExportFilters(workspace_changes=True))
    lines = {json.loads(line)["metadata"]["role"]: json.loads(line)["metadata"]
             for line in out.read_text().splitlines()}
    (turn,) = lines["coder"]["workspace_changes"]
    assert (turn["turn"], turn["scene"]) == (0, "review-loop")
    assert [(c["path"], c["change"], c["flagged"]) for c in turn["changes"]] == [
        ("fizzbuzz.py", "created", False), ("tests/conftest.py", "deleted", True)]
    assert lines["reviewer"]["workspace_changes"] == []
