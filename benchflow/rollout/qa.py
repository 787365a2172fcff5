"""The rollout of a QA item: the same phases and files as any rollout, a sandbox only when
an agent needs one, and an answer metric as the verifier.

A QA item has no environment. When every agent's driver says `needs_sandbox = False` (the
model agent without tools, an HTTP endpoint), no container and no Docker network is
created: the agent runs on the host, a scripted model server (if any) listens on
127.0.0.1, and the phases that would touch a sandbox are skipped. When an agent does need
one (the model agent's tools, ACP and command agents), the item runs in a plain sandbox
(`DEFAULT_QA_IMAGE`) exactly like a task.

The predicted answer is `/logs/agent/answer.txt` when the agent wrote one, else the agent's
final message, cut by the dataset's `answer_pattern`. It goes to result.json's `answer` and,
with the scores and any judge reply, to `verifier/answer.json`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchflow.agents.base import AgentContext, AgentDriver, driver_needs_sandbox
from benchflow.agents.registry import check_scenes, get_driver
from benchflow.config import ModelEndpoint, RolloutConfig
from benchflow.errors import BenchflowError, ConfigError
from benchflow.rollout.events import RolloutEventKind, RolloutListener
from benchflow.rollout.model_endpoint import (
    capture_log,
    check_endpoint,
    endpoint_root,
    scenes_for_check,
)
from benchflow.rollout.result import write_json_atomic
from benchflow.rollout.rollout import Rollout
from benchflow.rollout.skills import RolloutSkills
from benchflow.steps import Step, desugar
from benchflow.task import Task
from benchflow.verify.answers import extract_answer, judge_settings, score_answer

if TYPE_CHECKING:  # starlette/uvicorn load only when a scripted server is used
    from benchflow.model_server import ModelServer
    from benchflow.model_server.capture import ModelCallLog
    from benchflow.model_server.relay import ModelRelay

log = logging.getLogger(__name__)

ANSWER_FILE = "/logs/agent/answer.txt"
"""Where an agent in a sandbox may leave its answer (it wins over the final message)."""


class QaRollout(Rollout):
    """One QA item run by one agent configuration (see the module docstring)."""

    def __init__(self, config: RolloutConfig, *, task: Task,
                 listener: RolloutListener | None = None,
                 drivers: Mapping[str, AgentDriver] | None = None) -> None:
        if task.qa is None:
            raise ConfigError(f"{task.path}: not a QA item")
        super().__init__(config, task=task, listener=listener, drivers=drivers)
        self.qa = task.qa
        self._server: ModelServer | ModelRelay | None = None
        self._capture: ModelCallLog | None = None

    def _resolve_drivers(self) -> None:
        # as the endpoint will point them (its key): an ACP agent asks for no key of its own
        check_scenes(scenes_for_check(self.config), given=self._given_drivers,
                     endpoint=check_endpoint(self.config))
        self.drivers = {role.agent: self._given_drivers.get(role.agent) or get_driver(role.agent)
                        for scene in self.config.scenes for role in scene.roles}

    @property
    def needs_sandbox(self) -> bool:
        """Whether any agent of this rollout needs a sandbox."""
        return any(driver_needs_sandbox(d) for d in self.drivers.values())

    # -- phases ----------------------------------------------------------------------------

    async def setup(self) -> None:
        """Resolve the agents; describe a sandbox only when one of them needs it."""
        self._resolve_drivers()
        if self.needs_sandbox:
            await super().setup()
            return
        assert self.task is not None
        self.skills = RolloutSkills(self.config, self.task, self.scenes)
        if self.skills.any:
            raise ConfigError(f"{self.task.path}: skills are folders in a sandbox, and this QA "
                              "item runs without one: drop the skills, or give the agent a "
                              "sandbox (e.g. the model agent's tools)")
        self.steps = desugar(self.scenes, self.task.instruction, self.task.prompts)

    async def start(self) -> None:
        """Start the sandbox, or (without one) the scripted model server on the loopback.
        An HTTP agent's payload gets the item's kwargs as `task.input` and its metadata."""
        if self.sandbox is not None:
            await super().start()
        else:
            await self._start_without_sandbox()
        assert self.ctx is not None
        item = self.qa.item
        self.ctx.task_input = dict(item.kwargs)
        self.ctx.task_metadata = {**item.metadata, "item_id": item.id}

    async def _start_without_sandbox(self) -> None:
        assert self.task is not None
        self.ctx = AgentContext(
            sandbox=None, task=self.task, paths=self.paths, workdir="/", agent_user=None,
            instruction_path=self.config.instruction_path,
            timeout_multiplier=self.config.timeout_multiplier,
            env={"TRACEPARENT": self.trace.traceparent}, trace=self.trace,
            dataset_name=self.dataset_name, rollout_name=self.rollout_name,
            model_endpoint=await self._local_endpoint())

    async def _local_endpoint(self) -> ModelEndpoint | None:
        """The endpoint as the agent calls it on this host: a scripted server, or (when
        calls are captured) a relay in front of the real endpoint, on the loopback."""
        endpoint = self.config.model_endpoint
        self._capture = capture_log(self.config, self.paths.model_calls)
        if endpoint is None or (endpoint.script is None and self._capture is None):
            return endpoint
        log_dir = self.paths.root / "model_server"
        if endpoint.script is not None:
            from benchflow.model_server import ModelServer

            self._server = ModelServer(endpoint.script, host="127.0.0.1", log_dir=log_dir,
                                       capture=self._capture)
        else:
            from benchflow.model_server.relay import ModelRelay

            assert endpoint.base_url is not None
            self._server = ModelRelay(endpoint_root(endpoint.base_url), host="127.0.0.1",
                                      log_dir=log_dir, capture=self._capture,
                                      request_tokens=endpoint.request_tokens)
        url = self._server.start()
        return ModelEndpoint(base_url=url, model=endpoint.model,
                             api_key_env=endpoint.api_key_env, api_key=endpoint.api_key)

    async def open_agent_phase(self) -> None:
        """Open the trajectory; captured calls (without a sandbox) name its current prompt."""
        await super().open_agent_phase()
        if self._capture is not None and self.ctx is not None and self.ctx.trajectory:
            trajectory = self.ctx.trajectory
            self._capture.place = lambda: trajectory.place

    async def install_agent(self) -> None:
        if self.sandbox is not None:
            await super().install_agent()
            return
        assert self.ctx is not None
        self._emit(RolloutEventKind.AGENT_INSTALL)
        for driver in self.drivers.values():
            await driver.install(self.ctx)

    async def execute(self, prompts: Sequence[str | Step] | str | None = None) -> None:
        """Run the agent, then take its answer (the answer file wins over the final message)."""
        await super().execute(prompts)
        written = await self._answer_file()
        raw = written if written is not None else self.final_text
        self.result.answer = extract_answer(raw, self.qa.scoring.answer_pattern)

    async def _answer_file(self) -> str | None:
        if self.sandbox is None:
            return None
        result = await self.sandbox.exec(["cat", ANSWER_FILE], user="root", timeout=30)
        text = result.stdout.decode("utf-8", "replace").strip()
        return text if result.ok and text else None

    async def verify(self) -> None:
        """Score the answer with the dataset's metrics; items without ground truth get none."""
        self._emit(RolloutEventKind.VERIFY_START)
        item, scoring = self.qa.item, self.qa.scoring
        predicted = self.result.answer or ""
        judge = None
        if "llm_judgement" in scoring.metrics and item.has_answer:
            role_model = self.config.scenes[0].roles[0].model
            judge = judge_settings(scoring, self.ctx.model_endpoint if self.ctx else None,
                                   role_model)
        details: dict[str, Any] = {"predicted_answer": predicted, "ground_truth": item.answer,
                                   "metric": scoring.metric}
        try:
            score = await score_answer(predicted, item.answer, scoring, question=item.question,
                                       judge=judge)
        finally:
            self.paths.verifier_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.paths.verifier_dir / "answer.json",
                              json.dumps(details, indent=2))
        details.update(rewards=score.rewards, judge_replies=score.judge_replies)
        write_json_atomic(self.paths.verifier_dir / "answer.json",
                          json.dumps(details, indent=2))
        self.result.rewards = score.rewards
        self.result.reward = score.reward

    async def cleanup(self) -> None:
        try:
            await super().cleanup()
        finally:
            if self._server is not None:
                try:
                    self._server.stop()
                except (OSError, BenchflowError) as exc:  # never mask the rollout's outcome
                    log.warning("could not stop the model server: %s", exc)
                self._server = None


def rollout_class(task: Task | None) -> type[Rollout]:
    """The Rollout class for `task`: `QaRollout` for QA items, else `Rollout`."""
    return QaRollout if task is not None and task.qa is not None else Rollout


__all__ = ["ANSWER_FILE", "QaRollout", "rollout_class"]
