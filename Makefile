# Two commands do all set-up on a fresh machine with Python 3.11+ and make:
#   make demo   create .venv, install, run the crash-and-recover demo on SQLite
#   make test   create .venv, install, run the whole suite (starts a throwaway PostgreSQL)
#               in TEST_JOBS parallel workers (pytest-xdist); `make test TEST_JOBS=0` runs it
#               serially, PYTEST_ARGS adds pytest options (e.g. PYTEST_ARGS="-x tests/store")
#   make soak   the scale-out soaks at full size: 200 runs, 4 workers (and 2 workers + 2
#               executors), kills every few seconds; every pool crash case on both stores;
#               every crash point of a Pydantic AI agent in every store, mode and driver
#   make serve-demo  the demo, then the dashboard on 127.0.0.1:8000 with its run in it
#   make fuzz   the fuzzers of tests/fuzz with 2000 fresh examples each (STEAD_FUZZ_EXAMPLES=N)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test soak fuzz check lint format bench throughput compare pydantic-ai-bench concurrent clean serve-demo chromium screenshots

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "stead needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/stead demo

# The suite's time is mostly waiting on child processes, servers and the database, so more
# workers than CPUs pays off: 4 on a 2-CPU machine (each worker collects the whole suite and
# starts its own PostgreSQL). --dist worksteal gives each worker a contiguous quarter of the
# suite (a module's tests, and so its module-scoped server stack, mostly stay on one worker)
# and lets an idle worker take over half of a busy one's remaining tests. Bytecode is written
# (PYTHONDONTWRITEBYTECODE unset): the child processes the suite starts then import stead
# from .pyc instead of compiling it each time.
TEST_JOBS   ?= 4
PYTEST_ARGS ?=
test: $(STAMP) chromium
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal $(PYTEST_ARGS)

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
	STEAD_FULL_POOL_TESTS=1 $(BIN)/python -m pytest -q tests/runtime/test_pool_processes.py \
	  tests/runtime/test_pool_owner_crash.py tests/runtime/test_pool_strays.py
	STEAD_TEST_ALL_MODES=1 $(BIN)/python -m pytest -q tests/runtime/test_crash.py -k effects
	STEAD_TEST_ALL_MODES=1 $(BIN)/python -m pytest -q -n 2 tests/pai/test_crash_points.py

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

# The overhead workload on LangGraph + its SQLite checkpointer (installs the `compare` extra).
compare: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/vs_langgraph.py

# A Pydantic AI agent under Pydantic AI's DBOS durability and under SteadDurability: the seed
# scenario's deliveries and the time per durable step (installs the `compare` extra).
pydantic-ai-bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/under_pydantic_ai.py

# Many runs in flight in one process, beside LangGraph and DBOS (installs the `compare` extra).
concurrent: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[compare]'
	$(BIN)/python bench/in_flight.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
