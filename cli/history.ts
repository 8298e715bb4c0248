// `trainscaler history NAMESPACE/JOB`: the decisions trainscaler recorded on a job (the
// trainscaler.io/history annotation, the last ten writes), read through the real Kubernetes client.
import { type Command, InvalidArgumentError } from 'commander';
import { ANNOTATION } from '../lib/adapters/annotations.js';
import { isSupportedKind, SUPPORTED_KINDS } from '../lib/adapters/job-adapter.js';
import type { ClusterClient } from '../lib/cluster/cluster-client.js';
import type { Change, JobKind, JobRef } from '../lib/types.js';

export interface HistoryRecord {
  id: string;
  at: number;
  policy: string;
  reason: string;
  changes: Change[];
}

export function jobRef(value: string, kind: JobKind): JobRef {
  const parts = value.split('/');
  const [namespace, name] = parts;
  if (parts.length !== 2 || !namespace || !name) throw new InvalidArgumentError('expected NAMESPACE/JOB');
  return { kind, namespace, name };
}

export function kindOption(value: string): JobKind {
  if (!isSupportedKind(value))
    throw new InvalidArgumentError(`expected one of ${SUPPORTED_KINDS.join(', ')}`);
  return value;
}

function isRecord(value: unknown): value is HistoryRecord {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as Record<string, unknown>;
  return typeof r.id === 'string' && typeof r.at === 'number' && Array.isArray(r.changes);
}

/** The job's recorded decisions, oldest first; a missing or corrupt annotation reads as none. */
export async function readJobHistory(cluster: ClusterClient, ref: JobRef): Promise<HistoryRecord[]> {
  const job = await cluster.getJob(ref);
  const raw = job.metadata.annotations?.[ANNOTATION.history];
  if (!raw) return [];
  try {
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) ? parsed.filter(isRecord) : [];
  } catch {
    return [];
  }
}

export function describeChange(c: Change): string {
  switch (c.kind) {
    case 'replicas':
      return `${c.role} replicas ${c.from} -> ${c.to}`;
    case 'resources':
      return `${c.role} ${c.resource} ${c.field} ${c.from} -> ${c.to}`;
    case 'evict-pod':
      return `evict pod ${c.pod}`;
    case 'avoid-node':
      return `${c.role} pods prefer nodes other than ${c.node}`;
    case 'prefer-node':
      return `${c.role} pods prefer node ${c.node}`;
    case 'pause':
      return `pause: ${c.reason}`;
    case 'rendezvous':
      return `rendezvous ${c.setting}=${c.value}`;
  }
}

/** One block per decision: when, policy, id, the reason, and every change with its previous value. */
export function renderHistory(ref: JobRef, records: readonly HistoryRecord[]): string {
  if (records.length === 0) return `${ref.kind} ${ref.namespace}/${ref.name}: no decisions recorded\n`;
  const lines = [`${ref.kind} ${ref.namespace}/${ref.name}: ${records.length} decision(s), oldest first`];
  for (const r of records) {
    lines.push(`${new Date(r.at * 1000).toISOString()}  ${r.policy}  ${r.id}`);
    lines.push(`  reason: ${r.reason}`);
    for (const c of r.changes) lines.push(`  - ${describeChange(c)}`);
  }
  return `${lines.join('\n')}\n`;
}

export function registerHistoryCommand(program: Command): Command {
  return program
    .command('history')
    .description('Print the decisions trainscaler recorded on a job (reason, previous and new values)')
    .argument('<job>', 'NAMESPACE/JOB')
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: KUBECONFIG, in-cluster ServiceAccount, ~/.kube/config)',
    )
    .option('--kind <kind>', SUPPORTED_KINDS.join(', '), kindOption, 'PyTorchJob' as JobKind)
    .option('--json', 'print the records as JSON')
    .action(async (job: string, options: { kubeconfig?: string; kind: JobKind; json?: boolean }) => {
      const ref = jobRef(job, options.kind);
      const { KubernetesClusterClient, loadKubeConfig } = await import(
        '../lib/cluster/kubernetes-cluster-client.js'
      );
      const kc = loadKubeConfig(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {});
      const records = await readJobHistory(new KubernetesClusterClient(kc), ref);
      process.stdout.write(
        options.json ? `${JSON.stringify(records, null, 2)}\n` : renderHistory(ref, records),
      );
    });
}
