"""Tasks: a folder with a prompt, an environment and a verifier, in either layout.

`load_task(path)` reads a native `task.md` folder or a legacy (Harbor) `task.toml`
folder into one `Task` with a normalized `TaskConfig`; `load_dataset(path)` reads a
folder of task folders; `resolve_run_target(path)` accepts either.
"""

from benchflow.task.dataset import Dataset, load_dataset, resolve_run_target
from benchflow.task.loader import Layout, Task, TaskStep, is_task_dir, load_task
from benchflow.task.models import (
    AgentSettings,
    Author,
    HardeningConfig,
    OracleSettings,
    SandboxSettings,
    TaskConfig,
    TaskConfigWarning,
    VerifierSettings,
)

__all__ = [
    "AgentSettings",
    "Author",
    "Dataset",
    "HardeningConfig",
    "Layout",
    "OracleSettings",
    "SandboxSettings",
    "Task",
    "TaskConfig",
    "TaskConfigWarning",
    "TaskStep",
    "VerifierSettings",
    "is_task_dir",
    "load_dataset",
    "load_task",
    "resolve_run_target",
]
