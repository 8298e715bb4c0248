#!/usr/bin/env bash
# The hook's tests (npm run test:hook) under each torch the launcher supports: the pinned PyPI release (the venv
# of infra/dev/install-torch.sh) and Debian's torch 1.13 (/usr/bin/python3). Both must be installed (npm run
# setup): the tests that check the launcher against the installed torch fail instead of skipping. Then the same
# tests against the hook's wheel installed in a clean venv (test-wheel.sh).
set -euo pipefail
cd "$(dirname "$0")"
venv_python="$(bash ../../dev/install-torch.sh --python)"
export TRAINSCALER_REQUIRE_TORCH=1
status=0
for python in "$venv_python" /usr/bin/python3; do
  echo "== $python: torch $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo missing)"
  "$python" -m pytest -q -p no:cacheprovider "$@" || status=1
done
bash ./test-wheel.sh "$@" || status=1
exit $status
