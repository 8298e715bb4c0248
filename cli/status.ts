// `trainscaler status`: every job trainscaler manages, one line each: where it is, how many workers it has and
// should have, what trainscaler last did to it and when, and why it is not acting when it is not.
// Read from what the cluster keeps, with a constant number of reads whatever the number of jobs: one LIST per
// job kind, one LIST of the ScaledTrainingJobs (trainscaler's state, in a status only it writes), one GET of the
// outcome store per namespace with managed jobs. Nothing from a job's own annotations is trusted for what
// trainscaler did; every string reaching the terminal is escaped.
import type { Command } from 'commander';
import { readJob, refOf } from '../lib/adapters/job-adapter.js';
import type { ClusterClient, KubeObject } from '../lib/cluster/cluster-client.js';
import { type JobStateStatus, jobStateLookup, ownedBy, stateOfStatus } from '../lib/cluster/job-state.js';
import { listAllJobs } from '../lib/cluster/served-lists.js';
import {
  type JobOutcomes,
  outcomesConfigMapName,
  outcomesKey,
  parseJobOutcomes,
  type StoredOutcome,
} from '../lib/decisions/outcome-store.js';
import { DEFAULT_MANAGEMENT_SCOPE, type ManagementScope, managementOf } from '../lib/management.js';
import type { Change, JobKind } from '../lib/types.js';
import { terminalSafe, terminalSafeJson } from './history.js';

export interface ManagedJobStatus {
  namespace: string;
  name: string;
  kind: JobKind;
  /**
   * The mode of the policy in force (a TrainingAutoscaler's, or `Auto` for a job opted in by annotation);
   * `Paused`: trainscaler stopped acting on it (the reason is in `notActing`).
   */
  mode: 'Auto' | 'Recommend' | 'Off' | 'Paused';
  /** The TrainingAutoscaler in force, when one is. */
  policy?: string;
  /** The Worker replicas of the job's spec; undefined for a kind without a Worker role. */
  workers: number | undefined;
  /** The Worker replicas trainscaler's latest decision asks for: `workers` when it asks for no change. */
  desiredWorkers: number | undefined;
  /** trainscaler's last write that changed how the job runs. */
  lastAction?: { at: number; summary: string };
  /** Why the latest review left the job as it is; absent when it acted or has not reviewed the job yet. */
  notActing?: string;
}

/** Worker replicas a decision's changes ask for, when they touch them. */
function workersAskedBy(changes: readonly Change[]): number | undefined {
  const change = changes.find((c) => c.kind === 'replicas' && c.role === 'Worker');
  return change?.kind === 'replicas' ? change.to : undefined;
}

function latestOutcome(outcomes: JobOutcomes): StoredOutcome | undefined {
  let latest: StoredOutcome | undefined;
  for (const outcome of Object.values(outcomes)) if (!latest || outcome.at > latest.at) latest = outcome;
  return latest;
}

function summaryOf(changes: readonly Change[], reason: string): string {
  const worker = changes.find((c) => c.kind === 'replicas');
  if (worker?.kind === 'replicas') return `${worker.role} ${worker.from} -> ${worker.to}`;
  return changes.length > 0 ? `${changes.length} change${changes.length === 1 ? '' : 's'}` : reason;
}

export async function managedJobStatuses(
  cluster: ClusterClient,
  storeNamespace: string,
  scope: ManagementScope = DEFAULT_MANAGEMENT_SCOPE,
): Promise<ManagedJobStatus[]> {
  const stateOf = jobStateLookup(await cluster.listJobStates());
  // Managed: opted in (annotation, namespace list), or governed by a TrainingAutoscaler, which trainscaler
  // records in the job's state (only trainscaler writes it) when it first reviews the job under it.
  const governed = (obj: KubeObject) => {
    const stored = stateOf(refOf(obj));
    return ownedBy(stored, obj) && (stored.status as JobStateStatus | undefined)?.policy !== undefined;
  };
  const managed = (await listAllJobs(cluster)).filter(
    (obj) => managementOf(obj.metadata, scope).managed || governed(obj),
  );
  const namespaces = [...new Set(managed.map((obj) => refOf(obj).namespace))];
  const stores = new Map<string, Record<string, string>>();
  await Promise.all(
    namespaces.map(async (namespace) => {
      const cm = await cluster.getConfigMap(storeNamespace, outcomesConfigMapName(namespace));
      stores.set(namespace, cm?.data ?? {});
    }),
  );
  const rows = managed.map((obj): ManagedJobStatus => {
    const ref = refOf(obj);
    // One job its owner broke (a spec trainscaler cannot read) is a row saying so, not a failed listing.
    let workers: number | undefined;
    let unreadable: string | undefined;
    try {
      workers = readJob(obj, scope).roles.find((r) => r.role === 'Worker')?.replicas;
    } catch (error) {
      unreadable = `spec unreadable: ${error instanceof Error ? error.message : String(error)}`;
    }
    const stored = stateOf(ref);
    // Only a status written for this very job (same uid) speaks for it: a job deleted and created again
    // under the same name starts afresh.
    const status = ownedBy(stored, obj) ? (stored.status as JobStateStatus | undefined) : undefined;
    const state = stateOfStatus(status);
    const latest = latestOutcome(parseJobOutcomes(stores.get(ref.namespace)?.[outcomesKey(ref)]));
    const acted = latest?.outcome === 'applied';
    const policy = status?.policy;
    const row: ManagedJobStatus = {
      namespace: ref.namespace,
      name: ref.name,
      kind: ref.kind,
      mode: state.paused ? 'Paused' : (policy?.mode ?? 'Auto'),
      workers,
      desiredWorkers:
        (latest && !acted ? workersAskedBy(latest.changes) : undefined) ??
        (policy?.mode === 'Recommend' ? status?.recommendation?.workers : undefined) ??
        workers,
    };
    // The implied policy of a job opted in by annotation has no object of its own to name.
    if (policy?.name && !policy.name.startsWith('(')) row.policy = policy.name;
    const last = status?.lastDecision;
    if (state.lastActionAt !== undefined)
      row.lastAction = {
        at: state.lastActionAt,
        summary: last ? summaryOf(last.changes, last.reason) : 'changed',
      };
    if (unreadable) row.notActing = unreadable;
    else if (state.paused) row.notActing = `paused: ${state.pauseReason ?? 'by trainscaler'}`;
    else if (policy?.mode === 'Off') row.notActing = `policy ${policy.name} is Off`;
    else if (policy?.mode === 'Recommend' && status?.recommendation)
      row.notActing = `Recommend: ${status.recommendation.reason}`;
    else if (latest && !acted) row.notActing = latest.reason;
    return row;
  });
  return rows.sort(
    (a, b) =>
      a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.kind.localeCompare(b.kind),
  );
}

function age(seconds: number): string {
  if (seconds < 120) return `${Math.max(0, Math.round(seconds))}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

/** One line a job, columns aligned; the "why not" column is cut to keep a line readable. */
export function renderStatusTable(rows: readonly ManagedJobStatus[], now: number): string {
  if (rows.length === 0) return 'no managed jobs\n';
  const header = ['NAMESPACE', 'NAME', 'KIND', 'MODE', 'WORKERS', 'DESIRED', 'LAST ACTION', 'WHY NOT ACTING'];
  const cells = rows.map((r) => [
    r.namespace,
    r.name,
    r.kind,
    r.mode,
    r.workers === undefined ? '-' : String(r.workers),
    r.desiredWorkers === undefined ? '-' : String(r.desiredWorkers),
    r.lastAction ? `${r.lastAction.summary} (${age(now - r.lastAction.at)} ago)` : '-',
    r.notActing ? shorten(r.notActing, 80) : '-',
  ]);
  const table = [header, ...cells].map((row) => row.map(terminalSafe));
  const widths = header.map((_, i) => Math.max(...table.map((row) => (row[i] ?? '').length)));
  return `${table.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')).join('\n')}\n`;
}

function shorten(text: string, limit: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= limit ? line : `${line.slice(0, limit - 1)}…`;
}

export function registerStatusCommand(program: Command): Command {
  return program
    .command('status')
    .description(
      'List every managed job: workers now and wanted, the last action and why trainscaler is not acting',
    )
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: KUBECONFIG, in-cluster ServiceAccount, ~/.kube/config)',
    )
    .option(
      '--store-namespace <namespace>',
      "trainscaler's namespace (default: TRAINSCALER_PROFILES_NAMESPACE or trainscaler-system)",
    )
    .option('--json', 'print the rows as JSON')
    .action(async (options: { kubeconfig?: string; json?: boolean; storeNamespace?: string }) => {
      const { KubernetesClusterClient, loadKubeConfig } = await import(
        '../lib/cluster/kubernetes-cluster-client.js'
      );
      const { policyConfigFromEnv } = await import('../functions/runtime-deps.js');
      const kc = loadKubeConfig(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {});
      const storeNamespace =
        options.storeNamespace || process.env.TRAINSCALER_PROFILES_NAMESPACE || 'trainscaler-system';
      const config = policyConfigFromEnv(process.env);
      const rows = await managedJobStatuses(new KubernetesClusterClient(kc), storeNamespace, {
        namespaceAllowlist: config.namespaceAllowlist,
        ownNamespaces: config.ownNamespaces,
      });
      process.stdout.write(
        options.json ? `${terminalSafeJson(rows)}\n` : renderStatusTable(rows, Date.now() / 1000),
      );
    });
}
