"""QA items as `Task`s: one in-memory task per item, no environment, no files."""

from __future__ import annotations

from pathlib import Path

from benchflow.task.loader import Task
from benchflow.task.models import SandboxSettings, TaskConfig
from benchflow.task.qa import QaItem, QaScoring, QaTaskSpec

DEFAULT_QA_IMAGE = "debian:bookworm-slim"
"""The image of a QA item's sandbox, when its agent needs one (the model agent's tools)."""


def qa_task(item: QaItem, dataset_path: Path, scoring: QaScoring,
            image: str = DEFAULT_QA_IMAGE) -> Task:
    """The task of one item; its (virtual) path is `<dataset file>/<item folder name>`."""
    path = Path(dataset_path).expanduser().resolve() / item.folder_name
    config = TaskConfig(name=item.id, metadata=dict(item.metadata),
                        sandbox=SandboxSettings(docker_image=image))
    return Task(path=path, name=item.id, layout="qa", instruction=item.question,
                config=config, environment_dir=path, dockerfile=None, verifier_dir=path,
                verifier_mount="/verifier", solution_dir=None,
                qa=QaTaskSpec(item=item, scoring=scoring))


def qa_dataset_name(dataset_path: Path) -> str:
    """A QA dataset's name in the job layout: the file name without its suffix."""
    return Path(dataset_path).stem


__all__ = ["DEFAULT_QA_IMAGE", "qa_dataset_name", "qa_task"]
