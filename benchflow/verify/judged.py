"""The final verify of a task scored by an LLM judge: harden, test.sh when the task has one,
then the judge, and the combined rewards (see `benchflow.verify.llm_judge`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.sandbox.base import Sandbox
from benchflow.task.models import HardeningConfig
from benchflow.verify.baseline import Baseline
from benchflow.verify.hardening import harden, verify_hardened
from benchflow.verify.llm_judge import JudgeRun, combine, run_judge
from benchflow.verify.rubric import JudgeVerifier
from benchflow.verify.runner import VerifierRun, verify


def judge_run(judge: JudgeVerifier, endpoint: ModelEndpoint | None,
              fallback_model: str | None) -> JudgeRun:
    """The judge's endpoint with its model: the rubric's, else the endpoint's, else the agent's.

    Raises:
        ConfigError: no endpoint or no model.
    """
    return JudgeRun(endpoint=judge_endpoint(
        endpoint, judge.model, fallback_model,
        no_endpoint="this task is scored by an LLM judge: give a judge endpoint "
                    "(--judge-base-url, or the run's --model-base-url / --model-server)",
        no_model="this task is scored by an LLM judge: name its model (rubric `model`, "
                 "verifier.md `model`, or --judge-model)"))


def judge_endpoint(endpoint: ModelEndpoint | None, preferred_model: str | None,
                   fallback_model: str | None, *, no_endpoint: str, no_model: str
                   ) -> ModelEndpoint:
    """`endpoint` with the judge's model: `preferred_model`, else the endpoint's own, else
    `fallback_model` (the agent's).

    Raises:
        ConfigError: `no_endpoint` without a served endpoint, `no_model` without a model.
    """
    if endpoint is None or endpoint.base_url is None:
        raise ConfigError(no_endpoint)
    model = preferred_model or endpoint.model or fallback_model
    if not model:
        raise ConfigError(no_model)
    return endpoint.model_copy(update={"model": model})


async def judged_verify(sandbox: Sandbox, run: VerifierRun, out_dir: Path, logs_dir: Path, *,
                        judge: JudgeVerifier, judge_run: JudgeRun, instruction: str,
                        agent_message: str, baseline: Baseline | None,
                        agent_user: str | None, config: HardeningConfig,
                        pytest_plugins: Sequence[str] = ()) -> dict[str, float]:
    """Harden (when a baseline was taken), run test.sh if the task has one, then judge.

    Raises:
        VerifierTampered, VerifierFailed, VerifierTimeout, RewardMissingError: as test.sh's verify.
        VerifierError: the judge failed or skipped a criterion.
    """
    script_rewards = None
    if judge.with_script:
        if baseline is not None:
            done = await verify_hardened(sandbox, run, out_dir, logs_dir, baseline=baseline,
                                         agent_user=agent_user, config=config,
                                         pytest_plugins=pytest_plugins)
            script_rewards = done.outcome.rewards
        else:
            script_rewards = (await verify(sandbox, run, logs_dir)).rewards
    elif baseline is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        report = await harden(sandbox, baseline, agent_user=agent_user, config=config,
                              verifier_mount=run.mount)
        (out_dir / "hardening.json").write_text(report.model_dump_json(indent=2))
    judge_rewards = await run_judge(sandbox, judge, judge_run, instruction=instruction,
                                    agent_message=agent_message, out_dir=out_dir)
    if not judge.with_script:
        await sandbox.download("/logs", logs_dir)
    return combine(judge, judge_rewards, script_rewards)


__all__ = ["judge_endpoint", "judge_run", "judged_verify"]
