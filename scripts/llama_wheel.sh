#!/usr/bin/env bash
# Build (once per machine kind) and install llama-cpp-python for the embedded model server.
#
# Why not a plain `pip install llama-cpp-python`: the package is source-only, its default build
# uses the build machine's native CPU flags (a CPU that reports AMX while the kernel does not
# enable it then dies with SIGILL), and pip's wheel cache reuses a built wheel whatever
# CMAKE_ARGS say. So we build with a portable x86-64 baseline (AVX2/FMA/F16C, no native flags)
# into our own wheel folder whose name is a hash of the version, the flags and the interpreter:
# a wheel built with other flags can never be picked up.
#
# usage: scripts/llama_wheel.sh PYTHON
set -euo pipefail
PY="$1"
VERSION="0.3.36"
FLAGS="${MEMAUDIT_LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_CURL=OFF}"
TAG="$("$PY" -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_platform())')"
KEY="$(printf 'llama-cpp-python==%s\n%s\n%s\n' "$VERSION" "$FLAGS" "$TAG" | sha256sum | cut -c1-16)"
DIR="${MEMAUDIT_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memaudit/wheels}/llama-cpp-python-$VERSION-$KEY"

if ! ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION (portable flags: $FLAGS); about 9 minutes on 2 cores" >&2
  mkdir -p "$DIR.partial"
  CMAKE_ARGS="$FLAGS" FORCE_CMAKE=1 "$PY" -m pip wheel -q --no-cache-dir --no-deps \
    -w "$DIR.partial" "llama-cpp-python==$VERSION" > "$DIR.partial/build.log" 2>&1 || {
      echo "llama-cpp-python build failed; log: $DIR.partial/build.log" >&2; exit 1; }
  printf '%s\n' "$FLAGS" > "$DIR.partial/CMAKE_ARGS"
  rm -rf "$DIR" && mv "$DIR.partial" "$DIR"
fi
# The wheel comes from our folder only (--no-index for it); its [server] dependencies from the index.
"$PY" -m pip install -q --no-index --find-links "$DIR" --no-deps --force-reinstall "llama-cpp-python==$VERSION"
"$PY" -m pip install -q "llama-cpp-python[server]==$VERSION" --find-links "$DIR"
