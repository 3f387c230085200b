# eventflow developer entry points. Every target installs what it needs.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
GEN    := libs/gen
PROTOS := $(shell find protos -name '*.proto')
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: run test proto lint typecheck bench clean kafka-fetch clients

run: $(STAMP) $(GEN)/.stamp
	$(BIN)/eventflow dev

test: $(STAMP) $(GEN)/.stamp kafka-fetch
	$(BIN)/ruff check .
	$(BIN)/mypy libs services cli tests
	$(BIN)/python -m pytest

proto: $(GEN)/.stamp

# The venv is rebuilt when pyproject.toml changes (the stamp is its hash).
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

# Generated stubs are not committed: they are rebuilt whenever a proto changes.
# The project is re-installed afterwards so the editable install maps the
# generated `eventflow` package.
$(GEN)/.stamp: $(STAMP) $(PROTOS) libs/protogen.py
	$(BIN)/python -m libs.protogen protos $(GEN)
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

# Benchmarks print tables; they are run on demand, never by `make test`.
# BENCH_PEERS=temporal,dbos,restate picks the peers compared with eventflow (bench/README.md).
bench: $(STAMP) $(GEN)/.stamp
	$(BIN)/python -m bench

# Go and TypeScript clients from protos/ into clients/go and clients/ts (see clients/README.md).
clients: $(STAMP)
	$(BIN)/python -m tests.harness.clients

kafka-fetch: $(STAMP)
	$(BIN)/python -m tests.harness.kafka_broker fetch

lint: $(STAMP) $(GEN)/.stamp
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) $(GEN)/.stamp
	$(BIN)/mypy libs services cli tests

clean:
	rm -rf $(VENV) $(GEN) .pytest_cache .mypy_cache .ruff_cache clients/go/eventflow clients/ts
