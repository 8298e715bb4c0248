// `trainscaler forward`: puts the cluster events the Lambda functions act on onto an EventBridge bus.
import { type Command, InvalidArgumentError } from 'commander';

function intBetween(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected an integer ${min}..${max}`);
    return n;
  };
}

export function registerForwardCommand(program: Command): Command {
  return program
    .command('forward')
    .description(
      'Event forwarder for the AWS Lambda deployment: watch pods, PyTorchJobs, TFJobs, StatefulSets, Jobs, JobSets and TrainJobs and put ' +
        'on an EventBridge bus only what the functions act on (OOM kill, eviction, preemption, failure, ' +
        'unschedulable pod; job submitted or succeeded). Logs a summary every minute; /metrics, /healthz.',
    )
    .requiredOption('--bus <name>', 'EventBridge bus name or ARN')
    .option(
      '--kubeconfig <path>',
      'kubeconfig to use (default: KUBECONFIG, in-cluster ServiceAccount, ~/.kube/config)',
    )
    .option('--region <region>', 'AWS region of the bus (default: AWS_REGION)')
    .option(
      '--ledger-namespace <namespace>',
      'namespace of the ledger ConfigMap (default: POD_NAMESPACE or trainscaler-system)',
    )
    .option(
      '--ledger-configmap <name>',
      "ConfigMap remembering what was forwarded across restarts ('none': memory only)",
      'trainscaler-forwarder-ledger',
    )
    .option('--address <address>', 'address of the HTTP server (metrics, healthz)', '0.0.0.0')
    .option('--port <port>', 'port of the HTTP server', intBetween(0, 65535), 8080)
    .option('--statefulset-selector <selector>', 'only StatefulSets matching this label selector')
    .option('--summary-seconds <n>', 'interval of the summary log line', intBetween(1, 86_400), 60)
    .option(
      '--grace-seconds <n>',
      'about an object never forwarded, facts older than this are not sent (default 300)',
      intBetween(0, 86_400),
    )
    .action(async (options: import('../lib/forwarder/forward-command.js').ForwardCommandOptions) => {
      const { forwardCommand, stopOnSignals } = await import('../lib/forwarder/forward-command.js');
      stopOnSignals(await forwardCommand(options));
    });
}
