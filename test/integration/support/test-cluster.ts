// The real control plane for integration tests (infra/cluster/up.sh: etcd, kube-apiserver, controller-manager,
// scheduler, kwok, Kubeflow training-operator). Tests use the trainscaler ServiceAccount for everything the
// autoscaler does, so RBAC is exercised, and the admin identity only for fixtures.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface TestCluster {
  adminKubeconfig: string;
  saKubeconfig: string;
  admin: { core: CoreV1Api; custom: CustomObjectsApi; kc: KubeConfig };
}

let cached: TestCluster | undefined;

/** TRAINSCALER_KUBECONFIG when set (CI starts the cluster first), else `infra/cluster/up.sh` (seconds when up). */
export function testCluster(): TestCluster {
  if (cached) return cached;
  let adminKubeconfig = process.env.TRAINSCALER_KUBECONFIG;
  if (!adminKubeconfig) {
    const out = execFileSync('bash', [join(REPO_ROOT, 'infra/cluster/up.sh')], {
      stdio: ['ignore', 'pipe', 'inherit'],
      encoding: 'utf8',
      timeout: 90 * 60 * 1000,
    });
    adminKubeconfig = out.trim().split('\n').at(-1) ?? '';
  }
  const saKubeconfig =
    process.env.TRAINSCALER_SA_KUBECONFIG ?? join(dirname(adminKubeconfig), 'kubeconfig-sa');
  if (!existsSync(adminKubeconfig) || !existsSync(saKubeconfig)) {
    throw new Error(
      `test cluster kubeconfigs not found (${adminKubeconfig}, ${saKubeconfig}); run npm run cluster:up`,
    );
  }
  const kc = new KubeConfig();
  kc.loadFromFile(adminKubeconfig);
  cached = {
    adminKubeconfig,
    saKubeconfig,
    admin: { kc, core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) },
  };
  return cached;
}

export async function createNamespace(cluster: TestCluster, prefix: string): Promise<string> {
  const name = `${prefix}-${Date.now().toString(36)}`;
  await cluster.admin.core.createNamespace({ body: { metadata: { name } } });
  return name;
}

export async function deleteNamespace(cluster: TestCluster, name: string): Promise<void> {
  await cluster.admin.core.deleteNamespace({ name }).catch(() => undefined);
}

/** Polls until `check` returns a value (not undefined), bounded in time. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`,
  );
}

export async function workerPods(cluster: TestCluster, namespace: string, job: string): Promise<V1Pod[]> {
  const list = await cluster.admin.core.listNamespacedPod({
    namespace,
    labelSelector: `training.kubeflow.org/job-name=${job},training.kubeflow.org/replica-type=worker`,
  });
  return list.items;
}

export function elasticPyTorchJob(input: {
  name: string;
  namespace: string;
  workers: number;
  min: number;
  max: number;
  memory?: string;
  gpus?: number;
  priorityClassName?: string;
  annotations?: Record<string, string>;
  /** elasticPolicy.maxRestarts; 10 by default, as a user who lets trainscaler shrink the job sets it. */
  maxRestarts?: number;
}) {
  const memory = input.memory ?? '2Gi';
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: {
      name: input.name,
      namespace: input.namespace,
      annotations: { 'trainscaler.io/managed': 'true', ...input.annotations },
    },
    spec: {
      elasticPolicy: {
        minReplicas: input.min,
        maxReplicas: input.max,
        rdzvBackend: 'c10d',
        maxRestarts: input.maxRestarts ?? 10,
      },
      pytorchReplicaSpecs: {
        Worker: {
          replicas: input.workers,
          restartPolicy: 'OnFailure',
          template: {
            spec: {
              ...(input.priorityClassName ? { priorityClassName: input.priorityClassName } : {}),
              containers: [
                {
                  name: 'pytorch',
                  image: 'registry.example.com/train:1',
                  command: ['torchrun', 'train.py'],
                  resources: {
                    requests: { cpu: '1', memory, 'nvidia.com/gpu': String(input.gpus ?? 1) },
                    limits: { memory, 'nvidia.com/gpu': String(input.gpus ?? 1) },
                  },
                },
              ],
            },
          },
        },
      },
    },
  };
}
