"""`rollout()`, `quick_rollout()`, `load_tasks()`: the AgentFlow-style API on benchflow's jobs.

Each item is one rollout of a benchflow job (`<output_dir>/jobs/<job>/...`, the usual
layout with result.json and trajectory per item); the API then writes results.jsonl,
evaluation.json and the summary file (see `benchflow.qa.outputs`).
"""

from __future__ import annotations

import tempfile
import time

import anyio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchflow._extras import require
from benchflow.agents.model_agent import ModelAgentConfig, ToolServerSettings
from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.job import Job
from benchflow.job.loop import run_job_loop
from benchflow.job.qa_trials import qa_trials
from benchflow.qa.config import DEFAULT_SANDBOX_URL, QaRolloutConfig, load_config, parse_config
from benchflow.qa.outputs import evaluation, result_line, write_json, write_jsonl
from benchflow.rollout.result import RolloutResult
from benchflow.task.qa import QaItem, QaScoring, load_qa_items, select_items
from benchflow.tools.acp import AcpTools, acp_tools

OPENAI_BASE_URL = "https://api.openai.com/v1"


def load_tasks(tasks_or_path: str | Path | Sequence[Mapping[str, Any]]) -> list[QaItem]:
    """Benchmark items from a JSONL/JSON file or a list of dicts (field aliases applied).

    Raises:
        TaskNotFoundError, TaskInvalidError: as `benchflow.task.qa.load_qa_items`.
    """
    return load_qa_items(tasks_or_path)


def _endpoint(config: QaRolloutConfig) -> ModelEndpoint:
    return ModelEndpoint(base_url=config.base_url or OPENAI_BASE_URL,
                         api_key_env=config.api_key_env, model=config.model_name)


def _scoring(config: QaRolloutConfig, metric: str) -> QaScoring:
    judge_endpoint = None
    if config.evaluator_base_url or config.evaluator_api_key:
        judge_endpoint = ModelEndpoint(
            base_url=config.evaluator_base_url or config.base_url or OPENAI_BASE_URL,
            api_key_env=config.evaluator_api_key_env or config.api_key_env)
    return QaScoring(metric=metric, extra_metrics=tuple(config.extra_metrics),
                     answer_pattern=config.answer_pattern, judge_endpoint=judge_endpoint,
                     judge_model=config.evaluator_model_name or config.model_name,
                     judge_temperature=config.evaluator_temperature,
                     judge_max_retries=config.evaluator_max_retries,
                     judge_extra_params=dict(config.evaluator_extra_params),
                     judge_prompt=config.evaluator_prompt)


def _model_agent(config: QaRolloutConfig, base: Path) -> ModelAgentConfig:
    prompt_file = None
    if config.system_prompt_file:
        prompt_file = Path(config.system_prompt_file)
        if not prompt_file.is_absolute():
            prompt_file = base / prompt_file
    try:
        return ModelAgentConfig(tools=list(config.available_tools),
                                max_turns=config.max_turns, system_prompt=config.system_prompt,
                                system_prompt_file=prompt_file, max_retries=config.max_retries,
                                tool_timeout_sec=float(config.sandbox_timeout),
                                tool_server=ToolServerSettings(
                                    url=config.sandbox_server_url,
                                    resource_types=list(config.resource_types),
                                    resource_init_configs=dict(config.resource_init_configs)))
    except ValueError as exc:
        raise ConfigError(f"model agent settings: {exc}") from exc


def _acp_tools(config: QaRolloutConfig, base: Path) -> AcpTools | None:
    """The tools an ACP agent (`agent: claude`, ...) gets over MCP from the tool server
    benchflow starts for each of its rollouts, with `sandbox_config_path`'s settings under
    `resource_init_configs`.

    Raises:
        ConfigError: `sandbox_config_path` is unreadable or invalid.
    """
    if config.agent == "model" or not config.server_tools:
        return None
    path = config.sandbox_config_path
    if path and not Path(path).is_absolute():
        path = str(base / path)
    return acp_tools(config.server_tools, config_path=path,
                     resource_types=list(config.resource_types),
                     resource_init_configs=dict(config.resource_init_configs),
                     timeout_sec=float(config.sandbox_timeout))


class ToolServerScope:
    """The tool server a QA run's server tools need: started here with
    `sandbox_auto_start` (and stopped after), else checked to answer before any item runs.
    ACP agents need none of it: each of their rollouts starts its own (`acp_tools`)."""

    def __init__(self, config: QaRolloutConfig, base: Path) -> None:
        self.config, self.base = config, base
        self._process: Any = None

    async def __aenter__(self) -> ToolServerScope:
        from benchflow.tools.client import ToolClient, ToolServerProcess

        config = self.config
        if not config.server_tools or config.agent != "model":
            return self
        if config.sandbox_auto_start:
            path = config.sandbox_config_path
            if path and not Path(path).is_absolute():
                path = str(self.base / path)
            self._process = ToolServerProcess(config.sandbox_server_url, path)
            await anyio.to_thread.run_sync(self._process.start)
        else:
            async with ToolClient(config.sandbox_server_url) as client:
                await client.health()  # ToolServerError naming the URL and the fix
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._process is not None:
            await anyio.to_thread.run_sync(self._process.stop)
            self._process = None


def _check_extras(config: QaRolloutConfig) -> None:
    """The extras the run needs are installed, and an ACP agent is given no sandbox tool.

    Raises:
        ConfigError: naming the missing extra, or the sandbox tools (an ACP agent has its
            own shell and files).
    """
    own = [t for t in config.available_tools if t not in config.server_tools]
    if config.agent != "model" and own:
        raise ConfigError(f"available_tools: {', '.join(own)} are the model agent's sandbox "
                          f"tools; agent {config.agent!r} has its own shell and files: list "
                          "only the tool server's tools (web:search, doc:read, ...)")
    if config.agent == "model" or "llm_judgement" in (config.evaluation_metric,
                                                      *config.extra_metrics):
        require("openai", "models", "the QA API (its model agent and LLM judge)")
    if config.server_tools:
        require("starlette", "tools", "the tool server")


async def arollout(config: QaRolloutConfig, *, base_dir: Path | None = None,
                   evaluate: bool | None = None, metric: str | None = None,
                   max_tasks: int | None = None, task_ids: Sequence[str] | None = None
                   ) -> dict[str, Any]:
    """The async form of `rollout` on an already loaded config."""
    started = time.monotonic()
    _check_extras(config)
    base = base_dir or Path.cwd()
    if not config.data_path:
        raise ConfigError("no benchmark data: set data_path in the config or pass data_path=")
    data = Path(config.data_path)
    data = data if data.is_absolute() else base / data
    items = select_items(load_qa_items(data), task_ids if task_ids is not None else
                         config.task_ids, max_tasks or config.number_of_tasks)
    benchmark = config.benchmark_name or data.stem
    out = Path(config.output_dir) if config.output_dir else Path("results") / benchmark
    out = out if out.is_absolute() else base / out
    do_eval = config.evaluate_results if evaluate is None else evaluate
    chosen_metric = metric or config.evaluation_metric
    scoring = _scoring(config, chosen_metric)
    trials = qa_trials(data, items, agent=config.agent, model=config.model_name,
                       scoring=scoring, endpoint=_endpoint(config),
                       environment=config.environment, image=config.sandbox_image,
                       model_agent=_model_agent(config, base), evaluate=do_eval,
                       dataset_name=benchmark, acp_tools=_acp_tools(config, base))
    stamp = datetime.now(UTC)
    job_name = f"{benchmark}__{stamp.strftime('%Y%m%dT%H%M%S')}"
    concurrency = config.max_workers if (config.parallel or config.max_workers > 1) else 1
    job = Job(job_name, out / "jobs", trials, concurrency=concurrency)
    async with ToolServerScope(config, base):
        await job.run()
    by_folder = {r.task_name: r for r in job.results}
    by_id: dict[str, RolloutResult] = {
        item.id: by_folder[trial.ref.task_name]
        for item, trial in zip(items, trials, strict=True) if trial.ref.task_name in by_folder}
    results_file = evaluation_file = None
    if config.save_results:
        results_file = out / "results.jsonl"
        write_jsonl(results_file, [result_line(item, by_id.get(item.id), evaluate=do_eval,
                                               save_trajectories=config.save_trajectories,
                                               trajectory_only=config.trajectory_only)
                                   for item in items])
    report = evaluation(items, by_id, chosen_metric) if do_eval else None
    if report is not None:
        evaluation_file = out / "evaluation.json"
        write_json(evaluation_file, report)
    successful = sum(1 for r in by_id.values() if r.error is None)  # a missing result failed
    summary: dict[str, Any] = {
        "benchmark_name": benchmark,
        "total_tasks": len(items),
        "successful_tasks": successful,
        "failed_tasks": len(items) - successful,
        "scored_tasks": report["scored_tasks"] if report else 0,
        "average_score": report["average_score"] if report else None,
        "metric": chosen_metric if do_eval else None,
        "total_time_seconds": round(time.monotonic() - started, 3),
        "results_file": str(results_file) if results_file else None,
        "evaluation_file": str(evaluation_file) if evaluation_file else None,
        "jobs_dir": str(job.job_dir),
        "timestamp": stamp.isoformat(timespec="seconds"),
    }
    if config.save_summary:
        summary_file = out / f"summary_{benchmark}_{stamp.strftime('%Y%m%dT%H%M%S')}.json"
        summary["summary_file"] = str(summary_file)
        write_json(summary_file, summary)
    return summary


def rollout(*, config_path: str | Path, data_path: str | None = None,
            output_dir: str | None = None, model_name: str | None = None,
            max_tasks: int | None = None, task_ids: list[str] | None = None,
            evaluate: bool = True, metric: str | None = None) -> dict[str, Any]:
    """Run every item of a benchmark and evaluate it; returns the summary dict.

    Arguments override the config file's `data_path`, `output_dir`, `model_name`,
    `number_of_tasks` (`max_tasks`), `task_ids` and `evaluation_metric`; relative paths in
    the file are relative to the current directory.

    Raises:
        ConfigError: a bad config (file and key named), unknown metric or tool, unknown task id.
        TaskInvalidError, TaskNotFoundError: a bad or missing data file.
    """
    config = load_config(config_path)
    overrides = {k: v for k, v in {"data_path": data_path, "output_dir": output_dir,
                                   "model_name": model_name}.items() if v is not None}
    if overrides:
        config = parse_config({**config.model_dump(exclude_defaults=True), **overrides},
                              str(config_path))
    if metric is not None:
        parse_config({"evaluation_metric": metric}, "metric=")
    return run_job_loop(lambda: _arollout_kw(config, evaluate, metric, max_tasks, task_ids))


async def _arollout_kw(config: QaRolloutConfig, evaluate: bool, metric: str | None,
                       max_tasks: int | None, task_ids: list[str] | None) -> dict[str, Any]:
    return await arollout(config, evaluate=evaluate, metric=metric, max_tasks=max_tasks,
                          task_ids=task_ids)


def quick_rollout(question: str, *, tools: list[str] | None = None,
                  model_name: str = "gpt-4.1-2025-04-14", api_key: str = "",
                  base_url: str = "", max_turns: int = 10,
                  sandbox_url: str = DEFAULT_SANDBOX_URL, answer: str | None = None,
                  metric: str = "exact_match", environment: str = "docker",
                  sandbox_auto_start: bool = False,
                  kwargs: Mapping[str, Any] | None = None,
                  resource_init_configs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Answer one question (no config file): returns question, answer, success, error,
    trajectory (and score when `answer` is given).

    `tools` may be sandbox tools (run in a sandbox of `environment`) and tool-server tools
    (`web:search`, `doc:read`, ... served at `sandbox_url`; `sandbox_auto_start` starts
    one). `api_key` is best an env reference (`${VAR}`); a literal key is used, never
    written. `kwargs` are the item's tool kwargs (e.g. `seed_path`).

    Raises:
        ConfigError: an unknown tool or bad value. ToolServerError: the server is unreachable.
    """
    with tempfile.TemporaryDirectory(prefix="benchflow-quick-") as tmp:
        data = Path(tmp) / "quick.jsonl"
        item: dict[str, Any] = {"id": "quick", "question": question,
                                **({"answer": answer} if answer else {})}
        if kwargs:
            item["kwargs"] = dict(kwargs)
        write_jsonl(data, [item])
        config = parse_config({"data_path": str(data), "output_dir": str(Path(tmp) / "out"),
                               "model_name": model_name, "api_key": api_key,
                               "base_url": base_url, "max_turns": max_turns,
                               "available_tools": list(tools or []),
                               "environment": environment, "sandbox_server_url": sandbox_url,
                               "sandbox_auto_start": sandbox_auto_start,
                               "resource_init_configs": dict(resource_init_configs or {}),
                               "evaluation_metric": metric, "save_summary": False,
                               "benchmark_name": "quick"}, "quick_rollout")
        summary = run_job_loop(lambda: _arollout_kw(config, answer is not None, None, None,
                                                    None))
        line = _first_line(Path(summary["results_file"]))
    return {"question": question, "answer": line["predicted_answer"],
            "success": line["success"], "error": line["error"], "score": line["score"],
            "trajectory": line.get("trajectory")}


def _first_line(path: Path) -> dict[str, Any]:
    import json

    first: dict[str, Any] = json.loads(path.read_text().splitlines()[0])
    return first


__all__ = ["ToolServerScope", "arollout", "load_tasks", "quick_rollout", "rollout"]
