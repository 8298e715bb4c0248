// A pod that publishes series labelled as another job (another namespace's, or its own namespace's with the
// job's name) must not make trainscaler treat it as one of that job's pods: no eviction, no right-sizing from
// its numbers, no decision. The identity labels come from service discovery in infra/prometheus/prometheus.yml
// (test/metrics/ checks that with a real Prometheus); this checks the second line of defence, the live owner
// check, with the handlers on the simulated cluster.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { handleAlarm } from '../../../functions/alarm.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import { loadSnapshot } from '../../../lib/actuator.js';
import type { ClusterClient } from '../../../lib/cluster/cluster-client.js';
import type { MetricsSource } from '../../../lib/metrics/metrics-source.js';
import type { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import type { ContainerUsage, WorkerStepTimes } from '../../../lib/types.js';
import { alertmanagerWebhook } from '../../fixtures/payloads.js';
import { harness, TOY, toyJob, writesSince } from './handler-harness.js';

/** In the job's namespace, labelled as the job's worker 9 (labels anyone may set), owned by something else. */
function impostorPod(): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'toy-worker-9',
      namespace: 'team-a',
      uid: 'impostor',
      labels: {
        'training.kubeflow.org/job-name': 'toy',
        'training.kubeflow.org/replica-type': 'worker',
        'training.kubeflow.org/replica-index': '9',
      },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'miner', uid: 'r', controller: true },
      ],
    },
    spec: { nodeName: 'node-0', containers: [{ name: 'pytorch', image: 'miner:1' }] },
    status: { phase: 'Running' },
  };
}

/** The simulation's own methods (bound: it keeps private state), some of them replaced. */
function delegate<T extends object>(target: T, methods: readonly (keyof T)[], overrides: Partial<T>): T {
  const out: Partial<T> = {};
  for (const m of methods) {
    const f = target[m];
    if (typeof f === 'function') out[m] = f.bind(target);
  }
  return { ...out, ...overrides } as T;
}

const CLUSTER_METHODS: (keyof ClusterClient)[] = [
  'getJob',
  'listJobs',
  'patchJob',
  'listPods',
  'listNodes',
  'evictPod',
  'createEvent',
  'getConfigMap',
  'putConfigMap',
  'listWorkloads',
  'getLocalQueue',
  'getClusterQueue',
  'getJobState',
  'listJobStates',
  'putJobState',
];
const METRICS_METHODS: (keyof MetricsSource)[] = [
  'stepSamples',
  'containerUsage',
  'workerStepTimes',
  'samplesProcessed',
];

/** The cluster as the simulation has it, plus the impostor pod among the job's label matches. */
function withImpostor(sim: SimulatedCluster): ClusterClient {
  return delegate<ClusterClient>(sim, CLUSTER_METHODS, {
    listPods: async (namespace: string | undefined, selector?: string) => {
      const pods = await sim.listPods(namespace, selector);
      const matches = namespace === undefined || namespace === 'team-a';
      return matches && (!selector || selector.includes('job-name=toy')) ? [...pods, impostorPod()] : pods;
    },
  });
}

/** The simulation's metrics, plus a slow worker series and huge usage published under the job's labels by `pod`. */
function spoofedBy(sim: SimulatedCluster, pod: string): MetricsSource {
  return delegate<MetricsSource>(sim, METRICS_METHODS, {
    workerStepTimes: async (ref: typeof TOY, window: number): Promise<WorkerStepTimes[]> => {
      const real = await sim.workerStepTimes(ref, window);
      const first = real[0];
      assert.ok(first, 'the job has per-worker series');
      // Slow lately (a transient straggler, the kind replacing a pod cures).
      const recent = first.samples.length - 5;
      const slow = first.samples.map((s, i) => ({
        ...s,
        stepTime: i >= recent ? s.stepTime * 3 : s.stepTime,
      }));
      return [...real.filter((w) => w.pod !== pod), { worker: 9, pod, samples: slow }];
    },
    containerUsage: async (ref: typeof TOY, window: number): Promise<ContainerUsage[]> => {
      const real = await sim.containerUsage(ref, window);
      return [...real, { pod, role: 'Worker', cpuMillis: 64_000, memoryBytes: 200 * 1024 ** 3 }];
    },
  });
}

function setUp() {
  const { sim, deps } = harness();
  sim.submitJob(toyJob({ workers: 3, maxReplicas: 3 }));
  sim.step(900);
  return { sim, deps };
}

const alarm = () => alertmanagerWebhook([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'toy' }]);

describe('metric spoofing', () => {
  it("a pod labelled as the job's but not owned by it is not read as one of the job's pods", async () => {
    const { sim } = setUp();
    const snapshot = await loadSnapshot(withImpostor(sim), TOY);
    const names = snapshot.pods.map((p) => p.name).sort();
    assert.deepEqual(names, ['toy-worker-0', 'toy-worker-1', 'toy-worker-2']);
  });

  for (const [who, pod] of [
    ['a pod in another namespace', 'evil-trainer-0'],
    ["an impostor in the job's namespace", 'toy-worker-9'],
  ] as const) {
    it(`series published by ${who} cause no eviction, no resize, no write`, async () => {
      const { sim, deps } = setUp();
      const spoofed: HandlerDeps = { ...deps, cluster: withImpostor(sim), metrics: spoofedBy(sim, pod) };
      const mark = sim.writeLog().length;
      const result = await handleAlarm(alarm(), spoofed);
      const outcome = result.outcomes[0];
      assert.ok(outcome, JSON.stringify(result.errors));
      assert.deepEqual(outcome.plan.changes, [], outcome.plan.reason);
      assert.match(
        [outcome.plan.reason, ...(outcome.plan.details ?? [])].join('; '),
        new RegExp(`ignored metrics of pods the job does not own: ${pod}`),
      );
      assert.deepEqual(writesSince(sim, mark), []);
    });
  }

  it('the same slow series under one of its own pods does evict it (the check above is not vacuous)', async () => {
    const { sim, deps } = setUp();
    const result = await handleAlarm(alarm(), { ...deps, metrics: spoofedBy(sim, 'toy-worker-1') });
    const changes = result.outcomes[0]?.plan.changes ?? [];
    assert.deepEqual(
      changes.filter((c) => c.kind === 'evict-pod'),
      [{ kind: 'evict-pod', pod: 'toy-worker-1' }],
      result.outcomes[0]?.plan.reason,
    );
  });
});
