#!/usr/bin/env bash
# Runs a command against the real test control plane: starts it (building it on first use) unless one is
# already up, exports TRAINSCALER_KUBECONFIG / TRAINSCALER_SA_KUBECONFIG, and stops it afterwards only if
# this script started it. Usage: infra/cluster/with-cluster.sh CMD [ARGS...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$here/lib.sh"

# The check and the start under the cluster lock: an up.sh already in flight (another caller's) is waited for
# first, so that a cluster someone else is starting is not taken for one this script started (and stopped).
take_cluster_lock
started=0
if ! { [[ -s "$PIDFILE" ]] && "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" --request-timeout=3s get --raw /readyz >/dev/null 2>&1; }; then
  started=1
fi
kubeconfig="$(bash "$here/up.sh" | tail -n1)"
[[ -s "$kubeconfig" ]] || die "up.sh printed no kubeconfig"
exec 8>&-
unset TRAINSCALER_CLUSTER_LOCKED
if [[ "$started" == 1 ]]; then
  trap 'bash "$here/down.sh" >&2 || true' EXIT
fi
export TRAINSCALER_KUBECONFIG="$kubeconfig"
export TRAINSCALER_SA_KUBECONFIG
TRAINSCALER_SA_KUBECONFIG="$(dirname "$kubeconfig")/kubeconfig-sa"
"$@"
