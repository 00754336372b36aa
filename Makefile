# Two commands on a fresh machine with Python 3.11: `make demo` and `make test`.
# Both create .venv (unless a virtualenv is already active) and install the project into it.

PYTHON ?= python3
ifdef VIRTUAL_ENV
VENV := $(VIRTUAL_ENV)
else
VENV := .venv
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.msprobe-dask-installed

.PHONY: install demo test test-fast lint typecheck bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml setup.py $(wildcard msprobe_dask/csrc/* msprobe_dask/*/csrc/*) | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,viewer]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m msprobe_dask compare -tp tests/data/stat_mix/target/dump.json \
		-gp tests/data/stat_mix/golden/dump.json -o out/demo/statistics
	$(PY) -m msprobe_dask compare -tp tests/data/tensor_mix/target/dump.json \
		-gp tests/data/tensor_mix/golden/dump.json -o out/demo/tensor --xlsx
	$(PY) -m msprobe_dask graph_visualize -tp tests/data/multirank/target \
		-gp tests/data/multirank/golden -o out/demo/graph
	@echo "demo results are in out/demo/ (msprobe-dask view out/demo/graph opens the graph)"

lint: install
	$(PY) -m ruff check msprobe_dask tests workflows
	$(PY) -m pytest -q -p no:cacheprovider tests/test_import_contracts.py  # cycles, layers, private names

typecheck: install
	$(PY) -m mypy msprobe_dask

test: lint typecheck
	$(PY) -m pytest tests

test-fast: lint typecheck  # all but the slow reference / plugin / viewer / cluster tests
	$(PY) -m pytest tests -m "not slow"

bench: install
	$(PY) workflows/bench_compare.py

clean:
	rm -rf out .pytest_cache .ruff_cache .mypy_cache
