"""The Rollout: one agent configuration on one task, as a short sequence of phases.

setup -> start -> install_agent -> execute -> verify -> cleanup. Each phase is a method;
`run()` calls them in order, turns any error into the result's `error`, always cleans
up (shielded from cancellation) and writes `result.json` as the rollout ends.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime

import anyio

from benchflow.agents.base import AgentContext, AgentDriver, StepOutcome
from benchflow.agents.builtin import solution_placed, solution_tree
from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.image_cache import AgentImagePlan, commit_agent_image, prepare_agent_image
from benchflow.agents.image_cache import install_cache_outcome
from benchflow.agents.layers import LayerPlan, prepare_layers
from benchflow.agents.registry import TRUSTED_AGENTS, check_scenes, check_task, get_driver
from benchflow.config import RolloutConfig
from benchflow.errors import BenchflowError, RolloutCancelled, SandboxTeardownError
from benchflow.mcp import McpServer, merge_servers
from benchflow.paths import RolloutPaths, rollout_name
from benchflow.rollout.budget import agent_phase_budget, agent_phase_deadline
from benchflow.rollout.events import RolloutEvent, RolloutEventKind, RolloutListener
from benchflow.rollout.logs import RolloutLogFile, mask_in_rollout_log, rollout_log
from benchflow.rollout.model_endpoint import RolloutNetwork, needs_network_install
from benchflow.rollout.result import (
    ErrorInfo,
    PhaseClock,
    RolloutResult,
    Tokens,
    append_error_txt,
    record_endpoint_score,
    write_error_txt,
    write_json_atomic,
)
from benchflow.rollout.scenes import resolve_scenes
from benchflow.rollout.secrets import redact_text, redacted_config_json
from benchflow.rollout.skills import RolloutSkills
from benchflow.rollout.task_steps import run_task_steps, verify_with_mode
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.healthcheck import wait_healthy
from benchflow.rollout.sandbox_needs import require_sandbox
from benchflow.sandbox.labels import LABEL_JOB, LABEL_ROLLOUT
from benchflow.sandbox.ledger import LEDGER_NAME
from benchflow.sandbox.factory import create_sandbox
from benchflow.sandbox.spec import SandboxSpec, SpecTree
from benchflow.settings import get_settings
from benchflow.steps import Step, desugar, session_groups
from benchflow.task import Task, load_task
from benchflow.task.env_templates import resolve_mcp_servers, resolve_task_env
from benchflow.telemetry.ids import TraceIds, step_span_id, traceparent
from benchflow.trajectory.events import TrajectoryHeader
from benchflow.trajectory.writer import TrajectoryWriter
from benchflow.verify.baseline import Baseline, take_baseline
from benchflow.verify.rubric import JudgeVerifier, judge_verifier
from benchflow.verify.runner import VerifierRun
from benchflow.verify.soft import SoftVerifyResult, soft_verify

log = logging.getLogger(__name__)

_GIT_HEAD_MAX_AGE_SEC = 60.0
"""How long one `git rev-parse HEAD` of a task folder serves rollouts of that task."""
_CLEANUP_TIMEOUT_SEC = 60.0


def default_job_name() -> str:
    return datetime.now().strftime("%Y-%m-%d__%H-%M-%S")


class Rollout:
    """Runs one `RolloutConfig`. Use `await Rollout(config).run()` or `benchflow.run(config)`."""

    def __init__(self, config: RolloutConfig, *, task: Task | None = None,
                 listener: RolloutListener | None = None,
                 drivers: Mapping[str, AgentDriver] | None = None) -> None:
        self.config = config = resolve_scenes(config, task)
        self.task = task
        self.job_name = config.job_name or default_job_name()
        self.listener = listener
        self._given_drivers = dict(drivers or {})
        # The task folder's name, as the job spec's layout uses it (a task.md name may hold "/").
        folder = task.path if task else config.task_path.expanduser().resolve()
        task_name = folder.name
        self.dataset_name = config.dataset_name or folder.parent.name
        self.paths = RolloutPaths.for_trial(config.jobs_dir, self.job_name, config.agent_name,
                                            self.dataset_name, task_name, config.attempt)
        self.rollout_name = rollout_name(config.agent_name, self.dataset_name, task_name,
                                         config.attempt)
        self.result = RolloutResult(
            job_name=self.job_name, rollout_name=self.rollout_name, task_name=task_name,
            dataset_name=self.dataset_name, agent_name=config.agent_name,
            model=config.model_name, attempt=config.attempt)
        self.trace = TraceIds.new(config.run_id)
        self.result.run_id, self.result.trace_id, self.result.span_id = (
            self.trace.run_id, self.trace.trace_id, self.trace.span_id)
        self.clock = PhaseClock(self.result)
        self.steps: list[Step] = []
        self.skills: RolloutSkills | None = None
        self.scenes = list(config.scenes)  # with the model endpoint's env, once set up
        self.network: RolloutNetwork | None = None
        self.drivers: dict[str, AgentDriver] = {}
        self.sandbox: Sandbox | None = None
        self.spec: SandboxSpec | None = None
        self.ctx: AgentContext | None = None
        self._logs_collected = False
        self._started = False
        self._agent_image: AgentImagePlan | None = None
        self._agent_layers = LayerPlan()
        self._solution_tree: SpecTree | None = None
        self.baseline: Baseline | None = None
        self._secrets: frozenset[str] = frozenset()
        self._mcp_servers: list[McpServer] = []
        self.final_text = ""
        """The agent's last non-empty message (for an LLM judge and QA answers)."""

    @property
    def hardened(self) -> bool:
        """Whether the final verify hardens the sandbox (always, unless only trusted agents ran)."""
        if self.config.harden is not None:
            return self.config.harden
        return any(role.agent not in TRUSTED_AGENTS
                   for scene in self.config.scenes for role in scene.roles)

    # -- phases --------------------------------------------------------------------------

    async def setup(self) -> None:
        """Load the task, desugar scenes, resolve agents, and describe the sandbox. No container yet."""
        config = self.config
        if self.task is None:
            self.task = load_task(config.task_path)
        resolved = resolve_task_env(self.task)  # ${VAR} in env tables, from the host
        self.task = task = resolved.task
        self._mcp_servers, mcp_secrets = resolve_mcp_servers(config.mcp_servers)
        self._secrets = resolved.secrets | mcp_secrets
        mask_in_rollout_log(self._secrets)
        # `git rev-parse` off the event loop, once a minute per task folder however many
        # rollouts of the task start together
        known, commit = task.recent_git_commit_id(_GIT_HEAD_MAX_AGE_SEC)
        self.result.task_git_commit_id = commit if known else await anyio.to_thread.run_sync(
            task.git_commit_id, _GIT_HEAD_MAX_AGE_SEC)
        check_task(task, [role.agent for scene in config.scenes for role in scene.roles])
        self.network = RolloutNetwork(config, allow_internet=task.config.sandbox.allow_internet,
                                      job_name=self.job_name,
                                      log_dir=self.paths.root / "model_server",
                                      capture_path=self.paths.model_calls)
        require_sandbox(config, task, self.network.policy, self._given_drivers)
        await self.network.open()
        self.scenes = self.network.scenes(config.scenes)
        self.skills = RolloutSkills(config, task, self.scenes)
        self.steps = desugar(self.scenes, task.instruction, task.prompts, self.skills.declared)
        check_scenes(self.scenes, given=self._given_drivers)
        self.drivers = {role.agent: self._given_drivers.get(role.agent) or get_driver(role.agent)
                        for scene in config.scenes for role in scene.roles}
        settings = get_settings()
        sandbox_cfg = task.config.sandbox
        # the oracle's solution in the start's one upload, when only built-in agents run
        self._solution_tree = solution_tree(task, list(self.drivers.values()))
        spec = SandboxSpec(
            name=task.path.name,
            environment_dir=task.environment_dir if task.dockerfile else None,
            docker_image=sandbox_cfg.docker_image,
            force_build=config.force_build,
            build_timeout_sec=sandbox_cfg.build_timeout_sec * config.timeout_multiplier,
            cpus=config.override_cpus or sandbox_cfg.cpus,
            memory_mb=config.override_memory_mb or sandbox_cfg.memory_mb,
            storage_mb=config.override_storage_mb or sandbox_cfg.storage_mb,
            gpus=sandbox_cfg.gpus,
            workdir=sandbox_cfg.workdir,
            env={**sandbox_cfg.env, "ROLLOUT_TASK_INSTRUCTION": config.instruction_path},
            files={config.instruction_path: task.instruction.encode()},
            trees=(self._solution_tree,) if self._solution_tree else (),
            extra_ca_certs=(config.extra_ca_certs if config.extra_ca_certs is not None
                            else settings.extra_ca_certs),
            labels={LABEL_JOB: self.job_name, LABEL_ROLLOUT: self.rollout_name},
            build_log_path=self.paths.build_log,
            ledger_path=config.jobs_dir / self.job_name / LEDGER_NAME,
            **self.network.sandbox_fields(online_install=needs_network_install(
                self.drivers.values())),
        )
        self.spec = spec
        self.sandbox = create_sandbox(config.environment, spec, config.provider_config)
        self._warn_unhardened()

    async def start(self) -> None:
        """Start the sandbox and place the instruction at `instruction_path`."""
        assert self.sandbox is not None and self.task is not None
        self._agent_layers = await prepare_layers(  # agents cached one by one (layers.py)
            self.sandbox, list(self.drivers.values()), self.task, self.paths,
            self.config.timeout_multiplier)
        self._emit(RolloutEventKind.SANDBOX_START)
        self._agent_image = await prepare_agent_image(self.sandbox, list(self.drivers))
        await self.sandbox.start()
        self._started = True
        if self.task.config.sandbox.healthcheck is not None:
            await wait_healthy(self.sandbox, self.task.config.sandbox.healthcheck)
        self.ctx = AgentContext(
            sandbox=self.sandbox, task=self.task, paths=self.paths,
            workdir=self.sandbox.workdir, agent_user=self.task.config.agent.user,
            instruction_path=self.config.instruction_path,
            timeout_multiplier=self.config.timeout_multiplier,
            agent_layers=self._agent_layers.agents, platform=self._agent_layers.platform,
            env={**(self.network.env if self.network else {}),
                 "ROLLOUT_TASK_INSTRUCTION": self.config.instruction_path,
                 "TRACEPARENT": self.trace.traceparent},
            mcp_servers=merge_servers(self.task.config.sandbox.mcp_servers, self._mcp_servers),
            trace=self.trace, dataset_name=self.dataset_name, rollout_name=self.rollout_name,
            model_endpoint=self.network.host_endpoint() if self.network else None,
        )
        if self._solution_tree is not None:
            solution_placed(self.ctx, self._solution_tree)

    async def install_agent(self) -> None:
        """Install each distinct agent once; cache registered agents as an image layer.

        Registered (manifest) agents install and are committed first, so nothing a
        built-in agent places (the oracle's solution) can reach a cached image.
        """
        assert self.ctx is not None
        self._emit(RolloutEventKind.AGENT_INSTALL)
        cached = [d for d in self.drivers.values() if isinstance(d, AcpAgentDriver)]
        for driver in cached:
            await driver.install(self.ctx)
        if cached:
            saved = await commit_agent_image(self.sandbox, self._agent_image)
            self.result.agent_install_cache = install_cache_outcome(
                self._agent_image, saved, self._agent_layers.layers)
        for driver in self.drivers.values():
            if driver not in cached:
                await driver.install(self.ctx)
        if self.hardened:
            hardening = self.task.config.verifier.hardening
            # after installs and the workspace chown: the agent's changes are what differs
            self.baseline = await take_baseline(self.ctx.sandbox, workspace=self.ctx.workdir,
                                                config=hardening,
                                                scrub_git=hardening.scrub_git_history)

    def _warn_unhardened(self) -> None:
        """Record in the result that `harden=False` left an untrusted agent's score unprotected."""
        trusted_only = all(role.agent in TRUSTED_AGENTS
                           for scene in self.config.scenes for role in scene.roles)
        if self.config.harden is False and not trusted_only:
            message = ("hardening is off (--no-harden / harden: false): nothing the agent did "
                       "to the sandbox was undone or checked before the verifier ran, so this "
                       "reward is not protected against reward hacking")
            log.warning("%s: %s", self.rollout_name, message)
            self.result.warnings.append(message)

    async def execute(self) -> None:
        """Run every step; one session per run of consecutive steps of one role in one scene."""
        await self.open_agent_phase()
        await self.run_steps()

    async def open_agent_phase(self) -> None:
        """Once, before the first agent step: network policy, trajectory file, skills."""
        assert self.ctx is not None and self.skills is not None
        if self.ctx.trajectory is not None:
            return
        if self.network is not None:  # the policy holds from the first agent step on
            await self.network.isolate(self.ctx.sandbox)
        self._emit(RolloutEventKind.AGENT_START)
        with anyio.CancelScope(shield=True):  # a cancellation must not drop the open file
            self.ctx.trajectory = await anyio.to_thread.run_sync(self._open_trajectory)
        await self.skills.stage(self.ctx)
        if self.network is not None:
            self.network.attribute_calls(self.ctx.trajectory)

    async def run_steps(self) -> None:
        """The desugared steps (`self.steps`), or the user's rounds when a user drives, all
        within the agent phase's one budget (`budget.py`)."""
        assert self.ctx is not None and self.skills is not None and self.task is not None
        assert self.ctx.trajectory is not None
        budget = agent_phase_budget(self.task, self.drivers, self.config.timeout_multiplier)
        with agent_phase_deadline(self.ctx, budget):
            if self.config.user is not None or "user" in self.task.raw_frontmatter:
                await self._run_user_rounds()
                return
            for group in session_groups(self.steps):
                first, driver = group[0], self.drivers[group[0].role.agent]
                async with self.skills.session(self.ctx, driver, first) as skills, \
                        driver.connect(self.ctx, first.role, first.scene) as connection:
                    for step in group:
                        self._enter_step(step)
                        self._count(await connection.prompt(
                            dataclasses.replace(step, skills=skills)))
                self.ctx.trajectory.span_id = self.trace.span_id

    def _enter_step(self, step: Step) -> None:
        """Attribute what follows to the step's span (trajectory events, the agent's TRACEPARENT)."""
        assert self.ctx is not None and self.ctx.trajectory is not None
        span = step_span_id(self.trace.trace_id, step.scene_index, step.turn_index)
        self.ctx.trajectory.span_id = span
        self.ctx.env = {**self.ctx.env, "TRACEPARENT": traceparent(self.trace.trace_id, span)}

    def _count(self, outcome: StepOutcome) -> None:
        """Add one answered prompt to the result: counters, and tokens and cost when reported."""
        result = self.result
        result.n_prompts += 1
        result.n_tool_calls += outcome.n_tool_calls
        if outcome.agent_text.strip():
            self.final_text = outcome.agent_text
        if outcome.input_tokens or outcome.output_tokens:
            tokens = result.tokens or Tokens()
            result.tokens = Tokens(input=tokens.input + outcome.input_tokens,
                                   output=tokens.output + outcome.output_tokens,
                                   cached=tokens.cached)
        if outcome.cost is not None:
            result.cost = round((result.cost or 0.0) + outcome.cost, 12)

    async def _run_user_rounds(self) -> None:
        """Multi-round: the user drives the first role of the first scene, a session a round."""
        assert self.ctx is not None and self.task is not None
        role, scene = self.scenes[0].roles[0], self.scenes[0].name
        assert self.skills is not None
        solution = None
        if self.config.oracle_access and self.task.solution_dir is not None:
            solution = (self.task.solution_dir / "solve.sh").read_text(errors="replace")
        verifier = self.task.config.verifier

        async def score_round(round_index: int) -> SoftVerifyResult:
            assert self.sandbox is not None
            return await soft_verify(self.sandbox, self._verifier_run(), config=verifier.hardening,
                                     baseline=self.baseline, pytest_plugins=verifier.pytest_plugins,
                                     out_dir=self.paths.verifier_dir / f"round-{round_index}")

        from benchflow.rollout.user_loop import resolve_user, run_user_loop  # users drive

        user, max_rounds = resolve_user(self.config, self.task, self.ctx.model_endpoint)
        async with self.skills.session(self.ctx, self.drivers[role.agent], self.steps[0]):
            n_prompts, n_tool_calls = await run_user_loop(
                user=user, driver=self.drivers[role.agent], ctx=self.ctx, role=role,
                scene=scene, instruction=self.task.instruction, solution=solution,
                max_rounds=max_rounds, score_round=score_round,
                rounds_log=self.paths.user_rounds)
        self.result.n_prompts += n_prompts
        self.result.n_tool_calls += n_tool_calls

    async def verify(self) -> None:
        """Harden the sandbox (unless only trusted agents ran), run the verifier, record rewards.

        The verifier runs in a fresh sandbox instead when the task says `separate`."""
        assert self.sandbox is not None and self.task is not None and self.ctx is not None
        self._emit(RolloutEventKind.VERIFY_START)
        self.result.hardened = self.baseline is not None
        judge = judge_verifier(self.task)
        if judge is not None:  # in the agent's sandbox (the loader refuses it with `separate`)
            self.result.rewards = await self._judged_verify(judge, self._verifier_run())
            self._logs_collected = True
        else:
            outcome = await verify_with_mode(self, None, final=True)
            # on success the in-sandbox paths downloaded /logs; otherwise cleanup collects it
            self._logs_collected = not self.task.config.verifier.separate
            self.result.rewards = outcome.rewards
        self.result.reward = self.result.rewards["reward"]

    async def _run_task_steps(self) -> None:
        """A multi-step task: agent and verifier per step (`rollout/task_steps.py`)."""
        await self.open_agent_phase()
        await run_task_steps(self)

    async def _judged_verify(self, judge: JudgeVerifier, run: VerifierRun) -> dict[str, float]:
        assert self.sandbox is not None and self.task is not None and self.ctx is not None
        from benchflow.verify.judged import judge_run, judged_verify  # an LLM judge scores

        endpoint = self.config.judge_endpoint or self.ctx.model_endpoint
        verifier = self.task.config.verifier
        return await judged_verify(
            self.sandbox, run, self.paths.verifier_dir, self.paths.logs_dir, judge=judge,
            judge_run=judge_run(judge, endpoint, self.config.scenes[0].roles[0].model),
            instruction=self.task.instruction, agent_message=self.final_text,
            baseline=self.baseline, agent_user=self.ctx.agent_user, config=verifier.hardening,
            pytest_plugins=verifier.pytest_plugins)

    def _verifier_run(self) -> VerifierRun:
        assert self.sandbox is not None and self.task is not None
        task, config = self.task, self.config
        timeout = config.verifier_timeout_sec or task.config.verifier.timeout_sec
        return VerifierRun(verifier_dir=task.verifier_dir, mount=task.verifier_mount,
                           timeout_sec=timeout * config.timeout_multiplier,
                           env=task.config.verifier.env, cwd=self.sandbox.workdir)

    async def cleanup(self) -> None:
        """Collect /logs if not yet collected, then stop the sandbox per the preserve policy."""
        if self.sandbox is None:
            return
        try:
            if self._started and not self._logs_collected:
                self._logs_collected = True
                await self.sandbox.download("/logs", self.paths.logs_dir)
        except BenchflowError as exc:
            log.warning("%s: could not collect /logs: %s", self.rollout_name, exc)
        policy = self.config.preserve_env
        keep = policy == "always" or (policy == "on_failure" and self.result.failed)
        try:
            await self.sandbox.stop(delete=not keep)
        except SandboxTeardownError as exc:
            self.result.teardown_error = ErrorInfo.from_exception(exc, "teardown")
            if self.result.error is None:
                self.result.error = self.result.teardown_error
            append_error_txt(self.paths.error, exc)
        if keep:
            self.result.sandbox_preserved = self.sandbox.sandbox_id

    # -- the whole rollout -------------------------------------------------------------

    async def run(self) -> RolloutResult:
        """Run every phase; never raises for a rollout failure (it is in `result.error`)."""
        # shielded: a cancellation here would skip result.json; in a thread: hundreds of
        # rollouts starting at once must not each hold the event loop on the file system
        config_json = redacted_config_json(self.config)
        with anyio.CancelScope(shield=True):
            log_file = await anyio.to_thread.run_sync(self._open_folder, config_json)
        try:
            with rollout_log(log_file, self.rollout_name):
                return await self._run()
        finally:
            with anyio.CancelScope(shield=True):  # every line on disk when run() returns
                await anyio.to_thread.run_sync(log_file.close)

    def _open_folder(self, config_json: str) -> RolloutLogFile:
        """The rollout's folder with its config.json, and its open rollout.log (one trip
        to a worker thread for all three)."""
        self.paths.mkdirs()
        write_json_atomic(self.paths.config, config_json)
        return RolloutLogFile(self.paths.log)

    async def _run(self) -> RolloutResult:
        self.clock.begin()
        log.info("rollout %s of job %s starts", self.rollout_name, self.job_name)
        self._emit(RolloutEventKind.START)
        phase = "environment_setup"
        try:
            with self.clock.phase("environment_setup"):
                await self.setup()
                await self.start()
            phase = "agent_setup"
            with self.clock.phase("agent_setup"):
                await self.install_agent()
            phase = "agent_execution"
            if self.task is not None and self.task.multi_step:
                try:
                    await self._run_task_steps()
                finally:  # its agent and verifier phases alternate
                    phase = self.clock.current or phase
            else:
                with self.clock.phase("agent_execution"):
                    await self.execute()
                if not self.config.verifier_disabled:
                    phase = "verifier"
                    with self.clock.phase("verifier"):
                        await self.verify()
            if self.ctx is not None:
                record_endpoint_score(self.result, self.ctx.extras.get("endpoint_score"),
                                      self.ctx.extras.get("endpoint_passed"),
                                      verified=not self.config.verifier_disabled)
        except anyio.get_cancelled_exc_class() as exc:
            self._record_error(RolloutCancelled(f"cancelled during {phase}"), phase, exc)
            self._emit(RolloutEventKind.CANCEL)
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes the result's error
            self._record_error(exc, phase, exc)
        finally:
            with anyio.move_on_after(_CLEANUP_TIMEOUT_SEC, shield=True):
                await self.cleanup()
                if self.network is not None:
                    await self.network.aclose()
            if self.ctx is not None and self.ctx.trajectory is not None:
                self.ctx.trajectory.close()
            self.clock.end()
            with anyio.CancelScope(shield=True):  # written even when cancelled
                await anyio.to_thread.run_sync(self._write_result)
            log.info("rollout ends: reward %s, error %s", self.result.reward,
                     self.result.error.type if self.result.error else None)
            self._emit(RolloutEventKind.END)
        return self.result

    def _record_error(self, exc: BaseException, phase: str, cause: BaseException) -> None:
        error = ErrorInfo.from_exception(exc, phase)
        self.result.error = error.model_copy(
            update={"message": redact_text(error.message, self._secrets)})
        self.result.reward = None
        self.result.rewards = None
        if not isinstance(exc, BenchflowError) or exc.error_type == "internal_error":
            log.exception("%s: internal error in %s", self.rollout_name, phase, exc_info=cause)
        try:
            write_error_txt(self.paths.error, cause, self._secrets)
        except OSError:
            pass

    def _open_trajectory(self) -> TrajectoryWriter:
        config = self.config
        header = TrajectoryHeader(
            job_name=self.job_name, rollout_name=self.rollout_name, task_name=self.result.task_name,
            agents=list(dict.fromkeys(r.agent for s in config.scenes for r in s.roles)),
            models=list(dict.fromkeys(r.model for s in config.scenes for r in s.roles if r.model)),
            run_id=self.trace.run_id, trace_id=self.trace.trace_id, span_id=self.trace.span_id)
        return TrajectoryWriter(self.paths.trajectory, header)

    def _write_result(self) -> None:
        if self.paths.trajectory.exists():
            self.result.trajectory_path = str(self.paths.trajectory)
        write_json_atomic(self.paths.result, self.result.model_dump_json(indent=2))

    def _emit(self, kind: RolloutEventKind) -> None:
        log.info("%s", kind.value)
        if self.listener is not None:
            self.listener(RolloutEvent(kind, self.rollout_name, self.result))


async def run(config: RolloutConfig) -> RolloutResult:
    """Run one rollout end to end: `result = await benchflow.run(config)`."""
    return await Rollout(config).run()

