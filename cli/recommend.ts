// `trainscaler recommend NAMESPACE/JOB`: what trainscaler would decide for the job now, reviewed as an alert on
// it would be (its metrics, the cluster's free capacity, the guardrails), and nothing written: the review runs as
// a dry run whatever TRAINSCALER_DRY_RUN says.
import type { Command } from 'commander';
import { handleAlarm } from '../functions/alarm.js';
import type { HandlerDeps, HandlerResult } from '../functions/handler-deps.js';
import { SUPPORTED_KINDS } from '../lib/adapters/job-adapter.js';
import type { JobKind, JobRef } from '../lib/types.js';
import { describeChange, jobRef, kindOption, terminalSafe, terminalSafeJson } from './history.js';

/** The alert a person asks for: the same review as an Alertmanager alert on the job. */
const ASKED_ALERT = 'TrainscalerRecommendAsked';

export async function recommendFor(ref: JobRef, deps: HandlerDeps): Promise<HandlerResult> {
  const labels = { alertname: ASKED_ALERT, namespace: ref.namespace, job_kind: ref.kind, job_name: ref.name };
  const webhook = { version: '4', status: 'firing', alerts: [{ status: 'firing', labels }] };
  return handleAlarm(webhook, { ...deps, dryRun: true });
}

export function renderRecommendation(ref: JobRef, result: HandlerResult, verbose = false): string {
  const lines = [`${ref.kind} ${ref.namespace}/${ref.name}: what trainscaler would do now (nothing written)`];
  for (const { plan } of result.outcomes) {
    lines.push(`${plan.policy}: ${plan.changes.length > 0 ? 'would change' : 'keep'}: ${plan.reason}`);
    for (const c of plan.changes) lines.push(`  - ${describeChange(c)}`);
    if (verbose) for (const d of plan.details ?? []) lines.push(`  ${d}`);
  }
  for (const e of result.errors) lines.push(`no recommendation (${e.code}): ${e.message}`);
  return `${lines.map(terminalSafe).join('\n')}\n`;
}

export function registerRecommendCommand(program: Command): Command {
  return program
    .command('recommend')
    .description('Print what trainscaler would decide for a job now, with its reasons; writes nothing')
    .argument('<job>', 'NAMESPACE/JOB')
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: KUBECONFIG, in-cluster ServiceAccount, ~/.kube/config)',
    )
    .option('--kind <kind>', SUPPORTED_KINDS.join(', '), kindOption, 'PyTorchJob' as JobKind)
    .option('--verbose', 'also print each decision’s details')
    .option('--json', 'print the decisions as JSON')
    .action(
      async (
        job: string,
        options: { kubeconfig?: string; kind: JobKind; verbose?: boolean; json?: boolean },
      ) => {
        const ref = jobRef(job, options.kind);
        const { loadKubeConfig } = await import('../lib/cluster/kubernetes-cluster-client.js');
        const { buildRuntimeDeps, readRuntimeConfig } = await import('../functions/runtime-deps.js');
        const kc = loadKubeConfig(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {});
        const result = await recommendFor(ref, buildRuntimeDeps(readRuntimeConfig(process.env), kc));
        process.stdout.write(
          options.json
            ? `${terminalSafeJson({ outcomes: result.outcomes.map((o) => o.plan), errors: result.errors })}\n`
            : renderRecommendation(ref, result, options.verbose),
        );
        if (result.errors.length > 0) process.exitCode = 1;
      },
    );
}
