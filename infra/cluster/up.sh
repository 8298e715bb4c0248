#!/usr/bin/env bash
# Starts a real (single-host, loopback-only) Kubernetes control plane for integration tests:
#   etcd -> kube-apiserver -> kube-controller-manager + kube-scheduler -> kwok (fake nodes
#   and pod lifecycle) -> Kubeflow training-operator -> JobSet -> Kubeflow Trainer -> Kueue (the
#   controllers run out of cluster, as processes on 127.0.0.1; see up-controllers.sh).
# Then applies the Kubeflow PyTorchJob/TFJob CRDs and infra/k8s/rbac.yaml, creates fake GPU
# nodes, installs the JobSet/Trainer/Kueue CRDs and webhooks from their Go module sources, a torch
# ClusterTrainingRuntime and Kueue queues, writes kubeconfigs, and prints the admin kubeconfig's
# path as the LAST stdout line.
# Everything else goes to stderr.  If the cluster is already up and healthy it only prints
# the path.
#
#   KUBECONFIG="$(infra/cluster/up.sh | tail -n1)"
#   service-account kubeconfig: "$(dirname "$KUBECONFIG")/kubeconfig-sa"
#
# See infra/cluster/README.md for env vars and ports.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v openssl >/dev/null || die "openssl is required"
command -v curl >/dev/null || die "curl is required"

T0=$(date +%s)
take_cluster_lock

# ---- already up? -----------------------------------------------------------------------
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok training-operator jobset trainer kueue)
# The host node needs root (network namespaces, mounts, hostnames) and the repo's node_modules (tsx).
host_node_possible() {
  [[ "$(id -u)" == 0 ]] && command -v ip >/dev/null && command -v nsenter >/dev/null && command -v unshare >/dev/null \
    && [[ -x "$NODE_BIN" && -d "$REPO_ROOT/node_modules/tsx" ]]
}
case "$HOST_NODE" in
  1) host_node_possible || die "TRAINSCALER_HOST_NODE=1 but the host node cannot run here (needs root, ip, nsenter, unshare, npm ci)" ;;
  auto) if host_node_possible; then HOST_NODE=1; else HOST_NODE=0; log "host node disabled (needs root, ip, nsenter, unshare and node_modules)"; fi ;;
  *) HOST_NODE=0 ;;
esac
[[ "$HOST_NODE" == 1 ]] && COMPONENTS+=(host-node-agent)

all_pids_alive() {
  [[ -f "$PIDFILE" ]] || return 1
  local name pid n=0
  while read -r name pid; do
    [[ -n "$name" ]] || continue
    pid_alive "$name" "$pid" || return 1
    n=$((n + 1))
  done <"$PIDFILE"
  [[ $n -eq ${#COMPONENTS[@]} ]]
}

apiserver_ready() {
  curl -fsS --max-time 5 --cacert "$RUN_DIR/pki/ca.crt" --cert "$RUN_DIR/pki/admin.crt" \
    --key "$RUN_DIR/pki/admin.key" "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1
}
operator_ready() { curl -fsS --max-time 5 "http://127.0.0.1:$OPERATOR_PROBE_PORT/readyz" >/dev/null 2>&1; }
probe_ready() { curl -fsS --max-time 5 "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; }
controllers_ready() { probe_ready "$JOBSET_PROBE_PORT" && probe_ready "$TRAINER_PROBE_PORT" && probe_ready "$KUEUE_PROBE_PORT"; }

if all_pids_alive && apiserver_ready && operator_ready && controllers_ready && [[ -s "$KUBECONFIG_ADMIN" && -s "$KUBECONFIG_SA" ]]; then
  log "cluster already up"
  echo "$KUBECONFIG_ADMIN"
  exit 0
fi
if [[ -f "$PIDFILE" ]]; then
  log "found a stale or unhealthy cluster in $RUN_DIR; tearing it down first"
  "$CLUSTER_SCRIPT_DIR/down.sh" >&2
fi

# ---- binaries ----------------------------------------------------------------------------
"$CLUSTER_SCRIPT_DIR/build.sh" >&2
[[ -x "$KUBECTL" ]] || die "no kubectl on PATH and $KUBECTL was not built"
[[ -x "$NODE_BIN" && -d "$REPO_ROOT/node_modules/js-yaml" ]] || die "run npm ci first (up.sh renders the controllers' installs with $NODE_BIN)"
# JobSet/Trainer/Kueue CRDs, webhook configurations and runtimes are read in place from their module sources.
JOBSET_SRC="$("$CLUSTER_SCRIPT_DIR/build.sh" --module-dir jobset)"
TRAINER_SRC="$("$CLUSTER_SCRIPT_DIR/build.sh" --module-dir trainer)"
KUEUE_SRC="$("$CLUSTER_SCRIPT_DIR/build.sh" --module-dir kueue)"

[[ -f "$CRD_DIR/kubeflow.org_pytorchjobs.yaml" && -f "$CRD_DIR/kubeflow.org_tfjobs.yaml" ]] \
  || die "Kubeflow CRDs not found in $CRD_DIR (expected ../shared/k8s-crds beside the repo; set TRAINSCALER_CRD_DIR)"

for p in "$APISERVER_PORT" "$ETCD_PORT" "$((ETCD_PORT + 1))" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT" \
         "$OPERATOR_METRICS_PORT" "$OPERATOR_PROBE_PORT" "$OPERATOR_WEBHOOK_PORT" \
         "$JOBSET_METRICS_PORT" "$JOBSET_PROBE_PORT" "$JOBSET_WEBHOOK_PORT" \
         "$TRAINER_METRICS_PORT" "$TRAINER_PROBE_PORT" "$TRAINER_WEBHOOK_PORT" \
         "$KUEUE_METRICS_PORT" "$KUEUE_PROBE_PORT" "$KUEUE_WEBHOOK_PORT"; do
  port_in_use "$p" && die "port $p is already in use (another cluster? set TRAINSCALER_*_PORT, see README)"
done

mkdir -p "$RUN_DIR"
chmod 700 "$RUN_DIR"
touch "$RUN_DIR/.trainscaler-cluster-run"   # down.sh only deletes directories carrying this marker
rm -rf "$RUN_DIR/etcd" "$RUN_DIR/pki" "$RUN_DIR/operator-tmp" "$RUN_DIR/controllers"   # always start from a clean slate
mkdir -p "$LOG_DIR" "$RUN_DIR/pki" "$RUN_DIR/etcd" "$RUN_DIR/operator-tmp" "$RUN_DIR/controllers"
: >"$PIDFILE"

# If anything below fails, stop what we started (leave logs for debugging).
started_ok=0
cleanup_on_error() {
  if [[ $started_ok != 1 ]]; then
    log "start-up failed; logs are in $LOG_DIR; stopping what was started"
    tail -n 30 "$LOG_DIR"/*.log >&2 2>/dev/null || true
    TRAINSCALER_KEEP_LOGS=1 "$CLUSTER_SCRIPT_DIR/down.sh" >&2 || true
  fi
}
trap cleanup_on_error EXIT

# ---- PKI ---------------------------------------------------------------------------------
PKI="$RUN_DIR/pki"
gen_ca() { # name CN
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.crt" -days 3650 \
    -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}
gen_cert() { # name subject ext(extensions for x509 -extfile) [ca-name]
  local name="$1" subj="$2" ext="$3" ca="${4:-ca}"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -out "$PKI/$name.csr" \
    -subj "$subj" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days 3650 -out "$PKI/$name.crt" -extfile <(printf '%s\n' "$ext") 2>/dev/null
  rm -f "$PKI/$name.csr"
}
log "generating certificates in $PKI"
gen_ca ca trainscaler-test-ca
gen_ca front-proxy-ca trainscaler-test-front-proxy-ca
CLIENT_EXT=$'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
gen_cert apiserver "/CN=kube-apiserver" $'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:'"$SERVICE_FIRST_IP"',DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local'
gen_cert admin "/O=system:masters/CN=trainscaler-admin" "$CLIENT_EXT"
gen_cert front-proxy-client "/CN=front-proxy-client" "$CLIENT_EXT" front-proxy-ca
gen_cert kube-controller-manager "/CN=system:kube-controller-manager" "$CLIENT_EXT"
gen_cert kube-scheduler "/CN=system:kube-scheduler" "$CLIENT_EXT"
# kwok plays the fake nodes' kubelets and the training-operator runs as cluster-admin out of cluster.
gen_cert kwok "/O=system:masters/CN=kwok" "$CLIENT_EXT"
# The host node agent plays a kubelet as cluster-admin too (like kwok; not system:node:*, see README).
gen_cert host-node-agent "/O=system:masters/CN=host-node-agent" "$CLIENT_EXT"
gen_cert training-operator "/O=system:masters/CN=training-operator" "$CLIENT_EXT"
# ServiceAccount token signing key pair.
openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

# training-operator webhook certs, in the format its cert rotator (open-policy-agent
# cert-controller) validates and then keeps: PKCS#1 CA key, CA valid for DNS name
# "training-operator-ca", serving cert for training-operator.kubeflow.svc (+ 127.0.0.1 so the
# API server can call it by URL).
WH="$PKI/webhook"
mkdir -p "$WH"
openssl genrsa -traditional -out "$WH/ca.key" 2048 2>/dev/null
openssl req -x509 -new -key "$WH/ca.key" -out "$WH/ca.crt" -days 3650 -subj "/O=training-operator/CN=training-operator-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment" \
  -addext "subjectAltName=DNS:training-operator-ca" 2>/dev/null
openssl genrsa -traditional -out "$WH/tls.key" 2048 2>/dev/null
openssl req -new -key "$WH/tls.key" -out "$WH/tls.csr" -subj "/CN=training-operator.kubeflow.svc" 2>/dev/null
openssl x509 -req -in "$WH/tls.csr" -CA "$WH/ca.crt" -CAkey "$WH/ca.key" -set_serial "0x$(openssl rand -hex 16)" -days 3650 \
  -out "$WH/tls.crt" -extfile <(printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=serverAuth' 'subjectAltName=DNS:training-operator.kubeflow.svc,IP:127.0.0.1') 2>/dev/null
rm -f "$WH/tls.csr"
CERTDIR="$RUN_DIR/operator-tmp/k8s-webhook-server/serving-certs"
mkdir -p "$CERTDIR"
cp "$WH/tls.crt" "$WH/tls.key" "$WH/ca.crt" "$CERTDIR/"
chmod 600 "$PKI"/*.key "$WH"/*.key

# JobSet, Trainer and Kueue webhook certs: one CA and one serving cert (for their in-cluster Service
# names and for 127.0.0.1, which the API server calls).  Kueue's cert rotator (open-policy-agent
# cert-controller) adopts them from its Secret because the CA is valid for "kueue-ca", the serving cert
# for kueue-webhook-service.kueue-system.svc and the keys are PKCS#1.
CWH="$PKI/controllers-webhook"
mkdir -p "$CWH"
openssl genrsa -traditional -out "$CWH/ca.key" 2048 2>/dev/null
openssl req -x509 -new -key "$CWH/ca.key" -out "$CWH/ca.crt" -days 3650 -subj "/O=kueue/CN=kueue-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment" \
  -addext "subjectAltName=DNS:kueue-ca" 2>/dev/null
openssl genrsa -traditional -out "$CWH/tls.key" 2048 2>/dev/null
openssl req -new -key "$CWH/tls.key" -out "$CWH/tls.csr" -subj "/CN=kueue-webhook-service.kueue-system.svc" 2>/dev/null
openssl x509 -req -in "$CWH/tls.csr" -CA "$CWH/ca.crt" -CAkey "$CWH/ca.key" -set_serial "0x$(openssl rand -hex 16)" -days 3650 \
  -out "$CWH/tls.crt" -extfile <(printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=serverAuth' 'subjectAltName=DNS:kueue-webhook-service.kueue-system.svc,DNS:jobset-webhook-service.jobset-system.svc,DNS:kubeflow-trainer-controller-manager.kubeflow-system.svc,IP:127.0.0.1') 2>/dev/null
rm -f "$CWH/tls.csr"
chmod 600 "$CWH"/*.key
for c in jobset trainer kueue; do
  mkdir -p "$RUN_DIR/controllers/$c/certs" "$RUN_DIR/controllers/$c/tempdir"
  cp "$CWH/tls.crt" "$CWH/tls.key" "$CWH/ca.crt" "$RUN_DIR/controllers/$c/certs/"
  chmod 600 "$RUN_DIR/controllers/$c/certs/tls.key"
  # Like the training-operator, the controllers run as cluster-admin out of cluster.
  gen_cert "$c" "/O=system:masters/CN=$c" "$CLIENT_EXT"
done

# ---- kubeconfigs ---------------------------------------------------------------------------
write_kubeconfig() { # file user cert key
  local f="$1"
  rm -f "$f"
  "$KUBECTL" config --kubeconfig "$f" set-cluster trainscaler --server "https://127.0.0.1:$APISERVER_PORT" \
    --certificate-authority "$PKI/ca.crt" --embed-certs=true >/dev/null
  "$KUBECTL" config --kubeconfig "$f" set-credentials "$2" --client-certificate "$3" --client-key "$4" --embed-certs=true >/dev/null
  "$KUBECTL" config --kubeconfig "$f" set-context trainscaler --cluster trainscaler --user "$2" >/dev/null
  "$KUBECTL" config --kubeconfig "$f" use-context trainscaler >/dev/null
  chmod 600 "$f"
}
rm -f "$KUBECONFIG_ADMIN" "$KUBECONFIG_SA"
for c in kube-controller-manager kube-scheduler kwok training-operator host-node-agent jobset trainer kueue; do
  write_kubeconfig "$RUN_DIR/$c.kubeconfig" "$c" "$PKI/$c.crt" "$PKI/$c.key"
done
write_kubeconfig "$KUBECONFIG_ADMIN.tmp" trainscaler-admin "$PKI/admin.crt" "$PKI/admin.key"

# ---- processes -----------------------------------------------------------------------------
start() { # name args...   (own session, so it outlives the calling shell / npm)
  local name="$1"; shift
  # 8>&-: don't let the daemon inherit the up/down lock (it would hold it forever).
  setsid "$BIN/$name" "$@" >"$LOG_DIR/$name.log" 2>&1 </dev/null 8>&- &
  local pid=$!
  echo "$name $pid" >>"$PIDFILE"
  log "started $name (pid $pid)"
}

start etcd \
  --name trainscaler --data-dir "$RUN_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
  --initial-cluster "trainscaler=http://127.0.0.1:$((ETCD_PORT + 1))" --initial-cluster-state new \
  --unsafe-no-fsync --log-level warn
wait_for "etcd" 60 curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" || die "etcd did not become healthy"

start kube-apiserver \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" \
  --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
  --endpoint-reconciler-type none \
  --authorization-mode Node,RBAC \
  --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds,NodeRestriction,Priority,DefaultStorageClass,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --allow-privileged=true --profiling=false --event-ttl 1h
wait_for "kube-apiserver /readyz" 120 apiserver_ready || die "kube-apiserver did not become ready"
mv "$KUBECONFIG_ADMIN.tmp" "$KUBECONFIG_ADMIN"
log "kube-apiserver ready on https://127.0.0.1:$APISERVER_PORT"

start kube-controller-manager \
  --kubeconfig "$RUN_DIR/kube-controller-manager.kubeconfig" \
  --authentication-kubeconfig "$RUN_DIR/kube-controller-manager.kubeconfig" \
  --authorization-kubeconfig "$RUN_DIR/kube-controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --use-service-account-credentials=true --leader-elect=false \
  --service-cluster-ip-range "$SERVICE_CIDR" --controllers '*'
start kube-scheduler \
  --kubeconfig "$RUN_DIR/kube-scheduler.kubeconfig" \
  --authentication-kubeconfig "$RUN_DIR/kube-scheduler.kubeconfig" \
  --authorization-kubeconfig "$RUN_DIR/kube-scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false

# CRDs (server-side apply: they are larger than the client-side last-applied annotation limit),
# RBAC, and the training-operator's namespace + webhook cert secret.
log "applying Kubeflow CRDs from $CRD_DIR and infra/k8s/rbac.yaml"
kc apply --server-side --force-conflicts -f "$CRD_DIR/kubeflow.org_pytorchjobs.yaml" -f "$CRD_DIR/kubeflow.org_tfjobs.yaml" >&2
kc apply -f "$REPO_ROOT/infra/k8s/rbac.yaml" >&2
kc create namespace kubeflow >&2
kc -n kubeflow create secret generic training-operator-webhook-cert \
  --from-file=ca.crt="$WH/ca.crt" --from-file=ca.key="$WH/ca.key" \
  --from-file=tls.crt="$WH/tls.crt" --from-file=tls.key="$WH/tls.key" >&2
kc wait --for condition=established --timeout 60s crd/pytorchjobs.kubeflow.org crd/tfjobs.kubeflow.org >&2
# trainscaler's own CRD (per-job state, status written only by its ServiceAccount) and who may write it.
log "applying the ScaledTrainingJob CRD and infra/k8s/scaledtrainingjobs-rbac.yaml"
kc apply --server-side --force-conflicts -f "$REPO_ROOT/infra/k8s/crds/trainscaler.io_scaledtrainingjobs.yaml" >&2
kc apply -f "$REPO_ROOT/infra/k8s/scaledtrainingjobs-rbac.yaml" >&2
kc wait --for condition=established --timeout 60s crd/scaledtrainingjobs.trainscaler.io >&2
# The tenants' policies (TrainingAutoscaler): tenants write the spec, only trainscaler the status.
log "applying the TrainingAutoscaler CRD and infra/k8s/trainingautoscalers-rbac.yaml"
kc apply --server-side --force-conflicts -f "$REPO_ROOT/infra/k8s/crds/trainscaler.io_trainingautoscalers.yaml" >&2
kc apply -f "$REPO_ROOT/infra/k8s/trainingautoscalers-rbac.yaml" >&2
kc wait --for condition=established --timeout 60s crd/trainingautoscalers.trainscaler.io >&2
# Established is not yet served: the API server answers 429 "storage is (re)initializing" for a while after a
# CRD is created. Tests start as soon as this script returns, so wait until both lists are answered.
wait_for "ScaledTrainingJobs and TrainingAutoscalers served" 60 \
  kc get scaledtrainingjobs.trainscaler.io,trainingautoscalers.trainscaler.io --all-namespaces \
  || die "the trainscaler.io CRDs are established but not served"

# kwok manages the fake nodes (label type=kwok) and leaves the host node to the host node agent.
start kwok \
  --kubeconfig "$RUN_DIR/kwok.kubeconfig" \
  --config "$CLUSTER_SCRIPT_DIR/kwok/stages.yaml" \
  --manage-all-nodes=false --manage-nodes-with-label-selector=type=kwok --cidr "$POD_CIDR" \
  --server-address "127.0.0.1:$KWOK_PORT" --node-lease-duration-seconds 40

wait_for "kube-controller-manager /healthz" 90 curl -fsSk --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" || die "kube-controller-manager not healthy"
wait_for "kube-scheduler /healthz" 90 curl -fsSk --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/healthz" || die "kube-scheduler not healthy"
wait_for "kwok /healthz" 60 curl -fsS --max-time 2 "http://127.0.0.1:$KWOK_PORT/healthz" || die "kwok not healthy"

# ---- fake GPU nodes --------------------------------------------------------------------------
log "creating $KWOK_NODES kwok nodes ($KWOK_NODE_GPUS x nvidia.com/gpu, $KWOK_NODE_CPU cpu, $KWOK_NODE_MEMORY each)"
nodes_yaml() {
  local i
  for ((i = 0; i < KWOK_NODES; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: kwok-node-$i
    node.kubernetes.io/instance-type: kwok-gpu-${KWOK_NODE_GPUS}x
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.count: "$KWOK_NODE_GPUS"
    topology.kubernetes.io/zone: kwok-zone-$((i % 2))
spec: {}
status:
  allocatable:
    cpu: "$KWOK_NODE_CPU"
    memory: $KWOK_NODE_MEMORY
    nvidia.com/gpu: "$KWOK_NODE_GPUS"
    pods: "110"
  capacity:
    cpu: "$KWOK_NODE_CPU"
    memory: $KWOK_NODE_MEMORY
    nvidia.com/gpu: "$KWOK_NODE_GPUS"
    pods: "110"
EOF
  done
}
nodes_yaml | kc create -f - >&2
wait_for "kwok nodes Ready" 90 kc wait --for condition=Ready --timeout 5s node -l type=kwok || die "kwok nodes did not become Ready"

# ---- host node: pods that really run --------------------------------------------------------
if [[ "$HOST_NODE" == 1 ]]; then
  remove_host_node_network
  mkdir -p "$HOST_NODE_STATE_DIR"
  (
    cd "$REPO_ROOT"
    HOST_NODE_AGENT_KUBECONFIG="$RUN_DIR/host-node-agent.kubeconfig" HOST_NODE_NAME="$HOST_NODE_NAME" \
    HOST_NODE_TAG="$HOST_NODE_TAG" HOST_NODE_CIDR="$HOST_NODE_CIDR" HOST_NODE_STATE_DIR="$HOST_NODE_STATE_DIR" \
    HOST_NODE_WORKDIR="$REPO_ROOT" \
    setsid "$NODE_BIN" --import tsx "$CLUSTER_SCRIPT_DIR/host-node-agent/main.ts" \
      >"$LOG_DIR/host-node-agent.log" 2>&1 </dev/null 8>&- &
    echo "host-node-agent $!" >>"$PIDFILE"
  )
  log "started host-node-agent ($HOST_NODE_NAME, pods in $HOST_NODE_CIDR)"
  wait_for "host node $HOST_NODE_NAME Ready" 60 kc wait --for condition=Ready --timeout 5s "node/$HOST_NODE_NAME" \
    || die "host node $HOST_NODE_NAME did not become Ready"
  wait_for "host node lease" 30 kc -n kube-node-lease get lease "$HOST_NODE_NAME" || die "host node agent keeps no lease"
  all_pids_alive_so_far() { local name pid; while read -r name pid; do pid_alive "$name" "$pid" || return 1; done <"$PIDFILE"; }
  all_pids_alive_so_far || die "host node agent exited (see $LOG_DIR/host-node-agent.log)"
fi

# ---- training-operator ------------------------------------------------------------------------
if [[ "$OPERATOR_WEBHOOK" == 1 ]]; then
  CA_B64="$(base64 -w0 <"$WH/ca.crt")"
  wh_entry() { # kind plural
    cat <<EOF
- name: validator.$1.training-operator.kubeflow.org
  admissionReviewVersions: ["v1"]
  clientConfig:
    url: https://127.0.0.1:$OPERATOR_WEBHOOK_PORT/validate-kubeflow-org-v1-$1
    caBundle: $CA_B64
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 10
  rules:
  - apiGroups: ["kubeflow.org"]
    apiVersions: ["v1"]
    operations: ["CREATE", "UPDATE"]
    resources: ["$2"]
EOF
  }
  {
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: validator.training-operator.kubeflow.org\nwebhooks:\n'
    wh_entry pytorchjob pytorchjobs
    wh_entry tfjob tfjobs
  } | kc apply -f - >&2
fi

TMPDIR="$RUN_DIR/operator-tmp" MY_POD_NAMESPACE=kubeflow WEBHOOK_SERVER_HOST=127.0.0.1 \
start training-operator \
  --kubeconfig "$RUN_DIR/training-operator.kubeconfig" \
  --enable-scheme pytorchjob --enable-scheme tfjob \
  --metrics-bind-address "127.0.0.1:$OPERATOR_METRICS_PORT" \
  --health-probe-bind-address "127.0.0.1:$OPERATOR_PROBE_PORT" \
  --webhook-server-port "$OPERATOR_WEBHOOK_PORT" \
  --leader-elect=false --zap-devel=false --zap-log-level info
wait_for "training-operator /readyz" 120 operator_ready || die "training-operator did not become ready"

# ---- JobSet, Kubeflow Trainer, Kueue -----------------------------------------------------------
# shellcheck source=up-controllers.sh
source "$CLUSTER_SCRIPT_DIR/up-controllers.sh"

# ---- ServiceAccount kubeconfig for the autoscaler ------------------------------------------
wait_for "ServiceAccount trainscaler-system/trainscaler" 60 kc -n trainscaler-system get serviceaccount trainscaler \
  || die "ServiceAccount trainscaler-system/trainscaler missing"
SA_TOKEN="$(kc -n trainscaler-system create token trainscaler --duration 8760h)"
rm -f "$KUBECONFIG_SA"
"$KUBECTL" config --kubeconfig "$KUBECONFIG_SA" set-cluster trainscaler --server "https://127.0.0.1:$APISERVER_PORT" \
  --certificate-authority "$PKI/ca.crt" --embed-certs=true >/dev/null
"$KUBECTL" config --kubeconfig "$KUBECONFIG_SA" set-credentials trainscaler --token "$SA_TOKEN" >/dev/null
"$KUBECTL" config --kubeconfig "$KUBECONFIG_SA" set-context trainscaler --cluster trainscaler --user trainscaler --namespace trainscaler-system >/dev/null
"$KUBECTL" config --kubeconfig "$KUBECONFIG_SA" use-context trainscaler >/dev/null
chmod 600 "$KUBECONFIG_SA"
"$KUBECTL" --kubeconfig "$KUBECONFIG_SA" auth can-i list pytorchjobs.kubeflow.org --all-namespaces >/dev/null \
  || die "ServiceAccount kubeconfig cannot list pytorchjobs (RBAC not applied?)"

# Convenience env file for shells/tests: source "$(dirname "$KUBECONFIG")/cluster.env".
cat >"$RUN_DIR/cluster.env" <<EOF
export KUBECONFIG=$KUBECONFIG_ADMIN
export TRAINSCALER_KUBECONFIG=$KUBECONFIG_ADMIN
export TRAINSCALER_SA_KUBECONFIG=$KUBECONFIG_SA
export TRAINSCALER_APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
export TRAINSCALER_KUEUE_CLUSTER_QUEUE=$KUEUE_CLUSTER_QUEUE
export TRAINSCALER_KUEUE_LOCAL_QUEUE=$KUEUE_LOCAL_QUEUE
export TRAINSCALER_KUEUE_FLAVOR=$KUEUE_FLAVOR
EOF

started_ok=1
trap - EXIT
log "cluster up in $(( $(date +%s) - T0 ))s: admin kubeconfig $KUBECONFIG_ADMIN, service-account kubeconfig $KUBECONFIG_SA, logs $LOG_DIR"
echo "$KUBECONFIG_ADMIN"
