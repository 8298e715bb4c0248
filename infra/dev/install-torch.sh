#!/usr/bin/env bash
# The current PyPI torch (infra/dev/torch-requirements.txt, the one place its version is pinned) in a venv of
# Debian's python3, for the training tests, `npm run bench:rescale` and the hook's tests:
#   ${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-~/.cache}/trainscaler}/torch-<version>
# Reused when present and installed from the same requirements file; otherwise (re)built from PyPI (about 4 GB,
# a few minutes). Called by infra/dev/install-system-deps.sh (npm run setup). Debian's python3-torch (1.13) at
# /usr/bin/python3 is left alone: the hook's tests run under both.
# Usage: infra/dev/install-torch.sh [--python]    Env: TRAINSCALER_CACHE
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
requirements="$here/torch-requirements.txt"
CACHE_ROOT="${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}"
BASE_PYTHON=/usr/bin/python3
version="$(sed -n 's/^torch==\([^[:space:]]*\).*/\1/p' "$requirements")"
[[ -n $version ]] || { echo "error: no torch==<version> line in $requirements" >&2; exit 1; }
venv="$CACHE_ROOT/torch-$version"
stamp="$venv/.trainscaler-requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"

# --python: print the venv's python (present or not) and install nothing (infra/sidecar/python/test.sh).
if [[ ${1:-} == --python ]]; then
  echo "$venv/bin/python"
  exit 0
fi
# The stamp is written last, after torch imported: present and equal means complete and current.
if [[ -x $venv/bin/python && -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
  echo "torch $version present ($venv)"
  exit 0
fi

"$BASE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  { echo "error: torch $version needs Python >= 3.11; $BASE_PYTHON is $("$BASE_PYTHON" --version)" >&2; exit 1; }
echo "installing: torch $version (PyPI) into $venv"
started=$SECONDS
rm -rf "$venv"
mkdir -p "$CACHE_ROOT"
"$BASE_PYTHON" -m venv "$venv"
# --no-cache-dir: the venv is the cache; a pip cache would keep a second copy of 3 GB of wheels.
if ! "$venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check --no-deps \
  --retries 2 --timeout 60 -r "$requirements"; then
  index="${PIP_INDEX_URL:-$("$venv/bin/python" -m pip config get global.index-url 2>/dev/null || echo https://pypi.org/simple)}"
  rm -rf "$venv"
  echo "error: could not install torch $version from PyPI ($index): is it reachable? The training tests," \
    "npm run bench:rescale and the hook's tests need it; retry npm run setup when it is." >&2
  exit 1
fi
"$venv/bin/python" -c 'import torch, torch.distributed as dist; assert dist.is_gloo_available()' ||
  { echo "error: torch $version installed in $venv but does not import (see above)" >&2; exit 1; }
echo "$want" >"$stamp"
echo "torch $version installed in $((SECONDS - started)) s, $(du -sh "$venv" | cut -f1) ($venv)"
