#!/usr/bin/env bash
# Stops exactly the processes recorded in the cluster's pidfile (never by name), waits for
# them to exit, and removes the run state (certs, etcd data, kubeconfigs, logs).  The build
# cache is kept.  Set TRAINSCALER_KEEP_LOGS=1 to keep $RUN_DIR/logs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
take_cluster_lock

if [[ ! -f "$PIDFILE" ]]; then
  log "no cluster running ($PIDFILE absent)"
else
  # Stop in reverse start order: operator and kwok first, etcd last.
  mapfile -t entries < <(tac "$PIDFILE")
  for e in "${entries[@]}"; do
    read -r name pid <<<"$e"
    [[ -n "${name:-}" && -n "${pid:-}" ]] || continue
    if pid_alive "$name" "$pid"; then
      log "stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do pid_alive "$name" "$pid" || break; sleep 0.25; done
      if pid_alive "$name" "$pid"; then
        log "$name (pid $pid) did not exit after 10s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 1 20); do pid_alive "$name" "$pid" || break; sleep 0.25; done
      fi
    fi
  done
  rm -f "$PIDFILE"
fi

# What a killed host node agent could not stop: its containers (by their marker variable) and its network.
leftovers="$(host_node_leftover_pids)"
if [[ -n "$leftovers" ]]; then
  log "killing host node containers left behind: $(echo $leftovers)"
  # shellcheck disable=SC2086
  kill -KILL $leftovers 2>/dev/null || true
fi
[[ "$(id -u)" == 0 ]] && remove_host_node_network

if [[ -d "$RUN_DIR" && ! -f "$RUN_DIR/.trainscaler-cluster-run" ]]; then
  log "$RUN_DIR has no .trainscaler-cluster-run marker; not deleting it"
elif [[ -d "$RUN_DIR" ]]; then
  if [[ "${TRAINSCALER_KEEP_LOGS:-0}" == 1 && -d "$LOG_DIR" ]]; then
    find "$RUN_DIR" -mindepth 1 -maxdepth 1 ! -name logs ! -name .trainscaler-cluster-run -exec rm -rf {} +
    log "removed run state in $RUN_DIR (kept logs)"
  else
    rm -rf "$RUN_DIR"
    log "removed run state $RUN_DIR"
  fi
fi
