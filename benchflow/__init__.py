"""benchflow: run AI coding agents on containerized tasks and score them.

```python
import benchflow as bf
result = await bf.run(bf.RolloutConfig(task_path="tasks/hello-world", agent="oracle"))
print(result.reward)
```

Names are imported on first use (PEP 562), so `import benchflow` and the CLI's
startup stay cheap.
"""


from importlib import import_module as _import_module
import typing as _typing


_EXPORTS: dict[str, str] = {
    "BaseUser": "benchflow.users",
    "BenchflowError": "benchflow.errors",
    "ConfigError": "benchflow.errors",
    "FunctionUser": "benchflow.users",
    "Job": "benchflow.job",
    "JobResult": "benchflow.job",
    "LLMUser": "benchflow.users",
    "McpServer": "benchflow.mcp",
    "Role": "benchflow.config",
    "Rollout": "benchflow.rollout",
    "RolloutConfig": "benchflow.config",
    "RolloutResult": "benchflow.rollout",
    "RolloutStream": "benchflow.job.stream",
    "RoundResult": "benchflow.users",
    "RunResult": "benchflow.rollout",
    "Scene": "benchflow.config",
    "Step": "benchflow.steps",
    "Task": "benchflow.task",
    "Turn": "benchflow.config",
    "desugar": "benchflow.steps",
    "load_task": "benchflow.task",
    "run": "benchflow.rollout",
    "stream": "benchflow.job.stream",
}

if _typing.TYPE_CHECKING:
    from benchflow.config import Role, RolloutConfig, Scene, Turn
    from benchflow.errors import BenchflowError, ConfigError
    from benchflow.job import Job, JobResult
    from benchflow.job.stream import RolloutStream, stream
    from benchflow.mcp import McpServer
    from benchflow.rollout import Rollout, RolloutResult, RunResult, run
    from benchflow.steps import Step, desugar
    from benchflow.task import Task, load_task
    from benchflow.users import BaseUser, FunctionUser, LLMUser, RoundResult


def __getattr__(name: str) -> object:
    if name == "__version__":
        from benchflow._version import package_version

        value: object = package_version()
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchflow' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "__version__"})


__all__ = [
    "BaseUser",
    "BenchflowError",
    "ConfigError",
    "FunctionUser",
    "Job",
    "JobResult",
    "LLMUser",
    "McpServer",
    "Role",
    "Rollout",
    "RolloutConfig",
    "RolloutResult",
    "RolloutStream",
    "RoundResult",
    "RunResult",
    "Scene",
    "Step",
    "Task",
    "Turn",
    "__version__",
    "desugar",
    "load_task",
    "run",
    "stream",
]
