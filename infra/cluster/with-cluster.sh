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
# TRAINSCALER_CLUSTER_LOG=FILE: up.sh's and down.sh's progress go to FILE and one line each to stderr
# (npm run quickstart, whose reader came for the story, not the control plane's start-up).
if [[ -n "${TRAINSCALER_CLUSTER_LOG:-}" ]]; then
  exec 9>>"$TRAINSCALER_CLUSTER_LOG"
  [[ "$started" == 1 ]] && log "starting the test control plane (1-2 min; the first run builds it first); log: $TRAINSCALER_CLUSTER_LOG"
else
  exec 9>&2
fi
kubeconfig="$(bash "$here/up.sh" 2>&9 | tail -n1)" || die "up.sh failed${TRAINSCALER_CLUSTER_LOG:+; see $TRAINSCALER_CLUSTER_LOG}"
[[ -s "$kubeconfig" ]] || die "up.sh printed no kubeconfig"
exec 8>&-
unset TRAINSCALER_CLUSTER_LOCKED
if [[ "$started" == 1 ]]; then
  [[ -n "${TRAINSCALER_CLUSTER_LOG:-}" ]] && log "test control plane up"
  trap '[[ -n "${TRAINSCALER_CLUSTER_LOG:-}" ]] && log "stopping the test control plane"; bash "$here/down.sh" >&9 2>&9 || true' EXIT
else
  [[ -n "${TRAINSCALER_CLUSTER_LOG:-}" ]] && log "using the test control plane already running (left running)"
fi
export TRAINSCALER_KUBECONFIG="$kubeconfig"
export TRAINSCALER_SA_KUBECONFIG
TRAINSCALER_SA_KUBECONFIG="$(dirname "$kubeconfig")/kubeconfig-sa"
"$@"
