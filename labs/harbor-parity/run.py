"""The oracle parity lab: third-party Harbor tasks, benchflow's oracle plain/hardened, Harbor 0.24.

    python labs/harbor-parity/run.py [--only ID ...] [--skip-harbor] [--prepare-only]
        [--mirrors DIR] [--concurrency N]

One command: it prepares what is missing, runs every task of `manifest.toml` with the oracle
(benchflow with hardening off, benchflow with `harden=True`, Harbor 0.24's `harbor run -a oracle
-e docker`), prints the table and writes it to `results.md`.

Preparation (each step skipped when already done):
- tasks: each task is exported from a local mirror of its repository at the pinned commit
  (`git archive`) into the git-ignored `.tasks/<id>/`; the only change is the base-image
  substitution of `[substitutions]` in FROM lines, `COPY --from=` and `docker_image`.
  The mirrors are git directories brought by the search tool's `fetch`; none is committed.
- base images: `bf-parity/os:bookworm` (debian:bookworm-slim + ca-certificates + the host's extra
  CA certificates, so pip inside either harness can pass this machine's TLS-intercepting proxy),
  `bf-parity/python:3-slim` (that + Debian's python3/pip, `python` and `pip` on PATH, no
  EXTERNALLY-MANAGED marker, like the official python images) and `bf-parity/uv:latest` (`/uv`,
  `/uvx` from PyPI's uv wheel, like ghcr.io/astral-sh/uv).
- Harbor: a Python 3.12 venv (pyenv) in `.harbor-venv/` with harbor==0.24.0, and the Docker
  Compose v2 CLI plugin from Debian's docker-compose package in `.docker/cli-plugins/`
  (Harbor runs `docker compose`; the lab points DOCKER_CONFIG there for Harbor only).

Exit codes: 0 table printed, 1 a cell differs from the manifest's expectation, 2 a prerequisite
is missing (the message says how to get it).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
MANIFEST = HERE / "manifest.toml"
TASKS_DIR = HERE / ".tasks"
BASES_DIR = HERE / ".bases"
RUNS_DIR = HERE / ".runs"
HARBOR_VENV = HERE / ".harbor-venv"
DOCKER_CONFIG = HERE / ".docker"
RESULTS = HERE / "results.md"
LAST = RUNS_DIR / "last.json"
DEFAULT_MIRRORS = Path("/work/.mirror")
HARBOR_VERSION = "0.24.0"
PYENV_312 = Path.home() / ".pyenv/versions/3.12.1/bin/python"
COMPOSE_DEB = "pool/main/d/docker-compose/docker-compose_2.26.1-4_amd64.deb"
COMPOSE_DEB_SHA256 = "47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea"
DEBIAN_MIRROR = "http://deb.debian.org/debian/"
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
HARBOR_TIMEOUT_SEC = 1200
MARKER = ".parity-prepared.json"
CANNOT_RUN = "cannot run here"


class Missing(Exception):
    """A prerequisite is missing; the message says how to get it (exit 2)."""


@dataclass(frozen=True)
class TaskSpec:
    id: str
    license: str
    category: str
    repo: str = ""
    commit: str = ""
    path: str = ""
    local: str = ""
    """A task of this repository (a folder relative to its root) instead of a mirror's."""
    expect: str = ""
    unset_env: tuple[str, ...] = ()
    uv_from_pypi: bool = False
    """Replace the astral.sh uv installer line of its scripts with uv from PyPI (see
    `UV_FROM_PYPI`): this machine cannot reach astral.sh. Both harnesses run the same files."""
    rewrites: tuple[tuple[str, str], ...] = ()
    """Literal (old, new) replacements in its scripts, each a task defect the manifest names
    (an unpinned dependency that broke since): recorded with the other changes."""

    @property
    def dir(self) -> Path:
        return TASKS_DIR / self.id


@dataclass
class Cell:
    """One run's outcome: a reward, or why there is none."""

    reward: float | None = None
    error: str | None = None
    detail: str = ""
    run_dir: str = ""
    duration_sec: float = 0.0
    ran: str = ""
    """`<run stamp> @ <benchflow commit>` of the run that produced this cell."""

    @property
    def text(self) -> str:
        if self.reward is not None:
            return f"{self.reward:g}"
        return self.error or "-"


@dataclass
class Row:
    task: str
    plain: Cell = field(default_factory=Cell)
    hardened: Cell = field(default_factory=Cell)
    harbor: Cell = field(default_factory=Cell)


# ---------------------------------------------------------------- manifest and mirrors

def load_manifest() -> tuple[dict[str, str], list[TaskSpec]]:
    data = tomllib.loads(MANIFEST.read_text())
    subs = dict(data["substitutions"])
    tasks = [TaskSpec(**{**t, "unset_env": tuple(t.get("unset_env", ())),
                         "rewrites": tuple(tuple(r) for r in t.get("rewrites", ()))})
             for t in data["task"]]
    ids = [t.id for t in tasks]
    if len(ids) != len(set(ids)):
        raise SystemExit(f"{MANIFEST}: duplicate task ids")
    return subs, tasks


def mirror_git_dir(mirrors: Path, repo: str) -> Path | None:
    root = mirrors / repo.replace("/", "+") / "repo"
    for candidate in (root / ".git", root):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


def check_mirrors(mirrors: Path, tasks: list[TaskSpec]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    missing: list[str] = []
    for spec in tasks:
        if spec.local or spec.repo in found:
            continue
        git_dir = mirror_git_dir(mirrors, spec.repo)
        ok = git_dir is not None and subprocess.run(
            ["git", "--git-dir", str(git_dir), "cat-file", "-e", f"{spec.commit}^{{commit}}"],
            capture_output=True).returncode == 0
        if ok:
            found[spec.repo] = git_dir
        else:
            missing.append(f"  {spec.repo} @ {spec.commit}")
    if missing:
        raise Missing(
            "These repositories are not mirrored at the pinned commit under "
            f"{mirrors}/<owner>+<name>/repo:\n" + "\n".join(sorted(set(missing))) +
            "\nBring each with the search tool's fetch (`fetch github:<owner>/<name>`; it lands in "
            "/work/.mirror), or pass --mirrors DIR holding git directories laid out the same way "
            "(DIR/<owner>+<name>/repo, a bare repo or a clone). Mirrors are never committed.")
    return found


# ---------------------------------------------------------------- prepare: tasks

FROM_RE = re.compile(r"^(\s*FROM\s+)(--platform=\S+\s+)?(\S+)(.*)$", re.IGNORECASE)
COPY_FROM_RE = re.compile(r"(--from=)(\S+)")
DOCKER_IMAGE_RE = re.compile(r'^(\s*docker_image\s*=\s*")([^"]+)(".*)$')


def substitute_image(ref: str, subs: dict[str, str], where: str) -> str:
    for pattern, local in subs.items():
        if re.fullmatch(pattern, ref):
            return local
    raise SystemExit(f"{where}: image {ref!r} has no substitution in {MANIFEST.name} "
                     "[substitutions]; add a local base for it")


def substitute_dockerfile(text: str, subs: dict[str, str], where: str) -> tuple[str, list[str]]:
    """FROM and COPY --from image references -> local images; build-stage names stay."""
    stages: set[str] = set()
    changes: list[str] = []
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        m = FROM_RE.match(line.rstrip("\n"))
        if m:
            ref = m.group(3)
            alias = re.search(r"\s+AS\s+(\S+)", m.group(4), re.IGNORECASE)
            if ref.lower() not in stages and ref != "scratch":
                new = substitute_image(ref, subs, where)
                changes.append(f"FROM {ref} -> {new}")
                line = f"{m.group(1)}{m.group(2) or ''}{new}{m.group(4)}\n"
            if alias:
                stages.add(alias.group(1).lower())
        elif re.match(r"^\s*COPY\b", line, re.IGNORECASE):
            cm = COPY_FROM_RE.search(line)
            if cm and not cm.group(2).isdigit() and cm.group(2).lower() not in stages:
                new = substitute_image(cm.group(2), subs, where)
                changes.append(f"COPY --from={cm.group(2)} -> {new}")
                line = line[:cm.start(2)] + new + line[cm.end(2):]
        out.append(line)
    return "".join(out), changes


def substitute_task_toml(text: str, subs: dict[str, str], where: str) -> tuple[str, list[str]]:
    changes: list[str] = []
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        m = DOCKER_IMAGE_RE.match(line.rstrip("\n"))
        if m:
            new = substitute_image(m.group(2), subs, where)
            changes.append(f"docker_image {m.group(2)} -> {new}")
            line = f"{m.group(1)}{new}{m.group(3)}\n"
        out.append(line)
    return "".join(out), changes


UV_INSTALLER_RE = re.compile(
    r"curl\s+-[A-Za-z]+\s+https://astral\.sh/uv/\S*install\.sh\s*\|\s*(?:ba)?sh")
UV_FROM_PYPI = ("python3 -m pip install -q --force-reinstall --break-system-packages uv==0.9.7 2>/dev/null "
                "|| python3 -m pip install -q --force-reinstall uv==0.9.7; mkdir -p \"$HOME/.local/bin\" "
                "&& printf 'export UV_NATIVE_TLS=1\\n' > \"$HOME/.local/bin/env\"")
"""What replaces `curl ... https://astral.sh/uv/.../install.sh | sh` with `uv_from_pypi`: uv
from PyPI (to /usr/local/bin), and the `env` file the installer writes (sourced next by
such scripts), here making uv trust the system's CA store (this machine's TLS proxy)."""


def spec_digest(spec: TaskSpec, subs: dict[str, str]) -> str:
    local = ""
    if spec.local:  # a folder of this repository: its content is the version
        root = REPO_ROOT / spec.local
        local = hashlib.sha256(b"".join(p.relative_to(root).as_posix().encode() + p.read_bytes()
                                        for p in sorted(root.rglob("*")) if p.is_file())
                               ).hexdigest()
    blob = json.dumps([spec.repo, spec.commit, spec.path, spec.local, local, spec.uv_from_pypi,
                       UV_FROM_PYPI, spec.rewrites, sorted(subs.items())]).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def prepare_task(spec: TaskSpec, git_dir: Path | None, subs: dict[str, str]) -> list[str]:
    """Export the task at its commit (or copy this repository's folder) into .tasks/<id>/
    and substitute base images."""
    digest = spec_digest(spec, subs)
    marker = spec.dir / MARKER
    if marker.is_file() and json.loads(marker.read_text()).get("digest") == digest:
        return json.loads(marker.read_text())["changes"]
    if spec.dir.exists():
        shutil.rmtree(spec.dir)
    if spec.local:
        shutil.copytree(REPO_ROOT / spec.local, spec.dir, symlinks=True)
    else:
        assert git_dir is not None
        spec.dir.mkdir(parents=True)
        treeish = f"{spec.commit}:{spec.path}" if spec.path else spec.commit
        archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "--format=tar",
                                  treeish], capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(spec.dir, filter="data")
    if not (spec.dir / "task.toml").is_file():
        raise SystemExit(f"{spec.repo or spec.local}@{spec.commit}:{spec.path}: no task.toml there")
    changes: list[str] = []
    for path in sorted(spec.dir.rglob("*")):
        rel = str(path.relative_to(spec.dir))
        if path.is_file() and (path.name == "Dockerfile" or path.name.endswith(".Dockerfile")):
            text, ch = substitute_dockerfile(path.read_text(), subs, f"{spec.id}/{rel}")
        elif path.is_file() and path.name == "task.toml":
            text, ch = substitute_task_toml(path.read_text(), subs, f"{spec.id}/{rel}")
        elif path.is_file() and path.suffix == ".sh" and (spec.uv_from_pypi or spec.rewrites):
            text, ch = path.read_text(), []
            if spec.uv_from_pypi:
                text, n = UV_INSTALLER_RE.subn(lambda _: UV_FROM_PYPI, text)
                ch += ["astral.sh uv installer -> uv from PyPI"] * min(n, 1)
            for old, new in spec.rewrites:
                if old in text:
                    text = text.replace(old, new)
                    ch.append(f"{old!r} -> {new!r}")
        else:
            continue
        if ch:
            path.write_text(text)
            changes += [f"{rel}: {c}" for c in ch]
    marker.write_text(json.dumps({"digest": digest, "repo": spec.repo, "commit": spec.commit,
                                  "path": spec.path, "changes": changes}, indent=1))
    return changes


# ---------------------------------------------------------------- prepare: base images

def _host_ca_files() -> list[Path]:
    return sorted(HOST_CA_DIR.glob("*.crt")) if HOST_CA_DIR.is_dir() else []


BASES: dict[str, str] = {
    "bf-parity/os:bookworm": """\
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \\
    && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
# pip inside a venv (certifi) and uv read these: the host CA reaches every client
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
""",
    "bf-parity/python:3-slim": """\
FROM bf-parity/os:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python3-venv \\
    && rm -rf /var/lib/apt/lists/* \\
    && ln -s /usr/bin/python3 /usr/local/bin/python \\
    && rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
ENV LANG=C.UTF-8
CMD ["python3"]
""",
    "bf-parity/uv:latest": """\
FROM bf-parity/python:3-slim AS build
RUN pip install --no-cache-dir uv==0.9.7
FROM scratch
COPY --from=build /usr/local/bin/uv /uv
COPY --from=build /usr/local/bin/uvx /uvx
""",
}


FIXTURE_IMAGES: dict[str, tuple[str, str]] = {
    "benchflow-fixture/separate-prebuilt-verifier:1": (
        "FROM bf-parity/os:bookworm\nRUN echo prebuilt > /verifier-image.txt\n"
        "COPY test.sh /tests/test.sh\nWORKDIR /app\n",
        "tests/integration/fixtures/tasks/separate-prebuilt/tests/test.sh"),
}
"""Images a fixture task names as present locally (as a registry would have served them):
tag -> (Dockerfile, the one file it copies, relative to the repository)."""


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def image_label(tag: str, label: str) -> str:
    out = subprocess.run(["docker", "image", "inspect", "-f",
                          f'{{{{index .Config.Labels "{label}"}}}}', tag],
                         capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def ensure_bases(log) -> None:
    if not image_exists("debian:bookworm-slim"):
        raise Missing("The local base image debian:bookworm-slim is missing; the lab builds every "
                      "substitute from it (there is no registry here).")
    for tag, dockerfile in BASES.items():
        recipe = hashlib.sha256(dockerfile.encode()).hexdigest()[:12]
        if "FROM scratch" not in dockerfile:
            dockerfile += f"LABEL bf-parity.recipe={recipe}\n"
        elif image_exists(tag):
            continue  # (a scratch image: its parent's rebuild is what matters)
        if image_label(tag, "bf-parity.recipe") == recipe:
            continue
        ctx = BASES_DIR / tag.replace("/", "_").replace(":", "_")
        shutil.rmtree(ctx, ignore_errors=True)
        (ctx / "ca").mkdir(parents=True)
        for ca in _host_ca_files():
            shutil.copy(ca, ctx / "ca" / ca.name)
        (ctx / "Dockerfile").write_text(dockerfile)
        log(f"building base image {tag}")
        proc = subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise Missing(f"building {tag} failed:\n{proc.stderr[-2000:]}")
    for tag, (dockerfile, copied) in FIXTURE_IMAGES.items():
        if image_exists(tag):
            continue
        ctx = BASES_DIR / tag.replace("/", "_").replace(":", "_")
        shutil.rmtree(ctx, ignore_errors=True)
        ctx.mkdir(parents=True)
        shutil.copy(REPO_ROOT / copied, ctx / Path(copied).name)
        (ctx / "Dockerfile").write_text(dockerfile)
        log(f"building fixture image {tag}")
        proc = subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise Missing(f"building {tag} failed:\n{proc.stderr[-2000:]}")


# ---------------------------------------------------------------- prepare: Harbor

def harbor_bin() -> Path:
    return HARBOR_VENV / "bin" / "harbor"


def ensure_harbor(log) -> str | None:
    """Harbor's venv and the compose plugin; returns why Harbor cannot run, or None."""
    if not harbor_bin().is_file():
        if not PYENV_312.is_file():
            return f"no Python 3.12 at {PYENV_312} (Harbor {HARBOR_VERSION} needs >= 3.12)"
        log(f"creating {HARBOR_VENV.name} with harbor=={HARBOR_VERSION}")
        subprocess.run([str(PYENV_312), "-m", "venv", str(HARBOR_VENV)], check=True)
        pip = subprocess.run([str(HARBOR_VENV / "bin" / "pip"), "install", "-q",
                              f"harbor=={HARBOR_VERSION}"], capture_output=True, text=True)
        if pip.returncode != 0:
            return f"pip install harbor=={HARBOR_VERSION} failed: {pip.stderr[-500:]}"
    plugin = DOCKER_CONFIG / "cli-plugins" / "docker-compose"
    if not plugin.is_file():
        log("fetching the Docker Compose v2 plugin from Debian's docker-compose package")
        why = _install_compose_plugin(plugin)
        if why:
            return why
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True,
                           env={**os.environ, "DOCKER_CONFIG": str(DOCKER_CONFIG)})
    if probe.returncode != 0:
        return f"`docker compose` does not run: {probe.stderr.strip()[:300]}"
    return None


def _install_compose_plugin(plugin: Path) -> str | None:
    import urllib.request

    try:
        with urllib.request.urlopen(DEBIAN_MIRROR + COMPOSE_DEB, timeout=120) as resp:
            deb = resp.read()
    except OSError as exc:
        return f"could not download Debian's docker-compose package ({COMPOSE_DEB}): {exc}"
    if hashlib.sha256(deb).hexdigest() != COMPOSE_DEB_SHA256:
        return f"Debian's {COMPOSE_DEB} does not have the expected sha256"
    tmp = BASES_DIR / "docker-compose.deb"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(deb)
    try:
        data = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(tmp)], capture_output=True,
                              check=True).stdout
    finally:
        tmp.unlink()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("./usr/libexec/docker/cli-plugins/docker-compose")
        plugin.parent.mkdir(parents=True, exist_ok=True)
        plugin.write_bytes(member.read())
    plugin.chmod(0o755)
    return None


# ---------------------------------------------------------------- running

def _env_without(names: tuple[str, ...]) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


def run_benchflow(spec: TaskSpec, harden: bool, jobs_dir: Path) -> Cell:
    """One oracle rollout in-process; a load-time refusal is recorded as its error type."""
    import anyio

    from benchflow import BenchflowError, Rollout, RolloutConfig, Scene

    saved = {n: os.environ.pop(n) for n in spec.unset_env if n in os.environ}
    started = time.monotonic()
    mode = "hardened" if harden else "plain"
    try:
        config = RolloutConfig(task_path=spec.dir, scenes=[Scene.single(agent="oracle")],
                               harden=harden, jobs_dir=jobs_dir, job_name=f"bf-{mode}",
                               dataset_name=mode, extra_ca_certs=tuple(_host_ca_files()))
        rollout = Rollout(config)
        result = anyio.run(rollout.run)
    except BenchflowError as exc:
        return Cell(error=f"refused ({exc.error_type})", detail=str(exc)[:300],
                    duration_sec=time.monotonic() - started)
    except Exception as exc:  # a crash is a finding, not the end of the lab
        return Cell(error=f"crash ({type(exc).__name__})", detail=str(exc)[:300],
                    duration_sec=time.monotonic() - started)
    finally:
        os.environ.update(saved)
    detail = result.error.message[:300] if result.error else ""
    return Cell(reward=result.reward, error=result.error.type if result.error else None,
                detail=detail, run_dir=str(rollout.paths.root),
                duration_sec=time.monotonic() - started)


def harbor_task_error(task_dir: Path) -> str:
    """Why Harbor's task model rejects a task (its pydantic message, condensed)."""
    code = ("import sys; from pathlib import Path; from harbor.models.task.task import Task\n"
            "try:\n    Task(Path(sys.argv[1]))\nexcept Exception as e:\n    print(e)")
    out = subprocess.run([str(HARBOR_VENV / "bin" / "python"), "-c", code, str(task_dir)],
                         capture_output=True, text=True).stdout
    return " ".join(out.split())[:300] or "Harbor loads this task without error"


def run_harbor(spec: TaskSpec, jobs_dir: Path) -> Cell:
    """`harbor run -a oracle -e docker` on the prepared task; reads the trial's result.json."""
    job = f"{spec.id}-{datetime.now(UTC).strftime('%H%M%S')}"
    env = _env_without(spec.unset_env) | {"DOCKER_CONFIG": str(DOCKER_CONFIG)}
    cmd = [str(harbor_bin()), "run", "-p", str(spec.dir), "-a", "oracle", "-e", "docker",
           "-o", str(jobs_dir), "--job-name", job, "-y", "-q", "-n", "1", "-r", "0"]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=HERE,
                              timeout=HARBOR_TIMEOUT_SEC)
    except subprocess.TimeoutExpired:
        return Cell(error="timeout (lab)", duration_sec=time.monotonic() - started)
    duration = time.monotonic() - started
    job_dir = jobs_dir / job
    (jobs_dir / f"{job}.log").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    trials = [p for p in sorted(job_dir.glob("*/result.json"))] if job_dir.is_dir() else []
    if not trials and "network_mode='no-network' is not supported" in proc.stdout + proc.stderr:
        # Harbor enforces no-network with an egress-control sidecar whose probe image
        # (alpine, pinned by digest) must come from a registry: none is reachable here.
        return Cell(error=CANNOT_RUN, detail="Harbor's docker environment rejects "
                    "network_mode='no-network' without its egress-control sidecar (registry image)",
                    run_dir=str(job_dir), duration_sec=duration)
    if not trials and "Either datasets or tasks must be provided" in proc.stdout + proc.stderr:
        # Harbor's CLI drops a task whose task.toml it cannot parse and then reports this;
        # its own model says why.
        return Cell(error="task rejected", detail=harbor_task_error(spec.dir),
                    run_dir=str(job_dir), duration_sec=duration)
    if not trials:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return Cell(error="refused" if proc.returncode else "no trial",
                    detail=" | ".join(tail)[:300], run_dir=str(job_dir), duration_sec=duration)
    data = json.loads(trials[0].read_text())
    rewards = (data.get("verifier_result") or {}).get("rewards") or {}
    exc = data.get("exception_info") or {}
    reward = rewards.get("reward")
    if reward is None and len(rewards) == 1:
        reward = next(iter(rewards.values()))
    error = exc.get("exception_type") if exc else None
    return Cell(reward=float(reward) if reward is not None else None,
                error=error if reward is None else None,
                detail=(exc.get("exception_message") or "")[:300], run_dir=str(trials[0].parent),
                duration_sec=duration)


# ---------------------------------------------------------------- table

def expected_ok(spec: TaskSpec, row: Row) -> bool:
    """A sound task: 1.0 plain, hardened and (when it ran) in Harbor."""
    return all(c.reward == 1.0 for c in (row.plain, row.hardened))


REFUSALS = ("task_invalid", "config_invalid", "refused", "task rejected")
"""Outcomes where a harness declined the task before running its verifier."""


def outcome(cell: Cell) -> str:
    """What agreement compares: the reward, a refusal, or no reward (errors alike)."""
    if cell.reward is not None:
        return cell.text
    if (cell.error or "").startswith(REFUSALS) or "Solution script not found" in cell.detail:
        return "refused"  # Harbor finds a missing solve.sh only once it runs the oracle
    return "no reward"


def agreement(row: Row, harbor_ran: bool) -> str:
    harbor = harbor_ran and row.harbor.error != CANNOT_RUN and row.harbor.text != "-"
    cells = [row.plain, row.hardened] + ([row.harbor] if harbor else [])
    same = len({outcome(c) for c in cells}) == 1
    return ("yes" if same else "NO") + ("" if harbor or not harbor_ran else " (bf only)")


def render(tasks: list[TaskSpec], rows: dict[str, Row], *, harbor_note: str | None) -> str:
    harbor_ran = harbor_note is None
    runs = sorted({c.ran or "unrecorded" for s in tasks if s.id in rows
                   for c in (rows[s.id].plain, rows[s.id].hardened, rows[s.id].harbor)})
    lines = [f"Harbor {HARBOR_VERSION}" + ("" if harbor_ran else f" (not run: {harbor_note})")
             + "; cells from runs (UTC stamp @ benchflow commit): " + ", ".join(runs), "",
             "| task | exercises | bf plain | bf hardened | Harbor 0.24 | agree | expected |",
             "|---|---|---|---|---|---|---|"]
    for spec in tasks:
        row = rows.get(spec.id)
        if row is None:
            continue
        harbor = row.harbor.text if row.harbor.text != "-" else "not re-run"
        lines.append(f"| {spec.id} | {spec.category} | {row.plain.text} | {row.hardened.text} | "
                     f"{harbor if harbor_ran else 'n/a'} | {agreement(row, harbor_ran)} | "
                     f"{spec.expect or '1.0'} |")
    n = len([s for s in tasks if s.id in rows])
    ones = sum(1 for s in tasks if s.id in rows and expected_ok(s, rows[s.id]))
    agree = sum(1 for s in tasks if s.id in rows and agreement(rows[s.id], harbor_ran) == "yes")
    cannot = sum(1 for s in tasks if s.id in rows and rows[s.id].harbor.error == CANNOT_RUN)
    not_run = sum(1 for s in tasks if s.id in rows and rows[s.id].harbor.text == "-")
    lines += ["", f"{n} tasks; benchflow oracle 1.0 plain and hardened on {ones}; "
              f"all three agree on {agree}; Harbor cannot run {cannot} here and was not re-run "
              f"on {not_run} (compared: benchflow plain vs hardened only)."]
    details = [f"- {s.id} / {name}: {' '.join(c.detail.split())}" for s in tasks if s.id in rows
               for name, c in (("plain", rows[s.id].plain), ("hardened", rows[s.id].hardened),
                               ("harbor", rows[s.id].harbor)) if c.detail]
    if details:
        lines += ["", "Error details (first 300 characters):", "", *details]
    return "\n".join(lines) + "\n"


def _load_last() -> dict[str, Row]:
    if not LAST.is_file():
        return {}
    raw = json.loads(LAST.read_text())
    return {k: Row(task=k, **{m: Cell(**v[m]) for m in ("plain", "hardened", "harbor")})
            for k, v in raw.items()}


def _save_last(rows: dict[str, Row]) -> None:
    LAST.parent.mkdir(parents=True, exist_ok=True)
    modes = ("plain", "hardened", "harbor")
    LAST.write_text(json.dumps({k: {m: asdict(getattr(r, m)) for m in modes}
                                for k, r in rows.items()}, indent=1))


# ---------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these tasks (others keep "
                        "their last results in the table)")
    parser.add_argument("--skip-harbor", action="store_true",
                        help="keep Harbor's cells from the last run (its results do not change "
                        "when benchflow does)")
    parser.add_argument("--skip-benchflow", action="store_true",
                        help="keep benchflow's cells from the last run")
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--mirrors", type=Path, default=DEFAULT_MIRRORS)
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[parity] {msg}", file=sys.stderr, flush=True)

    subs, tasks = load_manifest()
    selected = tasks
    if args.only:
        unknown = set(args.only) - {t.id for t in tasks}
        if unknown:
            print(f"error: unknown task id(s) {sorted(unknown)}; see {MANIFEST}", file=sys.stderr)
            return 2
        selected = [t for t in tasks if t.id in args.only]
    try:
        git_dirs = check_mirrors(args.mirrors, selected)
        for spec in selected:
            prepare_task(spec, git_dirs.get(spec.repo), subs)
        ensure_bases(log)
        harbor_note = None if args.skip_harbor else ensure_harbor(log)
    except Missing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.skip_harbor and not any(r.harbor.text != "-" for r in _load_last().values()):
        harbor_note = "--skip-harbor"
    if args.prepare_only:
        log(f"prepared {len(selected)} tasks in {TASKS_DIR}")
        return 0

    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%M%SZ")
    commit = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    ran = f"{stamp} @ {commit}"
    run_dir = RUNS_DIR / stamp
    rows = _load_last()
    for spec in selected:
        row = rows.get(spec.id) or Row(task=spec.id)
        if not args.skip_benchflow:
            log(f"{spec.id}: benchflow oracle, plain")
            row.plain = run_benchflow(spec, False, run_dir / "benchflow")
            log(f"{spec.id}: benchflow oracle, hardened -> plain was {row.plain.text}")
            row.hardened = run_benchflow(spec, True, run_dir / "benchflow")
            row.plain.ran = row.hardened.ran = ran
        if harbor_note is None and not args.skip_harbor:  # --skip-harbor keeps the last cells
            log(f"{spec.id}: Harbor oracle -> hardened was {row.hardened.text}")
            (run_dir / "harbor").mkdir(parents=True, exist_ok=True)
            row.harbor = run_harbor(spec, run_dir / "harbor")
            row.harbor.ran = ran
            log(f"{spec.id}: Harbor {row.harbor.text}")
        rows[spec.id] = row
        _save_last(rows)
    table = render(tasks, rows, harbor_note=harbor_note)
    RESULTS.write_text("# Oracle parity: last run\n\n" + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
