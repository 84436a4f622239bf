# Two entry points (see README): `make demo` and `make test`. Both set up what they need.
# One venv, two layers: `demo` installs the core package only (what a run needs); `test` adds
# the bot, llm, cloud and test extras on top. Each layer has its own stamp, named after the hash
# of pyproject.toml, so neither undoes the other and an edit to pyproject.toml reinstalls.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HASH   := $(shell cat pyproject.toml | sha1sum | cut -c1-12)
CORE   := $(VENV)/.core-$(HASH)
STAMP  := $(VENV)/.installed-$(HASH)

.PHONY: demo test test-slow system-deps sandbox-deps test-sources clean

$(CORE): pyproject.toml
	@command -v gcc >/dev/null || { echo "gcc is required (apt-get install build-essential)"; exit 1; }
	@command -v git >/dev/null || { echo "git is required (apt-get install git)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@rm -f $(VENV)/.core-*; touch $@

$(STAMP): $(CORE)
	$(PY) -m pip install -q -e '.[bot,llm,cloud,test]'
	@rm -f $(VENV)/.installed-*; touch $@

# The sandbox every step that runs target code uses (Debian's bubblewrap) and the demo's yardstick
# (valgrind: its `simulate:` workload): the system packages the demo needs, installed when missing
# so `make demo` works on a fresh machine.
sandbox-deps:
	@bash tests/system-deps.sh --sandbox-only

# Runs the whole loop on the bundled demo target (examples/tinyllm); core dependencies only.
demo: $(CORE) sandbox-deps
	$(VENV)/bin/autoresearch demo --out .autoresearch/demo-run

# System packages the tests need (redis-server, cross compiler + qemu for NEON); idempotent.
system-deps:
	@bash tests/system-deps.sh

# The real llama.cpp source the research and recipe tests read (the llama-cpp-python sdist's vendored
# tree, cached under ~/.cache/autoresearch; standard library + pip only). Fetched here, beside the
# installs, because on a fresh machine its download and extraction took 73 s inside the first test
# that needed it. A failure is not fatal: those tests skip and say why.
test-sources:
	@$(PYTHON) kernels/llama/llama_tree.py >/dev/null || echo "llama.cpp source not fetched; its tests will say why"

# The default suite: every test sized for a test (see README, "Tests"); slow ones are deselected.
# TEST_WORKERS: pytest-xdist workers (0: one process). Default 2 with --dist loadgroup: every test
# marked `measures` (its outcome rests on benchmark decisions) runs in one worker, one at a time,
# while the other worker runs everything that measures nothing (tests/conftest.py). Measured on the
# 2-core VM under two CPU hogs: see README, "Tests". Two workers with worksteal instead were slower
# than one (23+ min): two measuring tests side by side make each other's noise and need more pairs.
TEST_WORKERS ?= 2
# The Python packages (pip), the Debian ones (apt, npm) and the llama.cpp source install side by
# side: on a fresh machine each is mostly download time, and none needs another.
test:
	@$(MAKE) --no-print-directory -j3 $(STAMP) system-deps test-sources
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The slow set: the README's demo run, full-size Monte-Carlo studies, the llama.cpp build and
# op checks; see README.
test-slow: $(STAMP)
	@bash tests/system-deps.sh --slow
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .autoresearch autoresearch-runs
