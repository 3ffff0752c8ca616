# The two commands a newcomer needs:  `make run`  and  `make test`.
# Each installs only what it needs into .venv: `make run` the runtime (`make setup`), `make test` also the
# test tools (`make setup-test`), `make notebooks` also JupyterLab (`make setup-notebooks`).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DB ?= sqlite:///./chokaq.db
PORT ?= 8080
# `make notebooks` opens the notebooks on this SQLite file, made by `chokaq demo` when it is missing.
DEMO_DB ?= demo.db

.PHONY: setup setup-test setup-notebooks run test test-fast notebooks notebook-outputs lint openapi clean

$(BIN)/python:
	@echo "== creating $(VENV) with $$($(PYTHON) --version)"
	$(PYTHON) -m venv $(VENV)

# pip prints each package as it goes; the stamps make later runs skip straight to the command.
$(VENV)/.setup: pyproject.toml | $(BIN)/python
	@echo "== installing chokaq and what serving needs (flask, pandas, pyodbc, ...) into $(VENV)"
	@echo "   first run only: usually 30 s to 2 minutes (about 40 packages), longer on a slow network"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e .
	@touch $@

$(VENV)/.setup-test: $(VENV)/.setup
	@echo "== installing the test tools (pytest, nbclient, schemathesis, ruff) into $(VENV): usually under a minute"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[test]'
	@touch $@

$(VENV)/.setup-notebooks: $(VENV)/.setup
	@echo "== installing JupyterLab into $(VENV): usually under a minute"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[notebooks]'
	@touch $@

setup: $(VENV)/.setup
setup-test: $(VENV)/.setup-test
setup-notebooks: $(VENV)/.setup-notebooks

# Serve the API with a worker, the rescue sweep and retention on the embedded SQLite default.
run: setup
	$(BIN)/chokaq migrate --db $(DB)
	@if $(BIN)/chokaq token list --db $(DB) --format json | grep '"local-admin"' >/dev/null; then \
	  echo "the admin token 'local-admin' was shown when it was made and is not stored in clear;"; \
	  echo "make another with:  $(BIN)/chokaq token create NAME --role admin --db $(DB)"; \
	else \
	  echo "admin token for the API (shown once; keep it):" && \
	  $(BIN)/chokaq token create local-admin --role admin --db $(DB); \
	fi
	@echo "the chokaq command is $(BIN)/chokaq (or run 'source $(BIN)/activate' once per shell)"
	@echo "The Deck (web console): http://127.0.0.1:$(PORT)/deck/  (sign in with the admin token)"
	$(BIN)/chokaq serve --db $(DB) --port $(PORT) --handlers chokaq_ops.demo_handlers

# Every test on SQLite and PostgreSQL (PostgreSQL skips with a reason when no server is reachable,
# unless CHOKAQ_REQUIRE_PG=1), spread over every core (pytest-xdist): one after the other the suite takes
# about 25 minutes on two cores, most of it real processes and wall-clock timeouts waiting, not CPU.
# PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto
test: setup-test
	$(KEEP_PYC) $(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS)) -q -rfEs

# pytest keeps the test modules it rewrote (for its assert messages) as bytecode. Under
# PYTHONDONTWRITEBYTECODE, which some shells and containers set, every xdist worker rewrote and compiled
# ~460 modules (the tests and schemathesis) on each run, ~4 s apiece; the fast lane then writes its
# bytecode under $(VENV)/pycache instead (`make test` too), so the source tree stays as clean as that
# setting meant.
KEEP_PYC := $(if $(PYTHONDONTWRITEBYTECODE),PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache)

# The lane to run while working: SQLite only (PostgreSQL cases are left out, not listed as skipped),
# without the `slow` tests (real processes, crashes, soak, notebooks, end to end), 5 fuzz examples per
# route instead of 20-25, spread over every core (pytest-xdist): about 45 s on two cores. `make test` before
# pushing.
test-fast: setup-test
	$(KEEP_PYC) CHOKAQ_TEST_DIALECTS=sqlite CHOKAQ_FUZZ_EXAMPLES=5 \
	  $(BIN)/python -m pytest -m "not slow" -k "not postgresql" -n auto -q -rfE

# JupyterLab on the notebooks, pointed at a demo history ($(DEMO_DB), made by `chokaq demo` if missing).
notebooks: setup-notebooks
	@test -f $(DEMO_DB) || $(BIN)/chokaq demo --db sqlite:///$(abspath $(DEMO_DB))
	@# JupyterLab refuses root unless told; containers and CI machines often run as root.
	CHOKAQ_DB=sqlite:///$(abspath $(DEMO_DB)) $(BIN)/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root)

# Re-run the notebooks as shipped on a fresh demo history and save their outputs and charts
# (notebooks/*.ipynb, docs/notebooks/*.png): after changing a notebook, the demo or a chart.
notebook-outputs: setup-test
	$(BIN)/python tools/render_notebooks.py

# Style, formatting, types (pyproject [tool.mypy]) and the import contracts (pyproject [tool.importlinter]).
lint: setup-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

openapi: setup
	$(BIN)/flask --app chokaq_api.wsgi openapi write --format=yaml openapi.yaml

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .import_linter_cache chokaq.db chokaq.db-wal chokaq.db-shm
