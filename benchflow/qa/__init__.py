"""The AgentFlow-style QA rollout API, on benchflow's jobs.

```python
from benchflow.qa import rollout
summary = rollout(config_path="configs/qa.yaml", data_path="tasks/qa-example.jsonl")
summary["average_score"], summary["results_file"]
```

`rollout()`, `quick_rollout()`, `load_config()`, `load_tasks()`, `AgentRunner`; the
config's parameters are in `QaRolloutConfig` (see docs/how-to/qa-benchmarks.md). This
package is the home of the spec's `from rollout import ...` and
`from rollout.core.runner import AgentRunner`.
"""

from benchflow.qa.api import arollout, load_tasks, quick_rollout, rollout
from benchflow.qa.config import QaRolloutConfig, load_config, parse_config
from benchflow.qa.runner import AgentRunner, TaskResult
from benchflow.task.qa import QaItem

RolloutConfig = QaRolloutConfig
"""The spec's name for the QA config (distinct from `benchflow.RolloutConfig`)."""
BenchmarkItem = QaItem
"""The spec's name for one item."""

__all__ = ["AgentRunner", "BenchmarkItem", "QaItem", "QaRolloutConfig", "RolloutConfig", "arollout",
           "TaskResult", "load_config", "load_tasks", "parse_config", "quick_rollout",
           "rollout"]
