"""The Modal fake matches the installed SDK, and every Modal exception is mapped."""

from __future__ import annotations

import inspect

import grpclib
import pytest
from modal import exception
from modal._image import _Image
from modal.app import _App
from modal.container_process import _ContainerProcess
from modal.io_streams import _StreamReader, _StreamWriter
from modal.sandbox._filesystem import _SandboxFilesystem
from modal.sandbox._sandbox import _Sandbox

from benchflow.errors import (
    BenchflowError,
    ConfigError,
    SandboxBuildError,
    SandboxError,
    SandboxStartError,
)
from benchflow.sandbox.modal import map_modal_errors
from tests.fakes import modal_process
from tests.fakes import modal_sdk as fake

SURFACE = [
    (_App.lookup, fake.App.lookup),
    (_Image.from_dockerfile, fake.Image.from_dockerfile),
    (_Image.from_registry, fake.Image.from_registry),
    (_Image.from_id, fake.Image.from_id),
    (_Sandbox.create, fake.Sandbox.create),
    (_Sandbox.from_id, fake.Sandbox.from_id),
    (_Sandbox.list, fake.Sandbox.list),
    (_Sandbox.exec, fake.Sandbox.exec),
    (_Sandbox.terminate, fake.Sandbox.terminate),
    (_Sandbox.poll, fake.Sandbox.poll),
    (_Sandbox._experimental_set_outbound_network_policy,
     fake.Sandbox._experimental_set_outbound_network_policy),
    (_Sandbox.get_tags, fake.Sandbox.get_tags),
    (_Sandbox.snapshot_filesystem, fake.Sandbox.snapshot_filesystem),
    (_SandboxFilesystem.write_bytes, fake.SandboxFilesystem.write_bytes),
    (_SandboxFilesystem.read_bytes, fake.SandboxFilesystem.read_bytes),
    (_ContainerProcess.wait, fake.ContainerProcess.wait),
    (_ContainerProcess.poll, fake.ContainerProcess.poll),
    (_StreamWriter.write, modal_process._StreamWriter.write),
    (_StreamWriter.write_eof, modal_process._StreamWriter.write_eof),
    (_StreamWriter.drain, modal_process._StreamWriter.drain),
    (_StreamReader.read, modal_process._StreamReader.read),
]


def _raw(fn):
    """The function behind a method, staticmethod, the SDK's MethodWithAio or the fake's `.aio`."""
    while hasattr(fn, "__wrapped__") or hasattr(fn, "__func__"):
        fn = getattr(fn, "__wrapped__", None) or fn.__func__
    return fn


def _shape(fn) -> list[tuple[str, object, object]]:
    """Parameter names, kinds and defaults (annotations differ only in spelling)."""
    params = inspect.signature(_raw(fn), follow_wrapped=False).parameters.values()
    return [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize(("real", "double"), SURFACE, ids=lambda f: getattr(
    _raw(f), "__qualname__", repr(f)))
def test_fake_signatures_match_the_installed_sdk(real, double):
    assert _shape(double) == _shape(real)
    assert len(_shape(real)) >= 1


def test_the_adapter_uses_the_sdks_async_forms():
    import modal

    for name in ("create", "from_id", "list"):
        assert hasattr(getattr(modal.Sandbox, name), "aio")
    assert hasattr(modal.App.lookup, "aio") and hasattr(modal.Image.from_id, "aio")
    assert "outbound_cidr_allowlist" in inspect.signature(_Sandbox.create).parameters
    assert "tags" in inspect.signature(_Sandbox.create).parameters


def test_the_fake_refuses_the_blocking_form():
    with pytest.raises(TypeError, match=r"only the \.aio interface"):
        fake.Sandbox.create("sleep", "1")


def _all_modal_errors() -> list[type[BaseException]]:
    found = [cls for cls in vars(exception).values()
             if isinstance(cls, type) and issubclass(cls, exception.Error)]
    assert len(found) > 30  # the SDK's tree, not an empty import
    return found


REJECTED = (exception.AuthError, exception.PermissionDeniedError, exception.VersionError,
            exception.UnimplementedError, exception.RequestSizeError,
            exception.SerializationError, exception.DeserializationError,
            exception.WorkspaceManagementError)
PERMANENT = (exception.NotFoundError, exception.AlreadyExistsError,
             exception.SandboxTimeoutError, exception.ExecTimeoutError,
             exception.SandboxFilesystemError, exception.ClientClosed)


def _make(cls: type[BaseException]) -> BaseException:
    return cls("boom", "im-1") if cls is exception.ImageBuildError else cls("boom")


@pytest.mark.parametrize("cls", _all_modal_errors(), ids=lambda c: c.__name__)
def test_every_modal_exception_is_mapped(cls):
    with pytest.raises(BenchflowError) as info, map_modal_errors(SandboxStartError):
        raise _make(cls)
    err = info.value
    assert err.__cause__.__class__ is cls
    if cls is exception.ImageBuildError:
        assert isinstance(err, SandboxBuildError) and not err.retryable
    elif issubclass(cls, REJECTED) or (issubclass(cls, exception.InvalidError)
                                       and not issubclass(cls, exception.ConflictError)):
        assert isinstance(err, ConfigError) and not err.retryable
    elif issubclass(cls, PERMANENT):
        assert isinstance(err, SandboxStartError) and not err.retryable
    else:
        assert isinstance(err, SandboxStartError) and err.retryable, cls


def test_rate_limit_and_server_errors_are_retryable_bad_credentials_are_not():
    for cls in (exception.ResourceExhaustedError, exception.ServiceError,
                exception.InternalError, exception.ConnectionError):
        with pytest.raises(SandboxStartError) as limited, map_modal_errors(SandboxStartError):
            raise cls("429 / 5xx")
        assert limited.value.retryable
    with pytest.raises(ConfigError) as denied, map_modal_errors(SandboxStartError):
        raise exception.AuthError("Token missing")
    assert not denied.value.retryable and denied.value.error_type == "config_invalid"
    with pytest.raises(SandboxError) as raw, map_modal_errors():
        raise grpclib.GRPCError(grpclib.Status.UNAVAILABLE, "connection reset")
    assert raw.value.retryable and raw.value.error_type == "environment_exec_failed"
