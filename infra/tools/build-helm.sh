#!/usr/bin/env bash
# Builds the Helm CLI from the Go module proxy into the same cache as the test control plane
# (infra/cluster/build.sh), so every clone on this machine and CI reuse one binary:
#
#   ${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}/tools/bin/helm
#
# Idempotent: a binary whose stamp matches the pinned version + recipe + Go version is not rebuilt
# (a warm run takes well under a second). The cold build is CPU-bound for a few minutes; it runs
# under `nice` so a developer's other work stays responsive. Timings go to tools/build-times.log.
#
# Usage: infra/tools/build-helm.sh          (prints the binary's path on stdout)
# Env:   TRAINSCALER_CACHE, TRAINSCALER_BUILD_JOBS (go build -p, default 2), TRAINSCALER_FORCE_BUILD=1
set -euo pipefail

HELM_VERSION=v4.3.2
# Bump when the build recipe (flags) changes so stamps are invalidated.
RECIPE=1

CACHE_ROOT="${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}"
TOOLS="$CACHE_ROOT/tools"
BIN="$TOOLS/bin"
SRC="$TOOLS/src/helm-$HELM_VERSION"
TIMES="$TOOLS/build-times.log"
JOBS="${TRAINSCALER_BUILD_JOBS:-2}"

log() { printf '[build-helm] %s\n' "$*" >&2; }
die() { printf '[build-helm] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not installed (need Go >= 1.24)"
mkdir -p "$BIN"

export CGO_ENABLED=0
export GOFLAGS="-trimpath"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

stamp() { printf 'helm %s recipe=%s %s\n' "$HELM_VERSION" "$RECIPE" "$(go env GOVERSION)"; }
is_current() {
  [[ "${TRAINSCALER_FORCE_BUILD:-0}" != 1 && -x "$BIN/helm" && -f "$BIN/.helm.stamp" ]] || return 1
  [[ "$(cat "$BIN/.helm.stamp")" == "$(stamp)" ]]
}

# run_timed LABEL CMD...: as in infra/cluster/build.sh, appends wall seconds, peak RSS and CPU seconds.
run_timed() {
  local label="$1"; shift
  local t0 tf rss="" cpu=""
  tf="$(mktemp)"; t0=$(date +%s)
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -v -o "$tf" "$@" || { cat "$tf" >&2; rm -f "$tf"; die "$label failed"; }
    rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); printf "%d", $2/1024}' "$tf")
    cpu=$(awk -F: '/User time|System time/ {gsub(/ /,"",$2); t += $2} END {printf "%.0f", t}' "$tf")
  else
    "$@" || die "$label failed"
  fi
  rm -f "$tf"
  printf '%s %-40s %5ss maxrss=%sMiB cpu=%ss go=%s\n' "$(date -u +%FT%TZ)" "$label" "$(($(date +%s) - t0))" \
    "${rss:-?}" "${cpu:-?}" "$(go env GOVERSION)" >>"$TIMES"
  log "$label: $(($(date +%s) - t0))s${rss:+ (peak RSS ${rss} MiB, ${cpu} CPU-s)}"
}

if is_current; then
  printf '%s\n' "$BIN/helm"
  exit 0
fi

exec 9>"$TOOLS/.build.lock"
flock -n 9 || { log "another build holds $TOOLS/.build.lock; waiting"; flock 9; }
if is_current; then printf '%s\n' "$BIN/helm"; exit 0; fi

log "building helm $HELM_VERSION (cold builds take a few CPU minutes)"
# A throwaway wrapper module requiring the pinned helm module: `-mod=mod` resolves the rest exactly
# as helm's own go.mod says (checksums verified by the checksum database as usual).
rm -rf "$SRC"; mkdir -p "$SRC"
printf 'module trainscaler.local/helm-build\n\ngo 1.24.0\n\nrequire helm.sh/helm/v4 %s\n' "$HELM_VERSION" >"$SRC/go.mod"
(cd "$SRC" && run_timed "helm $HELM_VERSION: resolve+download deps" \
  nice -n 10 go list -mod=mod -deps helm.sh/helm/v4/cmd/helm >/dev/null)
(cd "$SRC" && run_timed "helm $HELM_VERSION: compile+link" \
  nice -n 10 go build -mod=mod -p "$JOBS" \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "$SRC/helm.new" helm.sh/helm/v4/cmd/helm)
mv -f "$SRC/helm.new" "$BIN/helm"
stamp >"$BIN/.helm.stamp"
"$BIN/helm" version --short >&2
printf '%s\n' "$BIN/helm"
