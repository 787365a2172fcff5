"""The four real agents in two-role scenes, and what benchflow records of them (issue 22).

Two rollouts of `tasks/offline-coder-reviewer` (coder -> reviewer -> coder) against the
scripted model server, run in parallel, with model calls captured: claude codes and codex
reviews; gemini codes and opencode reviews. Each role has its own key to the model server,
so the script (`coder-reviewer.yaml`) serves each role its own commands.

Asserted on the `sft`, `sharegpt` and `atif` exports and on the viewer's HTML: every tool
call has non-empty arguments holding the scripted command and an output holding the
command's real output; every role's tokens are > 0 (codex and gemini report none over ACP:
theirs come from the model server's counts); each line's metadata names its role's agent;
`--from model-calls` gives lines for all four wire APIs.

    make test-faithful      # pytest -m slow tests/conformance/test_faithful_records.py
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conformance import faithful
from tests.golden.record import PAIRS, run_pairs

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def job(job_label: str, tmp_path_factory: pytest.TempPathFactory,
        request: pytest.FixtureRequest) -> Path:
    """Both rollouts, run once for the module; the job folder."""
    jobs_dir = tmp_path_factory.mktemp("faithful-jobs")
    started = time.monotonic()
    results = anyio.run(run_pairs, jobs_dir, job_label, backend="asyncio")
    wall = time.monotonic() - started
    _report(request, results, wall)
    return jobs_dir / job_label


def _report(request: pytest.FixtureRequest, results: dict[str, Any], wall: float) -> None:
    lines = [f"faithful records: {len(results)} two-role rollouts in parallel, {wall:.1f} s",
             f"{'rollout':<16} {'role':<9} {'agent':<9} {'in tok':>8} {'out tok':>7} "
             f"{'source':<12} {'tools':>5}  reward"]
    for label, result in results.items():
        for name, role in result.roles.items():
            tokens = role.tokens
            lines.append(f"{label:<16} {name:<9} {role.agent:<9} "
                         f"{tokens.input if tokens else '-':>8} "
                         f"{tokens.output if tokens else '-':>7} {role.usage_source or '-':<12} "
                         f"{role.n_tool_calls:>5}  {result.reward}")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)


@pytest.mark.timeout(1800)
def test_every_role_scored_and_counted(job: Path) -> None:
    numbers = faithful.check_results(job)
    assert set(numbers) == set(PAIRS)
    sources = {agent: source for roles in numbers.values()
               for agent, _, _, source in roles.values()}
    assert sources == {"claude": "acp", "opencode": "acp", "codex": "model_calls",
                       "gemini": "model_calls"}


@pytest.mark.timeout(600)
def test_exports_hold_every_command_and_its_real_output(job: Path, tmp_path: Path) -> None:
    assert faithful.check_exports(job, tmp_path) == {"sft": 4, "sharegpt": 4, "atif": 4}


@pytest.mark.timeout(600)
def test_viewer_shows_every_command_and_output(job: Path) -> None:
    assert faithful.check_viewer(job) > 0


@pytest.mark.timeout(600)
def test_model_calls_export_covers_every_api(job: Path, tmp_path: Path) -> None:
    lines, skipped = faithful.check_model_calls(job, tmp_path)
    assert lines >= 12  # at least three calls per role and turn
    assert "skipped" in skipped or skipped == ""
