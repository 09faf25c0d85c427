# The two quick-start commands: `make run` (set up, run the main job) and `make test`
# (set up, run every check CI runs). Both create ./.venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.roost-installed

.PHONY: setup run test lint typecheck pytest real-parts clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: this machine carries the 2.13.0 CPU wheel on disk, and an
	# open range would pull a multi-GB CUDA build from the index.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# The main job: `roost train` on its embedded defaults (examples/default.toml), about 15 minutes
# on two CPU cores; the run directory lands under runs/. Its sandboxes need bubblewrap: when it
# is missing, the real-parts script installs it (with the rest of what the tests need).
run: setup
	command -v bwrap >/dev/null || bash scripts/real_parts.sh
	$(BIN)/roost train

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

# The sandbox tests need real parts (dockerd, runsc, bubblewrap, locally built images); the
# script installs and starts what is missing when it runs as root, and is a no-op otherwise.
real-parts:
	bash scripts/real_parts.sh

pytest: setup real-parts
	$(BIN)/pytest

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
