#!/usr/bin/env bash
# System packages the test suites use, from Debian: Prometheus and Alertmanager (the metrics pipeline test),
# pytest (the Python hook), the image tools (mmdebstrap, umoci, crun, runc); torch for the elastic trainer. Go builds the control plane on first use (infra/cluster/build.sh) and must be
# on PATH. Installs only what is missing; needs root (or sudo) when something is.
set -euo pipefail
missing=()
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
{ command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null; } && command -v amtool >/dev/null || missing+=(prometheus-alertmanager)
python3 -c 'import pytest' 2>/dev/null || missing+=(python3-pytest)
command -v openssl >/dev/null || missing+=(openssl)
# The OCI images without a container engine (npm run build:images, test/package/images.test.ts): mmdebstrap
# extracts the Debian base, umoci packs the layers, crun or runc (where crun refuses hybrid cgroups) runs them.
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v umoci >/dev/null || missing+=(umoci)
command -v crun >/dev/null || missing+=(crun)
command -v runc >/dev/null || missing+=(runc)
# The real elastic trainer (infra/examples/elastic-trainer, npm run bench:rescale): Debian's CPU build of torch
# under /usr/bin/python3, since PyPI's torch wheels pull CUDA packages.
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
  exit 0
fi
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
echo "installing: ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
