"""The job file: defaults, every field's validation, error messages, env expansion."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchflow.errors import ConfigError
from benchflow.job.config import (
    BuiltinAgentConfig,
    CommandAgentConfig,
    JobConfig,
    LocalDatasetConfig,
    RegisteredAgentConfig,
    RegistryDatasetConfig,
    load_job_config,
    parse_job_config,
    with_absolute_paths,
    with_overrides,
)
from benchflow.job.envvars import expand_agent_env, expand_env, is_env_template
from benchflow.job.store import redacted_job_config

MINIMAL = {"agents": [{"name": "oracle"}], "datasets": [{"path": "tasks"}]}


def job(**extra: object) -> JobConfig:
    return parse_job_config({**MINIMAL, **extra})


def error_of(data: object, source: str = "job.yaml") -> str:
    with pytest.raises(ConfigError) as info:
        parse_job_config(data, source)
    return str(info.value)


def test_defaults_follow_the_spec():
    config = job()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d__\d\d-\d\d-\d\d", config.name)
    assert (config.jobs_dir, config.n_attempts, config.n_concurrent_trials) == (Path("jobs"), 1, 4)
    assert config.timeout_multiplier == 1.0
    assert config.retry.model_dump() == {"max_attempts": 3, "initial_delay_ms": 1000,
                                         "max_delay_ms": 30000, "multiplier": 2.0}
    assert config.instruction_path == "/tmp/instruction.md"
    env = config.environment
    assert (env.type, env.force_build, env.preserve_env, env.provider_config) == (
        "docker", False, "never", {})
    assert (config.verifier.override_timeout_sec, config.verifier.disable) == (None, False)
    assert [m.type for m in config.metrics] == ["mean"]


def test_agent_kinds_are_told_apart():
    config = job(agents=[{"name": "oracle"}, {"name": "nop"},
                         {"name": "mine", "install": "i", "execute": "e", "env": {"A": "b"}},
                         {"name": "claude-code", "model": "sonnet"}])
    kinds = [type(a) for a in config.agents]
    assert kinds == [BuiltinAgentConfig, BuiltinAgentConfig, CommandAgentConfig,
                     RegisteredAgentConfig]
    assert config.agents[3].model == "sonnet"
    assert [a.kind for a in config.agents] == ["builtin", "builtin", "command", "registered"]


def test_an_explicit_kind_wins_over_the_shape():
    config = job(agents=[{"name": "oracle", "kind": "builtin"},
                         {"name": "mine", "kind": "command", "execute": "e"},
                         {"name": "a", "kind": "http", "endpoint": "http://x/y"},
                         {"kind": "roles", "roles": {"coder": "claude"}}])
    assert [a.kind for a in config.agents] == ["builtin", "command", "http", "roles"]
    # a kind that does not fit the entry is named, not guessed around
    assert "agents[0].name" in error_of({**MINIMAL, "agents": [{"name": "claude", "kind": "builtin"}]})
    assert "kind" in error_of({**MINIMAL, "agents": [{"name": "x", "kind": "robot"}]})


def test_dataset_kinds_and_version_as_string():
    config = job(datasets=[{"path": "a"},
                           {"registry": {"path": "r.json"}, "name": "bench", "version": 2.0}])
    assert isinstance(config.datasets[0], LocalDatasetConfig)
    assert isinstance(config.datasets[1], RegistryDatasetConfig)
    assert config.datasets[1].version == "2.0"


@pytest.mark.parametrize(("data", "where", "says"), [
    ({**MINIMAL, "n_attemps": 2}, "n_attemps", "unknown key"),
    ({**MINIMAL, "retry": {"max_attempt": 2}}, "retry.max_attempt", "unknown key"),
    ({**MINIMAL, "agents": [{"name": "x", "execute": "e", "envv": {}}]}, "agents[0].envv",
     "unknown key"),
    ({**MINIMAL, "environment": {"type": "k9s"}}, "environment.type", "docker"),
    ({**MINIMAL, "environment": {"preserve_env": "sometimes"}}, "environment.preserve_env",
     "on_failure"),
    ({**MINIMAL, "environment": {"provider_config": {"netwrk": "x"}}}, "environment",
     "netwrk"),
    ({**MINIMAL, "metrics": [{"type": "median"}]}, "metrics[0].type", "mean"),
    ({**MINIMAL, "n_concurrent_trials": 0}, "n_concurrent_trials", "greater than or equal"),
    ({**MINIMAL, "timeout_multiplier": 0}, "timeout_multiplier", "greater than"),
    ({**MINIMAL, "instruction_path": "tmp/i.md"}, "instruction_path", "pattern"),
    ({"datasets": [{"path": "t"}]}, "agents", "required"),
    ({**MINIMAL, "agents": []}, "agents", "at least 1"),
    ({**MINIMAL, "agents": [{"name": "oracle", "execute": "x"}]}, "agents[0].name", "reserved"),
    ({**MINIMAL, "agents": [{"name": "a", "execute": "x"}, {"name": "a", "execute": "y"}]},
     "(top level)", "duplicate agent name"),
    ({**MINIMAL, "agents": [{"name": "a", "execute": "x", "env": {"BAD-NAME": "v"}}]},
     "agents[0].env.BAD-NAME (the key)", "pattern"),
    ({**MINIMAL, "datasets": [{"registry": {"path": "r", "url": "u"}, "name": "n"}]},
     "datasets[0]", "exactly one"),
    ({**MINIMAL, "datasets": [{"path": "t", "tasks": ["ok", "-bad", "with space"]}]},
     "datasets[0].tasks", "'-bad', 'with space'"),
])
def test_every_bad_field_is_named_with_its_fix(data, where, says):
    message = error_of(data)
    assert message.startswith("job.yaml: invalid job file: ") and "\n" not in message
    problems = message.removeprefix("job.yaml: invalid job file: ")
    start = next((i for i in range(len(problems)) if problems.startswith(where + ":", i)
                  and (i == 0 or problems[i - 2:i] == "; ")), None)
    assert start is not None, message
    assert says in problems[start:]


def test_filter_duplicates_dropped_order_kept():
    config = job(datasets=[{"path": "t", "tasks": ["b", "a", "b", "c", "a"]}])
    assert config.datasets[0].tasks == ["b", "a", "c"]


def test_not_a_mapping_is_an_error():
    assert "is a mapping" in error_of(["agents"])


def test_load_yaml_json_and_errors(tmp_path):
    yml = tmp_path / "job.yaml"
    yml.write_text("name: j1\nagents: [{name: oracle}]\ndatasets: [{path: t}]\n")
    assert load_job_config(yml).name == "j1"
    js = tmp_path / "job.json"
    js.write_text(json.dumps({**MINIMAL, "name": "j2"}))
    assert load_job_config(js).name == "j2"
    with pytest.raises(ConfigError, match="cannot read the job file"):
        load_job_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_job_config(bad)


def test_overrides_are_validated():
    config = with_overrides(job(), n_concurrent_trials=8, n_attempts=None,
                            environment_type="modal", jobs_dir=Path("out"))
    assert (config.n_concurrent_trials, config.n_attempts) == (8, 1)
    assert (config.environment.type, config.jobs_dir) == ("modal", Path("out"))
    with pytest.raises(ConfigError, match="command line"):
        with_overrides(job(), n_attempts=0)


def test_absolute_paths(tmp_path):
    config = with_absolute_paths(job(datasets=[{"path": "t"}, {"registry": {"path": "r.json"},
                                                                "name": "n"}]), tmp_path)
    assert config.datasets[0].path == tmp_path / "t"
    assert config.datasets[1].registry.path == tmp_path / "r.json"


def test_env_expansion_reports_every_missing_variable():
    config = job(agents=[{"name": "a", "execute": "x",
                          "env": {"KEY": "${SET}", "B": "pre-${UNSET1}-${UNSET2}"}},
                         {"name": "b", "model": "m", "env": {"C": "${UNSET3}"}}])
    lookup = {"SET": "value"}.get
    with pytest.raises(ConfigError) as info:
        expand_agent_env(config, lookup, "job.yaml")
    message = str(info.value)
    for expected in ("agents[0].env.B: ${UNSET1}", "agents[0].env.B: ${UNSET2}",
                     "agents[1].env.C: ${UNSET3}", "export them"):
        assert expected in message
    assert "SET}" not in message.replace("UNSET", "")
    ok = expand_agent_env(job(agents=[{"name": "a", "execute": "x", "env": {"K": "${SET}/x"}}]),
                          lookup)
    assert ok == {"a": {"K": "value/x"}}


@given(st.text(alphabet=st.characters(blacklist_characters="$"), max_size=20),
       st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True))
def test_expand_env_substitutes_only_references(text, name):
    out, missing = expand_env(f"{text}${{{name}}}{text}", {name: "V"}.get)
    assert out == f"{text}V{text}" and missing == []
    out, missing = expand_env(text, {}.get)
    assert out == text and missing == []


def test_redaction_keeps_references_and_hides_literal_secrets():
    config = job(agents=[{"name": "a", "execute": "x",
                          "env": {"API_KEY": "${API_KEY}", "OTHER_TOKEN": "sk-literal",
                                  "MODEL": "gpt"}}])
    env = redacted_job_config(config)["agents"][0]["env"]
    assert env == {"API_KEY": "${API_KEY}", "OTHER_TOKEN": "***", "MODEL": "gpt"}
    assert is_env_template("${A}${B}") and not is_env_template("x${A}")


def test_a_job_user_is_checked_at_load():
    from benchflow.errors import ConfigError
    from benchflow.job.config import parse_job_config

    base = {"agents": [{"name": "oracle"}], "datasets": [{"path": "tasks"}]}
    ok = parse_job_config({**base, "user": {"type": "llm", "persona": "a tester"}})
    assert ok.user == {"type": "llm", "persona": "a tester"}
    with pytest.raises(ConfigError, match=r"user: user.type 'scripted' is not supported"):
        parse_job_config({**base, "user": {"type": "scripted", "persona": "x"}})
