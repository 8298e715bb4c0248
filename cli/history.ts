// `trainscaler history NAMESPACE/JOB`: the decisions trainscaler recorded on a job (the
// trainscaler.io/history annotation, the last ten writes), read through the real Kubernetes client.
// The annotation is on the job, so anyone who may edit the job may rewrite it: the output says so, and
// nothing read from it reaches the terminal unescaped (an escape sequence could clear the screen, rewrite
// earlier lines or forge a record). trainscaler's own record is its Events and the outcome store (explain).
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
  /** The decision's details, when it was recorded with them (not checked: the annotation is the owner's). */
  details?: unknown;
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

/**
 * Control characters (C0, DEL, C1: ESC and CSI start terminal escape sequences, CR and LF rewrite or forge
 * lines) and the bidirectional overrides that reorder what is shown (U+202A-U+202E, U+2066-U+2069): each is
 * printed as its escape, visibly, never sent to the terminal.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is what it is for
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function escapeOf(char: string): string {
  const code = char.charCodeAt(0);
  return code < 0x100
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` with every control character and bidi override shown as its escape: one line, printed as written. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, escapeOf);
}

/** What JSON.stringify leaves raw in strings (it escapes C0 itself): DEL, C1 controls, bidi overrides. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Indented JSON with every character a terminal would act on escaped (\\uXXXX: still the same JSON). */
export function terminalSafeJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    UNSAFE_IN_JSON,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** Where history's records come from, said with them: the job's owner can edit the annotation. */
export const HISTORY_SOURCE_NOTE = `from the job's ${ANNOTATION.history} annotation, which whoever may edit the job can change`;

/** One block per decision: when, policy, id, the reason, and every change with its previous value. */
export function renderHistory(ref: JobRef, records: readonly HistoryRecord[]): string {
  const head = `${ref.kind} ${ref.namespace}/${ref.name}`;
  if (records.length === 0) return `${terminalSafe(head)}: no decisions recorded\n`;
  const lines = [`${head}: ${records.length} decision(s), oldest first (${HISTORY_SOURCE_NOTE})`];
  for (const r of records) {
    lines.push(`${new Date(r.at * 1000).toISOString()}  ${r.policy}  ${r.id}`);
    lines.push(`  reason: ${r.reason}`);
    for (const c of r.changes) lines.push(`  - ${describeChange(c)}`);
  }
  return `${lines.map(terminalSafe).join('\n')}\n`;
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
      process.stdout.write(options.json ? `${terminalSafeJson(records)}\n` : renderHistory(ref, records));
    });
}
