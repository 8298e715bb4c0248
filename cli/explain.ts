// `trainscaler explain NAMESPACE/JOB`: the last decision of every policy on a job, "keep" decisions included,
// from what only trainscaler writes: the outcome ConfigMaps `trainscaler run` keeps in its own namespace
// (lib/decisions/outcome-store.ts) and the job's ScaledTrainingJob status (its last decision written, and under
// a Recommend policy its recommendation; the Lambda functions keep no outcome store). Nothing is read from the
// job's annotations (the job owner's to edit), and nothing read reaches the terminal unescaped.
import type { Command } from 'commander';
import { SUPPORTED_KINDS } from '../lib/adapters/job-adapter.js';
import { isObject } from '../lib/adapters/unstructured.js';
import type { ClusterClient, JobStateObject, KubeObject } from '../lib/cluster/cluster-client.js';
import { ownedBy } from '../lib/cluster/job-state.js';
import { type JobOutcomes, readJobOutcomes } from '../lib/decisions/outcome-store.js';
import { ForbiddenError } from '../lib/errors.js';
import type { Change, JobKind, JobRef } from '../lib/types.js';
import {
  describeChange,
  jobRef,
  kindOption,
  statusDecisionOf,
  terminalSafe,
  terminalSafeJson,
} from './history.js';

export interface ExplainedPolicy {
  policy: string;
  /** Epoch seconds since when this has been the policy's decision. */
  at: number;
  outcome: string;
  reason: string;
  /** What the one-line reason leaves out (advice, priors, the arithmetic): shown with --verbose. */
  details?: string[];
  changes: Change[];
  trigger?: string;
  decisionId?: string;
  /** Where it was read: the outcome store, or the job's ScaledTrainingJob status. */
  source: 'outcome-store' | 'job-state';
}

export async function explainJob(
  cluster: ClusterClient,
  storeNamespace: string,
  ref: JobRef,
): Promise<ExplainedPolicy[]> {
  // The job first: a job that does not exist is NotFoundError, not "nothing recorded".
  const job = await cluster.getJob(ref);
  const [stored, state] = await Promise.all([
    readStoredOutcomes(cluster, storeNamespace, ref),
    cluster.getJobState(ref),
  ]);
  const byPolicy = new Map<string, ExplainedPolicy>();
  for (const [policy, s] of Object.entries(stored)) {
    const entry: ExplainedPolicy = {
      policy,
      at: s.at,
      outcome: s.outcome,
      reason: s.reason,
      changes: s.changes,
      trigger: s.trigger,
      source: 'outcome-store',
    };
    if (s.decisionId) entry.decisionId = s.decisionId;
    const details = stringsOf(s.details);
    if (details) entry.details = details;
    byPolicy.set(policy, entry);
  }
  for (const entry of fromJobState(job, state)) {
    const known = byPolicy.get(entry.policy);
    if (!known || known.at < entry.at) byPolicy.set(entry.policy, entry);
  }
  return [...byPolicy.values()].sort((a, b) => a.policy.localeCompare(b.policy));
}

/**
 * The outcome store's entries for the job; none where the caller may not read trainscaler's namespace (a
 * tenant's own credentials): the job's status is still shown.
 */
async function readStoredOutcomes(
  cluster: ClusterClient,
  storeNamespace: string,
  ref: JobRef,
): Promise<JobOutcomes> {
  try {
    return await readJobOutcomes(cluster, storeNamespace, ref);
  } catch (error) {
    if (error instanceof ForbiddenError) return {};
    throw error;
  }
}

/** What the job's ScaledTrainingJob status says was decided: its last decision and its recommendation. */
function fromJobState(job: KubeObject, state: JobStateObject | undefined): ExplainedPolicy[] {
  const out: ExplainedPolicy[] = [];
  const last = statusDecisionOf(job, state);
  if (last)
    out.push({
      policy: last.policy,
      at: last.at,
      outcome: 'applied',
      reason: last.reason,
      changes: last.changes,
      decisionId: last.id,
      source: 'job-state',
    });
  const status = ownedBy(state, job) && isObject(state.status) ? state.status : undefined;
  const r = status?.recommendation;
  if (isObject(r) && typeof r.workers === 'number' && typeof r.at === 'number') {
    const policy = isObject(status?.policy) ? status.policy.name : undefined;
    out.push({
      policy: `TrainingAutoscaler ${typeof policy === 'string' ? policy : '?'}`,
      at: r.at,
      outcome: `recommends ${r.workers} workers (mode Recommend: not written to the job)`,
      reason: typeof r.reason === 'string' ? r.reason : '',
      changes: [],
      source: 'job-state',
    });
  }
  return out;
}

/** Details as read back: strings only, none when empty. */
function stringsOf(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const strings = value.filter((d): d is string => typeof d === 'string');
  return strings.length > 0 ? strings : undefined;
}

export function renderExplanation(
  ref: JobRef,
  policies: readonly ExplainedPolicy[],
  options: { verbose?: boolean } = {},
): string {
  const head = `${ref.kind} ${ref.namespace}/${ref.name}`;
  if (policies.length === 0)
    return `${terminalSafe(head)}: no decision stored yet (trainscaler run stores them; a dry run stores none)\n`;
  const lines = [`${head}: last decision of each policy`];
  for (const p of policies) {
    const via = p.trigger ? ` on ${p.trigger}` : '';
    lines.push(`${p.policy}: ${p.outcome}${via}, since ${new Date(p.at * 1000).toISOString()}`);
    if (p.source === 'job-state') lines.push("  (from the job's ScaledTrainingJob status)");
    lines.push(`  reason: ${p.reason}`);
    if (options.verbose) for (const d of p.details ?? []) lines.push(`  detail: ${d}`);
    for (const c of p.changes) lines.push(`  - ${describeChange(c)}`);
  }
  return `${lines.map(terminalSafe).join('\n')}\n`;
}

export function registerExplainCommand(program: Command): Command {
  return program
    .command('explain')
    .description(
      'Print the last decision of every policy on a job, including "keep" decisions and their reasons',
    )
    .argument('<job>', 'NAMESPACE/JOB')
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: KUBECONFIG, in-cluster ServiceAccount, ~/.kube/config)',
    )
    .option('--kind <kind>', SUPPORTED_KINDS.join(', '), kindOption, 'PyTorchJob' as JobKind)
    .option(
      '--store-namespace <namespace>',
      "trainscaler's namespace (default: TRAINSCALER_PROFILES_NAMESPACE or trainscaler-system)",
    )
    .option('--json', 'print the decisions as JSON')
    .option('--verbose', 'also print the details of each decision (advice, priors, the arithmetic)')
    .action(
      async (
        job: string,
        options: {
          kubeconfig?: string;
          kind: JobKind;
          json?: boolean;
          verbose?: boolean;
          storeNamespace?: string;
        },
      ) => {
        const ref = jobRef(job, options.kind);
        const { KubernetesClusterClient, loadKubeConfig } = await import(
          '../lib/cluster/kubernetes-cluster-client.js'
        );
        const kc = loadKubeConfig(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {});
        const storeNamespace =
          options.storeNamespace || process.env.TRAINSCALER_PROFILES_NAMESPACE || 'trainscaler-system';
        const policies = await explainJob(new KubernetesClusterClient(kc), storeNamespace, ref);
        process.stdout.write(
          options.json
            ? `${terminalSafeJson(policies)}\n`
            : renderExplanation(ref, policies, { verbose: options.verbose === true }),
        );
      },
    );
}
