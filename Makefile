# The two commands a newcomer needs:  `make run`  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DB ?= sqlite:///./chokaq.db
PORT ?= 8080

.PHONY: setup run test lint openapi clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

setup: $(BIN)/.installed

# Serve the API with a worker, the rescue sweep and retention on the embedded SQLite default.
run: setup
	$(BIN)/chokaq migrate --db $(DB)
	@$(BIN)/chokaq token list --db $(DB) --format json | grep -q '"local-admin"' || \
	  (echo "admin token for the API (shown once):" && $(BIN)/chokaq token create local-admin --role admin --db $(DB))
	@echo "The Deck (web console): http://127.0.0.1:$(PORT)/deck/  (sign in with the admin token)"
	$(BIN)/chokaq serve --db $(DB) --port $(PORT) --handlers chokaq_ops.demo_handlers

# Every test on SQLite and PostgreSQL (PostgreSQL skips with a reason when no server is reachable,
# unless CHOKAQ_REQUIRE_PG=1).
test: setup
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

openapi: setup
	$(BIN)/flask --app chokaq_api.wsgi openapi write --format=yaml openapi.yaml

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache chokaq.db chokaq.db-wal chokaq.db-shm
