# rftlab — one command each: `make reports` (main job, local backend) and `make test`.
# Both create .venv and install the project on first use.
# bash with pipefail: a failing install fails the target even though its output is filtered
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.rftlab-installed
# Every extra: the tests drive real eval-protocol, the tinker SDK types, the local torch backend, the
# texasholdem engine and the MLflow/W&B tracking clients offline (fakes stand in only for the hosted services).
EXTRAS ?= dev,fireworks,tinker,poker,track
# The `mlflow ui` server lives in its own venv (pyproject.toml, the track extra, says why).
MLFLOW_VENV := .venv-mlflow
MLFLOW_UI_PIN := mlflow==3.17.2

.PHONY: setup test test-slow test-all reports sync lab lint typecheck typecheck-baseline format bench clean-venv mlflow-venv mlflow-ui

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@echo "setup 1/3: the virtual environment $(VENV)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup 2/3: rftlab with its extras ($(EXTRAS)); on a fresh machine several minutes (torch, transformers)"
	$(PY) -m pip install --progress-bar on --no-input -e ".[$(EXTRAS)]" | sed '/^Requirement already satisfied/d'
	@echo "setup 3/3: the notebook kernel, the offline cost map and JupyterLab's save hook"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (rftlab)" >/dev/null
	@# every process of this venv (pytest's eval-protocol plugin imports litellm before any project code)
	@# uses litellm's bundled model cost map instead of fetching it from the internet
	printf 'import os; os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")\n' \
	  > "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/rftlab_offline.pth"
	@# JupyterLab saves a paired notebook without the kernel's language_info (rftlab.reports.lab), so a
	@# save with no edit leaves git status clean
	mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	$(PY) -c 'import json; from rftlab.reports.lab import SERVER_CONFIG; print(json.dumps(SERVER_CONFIG, indent=1))' \
	  > $(VENV)/etc/jupyter/jupyter_server_config.d/rftlab.json
	touch $(STAMP)

test: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) -m pytest -n 2 -q -m "not slow"

# The slow tests (notebooks at smoke size, servers killed and restarted, whole lineages); CI runs them too.
test-slow: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) -m pytest -n 2 -q -m slow

test-all: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) -m pytest -n 2 -q

reports: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) -m rftlab.reports

# The speed table of CONTRIBUTING.md: each script prints its ratio against a baseline measured in the same run.
bench: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) benchmarks/bench_reports.py notebooks/00_methods.py notebooks/04_arena_env.py
	$(PY) benchmarks/bench_viewer_start.py --runs 20 --rows 500 --chars 500 --repeats 1
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) benchmarks/bench_local_tinker.py --http-only

sync: setup
	$(VENV)/bin/jupytext --sync notebooks/*.py

# The MLflow UI over the project's tracking store (rftlab.runs.tracking): live curves of running arms.
mlflow-venv: $(MLFLOW_VENV)/.installed

$(MLFLOW_VENV)/.installed: Makefile
	@echo "mlflow-venv: the mlflow server ($(MLFLOW_UI_PIN)) in $(MLFLOW_VENV), apart from the project's venv"
	test -x $(MLFLOW_VENV)/bin/python || $(PYTHON) -m venv $(MLFLOW_VENV)
	$(MLFLOW_VENV)/bin/python -m pip install --progress-bar on --no-input "$(MLFLOW_UI_PIN)" | sed '/^Requirement already satisfied/d'
	touch $@

MLFLOW_STORE ?= sqlite:///$(CURDIR)/mlruns/mlflow.db
mlflow-ui: mlflow-venv
	mkdir -p mlruns
	$(MLFLOW_VENV)/bin/mlflow ui --backend-store-uri "$(MLFLOW_STORE)" --host 127.0.0.1 --port 5000

# JupyterLab refuses to run as root without --allow-root (the usual container case): pass it only then.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: setup
	$(VENV)/bin/jupyter lab $(LAB_FLAGS) notebooks/

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks examples notebooks/*.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples

# pyright's standard rules ([tool.basedpyright] in pyproject.toml). Errors older than the checker are listed
# in .basedpyright/baseline.json: only an error not listed there fails, and a run after fixing listed ones
# removes them from the file (commit it). `make typecheck-baseline` rewrites the file with every current
# error: only for a deliberate reset, reviewed in the diff.
typecheck: setup
	$(VENV)/bin/basedpyright --project pyproject.toml --pythonpath $(PY) --level error

typecheck-baseline: setup
	$(VENV)/bin/basedpyright --project pyproject.toml --pythonpath $(PY) --level error --writebaseline

format: setup
	$(VENV)/bin/ruff format src tests benchmarks examples
	$(VENV)/bin/ruff check --fix src tests benchmarks examples

clean-venv:
	rm -rf $(VENV)
