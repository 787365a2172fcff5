"""The Daytona sandbox backend, on the `daytona` SDK's async client
(`pip install 'benchflow[daytona]'`).

Importing this package does not import `daytona`; the SDK loads when a sandbox starts.
"""

from benchflow.sandbox.daytona.config import DaytonaConfig
from benchflow.sandbox.daytona.errors import map_daytona_errors
from benchflow.sandbox.daytona.process import DaytonaProcess
from benchflow.sandbox.daytona.provider import DaytonaSandboxProvider
from benchflow.sandbox.daytona.sandbox import CAPABILITIES, DaytonaSandbox

__all__ = ["CAPABILITIES", "DaytonaConfig", "DaytonaProcess", "DaytonaSandbox",
           "DaytonaSandboxProvider", "map_daytona_errors"]
