"""The one redactor: injected values masked in text, JSON lines, models and files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchflow.agents.command import CommandAgent
from benchflow.agents.http import HttpAgent
from benchflow.config import Role, RolloutConfig, Scene, Turn
from benchflow.rollout import secrets as secrets_mod
from benchflow.rollout.redaction import mask_folder, rollout_redactor
from benchflow.rollout.result import ErrorInfo, RolloutResult
from benchflow.rollout.secrets import REDACTED, Redactor

SECRET = 'k3y-with"quote\\and-slash'


def test_values_are_masked_raw_and_json_escaped():
    redact = Redactor([SECRET, "short"], host=False)
    assert redact.text(f"printed {SECRET}!") == f"printed {REDACTED}!"
    line = json.dumps({"output": f"key={SECRET}"}).encode()
    assert SECRET.encode() not in redact.bytes(line)
    assert json.loads(redact.bytes(line))["output"] == f"key={REDACTED}"
    assert redact.text("x" * 5 + " 1") == "xxxxx 1"  # short values are never secrets
    assert Redactor(["abc"], host=False).text("abc") == "abc"


def test_a_host_secret_set_or_unset_later_is_seen(monkeypatch):
    monkeypatch.delenv("PERF_TEST_API_TOKEN", raising=False)
    assert "tok-one-123456" not in Redactor().values
    monkeypatch.setenv("PERF_TEST_API_TOKEN", "tok-one-123456")
    assert Redactor().text("t=tok-one-123456") == f"t={REDACTED}"
    monkeypatch.setenv("PERF_TEST_API_TOKEN", "tok-two-123456")
    assert Redactor().text("tok-one-123456 tok-two-123456") == f"tok-one-123456 {REDACTED}"
    monkeypatch.delenv("PERF_TEST_API_TOKEN")
    assert "tok-two-123456" not in secrets_mod.host_secret_values()


def test_a_model_is_masked_in_every_string():
    result = RolloutResult(job_name="j", rollout_name="r", task_name="t", dataset_name="d",
                           agent_name="a", attempt=1, warnings=[f"saw {SECRET}"],
                           error=ErrorInfo(type="agent_execution_failed", message=SECRET))
    masked = Redactor([SECRET], host=False).model(result)
    assert masked.error.message == REDACTED and masked.warnings == [f"saw {REDACTED}"]
    assert result.error.message == SECRET  # the original is left alone


@pytest.mark.parametrize("chunk", [3, 7, 64, 1 << 20])
def test_a_file_is_masked_in_chunks_even_across_chunk_borders(tmp_path: Path, monkeypatch, chunk):
    monkeypatch.setattr(secrets_mod, "_CHUNK", chunk)
    path = tmp_path / "out.txt"
    path.write_bytes(b"".join(f"{i} {SECRET} ".encode() for i in range(200)))
    redact = Redactor([SECRET], host=False)
    assert redact.file(path)
    assert path.read_bytes() == b"".join(f"{i} {REDACTED} ".encode() for i in range(200))
    assert not redact.file(path)  # nothing left: not rewritten
    assert not list(tmp_path.glob("*.tmp"))


def test_a_rollout_collects_what_it_injects(tmp_path: Path):
    scenes = [Scene(roles=[Role(name="r", agent="cmd", env={
                  "BENCHFLOW_PROVIDER_API_KEY": "model-key-123", "MODEL": "not-a-secret"})],
                    turns=[Turn(role="r")])]
    drivers = {"cmd": CommandAgent("cmd", "true", env={"MY_TOKEN": "job-var-456"}),
               "web": HttpAgent("web", "http://x", headers={"X-Custom": "header-789"})}
    redact = rollout_redactor({"task-env-000"}, scenes, drivers)
    text = "model-key-123 job-var-456 header-789 task-env-000 not-a-secret"
    assert redact.text(text) == f"{REDACTED} {REDACTED} {REDACTED} {REDACTED} not-a-secret"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "agent.txt").write_text("job-var-456\n")
    (tmp_path / "rollout.log").write_text("job-var-456\n")  # masked live, left to its writer
    assert mask_folder(redact, tmp_path) == [tmp_path / "logs" / "agent.txt"]
    assert (tmp_path / "logs" / "agent.txt").read_text() == f"{REDACTED}\n"


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.text(alphabet="ab\\\"{}:", max_size=8), min_size=1, max_size=6),
       data=st.data())
def test_a_block_of_lines_is_masked_as_each_line_apart(lines, data):
    """`Redactor.lines` (the trajectory writes a burst at once) gives the bytes of masking
    each line with `bytes` and joining them: a value is never matched across two lines,
    values with a newline in them (cut from the block itself) included."""
    block_text = "".join(line + "\n" for line in lines)
    cuts = st.tuples(st.integers(0, len(block_text)), st.integers(0, len(block_text)))
    values = [block_text[min(a, b):max(a, b)]
              for a, b in data.draw(st.lists(cuts, max_size=3))]
    redactor = Redactor(values, host=False)
    encoded = [line.encode() for line in lines]
    block = b"".join(line + b"\n" for line in encoded)
    assert redactor.lines(block) == b"".join(redactor.bytes(line) + b"\n" for line in encoded)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats() | st.sampled_from([1e-07, 1e16, -0.0, 5e-324, float("inf")])
    | st.text(max_size=8) | st.sampled_from(["é", "\u2028", "\x01", "claude-code", '"\\']),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(_JSON_VALUES)
def test_config_json_by_orjson_only_when_it_is_the_standard_librarys_text(value):
    # config.json stays byte for byte what json.dumps(indent=2) writes; orjson writes it
    # only when it would write the same (else the standard library does, as before)
    fast = secrets_mod._indented(value)
    assert fast is None or fast == json.dumps(value, indent=2)


def test_a_rollout_config_is_written_by_orjson_as_json_dumps_writes_it():
    role = Role(name="agent", agent="claude", model="m-1",
                env={"OPENAI_API_KEY": "sk-live-0123456789abcdef", "LANG": "C.UTF-8"})
    config = RolloutConfig(task_path=Path("tasks/hello-world"), timeout_multiplier=1.5,
                           scenes=[Scene(roles=[role], turns=[Turn(role="agent")])])
    data = secrets_mod.redact(config.model_dump(mode="json"))
    assert secrets_mod._indented(data) is not None  # the fast path is taken for a config
    written = secrets_mod.redacted_config_json(config)
    assert written == json.dumps(data, indent=2)
    env = json.loads(written)["scenes"][0]["roles"][0]["env"]
    assert "sk-live" not in written and env == {"OPENAI_API_KEY": REDACTED, "LANG": "C.UTF-8"}
