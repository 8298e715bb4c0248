#!/usr/bin/env bash
# System packages the test suites use, from Debian: Prometheus and Alertmanager (the metrics pipeline test),
# pytest (the Python hook), the image tools (mmdebstrap, umoci, crun, runc), torch 1.13; then the current torch
# from PyPI (install-torch.sh). Go builds the control plane on first use (infra/cluster/build.sh) and must be on
# PATH. Installs only what is missing; needs root (or sudo) when something is.
set -euo pipefail
missing=()
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
{ command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null; } && command -v amtool >/dev/null || missing+=(prometheus-alertmanager)
python3 -c 'import pytest' 2>/dev/null || missing+=(python3-pytest)
# The hook's tests also run under Debian's python3 and its torch 1.13 (npm run test:hook); the PyPI torch's
# venv (install-torch.sh, below) is made with its venv module.
/usr/bin/python3 -c 'import pytest' 2>/dev/null || missing+=(python3-pytest)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
command -v openssl >/dev/null || missing+=(openssl)
# The OCI images without a container engine (npm run build:images, test/package/images.test.ts): mmdebstrap
# extracts the Debian base, umoci packs the layers, crun or runc (where crun refuses hybrid cgroups) runs them.
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v umoci >/dev/null || missing+=(umoci)
command -v crun >/dev/null || missing+=(crun)
command -v runc >/dev/null || missing+=(runc)
# torch 1.13, Debian's CPU build under /usr/bin/python3: the hook's tests still run on it (npm run test:hook).
# The training tests and npm run bench:rescale run on the current PyPI torch (install-torch.sh, below).
[[ -x /usr/bin/torchrun ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null || missing+=(python3-torch)
command -v go >/dev/null || echo "warning: no Go on PATH: the integration tests' control plane cannot be built (needs Go >= 1.24)" >&2
# Helm for the chart tests (charts/trainscaler), built from the Go module proxy into the shared cache.
if command -v go >/dev/null; then bash "$(dirname "$0")/../tools/build-helm.sh" >/dev/null; fi
# moto's server mode, the emulated AWS (EventBridge, SQS) of `npm run test:aws`, from PyPI for the python3 on PATH.
if ! { command -v moto_server >/dev/null && python3 -c 'import moto.server, flask' 2>/dev/null; }; then
  echo "installing: moto[server] (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check 'moto[server]>=5,<6'
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "system dependencies present"
else
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "installing: ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The current PyPI torch (pinned in infra/dev/torch-requirements.txt) in a cached venv, after apt (python3-venv).
bash "$(dirname "$0")/install-torch.sh"
