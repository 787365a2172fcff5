"""The Rollout: one agent configuration on one task, as a short sequence of phases.

setup -> start -> install_agent -> (connect_as(role) -> execute(prompts) -> disconnect())*
-> verify -> cleanup, then finish() writes `result.json`. Each phase is a method, usable
by hand with the same files, timings and error mapping as `run()` (`phases.py`); `run()`
calls them in order, turns any error into the result's `error` and always cleans up
(shielded from cancellation). The roles' sessions live in `turns.py`/`sessions.py`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import anyio

from benchflow.agents.base import AgentContext, AgentDriver, StepOutcome, driver_capabilities
from benchflow.agents.builtin import OracleAgent, solution_placed, solution_tree
from benchflow.agents.image_cache import AgentImagePlan, commit_agent_image, prepare_agent_image
from benchflow.agents.image_cache import install_cache_outcome
from benchflow.agents.layers import LayerPlan, prepare_layers
from benchflow.agents.registry import TRUSTED_AGENTS, check_scenes, check_task, get_driver
from benchflow.config import Role, RolloutConfig
from benchflow.errors import (
    BenchflowError,
    ResultsWriteError,
    RolloutCancelled,
    SandboxTeardownError,
    VerifierError,
)
from benchflow.mcp import McpServer, merge_servers
from benchflow.paths import RolloutPaths, default_job_name, rollout_name, task_and_dataset
from benchflow.rollout.acp_tools import close_acp_tools, open_acp_tools
from benchflow.rollout.budget import agent_phase_budget, agent_phase_deadline
from benchflow.rollout.events import RolloutEvent, RolloutEventKind, RolloutListener
from benchflow.rollout.logs import mask_in_rollout_log
from benchflow.rollout.model_endpoint import RolloutNetwork, needs_network_install
from benchflow.rollout.phases import PhaseBook, phase
from benchflow.rollout.role_access import setup_role_access
from benchflow.rollout.result import (
    ErrorInfo,
    ParentRef,
    PhaseClock,
    RolloutResult,
    Tokens,
    append_error_txt,
    record_endpoint_score,
    write_json_atomic,
)
from benchflow.rollout.roles import (
    RoleLedger,
    configured_roles,
    role_identities,
    rollout_model,
)
from benchflow.rollout.redaction import mask_folder, rollout_redactor
from benchflow.rollout.scenes import resolve_scenes
from benchflow.rollout.secrets import Redactor
from benchflow.rollout.turns import Turns
from benchflow.rollout.workspace_changes import (
    WORKSPACE_START,
    WorkspaceTracker,
    workspace_tracker,
)
from benchflow.rollout.skills import RolloutSkills
from benchflow.rollout.strategies import close_strategy, open_strategy, strategy_rewards
from benchflow.rollout.task_steps import run_task_steps, verify_with_mode
from benchflow.rollout.disk_guard import run_watched, watched_limit_mb, watchdog_warning
from benchflow.sandbox.base import GuardedSandbox, Sandbox, implements
from benchflow.sandbox.cost import sandbox_cost
from benchflow.rollout.healthcheck import wait_healthy
from benchflow.rollout.sandbox_needs import require_sandbox
from benchflow.sandbox.owner import job_instance_id
from benchflow.sandbox.early import claim_early
from benchflow.sandbox.factory import create_sandbox
from benchflow.rollout.sandbox_spec import rollout_spec
from benchflow.sandbox.spec import SandboxSpec, SpecTree
from benchflow.steps import Step, desugar
from benchflow.task import Task, load_task
from benchflow.task.env_templates import resolve_mcp_servers, resolve_task_env
from benchflow.trace_ids import TraceIds, step_span_id, traceparent
from benchflow.trajectory.events import TrajectoryHeader
from benchflow.trajectory.writer import TrajectoryWriter
from benchflow.rollout.agent_judge import judge_scene
from benchflow.task.collection import collection_pass
from benchflow.verify.baseline import Baseline, take_baseline, task_named_tools
from benchflow.verify.fold import HardenFold
from benchflow.verify.rubric import JudgeVerifier, judge_verifier
from benchflow.verify.runner import VerifierRun, script_command
from benchflow.verify.soft import SoftVerifyResult, soft_verify

if TYPE_CHECKING:  # forking and turn snapshots: imported where used (not by a plain run)
    from benchflow.rollout.snapshots import TurnSnapshotter

log = logging.getLogger(__name__)

_GIT_HEAD_MAX_AGE_SEC = 60.0
"""How long one `git rev-parse HEAD` of a task folder serves rollouts of that task."""
_CLEANUP_TIMEOUT_SEC = 60.0


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
        task_name, self.dataset_name = task_and_dataset(
            task.path if task else config.task_path.expanduser().resolve(), config.dataset_name)
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
        self._adopted = False
        self._agent_image: AgentImagePlan | None = None
        self._agent_layers = LayerPlan()
        self._solution_tree: SpecTree | None = None
        self.baseline: Baseline | None = None
        self._secrets: frozenset[str] = frozenset()
        self.redactor = Redactor()
        """Masks every secret the rollout injects in what it writes (see `redaction.py`)."""
        self._mcp_servers: list[McpServer] = []
        self._storage_failure: OSError | None = None
        self.final_text = ""
        """The agent's last non-empty message (for an LLM judge and QA answers)."""
        self.ledger = RoleLedger(role_identities(config.scenes, config.model_endpoint),
                                 configured=configured_roles(config.scenes))
        """Each role's identity and counts (`result.roles`)."""
        self.result.model = rollout_model(self.ledger.identities) or config.model_name
        self.turns: Turns | None = None
        """The roles' sessions during the agent phase (`connect_as` ... `disconnect`)."""
        self._phases = PhaseBook(self)
        self.workspace: WorkspaceTracker | None = None
        """Records each turn's changes to the workspace (None: not recorded)."""
        self.snapshots: TurnSnapshotter | None = None
        """Snapshots the sandbox at each turn boundary (`snapshot_turns`)."""
        self._step_index: dict[tuple[int, int], int] = {}
        if config.fork is not None:
            self.result.parent = ParentRef(rollout=config.fork.rollout, turn=config.fork.step)
        self._next_step: Step | None = None  # run()'s next step: the session opens with it


    @property
    def hardened(self) -> bool:
        """Whether the final verify hardens the sandbox (always, unless only trusted agents ran)."""
        if self.config.harden is not None:
            return self.config.harden
        return any(role.agent not in TRUSTED_AGENTS
                   for scene in self.config.scenes for role in scene.roles)

    # -- phases --------------------------------------------------------------------------

    @phase("environment_setup")
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
        # the job instance, not its name: a job of the same name elsewhere is another job
        self.job_id = config.job_id or job_instance_id(config.jobs_dir / self.job_name)
        judging = judge_scene(task.verifier_doc)
        self.network = RolloutNetwork(config, allow_internet=task.config.sandbox.allow_internet,
                                      job_name=self.job_id,
                                      log_dir=self.paths.root / "model_server",
                                      capture_path=self.paths.model_calls,
                                      verifier_scenes=[judging] if judging else [])
        require_sandbox(config, task, self.network.policy, self._given_drivers)
        await self.network.open()
        self.ledger.traffic = self.network.traffic
        if self.network.traffic is not None:  # role keys: masked like the task's secrets
            self._secrets |= self.network.traffic.tokens
            mask_in_rollout_log(self.network.traffic.tokens)
        endpoint = self.network.agent_endpoint
        if endpoint is not None and endpoint.api_key:  # the real key a direct backend gets
            self._secrets |= {endpoint.api_key}
            mask_in_rollout_log({endpoint.api_key})
        self.scenes = self.network.scenes(config.scenes)
        self.skills = RolloutSkills(config, task, self.scenes)
        self.steps = desugar(self.scenes, task.instruction, task.prompts, self.skills.declared)
        self._step_index = {(s.scene_index, s.turn_index): i for i, s in enumerate(self.steps)}
        if config.fork is not None:  # steps from the fork's on, with each role's history
            from benchflow.rollout.fork import fork_steps

            self.steps = fork_steps(config.fork, self.steps)
        check_scenes(self.scenes, given=self._given_drivers, endpoint=endpoint)
        self.drivers = {role.agent: self._given_drivers.get(role.agent) or get_driver(role.agent)
                        for scene in config.scenes for role in scene.roles}
        judge = task.verifier_doc.agent if task.verifier_doc.strategy == "agent-judge" else None
        if judge:  # installed with the solver, before the network policy applies
            self.drivers.setdefault(judge, self._given_drivers.get(judge) or get_driver(judge))
        self.redactor = rollout_redactor(self._secrets, self.scenes, self.drivers)
        mask_in_rollout_log(self.redactor.values)
        # the oracle's solution in the start's one upload, when only built-in agents run
        self._solution_tree = solution_tree(task, list(self.drivers.values()))
        self.spec = spec = rollout_spec(
            config, task, paths=self.paths, job_name=self.job_name, job_id=self.job_id,
            rollout=self.rollout_name, solution=self._solution_tree,
            network=self.network.sandbox_fields(online_install=needs_network_install(
                self.drivers.values())))
        early = claim_early(config.environment, spec)  # `benchflow run`'s first sandbox
        if early is not None:
            self.sandbox = early.sandbox  # ours from here: cleanup removes it
            with anyio.CancelScope(shield=True):  # until it has a container to remove
                await anyio.to_thread.run_sync(early.wait)
            self._adopted = True
        else:
            self.sandbox = create_sandbox(config.environment, spec, config.provider_config)
        if config.snapshot_turns or config.fork is not None:
            from benchflow.rollout.snapshots import TurnSnapshotter

            TurnSnapshotter.check(self.sandbox)
        self._warn_unhardened()

    @phase("environment_setup")
    async def start(self) -> None:
        """Start the sandbox and place the instruction at `instruction_path`."""
        assert self.sandbox is not None and self.task is not None
        self._agent_layers = await prepare_layers(  # agents cached one by one (layers.py)
            self.sandbox, list(self.drivers.values()), self.task, self.paths,
            self.config.timeout_multiplier)
        self._emit(RolloutEventKind.SANDBOX_START)
        if self.config.fork is not None:  # the original's sandbox, with its agents installed
            from benchflow.rollout.fork import start_from_fork

            start_from_fork(self.sandbox, self.config.fork)
        else:
            self._agent_image = await prepare_agent_image(self.sandbox, list(self.drivers))
        if not self._adopted:  # an early sandbox (`setup`) has started already
            await self.sandbox.start()
        self._started = True
        limit = watched_limit_mb(self.sandbox)
        if limit is not None:  # never dropped silently: the watchdog enforces it, and says so
            self.result.warnings.append(watchdog_warning(limit))
        if self.task.config.sandbox.healthcheck is not None:
            await wait_healthy(self.sandbox, self.task.config.sandbox.healthcheck)
        endpoint = self.network.agent_endpoint if self.network else None
        self.ctx = AgentContext(
            sandbox=self.sandbox, task=self.task, paths=self.paths,
            workdir=self.sandbox.workdir, agent_user=self.task.config.agent.user,
            instruction_path=self.config.instruction_path,
            timeout_multiplier=self.config.timeout_multiplier,
            agent_layers=self._agent_layers.agents, platform=self._agent_layers.platform,
            env={**(endpoint.sandbox_env() if endpoint else {}),
                 "ROLLOUT_TASK_INSTRUCTION": self.config.instruction_path,
                 "TRACEPARENT": self.trace.traceparent},
            mcp_servers=merge_servers(self.task.config.sandbox.mcp_servers, self._mcp_servers),
            trace=self.trace, dataset_name=self.dataset_name, rollout_name=self.rollout_name,
            model_endpoint=self.network.host_endpoint() if self.network else None,
            agent_endpoint=endpoint,
            model_keys=self.network.role_keys if self.network else {},
        )
        if self._solution_tree is not None:
            solution_placed(self.ctx, self._solution_tree)
        if self.config.fork is not None:  # roles that restore their session (session/load)
            self.ctx.resume_sessions = dict(self.config.fork.sessions)

    @phase("agent_setup")
    async def install_agent(self) -> None:
        """Install each distinct agent once; cache registered agents as an image layer.

        Registered (manifest) agents install and are committed first, so nothing a
        built-in agent places (the oracle's solution) can reach a cached image.
        """
        assert self.ctx is not None
        self._emit(RolloutEventKind.AGENT_INSTALL)
        cached = [d for d in self.drivers.values() if driver_capabilities(d).cached_install]
        for driver in cached:
            await driver.install(self.ctx)
        if cached:
            saved = await commit_agent_image(self.sandbox, self._agent_image)
            self.result.agent_install_cache = install_cache_outcome(
                self._agent_image, saved, self._agent_layers.layers)
        for driver in self.drivers.values():
            if driver not in cached:
                await driver.install(self.ctx)
        await setup_role_access(self.ctx, self.scenes)  # each role its own user
        if self.config.fork is not None and self.hardened:  # checked against the original's
            from benchflow.rollout.fork import fork_baseline

            self.baseline = await fork_baseline(self.ctx.sandbox, self.config.fork)
        if self.hardened and self.baseline is None:
            hardening = self.task.config.verifier.hardening
            if self._can_fold():  # the baseline and harden.sh run in the oracle's one exec
                self.ctx.harden_fold = HardenFold(
                    workspace=self.ctx.workdir, config=hardening,
                    verifier_mount=self.task.verifier_mount,
                    named=task_named_tools(self.task), agent_user=self.ctx.agent_user)
                return
            # after installs and the workspace chown: the agent's changes are what differs
            self.baseline = await take_baseline(self.ctx.sandbox, workspace=self.ctx.workdir,
                                                config=hardening,
                                                named=task_named_tools(self.task),
                                                scrub_git=hardening.scrub_git_history)

    def _can_fold(self) -> bool:
        """Whether the hardening baseline and harden.sh may run in the agent's own exec
        (`verify/fold.py`): one oracle step, hardened with the kill, verified in this
        sandbox by test.sh, and nothing that must run between the baseline and the agent
        (skills, a tool server, an ORS episode) or see the sandbox as the agent left it
        before hardening (turn snapshots, workspace changes, artifacts and hooks, a judge).
        (The disk watchdog may go on beside it: past the limit it stops every process, the
        fold's shell too, and the rollout fails as without the fold.)"""
        task, config = self.task, self.config
        assert task is not None and self.ctx is not None and self.skills is not None
        verifier = task.config.verifier
        one = collection_pass(task.config)
        return (len(self.steps) == 1 and not task.multi_step and config.fork is None
                and isinstance(self.drivers.get(self.steps[0].role.agent), OracleAgent)
                and verifier.hardening.kill_agent_processes and not config.verifier_disabled
                and config.user is None and "user" not in task.raw_frontmatter
                and not config.snapshot_turns and config.acp_tools is None
                and not self.skills.any and task.verifier_doc.strategy == "script"
                and not verifier.separate and judge_verifier(task) is None
                and not one.hooks and not one.artifacts
                and workspace_tracker(config, self.ctx) is None)

    async def _settle_fold(self) -> None:
        """After the agent phase: the folded baseline becomes the rollout's.

        Raises:
            VerifierError: the fold ran the agent but left no baseline (fail closed).
        """
        fold = self.ctx.harden_fold if self.ctx is not None else None
        if fold is None or self.baseline is not None:
            return
        if fold.baseline is not None:
            self.baseline = fold.baseline
        elif not fold.ran:  # the oracle never started: the sandbox is as before the agent
            assert self.ctx is not None and self.task is not None
            self.baseline = await take_baseline(
                self.ctx.sandbox, workspace=fold.workspace, named=fold.named,
                scrub_git=fold.config.scrub_git_history)
        else:
            raise VerifierError("the agent ran without its hardening baseline")

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

    @phase("agent_execution")
    async def connect_as(self, role: str | Role, scene: str | int | None = None, *,
                         fresh: bool = False) -> None:
        """Make `role` (a role name of the rollout's scenes, or one of its `Role`s) the
        acting role: its agent starts, unless it already has a session in the scene.

        Raises:
            ConfigError: no scene declares the role.
            AgentError: the agent did not start or connect.
        """
        turns = await self._open_turns()
        await turns.connect_as(role, scene, fresh=fresh, first=self._next_step)

    @phase("agent_execution")
    async def execute(self, prompts: Sequence[str | Step] | str | None = None) -> None:
        """Send `prompts` to the connected role as its next turns, in its session.

        Without prompts: every desugared step of the rollout's scenes (the user's rounds
        when a user drives), each role connected and disconnected in turn.

        Raises:
            ConfigError: prompts were given but no role is connected.
            AgentError: an agent failed, or the agent phase ran out of time.
        """
        if prompts is None:  # the whole agent phase, under the disk watchdog where needed
            await run_watched(self.sandbox, self._execute_all)
            return
        turns = await self._open_turns()
        await turns.execute(prompts)

    @phase("agent_execution")
    async def disconnect(self, *, close: bool = False) -> None:
        """End the connected role's turn; its session stays open for its later turns in
        the scene (unless the role is `fresh`, or `close`)."""
        if self.turns is not None:
            await self.turns.disconnect(close=close)
        if self.ctx is not None and self.ctx.trajectory is not None:
            self.ctx.trajectory.span_id = self.trace.span_id

    async def _execute_all(self) -> None:
        if self.config.user is not None or (self.task is not None
                                            and "user" in self.task.raw_frontmatter):
            await self.open_agent_phase()
            await self.run_steps()
            return
        try:
            for steps in _role_runs(self.steps):
                self._next_step = steps[0]
                await self.connect_as(steps[0].role, steps[0].scene_index)
                self._next_step = None
                await self.execute(steps)
                await self.disconnect()
            if self.snapshots is not None:  # the final workspace (regrade), before hardening
                await self.snapshots.take(len(self._step_index))
        except BaseException as exc:
            self._next_step = None
            await self.end_agent_phase(exc)
            raise
        await self.end_agent_phase()

    async def _open_turns(self) -> Turns:
        await self.open_agent_phase()
        if self.turns is None:
            assert self.ctx is not None and self.task is not None and self.skills is not None
            ctx = self.ctx
            budget = agent_phase_budget(self.task, self.drivers, self.config.timeout_multiplier)
            ctx.agent_deadline = time.monotonic() + budget
            self.turns = Turns(ctx, self.drivers, self.scenes, place_skills=self._place_skills,
                               before_step=self._before_step, after_step=self._after_step,
                               prompts=self.task.prompts, instruction=self.task.instruction)
        return self.turns

    async def _place_skills(self, driver: AgentDriver, step: Step) -> tuple[str, ...]:
        assert self.ctx is not None and self.skills is not None
        return await self.skills.place(self.ctx, driver, step)

    async def end_agent_phase(self, error: BaseException | None = None) -> None:
        """Close every role's session (their agents stop) and end the phase's budget.

        Sessions run in a task group entered by the first `connect_as`: call this (or
        `verify()`, `cleanup()`) at the same nesting of cancel scopes as `connect_as`.
        `error`: the exception the agent phase is ending with (the sessions are cancelled).
        """
        if self.turns is not None:
            if error is None:
                await self.turns.aclose()
            else:
                await self.turns.aclose(type(error), error, error.__traceback__)
        if self.workspace is not None:
            await self.workspace.aclose()
        if self.ctx is not None:
            self.ctx.agent_deadline = None

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
        await open_strategy(self)  # an ORS environment the agent plays
        await open_acp_tools(self)  # the tool server's tools, as an MCP server
        self.workspace = workspace_tracker(self.config, self.ctx)
        if self.workspace is not None:
            await self.workspace.start(self.paths.root / WORKSPACE_START)
        if self.config.snapshot_turns and self.sandbox is not None:
            from benchflow.rollout.snapshots import TurnSnapshotter

            self.snapshots = TurnSnapshotter(
                self.sandbox, self.paths.root, job_name=self.job_name,
                rollout_name=self.rollout_name, n_steps=len(self._step_index),
                backend=self.config.environment, provider_config=self.config.provider_config)
            self.snapshots.set_baseline(self.baseline)


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
            turns = await self._open_turns()
            try:
                for steps in _role_runs(self.steps):
                    await turns.connect_as(steps[0].role, steps[0].scene_index,
                                           first=steps[0])
                    await turns.execute(steps)
                    await turns.disconnect()
                    self.ctx.trajectory.span_id = self.trace.span_id
            finally:
                await turns.aclose()


    def _enter_step(self, step: Step) -> None:
        """Attribute what follows to the step's span (trajectory events, the agent's TRACEPARENT)."""
        assert self.ctx is not None and self.ctx.trajectory is not None
        span = step_span_id(self.trace.trace_id, step.scene_index, step.turn_index)
        self.ctx.trajectory.span_id = span
        self.ctx.env = {**self.ctx.env, "TRACEPARENT": traceparent(self.trace.trace_id, span)}

    async def _before_step(self, step: Step) -> None:
        """Before a turn: snapshot the sandbox (`snapshot_turns`), enter the step's span."""
        if self.snapshots is not None:
            await self.snapshots.take(self._step_index.get((step.scene_index, step.turn_index),
                                                           0), step.scene, step.turn_index)
        self._enter_step(step)

    async def _after_step(self, step: Step, outcome: StepOutcome) -> None:
        """After a turn: count it, and record what it changed in the workspace."""
        self._count(step, outcome)
        if self.workspace is not None and self.ctx is not None:
            session = self.turns.pool.session_id((step.scene_index, step.role.name)) \
                if self.turns is not None else None
            await self.workspace.record(self.ctx.trajectory, step, session_id=session)

    def _count(self, step: Step, outcome: StepOutcome, round_index: int | None = None) -> None:
        """Add one answered prompt to the result: counters, and tokens and cost when reported;
        per role, with what benchflow's model server or relay saw of it (`RoleLedger`)."""
        self.ledger.record(step.role.name, outcome, self.ctx.trajectory if self.ctx else None,
                           scene=step.scene, turn=step.turn_index,
                           session_turn=step.session_turn, round=round_index)

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
            await run_user_loop(
                user=user, driver=self.drivers[role.agent], ctx=self.ctx, role=role,
                scene=scene, instruction=self.task.instruction, solution=solution,
                max_rounds=max_rounds, score_round=score_round,
                rounds_log=self.paths.user_rounds, on_prompt=self._count)

    @phase("verifier")
    async def verify(self) -> None:
        """Harden the sandbox (unless only trusted agents ran), run the verifier, record rewards.

        The verifier runs in a fresh sandbox instead when the task says `separate`."""
        assert self.sandbox is not None and self.task is not None and self.ctx is not None
        await self.end_agent_phase()  # the agents stop before the sandbox is hardened
        await self._settle_fold()
        self._emit(RolloutEventKind.VERIFY_START)
        self.result.hardened = self.baseline is not None
        judge = judge_verifier(self.task)
        rewards = await strategy_rewards(self)  # ors-episode, agent-judge
        if rewards is not None:
            self.result.rewards = rewards
        elif judge is not None:  # in the agent's sandbox (the loader refuses it with `separate`)
            self.result.rewards = await self._judged_verify(judge, self._verifier_run())
            self._logs_collected = True
        else:
            outcome = await verify_with_mode(self, None, final=True)
            # on success the in-sandbox paths downloaded /logs; otherwise cleanup collects it
            self._logs_collected = not self.task.config.verifier.separate
            self.result.rewards = outcome.rewards
        self.result.reward = self.result.rewards["reward"]

    @phase(None)
    async def _run_task_steps(self) -> None:
        """A multi-step task: agent and verifier per step (`rollout/task_steps.py`)."""
        await self.open_agent_phase()
        await run_watched(self.sandbox, lambda: run_task_steps(self))

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
                           env=task.config.verifier.env, cwd=self.sandbox.workdir,
                           command=script_command(task))

    @phase(None)
    async def cleanup(self) -> None:
        """Stop the agents, collect /logs if not yet collected, stop the sandbox per the
        preserve policy, close the model network. Idempotent; shielded and bounded."""
        if self._phases.cleaned:
            return
        self._phases.cleaned = True
        try:
            await self.end_agent_phase()  # first: at the nesting of connect_as
        finally:
            await self._teardown()

    async def _teardown(self) -> None:
        with anyio.move_on_after(_CLEANUP_TIMEOUT_SEC, shield=True):
            try:
                try:  # the ORS environment and the tool server, before their sandbox
                    await close_strategy(self)
                    await close_acp_tools(self)
                finally:
                    await self._stop_sandbox()
            finally:
                if self.network is not None:
                    await self.network.aclose()

    async def _stop_sandbox(self) -> None:

        if self.sandbox is None:
            return
        try:
            if self._started and not self._logs_collected:
                self._logs_collected = True
                await self.sandbox.download("/logs", self.paths.logs_dir)
        except BenchflowError as exc:
            log.warning("%s: could not collect /logs: %s", self.rollout_name, exc)
        except OSError as exc:  # the host's disk: the job stops once the sandbox is gone
            self._storage_failure = self._storage_failure or exc
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
        self._add_sandbox_cost()

    def _write_failure(self, path: object, exc: OSError) -> ResultsWriteError:
        """The job-stopping error for a file of this rollout that could not be written."""
        return ResultsWriteError.for_path(path, exc, self.config.jobs_dir / self.job_name)

    def _add_sandbox_cost(self) -> None:
        """The provider's cost of the sandbox, beside the model cost (spec: `cost`)."""
        cost = sandbox_cost(self.sandbox)
        if cost is not None:
            self.result.sandbox_cost = cost
            self.result.cost = round((self.result.cost or 0.0) + cost, 8)

    # -- the whole rollout -------------------------------------------------------------

    async def finish(self) -> RolloutResult:
        """End the rollout: clean up if that was not done, write `result.json`, close the
        trajectory and rollout.log; returns the result. Idempotent."""
        if not self._phases.cleaned and self._phases.opened:
            try:
                await self.cleanup()
            except Exception:  # noqa: BLE001 - recorded as the result's error by the phase
                pass
        await self._phases.finish()
        return self.result

    async def run(self) -> RolloutResult:
        """Run every phase in order; never raises for a rollout failure (it is in
        `result.error`). Cancellation still propagates, after cleanup and result.json."""
        try:
            await self.setup()
            await self.start()
            await self.install_agent()
            if self.task is not None and self.task.multi_step:
                await self._run_task_steps()
            else:
                await self.execute()
                if not self.config.verifier_disabled:
                    await self.verify()
            if self.ctx is not None:
                record_endpoint_score(self.result, self.ctx.endpoint_score,
                                      self.ctx.endpoint_passed,
                                      verified=not self.config.verifier_disabled)
        except anyio.get_cancelled_exc_class() as exc:
            self._phases.record_error(RolloutCancelled("cancelled"), "cancel", exc)
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes the result's error
            self._phases.record_error(exc, self.clock.current or "environment_setup", exc)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.cleanup()
                except Exception:  # noqa: BLE001 - cleanup's failure is in the result
                    pass
                await self.finish()

        return self.result

    def _open_trajectory(self) -> TrajectoryWriter:
        config = self.config
        header = TrajectoryHeader(
            job_name=self.job_name, rollout_name=self.rollout_name, task_name=self.result.task_name,
            agents=list(dict.fromkeys(r.agent for s in config.scenes for r in s.roles)),
            models=list(dict.fromkeys(r.model for s in config.scenes for r in s.roles if r.model)),
            roles=self.ledger.identities, run_id=self.trace.run_id, trace_id=self.trace.trace_id, span_id=self.trace.span_id)
        writer = TrajectoryWriter(self.paths.trajectory, header)
        writer.redact = self.redactor.lines
        return writer

    def _write_result(self) -> None:
        if implements(self.sandbox, GuardedSandbox):  # e.g. a download cut at its limit
            self.result.warnings += [w for w in self.sandbox.warnings
                                     if w not in self.result.warnings]
        if self.paths.trajectory.exists():
            self.result.trajectory_path = str(self.paths.trajectory)
        mask_folder(self.redactor, self.paths.root)  # agent output, /logs, model calls
        write_json_atomic(self.paths.result,
                          self.redactor.model(self.result).model_dump_json(indent=2))

    def _emit(self, kind: RolloutEventKind) -> None:
        log.info("%s", kind.value)
        if self.listener is not None:
            self.listener(RolloutEvent(kind, self.rollout_name, self.result))


def _role_runs(steps: Sequence[Step]) -> list[list[Step]]:
    """Consecutive steps of one role in one scene: one connect_as/execute/disconnect each."""
    runs: list[list[Step]] = []
    for step in steps:
        last = runs[-1][-1] if runs else None
        if (last is not None and last.scene_index == step.scene_index
                and last.role.name == step.role.name):
            runs[-1].append(step)
        else:
            runs.append([step])
    return runs


async def run(config: RolloutConfig) -> RolloutResult:
    """Run one rollout end to end: `result = await benchflow.run(config)`."""
    return await Rollout(config).run()

