#!/usr/bin/env bash
# The hook as users get it (npm run test:hook, after the source-tree runs): a wheel built from this directory
# with `pip wheel`, versioned as the project (package.json; the build stops when pyproject.toml disagrees),
# installed into a clean venv of Debian's python3, and the hook's tests run against the installed package: the
# tests are copied out of the source tree, so nothing but the wheel provides `trainscaler_hook`. The venv sees
# Debian's site-packages for pytest (and torch 1.13); they hold no trainscaler_hook.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
project_version="$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$repo/package.json")"
hook_version="$(/usr/bin/python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$here/pyproject.toml")"
if [[ $hook_version != "$project_version" ]]; then
  echo "error: $here/pyproject.toml has version $hook_version, package.json $project_version: set them equal" >&2
  exit 1
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/trainscaler-hook-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The torch venv's pip and setuptools build it offline (no isolated build environment to download).
builder="$(bash "$repo/infra/dev/install-torch.sh" --python)"
# Built from a copy: setuptools leaves build/ and *.egg-info beside the sources it builds.
mkdir "$work/src"
cp -r "$here/pyproject.toml" "$here/trainscaler_hook" "$work/src/"
"$builder" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$work/dist" "$work/src" >/dev/null
wheel="$work/dist/trainscaler_hook-$project_version-py3-none-any.whl"
[[ -f $wheel ]] || { echo "error: pip wheel built $(ls "$work/dist"), not $(basename "$wheel")" >&2; exit 1; }
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-deps --no-index --disable-pip-version-check "$wheel"
cp -r "$here/tests" "$work/tests"
cd "$work"
"$work/venv/bin/python" - "$project_version" "$work/venv" <<'PY'
import importlib.metadata, sys, trainscaler_hook
assert trainscaler_hook.__file__.startswith(sys.argv[2]), f"imported from {trainscaler_hook.__file__}, not the venv"
assert importlib.metadata.version("trainscaler-hook") == sys.argv[1]
PY
echo "== $(basename "$wheel") installed in a clean venv ($("$work/venv/bin/python" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'no torch'))"
"$work/venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$work" "$work/tests" "$@"
