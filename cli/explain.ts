// `trainscaler explain NAMESPACE/JOB`: the last decision of every policy on a job, "keep" decisions included,
// from what the cluster stores: the outcome ConfigMaps `trainscaler run` keeps (lib/decisions/outcome-store.ts)
// and, for a policy the store has nothing on (the Lambda functions keep no store), the decisions written on the
// job itself (trainscaler.io/history). The store is in trainscaler's namespace, where tenants cannot write; the
// annotation is the job owner's to edit, so what comes from it is labelled, and nothing read from either
// reaches the terminal unescaped.
import type { Command } from 'commander';
import { SUPPORTED_KINDS } from '../lib/adapters/job-adapter.js';
import type { ClusterClient } from '../lib/cluster/cluster-client.js';
import { type JobOutcomes, readJobOutcomes } from '../lib/decisions/outcome-store.js';
import type { Change, JobKind, JobRef } from '../lib/types.js';
import {
  describeChange,
  HISTORY_SOURCE_NOTE,
  jobRef,
  kindOption,
  readJobHistory,
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
  /** Where it was read: the outcome store, or the job's own history annotation. */
  source: 'outcome-store' | 'job-history';
}

export async function explainJob(
  cluster: ClusterClient,
  storeNamespace: string,
  ref: JobRef,
): Promise<ExplainedPolicy[]> {
  // The job first: a job that does not exist is NotFoundError, not "nothing recorded".
  const history = await readJobHistory(cluster, ref);
  const stored: JobOutcomes = await readJobOutcomes(cluster, storeNamespace, ref);
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
  for (const r of history) {
    // What trainscaler stored wins whatever the annotation's dates say (its owner may have written them).
    const known = byPolicy.get(r.policy);
    if (known?.source === 'outcome-store' || (known && known.at >= r.at)) continue;
    const details = stringsOf(r.details);
    byPolicy.set(r.policy, {
      policy: r.policy,
      at: r.at,
      outcome: 'applied',
      reason: r.reason,
      ...(details ? { details } : {}),
      changes: r.changes,
      decisionId: r.id,
      source: 'job-history',
    });
  }
  return [...byPolicy.values()].sort((a, b) => a.policy.localeCompare(b.policy));
}

/** Details as read back: strings only (the annotation is the job owner's to edit), none when empty. */
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
    if (p.source === 'job-history') lines.push(`  (${HISTORY_SOURCE_NOTE})`);
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
