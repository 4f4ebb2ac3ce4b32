# briefd: the README's two commands, and a few more.
#   make demo   venv + install + lab servers on loopback + the example brief, with real inference
#   make test   venv with test extras + mypy (daemon/, store/) + the whole suite under coverage (total printed)
#   make bench / make soak   speed, and what survives kills and outages (scripts, not tests); make bench runs the
#                     lab briefs again at 1 s an answer, where model busy has its goal (issue 28: >= 90 %)
#     SOAK_ARGS: --seconds N --seed N, and a mode: --hostile (web), --hostile-library, --api-flood
#   make bench-vectors   `briefd eval --vectors` on the rule vectors' two halves; in make bench
#   make bench-docs   `briefd eval` on the real-document set (Debian manuals: lab/docset.py); in make bench
#   make bench-real   tokens, wall and model-busy share per brief with real inference (Gemma 3 270M; minutes),
#                     then Gemma reading the rule vectors' figures and the rules verifying them (lab/vectors_real.py)
#   make wheelhouse   (connected machine) wheels of briefd and its runtime dependencies, for an air-gapped install
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-test

.PHONY: FORCE demo test bench bench-vectors bench-docs bench-real soak lab clean venv browser docs-tools wheelhouse

venv: $(STAMP)

# `make venv` installs the checkout editable in setuptools' strict mode: build/__editable__.briefd-*/briefd/ holds
# a link to each file of briefd/, daemon/ and store/ (as briefd/daemon/..., briefd/store/...), and the venv's path
# leads there, where mypy and an editor's go-to-definition find briefd.daemon (briefd/__init__.py says how). A
# file added, removed or renamed needs its link made again: the stamp depends on the list of those files, kept
# in $(PACKAGE_FILES) and rewritten only when it changes.
PACKAGE_FILES := $(VENV)/.package-files
LISTED := $(sort $(shell find briefd daemon store -type f \( -name '*.py' -o -name '*.json' -o -name '*.html' -o -name py.typed \)))

$(PACKAGE_FILES): FORCE
	@mkdir -p $(VENV)
	@echo '$(LISTED)' | cmp -s - $@ || echo '$(LISTED)' > $@

$(STAMP): pyproject.toml $(PACKAGE_FILES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' --config-settings editable_mode=strict
	touch $(STAMP)

FORCE:

# The browser test (tests/ops/test_web_page.py) drives Debian's Chromium: installed here when missing
# and this is root on Debian (CI is); no browser is downloaded from anywhere but the distribution.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make test: installing Debian's chromium for the browser test (tests/ops/test_web_page.py)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "make test: the browser test needs Chromium: sudo apt-get install chromium"; exit 1; \
	  fi; }

# mypy with [tool.mypy] in pyproject.toml (briefd, briefd.daemon, briefd.store, read through the editable link tree),
# beside the tests (one core for 12 s); its verdict is said at the end and a type error fails the run.
# The suite runs in TEST_PROCS processes (pytest-xdist; each lab draws its own ports), a test module whole in one
# process (--dist loadfile: a module's costly module-scoped runs of the daemon are made once, and its timing-bound
# tests never run beside each other; --no-loadscope-reorder keeps tests/conftest.run_order's order: the longest
# module, real inference, first, then the modules with the most tests), under coverage in every process (pytest-cov, [tool.coverage] in
# pyproject.toml); the total is printed, pass or fail. Three processes on two cores: a third of the suite waits
# (a lock held past SQLite's timeout, API deadlines, servers starting). PYTHONDONTWRITEBYTECODE (set in this
# machine's shells) is unset for the run: the ~600 Python processes the tests start each compiled briefd again.
# TEST_PROCS=0 runs it in this one process; PYTEST_ARGS passes more (-m "not lab": the pure tests, 5 minutes).
# How long it takes, and what was tried: docs/development.md, "Running part of the tests".
TEST_PROCS ?= 3
test: $(STAMP) browser
	@echo "mypy: type-checking briefd/, daemon/ and store/ ([tool.mypy] in pyproject.toml) beside the tests; said at the end"
	@$(PY) -m mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	  status=0; PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_PROCS) --dist loadfile --no-loadscope-reorder --cov --cov-report= $(PYTEST_ARGS) || status=$$?; \
	  echo "coverage: $$($(PY) -m coverage report --format=total)% of the statements in daemon/ and store/ ran" \
	    "(per file: $(PY) -m coverage report)"; \
	  if wait $$mypy; then echo "mypy: $$(tail -n 1 $(VENV)/mypy.log)"; \
	  else cat $(VENV)/mypy.log; echo "make test: mypy found type errors (above); fix them"; status=1; fi; \
	  exit $$status

demo: $(STAMP)
	$(PY) -m lab.demo

lab: $(STAMP)
	$(PY) -m lab.servers --workdir lab-run --driver llama

bench: $(STAMP)
	$(PY) -m lab.bench
	$(PY) -m lab.bench --briefs-only --seconds-per-answer 1
	$(MAKE) --no-print-directory bench-vectors
	$(MAKE) --no-print-directory bench-docs

# The rules alone on the rule vectors (lab/vectors: dev half and frozen test half): seconds, no services
bench-vectors: $(STAMP)
	$(PY) -m lab.vectors_bench

# The real-document set's man pages are rendered by Debian's groff (groff-base), installed here when missing
# and this is root on Debian, as the browser is; the manuals themselves are downloaded, never installed.
docs-tools:
	@command -v groff >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make bench-docs: installing Debian's groff-base to render the set's man pages"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq groff-base >/dev/null; \
	  else \
	    echo "make bench-docs: the set's man pages need groff: sudo apt-get install groff-base"; exit 1; \
	  fi; }

# Scripted lab model and Gemma 3 270M (a slice of the set: --llama-limit), web and library; BENCH_DOCS_ARGS
# passes flags (--driver scripted, --source library, --limit 10, --out DIR: python -m lab.docset_bench -h);
# then the second part's frozen test half (other projects, issue 27) with the scripted model; BENCH_DOCS2_ARGS likewise
bench-docs: $(STAMP) docs-tools
	$(PY) -m lab.docset_bench $(BENCH_DOCS_ARGS)
	$(PY) -m lab.docset_bench --part 2 --driver scripted $(BENCH_DOCS2_ARGS)

bench-real: $(STAMP)
	$(PY) -m lab.bench_real $(BENCH_REAL_ARGS)
	$(PY) -m lab.vectors_real $(BENCH_REAL_VECTORS_ARGS)

soak: $(STAMP)
	$(PY) -m lab.soak $(SOAK_ARGS)

# Runtime dependencies only (no lab or test extras), built for this machine's Python and platform:
# build it where the target's OS, CPU and Python version are the same. docs/running.md: "Installing without internet".
WHEELHOUSE ?= wheelhouse
wheelhouse:
	@# setuptools builds in build/ and keeps what an earlier build left there: a package since renamed
	@# would ride along into the wheel (briefd once installed a top-level daemon that way). build/__editable__.*
	@# stays: it is the venv's editable install (make venv)
	rm -rf build/lib build/bdist.*
	$(PYTHON) -m pip wheel --quiet --wheel-dir $(WHEELHOUSE) .
	@echo "wheelhouse: $$(ls $(WHEELHOUSE) | wc -l) wheels in $(WHEELHOUSE)/; install with:"
	@echo "  pip install --no-index --find-links $(WHEELHOUSE) briefd"

clean:
	rm -rf $(VENV) lab-run .pytest_cache .mypy_cache build wheelhouse .coverage .coverage.*
