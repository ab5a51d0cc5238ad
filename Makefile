# The README's two set-up commands: `make quickstart` and `make test`.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

# The folders mapped into the `toolgym` namespace (as in setup.py's FOLDERS).
SUBPACKAGES := envs tools agents training sandbox
TYPECHECK_TREE := build/typecheck

.PHONY: install system-deps vllm frameworks quickstart test lint typecheck docs bench

# torch is pinned first: on a CPU machine this takes the local CPU build, on a GPU machine
# the same pin pulls the CUDA build; the editable install then finds it already satisfied.
install:
	$(PIP) install --quiet "torch==2.13.0"
	$(PIP) install --quiet -e ".[dev]"

# bubblewrap, a running Docker engine and the sandbox image, for the code sandboxes' tests.
system-deps: install
	PYTHON=$(PYTHON) bash scripts/system-deps.sh

# vLLM beside toolgym: its CPU build on a CPU machine, vLLM on a GPU one (the vllm engine's
# tests run on it; see scripts/install-vllm.sh)
vllm: install
	PYTHON=$(PYTHON) bash scripts/install-vllm.sh

# the agent frameworks that need the openai client's next major version (the OpenAI Agents
# SDK, pydantic-ai) in a virtual environment of their own, build/frameworks: their example
# agents run from it as harness commands (see scripts/install-frameworks.sh)
frameworks:
	PYTHON=$(PYTHON) bash scripts/install-frameworks.sh

quickstart: install
	$(PYTHON) -m toolgym quickstart

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# mypy cannot follow the folder -> namespace mapping, so it checks a tree of symlinks
# laid out as the installed package is. Its cache lives outside the clone: checking torch's
# and transformers' typed sources takes a fresh clone 90 s, a cached run 4 s, and mypy
# re-checks whatever changed (by content) since.
MYPY_CACHE ?= $(HOME)/.cache/toolgym/mypy

typecheck:
	rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE)/toolgym
	for f in toolgym/*; do ln -s "$$PWD/$$f" $(TYPECHECK_TREE)/toolgym/; done
	for d in $(SUBPACKAGES); do ln -s "$$PWD/$$d" $(TYPECHECK_TREE)/toolgym/$$d; done
	cd $(TYPECHECK_TREE) && $(PYTHON) -m mypy -p toolgym --config-file $(CURDIR)/pyproject.toml \
		--cache-dir $(MYPY_CACHE)

# the user guide (docs/, mkdocs.yml): a broken link, anchor or page left out of the nav fails
docs:
	NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs build --strict --quiet

# one worker per core (tests/conftest.py builds the shared models once for all of them); the
# Ray tests share one worker, as `ray stop` stops every cluster on the machine
TEST_WORKERS ?= auto

test: install system-deps vllm frameworks lint typecheck docs
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadgroup

bench: install system-deps vllm
	$(PYTHON) bench/env_step.py
	cd bench && $(PYTHON) rollout_overhead.py && $(PYTHON) async_vs_lockstep.py && $(PYTHON) engine.py
	$(PYTHON) bench/search_server.py
	$(PYTHON) bench/simulated_search.py
	$(PYTHON) bench/server_threads.py
	$(PYTHON) bench/sandbox_pool.py
	$(PYTHON) bench/code_grading.py
	$(PYTHON) bench/gui_step.py
	$(PYTHON) bench/held_out_items.py
	$(PYTHON) bench/vision_rollout.py
	$(PYTHON) bench/scaleout.py
	$(PYTHON) bench/mcp_tools.py
	$(PYTHON) bench/interop_steps.py
	cd bench && $(PYTHON) agent_workers.py
