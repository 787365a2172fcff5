"""Multi-step tasks (Harbor's `[[steps]]`) and the one place a verification is chosen.

A multi-step task's steps run in order in one sandbox. For each step: its `workdir/` files
are copied into the workdir (and its `setup.sh` run), its instruction replaces the task's
(the rollout's scenes run with it; the oracle runs the step's solution), then the step's
tests run (the task's verifier folder with the step's laid over it). A step scoring below
its `min_reward` stops the rollout. The rollout's rewards follow
`multi_step_reward_strategy`: `mean` (default: per key, over the steps that ran, a missing
key counting 0) or `final` (the last step that ran); each step's rewards are also kept as
`<step>/<key>` and in `result.steps`.

Every step's verification is chosen by `verify_with_mode`: a separate sandbox when the
step (or task) says `separate`; otherwise in the agent's sandbox, the last step with full
hardening (when the rollout is hardened) and the steps before it with a soft verify (the
fixed verifier environment without the destructive steps, so the next step can go on).
"""

from __future__ import annotations

import logging
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from benchflow.errors import AgentExecutionError, AgentTimeout
from benchflow.rollout.result import TaskStepResult
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult
from benchflow.rollout.healthcheck import wait_healthy
from benchflow.sandbox.spec import SandboxSpec
from benchflow.steps import desugar
from benchflow.task import Task, TaskStep
from benchflow.task._files import is_file
from benchflow.task.collection import collection_pass
from benchflow.task.models import SandboxSettings
from benchflow.verify.hardening import verify_hardened
from benchflow.verify.runner import (
    VERIFIER_LOGS,
    VerifierOutcome,
    VerifierRun,
    script_command,
    verify,
)
from benchflow.verify.collect import collect_main, collect_services, missing_lines
from benchflow.verify.separate import SeparateVerifier, verify_separately
from benchflow.verify.soft import soft_verify
from benchflow.verify.verifier_env import verifier_env

if TYPE_CHECKING:
    from benchflow.rollout.rollout import Rollout

log = logging.getLogger(__name__)


async def run_task_steps(rollout: Rollout) -> None:
    """Run every step of the rollout's multi-step task: agent, then verifier, then the gate."""
    task, ctx = rollout.task, rollout.ctx
    assert task is not None and ctx is not None and ctx.trajectory is not None
    results: list[TaskStepResult] = []
    for step in task.steps:
        record = TaskStepResult(name=step.name)
        results.append(record)
        rollout.result.steps = results
        ctx.trajectory.context["task_step"] = step.name
        ctx.solution_dir = step.solution_dir or task.solution_dir
        try:
            started = anyio.current_time()
            prompts, tool_calls = rollout.result.n_prompts, rollout.result.n_tool_calls
            try:
                with rollout.clock.phase("agent_execution"):
                    await _prepare_step(rollout, step)
                    rollout.steps = desugar(rollout.scenes, step.instruction, task.prompts,
                                            rollout.skills.declared if rollout.skills else None)
                    await _bounded(rollout, step)
            finally:
                record.n_prompts = rollout.result.n_prompts - prompts
                record.n_tool_calls = rollout.result.n_tool_calls - tool_calls
            record.agent_sec = round(anyio.current_time() - started, 3)
            if rollout.config.verifier_disabled:
                continue
            started = anyio.current_time()
            with rollout.clock.phase("verifier"):
                outcome = await verify_with_mode(rollout, step,
                                                 final=step.index == len(task.steps) - 1)
            record.verifier_sec = round(anyio.current_time() - started, 3)
        finally:
            ctx.trajectory.context.pop("task_step", None)
        record.rewards = outcome.rewards
        record.gate_failed = step.config.gate_failure(outcome.rewards)
        if record.gate_failed:
            rollout.result.warnings.append(f"{record.gate_failed}: the remaining steps did not "
                                           "run")
            log.info("%s", record.gate_failed)
            break
    if not rollout.config.verifier_disabled:
        rewards = combine_step_rewards(results, task.config.multi_step_reward_strategy)
        rollout.result.rewards = rewards
        rollout.result.reward = rewards.get("reward")


def combine_step_rewards(results: list[TaskStepResult], strategy: str | None) -> dict[str, float]:
    """The rollout's rewards from its steps' (Harbor's strategies), plus `<step>/<key>`."""
    scored = [r.rewards for r in results if r.rewards is not None]
    if not scored:
        return {}
    if strategy == "final":
        combined = dict(scored[-1])
    else:
        keys = dict.fromkeys(k for rewards in scored for k in rewards)
        combined = {k: sum(r.get(k, 0.0) for r in scored) / len(scored) for k in keys}
    for result in results:
        for key, value in (result.rewards or {}).items():
            combined[f"{result.name}/{key}"] = value
    return combined


async def _prepare_step(rollout: Rollout, step: TaskStep) -> None:
    """The step's instruction file, its workdir files and setup.sh, then its healthcheck
    (Harbor's order)."""
    ctx, sandbox = rollout.ctx, rollout.sandbox
    assert ctx is not None and sandbox is not None
    await sandbox.upload_bytes(step.instruction.encode(), rollout.config.instruction_path)
    if step.workdir_dir is not None:
        await _run_step_setup(rollout, step)
    if step.config.healthcheck is not None:
        await wait_healthy(sandbox, step.config.healthcheck, what=f"step {step.name!r}")


async def _run_step_setup(rollout: Rollout, step: TaskStep) -> None:
    ctx, sandbox = rollout.ctx, rollout.sandbox
    assert ctx is not None and sandbox is not None and step.workdir_dir is not None
    await sandbox.upload(step.workdir_dir, ctx.workdir)
    owner = ctx.agent_user
    script = ('set -e; if [ -n "$2" ]; then chown -R "$2" "$1"; fi; '
              'if [ -f "$1/setup.sh" ]; then cd "$1" && bash setup.sh; fi')
    result = await sandbox.exec(["sh", "-c", script, "setup", ctx.workdir, owner or ""],
                                user="root", cwd=ctx.workdir, env={"PATH": SYSTEM_PATH},
                                timeout=ctx.agent_timeout_sec)
    (rollout.paths.root / "steps" / step.name).mkdir(parents=True, exist_ok=True)
    (rollout.paths.root / "steps" / step.name / "setup.txt").write_bytes(
        result.stdout + result.stderr)
    if not result.ok:
        raise AgentExecutionError(f"step {step.name!r}: workdir/setup.sh exited with code "
                                  f"{result.exit_code}: {result.text(1000)}")


async def _bounded(rollout: Rollout, step: TaskStep) -> None:
    """The step's agent phase under its own `agent.timeout_sec`, when it sets one."""
    assert rollout.ctx is not None
    budget = step.config.agent.timeout_sec
    if budget is None:
        await rollout.run_steps()
        return
    limit = rollout.ctx.scaled(budget)
    try:
        with anyio.fail_after(limit):
            await rollout.run_steps()
    except TimeoutError as exc:
        raise AgentTimeout("agent", limit, f"step {step.name!r} exceeded its agent timeout "
                           f"of {limit:g} s") from exc


@contextmanager
def step_tests(task_verifier_dir: Path, step: TaskStep | None) -> Iterator[Path]:
    """The verifier folder to upload: the task's, with the step's own files laid over it."""
    if step is None or step.verifier_dir is None:
        yield task_verifier_dir
        return
    with tempfile.TemporaryDirectory(prefix="bf-step-tests-") as tmp:
        merged = Path(tmp) / "tests"
        if task_verifier_dir.is_dir():
            shutil.copytree(task_verifier_dir, merged)
        shutil.copytree(step.verifier_dir, merged, dirs_exist_ok=True)
        yield merged


async def verify_with_mode(rollout: Rollout, step: TaskStep | None, *,
                           final: bool) -> VerifierOutcome:
    """Run the task's (or one step's) verifier where it belongs; returns its rewards.

    Raises:
        VerifierError and its subclasses, SandboxError (separate mode's sandbox).
    """
    task, sandbox, ctx = rollout.task, rollout.sandbox, rollout.ctx
    assert task is not None and sandbox is not None and ctx is not None
    verifier = task.config.verifier
    base = step.config.verifier if step else None
    timeout = (rollout.config.verifier_timeout_sec or (base and base.timeout_sec)
               or verifier.timeout_sec)
    env = {**verifier.env, **(base.env if base else {})}
    where = rollout.paths.root / "steps" / step.name if step else rollout.paths.root
    out_dir = where / "verifier" if step else rollout.paths.verifier_dir
    logs_dir = where / "logs" if step else rollout.paths.logs_dir
    one = collection_pass(task.config, step.config if step else None)
    with step_tests(task.verifier_dir, step) as tests:
        run = VerifierRun(verifier_dir=tests, mount=task.verifier_mount,
                          timeout_sec=timeout * rollout.config.timeout_multiplier, env=env,
                          cwd=sandbox.workdir, command=script_command(task))
        hook_env = (None if rollout.baseline is None else verifier_env(
            workspace=rollout.baseline.workspace or run.cwd, verifier_dir=run.mount,
            task_env={}, config=verifier.hardening, baseline=rollout.baseline))
        if (task.config.step_separate(step.config) if step else verifier.separate):
            separate = SeparateVerifier(
                environment=rollout.config.environment,
                provider_config=rollout.config.provider_config,
                spec=verifier_spec(rollout, step), artifacts=one.artifacts, hooks=one.hooks,
                stop_main=final, artifacts_dir=where / "artifacts",
                image_holds_tests=verifier_image_is_own(rollout, step))
            outcome, warnings = await verify_separately(
                sandbox, separate, run, out_dir, logs_dir, hardened=rollout.hardened,
                config=verifier.hardening, pytest_plugins=verifier.pytest_plugins,
                main_env=hook_env)
            rollout.result.warnings.extend(warnings)
            return outcome
        # Harbor's order: hooks, then the artifacts (kept for the record, as the agent left
        # them, before hardening), main first; main keeps running for the verifier
        got = await collect_main(sandbox, one, where / "artifacts", main_env=hook_env)
        got.extend(await collect_services(sandbox, one, where / "artifacts", stop_main=False))
        rollout.result.warnings.extend(got.warnings)
        for line in missing_lines(got.missing, "the verifier"):
            log.info("%s", line)
        if not final:
            return await _soft(rollout, run, logs_dir)
        if rollout.baseline is not None:
            done = await verify_hardened(
                sandbox, run, out_dir, logs_dir, baseline=rollout.baseline,
                agent_user=ctx.agent_user, config=verifier.hardening,
                pytest_plugins=verifier.pytest_plugins,
                task_files=task_placed_files(task, step, ctx.workdir),
                folded=ctx.harden_fold.hardened if ctx.harden_fold and step is None else None)
            return done.outcome
        return await verify(sandbox, run, logs_dir)


async def _soft(rollout: Rollout, run: VerifierRun, logs_dir: Path) -> VerifierOutcome:
    """A step before the last, in the agent's sandbox: nothing killed, restored or locked.
    Its /logs/verifier (rewards, test.sh's output) is kept in `logs_dir/verifier/`."""
    task, sandbox = rollout.task, rollout.sandbox
    assert task is not None and sandbox is not None
    verifier = task.config.verifier
    if rollout.baseline is None:
        outcome = await verify(sandbox, run, logs_dir)
    else:
        soft = await soft_verify(sandbox, run, config=verifier.hardening,
                                 baseline=rollout.baseline, strict=True,
                                 pytest_plugins=verifier.pytest_plugins,
                                 out_dir=logs_dir / "verifier")
        assert soft.rewards is not None  # strict: a failure raised
        await sandbox.download(VERIFIER_LOGS, logs_dir / "verifier")
        outcome = VerifierOutcome(soft.rewards, ExecResult(0, soft.output.encode(), b""))
    # The next step's agent must not find this step's tests or outputs.
    await sandbox.exec(["sh", "-c", 'rm -rf -- "$1" /logs/verifier', "sh", run.mount],
                       user="root", env={"PATH": SYSTEM_PATH}, timeout=60)
    return outcome


def task_placed_files(task: Task, upto: TaskStep | None, workdir: str) -> dict[str, Path]:
    """The files the steps' `workdir/` folders placed in the sandbox, up to `upto` (a later
    step's version of a path wins): sandbox path -> the task's file."""
    placed: dict[str, Path] = {}
    for step in task.steps[:upto.index + 1] if upto else ():
        folder = step.workdir_dir
        if folder is None:
            continue
        for file in sorted(folder.rglob("*")):
            if file.is_file() and not file.is_symlink():
                placed[posixpath.join(workdir, file.relative_to(folder).as_posix())] = file
    return placed


def _declared_environment(rollout: Rollout, step: TaskStep | None) -> SandboxSettings | None:
    task = rollout.task
    assert task is not None
    return (step.config.verifier.environment if step else None) or task.config.verifier.environment


def _own_image(rollout: Rollout, step: TaskStep | None) -> tuple[str | None, Path | None] | None:
    """The separate verifier's own image, in Harbor's order: the step's `docker_image`, the
    step's tests/Dockerfile, the task's `[verifier.environment] docker_image`, the task's
    tests/Dockerfile. Returns (image name or None, the build context next to it or None),
    or None when the verifier uses a copy of the task's environment. A named image is used
    as given (a Dockerfile beside it is built only with `force_build`)."""
    task = rollout.task
    assert task is not None
    candidates = [(step.config.verifier.environment, step.verifier_dir)] if step else []
    candidates.append((task.config.verifier.environment, task.verifier_dir))
    for environment, folder in candidates:
        context = folder if folder is not None and is_file(folder / "Dockerfile") else None
        if environment is not None and environment.docker_image:
            return environment.docker_image, context
        if context is not None:
            return None, context
    return None


def verifier_image_is_own(rollout: Rollout, step: TaskStep | None) -> bool:
    """Whether the separate verifier's image is its own (a tests/Dockerfile or a declared
    docker_image) rather than a fresh copy of the task's environment."""
    return _own_image(rollout, step) is not None


def verifier_spec(rollout: Rollout, step: TaskStep | None) -> SandboxSpec:
    """The separate verifier's sandbox: its own image (`_own_image`: a declared
    `docker_image` used as given, like `[environment] docker_image`, or a tests/Dockerfile
    built), else the task's; its resources and network when set, else the task
    environment's (as Harbor copies `[environment]`). Never the agent's model-only network:
    the verifier talks to no model endpoint."""
    task, agent_spec = rollout.task, rollout.spec
    assert task is not None and agent_spec is not None
    declared = _declared_environment(rollout, step)
    own = _own_image(rollout, step)
    update: dict[str, object] = {
        "name": f"{agent_spec.name}-verifier",
        "build_log_path": rollout.paths.root / "steps" / step.name / "verifier-build.log"
        if step else rollout.paths.verifier_dir / "build.log",
        "network": None,
        "network_policy": "public" if (declared or task.config.sandbox).allow_internet else "none"}
    if own is not None:  # one image: the task's other services are not the verifier's
        update |= {"docker_image": own[0], "environment_dir": own[1], "compose_file": None}
    if declared is not None:
        update |= {"cpus": declared.cpus, "memory_mb": declared.memory_mb,
                   "storage_mb": declared.storage_mb, "gpus": declared.gpus,
                   "env": {**agent_spec.env, **declared.env}}
        if declared.workdir:
            update["workdir"] = declared.workdir
    return agent_spec.model_copy(update=update)


__all__ = ["combine_step_rewards", "run_task_steps", "step_tests", "task_placed_files",
           "verifier_image_is_own", "verifier_spec", "verify_with_mode"]
