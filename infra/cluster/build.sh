#!/usr/bin/env bash
# Builds the binaries of the local integration-test control plane from Go modules
# into a cache OUTSIDE the repository, so that every clone on this machine reuses them:
#
#   ${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}/cluster/bin/
#
# Idempotent: a binary whose stamp file matches the pinned version + recipe is not
# rebuilt (a warm run takes well under a second).  GOMODCACHE / GOCACHE stay at Go's
# defaults so CI on the same machine shares them.
#
# Usage: infra/cluster/build.sh [component...]   (default: all)
#   components: etcd kube-apiserver kube-controller-manager kube-scheduler kwok training-operator
#               jobset trainer kueue
#               (+ kubectl v$KUBE_VERSION, by default only when no kubectl is on PATH)
# Env:
#   TRAINSCALER_CACHE        cache root (see above)
#   TRAINSCALER_BUILD_JOBS   go build -p value (default 2)
#   TRAINSCALER_FORCE_BUILD  =1 rebuilds even when stamps match
set -euo pipefail

# ---- pinned versions -------------------------------------------------------------------
KUBE_VERSION=v1.33.13            # kube-apiserver, kube-controller-manager, kube-scheduler
ETCD_VERSION=v3.5.21             # etcd (the version Kubernetes 1.33 is tested against)
KWOK_VERSION=v0.7.0              # kwok (fake nodes + pod lifecycle)
TRAINING_OPERATOR_VERSION=v1.9.3 # Kubeflow training-operator (CRDs identical to v1.9.0)
JOBSET_VERSION=v0.12.0           # sigs.k8s.io/jobset (ElasticJobSet gate)
TRAINER_VERSION=v2.3.0           # github.com/kubeflow/trainer/v2 (TrainJob; runs on JobSet)
KUEUE_VERSION=v0.18.1            # sigs.k8s.io/kueue (elastic jobs via workload slices)
# go.sum hashes of the three controller modules (module zip, go.mod), pinned here because the
# checksum database does not (yet) list every one of them (sum.golang.org answers 404 for
# kueue v0.18.1): the build refuses a module whose content differs from these.
JOBSET_SUMS="h1:YYPuV0px8Ongq/RXmJg6V0w2UC67aiR+rCMD06vhQQQ= h1:JpUzWItLGW1ysjbENDk/tRz0rvAwVPFHgHnMv/W2HVY="
TRAINER_SUMS="h1:Je+e7zvTLzB4qW09J1fB7pZrqvPtWuGng2NqdN5p5QU= h1:7R2Eib9BHAbPniXQR11CuMAF72/847Ogznj7od5q6DY="
KUEUE_SUMS="h1:XHPgRGhYYMTzsUHAKfZQ8V70jtXBKkIC18QbFLD72t8= h1:Pxmlj5cBKfZTzKNK7LKlyb/tB4HFErf6JM8qmklpFV8="
# Bump when the build recipe (flags, patches) changes so stamps are invalidated.
RECIPE=3

CACHE_ROOT="${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}"
CLUSTER_CACHE="$CACHE_ROOT/cluster"
BIN="$CLUSTER_CACHE/bin"
SRC="$CLUSTER_CACHE/src"
TIMES="$CLUSTER_CACHE/build-times.log"
JOBS="${TRAINSCALER_BUILD_JOBS:-2}"

log() { printf '[build] %s\n' "$*" >&2; }
die() { printf '[build] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not installed (need Go >= 1.24)"
mkdir -p "$BIN" "$SRC"

export CGO_ENABLED=0
export GOFLAGS="-trimpath"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

stamp_of() { # component -> expected stamp content
  local v
  case "$1" in
    etcd) v="$ETCD_VERSION" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) v="$KUBE_VERSION" ;;
    kwok) v="$KWOK_VERSION" ;;
    training-operator) v="$TRAINING_OPERATOR_VERSION" ;;
    jobset) v="$JOBSET_VERSION" ;;
    trainer) v="$TRAINER_VERSION" ;;
    kueue) v="$KUEUE_VERSION" ;;
    *) die "unknown component $1" ;;
  esac
  printf '%s %s recipe=%s %s\n' "$1" "$v" "$RECIPE" "$(go env GOVERSION)"
}

is_current() { # component
  [[ "${TRAINSCALER_FORCE_BUILD:-0}" != 1 ]] || return 1
  [[ -x "$BIN/$1" && -f "$BIN/.$1.stamp" ]] || return 1
  [[ "$(cat "$BIN/.$1.stamp")" == "$(stamp_of "$1")" ]]
}

now() { date +%s; }

# run_timed LABEL CMD... : runs CMD under /usr/bin/time -v (when present), appends
# "<date> <label> <seconds>s maxrss=<MiB>MiB" to the timings log.
run_timed() {
  local label="$1"; shift
  local t0 t1 tf rss="" cpu=""
  tf="$(mktemp)"
  t0=$(now)
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -v -o "$tf" "$@" || { cat "$tf" >&2; rm -f "$tf"; die "$label failed"; }
    rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); printf "%d", $2/1024}' "$tf")
    # CPU seconds (user + system) do not depend on how loaded the machine is, unlike the wall time.
    cpu=$(awk -F: '/User time|System time/ {gsub(/ /,"",$2); t += $2} END {printf "%.0f", t}' "$tf")
  else
    "$@" || die "$label failed"
  fi
  t1=$(now)
  rm -f "$tf"
  printf '%s %-40s %5ss maxrss=%sMiB cpu=%ss go=%s\n' "$(date -u +%FT%TZ)" "$label" "$((t1 - t0))" "${rss:-?}" "${cpu:-?}" "$(go env GOVERSION)" >>"$TIMES"
  log "$label: $((t1 - t0))s${rss:+ (peak RSS ${rss} MiB, ${cpu} CPU-s)}"
}

install_bin() { # component built-file
  mv -f "$2" "$BIN/$1"
  stamp_of "$1" >"$BIN/.$1.stamp"
}

# ---- wrapper modules ---------------------------------------------------------------------
# Each component is built from a throwaway module in $SRC/<name> that requires the pinned
# upstream module; `go build -mod=mod` resolves the rest exactly as upstream's go.mod says.

new_module() { # dir modulepath require...
  local dir="$1" mod="$2"; shift 2
  rm -rf "$dir"; mkdir -p "$dir"
  {
    printf 'module %s\n\ngo 1.24.0\n\nrequire (\n' "$mod"
    local r; for r in "$@"; do printf '\t%s\n' "$r"; done
    printf ')\n'
  } >"$dir/go.mod"
}

prepare_kube() {
  local dir="$SRC/kubernetes-$KUBE_VERSION" gomod minor staging
  [[ -f "$dir/.ready" ]] && return 0
  log "preparing wrapper module for k8s.io/kubernetes $KUBE_VERSION"
  gomod="$(run_timed "kubernetes $KUBE_VERSION: download k8s.io/kubernetes" go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$KUBE_VERSION"
  minor="${KUBE_VERSION#v1.}"; staging="v0.${minor}"
  new_module "$dir" trainscaler.local/kube-build "k8s.io/kubernetes $KUBE_VERSION"
  {
    printf '\n// staging modules: k8s.io/kubernetes replaces them with ./staging paths, which only\n'
    printf '// work inside its own repo; point them at the published %s tags instead.\nreplace (\n' "$staging"
    sed -n '/^replace (/,/^)/p' "$gomod" | awk -v v="$staging" '$2=="=>" && $3 ~ /^\.\/staging\// {printf "\t%s => %s %s\n", $1, $1, v}'
    printf ')\n'
  } >>"$dir/go.mod"
  grep -q 'k8s.io/client-go => k8s.io/client-go' "$dir/go.mod" || die "staging replace list is empty (go.mod format changed?)"
  # Resolve the full build list + go.sum once (downloads every module the binaries need).
  (cd "$dir" && run_timed "kubernetes $KUBE_VERSION: resolve+download deps" \
    go list -mod=mod -deps k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler >/dev/null)
  touch "$dir/.ready"
}

build_kube() { # component
  local c="$1" dir="$SRC/kubernetes-$KUBE_VERSION" minor ld
  is_current "$c" && return 0
  prepare_kube
  minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  ld="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  log "building $c $KUBE_VERSION (cold builds take several minutes)"
  (cd "$dir" && run_timed "$c $KUBE_VERSION: compile+link" \
    go build -mod=mod -p "$JOBS" -ldflags "$ld" -o "$dir/$c.new" "k8s.io/kubernetes/cmd/$c")
  install_bin "$c" "$dir/$c.new"
}

build_etcd() {
  local dir="$SRC/etcd-$ETCD_VERSION"
  is_current etcd && return 0
  log "building etcd $ETCD_VERSION"
  new_module "$dir" trainscaler.local/etcd-build "go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  (cd "$dir" && run_timed "etcd $ETCD_VERSION: resolve+download deps" go list -mod=mod -deps go.etcd.io/etcd/server/v3 >/dev/null)
  (cd "$dir" && run_timed "etcd $ETCD_VERSION: compile+link" \
    go build -mod=mod -p "$JOBS" -ldflags "-s -w" -o "$dir/etcd.new" go.etcd.io/etcd/server/v3)
  install_bin etcd "$dir/etcd.new"
}

build_kwok() {
  local dir="$SRC/kwok-$KWOK_VERSION"
  is_current kwok && return 0
  log "building kwok $KWOK_VERSION"
  new_module "$dir" trainscaler.local/kwok-build "sigs.k8s.io/kwok $KWOK_VERSION"
  (cd "$dir" && run_timed "kwok $KWOK_VERSION: resolve+download deps" go list -mod=mod -deps sigs.k8s.io/kwok/cmd/kwok >/dev/null)
  (cd "$dir" && run_timed "kwok $KWOK_VERSION: compile+link" \
    go build -mod=mod -p "$JOBS" -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" -o "$dir/kwok.new" sigs.k8s.io/kwok/cmd/kwok)
  install_bin kwok "$dir/kwok.new"
}

# training-operator v1.9 has no flag to turn its webhook server off, and out of cluster two
# things in it are wrong for us.  Go refuses -overlay for files in GOMODCACHE, so build.sh
# copies the pinned module source out of the module cache into $SRC, patches two lines
# (each patch is verified to apply) and builds it as the main module, exactly like upstream
# builds it (its own go.mod/go.sum):
#  1. the webhook server listens on ":<port>" (all interfaces) -> honour $WEBHOOK_SERVER_HOST
#     (up.sh sets 127.0.0.1);
#  2. the cert rotator looks for the serving certs in a hard-coded k8s-webhook-server/ folder under the system temp dir
#     serving-certs while controller-runtime's webhook server uses $TMPDIR/... -> use
#     os.TempDir() in both, so up.sh can give each cluster its own TMPDIR.
build_training_operator() {
  local dir="$SRC/training-operator-$TRAINING_OPERATOR_VERSION" moddir
  is_current training-operator && return 0
  log "building training-operator $TRAINING_OPERATOR_VERSION"
  rm -rf "$dir"; mkdir -p "$dir"
  moddir="$(run_timed "training-operator $TRAINING_OPERATOR_VERSION: download module" \
    go mod download -json "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$moddir/go.mod" ]] || die "could not download github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION"
  cp -R "$moddir" "$dir/src"
  chmod -R u+w "$dir/src"
  local main="$dir/src/cmd/training-operator.v1/main.go" cert="$dir/src/pkg/cert/cert.go"
  sed -i 's|^\([[:space:]]*\)Port: webhookServerPort,|\1Host: os.Getenv("WEBHOOK_SERVER_HOST"), Port: webhookServerPort,|' "$main"
  sed -i 's|^\([[:space:]]*\)CertDir:[[:space:]]*certDir,|\1CertDir: os.TempDir() + "/k8s-webhook-server/serving-certs",|' "$cert"
  grep -q 'Host: os.Getenv("WEBHOOK_SERVER_HOST")' "$main" || die "training-operator main.go patch did not apply"
  grep -q 'CertDir: os.TempDir()' "$cert" || die "training-operator cert.go patch did not apply"
  (cd "$dir/src" && run_timed "training-operator $TRAINING_OPERATOR_VERSION: resolve+download deps" \
    go list -deps ./cmd/training-operator.v1 >/dev/null)
  (cd "$dir/src" && run_timed "training-operator $TRAINING_OPERATOR_VERSION: compile+link" \
    go build -p "$JOBS" -ldflags "-s -w" -o "$dir/training-operator.new" ./cmd/training-operator.v1)
  install_bin training-operator "$dir/training-operator.new"
}

# JobSet, Trainer and Kueue need no patch: each takes its webhook host/port/cert dir, metrics and
# probe addresses and feature gates from its own configuration file (up.sh writes them), so they
# are built unmodified from a wrapper module that requires the pinned module.  The wrapper's
# go.sum starts as the pinned hashes of the module itself plus upstream's own go.sum (read from
# the module cache), so the build list and every checksum are exactly upstream's.
controller_module() { # component -> sets MOD VER SUMS PKG LD, and UPGRADE ("" or "component ...")
  UPGRADE=""
  case "$1" in
    jobset) MOD=sigs.k8s.io/jobset VER="$JOBSET_VERSION" SUMS="$JOBSET_SUMS" PKG=sigs.k8s.io/jobset
      LD="-X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION" ;;
    trainer) MOD=github.com/kubeflow/trainer/v2 VER="$TRAINER_VERSION" SUMS="$TRAINER_SUMS"
      PKG=github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager LD="" ;;
    # kueue v0.18.1's go.mod requires a Trainer pre-release (v2.2.1-0.20260515134202-448c432a7073) that the
    # module proxy here refuses (403); the wrapper requires the released Trainer we run, so minimal version
    # selection builds Kueue's TrainJob integration against v2.3.0 (and whatever v2.3.0 itself requires).
    kueue) MOD=sigs.k8s.io/kueue VER="$KUEUE_VERSION" SUMS="$KUEUE_SUMS" PKG=sigs.k8s.io/kueue/cmd/kueue
      LD="-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" UPGRADE="trainer" ;;
    *) die "unknown controller $1" ;;
  esac
}

# Writes a wrapper module requiring the pinned controller module into DIR and downloads the module
# (verified against the pinned hashes, no checksum-database lookup); prints its source dir in the
# module cache.
controller_source() { # component dir
  local dir="$2" zipsum modsum moddir u requires=() sums=""
  for u in $(controller_module "$1"; echo "$UPGRADE") "$1"; do
    controller_module "$u"
    read -r zipsum modsum <<<"$SUMS"
    requires+=("$MOD $VER")
    sums+="$(printf '%s %s %s\n%s %s/go.mod %s' "$MOD" "$VER" "$zipsum" "$MOD" "$VER" "$modsum")"$'\n'
  done
  new_module "$dir" "trainscaler.local/$1-build" "${requires[@]}"
  printf '%s' "$sums" >"$dir/go.sum"
  moddir="$(cd "$dir" && go mod download -json "$MOD@$VER" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$moddir/go.sum" ]] || die "could not download $MOD@$VER (or its content differs from the pinned hash)"
  printf '%s\n' "$moddir"
}

# The source dir of a controller's module (downloads it if needed), through a private wrapper module so
# that concurrent callers (several clusters starting at once) never share one.
module_dir_of() { # component
  local tmp dir
  tmp="$(mktemp -d "$SRC/.module-dir.XXXXXX")"
  dir="$(controller_module "$1"; controller_source "$1" "$tmp")" || { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
  printf '%s\n' "$dir"
}

build_controller() { # component
  local c="$1" dir moddir
  is_current "$c" && return 0
  controller_module "$c"
  dir="$SRC/$c-$VER"
  log "building $c $VER"
  moddir="$(controller_source "$c" "$dir")"
  cat "$moddir/go.sum" >>"$dir/go.sum"
  local u; for u in $UPGRADE; do cat "$(module_dir_of "$u")/go.sum" >>"$dir/go.sum"; done
  (cd "$dir" && run_timed "$c $VER: resolve+download deps" go list -mod=mod -deps "$PKG" >/dev/null)
  (cd "$dir" && run_timed "$c $VER: compile+link" \
    go build -mod=mod -p "$JOBS" -ldflags "-s -w $LD" -o "$dir/$c.new" "$PKG")
  install_bin "$c" "$dir/$c.new"
}

build_one() {
  case "$1" in
    etcd) build_etcd ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) build_kube "$1" ;;
    kwok) build_kwok ;;
    training-operator) build_training_operator ;;
    jobset|trainer|kueue) build_controller "$1" ;;
    *) die "unknown component: $1" ;;
  esac
}

# up.sh reads CRDs, webhook configurations and runtimes from the controllers' module sources:
#   build.sh --module-dir jobset|trainer|kueue   prints that directory (downloading it if needed).
if [[ "${1:-}" == --module-dir ]]; then
  [[ $# -eq 2 ]] || die "usage: build.sh --module-dir jobset|trainer|kueue"
  module_dir_of "$2"
  exit 0
fi

ALL=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok training-operator jobset trainer kueue)
# kubectl is only built when none is on PATH (the scripts then use $BIN/kubectl).
command -v kubectl >/dev/null || ALL+=(kubectl)
want=("$@"); [[ ${#want[@]} -gt 0 ]] || want=("${ALL[@]}")

# Fast path without taking the lock.
all_current=1
for c in "${want[@]}"; do is_current "$c" || { all_current=0; break; }; done
if [[ $all_current == 1 ]]; then
  log "all binaries up to date in $BIN"
  exit 0
fi

# Serialise concurrent builders (e.g. a developer and CI on the same machine).
exec 9>"$CLUSTER_CACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $CLUSTER_CACHE/.build.lock; waiting"
  flock 9
fi

total0=$(now)
built=0
for c in "${want[@]}"; do
  if is_current "$c"; then continue; fi
  build_one "$c"
  built=1
done
if [[ $built == 1 ]]; then
  printf '%s %-40s %5ss\n' "$(date -u +%FT%TZ)" "TOTAL (${want[*]})" "$(( $(now) - total0 ))" >>"$TIMES"
  log "total: $(( $(now) - total0 ))s; timings in $TIMES"
fi
log "binaries in $BIN"
