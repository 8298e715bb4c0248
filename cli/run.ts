// `trainscaler run`: the controller deployment (infra/k8s), or the same from a laptop with a kubeconfig.
import { type Command, InvalidArgumentError } from 'commander';

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a TCP port');
  return n;
}

export function registerRunCommand(program: Command): Command {
  return program
    .command('run')
    .description(
      'Run as a controller: watch PyTorchJobs, TFJobs, StatefulSets, Jobs, JobSets, TrainJobs and pods, rebalance on a schedule, serve ' +
        'Alertmanager webhooks, /metrics and /healthz. Replicas elect one leader (Lease), only it acts. ' +
        'Configuration as for Lambda: PROMETHEUS_URL, TRAINSCALER_* (see README).',
    )
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: KUBECONFIG, in-cluster ServiceAccount, ~/.kube/config)',
    )
    .option('--prometheus-url <url>', 'Prometheus scraping the training jobs (default: PROMETHEUS_URL)')
    .option(
      '--namespace <namespace>',
      'namespace of the leader Lease (default: POD_NAMESPACE or trainscaler-system)',
    )
    .option('--lease-name <name>', 'name of the leader Lease', 'trainscaler-leader')
    .option('--identity <id>', 'this replica in the Lease (default: POD_NAME or host-pid)')
    .option(
      '--address <address>',
      'address of the HTTP server (webhook, metrics, healthz) (default: TRAINSCALER_ADDRESS or 127.0.0.1; ' +
        'infra/k8s sets 0.0.0.0)',
    )
    .option('--port <port>', 'port of the HTTP server', port, 8080)
    .option('--schedule <cron>', 'rebalance schedule, UTC (default: TRAINSCALER_SCHEDULE or * * * * *)')
    .option('--statefulset-selector <selector>', 'only StatefulSets matching this label selector')
    .option(
      '--webhook-token-file <path>',
      'file holding the bearer token Alertmanager must send to /alertmanager (default: ' +
        'TRAINSCALER_WEBHOOK_TOKEN_FILE; without one the webhook answers 401 to everything)',
    )
    .option('--dry-run', 'decide and log, but send every write as a server-side dry run')
    .action(async (options: import('../lib/runner/run-command.js').RunCommandOptions) => {
      const { runCommand } = await import('../lib/runner/run-command.js');
      await runCommand(options);
    });
}
