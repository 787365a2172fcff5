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
