# JobSet, Kubeflow Trainer and Kueue for infra/cluster/up.sh (sourced by it after the training-operator is
# ready; uses its PKI, start, kc, wait_for).  Each install is upstream's own kustomization rendered from
# the Go module cache (read in place, never copied), reduced to its CRDs and webhook configurations, with
# every webhook pointed at the controller process on 127.0.0.1 (render-install/).
# shellcheck shell=bash

render_install() { # kustomize-dir webhook-port [kinds]
  "$KUBECTL" kustomize "$1" \
    | "$NODE_BIN" --import tsx "$CLUSTER_SCRIPT_DIR/render-install/main.ts" --port "$2" --ca "$CWH/ca.crt" ${3:+--keep-kinds "$3"}
}

# install_controller NAME CRD-KUSTOMIZE-DIR WEBHOOK-KUSTOMIZE-DIR WEBHOOK-PORT CRD-GROUP: CRDs first
# (established), webhooks after, so nothing is admitted through a webhook whose CRD is not served yet.
install_controller() {
  local name="$1" crd_dir="$2" wh_dir="$3" port="$4" group="$5" crds
  log "installing $name CRDs and webhook configurations (rendered from $crd_dir, $wh_dir)"
  render_install "$crd_dir" "$port" CustomResourceDefinition | kc apply --server-side --force-conflicts -f - >&2
  crds="$(kc get crd -o name | grep -F ".$group" || true)"
  [[ -n "$crds" ]] || die "no $group CRDs after installing $name"
  # shellcheck disable=SC2086
  kc wait --for condition=established --timeout 60s $crds >&2
  render_install "$wh_dir" "$port" MutatingWebhookConfiguration,ValidatingWebhookConfiguration \
    | kc apply --server-side --force-conflicts -f - >&2
}

# ---- JobSet (ElasticJobSet gate on: parallelism/completions of a replicated job may change) ----------
CD="$RUN_DIR/controllers"
cat >"$CD/jobset/config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
webhook: {host: 127.0.0.1, port: $JOBSET_WEBHOOK_PORT, certDir: $CD/jobset/certs}
metrics: {bindAddress: "127.0.0.1:$JOBSET_METRICS_PORT", certDir: $CD/jobset/certs}
health: {healthProbeBindAddress: "127.0.0.1:$JOBSET_PROBE_PORT"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
featureGates: {ElasticJobSet: true}
EOF
install_controller jobset "$JOBSET_SRC/config/default" "$JOBSET_SRC/config/default" "$JOBSET_WEBHOOK_PORT" jobset.x-k8s.io
TMPDIR="$CD/jobset/tempdir" \
start jobset --kubeconfig "$RUN_DIR/jobset.kubeconfig" --config "$CD/jobset/config.yaml" \
  --metrics-bind-address "127.0.0.1:$JOBSET_METRICS_PORT" --health-probe-bind-address "127.0.0.1:$JOBSET_PROBE_PORT" \
  --zap-devel=false --zap-log-level info
wait_for "jobset /readyz" 180 probe_ready "$JOBSET_PROBE_PORT" || die "jobset did not become ready"

# ---- Kubeflow Trainer (CRDs + webhooks of its base install; it runs on the JobSet above) ---------------
# controller-runtime's webhook server reads its certs from $TMPDIR/k8s-webhook-server/serving-certs.
cat >"$CD/trainer/config.yaml" <<EOF
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
webhook: {host: 127.0.0.1, port: $TRAINER_WEBHOOK_PORT}
metrics: {bindAddress: "127.0.0.1:$TRAINER_METRICS_PORT", secureServing: false}
health: {healthProbeBindAddress: "127.0.0.1:$TRAINER_PROBE_PORT", readinessEndpointName: readyz, livenessEndpointName: healthz}
leaderElection: {leaderElect: false}
certManagement: {enable: false}
EOF
mkdir -p "$CD/trainer/tempdir/k8s-webhook-server"
ln -sfn "$CD/trainer/certs" "$CD/trainer/tempdir/k8s-webhook-server/serving-certs"
kc create namespace kubeflow-system >&2
install_controller trainer "$TRAINER_SRC/manifests/base/crds" "$TRAINER_SRC/manifests/base/webhook" "$TRAINER_WEBHOOK_PORT" \
  trainer.kubeflow.org
TMPDIR="$CD/trainer/tempdir" \
start trainer --kubeconfig "$RUN_DIR/trainer.kubeconfig" --config "$CD/trainer/config.yaml" \
  --zap-devel=false --zap-log-level info
wait_for "trainer /readyz" 180 probe_ready "$TRAINER_PROBE_PORT" || die "trainer did not become ready"
# The torch runtime exactly as upstream ships it (admitted through the Trainer's validating webhook).
kc apply --server-side -f "$TRAINER_SRC/manifests/base/runtimes/torch_distributed.yaml" >&2

# ---- Kueue (batch/Job, JobSet, TrainJob integrations; elastic jobs via workload slices) --------------
# Internal cert management stays on (with it off, Kueue insists on metrics certs under /etc/kueue): its
# rotator adopts the certs up.sh put in its Secret.  The on-demand visibility API (an aggregated API
# server) is off: nothing here reads it.
kc create namespace kueue-system >&2
kc -n kueue-system create secret generic kueue-webhook-server-cert \
  --from-file=ca.crt="$CWH/ca.crt" --from-file=ca.key="$CWH/ca.key" \
  --from-file=tls.crt="$CWH/tls.crt" --from-file=tls.key="$CWH/tls.key" >&2
cat >"$CD/kueue/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
webhook: {host: 127.0.0.1, port: $KUEUE_WEBHOOK_PORT, certDir: $CD/kueue/certs}
metrics: {bindAddress: "127.0.0.1:$KUEUE_METRICS_PORT"}
health: {healthProbeBindAddress: "127.0.0.1:$KUEUE_PROBE_PORT"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: true, webhookServiceName: kueue-webhook-service, webhookSecretName: kueue-webhook-server-cert}
clientConnection: {qps: 50, burst: 100}
manageJobsWithoutQueueName: false
integrations:
  frameworks: [batch/job, jobset.x-k8s.io/jobset, trainer.kubeflow.org/trainjob]
featureGates: {ElasticJobsViaWorkloadSlices: true, VisibilityOnDemand: false}
EOF
install_controller kueue "$KUEUE_SRC/config/default" "$KUEUE_SRC/config/default" "$KUEUE_WEBHOOK_PORT" kueue.x-k8s.io
TMPDIR="$CD/kueue/tempdir" POD_NAMESPACE=kueue-system \
start kueue --kubeconfig "$RUN_DIR/kueue.kubeconfig" --config "$CD/kueue/config.yaml" \
  --zap-devel=false --zap-log-level info
wait_for "kueue /readyz" 180 probe_ready "$KUEUE_PROBE_PORT" || die "kueue did not become ready"

log "creating Kueue ResourceFlavor $KUEUE_FLAVOR, ClusterQueue $KUEUE_CLUSTER_QUEUE (nvidia.com/gpu: $KUEUE_GPU_QUOTA) and LocalQueue $KUEUE_LOCAL_QUEUE in: $KUEUE_QUEUE_NAMESPACES"
{
  cat <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $KUEUE_FLAVOR}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $KUEUE_CLUSTER_QUEUE}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: $KUEUE_FLAVOR
      resources:
      - {name: cpu, nominalQuota: "$KUEUE_CPU_QUOTA"}
      - {name: memory, nominalQuota: "$KUEUE_MEMORY_QUOTA"}
      - {name: nvidia.com/gpu, nominalQuota: "$KUEUE_GPU_QUOTA"}
EOF
  for ns in $KUEUE_QUEUE_NAMESPACES; do
    cat <<EOF
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $KUEUE_LOCAL_QUEUE, namespace: $ns}
spec: {clusterQueue: $KUEUE_CLUSTER_QUEUE}
EOF
  done
} | kc apply -f - >&2
wait_for "ClusterQueue $KUEUE_CLUSTER_QUEUE Active" 60 kc wait --for condition=Active --timeout 5s "clusterqueue/$KUEUE_CLUSTER_QUEUE" \
  || die "ClusterQueue $KUEUE_CLUSTER_QUEUE did not become Active"
