"""The error tree: one class per error type, and every docker exception mapped."""

from __future__ import annotations

import inspect

import docker.errors
import pytest
import requests.exceptions
import urllib3.exceptions

import benchflow.errors as errors
from benchflow.errors import ERROR_TYPES, BenchflowError, SandboxError, SandboxStartError
from benchflow.sandbox.docker.errors import map_docker_errors
from benchflow.sandbox.docker.images import pull_image


def _classes() -> list[type[BenchflowError]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, BenchflowError)]


def test_every_error_type_has_a_class_except_internal():
    # ResultsWriteError is never recorded (there is no room for a result): it has no type
    covered = {c.error_type for c in _classes()
               if c not in (BenchflowError, errors.PhaseTimeout, errors.ResultsWriteError)}
    assert set(ERROR_TYPES) - covered == {"internal_error"}


def test_only_transient_infrastructure_errors_are_retryable():
    for cls in _classes():
        if issubclass(cls, SandboxError | errors.ProviderError | errors.WorkerLostError):
            continue
        assert cls.retryable is False, cls
    assert errors.WorkerLostError("a Ray worker died").retryable  # infrastructure, always
    for cls in _classes():
        if issubclass(cls, SandboxError) and not issubclass(cls, errors.PhaseTimeout):
            assert not cls("x").retryable, cls
            assert cls("x", transient=True).retryable is (
                cls not in (errors.SandboxTeardownError, errors.ResourceExhaustedError))
    assert errors.ProviderError("x", transient=True).retryable
    assert not errors.ProviderError("x", status=401).retryable


def test_config_errors_are_config_invalid_and_task_errors_stay_task_errors():
    assert errors.ConfigError("x").error_type == "config_invalid"
    assert errors.TaskInvalidError("x").error_type == "task_invalid"
    assert errors.TaskNotFoundError("x").error_type == "task_not_found"
    assert errors.SandboxExecError("x").error_type == "environment_exec_failed"


def _api_error(cls: type[docker.errors.APIError], status: int | None) -> Exception:
    response = None
    if status is not None:
        response = requests.Response()
        response.status_code = status
    return cls("boom", response=response)


@pytest.mark.parametrize(("exc", "transient"), [
    (_api_error(docker.errors.APIError, 500), True),
    (_api_error(docker.errors.APIError, 503), True),
    (_api_error(docker.errors.NotFound, 404), False),
    (_api_error(docker.errors.ImageNotFound, 404), False),
    (_api_error(docker.errors.APIError, 400), False),
    (_api_error(docker.errors.APIError, 409), False),
    (docker.errors.BuildError("step failed", []), False),
    (requests.exceptions.ConnectionError("refused"), True),
    (requests.exceptions.ReadTimeout("read timed out"), True),
    (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), True),
], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v))
def test_transient_is_decided_at_the_docker_boundary(exc, transient):
    with pytest.raises(SandboxError) as info, map_docker_errors(SandboxStartError):
        raise exc
    assert info.value.retryable is transient
    assert info.value.__cause__ is exc


def test_pulling_an_image_that_does_not_exist_is_not_retried():
    class Api:
        def pull(self, repo, tag):
            raise _api_error(docker.errors.NotFound, 404)

    class Client:
        api = Api()

    with pytest.raises(errors.ImagePullError) as info:
        pull_image(Client(), "nobody/nothing:1")
    assert not info.value.retryable and "nobody/nothing:1" in str(info.value)


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
