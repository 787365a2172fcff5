"""Jobs past one machine: trials run on Ray workers, the driver alone writes the job folder.

`RayJob` is a `Job` whose trials run remotely. The driver starts `workers` Ray actors
(spread over the cluster's nodes); each is an async actor with its own event loop that
runs the trials it is given as one-trial jobs of its own (the same rollouts, retries of
transient infrastructure failures and sandbox cleanup as a local job), in a scratch
folder, and sends back the result and the trial's folder as a tar. The driver extracts
it into `jobs/<job>/<trial>/`, so the job folder, `result.json`, manifest and `jobs resume`
are exactly those of a local run, and results stream back as trials end.

A worker that dies (its node lost, its process killed) fails the trials it was running
with `RayActorError`; the driver retries each on a live worker, as an infrastructure
failure, up to `retry.max_attempts` times (a trial that runs out gets `worker_lost`).
Cancelling the job (Ctrl-C on the driver) cancels the remote rollouts, which remove
their sandboxes; the driver then removes whatever sandbox of the job is left, by label,
also after a worker died mid-trial.

Trials travel to workers pickled: task folders, agent files and credentials' files must
be at the same paths on every node (one machine, or a shared filesystem); sandboxes are
made by each worker's own provider (a shared Docker daemon, or a cloud backend).
`ray` is the optional extra `benchflow[ray]` and is imported only here.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchflow.errors import ConfigError, WorkerLostError
from benchflow.job.job import Job, PlannedRollout
from benchflow.job.retry import RetryPolicy
from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.rollout.result import ErrorInfo, RolloutResult, write_json_atomic
from benchflow.sandbox.owner import CleanupScope
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.registry import register_provider, registered_in_code

log = logging.getLogger(__name__)


def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError as exc:
        raise ConfigError("executor ray needs Ray: pip install 'benchflow[ray]'") from exc
    return ray


class TrialWorker:
    """The body of one Ray actor: runs trials as one-trial jobs in a scratch folder."""

    def __init__(self, job_name: str, run_id: str, retry: RetryPolicy,
                 providers: Sequence[type[SandboxProvider]] = ()) -> None:
        self.job_name = job_name
        self.run_id = run_id
        self.retry = retry
        for provider in providers:  # registered in code on the driver: here too
            register_provider(provider)

    def pid(self) -> int:
        """The worker's process id (tests kill it to check a lost worker is survived)."""
        return os.getpid()

    async def run(self, trial: PlannedRollout) -> tuple[str, bytes]:
        """Run `trial`; its result (JSON) and its folder as a tar."""
        with tempfile.TemporaryDirectory(prefix="benchflow-ray-") as scratch:
            job = Job(self.job_name, Path(scratch), [trial], concurrency=1, retry=self.retry,
                      run_id=self.run_id)
            await job.run()
            (result,) = job.results
            folder = Path(scratch) / self.job_name / trial.rollout_name
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                if folder.is_dir():
                    tar.add(folder, arcname=".")
            return result.model_dump_json(), buffer.getvalue()


@dataclass
class RayJob(Job):
    """A `Job` whose trials run on Ray workers (see the module docstring)."""

    address: str | None = None
    workers: int = 2
    _actors: list[Any] = field(default_factory=list, repr=False)
    _next: int = field(default=0, repr=False)
    _remote: Any = field(default=None, repr=False)
    _workers_lost: int = field(default=0, repr=False)

    async def run(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            local = {} if self.address else {"include_dashboard": False, "num_cpus": 2}
            ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False,
                     **local)
        for provider in registered_in_code():  # defined in code: shipped by value
            module = sys.modules[provider.__module__]
            if not module.__name__.startswith("benchflow."):
                ray.cloudpickle.register_pickle_by_value(module)
        slots = max(1, math.ceil(self.concurrency / max(1, self.workers)))
        self._remote = ray.remote(TrialWorker).options(
            max_concurrency=slots + 1, num_cpus=0, scheduling_strategy="SPREAD",
            max_restarts=0)
        self._actors = [self._new_actor() for _ in range(max(1, self.workers))]
        try:
            return await super().run()
        finally:
            for actor in self._actors:
                ray.kill(actor, no_restart=True)
            self._actors = []
            if self._workers_lost and self.trials:
                # a dead worker could not remove the sandboxes it was running
                from benchflow.job.signals import remove_containers

                with anyio.CancelScope(shield=True):
                    await remove_containers(self.cleanup_scope,
                                            self.trials[0].config.environment)

    @property
    def cleanup_scope(self) -> CleanupScope:
        """This job instance's sandboxes, also those its Ray workers own: they are other
        processes, alive (or killed moments ago) when the job removes its sandboxes."""
        return CleanupScope(job_id=self.job_id, force=True)

    def _new_actor(self) -> Any:
        return self._remote.remote(self.name, self.run_id, self.retry, registered_in_code())

    def _pick(self) -> tuple[int, Any]:
        index = self._next % len(self._actors)
        self._next += 1
        return index, self._actors[index]

    async def _run_trial(self, index: int, trial: PlannedRollout, limiter: anyio.CapacityLimiter) -> None:
        ray = _ray()
        config = trial.config.model_copy(update={"job_name": self.name, "run_id": self.run_id,
                                                 "job_id": self.job_id})
        remote_trial = PlannedRollout(config, trial.task, trial.drivers, trial.task_folder)
        lost: list[ErrorInfo] = []
        async with limiter:
            self._started.add(index)
            while True:
                slot, actor = self._pick()
                ref = actor.run.remote(remote_trial)
                try:
                    payload, folder = await ref
                    break
                except ray.exceptions.RayActorError as exc:
                    self._workers_lost += 1
                    lost.append(ErrorInfo.from_exception(
                        WorkerLostError(f"Ray worker lost: {exc}"[:2000])))
                    if self._actors[slot] is actor:  # replace it once for every trial it ran
                        self._actors[slot] = self._new_actor()
                    if len(lost) > self.retry.max_attempts:
                        self._lost(index, trial, lost)
                        return
                    log.warning("%s: its Ray worker was lost; retrying elsewhere",
                                trial.rollout_name)
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        ray.cancel(ref)  # the worker's rollout removes its sandbox
                    raise
        result = self._store(trial, payload, folder, lost)
        self._record(index, result)
        if self.listener is not None:
            self.listener(RolloutEvent(RolloutEventKind.END, result.rollout_name, result))

    def _store(self, trial: PlannedRollout, payload: str, folder: bytes,
               lost: list[ErrorInfo]) -> RolloutResult:
        """Write the worker's trial folder and result under this job's folder."""
        target = self.job_dir / trial.rollout_name
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(folder), mode="r:gz") as tar:
            tar.extractall(target, filter="data")
        saved_config = target / "config.json"
        if saved_config.is_file():  # the worker's scratch jobs_dir -> this job's
            data = json.loads(saved_config.read_text())
            data["jobs_dir"] = str(self.jobs_dir)
            write_json_atomic(saved_config, json.dumps(data, indent=2))
        result = RolloutResult.model_validate_json(payload)
        if result.trajectory_path:  # the worker's scratch path -> the job folder's
            name = Path(result.trajectory_path)
            result.trajectory_path = str(target / "trajectory" / name.name)
        result.retried_errors = [*lost, *result.retried_errors]
        write_json_atomic(target / "result.json", result.model_dump_json(indent=2))
        return result

    def _lost(self, index: int, trial: PlannedRollout, lost: list[ErrorInfo]) -> None:
        ref = trial.ref
        result = RolloutResult(
            job_name=self.name, rollout_name=trial.rollout_name, task_name=ref.task_name,
            dataset_name=ref.dataset_name, agent_name=ref.agent_name, attempt=ref.attempt,
            error=lost[-1], retried_errors=lost[:-1])
        target = self.job_dir / trial.rollout_name
        target.mkdir(parents=True, exist_ok=True)
        write_json_atomic(target / "result.json", result.model_dump_json(indent=2))
        self._record(index, result)
        if self.listener is not None:
            self.listener(RolloutEvent(RolloutEventKind.END, result.rollout_name, result))


__all__ = ["RayJob", "TrialWorker"]
