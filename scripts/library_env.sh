#!/usr/bin/env bash
# A deployed library that cannot share memaudit's environment gets one of its own:
#   bash scripts/library_env.sh PYTHON EXTRA DIR
# creates DIR (a venv) with the requirements of pyproject.toml's extra EXTRA (the one place its pin
# is written) and a local copy of the token encodings the library counts with (tiktoken's cache,
# from the copy llama-index-core ships in memaudit's environment), so nothing is downloaded at run
# time. memaudit runs the library there in a worker process (adapters/cognee.py). Idempotent.
set -euo pipefail
PYTHON=$1 EXTRA=$2 DIR=$3
REQUIREMENTS=$("$PYTHON" -c "import sys, tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies'][sys.argv[1]]))" "$EXTRA")
test -x "$DIR/bin/python" || "$PYTHON" -m venv "$DIR"
"$DIR/bin/python" -m pip install -q --upgrade pip
"$DIR/bin/python" -m pip install -q $REQUIREMENTS
ENCODINGS=$("$PYTHON" -c "import os, llama_index.core as c; print(os.path.join(os.path.dirname(c.__file__), '_static', 'tiktoken_cache'))")
mkdir -p "$DIR/tiktoken_cache"
cp "$ENCODINGS"/* "$DIR/tiktoken_cache/"
