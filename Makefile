# The README's two commands: `make demo` and `make test`. Each sets up .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export CUDA_HOME ?= /usr/local/cuda
# setup.py compiles the CUDA sources only where they can run (MYTORCH_CUDA=auto: nvcc, a CUDA
# build of torch and a GPU); MYTORCH_CUDA=1 compiles them without a GPU too. On a GPU machine
# the targets are sm_80 and sm_90 + PTX unless TORCH_CUDA_ARCH_LIST says otherwise. CI keeps
# a one-architecture compile check of the CUDA sources (.ci/package_check.sh).
export PYTHONUNBUFFERED := 1

NATIVE_SOURCES := $(shell find csrc -name '*.cpp' -o -name '*.cu' -o -name '*.h' -o -name '*.cuh') setup.py
EXT_STAMP := $(VENV)/.mytorch-built

.PHONY: all demo test test-fast test-slow build venv bench charts clean test-sanitize package-check

all: build

# 1. the virtual environment with torch and the test/triton extras
$(VENV)/.deps: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel ninja
	$(PIP) install -q "torch>=2.11" numpy
	$(PIP) install -q pytest pytest-xdist expecttest hypothesis transformers torchvision \
		scikit-learn tqdm matplotlib "triton>=3.6"
	touch $@

venv: $(VENV)/.deps

# 2. the extension: a full editable install once, incremental ninja rebuilds after that
$(EXT_STAMP): $(VENV)/.deps $(NATIVE_SOURCES)
	@if [ -f $(VENV)/.mytorch-installed ]; then \
		$(PY) setup.py -q build_ext --inplace; \
	else \
		$(PIP) install --no-build-isolation --no-deps -e . && touch $(VENV)/.mytorch-installed; \
	fi
	touch $@

build: $(EXT_STAMP)

demo: build
	$(PY) examples/demo.py --out build/demo

# sdist -> wheel -> fresh venv -> smoke test, and the CUDA compile check (as CI runs it)
package-check: build
	bash .ci/package_check.sh

test: build
	$(PY) -m pytest -n 2 --dist loadfile -q tests

test-slow: build
	$(PY) -m pytest -n 2 --dist loadfile -q -m slow --runslow tests

# The sanitizer build lives in its own copy of the sources ($(SANITIZE_DIR)), so the
# in-place extension others use is never replaced; rebuilds there are incremental.
# allocator_may_return_null: the bad-input sweep asks for huge sizes, which must fail as
# allocation errors (as without ASan), not abort. Reports go to report.* (pytest captures
# stderr, and a sanitizer stops the process), printed when the run fails.
SANITIZE_DIR ?= build/sanitize
SANITIZE_TESTS ?= tests/ops tests/device tests/hardening
test-sanitize: $(VENV)/.deps
	mkdir -p $(SANITIZE_DIR)
	cp -rp csrc mytorch_ext python tests setup.py pyproject.toml $(SANITIZE_DIR)/
	cd $(SANITIZE_DIR) && MYTORCH_SANITIZE=$${MYTORCH_SANITIZE:-address,undefined} \
		MYTORCH_CUDA=0 $(abspath $(PY)) setup.py -q build_ext --inplace
	rm -f $(SANITIZE_DIR)/report.*
	cd $(SANITIZE_DIR) && LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:log_path=$(abspath $(SANITIZE_DIR))/report \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(abspath $(SANITIZE_DIR))/report \
		$(abspath $(PY)) -m pytest -q -p no:cacheprovider $(SANITIZE_TESTS) \
		|| { grep -h -v "failed to allocate" $(SANITIZE_DIR)/report.* 2>/dev/null | head -60; exit 1; }

bench: build
	$(PY) -m mytorch_ext bench

# Every bench suite on the hardware present (GPU suites where CUDA is), one chart, table and
# JSON per suite in $(CHARTS_OUT), named after the hardware (docs/performance.md, "Charts").
CHARTS_OUT ?= docs/charts
charts: build
	$(PY) -m mytorch_ext bench charts --out $(CHARTS_OUT)

clean:
	rm -rf build mytorch_ext/*.so $(EXT_STAMP)
