"""The tool server's sandbox tools on real Docker: code:run with a deadline, and the
virtual display (Xvfb) screenshot, click and type."""

from __future__ import annotations

import io
from collections.abc import Iterator

import anyio
import pytest

from benchflow.tools import ToolClient
from benchflow.tools.server import ToolServer

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


@pytest.fixture
def server(job_label: str) -> Iterator[ToolServer]:
    with ToolServer() as running:
        yield running


async def test_code_run_in_docker_keeps_files_and_enforces_its_deadline(server, job_label):
    async with ToolClient(server.url) as client:
        session = await client.open(["code:run"], init_configs={
            "code": {"labels": {"benchflow.job": job_label}}}, timeout_sec=300)
        first = await session.call("code:run", {"code": "import platform, pathlib\n"
                                    "pathlib.Path('note.txt').write_text('kept')\n"
                                    "print(platform.system(), 6 * 7)"})
        second = await session.call("code:run", {"language": "shell",
                                     "code": "cat note.txt; id -un; test -f /.dockerenv && echo docker"})
        slow = await session.call("code:run", {"code": "import time\ntime.sleep(30)",
                                  "timeout_sec": 2})
        failing = await session.call("code:run", {"code": "raise SystemExit(3)"})
        await session.close()
    assert not first.is_error and "Linux 42" in first.text
    assert "kept" in second.text and "docker" in second.text
    assert slow.is_error and "timed out after 2 s" in slow.text
    assert failing.is_error and "[exit code 3]" in failing.text


def _colors(png: bytes) -> int:
    from PIL import Image

    return len(Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 20) or [])


async def test_vm_screenshot_is_a_png_of_the_screen_with_a_window(server, job_label):
    from PIL import Image

    async with ToolClient(server.url) as client:
        session = await client.open(["vm:screenshot", "vm:click", "vm:type"], init_configs={
            "vm": {"screen": "800x600", "labels": {"benchflow.job": job_label}}},
            timeout_sec=300)
        before = await session.call("vm:screenshot", {})
        for _ in range(100):  # the window is mapped; wait until xterm has drawn its prompt
            if before.is_error or _colors(before.images[0]) > 2:
                break
            await anyio.sleep(0.2)
            before = await session.call("vm:screenshot", {})
        clicked = await session.call("vm:click", {"x": 100, "y": 100})
        typed = await session.call("vm:type", {"text": "echo hello from the vm", "key": "Return"})
        after = await session.call("vm:screenshot", {})
        await session.close()
    assert not before.is_error and len(before.images) == 1, before.text
    image = Image.open(io.BytesIO(before.images[0]))
    assert image.format == "PNG" and image.size == (800, 600)
    assert _colors(before.images[0]) > 2  # the xterm on the root window
    assert not clicked.is_error and not typed.is_error
    assert after.images[0] != before.images[0]  # the typed text is on the screen


async def test_a_vm_app_that_exits_at_once_is_an_error_that_says_so(server, job_label):
    async with ToolClient(server.url) as client:
        session = await client.open(["vm:screenshot"], init_configs={
            "vm": {"app": "sh -c 'echo no display for me >&2; exit 3'",
                   "labels": {"benchflow.job": job_label}}}, timeout_sec=300)
        shot = await session.call("vm:screenshot", {})
        await session.close()
    assert shot.is_error and "the app exited:" in shot.text and "no display for me" in shot.text
