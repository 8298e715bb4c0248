// Every Kubernetes API request trainscaler makes, as RBAC sees it (API group, resource, verb, where). The
// RBAC manifests (infra/k8s/rbac.yaml, lambda-access.yaml, forwarder/rbac.yaml) grant exactly these and
// nothing else: a unit test drives each caller against a recording HTTP server and checks its requests
// against this table, and the table against the manifests, so neither a new call nor a spare grant goes
// unnoticed. The CLI's read-only commands (explain, history) run with the user's own credentials: their rows
// say what a user needs, and no manifest grants them.

/**
 * Anywhere in the cluster (a ClusterRole), or only in trainscaler's own namespace, by name (a Role). A name
 * ending in '*' is a prefix: RBAC cannot express one, so the Role grants any name in trainscaler's namespace
 * and infra/k8s/configmap-names-policy.yaml holds writes to the prefix.
 */
export type AccessScope = { where: 'cluster' } | { where: 'own-namespace'; resourceName: string };

export interface ApiAccess {
  group: string;
  resource: string;
  verb: 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch';
  scope: AccessScope;
}

/** The profile store and the leader Lease, in trainscaler's own namespace (defaults; see README, RBAC). */
export const PROFILES_CONFIGMAP = 'trainscaler-profiles';
export const LEADER_LEASE = 'trainscaler-leader';
/**
 * The outcome store (lib/decisions/outcome-store.ts): one ConfigMap per job namespace,
 * `trainscaler-outcomes-<namespace>`, a name no Role can list in advance.
 */
export const OUTCOMES_CONFIGMAPS = 'trainscaler-outcomes-*';
/** The event forwarder's ledger (lib/forwarder/ledger.ts), shipped by infra/k8s/forwarder/ledger.yaml. */
export const FORWARDER_LEDGER = 'trainscaler-forwarder-ledger';

/** Whether a resource name is one a scope's name (exact, or a prefix ending in '*') covers. */
export function coversName(pattern: string, name: string): boolean {
  return pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern;
}

const CLUSTER: AccessScope = { where: 'cluster' };
const KUBEFLOW = 'kubeflow.org';
const KUEUE = 'kueue.x-k8s.io';
const STATE = 'trainscaler.io';

/** The kinds trainscaler writes to: scale, right-size, and its audit annotations. */
const PATCHED_JOBS: ReadonlyArray<Pick<ApiAccess, 'group' | 'resource'>> = [
  { group: KUBEFLOW, resource: 'pytorchjobs' },
  { group: KUBEFLOW, resource: 'tfjobs' },
  { group: 'apps', resource: 'statefulsets' },
  { group: 'batch', resource: 'jobs' },
  { group: 'jobset.x-k8s.io', resource: 'jobsets' },
];

/**
 * Every kind read. TrainJobs are read and never written: Trainer v2.3 allows no change of their size or
 * resources (lib/adapters/job-adapter.ts). Jobs and JobSets are read also as the links from a JobSet or
 * TrainJob to its pods (lib/cluster/owner-chain.ts).
 */
const READ_JOBS: ReadonlyArray<Pick<ApiAccess, 'group' | 'resource'>> = [
  ...PATCHED_JOBS,
  { group: 'trainer.kubeflow.org', resource: 'trainjobs' },
];

/**
 * The kinds the runner's informers and the forwarder watch (lib/runner/informers.ts): every kind read, for
 * submit-time configuration and completion (TrainJobs too: their success updates a profile).
 */
const WATCHED_JOBS = READ_JOBS;

function on(
  kinds: ReadonlyArray<Pick<ApiAccess, 'group' | 'resource'>>,
  verb: ApiAccess['verb'],
): ApiAccess[] {
  return kinds.map((k) => ({ ...k, verb, scope: CLUSTER }));
}

/** KubernetesClusterClient, method by method: what every handler (Lambda or runner) needs. */
export const CLUSTER_CLIENT_ACCESS = {
  getJob: on(READ_JOBS, 'get'),
  listJobs: on(READ_JOBS, 'list'),
  patchJob: on(PATCHED_JOBS, 'patch'),
  listPods: [{ group: '', resource: 'pods', verb: 'list', scope: CLUSTER }],
  listNodes: [{ group: '', resource: 'nodes', verb: 'list', scope: CLUSTER }],
  // Through the Eviction API: PodDisruptionBudgets are honoured and pods are never deleted directly.
  evictPod: [{ group: '', resource: 'pods/eviction', verb: 'create', scope: CLUSTER }],
  // In-place CPU/memory resize of a job's running pods (Kubernetes 1.33+); the pod itself is never patched.
  resizePod: [{ group: '', resource: 'pods/resize', verb: 'patch', scope: CLUSTER }],
  // Discovery (GET /api/v1) is a non-resource URL every authenticated user may read (the built-in
  // system:discovery ClusterRole): nothing for trainscaler's RBAC to grant.
  servesPodResize: [],
  createEvent: [{ group: '', resource: 'events', verb: 'create', scope: CLUSTER }],
  // `explain` and `history` (and nothing else): trainscaler's Events about one job, by field selector.
  listJobEvents: [{ group: '', resource: 'events', verb: 'list', scope: CLUSTER }],
  // Kueue (lib/cluster/kueue-state.ts): whether Kueue manages a job (its Workloads) and the quota left in its
  // ClusterQueue. Read only: trainscaler never writes a Kueue object.
  listWorkloads: [{ group: KUEUE, resource: 'workloads', verb: 'list', scope: CLUSTER }],
  getLocalQueue: [{ group: KUEUE, resource: 'localqueues', verb: 'get', scope: CLUSTER }],
  getClusterQueue: [{ group: KUEUE, resource: 'clusterqueues', verb: 'get', scope: CLUSTER }],
  getConfigMap: [
    {
      group: '',
      resource: 'configmaps',
      verb: 'get',
      scope: { where: 'own-namespace', resourceName: PROFILES_CONFIGMAP },
    },
  ],
  // trainscaler's per-job state (lib/cluster/job-state.ts): the ScaledTrainingJobs it creates, owned by the
  // jobs; it re-owns (patch) one left by an earlier job of the same name; only it writes their status.
  getJobState: [{ group: STATE, resource: 'scaledtrainingjobs', verb: 'get', scope: CLUSTER }],
  listJobStates: [{ group: STATE, resource: 'scaledtrainingjobs', verb: 'list', scope: CLUSTER }],
  putJobState: [
    { group: STATE, resource: 'scaledtrainingjobs', verb: 'create', scope: CLUSTER },
    { group: STATE, resource: 'scaledtrainingjobs', verb: 'patch', scope: CLUSTER },
    { group: STATE, resource: 'scaledtrainingjobs/status', verb: 'update', scope: CLUSTER },
  ],
  // The tenants' policies (lib/training-autoscaler.ts): read, and their status written (only trainscaler may);
  // their spec is the tenants' (infra/k8s/trainingautoscalers-rbac.yaml).
  listTrainingAutoscalers: [{ group: STATE, resource: 'trainingautoscalers', verb: 'list', scope: CLUSTER }],
  putTrainingAutoscalerStatus: [
    { group: STATE, resource: 'trainingautoscalers/status', verb: 'update', scope: CLUSTER },
  ],
  putConfigMap: [
    {
      group: '',
      resource: 'configmaps',
      verb: 'create',
      scope: { where: 'own-namespace', resourceName: PROFILES_CONFIGMAP },
    },
    {
      group: '',
      resource: 'configmaps',
      verb: 'update',
      scope: { where: 'own-namespace', resourceName: PROFILES_CONFIGMAP },
    },
  ],
} as const satisfies Record<string, readonly ApiAccess[]>;

/** `trainscaler run` and `trainscaler forward`: the informers (lib/runner/informers.ts) list and watch cluster-wide. */
export const INFORMER_ACCESS: readonly ApiAccess[] = [
  ...on(WATCHED_JOBS, 'list'),
  ...on(WATCHED_JOBS, 'watch'),
  { group: '', resource: 'pods', verb: 'list', scope: CLUSTER },
  { group: '', resource: 'pods', verb: 'watch', scope: CLUSTER },
];

/**
 * `trainscaler run` only: its informers also watch the tenants' TrainingAutoscalers, so that its ticks read them
 * from the cache and a spec change asks for a tick at once (lib/runner/event-router.ts). The forwarder does
 * not: on Lambda the schedule function reads every policy on each tick (every minute), and forwarding a policy
 * change would cost a watch of every tenant's policies and a route to the schedule for at most a minute.
 */
export const POLICY_INFORMER_ACCESS: readonly ApiAccess[] = (['list', 'watch'] as const).map((verb) => ({
  group: STATE,
  resource: 'trainingautoscalers',
  verb,
  scope: CLUSTER,
}));

/** `trainscaler run` only: leader election on one Lease (lib/runner/lease-lock.ts). */
export const LEASE_ACCESS: readonly ApiAccess[] = (['get', 'create', 'update'] as const).map((verb) => ({
  group: 'coordination.k8s.io',
  resource: 'leases',
  verb,
  scope: { where: 'own-namespace', resourceName: LEADER_LEASE },
}));

/**
 * `trainscaler run` only: the leader labels its own pod (lib/runner/leader-pod-label.ts) so the Service routes
 * alerts to it. Pod names are generated, so RBAC cannot pin this to a name ('*': any pod in trainscaler's own
 * namespace); infra/k8s/leader-label-policy.yaml narrows it to the caller's own pod and that one label.
 */
export const LEADER_LABEL_ACCESS: readonly ApiAccess[] = [
  { group: '', resource: 'pods', verb: 'patch', scope: { where: 'own-namespace', resourceName: '*' } },
];

function inOwnNamespace(resource: string, resourceName: string, verbs: readonly ApiAccess['verb'][]) {
  return verbs.map(
    (verb): ApiAccess => ({ group: '', resource, verb, scope: { where: 'own-namespace', resourceName } }),
  );
}

/**
 * `trainscaler run` only: the last outcome of every policy on every job (lib/decisions/outcome-store.ts), read
 * back and created or updated under its resourceVersion, for `trainscaler explain`. The Lambda functions keep
 * no outcome store.
 */
export const OUTCOME_STORE_ACCESS: readonly ApiAccess[] = inOwnNamespace('configmaps', OUTCOMES_CONFIGMAPS, [
  'get',
  'create',
  'update',
]);

/**
 * `trainscaler forward`: its ledger, read at start and patched whole (lib/forwarder/ledger.ts). A create
 * follows a 404 only, and is refused: the ConfigMap is shipped (infra/k8s/forwarder/ledger.yaml) so that the
 * forwarder needs no create.
 */
export const FORWARDER_LEDGER_ACCESS: readonly ApiAccess[] = inOwnNamespace('configmaps', FORWARDER_LEDGER, [
  'get',
  'patch',
]);

/** What the forwarder's ServiceAccount needs: the informers (list, watch) and its ledger. Nothing is written to a job. */
export const FORWARDER_ACCESS: readonly ApiAccess[] = [...INFORMER_ACCESS, ...FORWARDER_LEDGER_ACCESS];

/**
 * What a user running `trainscaler explain` needs (their own credentials, or the runner's ServiceAccount): the
 * job, its ScaledTrainingJob, and its namespace's outcome ConfigMap in trainscaler's namespace (a user who may
 * not read that sees the status only).
 */
export const EXPLAIN_ACCESS: readonly ApiAccess[] = [
  ...CLUSTER_CLIENT_ACCESS.getJob,
  ...CLUSTER_CLIENT_ACCESS.getJobState,
  ...inOwnNamespace('configmaps', OUTCOMES_CONFIGMAPS, ['get']),
];

/**
 * What a user running `trainscaler status` needs: every job kind and every ScaledTrainingJob listed, and the
 * outcome ConfigMaps of the namespaces with managed jobs.
 */
export const STATUS_ACCESS: readonly ApiAccess[] = [
  ...CLUSTER_CLIENT_ACCESS.listJobs,
  ...CLUSTER_CLIENT_ACCESS.listJobStates,
  ...inOwnNamespace('configmaps', OUTCOMES_CONFIGMAPS, ['get']),
];

/** What a user running `trainscaler history` needs: the job, its ScaledTrainingJob, and its Events. */
export const HISTORY_ACCESS: readonly ApiAccess[] = [
  ...CLUSTER_CLIENT_ACCESS.getJob,
  ...CLUSTER_CLIENT_ACCESS.getJobState,
  ...CLUSTER_CLIENT_ACCESS.listJobEvents,
];

/** The cluster client's calls of explain and history only: no handler reads Events. */
const { listJobEvents: _readByTheCliOnly, ...HANDLER_CALLS } = CLUSTER_CLIENT_ACCESS;

/** What the functions need (the Lambda group): the cluster client's calls, but for the CLI's. */
export const FUNCTIONS_ACCESS: readonly ApiAccess[] = Object.values(HANDLER_CALLS).flat();

/**
 * What the in-cluster runner needs: the functions' calls, its informers, its Lease, its pod's leader label and
 * the outcome store; and the Events of a job, so that `explain` and `history` work as its ServiceAccount.
 */
export const RUNNER_ACCESS: readonly ApiAccess[] = [
  ...FUNCTIONS_ACCESS,
  ...CLUSTER_CLIENT_ACCESS.listJobEvents,
  ...INFORMER_ACCESS,
  ...POLICY_INFORMER_ACCESS,
  ...LEASE_ACCESS,
  ...LEADER_LABEL_ACCESS,
  ...OUTCOME_STORE_ACCESS,
];
