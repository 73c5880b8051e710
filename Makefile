PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: run test test-portable test-readme test-seeds lint bench clean report-shot docs

# compiled programs persist in .jax_cache/ (JAX's compilation cache, ignored by git): make run,
# make test and the processes they start share it. Every program is kept, even those that
# compile in well under 0.1 s (loading one costs ~1 ms); the cache has no size bound, so no
# lock and no access-time files (see tests/conftest.py)
export JAX_COMPILATION_CACHE_DIR ?= $(CURDIR)/.jax_cache
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS ?= 0

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# torch is pinned to its CPU wheel: PyPI's torch (unpinned, or torch==2.13.0) is a CUDA
# build of several GB. The local version +cpu is on PyTorch's CPU index (TORCH_INDEX) and on
# the CI machines' disk (pip's find-links), never on PyPI, so no CUDA build can satisfy it.
# pip first looks where it is configured to (here: the local wheels, no network) and only if
# torch is not found there asks PyTorch's index as well: with the index on every try, pip asks
# it about every package, and a machine without a route to it retries each (minutes). The
# README's install line names the index, as a user with a network needs it.
TORCH_PIN ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
DEV_EXTRAS := dev,datasets,torch,sweep
BENCH_EXTRAS := torch,sweep
PIP_TORCH = $(BIN)/python -m pip install -q -e '.[$(1)]' '$(TORCH_PIN)' || \
  $(BIN)/python -m pip install -q -e '.[$(1)]' '$(TORCH_PIN)' --extra-index-url $(TORCH_INDEX)

$(DEVSTAMP): pyproject.toml | $(BIN)/python
	$(call PIP_TORCH,$(DEV_EXTRAS))
	touch $@ $(STAMP)

run: $(STAMP)  ## headline experiment -> results/
	$(BIN)/biasfree run

# one pytest worker per core; a test file is one xdist group (tests/conftest.py), so its
# module fixtures (the Dask cluster) are built once, while each experiment's tiny run is a
# group of its own and the runs spread over the workers (on pytest 9.2, where xdist 3.8 loses
# the groups, tests/xdist_units.py's scheduler forms the same units)
TEST_WORKERS ?= auto

# XLA_FLAGS for pytest only. The suite is compile-bound (about 4,200 compilations, 3,200 of
# them new), so pytest compiles at XLA's optimisation level 0, with XLA:CPU's older loop
# emitters instead of its MLIR fusion emitters, and each program's LLVM module in one piece
# instead of split for parallel codegen (the two pytest workers already use both cores): cold,
# the suite's XLA backend takes 94 CPU-s instead of 576 at level 1 with the other defaults, and
# pytest 226 s instead of 526 s (timings: docs/performance.md). None changes the arithmetic
# asked for: no fast math; the code is less optimised, so the conv programs run slower.
# make run and make test-readme compile with XLA's defaults, as a user's program does.
TEST_XLA_FLAGS ?= --xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false \
  --xla_cpu_parallel_codegen_split_count=1

test: $(DEVSTAMP)  ## ruff + pytest
	$(BIN)/ruff check src tests benchmarks
	XLA_FLAGS="$(strip $(XLA_FLAGS) $(TEST_XLA_FLAGS))" $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not readme and not seeds"

# every experiment's tiny run at seeds 1-4 (seed 0 is make test's): checks whose tolerance is a
# finite-sample spread must hold at every seed, not one (tests/claims/test_seeds.py; 64 runs,
# 13.7 min in one process, 6.4 CPU-min, on a loaded 2-core machine: a tier of its own, run by .ci/run)
test-seeds: $(DEVSTAMP)  ## every experiment's tiny checks at seeds 1-4
	XLA_FLAGS="$(strip $(XLA_FLAGS) $(TEST_XLA_FLAGS))" $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m seeds tests/claims/test_seeds.py

# every ```python snippet of README.md and docs/*.md in a fresh process with JAX's defaults
# (tests/app/test_readme.py)
test-readme: $(DEVSTAMP)  ## README and docs snippets run on their own and print the numbers they show
	$(BIN)/python -m pytest -q -n 0 -m readme tests/app/test_readme.py

# make test's pytest again, on the kernels of an older x86-64: NumPy's SIMD loops at its
# X86_V2 baseline, OpenBLAS's Sandy Bridge kernels and XLA's code for AVX (no AVX2, no FMA).
# A bound that holds for one machine's kernels only fails here. The whole suite, not only the
# round-off tests (marker `numerics`): the list-input tests of test_fuzz_api, unmarked, once
# failed here alone (NumPy inputs took NumPy's BLAS, lists XLA's).
PORTABLE_ENV := NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR" \
  OPENBLAS_CORETYPE=Sandybridge XLA_FLAGS="$(strip $(XLA_FLAGS) $(TEST_XLA_FLAGS) --xla_cpu_max_isa=AVX)"

test-portable: $(DEVSTAMP)  ## make test's pytest with NumPy/OpenBLAS/XLA CPU dispatch narrowed
	$(PORTABLE_ENV) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not readme and not seeds"

RESULTS ?= results
CHROMIUM ?= chromium
SHOT ?= $(RESULTS)/report.png
SHOT_SIZE ?= 1280,4000

report-shot: $(STAMP)  ## $(RESULTS)/index.html, then a headless-Chromium screenshot of it -> $(SHOT)
	$(BIN)/biasfree report --out $(RESULTS)
	@command -v $(CHROMIUM) >/dev/null 2>&1 || { \
	  echo "report-shot: '$(CHROMIUM)' not found. Install it (Debian: apt-get install -y chromium)" \
	       "or point CHROMIUM=/path/to/chrome at a Chrome/Chromium binary." >&2; exit 1; }
	@profile=$$(mktemp -d); \
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	  --disable-background-networking --disable-component-update --disable-sync \
	  --user-data-dir=$$profile --screenshot=$(abspath $(SHOT)) --window-size=$(SHOT_SIZE) \
	  file://$(abspath $(RESULTS))/index.html >/dev/null 2>&1; rc=$$?; rm -rf $$profile; \
	if [ $$rc -ne 0 ] || [ ! -s $(SHOT) ]; then echo "report-shot: chromium failed (exit $$rc)" >&2; exit 1; fi
	@echo $(SHOT)

DOCSSTAMP := $(VENV)/.installed-docs

$(DOCSSTAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[docs]'
	touch $@ $(STAMP)

# the site from docs/*.md and every module's docstrings (docs/conf.py), strict as in CI: a
# warning fails the build (-W; --keep-going lists them all first) and so does a cross-reference
# with no target (-n, nitpicky). -E reads every page afresh: an incremental build would skip the
# pages that did not change, and with them their warnings.
DOCS_OUT ?= docs/_build/html

docs: $(DOCSSTAMP)  ## docs site -> docs/_build/html (strict: a broken reference fails)
	$(BIN)/sphinx-build -E -W --keep-going -n -b html docs $(DOCS_OUT)
	@echo $(DOCS_OUT)/index.html

BENCHSTAMP := $(VENV)/.installed-bench

$(BENCHSTAMP): pyproject.toml | $(BIN)/python
	$(call PIP_TORCH,$(BENCH_EXTRAS))
	touch $@ $(STAMP)

# each script's wall time, then the total; the first script that fails (a run that ended
# non-finite is no result: benchmarks/bench_checks.py) stops the rest, and make bench exits with it
bench: $(BENCHSTAMP)  ## engine timings side by side (ours vs PyTorch, symmetric, ensembles, memory, optax SGD/Adam); sweep overhead; analyse at three sizes; recording effective units vs plain losses
	@t0=$$(date +%s); rc=0; \
	for b in engine sweep analyse units; do \
	  t=$$(date +%s); \
	  $(BIN)/python benchmarks/bench_$$b.py --json results/bench_$$b.json || { rc=$$?; break; }; \
	  echo "make bench: bench_$$b.py took $$(( $$(date +%s) - t )) s"; \
	done; \
	echo "make bench: $$(( $$(date +%s) - t0 )) s in all$$([ $$rc -eq 0 ] || echo ", stopped by bench_$$b.py (exit $$rc)")"; \
	exit $$rc

clean:
	rm -rf $(VENV) results .pytest_cache .jax_cache docs/_build
