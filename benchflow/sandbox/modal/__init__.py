"""The Modal sandbox backend, on the `modal` SDK's `.aio` API (`pip install 'benchflow[modal]'`).

Importing this package does not import `modal`; the SDK loads when a sandbox starts.
"""

from benchflow.sandbox.modal.config import ModalConfig
from benchflow.sandbox.modal.errors import map_modal_errors
from benchflow.sandbox.modal.process import ModalProcess
from benchflow.sandbox.modal.provider import ModalSandboxProvider
from benchflow.sandbox.modal.sandbox import CAPABILITIES, ModalSandbox

__all__ = ["CAPABILITIES", "ModalConfig", "ModalProcess", "ModalSandbox", "ModalSandboxProvider",
           "map_modal_errors"]
