"""What every rollout phase does around its own work, however it is called: by `run()` or
by hand (`await rollout.setup()`, `start()`, ... `finish()`).

The first phase called opens the rollout's folder (config.json, rollout.log) and starts
the clock; each phase is timed into its `result.json` phase (`environment_setup`,
`agent_setup`, `agent_execution`, `verifier`) and its failure recorded as the result's
error (the first one wins) before it propagates; `finish()` writes `result.json`. So a
rollout driven by hand leaves the same files, timings and error mapping as `run()`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio

from benchflow.errors import BenchflowError, ResultsWriteError, RolloutCancelled
from benchflow.rollout.events import RolloutEventKind
from benchflow.rollout.logs import RolloutLogFile, rollout_log
from benchflow.rollout.result import ErrorInfo, Phase, write_error_txt, write_json_atomic
from benchflow.rollout.secrets import redacted_config_json

if TYPE_CHECKING:
    from benchflow.rollout.rollout import Rollout

log = logging.getLogger(__name__)

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
"""A full disk (or quota): the job's files cannot be written."""
P = ParamSpec("P")
T = TypeVar("T")


class PhaseBook:
    """One rollout's bookkeeping around its phases (see the module docstring)."""

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.opened = False
        self.finished = False
        self.cleaned = False
        self.depth = 0
        """1 while a phase runs: a phase it calls runs inside it, not timed again."""
        self._log_file: RolloutLogFile | None = None
        self._log_scope: contextlib.AbstractContextManager[None] | None = None

    async def open(self) -> None:
        """Once: the folder with config.json, rollout.log, the clock, the START event."""
        if self.opened:
            return
        self.opened = True
        rollout = self.rollout
        config_json = redacted_config_json(rollout.config)
        # shielded: a cancellation here would skip result.json; in a thread: hundreds of
        # rollouts starting at once must not each hold the event loop on the file system
        with anyio.CancelScope(shield=True):
            try:
                self._log_file = await anyio.to_thread.run_sync(self._open_folder, config_json)
            except OSError as exc:  # nothing started yet: the job stops here (a full disk)
                rollout._storage_failure = rollout._storage_failure or exc
                raise rollout._write_failure(rollout.paths.config, exc) from exc
        self._log_scope = rollout_log(self._log_file, rollout.rollout_name)
        self._log_scope.__enter__()
        rollout.clock.begin()
        log.info("rollout %s of job %s starts", rollout.rollout_name, rollout.job_name)
        rollout._emit(RolloutEventKind.START)

    def _open_folder(self, config_json: str) -> RolloutLogFile:
        paths = self.rollout.paths
        paths.mkdirs()  # the rollout's folder, made once: the two files below go in it
        write_json_atomic(paths.config, config_json, make_parent=False)
        return RolloutLogFile(paths.log, make_parent=False)

    async def run(self, name: str, clock: Phase | None, fn: Callable[..., Awaitable[T]],
                  /, *args: Any, **kwargs: Any) -> T:
        """Run one phase's work, `fn(*args, **kwargs)`: timed into `clock`, its failure
        recorded."""
        await self.open()
        self.depth += 1
        try:
            if clock is None:
                return await fn(*args, **kwargs)
            with self.rollout.clock.phase(clock):
                return await fn(*args, **kwargs)
        except anyio.get_cancelled_exc_class() as exc:
            where = clock or self.rollout.clock.current or name
            self.record_error(RolloutCancelled(f"cancelled during {where}"), where, exc)
            self.rollout._emit(RolloutEventKind.CANCEL)
            raise
        except Exception as exc:
            self.record_error(exc, clock or self.rollout.clock.current or name, exc)
            raise
        finally:
            self.depth -= 1

    def record_error(self, exc: BaseException, phase: str, cause: BaseException) -> None:
        """Make `exc` the result's error (unless one is recorded already), masked by the
        rollout's redactor. A full disk is not the agent's fault: it is kept apart, and
        `finish()` stops the job with it once the sandbox is gone."""
        rollout, result = self.rollout, self.rollout.result
        storage = isinstance(exc, ResultsWriteError) or (
            isinstance(exc, OSError) and exc.errno in NO_SPACE)
        if storage and isinstance(exc, OSError):
            rollout._storage_failure = rollout._storage_failure or exc
        if result.error is not None:
            return
        error = ErrorInfo.from_exception(exc, phase)
        # a full disk is no verdict on the trial: if this result gets written at all,
        # `jobs resume` runs the trial again
        result.error = error.model_copy(update={"message": rollout.redactor.text(error.message),
                                                **({"retryable": True} if storage else {})})
        result.reward = None
        result.rewards = None
        if storage:
            log.info("%s: cannot write its files: %s", rollout.rollout_name, exc)
        elif not isinstance(exc, BenchflowError) or exc.error_type == "internal_error":
            log.exception("%s: internal error in %s", rollout.rollout_name, phase,
                          exc_info=cause)
        try:
            write_error_txt(rollout.paths.error, cause, rollout.redactor.values)
        except OSError:
            pass

    async def finish(self) -> None:
        """Write result.json (once), close the trajectory and rollout.log, emit END.

        Raises:
            ResultsWriteError: the rollout's files could not be written (a full disk).
        """
        if self.finished:
            return
        self.finished = True
        rollout = self.rollout
        await self.open()
        failure: ResultsWriteError | None = None
        try:
            # closed now (no event after this one), its file finished in the worker thread,
            # before result.json: closing a written file costs the event loop a system call
            trajectory = rollout.ctx.trajectory if rollout.ctx is not None else None
            finish_trajectory = trajectory.detach() if trajectory is not None else None
            rollout.ledger.finish(rollout.result)
            rollout.clock.end()
            with anyio.CancelScope(shield=True):  # written even when cancelled
                try:
                    await anyio.to_thread.run_sync(self._write_result, finish_trajectory)
                except OSError as exc:  # the sandbox is gone already; the job stops
                    failure = rollout._write_failure(rollout.paths.result, exc)
            stored = rollout._storage_failure
            if failure is None and stored is not None:  # the disk filled during the rollout
                failure = rollout._write_failure(stored.filename or rollout.paths.root, stored)
            result = rollout.result
            log.info("rollout ends: reward %s, error %s", result.reward,
                     result.error.type if result.error else None)
            rollout._emit(RolloutEventKind.END)
        finally:
            scope, self._log_scope = self._log_scope, None
            if scope is not None:
                scope.__exit__(None, None, None)
            if self._log_file is not None:
                with anyio.CancelScope(shield=True):  # every line on disk when it returns
                    try:
                        await anyio.to_thread.run_sync(self._log_file.close)
                    except OSError:  # a full disk: the failure that matters is raised
                        log.debug("could not flush %s", rollout.paths.log)
        if failure is not None:
            raise failure

    def _write_result(self, finish_trajectory: Callable[[], None] | None) -> None:
        """The trajectory's file finished, then result.json written (a worker thread)."""
        rollout = self.rollout
        if finish_trajectory is not None:
            try:
                finish_trajectory()
            except OSError as exc:  # a full disk: its last events are lost
                rollout._storage_failure = rollout._storage_failure or exc
        rollout._write_result()


def phase(clock: Phase | None) -> Callable[[Callable[..., Awaitable[T]]],
                                           Callable[..., Awaitable[T]]]:
    """Make a `Rollout` method a phase timed into `clock` (see the module docstring)."""
    def decorate(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(fn)
        async def method(self: Rollout, *args: Any, **kwargs: Any) -> T:
            if self._phases.depth:  # a phase calling another (run(), or an override's super)
                return await fn(self, *args, **kwargs)
            # no closure per call: hundreds of rollouts in flight each hold this frame
            return await self._phases.run(fn.__name__, clock, fn, self, *args, **kwargs)
        return method
    return decorate


__all__ = ["PhaseBook", "phase"]
