"""benchflow as the environment of an RL trainer.

- `TrainTask`, `train_tasks`, `qa_train_tasks`: tasks as a trainer's prompts, each able to
  become a rollout against the policy server with its token ids captured;
- `RolloutBatch`, `run_batch`: an async batch of rollouts on `benchflow.stream`, samples as
  they finish, with backpressure and a per-step deadline (stragglers cancelled, reported);
- `benchflow.train.trl.TrlSpec`: TRL's `GRPOTrainer` `rollout_func` (the `train` extra);
- `benchflow.train.verifiers`: a verifiers environment for `vf-eval` and prime-rl (the
  `verifiers` extra and the `environments/benchflow_env` package).

Samples are `TokenSample`s (`benchflow export --format tokens`): token ids exactly as the
policy server returned them, never re-tokenised.
"""

from benchflow.train.batch import BatchItem, BatchReport, RolloutBatch, run_batch
from benchflow.train.tasks import TrainTask, qa_train_tasks, train_tasks
from benchflow.trajectory.exporters.tokens import TokenSample

__all__ = ["BatchItem", "BatchReport", "RolloutBatch", "TokenSample", "TrainTask",
           "qa_train_tasks", "run_batch", "train_tasks"]
