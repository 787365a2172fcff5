"""A sandbox started before its rollout asks for it: `benchflow run`'s first one.

Starting a sandbox is mostly waiting on the backend (a container's start takes the daemon
~200 ms). `start_early` begins that on a thread of its own, with its own event loop, while
the command imports and sets up the rest; the rollout whose spec is the same then
`claim_early`s it (waiting, without holding the GIL, until it has started) instead of
starting one of its own. The sandbox carries its rollout's labels from its creation (the
spec is the rollout's), so a process killed at any point leaves nothing a cleanup of the
job cannot find; `discard_early` removes one nobody claimed (bad input found later, an
import error, Ctrl-C).

Only providers whose sandboxes may start on one event loop and then be used on another
(`SandboxProvider.early_start`) start early; a multi-container (compose) sandbox does not.
Their `start()` calls `backend_waits()` once it only waits on the backend: the caller
holds back its own imports until then (`until_backend_waits`), so that the start's first
requests do not queue for the GIL behind them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio

from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.factory import create_sandbox
from benchflow.sandbox.registry import provider_class
from benchflow.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)


class EarlySandbox:
    """One sandbox starting on its own thread; `wait()` for it, `discard()` to remove it."""

    def __init__(self, backend: str, spec: SandboxSpec, sandbox: Sandbox) -> None:
        self.backend = backend
        self.spec = spec
        """The spec it was asked for (before the provider's own settings applied)."""
        self.sandbox = sandbox
        self._done = threading.Event()
        self._backend_waits = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="benchflow-early-sandbox",
                                        daemon=True)
        self._thread.early_sandbox = self  # type: ignore[attr-defined] # see backend_waits()

    def _run(self) -> None:
        try:
            anyio.run(self.sandbox.start)  # a failed start removes what it made
        except BaseException as exc:  # noqa: BLE001 - re-raised by wait(), in the rollout
            self._error = exc
        finally:
            self._backend_waits.set()
            self._done.set()

    def until_backend_waits(self) -> None:
        """Block until what is left of the start is waiting on the backend (`backend_waits`)
        or the start has ended: the thread's requests go out without waiting for the GIL
        behind the caller's imports (which hold it for whole C calls: ~25-45 ms more)."""
        self._backend_waits.wait()

    def wait(self) -> None:
        """Block until the start has ended (in a worker thread: it holds no GIL meanwhile).

        Raises:
            SandboxError: the start failed (the error a rollout's own start would raise).
        """
        self._done.wait()
        if self._error is not None:
            raise self._error

    def discard(self) -> None:
        """Wait for the start to end, then remove the sandbox (if it started)."""
        self._done.wait()
        if self._error is None:
            anyio.run(self.sandbox.stop)


def backend_waits() -> None:
    """Called by a backend's `start()` once what is left is mostly waiting on the backend
    (docker: the container's start, ~200 ms): an early start's caller goes on then
    (`EarlySandbox.until_backend_waits`). Elsewhere, a no-op."""
    early = getattr(threading.current_thread(), "early_sandbox", None)
    if early is not None:
        early._backend_waits.set()


_pending: EarlySandbox | None = None
_lock = threading.Lock()


def start_early(backend: str, spec: SandboxSpec,
                provider_config: dict[str, Any] | None = None) -> EarlySandbox | None:
    """Start a sandbox for `spec` now, on a thread; None where the backend (or a compose
    task) does not start early. At most one is pending per process.

    Raises:
        ConfigError: no provider under that name, or its SDK is not installed.
    """
    global _pending
    if not provider_class(backend).early_start or spec.compose_file is not None:
        return None
    with _lock:
        if _pending is not None:
            return None
        _pending = early = EarlySandbox(backend, spec,
                                        create_sandbox(backend, spec, provider_config))
    early._thread.start()
    return early


def claim_early(backend: str, spec: SandboxSpec) -> EarlySandbox | None:
    """The pending early sandbox when it was started for exactly `spec` on `backend` (it is
    the caller's from now on: `wait()` for its start), else None."""
    global _pending
    with _lock:
        early = _pending
        if early is None or early.backend != backend or early.spec != spec:
            if early is not None:
                log.info("the early sandbox was not started for this rollout's spec: unused")
            return None
        _pending = None
    return early


def discard_early() -> None:
    """Remove the early sandbox if no rollout claimed it (waits for its start to end)."""
    global _pending
    with _lock:
        early, _pending = _pending, None
    if early is not None:
        early.discard()


__all__ = ["EarlySandbox", "backend_waits", "claim_early", "discard_early", "start_early"]
