# The two commands of the README: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The upstream Memora agent with its exact pins, beside memora_pg (proves the two install together).
MEMORA_BIN := .venv-memora/bin
# The real mem0ai 2.2.x, AutoGen AgentChat, autogen-ext, Agent Framework's mem0 provider and LangGraph's
# PostgresStore beside memora_pg, for the differential tests.
DIFF_BIN := .venv-diff/bin
# The PostgresStore the differential tests compare with; `make langgraph-suite` runs its release's own tests.
LANGGRAPH_POSTGRES := 3.2.0

.PHONY: demo test lint install clean bench system-deps diff-env langgraph-suite

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Citus for the tests/citus suite, unpacked into the wheel's PostgreSQL 16 tree when the shared bundle is
# there (without it those tests skip with one line saying how to enable them).
CITUS_TOOLS := ../shared/tools/citus

install: $(BIN)/.installed
	@if [ -d $(CITUS_TOOLS) ]; then bash $(CITUS_TOOLS)/install.sh $(BIN)/python; fi

$(MEMORA_BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-memora
	$(MEMORA_BIN)/pip install --quiet --upgrade pip
	$(MEMORA_BIN)/pip install --quiet 'memora-core==0.3.1' -e '.[local]' pytest pytest-asyncio
	$(MEMORA_BIN)/pip check
	touch $@

# System programs the suite runs beyond Python: Debian's pgbouncer for tests/integration/test_pgbouncer.py,
# which looks on PATH and at /usr/sbin, and Debian's chromium for tests/integration/test_report_browser.py.
# Installed when root (or passwordless sudo) and apt-get are here; otherwise one line says what to install,
# rather than the suite skipping those tests.
system-deps:
	@{ command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; } && command -v chromium >/dev/null 2>&1 \
		|| bash scripts/ci-system-deps.sh

$(DIFF_BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-diff
	$(DIFF_BIN)/pip install --quiet --upgrade pip
	$(DIFF_BIN)/pip install --quiet 'mem0ai==2.2.1' 'autogen-agentchat==0.7.5' 'autogen-ext[mem0,openai]==0.7.5' \
		'agent-framework-core==1.23.0' 'agent-framework-mem0==1.0.0b261015' 'langgraph-checkpoint-postgres==$(LANGGRAPH_POSTGRES)' \
		'langgraph==1.2.22' 'langmem==0.0.30' \
		'psycopg[binary,pool]' -e '.[local,autogen]' pytest pytest-asyncio
	$(DIFF_BIN)/pip check
	touch $@

diff-env: $(DIFF_BIN)/.installed

# LangGraph's own store tests, those of the pinned langgraph-checkpoint-postgres release (its sdist ships
# them), on MemoraStore and AsyncMemoraStore; every failure must be a difference docs/langgraph.md lists.
# About 8 minutes, so not part of `make test`.
LANGGRAPH_SUITE := .cache/langgraph-suite
langgraph-suite: diff-env
	rm -rf $(LANGGRAPH_SUITE)
	$(DIFF_BIN)/pip download --quiet --no-deps --no-binary :all: -d $(LANGGRAPH_SUITE) \
		'langgraph-checkpoint-postgres==$(LANGGRAPH_POSTGRES)'
	MEMORA_PG_TEST_POSTGRES=16 $(DIFF_BIN)/python -m tests.differential.langgraph_suite \
		$(LANGGRAPH_SUITE)/langgraph_checkpoint_postgres-$(LANGGRAPH_POSTGRES).tar.gz

demo: install
	$(BIN)/memora-pg demo

# Lint and types; the upstream Memora agent's own code against memora_pg in its pinned
# environment; then the whole suite on PostgreSQL 16 and on 18 (both from the embedded wheel). tests/citus
# runs in the 16 run only (the Citus build is for PostgreSQL 16), on a Citus cluster of its own (a coordinator
# and two workers); tests/differential runs in .venv-diff beside the real mem0ai and AutoGen.
# MEMORA_PG_TEST_DATABASE_URL=postgresql://... runs it against another server instead.
test: system-deps install $(MEMORA_BIN)/.installed $(DIFF_BIN)/.installed
	$(BIN)/ruff check memora_pg tests alembic bench docs/examples
	$(BIN)/mypy memora_pg
	$(BIN)/mypy tests
	$(BIN)/mypy bench docs/examples
	MEMORA_PG_TEST_POSTGRES=16 $(MEMORA_BIN)/pytest tests/upstream
	MEMORA_PG_TEST_POSTGRES=16 $(DIFF_BIN)/pytest tests/differential
	MEMORA_PG_TEST_POSTGRES=16 $(BIN)/pytest --ignore=tests/upstream --ignore=tests/differential
	MEMORA_PG_TEST_POSTGRES=18 $(BIN)/pytest --ignore=tests/upstream --ignore=tests/differential --ignore=tests/citus

# Benchmarks at scale (not part of the tests): see bench/README.md; BENCHMARKS.md quotes bench/results/.
bench: install
	$(BIN)/python -m bench.run --scale 10k,100k --out bench/results/run.md

lint: install
	$(BIN)/ruff check memora_pg tests alembic bench docs/examples
	$(BIN)/ruff format --check memora_pg tests alembic bench docs/examples
	$(BIN)/mypy memora_pg
	$(BIN)/mypy tests
	$(BIN)/mypy bench docs/examples

clean:
	rm -rf $(VENV) .venv-memora .venv-diff
