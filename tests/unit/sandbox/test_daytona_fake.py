"""The Daytona fake matches the installed SDK, and every Daytona exception is mapped."""

from __future__ import annotations

import inspect

import daytona
import pytest
from daytona._async.filesystem import AsyncFileSystem
from daytona._async.process import AsyncProcess
from daytona._async.snapshot import AsyncSnapshotService

from benchflow.errors import BenchflowError, ConfigError, SandboxError, SandboxStartError
from benchflow.sandbox.daytona import map_daytona_errors
from tests.fakes import daytona_sdk as fake

SURFACE = [
    (daytona.AsyncDaytona.__init__, fake.FakeAsyncDaytona.__init__),
    (daytona.AsyncDaytona.create, fake.FakeAsyncDaytona.create),
    (daytona.AsyncDaytona.delete, fake.FakeAsyncDaytona.delete),
    (daytona.AsyncDaytona.get, fake.FakeAsyncDaytona.get),
    (daytona.AsyncDaytona.list, fake.FakeAsyncDaytona.list),
    (daytona.AsyncSandbox.stop, fake.FakeSandbox.stop),
    (daytona.AsyncSandbox.get_work_dir, fake.FakeSandbox.get_work_dir),
    (daytona.AsyncSandbox.update_network_settings, fake.FakeSandbox.update_network_settings),
    (AsyncProcess.exec, fake.FakeProcess.exec),
    (AsyncProcess.create_session, fake.FakeProcess.create_session),
    (AsyncProcess.execute_session_command, fake.FakeProcess.execute_session_command),
    (AsyncProcess.get_session_command, fake.FakeProcess.get_session_command),
    (AsyncProcess.get_session_command_logs_async,
     fake.FakeProcess.get_session_command_logs_async),
    (AsyncProcess.send_session_command_input, fake.FakeProcess.send_session_command_input),
    (AsyncProcess.delete_session, fake.FakeProcess.delete_session),
    (AsyncFileSystem.upload_file, fake.FakeFileSystem.upload_file),
    (AsyncFileSystem.download_file, fake.FakeFileSystem.download_file),
    (AsyncSnapshotService.get, fake.FakeSnapshotService.get),
    (AsyncSnapshotService.create, fake.FakeSnapshotService.create),
]


def _shape(fn) -> list[tuple[str, object, object]]:
    """Parameter names, kinds and defaults (annotations differ only in spelling)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize(("real", "double"), SURFACE, ids=lambda f: f.__qualname__)
def test_fake_signatures_match_the_installed_sdk(real, double):
    assert _shape(double) == _shape(real)


def _all_daytona_errors() -> list[type[BaseException]]:
    names = list(getattr(daytona, "__all__", None) or dir(daytona))
    found = [cls for cls in (getattr(daytona, n) for n in names)
             if isinstance(cls, type) and issubclass(cls, daytona.DaytonaError)]
    assert len(found) > 20  # the SDK's tree, not an empty import
    return found


@pytest.mark.parametrize("cls", _all_daytona_errors(), ids=lambda c: c.__name__)
def test_every_daytona_exception_is_mapped(cls):
    with pytest.raises(BenchflowError) as info, map_daytona_errors(SandboxStartError):
        raise cls("boom")
    deterministic = issubclass(cls, (daytona.DaytonaAuthenticationError,
                                     daytona.DaytonaAuthorizationError,
                                     daytona.DaytonaForbiddenError, daytona.DaytonaBadRequestError,
                                     daytona.DaytonaUnprocessableEntityError,
                                     daytona.DaytonaValidationError))
    if deterministic:
        assert isinstance(info.value, ConfigError) and not info.value.retryable
    else:
        assert isinstance(info.value, SandboxError) and info.value.retryable
    assert info.value.__cause__.__class__ is cls


def test_rate_limit_and_server_errors_are_retryable_bad_credentials_are_not():
    with pytest.raises(SandboxStartError) as limited, map_daytona_errors(SandboxStartError):
        raise daytona.DaytonaRateLimitError("429", status_code=429)
    assert limited.value.retryable
    with pytest.raises(ConfigError) as denied, map_daytona_errors(SandboxStartError):
        raise daytona.DaytonaAuthenticationError("401", status_code=401)
    assert not denied.value.retryable and denied.value.error_type in ("config_invalid",
                                                                      "task_invalid")
