"""benchflow: run AI coding agents on containerized tasks and score them.

```python
import benchflow as bf
result = await bf.run(bf.RolloutConfig(task_path="tasks/hello-world",
                                       scenes=[bf.Scene.single(agent="oracle")]))
print(result.reward)
```
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from benchflow.config import Role, RolloutConfig, Scene, Turn
from benchflow.errors import BenchflowError, ConfigError
from benchflow.job import Job, JobResult
from benchflow.rollout import Rollout, RolloutResult, run
from benchflow.steps import Step, desugar
from benchflow.task import Task, load_task
from benchflow.users import BaseUser, FunctionUser, LLMUser, RoundResult

try:
    __version__ = _version("benchflow")
except _PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = [
    "BaseUser",
    "BenchflowError",
    "ConfigError",
    "FunctionUser",
    "Job",
    "JobResult",
    "LLMUser",
    "Role",
    "Rollout",
    "RolloutConfig",
    "RolloutResult",
    "RoundResult",
    "Scene",
    "Step",
    "Task",
    "Turn",
    "__version__",
    "desugar",
    "load_task",
    "run",
]
