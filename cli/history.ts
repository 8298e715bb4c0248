// `trainscaler history NAMESPACE/JOB`: what trainscaler decided on a job, oldest first: the Events trainscaler
// reported about it (one per decision written, refusal or failure) and the last decision its ScaledTrainingJob
// status holds (only trainscaler may write that status). Nothing is read from the job's annotations: those are
// the job owner's to edit. Whatever is printed is escaped (an escape sequence in an Event's message could clear
// the screen, rewrite earlier lines or forge a record).
import type { CoreV1Event } from '@kubernetes/client-node';
import { type Command, InvalidArgumentError } from 'commander';
import { isSupportedKind, SUPPORTED_KINDS } from '../lib/adapters/job-adapter.js';
import { isObject } from '../lib/adapters/unstructured.js';
import type { ClusterClient, JobStateObject, KubeObject } from '../lib/cluster/cluster-client.js';
import { ownedBy } from '../lib/cluster/job-state.js';
import type { Change, JobKind, JobRef } from '../lib/types.js';

export interface HistoryRecord {
  /** The decision's id (the status), or the Event's name (named after the decision it records). */
  id: string;
  /** Epoch seconds. */
  at: number;
  /** The Event's reason (TrainscalerRebalance, TrainscalerEvictionRefused, ...), or the status's decision policy. */
  policy: string;
  reason: string;
  type?: 'Normal' | 'Warning';
  /** The decision's changes: only the status keeps them (an Event's message is its reason). */
  changes: Change[];
  source: 'event' | 'job-state';
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

/** What every Event trainscaler creates says of its author (lib/cluster/kubernetes-cluster-client.ts createEvent). */
const TRAINSCALER_COMPONENT = 'trainscaler';
const TRAINSCALER_REASON = /^Trainscaler[A-Za-z]+$/;

const secondsOf = (time: Date | string | undefined): number | undefined => {
  if (time === undefined) return undefined;
  const ms = new Date(time).getTime();
  return Number.isFinite(ms) ? ms / 1000 : undefined;
};

/**
 * The Events trainscaler reported about this job: its component and reason, and about this job's uid (an
 * earlier job of the same name had another). Kept by the API server for its event TTL (1 h by default).
 */
export function trainscalerEventsOf(events: readonly CoreV1Event[], job: KubeObject): HistoryRecord[] {
  const out: HistoryRecord[] = [];
  for (const e of events) {
    if (e.source?.component !== TRAINSCALER_COMPONENT || !TRAINSCALER_REASON.test(e.reason ?? '')) continue;
    if (!job.metadata.uid || e.involvedObject.uid !== job.metadata.uid) continue;
    const at =
      secondsOf(e.lastTimestamp) ??
      secondsOf(e.eventTime as Date | string | undefined) ??
      secondsOf(e.firstTimestamp) ??
      secondsOf(e.metadata.creationTimestamp);
    if (at === undefined) continue;
    out.push({
      id: e.metadata.name ?? '',
      at,
      policy: e.reason ?? '',
      reason: e.message ?? '',
      type: e.type === 'Warning' ? 'Warning' : 'Normal',
      changes: [],
      source: 'event',
    });
  }
  return out;
}

/** The last decision of the job's own ScaledTrainingJob status, when it has one made for this job. */
export function statusDecisionOf(
  job: KubeObject,
  stored: JobStateObject | undefined,
): HistoryRecord | undefined {
  if (!ownedBy(stored, job) || !isObject(stored.status)) return undefined;
  const d = stored.status.lastDecision;
  if (!isObject(d) || typeof d.id !== 'string' || typeof d.at !== 'number') return undefined;
  return {
    id: d.id,
    at: d.at,
    policy: typeof d.policy === 'string' ? d.policy : '',
    reason: typeof d.reason === 'string' ? d.reason : '',
    changes: Array.isArray(d.changes) ? (d.changes as Change[]) : [],
    source: 'job-state',
  };
}

/**
 * The job's recorded decisions, oldest first: trainscaler's Events about it and its status's last decision
 * (which lends its changes to the Event named after it). A job that does not exist is NotFoundError.
 */
export async function readJobHistory(cluster: ClusterClient, ref: JobRef): Promise<HistoryRecord[]> {
  const job = await cluster.getJob(ref);
  const [stored, events] = await Promise.all([
    cluster.getJobState(ref),
    cluster.listJobEvents?.(ref) ?? Promise.resolve([]),
  ]);
  const records = trainscalerEventsOf(events, job);
  const last = statusDecisionOf(job, stored);
  if (last) {
    const event = records.find((r) => r.id.endsWith(`.trainscaler.${last.id}`));
    if (event) {
      // Confirmed by the status, which only trainscaler can write: the record is trainscaler's.
      event.changes = last.changes;
      event.source = 'job-state';
    } else records.push(last);
  }
  return records.sort((a, b) => a.at - b.at);
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

/** Where history's records come from, said with them. */
export const HISTORY_SOURCE_NOTE =
  "trainscaler's Events about the job (kept for the API server's event TTL) and its ScaledTrainingJob's last decision; " +
  "the namespace's edit role may create Events too, so an entry the status does not confirm is marked unconfirmed";

/** Marks a record only an Event holds: anyone who may create Events in the namespace could have written it. */
export const UNCONFIRMED_MARK = '  (unconfirmed: an Event only)';

/** One block per decision: when, policy, id, the reason, and every change with its previous value. */
export function renderHistory(ref: JobRef, records: readonly HistoryRecord[]): string {
  const head = `${ref.kind} ${ref.namespace}/${ref.name}`;
  if (records.length === 0) return `${terminalSafe(head)}: no decisions recorded\n`;
  const lines = [`${head}: ${records.length} decision(s), oldest first (${HISTORY_SOURCE_NOTE})`];
  for (const r of records) {
    const warning = r.type === 'Warning' ? '  Warning' : '';
    const unconfirmed = r.source === 'event' ? UNCONFIRMED_MARK : '';
    lines.push(`${new Date(r.at * 1000).toISOString()}  ${r.policy}${warning}  ${r.id}${unconfirmed}`);
    lines.push(`  reason: ${r.reason}`);
    for (const c of r.changes) lines.push(`  - ${describeChange(c)}`);
  }
  return `${lines.map(terminalSafe).join('\n')}\n`;
}

export function registerHistoryCommand(program: Command): Command {
  return program
    .command('history')
    .description(
      "Print what trainscaler decided on a job: its Events about the job and its status's last decision",
    )
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
