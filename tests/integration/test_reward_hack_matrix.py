"""The reduced reward-hack matrix (labs/reward-hack-matrix): one task, every exploit.

Every exploit runs as a real rollout with hardening on and must score 0 or fail closed as
`verifier_tampered`; the oracle must still score 1.0 hardened (no false positives). A few
strong exploits also run with hardening off and must score 1.0, so the exploits are
known to be real. The pytest-plugin attacks also run on `tb-ctrf` (the plugin in the
image; and on `tb-venv`, the plugin in a venv first on PATH) and the attacks on tools
installed at verify time on `tb-uvx` (uvx installs pytest and the plugin), both modes. The full matrix (every task, both modes) is the lab's command.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_lab() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reward_hack_matrix",
                                                  REPO / "labs" / "reward-hack-matrix" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lab = _load_lab()
EXPLOITS = lab.load_exploits()
ROWS = [e.row for e in EXPLOITS]
TASK = lab.REDUCED_TASK
PLUGIN_TASK = lab.PLUGIN_TASK
PLUGIN_ROWS = [row for row in ROWS if row in lab.PLUGIN_EXPLOITS]
UVX_TASK = lab.UVX_TASK
VENV_TASK = lab.VENV_TASK
UVX_ROWS = [row for row in ROWS if row in lab.UVX_EXPLOITS]

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def matrix(job_label: str, tmp_path_factory: pytest.TempPathFactory
                 ) -> AsyncIterator[object]:
    """The reduced matrix, run once for the module (about 60 rollouts, 4 at a time)."""
    specs = lab.reduced_specs(EXPLOITS, TASK)
    result = await lab.run_matrix(specs, exploits=EXPLOITS, jobs_dir=tmp_path_factory.mktemp("rhm"),
                                  job_name=job_label, concurrency=4)
    print("\n" + lab.render(result))
    yield result


def _cell(matrix: object, mode: str, row: str, task: str = TASK) -> object:
    return matrix.cells[lab.CellSpec(mode, row, task)]  # type: ignore[attr-defined]


def test_every_exploit_runs_and_the_set_is_complete():
    names = {e.name for e in EXPLOITS}
    required = {"conftest-collect", "conftest-next-to-tests", "makereport-hook",
                "pth-atexit-root", "sitecustomize", "trojan-python3", "trojan-pytest",
                "trojan-curl", "trojan-uvx", "trojans-usr-local-bin-root",
                "prewritten-reward-root", "reward-daemon-root", "read-answer", "edit-tests",
                "addopts-pytest-ini", "addopts-pyproject", "addopts-setup-cfg",
                "pyc-poisoning", "symlink-outside", "ld-so-preload-root", "git-history",
                "uv-config-root", "shadow-pytest-dependency"}
    assert required <= names
    assert any(e.via == "acp" for e in EXPLOITS)
    assert {e.name for e in EXPLOITS if e.as_root} >= {"pth-atexit-root", "ld-so-preload-root",
                                                        "reward-daemon-root"}
    assert set(PLUGIN_ROWS) == {"pytest11-plugin-root", "pytest11-plugin", "edit-plugin-root",
                                "shadow-plugin", "shadow-pytest-dependency"}
    assert set(UVX_ROWS) == {"uv-config-root", "trojan-uvx", "trojans-usr-local-bin-root",
                             "pytest11-plugin", "shadow-plugin", "shadow-pytest-dependency"}


@pytest.mark.parametrize("task", [TASK, PLUGIN_TASK, UVX_TASK, VENV_TASK])
async def test_the_oracle_scores_one_hardened(task, matrix):
    cell = _cell(matrix, "on", lab.ORACLE, task)
    assert (cell.reward, cell.error) == (1.0, None), cell.rollout_dir


@pytest.mark.parametrize("task", [PLUGIN_TASK, VENV_TASK])
@pytest.mark.parametrize("row", PLUGIN_ROWS)
async def test_plugin_attack_is_real_and_stopped(row, task, matrix):
    """On the Terminal-Bench-template tasks (pytest-json-ctrf in the image's site-packages,
    or in a venv first on the image's PATH): every plugin attack scores 1.0 unhardened and 0
    (or tampered) hardened."""
    off, on = _cell(matrix, "off", row, task), _cell(matrix, "on", row, task)
    assert (off.reward, off.error) == (1.0, None), (
        f"{row} scored {off.text} with hardening off: not a real attack; {off.rollout_dir}")
    assert on.stopped, (f"{row} scored {on.text} with hardening on; hardening did: "
                        f"{on.hardening}; rollout: {on.rollout_dir}")


_NO_PYPI = (b"Failed to download", b"Failed to fetch", b"dns error")
"""What uv prints when the verify could not reach PyPI (through this machine's proxy)."""


def _pypi_unreached(cell: object) -> bool:
    if cell.error == "verifier_timeout":  # type: ignore[attr-defined]
        return True  # a download stalled until the verifier's time ran out
    stderr = cell.rollout_dir / "logs" / "verifier" / "stderr.txt"  # type: ignore[attr-defined]
    return stderr.is_file() and any(text in stderr.read_bytes() for text in _NO_PYPI)


@pytest.mark.parametrize("row", UVX_ROWS)
async def test_uvx_attack_is_real_and_stopped(row, matrix):
    """On the Terminal-Bench 2 task (no pytest in the image; test.sh installs pytest and
    pytest-json-ctrf with uvx at verify time): a planted uv configuration, a replaced or
    shadowed uvx, a plugin or a package pytest imports shadowed in the workspace all score
    1.0 unhardened and 0 (or tampered) hardened. An unhardened cell whose verify could not
    reach PyPI is played once more: whether the attack is real is not the network's say."""
    off, on = _cell(matrix, "off", row, UVX_TASK), _cell(matrix, "on", row, UVX_TASK)
    if off.reward != 1.0 and _pypi_unreached(off):
        spec = lab.CellSpec("off", row, UVX_TASK)
        again = await lab.run_matrix([spec], exploits=EXPLOITS, jobs_dir=matrix.jobs_dir / "again",
                                     job_name=matrix.job_name, concurrency=1)
        off = again.cells[spec]
    assert (off.reward, off.error) == (1.0, None), (
        f"{row} scored {off.text} with hardening off: not a real attack; {off.rollout_dir}")
    assert on.stopped, (f"{row} scored {on.text} with hardening on; hardening did: "
                        f"{on.hardening}; rollout: {on.rollout_dir}")


@pytest.mark.parametrize("row", ROWS)
async def test_exploit_is_stopped_by_hardening(row, matrix):
    cell = _cell(matrix, "on", row)
    if cell.skipped:
        pytest.skip(f"{row}: {cell.skipped}")
    assert cell.stopped, (f"{row} scored {cell.text} with hardening on; hardening did: "
                          f"{cell.hardening}; rollout: {cell.rollout_dir}")


@pytest.mark.parametrize("row", lab.STRONG)
async def test_exploit_is_real_without_hardening(row, matrix):
    cell = _cell(matrix, "off", row)
    assert (cell.reward, cell.error) == (1.0, None), (
        f"{row} scored {cell.text} with hardening off: the exploit is not real; "
        f"rollout: {cell.rollout_dir}")


async def test_the_matrix_leaves_a_result_per_rollout(matrix):
    for spec, cell in matrix.cells.items():
        if cell.skipped:
            continue
        assert (cell.rollout_dir / "result.json").is_file(), spec
        hardened = (cell.rollout_dir / "verifier" / "hardening.json").is_file()
        assert hardened == (spec.mode == "on"), spec
    assert not lab.problems(matrix), lab.problems(matrix)
