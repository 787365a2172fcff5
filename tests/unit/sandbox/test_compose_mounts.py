"""Which paths of a sidecar the agent's `main` can write too (on a project as
`docker compose config --format json` prints it)."""

from __future__ import annotations

from benchflow.sandbox.docker.compose_mounts import main_can_write


def project(main: list, api: list, **api_extra) -> dict:
    return {"services": {"main": {"volumes": main}, "api": {"volumes": api, **api_extra}}}


def vol(source: str, target: str, **extra) -> dict:
    return {"type": "volume", "source": source, "target": target, **extra}


def bind(source: str, target: str, **extra) -> dict:
    return {"type": "bind", "source": source, "target": target, **extra}


def test_a_sidecars_own_file_system_is_its_own():
    p = project([vol("data", "/data")], [vol("logs", "/var/log/api")])
    assert main_can_write(p, "api", "/tmp/stats.json") is None
    assert main_can_write(p, "api", "/var/log/api/orders.log") is None


def test_a_volume_mounted_in_both_is_writable_from_main():
    p = project([vol("shared", "/data")], [vol("shared", "/srv/data")])
    why = main_can_write(p, "api", "/srv/data/orders.log")
    assert why == "volume 'shared' (at /srv/data in 'api') is writable in main at /data"
    assert main_can_write(p, "api", "/srv/other") is None


def test_read_only_in_main_is_not_a_way_in():
    p = project([vol("shared", "/data", read_only=True)], [vol("shared", "/srv/data")])
    assert main_can_write(p, "api", "/srv/data/orders.log") is None


def test_host_folders_overlapping_either_way():
    inside = project([bind("/h/task", "/mnt")], [bind("/h/task/api", "/var/log/api")])
    assert "host folder '/h/task/api'" in main_can_write(inside, "api", "/var/log/api/x")
    above = project([bind("/h/task/api/sub", "/mnt")], [bind("/h/task/api", "/out")])
    assert main_can_write(above, "api", "/out") is not None
    apart = project([bind("/h/main", "/mnt")], [bind("/h/api", "/out")])
    assert main_can_write(apart, "api", "/out/x") is None


def test_volumes_from_main_share_mains_volumes():
    p = project([{"type": "volume", "target": "/cache"}], [], volumes_from=["main"])
    assert "is writable in main at /cache" in main_can_write(p, "api", "/cache/x")
    ro = project([], [vol("logs", "/var/log/api")])
    ro["services"]["main"]["volumes_from"] = ["api:ro"]
    assert main_can_write(ro, "api", "/var/log/api/x") is None
    ro["services"]["main"]["volumes_from"] = ["api"]
    assert main_can_write(ro, "api", "/var/log/api/x") is not None


def test_tmpfs_is_never_shared():
    p = project([{"type": "tmpfs", "target": "/t"}], [{"type": "tmpfs", "target": "/t"}])
    assert main_can_write(p, "api", "/t/x") is None
