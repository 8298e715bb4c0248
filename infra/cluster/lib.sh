# Shared settings for infra/cluster/{up,down,smoke}.sh.  Source it; don't run it.
# shellcheck shell=bash

CLUSTER_SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CLUSTER_SCRIPT_DIR/../.." && pwd)"

# Build cache (binaries; shared by every clone on this machine).
CACHE_ROOT="${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}"
BIN="$CACHE_ROOT/cluster/bin"

# Run state (certs, etcd data, logs, kubeconfigs, pidfile). Removed by down.sh.
RUN_DIR="${TRAINSCALER_CLUSTER_DIR:-${XDG_RUNTIME_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}}/trainscaler/cluster-run}"
PIDFILE="$RUN_DIR/pids"
KUBECONFIG_ADMIN="$RUN_DIR/kubeconfig"
KUBECONFIG_SA="$RUN_DIR/kubeconfig-sa"
LOG_DIR="$RUN_DIR/logs"

# Kubeflow CRDs: shared/ beside the repo, referenced in place (never copied).
CRD_DIR="${TRAINSCALER_CRD_DIR:-$REPO_ROOT/../shared/k8s-crds}"

# Ports (all servers bind 127.0.0.1 only).
APISERVER_PORT="${TRAINSCALER_APISERVER_PORT:-16443}"
ETCD_PORT="${TRAINSCALER_ETCD_PORT:-16379}"              # peer port: +1
KCM_PORT="${TRAINSCALER_KCM_PORT:-16257}"
SCHEDULER_PORT="${TRAINSCALER_SCHEDULER_PORT:-16259}"
KWOK_PORT="${TRAINSCALER_KWOK_PORT:-16247}"
OPERATOR_METRICS_PORT="${TRAINSCALER_OPERATOR_METRICS_PORT:-16080}"
OPERATOR_PROBE_PORT="${TRAINSCALER_OPERATOR_PROBE_PORT:-16081}"
OPERATOR_WEBHOOK_PORT="${TRAINSCALER_OPERATOR_WEBHOOK_PORT:-16444}"
# JobSet, Kubeflow Trainer and Kueue: each port is the API server port + a fixed offset (+40..+48), so
# clusters started with distinct TRAINSCALER_APISERVER_PORTs (100 apart) never collide.
JOBSET_METRICS_PORT="${TRAINSCALER_JOBSET_METRICS_PORT:-$((APISERVER_PORT + 40))}"
JOBSET_PROBE_PORT="${TRAINSCALER_JOBSET_PROBE_PORT:-$((APISERVER_PORT + 41))}"
JOBSET_WEBHOOK_PORT="${TRAINSCALER_JOBSET_WEBHOOK_PORT:-$((APISERVER_PORT + 42))}"
TRAINER_METRICS_PORT="${TRAINSCALER_TRAINER_METRICS_PORT:-$((APISERVER_PORT + 43))}"
TRAINER_PROBE_PORT="${TRAINSCALER_TRAINER_PROBE_PORT:-$((APISERVER_PORT + 44))}"
TRAINER_WEBHOOK_PORT="${TRAINSCALER_TRAINER_WEBHOOK_PORT:-$((APISERVER_PORT + 45))}"
KUEUE_METRICS_PORT="${TRAINSCALER_KUEUE_METRICS_PORT:-$((APISERVER_PORT + 46))}"
KUEUE_PROBE_PORT="${TRAINSCALER_KUEUE_PROBE_PORT:-$((APISERVER_PORT + 47))}"
KUEUE_WEBHOOK_PORT="${TRAINSCALER_KUEUE_WEBHOOK_PORT:-$((APISERVER_PORT + 48))}"

# Fake nodes.
KWOK_NODES="${TRAINSCALER_KWOK_NODES:-4}"
KWOK_NODE_GPUS="${TRAINSCALER_KWOK_NODE_GPUS:-4}"
KWOK_NODE_CPU="${TRAINSCALER_KWOK_NODE_CPU:-32}"
KWOK_NODE_MEMORY="${TRAINSCALER_KWOK_NODE_MEMORY:-128Gi}"

# The host node (infra/cluster/host-node-agent): a node whose pods really run as processes on this machine.
# auto = start it when this shell is root and can create network namespaces; 1 = require it; 0 = never.
HOST_NODE="${TRAINSCALER_HOST_NODE:-auto}"
HOST_NODE_NAME="host-node-0"
# Link names and the pod /24 derive from the API server port, so clusters on one machine never share them.
HOST_NODE_TAG="$APISERVER_PORT"
HOST_NODE_CIDR="${TRAINSCALER_HOST_NODE_CIDR:-10.247.$((APISERVER_PORT % 250)).0/24}"
HOST_NODE_STATE_DIR="$RUN_DIR/host-node"
NODE_BIN="$REPO_ROOT/node_modules/.bin/node"

# 1 = register the training-operator's validating webhooks (as a real install does).
OPERATOR_WEBHOOK="${TRAINSCALER_OPERATOR_WEBHOOK:-1}"

# Kueue's queues (up.sh creates them): one ResourceFlavor, a ClusterQueue with a GPU quota, and a
# LocalQueue of that name in each namespace of KUEUE_QUEUE_NAMESPACES.
KUEUE_FLAVOR="${TRAINSCALER_KUEUE_FLAVOR:-default-flavor}"
KUEUE_CLUSTER_QUEUE="${TRAINSCALER_KUEUE_CLUSTER_QUEUE:-trainscaler-cq}"
KUEUE_LOCAL_QUEUE="${TRAINSCALER_KUEUE_LOCAL_QUEUE:-trainscaler-lq}"
KUEUE_QUEUE_NAMESPACES="${TRAINSCALER_KUEUE_QUEUE_NAMESPACES:-default}"
KUEUE_GPU_QUOTA="${TRAINSCALER_KUEUE_GPU_QUOTA:-8}"
KUEUE_CPU_QUOTA="${TRAINSCALER_KUEUE_CPU_QUOTA:-64}"
KUEUE_MEMORY_QUOTA="${TRAINSCALER_KUEUE_MEMORY_QUOTA:-256Gi}"

SERVICE_CIDR="10.96.0.0/16"
SERVICE_FIRST_IP="10.96.0.1"
POD_CIDR="10.244.0.1/16"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# kubectl from PATH, else the one build.sh builds when there is none.
if command -v kubectl >/dev/null; then KUBECTL="$(command -v kubectl)"; else KUBECTL="$BIN/kubectl"; fi
# kubectl as cluster admin.
kc() { "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# pid_alive NAME PID: PID runs our binary NAME from $BIN (guards against PID reuse).
pid_alive() {
  local exe
  if [[ "$1" == host-node-agent ]]; then # a node process running the agent's entry point
    tr '\0' ' ' <"/proc/$2/cmdline" 2>/dev/null | grep -q "host-node-agent/main.ts"
    return
  fi
  exe="$(readlink "/proc/$2/exe" 2>/dev/null)" || return 1
  exe="${exe% (deleted)}"
  [[ "$exe" == "$BIN/$1" || "$exe" == */cluster/bin/"$1" ]]
}

# Serialise up.sh/down.sh on one run dir (parallel test workers may all call up.sh).
take_cluster_lock() {
  [[ "${TRAINSCALER_CLUSTER_LOCKED:-0}" == 1 ]] && return 0
  mkdir -p "$(dirname "$RUN_DIR")"
  exec 8>"$RUN_DIR.lock"
  if ! flock -n 8; then
    log "waiting for another up/down on $RUN_DIR"
    flock 8
  fi
  export TRAINSCALER_CLUSTER_LOCKED=1
}

port_in_use() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# wait_for DESCRIPTION TIMEOUT_SECONDS CMD...
wait_for() {
  local what="$1" timeout="$2" t0; shift 2
  t0=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) - t0 > timeout )); then
      log "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# Processes a host node agent started and could not stop (it was killed): found by the marker variable the
# agent puts in every container's environment (its state dir), never by name.
host_node_leftover_pids() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid="${f#/proc/}"; pid="${pid%/environ}"
    tr '\0' '\n' 2>/dev/null <"$f" | grep -qxF "TRAINSCALER_HOST_NODE_AGENT=$HOST_NODE_STATE_DIR" && echo "$pid"
  done
  return 0
}

# Network namespaces and the bridge of this cluster's host node (see host-node-agent/pod-network.ts).
remove_host_node_network() {
  local ns
  command -v ip >/dev/null || return 0
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^tsna${HOST_NODE_TAG}-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "tsbr${HOST_NODE_TAG}" 2>/dev/null || true
}
