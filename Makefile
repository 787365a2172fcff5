# Two commands for a fresh machine:
#   make demo   set up (venv, install, Docker ready) and run the oracle on tasks/hello-world
#   make test   the same setup, then the whole test suite
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# Sandboxes trust the host's extra CA certificates (/usr/local/share/ca-certificates/*.crt)
# by default (benchflow/settings.py); BENCHFLOW_EXTRA_CA_CERTS chooses others.

.PHONY: setup install docker demo test test-unit test-slow test-browser test-ray test-cloud-fakes test-ts test-train test-verifiers test-conformance test-agent-judge test-acp-tools test-faithful test-scenes test-reliability reliability golden bench matrix parity cli-docs test-loaded clean

setup: install docker

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q benchflow  # bytecode even with PYTHONDONTWRITEBYTECODE: a fast CLI
	touch $@

docker:
	bash scripts/ensure-docker.sh

demo: setup
	$(BIN)/pip install --quiet -e '.[models]'  # the QA API and the model agent (benchflow.qa)
	$(BIN)/benchflow run tasks/hello-world -a oracle

# CI's command (.ci/run). Two pytest-xdist workers, each given whole files (a module's
# fixtures run once, its tests in order); each worker is its own session with its own job
# label, like two helpers on one Docker daemon. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: setup
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

test-unit: install
	$(BIN)/pytest tests/unit

# The unit suite on a loaded machine: two busy loops beside it, tests in random order and
# two at a time (SEED=N repeats an order). No test may depend on the machine's speed.
SEED ?= $(shell date +%s)
test-loaded: install
	bash scripts/with-cpu-hogs.sh $(BIN)/pytest tests/unit -p randomly --randomly-seed=$(SEED) -n 2

test-slow: setup
	$(BIN)/pytest -m slow

# The viewer and study reports in headless chromium (apt-get install chromium chromium-driver);
# also part of test-slow, where they skip when the browser is missing. CI (make test) runs
# neither. test_study_browser.py runs docs/how-to/studies.md's study first (~5 min).
test-browser: setup
	$(BIN)/pytest -m slow tests/integration/test_view_browser.py tests/integration/test_study_browser.py

# Jobs on a real local Ray cluster (a head and a second node, started and stopped by the
# tests); installs the ray extra first. Not in CI (make test) for its size and time.
test-ray: setup
	$(BIN)/pip install --quiet -e '.[ray]'
	$(BIN)/pytest -m slow tests/integration/test_ray.py

# Two GRPO steps by TRL on CPU with benchflow as the environment (a tiny model made by the
# test, nothing downloaded), plus the train extra's unit tests (Parquet). Installs the
# `train` extra; torch first, pinned to the CPU build on disk, so pip never pulls CUDA.
TORCH ?= torch==2.13.0
test-train: install
	$(BIN)/pip install --quiet '$(TORCH)'
	$(BIN)/pip install --quiet -e '.[dev,train]' '$(TORCH)'
	HF_HUB_OFFLINE=1 $(BIN)/pytest -m "slow or not slow" tests/train tests/unit/trajectory/test_token_export.py

# benchflow as a verifiers environment (the benchflow-env package), run by vf-eval and by
# verifiers' own API against benchflow's scripted model server. verifiers pins openai<3 and
# mcp==2.0.0, so it gets its own venv ($(VF_VENV)) and the dev venv keeps its openai; only
# pytest, not the dev extra, goes in (dev's mcp<2 for the tool server conflicts with verifiers).
VF_VENV ?= .venv-vf
test-verifiers:
	$(PYTHON) -m venv $(VF_VENV)
	$(VF_VENV)/bin/pip install --quiet --upgrade pip
	$(VF_VENV)/bin/pip install --quiet -e '.[verifiers]' 'pytest>=8' 'pytest-timeout>=2.3'
	$(VF_VENV)/bin/pip install --quiet -e environments/benchflow_env
	$(VF_VENV)/bin/pytest -m "slow or not slow" tests/train/test_verifiers_env.py

# The reduced reward-hack matrix, hardened, on the Modal and Daytona SDK fakes (~10 min).
test-cloud-fakes: setup
	$(BIN)/pytest -m slow tests/integration/test_cloud_fakes_e2e.py

# Faults on a second Docker daemon the tests start and stop (cleanup scope, daemon restarts)
# and a full disk (a small tmpfs): needs root and dockerd. Part of test-slow; ~3 min.
test-reliability: setup
	$(BIN)/pytest -m "slow or not slow" tests/reliability

# The reliability lab's table: faults survived, bad inputs refused, leaks, data lost (~10 min).
reliability: setup
	$(BIN)/python labs/reliability/run.py

# The TypeScript tracing SDK (sdk/typescript): npm ci, tsc, Node's test runner, then its
# example endpoint against `benchflow run -a http` (needs node >= 20 and npm; also in test-slow).
test-ts: install
	cd sdk/typescript && npm ci --no-audit --no-fund && npm test
	$(BIN)/pytest -m slow tests/integration/test_traced_endpoint_ts.py

bench: setup
	$(BIN)/python labs/benchmarks/cli_overhead.py
	$(BIN)/python labs/benchmarks/provider_overhead.py
	$(BIN)/python labs/benchmarks/rollout_overhead.py
	$(BIN)/python labs/benchmarks/rollout_overhead.py --harden
	$(BIN)/python labs/benchmarks/acp_throughput.py
	$(BIN)/python labs/benchmarks/role_switch.py
	$(BIN)/python labs/benchmarks/job_load.py
	$(BIN)/python labs/benchmarks/scale.py
	$(BIN)/python labs/benchmarks/tracing_import.py
	$(BIN)/python labs/benchmarks/agent_output.py
	$(BIN)/python labs/benchmarks/timeouts.py

matrix: setup
	$(BIN)/python labs/reward-hack-matrix/run.py

# Oracle parity on real third-party Harbor tasks (benchflow plain/hardened vs Harbor 0.24).
# Needs the task repositories mirrored locally (see labs/harbor-parity/README.md): not in CI.
parity: setup
	$(BIN)/python labs/harbor-parity/run.py

# A real agent (claude, against the scripted model server) as an agent-judge verifier,
# unable to write the workspace; slow on the first run (claude's npm install, then cached).
test-agent-judge: setup
	$(BIN)/pytest -m slow tests/conformance/test_agent_judge_offline.py

# claude, codex, gemini and opencode use the tool server's web:search over MCP on a QA item
# (one job, in parallel; model-only sandbox, scripted model server); about a minute once the
# agents' npm installs are cached (slow on the first run).
test-acp-tools: setup
	$(BIN)/pytest -m slow tests/conformance/test_real_agent_acp_tools.py

test-conformance: setup
	$(BIN)/pytest -m slow tests/conformance

# The four real agents (claude, codex, gemini, opencode; npm inside the sandbox) in two
# two-role scenes against the scripted model server, checked on the sft/sharegpt/atif
# exports and the viewer (~5 min once the agents' image layer is cached).
test-faithful: setup
	$(BIN)/pytest -m slow tests/conformance/test_faithful_records.py

# Re-record tests/golden/job (the same two scenes, normalized) after an agent upgrade;
# tests/unit/trajectory/test_golden.py then says which update shapes changed.
golden: setup
	$(BIN)/python -m tests.golden.record
# Scenes with a real agent (claude, npm, offline against the scripted model server): the
# coder remembers across the reviewer's turn, the read-only reviewer gets EACCES, a fork
# restores the coder's ACP session (~5 min; also part of test-conformance and test-slow).
test-scenes: setup
	$(BIN)/pytest -m slow tests/conformance/test_real_agent_scenes.py

# docs/reference/cli.md from the typer app; tests/unit/test_docs.py fails when it is stale
# (run this after adding or changing a command or an option, and commit the result).
cli-docs: install
	$(BIN)/python scripts/gen_cli_docs.py

clean:
	rm -rf $(VENV) jobs
