// Entry of `npm run quickstart` (package.json runs it inside infra/cluster/with-cluster.sh, which starts the test
// control plane unless one is up, exports its kubeconfigs, and stops it afterwards if it started it).
// Ctrl-C stops the current wait and everything started; a second Ctrl-C exits at once.
import { runQuickstart } from './quickstart.js';
import { stampedPrinter } from './story.js';
import { compressedTimingsText } from './timing.js';

async function main(): Promise<number> {
  const adminKubeconfig = process.env.TRAINSCALER_KUBECONFIG;
  const saKubeconfig = process.env.TRAINSCALER_SA_KUBECONFIG;
  if (!adminKubeconfig || !saKubeconfig) {
    process.stderr.write(
      'quickstart: no test cluster (TRAINSCALER_KUBECONFIG, TRAINSCALER_SA_KUBECONFIG); run it as `npm run quickstart`\n',
    );
    return 2;
  }
  const write = (text: string) => process.stdout.write(text);
  write(
    [
      'trainscaler quick start: a real elastic PyTorchJob on a local test cluster, slowed down by contention;',
      'the alert fires, trainscaler grows the job, and the throughput is measured again. A few minutes.',
      ...compressedTimingsText(),
      '',
    ].join('\n'),
  );
  const print = stampedPrinter(write);
  const controller = new AbortController();
  const interrupt = () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  try {
    await runQuickstart({ adminKubeconfig, saKubeconfig, print, signal: controller.signal });
    print('done');
    return 0;
  } catch (error) {
    if (controller.signal.aborted) return 130;
    print(`quickstart failed: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

process.exitCode = await main();
