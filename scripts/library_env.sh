#!/usr/bin/env bash
# A deployed library that cannot share memaudit's environment gets one of its own (its adapter
# declares `ENVIRONMENT = "NAME"`, adapters/environment.py; `make install` builds every declared one):
#   bash scripts/library_env.sh PYTHON NAME [DIR]
# creates DIR (default .venv-NAME, a venv) with memaudit's core dependencies and the requirements of
# pyproject.toml's extra NAME (the one place its pin is written), resolved together, and a local copy
# of the token encodings libraries count with (tiktoken's cache, from the copy llama-index-core
# ships in memaudit's environment), so nothing is downloaded at run time. memaudit itself is not
# installed there: its worker processes run the parent's own memaudit source. Idempotent.
set -euo pipefail
PYTHON=$1 NAME=$2 DIR=${3:-.venv-$2}
REQUIREMENTS=$("$PYTHON" -c "
import sys, tomllib
project = tomllib.load(open('pyproject.toml', 'rb'))['project']
print(' '.join(project['dependencies'] + project['optional-dependencies'][sys.argv[1]]))" "$NAME")
test -x "$DIR/bin/python" || "$PYTHON" -m venv "$DIR"
"$DIR/bin/python" -m pip install -q --upgrade pip
"$DIR/bin/python" -m pip install -q $REQUIREMENTS
ENCODINGS=$("$PYTHON" -c "import os, llama_index.core as c; print(os.path.join(os.path.dirname(c.__file__), '_static', 'tiktoken_cache'))")
mkdir -p "$DIR/tiktoken_cache"
cp "$ENCODINGS"/* "$DIR/tiktoken_cache/"
