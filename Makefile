# Two commands do all set-up on a fresh machine with Python 3.11+ and make:
#   make demo   create .venv, install the base package, run the crash-and-recover demo
#   make test   create .venv, install, run the whole suite: both tiers at once, each in its
#               own pytest-xdist workers (one throwaway PostgreSQL for the run); `make test
#               TEST_JOBS=0` runs it serially in one process, TEST_JOBS=N in N workers;
#               PYTEST_ARGS adds pytest options (e.g. PYTEST_ARGS="-x tests/store")
#   make test-fast    the fast tier only: in-process tests (core, tools, codec, stores on
#                     SQLite, providers against local wire servers), FAST_JOBS workers
#   make test-system  the system tier only: child processes, PostgreSQL, servers, browser,
#                     SIGKILL, soak-lite, mypy, SYSTEM_JOBS workers (tests/README.md: which
#                     tests are which, and how a new test is placed)
#   make soak   the scale-out soaks at full size: 200 runs, 4 workers (and 2 workers + 2
#               executors), kills every few seconds; every pool crash case on both stores;
#               every crash point of a Pydantic AI, Agents SDK and LangChain agent in every
#               store, mode and driver (tests/foreign/_agent_crashes.py), each child a
#               fresh interpreter (make test forks them from a warm parent: tests/_spawn.py)
#   make serve-demo  the demo, then the dashboard on 127.0.0.1:8000 with its run in it
#   make fuzz   the fuzzers of tests/fuzz with 2000 fresh examples each (STEAD_FUZZ_EXAMPLES=N)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast test-system soak fuzz check lint format bench throughput distance compare pydantic-ai-bench openai-agents-bench concurrent clean serve-demo chromium screenshots

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "stead needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo needs the base package only (no extra): a fresh clone runs it after one short install.
DEMO_STAMP := $(VENV)/.demo-installed
$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/stead demo

# The fast tier is CPU work in the test process: as many workers as CPUs. The system tier's
# time is mostly waiting on child processes, servers and the database, so more workers than
# CPUs pays off there. `make test` runs the two at once (make -j2), so the fast tier's CPU
# work fills the system tier's waits; each prints its report when it ends. --dist worksteal
# gives each worker a contiguous share of its tier (a module's tests, and so its
# module-scoped server stack, mostly stay on one worker) and lets an idle worker take over
# half of a busy one's remaining tests. Bytecode is written (PYTHONDONTWRITEBYTECODE unset):
# the child processes the suite starts then import stead from .pyc instead of compiling it.
# Every run's summary lists the thirty slowest tests (--durations in pyproject.toml).
FAST_JOBS   ?= 2
SYSTEM_JOBS ?= 4
TEST_JOBS   ?=
PYTEST_ARGS ?=
PYTEST      := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q --dist worksteal
test: $(STAMP) chromium
ifeq ($(strip $(TEST_JOBS)),)
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-fast test-system
else
	$(PYTEST) -n $(TEST_JOBS) $(PYTEST_ARGS)
endif

test-fast: $(STAMP)
	$(PYTEST) -n $(FAST_JOBS) -m "not system" $(PYTEST_ARGS)

test-system: $(STAMP) chromium
	$(PYTEST) -n $(SYSTEM_JOBS) -m system $(PYTEST_ARGS)

# The browser tests drive Debian's Chromium (Playwright's own browser download is not used).
# Installed with apt-get when absent and we are root (CI is); otherwise those tests say why.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "no chromium and not root: apt-get install chromium for the browser tests"; fi; }

# The dashboard's screenshots in docs/screenshots/, taken by the browser tests.
screenshots: $(STAMP) chromium
	STEAD_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/server/test_dashboard.py

# The crash-and-recover demo, then `stead serve` on loopback with its run in the dashboard.
DEMO_DB ?= .stead-demo.db
serve-demo: $(STAMP)
	rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm
	$(BIN)/stead demo --db $(DEMO_DB)
	$(BIN)/stead --store sqlite:///$(DEMO_DB) serve --agents stead.demo._agent:agents

soak: $(STAMP)
	STEAD_SOAK_RUNS=200 $(BIN)/python -m pytest -q tests/runtime/test_pg_soak.py
	STEAD_POOL_SOAK_RUNS=200 $(BIN)/python -m pytest -q tests/runtime/test_pool_soak.py
	STEAD_CHILDREN_MATRIX=1 $(BIN)/python -m pytest -q tests/runtime/test_children_processes.py \
	  tests/runtime/test_run_child.py
	STEAD_FULL_POOL_TESTS=1 $(BIN)/python -m pytest -q tests/runtime/test_pool_processes.py \
	  tests/runtime/test_pool_owner_crash.py tests/runtime/test_pool_strays.py
	STEAD_TEST_ALL_MODES=1 $(BIN)/python -m pytest -q tests/runtime/test_crash.py -k effects
	STEAD_TEST_ALL_MODES=1 STEAD_TEST_FRESH_CHILDREN=1 $(BIN)/python -m pytest -q -n 2 tests/pai/test_crash_points.py \
	  tests/oai/test_oai_crash_points.py tests/lc/test_lc_crash_points.py

fuzz: $(STAMP)
	STEAD_FUZZ_EXAMPLES=$${STEAD_FUZZ_EXAMPLES:-2000} $(BIN)/python -m pytest -q tests/fuzz

check: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: $(STAMP)
	$(BIN)/python bench/overhead.py

throughput: $(STAMP)
	$(BIN)/python bench/throughput.py

# Worker processes 0, 2, 10 and 50 ms from PostgreSQL: steps a second, round trips a step.
distance: $(STAMP)
	$(BIN)/python bench/distance.py

# The overhead workload on LangGraph + its SQLite checkpointer (installs the `compare` extra).
compare: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/vs_langgraph.py

# A Pydantic AI agent under Pydantic AI's DBOS durability and under SteadDurability: the seed
# scenario's deliveries and the time per durable step (installs the `compare` extra).
pydantic-ai-bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/under_pydantic_ai.py

# An Agents SDK agent under DBOS's OpenAI Agents integration and under stead.openai_agents: the
# seed scenario's deliveries and the time per durable step (installs the `compare` extra).
openai-agents-bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/under_openai_agents.py

# Many runs in flight in one process, beside LangGraph and DBOS (installs the `compare` extra).
concurrent: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/in_flight.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
