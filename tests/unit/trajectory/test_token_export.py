"""`benchflow export --format tokens` and `--format adp` on a jobs folder: per-role token
samples from captured calls (only the trainable role's own output carries mask 1), named
skips for roles without token data, segments where a prompt does not extend the sequence,
bad roles, and ADP trajectories that validate against the mirrored ADP models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app
from benchflow.errors import ConfigError
from benchflow.job.export import ExportFilters, export_job
from benchflow.paths import RolloutPaths
from benchflow.rollout.result import RolloutResult
from benchflow.trajectory.exporters import AdpTrajectory, TokenSample

from ..view.jobs_fixture import LONG_OUTPUT, make_jobs
from .token_fixture import (
    CODER_1,
    CODER_2,
    CODER_3,
    REVIEW_IN_CODER_PROMPT,
    REVIEWER,
    REVIEWER_PROMPT,
    SYSTEM,
    TOOL_OUTPUT,
    call,
    coder_reviewer_calls,
    write_calls,
)


def _rollout(job: Path, task: str) -> RolloutPaths:
    return RolloutPaths(job / "scripted" / "ds" / f"{task}__1")


def _set_rewards(paths: RolloutPaths, rewards: dict[str, float]) -> None:
    result = RolloutResult.model_validate_json(paths.result.read_text())
    result = result.model_copy(update={"rewards": rewards, "reward": rewards["reward"]})
    paths.result.write_text(result.model_dump_json())


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    job = make_jobs(tmp_path / "jobs") / "job-a"
    t1 = _rollout(job, "t1")
    write_calls(t1.model_calls, coder_reviewer_calls())
    _set_rewards(t1, {"reward": 1.0, "credit:coder": 0.75})
    # t2: the same scene against an endpoint that returned no token ids
    write_calls(_rollout(job, "t2").model_calls,
                [call(0, "coder", 0, None, None), call(1, "reviewer", 1, None, None)])
    return job


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_only_the_coders_own_output_carries_mask_1(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "tokens.jsonl"
    stats = export_job(job, "tokens", out, ExportFilters(roles=("coder",)))
    (record,) = lines(out)
    sample = TokenSample.model_validate(record)
    assert sample.prompt_ids == SYSTEM
    assert sample.completion_ids == [*CODER_1, *TOOL_OUTPUT, *CODER_2,
                                     *REVIEW_IN_CODER_PROMPT, *CODER_3]
    assert sample.loss_mask == ([1] * len(CODER_1) + [0] * len(TOOL_OUTPUT) + [1] * len(CODER_2)
                                + [0] * len(REVIEW_IN_CODER_PROMPT) + [1] * len(CODER_3))
    assert not {30, 31} & set(sample.completion_ids)  # the reviewer's own tokens
    # log-probabilities as the server returned them, null where the model did not generate
    assert sample.logprobs[:3] == pytest.approx([-0.1, -0.2, -0.3])
    assert sample.logprobs[3:5] == [None, None]
    assert all((lp is None) == (m == 0) for lp, m in zip(sample.logprobs, sample.loss_mask,
                                                        strict=True))
    assert (sample.reward, sample.credit) == (1.0, 0.75)
    meta = sample.metadata
    assert meta["credit_source"] == "task" and meta["role"] == "coder"
    assert (meta["call_seqs"], meta["turns"], meta["n_segments"]) == ([0, 1, 3], [0, 2], 1)
    assert meta["rollout"] == "scripted/ds/t1__1" and meta["task"] == "t1"
    assert (meta["agent"], meta["model"]) == ("model", "policy")  # the role's, from its calls
    # t2 had no token data: a counted, named skip (the errored rollout is filtered out)
    assert (stats.lines, stats.rollouts, stats.skipped_samples) == (1, 2, {"no_token_data": 1})


def test_every_role_gives_its_own_sample(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "tokens.jsonl"
    export_job(job, "tokens", out)
    by_role = {r["metadata"]["role"]: r for r in lines(out)}
    assert set(by_role) == {"coder", "reviewer"}
    reviewer = by_role["reviewer"]
    assert (reviewer["prompt_ids"], reviewer["completion_ids"]) == (REVIEWER_PROMPT, REVIEWER)
    assert reviewer["loss_mask"] == [1, 1, 1]
    assert reviewer["credit"] == 1.0 and reviewer["metadata"]["credit_source"] == "reward"


def test_a_prompt_that_does_not_extend_the_sequence_starts_a_segment(job: Path,
                                                                     tmp_path: Path) -> None:
    """The agent rewrote its history (or the template re-rendered a past turn): the next
    call is a new sample, never spliced onto tokens the model did not see before it."""
    rewritten = [*SYSTEM, 99, *TOOL_OUTPUT]  # not SYSTEM + CODER_1 + ...
    write_calls(_rollout(job, "t1").model_calls,
                [call(0, "coder", 0, SYSTEM, CODER_1), call(1, "coder", 0, rewritten, CODER_2),
                 call(2, "coder", 0, None, None)])  # absent: left out, counted
    out = tmp_path / "tokens.jsonl"
    export_job(job, "tokens", out, ExportFilters(roles=("coder",)))
    first, second = lines(out)
    assert (first["prompt_ids"], first["completion_ids"]) == (SYSTEM, CODER_1)
    assert (second["prompt_ids"], second["completion_ids"]) == (rewritten, CODER_2)
    assert [r["metadata"]["segment"] for r in (first, second)] == [0, 1]
    assert first["metadata"]["n_calls_without_token_data"] == 1


def test_failed_and_non_generation_calls_are_not_samples(job: Path, tmp_path: Path) -> None:
    write_calls(_rollout(job, "t1").model_calls, [
        call(0, "coder", 0, SYSTEM, CODER_1, status=500),
        call(1, "coder", 0, SYSTEM, CODER_1, path="/v1/embeddings"),
        call(2, "coder", 0, SYSTEM, CODER_2)])
    out = tmp_path / "tokens.jsonl"
    export_job(job, "tokens", out, ExportFilters(roles=("coder",)))
    (record,) = lines(out)
    assert record["completion_ids"] == CODER_2 and record["metadata"]["n_calls"] == 1


def test_an_unknown_role_is_an_error_and_writes_nothing(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "tokens.jsonl"
    with pytest.raises(ConfigError, match=r"--role tester: no rollout .* has this role "
                                          r"\(roles here: coder, reviewer\)"):
        export_job(job, "tokens", out, ExportFilters(roles=("tester",)))
    assert not out.exists() and not list(tmp_path.glob(".tokens.jsonl*"))
    with pytest.raises(ConfigError, match="--role tester"):
        export_job(job, "sft", tmp_path / "sft.jsonl", ExportFilters(roles=("tester",)))


def test_no_token_data_anywhere_is_one_clear_error(job: Path, tmp_path: Path) -> None:
    write_calls(_rollout(job, "t1").model_calls, [call(0, "coder", 0, None, None)])
    out = tmp_path / "tokens.jsonl"
    with pytest.raises(ConfigError, match="no token samples .*no_token_data: 3 rollout roles"
                                          ".*--capture-tokens"):
        export_job(job, "tokens", out)
    assert not out.exists()


def test_cli_tokens_prints_the_skips_and_exits_2_on_bad_input(job: Path,
                                                               tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "t.jsonl"
    ok = runner.invoke(app, ["export", str(job), "--format", "tokens", "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    assert "wrote 2 lines from 2 rollouts" in ok.output
    assert "skipped no_token_data: 2 rollout roles)" in " ".join(ok.output.split())
    bad = runner.invoke(app, ["export", str(job), "--format", "tokens", "--role", "nobody",
                              "-o", str(out)])
    assert bad.exit_code == 2 and "--role nobody" in bad.output
    assert "Traceback" not in bad.output and len(bad.output.strip().splitlines()) == 1
    parquet_sft = runner.invoke(app, ["export", str(job), "-o", str(tmp_path / "x.parquet")])
    assert parquet_sft.exit_code == 2 and "--format tokens only" in parquet_sft.output


def test_tokens_parquet_round_trips(job: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")  # the `train` extra
    jsonl, parquet = tmp_path / "t.jsonl", tmp_path / "t.parquet"
    export_job(job, "tokens", jsonl)
    export_job(job, "tokens", parquet)
    rows = pq.read_table(parquet).to_pylist()
    expected = lines(jsonl)
    assert len(rows) == len(expected) == 2
    for row, record in zip(rows, expected, strict=True):
        for key in ("prompt_ids", "completion_ids", "loss_mask", "reward", "credit"):
            assert row[key] == record[key]
        assert row["logprobs"] == pytest.approx(record["logprobs"])
        assert json.loads(row["metadata"]) == record["metadata"]
        assert row["role"] == record["metadata"]["role"]


def test_adp_validates_against_the_adp_models(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "adp.jsonl"
    stats = export_job(job, "adp", out)
    records = lines(out)
    assert stats.lines == 2 and [r["details"]["role"] for r in records] == ["coder", "reviewer"]
    coder = AdpTrajectory.model_validate(records[0])
    assert coder.schema_version == "1.2.0" and coder.id == "job-a/scripted/ds/t1__1#coder"
    classes = [item.class_ for item in coder.content]
    assert classes == ["text_observation", "api_action", "text_observation", "message_action"]
    action, observation = coder.content[1], coder.content[2]
    assert action.function == "execute" and action.kwargs == {"command": "cat notes.txt"}
    assert action.reasoning_content == "I should think first"
    assert observation.source == "environment" and observation.content == LONG_OUTPUT
    assert observation.tool_call_id == action.tool_call_id
    assert coder.content[-1].reward == 1.0 and coder.details["reward"] == 1.0
    with pytest.raises(ValueError, match="names no earlier api_action"):
        AdpTrajectory.model_validate({**records[0], "content": records[0]["content"][2:]})
