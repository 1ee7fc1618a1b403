# rftlab — one command each: `make reports` (main job, local backend) and `make test`.
# Both create .venv and install the project on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.rftlab-installed
# Every extra: the tests drive real eval-protocol, the tinker SDK types, the local torch backend and the
# texasholdem engine offline (fakes stand in only for the hosted services).
EXTRAS ?= dev,fireworks,tinker,poker

.PHONY: setup test test-all reports sync lab lint format clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (rftlab)" >/dev/null
	touch $(STAMP)

test: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) -m pytest -n 2 -q

reports: setup
	LITELLM_LOCAL_MODEL_COST_MAP=True $(PY) -m rftlab.reports

sync: setup
	$(VENV)/bin/jupytext --sync notebooks/*.py

lab: setup
	$(VENV)/bin/jupyter lab notebooks/

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks examples notebooks/*.py
	$(VENV)/bin/ruff format --check src tests benchmarks examples

format: setup
	$(VENV)/bin/ruff format src tests benchmarks examples
	$(VENV)/bin/ruff check --fix src tests benchmarks examples

clean-venv:
	rm -rf $(VENV)
