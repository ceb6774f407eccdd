# Two commands on a fresh machine:  `make run` (the default scenario)  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SCENARIO ?= scenarios/default.toml
# Where pip also looks for torch. constraints-cpu.txt pins torch==2.13.0; on Linux x86-64 PyPI's wheel of
# that version is the CUDA build (GBs of nvidia-* packages). `make install TORCH_INDEX=URL`, with
# URL = https://download.pytorch.org/whl/cpu, adds PyTorch's CPU index: the pin then resolves to
# 2.13.0+cpu. Empty (default): pip's own configuration decides (a local CPU wheel, where there is one).
TORCH_INDEX ?=
PIP_TORCH := $(if $(strip $(TORCH_INDEX)),--extra-index-url $(strip $(TORCH_INDEX)),)
# Use the development copy of the datasets when this checkout sits beside one.
ifneq ($(wildcard ../shared/data/fashion-mnist),)
export RAYSFL_DATA ?= $(abspath ../shared/data)
endif

.PHONY: install run test lint data

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py constraints-cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints-cpu.txt $(PIP_TORCH) -e ".[test]"
	touch $@

data: install
	@$(BIN)/raysfl data check fashion-mnist || sh scripts/get-fashion-mnist.sh

run: install data
	$(BIN)/raysfl run $(SCENARIO)

# Two pytest-xdist workers; a file's tests that use Ray run in order in one worker, on its own local Ray
# (tests/conftest.py groups them). TEST_WORKERS=0 runs the suite in one process.
# Three workers on two cores were slower, not faster (2026-11-30, one run each: 12:35 against 11:47).
TEST_WORKERS ?= 2

test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

lint: install
	$(BIN)/ruff check raysfl actors tests benchmarks examples
	$(BIN)/ruff format --check raysfl actors tests benchmarks examples
	$(BIN)/mypy
