"""The error tree: one class per error type, and every docker exception mapped."""

from __future__ import annotations

import inspect

import docker.errors
import pytest
import requests.exceptions

import benchflow.errors as errors
from benchflow.errors import ERROR_TYPES, BenchflowError, SandboxError, SandboxStartError
from benchflow.sandbox.docker import map_docker_errors


def _classes() -> list[type[BenchflowError]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, BenchflowError)]


def test_every_error_type_has_a_class_except_internal():
    covered = {c.error_type for c in _classes() if c not in (BenchflowError, errors.PhaseTimeout)}
    assert set(ERROR_TYPES) - covered == {"internal_error"}


def test_only_infrastructure_errors_are_retryable():
    for cls in _classes():
        expected = issubclass(cls, SandboxError)
        if cls is errors.ProviderError:
            continue
        assert cls.retryable is expected, cls
    assert errors.ProviderError("x", transient=True).retryable
    assert not errors.ProviderError("x", status=401).retryable


def _docker_exception_classes() -> list[type[Exception]]:
    return [c for _, c in inspect.getmembers(docker.errors, inspect.isclass)
            if issubclass(c, docker.errors.DockerException)]


def _instance(cls: type[Exception]) -> Exception:
    if issubclass(cls, docker.errors.APIError):
        return cls("boom")
    if cls is docker.errors.ContainerError:
        return cls("c", 1, "cmd", "img", b"err")
    if cls in (docker.errors.BuildError, docker.errors.ImageLoadError):
        return cls("boom", [])
    if issubclass(cls, docker.errors.ContextException) or cls in (
            docker.errors.ContextNotFound, docker.errors.ContextAlreadyExists):
        return cls("boom")
    try:
        return cls("boom")
    except TypeError:
        return cls()


@pytest.mark.parametrize("cls", _docker_exception_classes(), ids=lambda c: c.__name__)
def test_every_docker_exception_is_mapped(cls):
    with pytest.raises(SandboxStartError) as info, map_docker_errors(SandboxStartError):
        raise _instance(cls)
    assert isinstance(info.value.__cause__, cls)


def test_transport_failures_are_mapped_as_retryable_sandbox_errors():
    with pytest.raises(SandboxError) as info, map_docker_errors():
        raise requests.exceptions.ConnectionError("daemon gone")
    assert info.value.retryable and "lost connection" in str(info.value)


def test_timeouts_carry_phase_and_deadline():
    exc = errors.VerifierTimeout("verifier", 2.5)
    assert (exc.phase, exc.timeout_sec, exc.error_type) == ("verifier", 2.5, "verifier_timeout")
    assert isinstance(exc, errors.PhaseTimeout) and isinstance(exc, errors.VerifierError)
