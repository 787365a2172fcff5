"""What a sandbox is asked to be: image source, resources, network, labels."""

from pathlib import Path
from typing import Literal

from pydantic import Field

from benchflow._models import FrozenModel

PreservePolicy = Literal["never", "always", "on_failure"]
NetworkPolicy = Literal["public", "none", "model-only"]
"""What the sandbox's processes may reach: `public` (docker's default bridge), `none` (no
interface but loopback) or `model-only` (an internal network where only the model endpoint
answers; see `benchflow.sandbox.network`)."""


class SpecTree(FrozenModel):
    """A host folder `start` places at `dst` with the spec's files, as `upload(src, dst)`
    would (file modes and symbolic links kept): one upload at start instead of its own."""

    src: Path
    dst: str = Field(description="absolute path of the folder inside the sandbox")
    root_only: bool = Field(default=False, description="owned by root (uid and gid 0) and "
                            "unreadable by every other user (mode bits go-rwx cleared)")
    link: str | None = Field(default=None, description="an absolute path made a symbolic "
                             "link to `dst`")


class SandboxSpec(FrozenModel):
    """Everything a backend needs to start one rollout's sandbox.

    `environment_dir` (with a Dockerfile) or `docker_image` names the image; with
    `force_build` the Dockerfile wins even when `docker_image` is set.
    """

    name: str = Field(description="image and container name prefix, usually the task name")
    environment_dir: Path | None = None
    docker_image: str | None = None
    force_build: bool = False
    build_timeout_sec: float = 600.0
    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int | None = 10240
    pids_limit: int | None = Field(default=4096, description="processes (and threads) the "
                                   "sandbox may hold at once; None: the backend's default")
    download_limit_mb: int | None = Field(default=1024, description="bytes one download "
                                          "(/logs, an artifact) may bring to the host; the "
                                          "rest is dropped and recorded as a warning")
    gpus: int = 0
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    extra_ca_certs: tuple[Path, ...] = ()
    labels: dict[str, str] = Field(default_factory=dict)
    network: str | None = Field(default=None, description="docker network to attach (with "
                                "`model-only`: the internal network)")
    network_policy: NetworkPolicy = Field(default="public", description="applied when the "
                                          "container is created (`none`: network_mode none)")
    egress_allowlist: tuple[str, ...] = Field(default=(), description="hosts (names or IP "
                                              "addresses) a `model-only` sandbox may reach on "
                                              "backends that enforce `model-only` with an "
                                              "outbound allowlist (`egress_allowlist` capability)")
    runtime: str | None = None
    volumes: dict[str, dict[str, str]] | list[str] | None = None
    build_log_path: Path | None = None
    ledger_path: Path | None = Field(default=None, description="the job's sandboxes.jsonl, "
                                     "where cloud backends record every sandbox they make")
    files: dict[str, bytes] = Field(default_factory=dict, description="absolute path -> "
                                    "content (mode 0644) placed by `start`, before anything "
                                    "runs in the sandbox (in the same upload as the backend's "
                                    "own files where it can: one round trip less)")
    trees: tuple[SpecTree, ...] = Field(default=(), description="host folders placed by "
                                        "`start`, with `files`")
    compose_file: Path | None = Field(default=None, description="a Docker Compose file of "
                                      "more services (Harbor's environment/docker-compose.yaml): "
                                      "the sandbox is its `main` service (`compose` capability)")
    isolate_services: bool = Field(default=False, description="with `compose_file`: the "
                                   "services' network has no route out (the rollout's policy "
                                   "is not `public`, even while main starts public for an "
                                   "install)")
