# One-command setup and entry points. Every target builds .venv on first use (idempotently).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# A GPU machine takes PyTorch's default (CUDA) build; a CPU machine takes the CPU build 2.13.0,
# never a multi-GB CUDA download.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 1)

.PHONY: demo test test-all lint venv sandbox clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifeq ($(HAS_GPU),1)
	$(PY) -m pip install -q torch
else
	$(PY) -m pip install -q "torch==2.13.0+cpu" 2>/dev/null \
	  || $(PY) -m pip install -q --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
endif
	$(PY) -m pip install -q "triton==3.7.1" -e ".[dev]"
	touch $(STAMP)

# The judge runs untrusted code inside bubblewrap (bwrap). As root, install it from the system's
# packages; otherwise say how (a user without bubblewrap must pass --unsafe-no-sandbox).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
	     || (apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null)); \
	  else \
	    echo "bubblewrap (bwrap) is missing: install it (e.g. sudo apt-get install bubblewrap)"; \
	    exit 1; \
	  fi; }
	@bwrap --version

demo: venv sandbox
	$(VENV)/bin/drtriton convert examples/mlp_gelu.py -o runs/demo/mlp_gelu_triton.py

test: venv sandbox
	$(PY) -m pytest -q

test-all: venv sandbox
	$(PY) -m pytest -q -m "slow or not slow"

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs
