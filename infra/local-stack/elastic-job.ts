// The real elastic example job (infra/examples/elastic-trainer/pytorchjob.yaml) on the test cluster's host node,
// and the Prometheus targets that follow its pods, shared by the training test and `npm run quickstart`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CoreV1Api, V1Container, V1EnvVar } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { discoveredTargets, type MonitoringStack } from './monitoring.js';
import { torchPython } from './torch-python.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const EXAMPLE_MANIFEST = join(REPO_ROOT, 'infra', 'examples', 'elastic-trainer', 'pytorchjob.yaml');
/** The node whose pods run as real processes (infra/cluster/host-node-agent), started by up.sh as root. */
export const HOST_NODE = 'host-node-0';
/** The example's per-worker batch (its sidecar's TRAINSCALER_LOCAL_BATCH_SIZE). */
export const EXAMPLE_LOCAL_BATCH = 16;

export interface ExampleJobOptions {
  name: string;
  namespace: string;
  /** Environment of the trainer container (TRAIN_LOG_DIR, TRAIN_EPOCHS, ...), replacing the manifest's values. */
  trainer: Record<string, string>;
  /** The sidecar's step-time averaging window (production: 60 s), shortened as the alert rules' durations are. */
  sidecarWindowSeconds: number;
  /** The python with torch that runs the launcher (the manifest's /usr/bin/python3); default: torchPython(). */
  python?: string;
}

interface ExampleJob {
  metadata: { name: string; namespace?: string; annotations: Record<string, string> };
  spec: {
    pytorchReplicaSpecs: {
      Worker: { template: { spec: { containers: V1Container[]; initContainers: V1Container[] } } };
    };
  };
}

function overrideEnv(container: V1Container | undefined, what: string, values: Record<string, string>): void {
  if (!container) throw new Error(`${EXAMPLE_MANIFEST} has no ${what} container`);
  container.env = [
    ...(container.env ?? []).filter((e: V1EnvVar) => !(e.name in values)),
    ...Object.entries(values).map(([name, value]) => ({ name, value })),
  ];
}

/**
 * The example manifest as it is, with this run's name, namespace, trainer environment and sidecar window, and the
 * pinned PyPI torch's python (npm run setup) in place of the manifest's /usr/bin/python3 (Debian's torch 1.13).
 */
export function exampleJobManifest(options: ExampleJobOptions): Record<string, unknown> {
  const job = load(readFileSync(EXAMPLE_MANIFEST, 'utf8')) as ExampleJob;
  job.metadata.name = options.name;
  job.metadata.namespace = options.namespace;
  const spec = job.spec.pytorchReplicaSpecs.Worker.template.spec;
  overrideEnv(spec.containers[0], 'trainer', options.trainer);
  const trainer = spec.containers[0] as V1Container;
  trainer.command = [options.python ?? torchPython(), ...(trainer.command ?? []).slice(1)];
  overrideEnv(
    spec.initContainers.find((c) => c.name === 'trainscaler-sidecar'),
    'trainscaler-sidecar',
    { TRAINSCALER_STEP_WINDOW_SECONDS: String(options.sidecarWindowSeconds) },
  );
  return job as unknown as Record<string, unknown>;
}

/**
 * Keeps Prometheus's targets on the namespace's running pods that declare a `trainscaler` port, as Kubernetes
 * pod discovery would (the Debian Prometheus has none), re-listing every second until stop().
 */
export function followPodTargets(
  core: CoreV1Api,
  namespace: string,
  monitoring: MonitoringStack,
  onError: (error: unknown) => void,
): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const pods = (await core.listNamespacedPod({ namespace })).items;
        const groups = pods
          .filter((p) => p.status?.podIP && p.status.phase === 'Running')
          .filter((p) =>
            [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].some((c) =>
              (c.ports ?? []).some((port) => port.name === 'trainscaler'),
            ),
          )
          .map((p) => discoveredTargets(`${p.status?.podIP}:9470`, p));
        await monitoring.setTargets(groups);
      } catch (error) {
        onError(error);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}
