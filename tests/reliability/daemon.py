"""A second Docker daemon of the reliability tests' own, never the shared one.

Its own data root, exec root, pid file and unix socket under a temporary folder, and its
own network namespace (`ip netns add`, kept across restarts), where it makes its own
`docker0` bridge, with no iptables rules: nothing it does reaches the host's daemon, its
containers, its bridge or its firewall. benchflow runs beside it in that namespace
(`enter`, an `nsenter` prefix), so a model relay on the bridge's gateway is reachable from
its sandboxes as on a real host. The base image is copied in from the shared daemon
(`docker save | docker load`). `restart()` stops and starts it on the same data root (a
daemon fault), `destroy()` ends it and removes everything it had, namespace included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import docker

BASE_IMAGE = "debian:bookworm-slim"
_START_WAIT_SEC = 120.0


class SecondDaemon:
    """`dockerd` on `unix://<root>/docker.sock`; `env` points benchflow (and docker) at it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bfd-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.netns = self.root.name
        self.proc: subprocess.Popen[bytes] | None = None
        self._client: docker.DockerClient | None = None

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a program in the daemon's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.netns}"]

    @property
    def env(self) -> dict[str, str]:
        """The host environment with DOCKER_HOST pointing here."""
        return {**os.environ, "DOCKER_HOST": self.url}

    def client(self) -> docker.DockerClient:
        """A client of this daemon (one, closed when the daemon stops)."""
        if self._client is None:
            self._client = docker.DockerClient(base_url=self.url, timeout=120)
        return self._client

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        probe = docker.DockerClient(base_url=self.url, timeout=10)
        try:
            return bool(probe.ping())
        except Exception:  # noqa: BLE001 - not listening yet
            return False
        finally:
            probe.close()

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def start(self) -> SecondDaemon:
        if shutil.which("dockerd") is None or shutil.which("ip") is None:
            raise RuntimeError("dockerd and ip (iproute2) are needed")
        if not Path(f"/run/netns/{self.netns}").exists():
            # its own network namespace: its docker0 is never the shared daemon's
            subprocess.run(["ip", "netns", "add", self.netns], check=True, capture_output=True)
            subprocess.run([*self.enter, "ip", "link", "set", "lo", "up"], check=True,
                           capture_output=True)
        with (self.root / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [*self.enter, "dockerd", "--data-root", str(self.root / "data"),
                 "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
                 "-H", self.url, "--iptables=false", "--ip-masq=false",
                 "--ip-forward=false", "--userland-proxy=false"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + _START_WAIT_SEC
        while True:  # waits for the daemon's answer (an event), bounded in case it never comes
            if self._answers():
                return self
            else:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the second dockerd did not start: "
                                       + (self.root / "dockerd.log").read_text()[-2000:]) from None
                time.sleep(0.2)

    def load_base_image(self) -> None:
        """Copy the base image from the shared daemon (read only there)."""
        shared = docker.from_env(timeout=300)
        try:
            data = b"".join(shared.images.get(BASE_IMAGE).save(named=True))
        finally:
            shared.close()
        (image,) = self.client().images.load(data)
        image.tag(BASE_IMAGE)  # saved under another of its tags, maybe

    def stop(self) -> None:
        """SIGTERM, wait until it exits (its containers stop with it)."""
        self._close_client()
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL the daemon (a crash): containerd and the containers' shims go with its
        process group."""
        self._close_client()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        """Remove every container and image, stop, and delete the folder."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                client = self.client()
                for container in client.containers.list(all=True):
                    container.remove(force=True, v=True)
                for network in client.networks.list():
                    if network.name not in ("bridge", "host", "none"):
                        network.remove()
            except Exception:  # noqa: BLE001 - the folder goes anyway
                pass
        self.stop()
        _unmount_under(self.root)
        subprocess.run(["ip", "netns", "delete", self.netns], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _unmount_under(root: Path) -> None:
    """Unmount what a stopped daemon left mounted under `root` (deepest first)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    points = [line.split()[1] for line in mounts if line.split()[1].startswith(str(root))]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
