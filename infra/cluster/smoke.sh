#!/usr/bin/env bash
# Smoke check of the local test cluster (run infra/cluster/up.sh first).  Shows what the
# integration tests can rely on; prints PASS/FAIL per check and "N passed, M failed".
#
# Checks: API server + kwok nodes; ServiceAccount RBAC; a PyTorchJob (1 Master + 2 Workers,
# elasticPolicy 1..4) gets Running pods on kwok nodes; scaling Worker.replicas 2 -> 3 (as the
# trainscaler SA) adds a third worker pod; the kwok OOM stage gives OOMKilled/137 (restart
# in place under OnFailure, phase Failed under Never); eviction through the Eviction API
# (as the SA) removes a pod and the training-operator re-creates it; a TFJob gets a pod;
# the training-operator's validating webhook rejects an invalid PyTorchJob; when up.sh started the host
# node, a pod there really runs; JobSet/Trainer/Kueue: controllers ready and API groups served, a JobSet
# runs its Job's pods and (ElasticJobSet) grows parallelism=completions 2 -> 3, a TrainJob on the torch
# runtime creates a JobSet whose pods run, numNodes is immutable, webhooks reject invalid JobSets and TrainJobs, Kueue admits a Job in the LocalQueue and keeps one over the GPU quota suspended.
#
# Env: SMOKE_KEEP=1 keeps the smoke namespace; SMOKE_TIMEOUT (s, default 90) per wait.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ -s "$KUBECONFIG_ADMIN" ]] || die "no cluster: $KUBECONFIG_ADMIN missing (run infra/cluster/up.sh)"
TIMEOUT="${SMOKE_TIMEOUT:-90}"
NS="smoke-$(date +%s)"
JOB=smoke-elastic
ksa() { "$KUBECTL" --kubeconfig "$KUBECONFIG_SA" "$@"; }

passed=0; failed=0
pass() { printf 'PASS: %s\n' "$1"; passed=$((passed + 1)); }
fail() { printf 'FAIL: %s%s\n' "$1" "${2:+ ($2)}"; failed=$((failed + 1)); }
check() { # name cmd...
  local name="$1"; shift
  if "$@" >/dev/null; then pass "$name"; else fail "$name"; fi
}
# poll TIMEOUT cmd...: retry cmd until it succeeds.
poll() { local t="$1"; shift; wait_for "$*" "$t" "$@"; }

cleanup() {
  if [[ "${SMOKE_KEEP:-0}" != 1 ]]; then kc delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

pods_of() { # replica-type(lowercase) -> "name phase node" lines
  kc -n "$NS" get pods -l "training.kubeflow.org/job-name=$JOB,training.kubeflow.org/replica-type=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.spec.nodeName}{"\n"}{end}'
}
n_running_on_kwok() { # replica-type expected-count
  local n
  n=$(pods_of "$1" | awk '$2=="Running" && $3 ~ /^kwok-node-/' | wc -l)
  [[ "$n" -eq "$2" ]]
}

# ---- 1. control plane ---------------------------------------------------------------------
check "kube-apiserver /readyz" kc get --raw /readyz
gpu_nodes() {
  local n
  n=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.allocatable.nvidia\.com/gpu} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
      | awk -v g="$KWOK_NODE_GPUS" '$1==g && $2=="True"' | wc -l)
  [[ "$n" -ge 1 && "$n" -eq "$KWOK_NODES" ]]
}
check "$KWOK_NODES kwok nodes Ready with $KWOK_NODE_GPUS nvidia.com/gpu each" gpu_nodes

# ---- 2. ServiceAccount RBAC ------------------------------------------------------------------
sa_can() { [[ "$(ksa auth can-i "$@" 2>/dev/null)" == yes ]]; }
sa_cannot() { ! sa_can "$@"; }
check "SA trainscaler can patch pytorchjobs" sa_can patch pytorchjobs.kubeflow.org -A
check "SA trainscaler can create pods/eviction" sa_can create pods --subresource=eviction -A
check "SA trainscaler cannot delete pods" sa_cannot delete pods -A
check "SA trainscaler cannot update pytorchjobs/status" sa_cannot update pytorchjobs.kubeflow.org --subresource=status -A

kc create namespace "$NS" >/dev/null

# ---- 3. elastic PyTorchJob -------------------------------------------------------------------
replica() { # type replicas
  cat <<EOF
      $1:
        replicas: $2
        restartPolicy: OnFailure
        template:
          metadata:
            labels:
              app: smoke
          spec:
            containers:
            - name: pytorch
              image: registry.invalid/smoke/pytorch:latest
              resources:
                limits:
                  nvidia.com/gpu: "1"
                  cpu: "2"
                  memory: 8Gi
EOF
}
{
  cat <<EOF
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: $JOB
  namespace: $NS
spec:
  elasticPolicy:
    minReplicas: 1
    maxReplicas: 4
    rdzvBackend: c10d
  pytorchReplicaSpecs:
EOF
  replica Master 1
  replica Worker 2
} | kc apply -f - >/dev/null
if poll "$TIMEOUT" n_running_on_kwok master 1 && poll "$TIMEOUT" n_running_on_kwok worker 2; then
  pass "PyTorchJob 1 Master + 2 Workers (elastic 1..4): pods Running on kwok nodes"
else
  fail "PyTorchJob 1 Master + 2 Workers (elastic 1..4): pods Running on kwok nodes" "$(pods_of master; pods_of worker)"
fi
pods_of master | sed 's/^/  /'; pods_of worker | sed 's/^/  /'

# ---- 4. scale Worker 2 -> 3 as the trainscaler SA -------------------------------------------
if ksa -n "$NS" patch pytorchjob "$JOB" --type merge -p '{"spec":{"pytorchReplicaSpecs":{"Worker":{"replicas":3}}}}' >/dev/null \
   && poll "$TIMEOUT" n_running_on_kwok worker 3; then
  pass "SA patches .spec.pytorchReplicaSpecs.Worker.replicas=3 -> third worker pod Running"
else
  fail "SA patches .spec.pytorchReplicaSpecs.Worker.replicas=3 -> third worker pod Running" "$(pods_of worker)"
fi
pods_of worker | sed 's/^/  /'

# ---- 5. OOMKilled via the kwok stage -----------------------------------------------------------
OOM_POD="$JOB-worker-1"
oom_status() { kc -n "$NS" get pod "$1" -o jsonpath='{range .status.containerStatuses[*]}{.name} restarts={.restartCount} state={.state} lastState={.lastState}{"; "}{end}phase={.status.phase}'; }
oom_restarted() {
  [[ "$(kc -n "$NS" get pod "$OOM_POD" -o jsonpath='{.status.containerStatuses[0].lastState.terminated.reason}/{.status.containerStatuses[0].lastState.terminated.exitCode}/{.status.phase}')" == "OOMKilled/137/Running" ]]
}
kc -n "$NS" label pod "$OOM_POD" kwok.trainscaler.io/oomkill=true >/dev/null
if poll "$TIMEOUT" oom_restarted; then
  pass "kwok OOM stage (restartPolicy OnFailure): lastState.terminated reason=OOMKilled exitCode=137, restarted in place"
else
  fail "kwok OOM stage (restartPolicy OnFailure)" "$(oom_status "$OOM_POD")"
fi
echo "  $OOM_POD: $(oom_status "$OOM_POD")"
sleep 2
if [[ -z "$(kc -n "$NS" get pod "$OOM_POD" -o jsonpath='{.metadata.labels.kwok\.trainscaler\.io/oomkill}')" \
      && "$(kc -n "$NS" get pod "$OOM_POD" -o jsonpath='{.status.containerStatuses[0].restartCount}')" == 1 ]]; then
  pass "kwok OOM stage is one-shot (label removed, restartCount=1)"
else
  fail "kwok OOM stage is one-shot (label removed, restartCount=1)" "$(oom_status "$OOM_POD")"
fi

# A plain pod with restartPolicy Never: the container ends OOMKilled and the pod Failed.
kc -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: oom-never
  namespace: $NS
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: registry.invalid/smoke/oom:latest
EOF
pod_running() { [[ "$(kc -n "$NS" get pod "$1" -o jsonpath='{.status.phase}')" == Running ]]; }
oom_failed() {
  [[ "$(kc -n "$NS" get pod oom-never -o jsonpath='{.status.containerStatuses[0].state.terminated.reason}/{.status.containerStatuses[0].state.terminated.exitCode}/{.status.phase}')" == "OOMKilled/137/Failed" ]]
}
if poll "$TIMEOUT" pod_running oom-never && kc -n "$NS" label pod oom-never kwok.trainscaler.io/oomkill=true >/dev/null \
   && poll "$TIMEOUT" oom_failed; then
  pass "kwok OOM stage (restartPolicy Never): state.terminated reason=OOMKilled exitCode=137, phase Failed"
else
  fail "kwok OOM stage (restartPolicy Never)" "$(oom_status oom-never)"
fi
echo "  oom-never: $(oom_status oom-never)"

# ---- 6. eviction through the Eviction API, as the SA ---------------------------------------
EVICT_POD="$JOB-worker-2"
old_uid="$(kc -n "$NS" get pod "$EVICT_POD" -o jsonpath='{.metadata.uid}')"
evfile="$(mktemp)"
printf '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"%s"}}\n' "$EVICT_POD" "$NS" >"$evfile"
recreated() {
  local uid phase
  uid="$(kc -n "$NS" get pod "$EVICT_POD" -o jsonpath='{.metadata.uid}' 2>/dev/null)" || return 1
  phase="$(kc -n "$NS" get pod "$EVICT_POD" -o jsonpath='{.status.phase}' 2>/dev/null)"
  [[ -n "$uid" && "$uid" != "$old_uid" && "$phase" == Running ]]
}
if ksa create --raw "/api/v1/namespaces/$NS/pods/$EVICT_POD/eviction" -f "$evfile" >/dev/null; then
  pass "SA evicts $EVICT_POD via POST /api/v1/namespaces/$NS/pods/$EVICT_POD/eviction"
  if poll "$TIMEOUT" recreated; then
    pass "evicted pod deleted by kwok and re-created (new UID, Running) by the training-operator"
  else
    fail "evicted pod re-created by the training-operator" "$(pods_of worker)"
  fi
else
  fail "SA evicts $EVICT_POD via the Eviction API"
fi
rm -f "$evfile"

# ---- 7. TFJob ------------------------------------------------------------------------------------
kc apply -f - >/dev/null <<EOF
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: smoke-tf
  namespace: $NS
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: tensorflow
            image: registry.invalid/smoke/tf:latest
EOF
tf_running() {
  [[ "$(kc -n "$NS" get pods -l training.kubeflow.org/job-name=smoke-tf -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Running$')" -eq 2 ]]
}
check "TFJob with 2 Workers: pods Running" poll "$TIMEOUT" tf_running

# ---- 8. training-operator validating webhook ----------------------------------------------------
if [[ "$OPERATOR_WEBHOOK" == 1 ]]; then
  out="$( { cat <<EOF
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: smoke-invalid
  namespace: $NS
spec:
  pytorchReplicaSpecs:
EOF
  replica Master 2; } | kc apply -f - 2>&1)"
  if [[ "$out" == *"validator.pytorchjob.training-operator.kubeflow.org"* && "$out" == *"must be 1"* ]]; then
    pass "training-operator webhook rejects Master.replicas=2"
  else
    fail "training-operator webhook rejects Master.replicas=2" "$out"
  fi
fi

# ---- 9. JobSet, Kubeflow Trainer, Kueue ---------------------------------------------------------------
controllers_ready() {
  local p
  for p in "$JOBSET_PROBE_PORT" "$TRAINER_PROBE_PORT" "$KUEUE_PROBE_PORT"; do curl -fsS --max-time 5 "http://127.0.0.1:$p/readyz" || return 1; done
}
check "jobset, trainer and kueue /readyz" controllers_ready
groups_served() {
  local v g; v="$(kc api-versions)" || return 1
  for g in jobset.x-k8s.io/v1alpha2 trainer.kubeflow.org/v1alpha1 kueue.x-k8s.io/v1beta2; do grep -qx "$g" <<<"$v" || return 1; done
}
check "API groups served: jobset.x-k8s.io/v1alpha2, trainer.kubeflow.org/v1alpha1, kueue.x-k8s.io/v1beta2" groups_served
check "ClusterTrainingRuntime torch-distributed exists" kc get clustertrainingruntime torch-distributed

jobs_of_jobset() { kc -n "$NS" get jobs -l "jobset.sigs.k8s.io/jobset-name=$1" -o name | wc -l; }
running_pods() { # label-selector expected-count
  local n
  n=$(kc -n "$NS" get pods -l "$1" -o jsonpath='{range .items[*]}{.status.phase} {.spec.nodeName}{"\n"}{end}' \
      | awk '$1=="Running" && $2 ~ /^kwok-node-/' | wc -l)
  [[ "$n" -eq "$2" ]]
}
jobset_yaml() { # name parallelism
  cat <<EOF
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: $1, namespace: $NS}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: $2
        completions: $2
        completionMode: Indexed
        backoffLimit: 0
        template:
          spec:
            restartPolicy: Never
            containers:
            - {name: main, image: busybox, resources: {requests: {cpu: 100m}}}
EOF
}
jobset_yaml smoke-js 2 | kc apply -f - >/dev/null
jobset_has_one_job() { [[ "$(jobs_of_jobset smoke-js)" -eq 1 ]]; }
check "JobSet creates its Job" poll "$TIMEOUT" jobset_has_one_job
check "JobSet Job's 2 pods Running on kwok nodes" poll "$TIMEOUT" running_pods jobset.sigs.k8s.io/jobset-name=smoke-js 2
# ElasticJobSet: parallelism and completions may change together (the JobSet webhook refuses it when the gate is off).
out="$(kc -n "$NS" patch jobset smoke-js --type json \
  -p '[{"op":"replace","path":"/spec/replicatedJobs/0/template/spec/parallelism","value":3},{"op":"replace","path":"/spec/replicatedJobs/0/template/spec/completions","value":3}]' 2>&1)"
if [[ $? -eq 0 ]]; then pass "ElasticJobSet: parallelism=completions 2 -> 3 accepted"; else fail "ElasticJobSet: parallelism=completions 2 -> 3 accepted" "$out"; fi
check "ElasticJobSet: the Job grows to 3 running pods" poll "$TIMEOUT" running_pods jobset.sigs.k8s.io/jobset-name=smoke-js 3
out="$(kc -n "$NS" patch jobset smoke-js --type json -p '[{"op":"replace","path":"/spec/replicatedJobs/0/template/spec/parallelism","value":2}]' 2>&1)"
if [[ $? -ne 0 ]]; then pass "JobSet webhook rejects parallelism != completions"; else fail "JobSet webhook rejects parallelism != completions" "$out"; fi

kc apply -f - >/dev/null <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: smoke-tj, namespace: $NS}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    resourcesPerNode: {requests: {cpu: 100m}}
EOF
check "TrainJob (torch-distributed, numNodes 2) creates a JobSet" poll "$TIMEOUT" kc -n "$NS" get jobset smoke-tj
check "TrainJob's 2 nodes Running on kwok nodes" poll "$TIMEOUT" running_pods jobset.sigs.k8s.io/jobset-name=smoke-tj 2
out="$(kc -n "$NS" patch trainjob smoke-tj --type merge -p '{"spec":{"trainer":{"numNodes":3}}}' 2>&1)"
if [[ $? -ne 0 && "$out" == *immutable* ]]; then pass "TrainJob spec.trainer.numNodes is immutable"; else fail "TrainJob spec.trainer.numNodes is immutable" "$out"; fi
out="$(kc -n "$NS" apply -f - 2>&1 <<EOF
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: smoke-tj-invalid, namespace: $NS}
spec: {runtimeRef: {name: no-such-runtime}}
EOF
)"
# Trainer's validator (validator.trainjob.trainer.kubeflow.org) and Kueue's (vtrainjob.kb.io) both refuse it;
# the API server calls validating webhooks in no fixed order, so either may answer.
if [[ "$out" == *"denied the request"* && "$out" == *no-such-runtime* ]]; then
  pass "a TrainJob with an unknown runtime is rejected by a webhook"
else
  fail "a TrainJob with an unknown runtime is rejected by a webhook" "$out"
fi

# Kueue: a Job in a LocalQueue is suspended on create (webhook), admitted within the ClusterQueue's quota and
# unsuspended; one asking for more GPUs than the quota stays suspended, its Workload not admitted.
check "LocalQueue $KUEUE_LOCAL_QUEUE in default Active" kc wait --for condition=Active --timeout 5s -n default "localqueue/$KUEUE_LOCAL_QUEUE"
kc apply -f - >/dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $KUEUE_LOCAL_QUEUE, namespace: $NS}
spec: {clusterQueue: $KUEUE_CLUSTER_QUEUE}
EOF
queued_job() { # name parallelism gpus-per-pod
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $NS
  labels: {kueue.x-k8s.io/queue-name: $KUEUE_LOCAL_QUEUE}
spec:
  parallelism: $2
  completions: $2
  completionMode: Indexed
  suspend: false
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: 100m, nvidia.com/gpu: "$3"}, limits: {nvidia.com/gpu: "$3"}}
EOF
}
queued_job smoke-kq 2 1 | kc apply -f - >/dev/null
workload_of() { kc -n "$NS" get workloads -o jsonpath="{range .items[?(@.metadata.ownerReferences[0].name==\"$1\")]}{.metadata.name}{end}"; }
wl_condition() { # job condition -> status
  local wl; wl="$(workload_of "$1")"; [[ -n "$wl" ]] || return 1
  kc -n "$NS" get workload "$wl" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}"
}
admitted() { [[ "$(wl_condition "$1" Admitted)" == True ]]; }
check "Kueue admits a Job (2 x 1 GPU) in $KUEUE_LOCAL_QUEUE" poll "$TIMEOUT" admitted smoke-kq
check "the admitted Job is unsuspended and its 2 pods Running" poll "$TIMEOUT" running_pods batch.kubernetes.io/job-name=smoke-kq 2
queued_job smoke-kq-big 3 4 | kc apply -f - >/dev/null
pending() { [[ "$(wl_condition "$1" QuotaReserved)" == False && "$(kc -n "$NS" get job "$1" -o jsonpath='{.spec.suspend}')" == true ]]; }
check "a Job over the GPU quota (3 x 4 > $KUEUE_GPU_QUOTA) stays suspended, not admitted" poll "$TIMEOUT" pending smoke-kq-big
# kwok completes a Job's pods only when a test labels them (stages.yaml); the Workload then finishes.
kc -n "$NS" label pods -l batch.kubernetes.io/job-name=smoke-kq kwok.trainscaler.io/complete=true >/dev/null
finished() { [[ "$(wl_condition "$1" Finished)" == True ]]; }
check "pods labelled kwok.trainscaler.io/complete=true complete the Job; its Workload is Finished" poll "$TIMEOUT" finished smoke-kq

# ---- host node (only when up.sh started it): a pod there runs a real process ------------------------
if kc get node "$HOST_NODE_NAME" >/dev/null 2>&1; then
  check "host node $HOST_NODE_NAME Ready" kc wait --for condition=Ready --timeout 5s "node/$HOST_NODE_NAME"
  kc -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: { name: host-echo }
spec:
  restartPolicy: Never
  nodeSelector: { trainscaler.io/host-node: "true" }
  tolerations: [{ key: trainscaler.io/host-node, operator: Exists, effect: NoSchedule }]
  containers:
    - { name: main, image: host, command: [sh, -c, 'test "\$(hostname)" = host-echo'] }
EOF
  host_echo_succeeded() { [[ "$(kc -n "$NS" get pod host-echo -o jsonpath='{.status.phase}')" == Succeeded ]]; }
  if poll "$TIMEOUT" host_echo_succeeded; then
    pass "a pod on $HOST_NODE_NAME runs for real (hostname = pod name, exit 0 -> Succeeded)"
  else
    fail "a pod on $HOST_NODE_NAME runs for real" "$(kc -n "$NS" get pod host-echo -o jsonpath='{.status}' 2>&1)"
  fi
fi

echo "job status: $(kc -n "$NS" get pytorchjob "$JOB" -o jsonpath='{.status.conditions[-1:].type} workers active={.status.replicaStatuses.Worker.active}')"
echo "smoke: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
