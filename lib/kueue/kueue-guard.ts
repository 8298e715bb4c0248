// The Kueue rules every plan for a Kueue-managed job passes before it is written (after the guardrails).
// Kueue (v0.18) answers a change to a running job's pod sets (counts or template) with a suspension and a
// requeue, unless the job is an elastic batch/v1 Job, whose changes of parallelism go through workload slices:
// a scale-down updates its admitted Workload in place, a scale-up makes a new slice that Kueue admits against
// quota while the new pods wait behind a scheduling gate (pkg/workloadslicing, jobframework/reconciler.go).
// So, for a Kueue-managed job:
//  1. while it is suspended and holds no quota (before admission), any change may be written: Kueue updates
//     its pending Workload;
//  2. once admitted (or running), an elastic Job may shrink, and grow when a slice is not already waiting;
//     every other change to its pod sets is held back, and so is any change of a non-elastic job;
//  3. growth (more pods, or more requested per pod before admission) is written only when it fits in the
//     ClusterQueue's free quota (nominal minus reserved, no borrowing): a scale-up that does not fit would
//     either wait forever or preempt other workloads, so it is not attempted.
// Changes that do not touch the pod sets (evicting a pod, pausing) pass. Pure.
import type { Change, JobView, Plan, RoleName } from '../types.js';
import type { ClusterQueueQuota, ResourceAmounts, WorkloadPodSet, WorkloadView } from './kueue-objects.js';

export interface KueueJob {
  /** Why the job counts as Kueue-managed (its queue-name label, or a Workload it controls). */
  managedBy: string;
  /** A batch/v1 Job annotated kueue.x-k8s.io/elastic-job: "true": resized through workload slices. */
  elasticSlices: boolean;
  /** The job's own suspend flag (Kueue keeps a job suspended until it admits it). */
  suspended: boolean;
  /** Its Workloads not yet finished, oldest first. */
  workloads: WorkloadView[];
  /** The Workload pod set each role's pods are counted in. */
  podSetOf: Partial<Record<RoleName, string>>;
}

export interface KueueGuardInput {
  plan: Plan;
  job: JobView;
  kueue: KueueJob;
  /** The ClusterQueue's quota, when it could be read; else why not (growth is then not attempted). */
  quota: ClusterQueueQuota | { problem: string } | undefined;
}

export interface KueueGuarded {
  plan: Plan;
  /** One line per rule that held something back, also appended to the plan's reason. */
  notes: string[];
}

type PodSetChange = Change & { kind: 'replicas' | 'resources' | 'avoid-node' | 'prefer-node' };

/** Changes Kueue sees as a change of the job's pod sets (their counts or template). */
export function touchesPodSets(change: Change): change is PodSetChange {
  return (
    change.kind === 'replicas' ||
    change.kind === 'resources' ||
    change.kind === 'avoid-node' ||
    change.kind === 'prefer-node'
  );
}

/** The admitted Workload: the one holding quota and not being evicted. */
export function holdingWorkload(kueue: KueueJob): WorkloadView | undefined {
  return kueue.workloads.find((w) => w.quotaReserved && !w.evicted && !w.finished);
}

/** Kueue updates the job's Workload in place: suspended, and no Workload of it holds quota. */
export function beforeAdmission(kueue: KueueJob): boolean {
  return kueue.suspended && holdingWorkload(kueue) === undefined;
}

export function applyKueueRules(input: KueueGuardInput): KueueGuarded {
  const { plan, kueue } = input;
  const podSetChanges = plan.changes.filter(touchesPodSets);
  if (podSetChanges.length === 0) return { plan, notes: [] };
  const notes: string[] = [];
  let kept: Change[];
  if (beforeAdmission(kueue)) {
    kept = plan.changes;
    const problem = growthBeforeAdmission(input);
    if (problem) {
      notes.push(problem);
      kept = plan.changes.filter((c) => !touchesPodSets(c));
    }
  } else if (kueue.elasticSlices) {
    kept = [];
    const growth: (Change & { kind: 'replicas' })[] = [];
    for (const change of plan.changes) {
      if (!touchesPodSets(change)) kept.push(change);
      else if (change.kind !== 'replicas')
        notes.push(
          `${describe(change)} held back: an admitted elastic Job's workload slices may change only in count; ` +
            'Kueue answers a pod template change with a suspension',
        );
      else if (change.to <= liveReplicas(input.job, change.role)) kept.push(change);
      else growth.push(change);
    }
    if (growth.length > 0) {
      const problem = sliceGrowthProblem(input, growth);
      if (problem) notes.push(problem);
      else kept.push(...growth);
    }
  } else {
    kept = plan.changes.filter((c) => !touchesPodSets(c));
    const state = kueue.suspended ? 'suspended but admitted (holds quota)' : 'running (admitted)';
    notes.push(
      `${podSetChanges.map(describe).join(', ')} held back: ${input.job.ref.kind} managed by Kueue (${kueue.managedBy}) ` +
        `is ${state} and not an elastic Job (kueue.x-k8s.io/elastic-job); Kueue would suspend and requeue it ` +
        'on a change of its pod sets, so it is sized only while suspended before admission',
    );
  }
  if (notes.length === 0) return { plan, notes };
  return {
    plan: { ...plan, changes: kept, reason: `${plan.reason} [kueue: ${notes.join('; ')}]` },
    notes,
  };
}

function liveReplicas(job: JobView, role: RoleName): number {
  return job.roles.find((r) => r.role === role)?.replicas ?? 0;
}

function describe(change: PodSetChange): string {
  if (change.kind === 'replicas') return `${change.role} ${change.from} -> ${change.to}`;
  if (change.kind === 'resources')
    return `${change.role} ${change.resource} ${change.field} ${change.from} -> ${change.to}`;
  return `${change.role} avoid node ${change.node}`;
}

/**
 * A scale-up of an admitted elastic Job: Kueue makes a new slice asking for the whole new count, charged only
 * the difference, in the flavors the admitted slice holds (flavorassigner: "Ensure the same resource flavor is
 * used for the workload slice"). It must fit in that flavor's free quota, and no earlier slice may be waiting.
 */
function sliceGrowthProblem(
  input: KueueGuardInput,
  growth: readonly (Change & { kind: 'replicas' })[],
): string | undefined {
  const { kueue, quota, job } = input;
  const what = growth.map(describe).join(', ');
  const holding = holdingWorkload(kueue);
  if (!holding) return `${what} not attempted: no Workload of the job holds quota (Kueue is between states)`;
  const waiting = kueue.workloads.find((w) => w.replacementFor !== undefined && !w.quotaReserved);
  if (waiting)
    return `${what} not attempted: workload slice ${waiting.name} from an earlier scale-up still waits for quota`;
  if (quota === undefined || 'problem' in quota)
    return `${what} not attempted: the ClusterQueue's free quota is unknown (${quota?.problem ?? 'not read'})`;
  const extra = new Map<string, { flavor: string; resource: string; amount: number }>();
  for (const change of growth) {
    const podSet = podSetNamed(holding, kueue.podSetOf[change.role]);
    if (!podSet) return `${what} not attempted: the admitted Workload has no pod set for ${change.role}`;
    const pods = change.to - liveReplicas(job, change.role);
    for (const [resource, perPod] of Object.entries(podSet.perPod)) {
      if (perPod <= 0) continue;
      const flavor = podSet.flavors?.[resource];
      if (!flavor)
        return `${what} not attempted: ${resource} of pod set ${podSet.name} was admitted in no flavor`;
      const key = `${flavor}/${resource}`;
      const entry = extra.get(key) ?? { flavor, resource, amount: 0 };
      entry.amount += pods * perPod;
      extra.set(key, entry);
    }
  }
  for (const { flavor, resource, amount } of extra.values()) {
    const free = freeIn(quota, flavor, resource);
    if (free === undefined)
      return `${what} not attempted: ClusterQueue ${quota.name} has no ${resource} quota in flavor ${flavor}`;
    if (amount > free + 1e-9)
      return (
        `${what} not attempted: the new workload slice needs ${formatAmount(resource, amount)} more ${resource} ` +
        `in flavor ${flavor}, ClusterQueue ${quota.name} has ${formatAmount(resource, free)} free ` +
        '(nominal quota minus reserved)'
      );
  }
  return undefined;
}

function podSetNamed(w: WorkloadView, name: string | undefined): WorkloadPodSet | undefined {
  if (name !== undefined) return w.podSets.find((p) => p.name === name);
  return w.podSets.length === 1 ? w.podSets[0] : undefined;
}

function freeIn(quota: ClusterQueueQuota, flavor: string, resource: string): number | undefined {
  for (const group of quota.resourceGroups)
    for (const f of group.flavors) {
      const r = f.name === flavor ? f.resources[resource] : undefined;
      if (r) return Math.max(0, r.nominal - r.reserved);
    }
  return undefined;
}

/** The pod sets as the job will ask for them after the plan: counts and per-pod requests. */
function podSetsAfter(input: KueueGuardInput): { before: ResourceAmounts; after: ResourceAmounts } {
  const { job, kueue, plan } = input;
  const latest = kueue.workloads.at(-1);
  const sets: { name: string; count: number; perPod: ResourceAmounts; role?: RoleName }[] = latest
    ? latest.podSets.map((p) => ({ name: p.name, count: p.count, perPod: { ...p.perPod } }))
    : [];
  // No Workload yet (Kueue makes it moments after the job is created): the job's own roles stand in.
  if (sets.length === 0)
    for (const role of job.roles)
      sets.push({
        name: kueue.podSetOf[role.role] ?? role.role.toLowerCase(),
        count: role.replicas,
        perPod: {
          cpu: role.requests.cpuMillis || role.limits.cpuMillis,
          memory: role.requests.memoryBytes || role.limits.memoryBytes,
          'nvidia.com/gpu': role.requests.gpus || role.limits.gpus,
        },
      });
  const total = (list: typeof sets) => {
    const sum: ResourceAmounts = {};
    for (const s of list) for (const [r, v] of Object.entries(s.perPod)) sum[r] = (sum[r] ?? 0) + s.count * v;
    return sum;
  };
  const before = total(sets);
  const after = sets.map((s) => ({ ...s, perPod: { ...s.perPod } }));
  for (const change of plan.changes) {
    if (change.kind !== 'replicas' && change.kind !== 'resources') continue;
    const name = kueue.podSetOf[change.role];
    const set = after.find((s) => s.name === name) ?? (after.length === 1 ? after[0] : undefined);
    if (!set) continue;
    if (change.kind === 'replicas') set.count = change.to;
    else if (change.field === 'requests') set.perPod[change.resource] = change.to;
  }
  return { before, after: total(after) };
}

/**
 * Before admission the job reserves nothing: growing it is written only when the whole job, at its new size,
 * fits in the free quota of one flavor of each resource group (as Kueue admits it). Shrinking needs no check.
 */
function growthBeforeAdmission(input: KueueGuardInput): string | undefined {
  const { before, after } = podSetsAfter(input);
  const grows = Object.entries(after).some(([r, v]) => v > (before[r] ?? 0) + 1e-9);
  if (!grows) return undefined;
  const what = input.plan.changes.filter(touchesPodSets).map(describe).join(', ');
  const { quota } = input;
  if (quota === undefined || 'problem' in quota)
    return `${what} not attempted: the ClusterQueue's free quota is unknown (${quota?.problem ?? 'not read'})`;
  const needed = Object.entries(after).filter(([, v]) => v > 0);
  for (const [resource] of needed)
    if (!quota.resourceGroups.some((g) => g.covered.includes(resource)))
      return `${what} not attempted: ClusterQueue ${quota.name} has no quota for ${resource}`;
  for (const group of quota.resourceGroups) {
    const wanted = needed.filter(([r]) => group.covered.includes(r));
    if (wanted.length === 0) continue;
    const fits = group.flavors.some((f) =>
      wanted.every(([r, v]) => {
        const q = f.resources[r];
        return q !== undefined && v <= Math.max(0, q.nominal - q.reserved) + 1e-9;
      }),
    );
    if (!fits) {
      const free = group.flavors
        .map(
          (f) =>
            `${f.name}: ${wanted
              .map(([r]) => {
                const q = f.resources[r];
                return `${formatAmount(r, q ? Math.max(0, q.nominal - q.reserved) : 0)} ${r}`;
              })
              .join(', ')} free`,
        )
        .join('; ');
      return (
        `${what} not attempted: the job would need ${wanted.map(([r, v]) => `${formatAmount(r, v)} ${r}`).join(', ')} ` +
        `to be admitted, more than ClusterQueue ${quota.name} has free in any flavor (${free}; nominal quota minus reserved)`
      );
    }
  }
  return undefined;
}

export function formatAmount(resource: string, amount: number): string {
  if (resource === 'cpu') return `${+(amount / 1000).toFixed(3)}`;
  if (resource === 'memory') return `${+(amount / 2 ** 30).toFixed(2)}Gi`;
  return `${+amount.toFixed(3)}`;
}
