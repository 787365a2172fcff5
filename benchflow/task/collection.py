"""What a task collects for its verifier after the agent's turn: its `artifacts` and its
collect hooks (Harbor's `[[verifier.collect]]`), per collection pass (the task's, or the
task's plus one step's), and the load-time checks on them.

A pass takes from `main` (the agent's sandbox) first, then from the other compose services
(see `benchflow.verify.collect`). An entry naming a service other than `main` needs the
task's `environment/docker-compose.yaml`; two entries of different services may not land
on the same path, where one could stand in for the other.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from benchflow.task.models import MAIN_SERVICE, Artifact, CollectHook, TaskConfig, TaskStepConfig


@dataclass(frozen=True)
class CollectionPass:
    """The hooks and artifacts of one collection pass, in declaration order."""

    hooks: tuple[CollectHook, ...] = ()
    artifacts: tuple[Artifact, ...] = ()

    @property
    def services(self) -> set[str]:
        """The services other than `main` that the pass takes from or runs hooks in."""
        return ({h.service for h in self.hooks} | {a.from_service for a in self.artifacts}) - {
            MAIN_SERVICE}

    def in_main(self) -> CollectionPass:
        return CollectionPass(tuple(h for h in self.hooks if h.service == MAIN_SERVICE),
                              tuple(a for a in self.artifacts if a.from_service == MAIN_SERVICE))

    def in_services(self) -> CollectionPass:
        return CollectionPass(tuple(h for h in self.hooks if h.service != MAIN_SERVICE),
                              tuple(a for a in self.artifacts if a.from_service != MAIN_SERVICE))


def collection_pass(config: TaskConfig, step: TaskStepConfig | None = None) -> CollectionPass:
    """The task's hooks and artifacts, then the step's (Harbor appends a step's to the task's)."""
    hooks = [*config.verifier.collect, *(step.verifier.collect if step else ())]
    artifacts = [*config.artifacts, *(step.artifacts if step else ())]
    return CollectionPass(tuple(hooks), tuple(artifacts))


def _overlap(a: str, b: str) -> bool:
    a, b = posixpath.normpath("/" + a), posixpath.normpath("/" + b)
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def collection_problems(config: TaskConfig, label: str, has_compose: bool) -> list[str]:
    """Why the task's collection cannot run as written, each naming the key and the fix."""
    passes = [("", collection_pass(config))]
    passes += [(f"steps[{i}].", collection_pass(config, s)) for i, s in enumerate(config.steps)]
    found: list[str] = []
    services = sorted(set().union(*(p.services for _, p in passes)))
    if services and not has_compose:
        found.append(f"{label}: artifacts or [[verifier.collect]] name the compose service(s) "
                     f"{', '.join(map(repr, services))}, but environment/ has no "
                     "docker-compose.yaml defining them: add it, or take the files from "
                     f"service {MAIN_SERVICE!r}")
    seen: set[tuple[str, str]] = set()
    for where, one in passes:
        items = one.artifacts
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                if a.from_service == b.from_service or not (
                        _overlap(a.source, b.source) or _overlap(a.kept_as, b.kept_as)):
                    continue
                pair = (f"{a.from_service}:{a.source}", f"{b.from_service}:{b.source}")
                if pair in seen:
                    continue
                seen.add(pair)
                found.append(
                    f"{label}: {where}artifacts: {a.source!r} from service {a.from_service!r} "
                    f"and {b.source!r} from service {b.from_service!r} land on the same path "
                    "(under artifacts/ or in the separate verifier), so one service's file "
                    "could stand in for the other's: take them from different paths")
    return found


__all__ = ["CollectionPass", "collection_pass", "collection_problems"]
