"""Hypothesis: whatever a task file holds, load_task returns a Task or raises TaskInvalidError /
TaskNotFoundError; no other exception escapes."""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchflow import bounds
from benchflow.errors import TaskInvalidError, TaskNotFoundError
from benchflow.task import Task, TaskConfig, TaskConfigWarning, load_task
from benchflow.task.models import (
    AgentSettings,
    Frontmatter,
    HardeningConfig,
    OracleSettings,
    SandboxSettings,
    TaskInfo,
    VerifierSettings,
)

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_counter = itertools.count()

# Keys drawn from the real schema (so fuzzing reaches the validators) plus noise.
_KEYS = sorted(
    {
        *Frontmatter.model_fields,
        *SandboxSettings.model_fields,
        *HardeningConfig.model_fields,
        "timeout_sec",
        "env",
        "name",
        "authors",
        "hardening",
        "environment",
        "solution",
        "version",
        "mcp_servers",
        "healthcheck",
        "memory",
        "network_mode",
        "tests",
    }
)
keys = st.one_of(st.sampled_from(_KEYS), st.text(max_size=12))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20,
)
documents = st.dictionaries(keys, values, max_size=6)
_SECTIONS = [
    "task",
    "agent",
    "verifier",
    "sandbox",
    "oracle",
    "environment",
    "solution",
    "metadata",
]
_FIELDS = sorted(
    {
        f
        for m in (AgentSettings, VerifierSettings, SandboxSettings, OracleSettings, TaskInfo)
        for f in m.model_fields
    }
    | {"memory", "storage", "network_mode", "hardening"}
)
small = st.one_of(
    scalars,
    st.integers(0, 5000),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(
        st.sampled_from(sorted(HardeningConfig.model_fields)), st.booleans(), max_size=3
    ),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
# Schema-shaped documents: right section and field names, random values (reaches success paths).
shaped = st.dictionaries(
    st.sampled_from(_SECTIONS),
    st.dictionaries(st.sampled_from(_FIELDS), small, max_size=4),
    max_size=4,
)


def _toml_str(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("-inf" if value < 0 else "inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _toml_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    items = (f"{_toml_str(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None)
    return "{" + ", ".join(items) + "}"


def to_toml(document: dict[str, Any]) -> str:
    """A TOML document of inline values (TOML has no null: None values are left out)."""
    return "".join(
        f"{_toml_str(k)} = {_toml_value(v)}\n" for k, v in document.items() if v is not None
    )


def _fresh(root: Path) -> Path:
    return root / f"ex{next(_counter)}"


def _load(folder: Path) -> Task | Exception:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TaskConfigWarning)
        try:
            task = load_task(folder)
        except (TaskInvalidError, TaskNotFoundError) as exc:
            assert str(exc), "errors carry a message"
            return exc
    assert isinstance(task.config, TaskConfig)
    assert task.instruction.strip() and task.name
    return task


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(text=st.text())
def test_any_task_md_text(root: Path, writers, text: str) -> None:
    folder = writers[0](root, _fresh(root).name)
    (folder / "task.md").write_text(text, encoding="utf-8")
    _load(folder)


@FUZZ
@given(lines=st.lists(st.one_of(st.just("---"), st.text(max_size=30)), max_size=8))
def test_fenced_task_md_text(root: Path, writers, lines: list[str]) -> None:
    folder = writers[0](root, _fresh(root).name)
    (folder / "task.md").write_text("---\n" + "\n".join(lines) + "\nbody\n", encoding="utf-8")
    _load(folder)


@FUZZ
@given(document=st.one_of(documents, shaped), body=st.text(max_size=30))
def test_any_frontmatter_structure(root: Path, writers, document: dict, body: str) -> None:
    folder = writers[0](root, _fresh(root).name, frontmatter=yaml.safe_dump(document), body=body)
    result = _load(folder)
    if isinstance(result, Task):
        # only schema keys (and the reserved ones) can have loaded
        assert set(result.raw_frontmatter) <= set(Frontmatter.model_fields)


@FUZZ
@given(document=st.one_of(documents, shaped))
def test_any_task_toml_structure(root: Path, writers, document: dict) -> None:
    folder = writers[1](root, _fresh(root).name, toml=to_toml(document))
    _load(folder)


@FUZZ
@given(text=st.text())
def test_any_task_toml_text(root: Path, writers, text: str) -> None:
    folder = writers[1](root, _fresh(root).name)
    (folder / "task.toml").write_text(text, encoding="utf-8")
    _load(folder)


@FUZZ
@given(
    data=st.binary(max_size=64), which=st.sampled_from(["task.md", "task.toml", "instruction.md"])
)
def test_any_bytes(root: Path, writers, data: bytes, which: str) -> None:
    make = writers[0] if which == "task.md" else writers[1]
    folder = make(root, _fresh(root).name)
    (folder / which).write_bytes(data)
    _load(folder)


def test_toml_serializer_round_trips() -> None:
    import tomllib

    doc = {"a": 1, "b": [1.5, 'x"\\\n'], "c": {"d": True, "e": None}, "f": float("inf")}
    assert tomllib.loads(to_toml(doc)) == {
        "a": 1,
        "b": [1.5, 'x"\\\n'],
        "c": {"d": True},
        "f": float("inf"),
    }


def test_yaml_bombs_and_cycles_are_invalid_not_crashes(native) -> None:
    cyclic = native("cyclic", frontmatter="task: &a\n  keywords: [*a]\n")
    assert isinstance(_load(cyclic), TaskInvalidError)
    bomb = (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("bcdefgh", "cdefghi"))
        + "task:\n  keywords: *i\n"
    )
    assert isinstance(_load(native("bomb", frontmatter=bomb)), TaskInvalidError)
    deep = native("deep", frontmatter="metadata: " + "[" * 5000 + "]" * 5000 + "\n")
    assert isinstance(_load(deep), (Task, TaskInvalidError))


_positive = st.floats(min_value=0.001, max_value=bounds.MAX_SECONDS, allow_nan=False)
valid_sandbox = st.fixed_dictionaries(
    {},
    optional={
        "cpus": st.floats(min_value=0.001, max_value=bounds.MAX_CPUS, allow_nan=False),
        "memory_mb": st.integers(1, 10**6),
        "storage_mb": st.integers(1, 10**6),
        "gpus": st.integers(0, 8),
        "workdir": st.text(min_size=1, max_size=10),
        "env": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        "build_timeout_sec": _positive,
        "allow_internet": st.booleans(),
        "docker_image": st.text(min_size=1, max_size=10),
    },
)
valid_hardening = st.dictionaries(
    st.sampled_from(sorted(HardeningConfig.model_fields)), st.booleans()
)


@FUZZ
@given(sandbox=valid_sandbox, hardening=valid_hardening, timeout=_positive)
def test_valid_values_round_trip_in_both_layouts(
    root: Path, writers, sandbox: dict, hardening: dict, timeout: float
) -> None:
    doc = {
        "agent": {"timeout_sec": timeout},
        "sandbox": sandbox,
        "verifier": {"hardening": hardening},
    }
    native = _load(writers[0](root, _fresh(root).name, frontmatter=yaml.safe_dump(doc)))
    toml_doc = {"agent": doc["agent"], "environment": sandbox, "verifier": doc["verifier"]}
    legacy = _load(writers[1](root, _fresh(root).name, toml=to_toml(toml_doc)))
    for task in (native, legacy):
        assert isinstance(task, Task), task
        assert task.config.agent.timeout_sec == timeout
        for key, value in sandbox.items():
            assert getattr(task.config.sandbox, key) == value
        for key, value in hardening.items():
            assert getattr(task.config.verifier.hardening, key) is value
    assert native.config.sandbox == legacy.config.sandbox
