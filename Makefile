PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest worker processes for `make test`: three on the 2-core machines it runs on, since the
# workers spend long stretches waiting on the servers, clients and subprocesses their tests
# start (measured on a fresh clone at load 1-3: 933.6 s with two, 828.6 s with three).
# A module's tests stay in one worker (--dist loadfile), so module-scoped servers start once.
TEST_WORKERS ?= 3

.PHONY: run test lint browser postgresql opencode clean sims sdk dist dist-test

$(STAMP): pyproject.toml sdk/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e sdk/python -e '.[dev]'
	touch $(STAMP)

# The project's bytecode is written ahead, so that starting does not compile it when the
# environment sets PYTHONDONTWRITEBYTECODE (about 60 ms of every start); up to date, 0.1 s.
run: $(STAMP)
	$(BIN)/python -m compileall -q actors gateway runtime storage
	$(BIN)/kittiwake serve

# The inspector test drives Debian's headless Chromium; install it when it is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The PostgreSQL store's tests run a temporary cluster with Debian's initdb and pg_ctl;
# install them when they are missing (the tests fail, never skip, without them).
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }


# OpenCode's own clients (terminal UI and SDK) and ACP's TypeScript SDK (with its published
# JSON schema), pinned exactly in clients/package.json, which tests/opencode and
# tests/editor_acp drive Kittiwake with (no lock file: npm writes one per platform, leaving
# out the other platforms' binary packages). opencode-ai ships a placeholder binary that its
# postinstall replaces with the platform package's (an optionalDependency); an npm that
# skips install scripts leaves the placeholder, so the postinstall is run when needed.
OPENCODE_STAMP := clients/node_modules/.installed
$(OPENCODE_STAMP): clients/package.json
	cd clients && npm install --no-package-lock --no-audit --no-fund --loglevel=error
	clients/node_modules/.bin/opencode --version 2>/dev/null | grep -qx 1.18.33 || (cd clients/node_modules/opencode-ai && node postinstall.mjs)
	clients/node_modules/.bin/opencode --version | grep -qx 1.18.33
	touch $@

opencode: $(OPENCODE_STAMP)


test: $(STAMP) browser postgresql opencode
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Seeded simulation runs outside CI (the CI set runs in `make test`): SEEDS seeds from
# SEED_START, each of SIM_SESSIONS sessions with SIM_ACTIONS client actions (the long run's
# shape), in 2 worker processes; see docs/simulation.md.
SEEDS ?= 1000
SEED_START ?= 0
SIM_SESSIONS ?= 2
SIM_ACTIONS ?= 2,5
sims: $(STAMP)
	nice -n 19 $(BIN)/python -m sims run --seeds $(SEEDS) --start $(SEED_START) \
		--sessions $(SIM_SESSIONS) --actions $(SIM_ACTIONS)

# The Python SDK's generated modules, regenerated from the route table's OpenAPI document
# (tests/sdk/test_lockstep.py fails when they differ from what is committed); docs/sdk.md.
sdk: $(STAMP)
	$(BIN)/python -m gateway.sdk

# The single-file executable dist/kittiwake (PyInstaller, one file: the interpreter, the
# packages and their data), which runs where no Python is installed. It takes minutes to
# build (about 4 on the 2-core machines), so it is not part of `make test`: `make dist-test`
# builds it and runs packaging/test_executable.py against it (docs/sdk.md, docs/benchmarks.md).
PYINSTALLER := pyinstaller==6.22.3
dist: $(STAMP)
	$(BIN)/python -m pip install -q $(PYINSTALLER)
	$(BIN)/pyinstaller --onefile --name kittiwake --noconfirm --log-level WARN \
		--workpath build/pyinstaller --distpath dist --specpath build/pyinstaller \
		--collect-submodules actors --collect-submodules runtime \
		--collect-submodules storage --collect-submodules gateway \
		--collect-submodules kittiwake_sdk \
		--add-data "$(CURDIR)/runtime/llm/_data:runtime/llm/_data" \
		--add-data "$(CURDIR)/gateway/web/static:gateway/web/static" \
		--copy-metadata kittiwake --copy-metadata kittiwake-sdk \
		gateway/__main__.py

dist-test: dist
	$(BIN)/pytest -q packaging/test_executable.py

lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) clients/node_modules build dist
