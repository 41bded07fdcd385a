# lexkit: `make test` and `make study` are the two commands a new user runs.
PYTHON ?= python
# torch is installed only when missing; override for your platform, e.g. TORCH_SPEC='torch>=2.6'
TORCH_SPEC ?= torch==2.13.0
STUDY_ARGS ?=

.PHONY: install lint test test-slow test-gpu study study-quick bench

install:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install "$(TORCH_SPEC)"
	$(PYTHON) -m pip install -q -e '.[dev]'

lint: install
	$(PYTHON) -m ruff check src tests benchmarks

# the fast suite on 2 worker processes (pytest-xdist; each test runs single-threaded), the compiled
# flex tests grouped on one worker so their graph compiles once
TEST_WORKERS ?= 2
test: install
	$(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-slow: install
	$(PYTHON) -m pytest -m slow

test-gpu: install
	$(PYTHON) -m pytest -m gpu

study: install
	$(PYTHON) -m lexkit study --out study $(STUDY_ARGS)

study-quick: install
	$(PYTHON) -m lexkit study --preset quick --out study-quick --no-retrieval $(STUDY_ARGS)

bench: install
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) benchmarks/run.py
