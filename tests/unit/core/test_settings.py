"""Settings: the extra CA certificates sandboxes trust, by default the host's."""

from __future__ import annotations

from pathlib import Path

from benchflow.settings import Settings


def _ca_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "ca-certificates"
    (folder / "sub").mkdir(parents=True)
    (folder / "proxy.crt").write_text("pem")
    (folder / "sub" / "corp.crt").write_text("pem")
    (folder / "README").write_text("not a cert")
    return folder


def test_unset_means_the_hosts_extra_cas(tmp_path):
    folder = _ca_dir(tmp_path)
    settings = Settings.from_env({}, host_ca_dir=folder)
    assert settings.extra_ca_certs == (folder / "proxy.crt", folder / "sub" / "corp.crt")


def test_no_host_cas_means_none(tmp_path):
    assert Settings.from_env({}, host_ca_dir=tmp_path / "missing").extra_ca_certs == ()


def test_empty_or_none_turns_them_off(tmp_path):
    folder = _ca_dir(tmp_path)
    for value in ("", "none", "NONE"):
        env = {"BENCHFLOW_EXTRA_CA_CERTS": value}
        assert Settings.from_env(env, host_ca_dir=folder).extra_ca_certs == (), value


def test_a_list_replaces_the_default(tmp_path):
    folder = _ca_dir(tmp_path)
    env = {"BENCHFLOW_EXTRA_CA_CERTS": f"{tmp_path}/a.pem:{tmp_path}/b.pem"}
    assert Settings.from_env(env, host_ca_dir=folder).extra_ca_certs == (
        tmp_path / "a.pem", tmp_path / "b.pem")


def _age(folder: Path, seconds: int = 3600) -> None:
    """Date the folder and everything under it `seconds` back (a scan may then be kept)."""
    import os
    import time

    then = time.time() - seconds
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (then, then))


def test_a_certificate_added_or_removed_after_a_scan_is_seen(tmp_path):
    from benchflow.settings import host_ca_certs

    folder = _ca_dir(tmp_path)
    _age(folder)
    assert host_ca_certs(folder) == (folder / "proxy.crt", folder / "sub" / "corp.crt")
    assert host_ca_certs(folder) == (folder / "proxy.crt", folder / "sub" / "corp.crt")
    (folder / "sub" / "new.crt").write_text("pem")  # in a subfolder: its mtime moves
    assert host_ca_certs(folder) == (folder / "proxy.crt", folder / "sub" / "corp.crt",
                                     folder / "sub" / "new.crt")
    _age(folder)
    (folder / "proxy.crt").unlink()
    (folder / "deeper" / "er").mkdir(parents=True)
    (folder / "deeper" / "er" / "x.crt").write_text("pem")
    assert host_ca_certs(folder) == (folder / "deeper" / "er" / "x.crt",
                                     folder / "sub" / "corp.crt", folder / "sub" / "new.crt")


def test_get_settings_follows_the_environment(tmp_path, monkeypatch):
    from benchflow.settings import get_settings

    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "one"))
    monkeypatch.setenv("BENCHFLOW_EXTRA_CA_CERTS", str(tmp_path / "a.pem"))
    assert get_settings().cache_dir == tmp_path / "one"
    assert get_settings().extra_ca_certs == (tmp_path / "a.pem",)
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "two"))
    monkeypatch.setenv("BENCHFLOW_EXTRA_CA_CERTS", "none")
    monkeypatch.setenv("BENCHFLOW_REGISTRY", "https://example.org/registry.json")
    settings = get_settings()
    assert (settings.cache_dir, settings.extra_ca_certs, settings.registry) == (
        tmp_path / "two", (), "https://example.org/registry.json")
    monkeypatch.delenv("BENCHFLOW_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_settings().cache_dir == tmp_path / "home" / ".cache" / "benchflow"


def test_get_settings_keys_its_reuse_on_every_variable_from_env_reads():
    """`get_settings` hands back the last `Settings` while `_ENV_NAMES` keep their values: a
    variable `from_env` reads but the list lacks would go stale unseen."""
    from collections.abc import Mapping

    from benchflow.settings import _ENV_NAMES, Settings

    class Recording(Mapping):
        def __init__(self) -> None:
            self.read: set[str] = set()

        def __getitem__(self, key: str) -> str:
            self.read.add(key)
            raise KeyError(key)

        def __iter__(self):
            return iter(())

        def __len__(self) -> int:
            return 0

    env = Recording()
    Settings.from_env(env)
    assert env.read and env.read <= set(_ENV_NAMES), env.read - set(_ENV_NAMES)


def test_agents_path_alone_is_what_the_settings_hold(tmp_path, monkeypatch):
    """The catalog's read of BENCHFLOW_AGENTS_PATH (without the CA folder's look) answers
    what `get_settings()` does, and follows the variable."""
    import os

    from benchflow.settings import agents_path, get_settings

    monkeypatch.delenv("BENCHFLOW_AGENTS_PATH", raising=False)
    assert agents_path() == get_settings().agents_path == ()
    monkeypatch.setenv("BENCHFLOW_AGENTS_PATH", f"{tmp_path / 'a'}{os.pathsep}~/b{os.pathsep} ")
    assert agents_path() == get_settings().agents_path
    assert agents_path() == (tmp_path / "a", Path("~/b").expanduser())
