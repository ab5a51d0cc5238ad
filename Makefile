# The README's two set-up commands: `make quickstart` and `make test`.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: install quickstart test lint bench

# torch is pinned first: on a CPU machine this takes the local CPU build, on a GPU machine
# the same pin pulls the CUDA build; the editable install then finds it already satisfied.
install:
	$(PIP) install --quiet "torch==2.13.0"
	$(PIP) install --quiet -e ".[dev]"

quickstart: install
	$(PYTHON) -m toolgym quickstart

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

test: install lint
	$(PYTHON) -m pytest

bench: install
	$(PYTHON) bench/env_step.py
