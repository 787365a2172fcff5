"""`vm:screenshot`, `vm:click`, `vm:type`: a virtual display in the session's sandbox.

On first use the sandbox (`benchflow/tools/images/vm/`) starts Xvfb on `:99` at the
resource's `screen` size (default 1024x768) with an xterm on it (`vm.app` names another
program). Screenshots are PNG (ImageMagick's `import`), returned as images to models
that take them; clicks and keys go through xdotool.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from benchflow.sandbox.base import Sandbox
from benchflow.tools.base import ToolResult, ToolSpec
from benchflow.tools.sandboxes import session_sandbox
from benchflow.tools.session import ToolSession

DISPLAY = ":99"
START_TIMEOUT_SEC = 120.0
"""How long Xvfb and the app's first window may take (seconds on a loaded machine)."""
_SIZE = re.compile(r"^(\d{2,5})x(\d{2,5})$")


def screen_size(config: dict[str, Any]) -> tuple[int, int]:
    match = _SIZE.match(str(config.get("screen", "1024x768")))
    if match is None:
        raise ValueError(f"vm.screen {config.get('screen')!r}: give WIDTHxHEIGHT, e.g. 1024x768")
    return int(match.group(1)), int(match.group(2))


async def _start_display(sandbox: Sandbox, config: dict[str, Any]) -> None:
    width, height = screen_size(config)
    app = str(config.get("app", "xterm -geometry 100x30+10+10 -fa Monospace -fs 12"))
    # Wait for the display, then for the app's window, as long as the exec's timeout allows
    # (a loaded machine can take seconds); a server or app that exits says why at once.
    script = (f"Xvfb {DISPLAY} -screen 0 {width}x{height}x24 -nolisten tcp "
              f"</dev/null >/tmp/xvfb.log 2>&1 & x=$!; "
              f"until xdpyinfo -display {DISPLAY} >/dev/null 2>&1; do "
              f"kill -0 $x 2>/dev/null || {{ echo Xvfb exited:; cat /tmp/xvfb.log; exit 1; }}; "
              f"sleep 0.1; done; "
              f"DISPLAY={DISPLAY} {app} </dev/null >/tmp/app.log 2>&1 & a=$!; "
              f"until DISPLAY={DISPLAY} xdotool search --onlyvisible --name . >/dev/null 2>&1; "
              f"do kill -0 $a 2>/dev/null || {{ echo the app exited:; cat /tmp/app.log; exit 1; }}"
              f"; sleep 0.1; done")
    result = await sandbox.exec(["bash", "-c", script], timeout=START_TIMEOUT_SEC)
    if result.timed_out:
        logs = await sandbox.exec(["tail", "-c", "1000", "/tmp/xvfb.log", "/tmp/app.log"],
                                  timeout=30)
        raise OSError(f"the virtual display did not start in {START_TIMEOUT_SEC:.0f} s: "
                      f"{logs.text(2000)}")
    if not result.ok:
        raise OSError(f"the virtual display did not start: {result.text(1000)}")


async def _display(session: ToolSession) -> Sandbox:
    return await session_sandbox(session, "vm", _start_display)


async def _x(sandbox: Sandbox, command: str) -> ToolResult:
    result = await sandbox.exec(["bash", "-c", f"DISPLAY={DISPLAY} {command}"], timeout=30)
    if not result.ok:
        return ToolResult(f"error: {result.text(1000)}", is_error=True)
    return ToolResult("ok")


async def screenshot(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    sandbox = await _display(session)
    result = await sandbox.exec(["bash", "-c", f"import -display {DISPLAY} -window root png:-"],
                                timeout=30)
    if not result.ok or not result.stdout.startswith(b"\x89PNG"):
        return ToolResult(f"error: no screenshot: {result.text(1000)}", is_error=True)
    width, height = screen_size(session.config("vm"))
    return ToolResult(f"screenshot {width}x{height} (PNG, attached)", images=(result.stdout,))


async def click(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    x, y = args.get("x"), args.get("y")
    if not isinstance(x, int) or not isinstance(y, int):
        return ToolResult("error: `x` and `y` (integers, pixels) are required", is_error=True)
    button = args.get("button", 1)
    button = button if button in (1, 2, 3) else 1
    return await _x(await _display(session), f"xdotool mousemove {x} {y} click {button}")


async def type_text(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    text, key = args.get("text"), args.get("key")
    sandbox = await _display(session)
    if isinstance(text, str) and text:
        result = await _x(sandbox, f"xdotool type --delay 20 -- {shlex.quote(text)}")
        if result.is_error:
            return result
    if isinstance(key, str) and key:
        return await _x(sandbox, f"xdotool key -- {shlex.quote(key)}")
    if not (isinstance(text, str) and text):
        return ToolResult("error: give `text` to type and/or a `key` (e.g. Return)",
                          is_error=True)
    return ToolResult("ok")


TOOLS = {
    "vm:screenshot": ToolSpec(
        "vm:screenshot", "Take a screenshot of the virtual display (a PNG image).",
        {"type": "object", "properties": {}}, screenshot),
    "vm:click": ToolSpec(
        "vm:click", "Click at pixel (x, y) of the virtual display.",
        {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"},
                                          "button": {"type": "integer", "enum": [1, 2, 3]}},
         "required": ["x", "y"]}, click),
    "vm:type": ToolSpec(
        "vm:type", "Type text on the virtual display's focused window, then press an optional "
        "key (xdotool key names: Return, Tab, ctrl+c).",
        {"type": "object", "properties": {"text": {"type": "string"},
                                          "key": {"type": "string"}}}, type_text),
}

__all__ = ["TOOLS", "click", "screen_size", "screenshot", "type_text"]
