// A SimulatedCluster with handler deps around it, for handler tests: the same wiring as the demo.

import assert from 'node:assert/strict';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import type { HandlerDeps } from '../../../functions/handler-deps.js';
import type { ClusterClient, KubeObject } from '../../../lib/cluster/cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../../lib/config.js';
import { recordRun } from '../../../lib/decisions/profile-store.js';
import type { ThroughputModel } from '../../../lib/model/throughput-model.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { pytorchJobManifest } from '../../../lib/sim/training-job-manifests.js';
import type { Change, JobRef, Plan } from '../../../lib/types.js';
import { FIXED_APP_MODEL, GiB } from '../sim/fixed-app-model.js';

export { GiB };

export function harness(options: { dryRun?: boolean } = {}) {
  const sim = new SimulatedCluster({ seed: 7, apps: FIXED_APP_MODEL });
  const logged: string[] = [];
  const log = (level: string) => (obj: object, msg?: string) =>
    logged.push(`${level} ${msg ?? ''} ${JSON.stringify(obj)}`);
  const deps: HandlerDeps = {
    cluster: sim,
    metrics: sim,
    clock: sim.clock.now,
    config: DEFAULT_POLICY_CONFIG,
    dryRun: options.dryRun ?? false,
    logger: { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') },
    profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
  };
  return { sim, deps, logged };
}

export function toyJob(overrides: Partial<Parameters<typeof pytorchJobManifest>[0]> = {}): KubeObject {
  return pytorchJobManifest({
    name: 'toy',
    namespace: 'team-a',
    app: 'toy',
    workers: 1,
    minReplicas: 1,
    maxReplicas: 4,
    sizing: { gpus: 1, cpuMillis: 4000, memoryBytes: 10 * GiB },
    targetSamples: 50_000_000,
    ...overrides,
  });
}

export const TOY: JobRef = { kind: 'PyTorchJob', namespace: 'team-a', name: 'toy' };

/** Writes to jobs, pods and events (what a handler must not do on bad input), ignoring the test's own setup. */
export function writesSince(sim: SimulatedCluster, mark: number) {
  return sim.writeLog().slice(mark);
}

/** Feeds every pending watch event to the cluster-event handler, like the runner does. */
export async function deliverEvents(sim: SimulatedCluster, deps: HandlerDeps) {
  const results = [];
  for (const event of sim.drainEvents()) results.push(await handleClusterEvent(event, deps));
  return results;
}

/**
 * The simulator's methods, bound, as a plain object whose members a test may replace. Without the batch
 * metrics reads (`...OfJobs`): the tick then reads job by job through the members here, so that a test
 * replacing a per-job read (stepSamples) replaces what the tick sees.
 */
export function replaceable(sim: SimulatedCluster): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let proto = Object.getPrototypeOf(sim); proto && proto !== Object.prototype; ) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const value: unknown = Reflect.get(sim, name);
      if (name.endsWith('OfJobs')) continue;
      if (name !== 'constructor' && !(name in out) && typeof value === 'function')
        out[name] = value.bind(sim);
    }
    proto = Object.getPrototypeOf(proto);
  }
  return out;
}

/** The simulator as a ClusterClient that counts every call it answers, by method. */
export function countingClient(sim: SimulatedCluster): {
  cluster: ClusterClient;
  calls: Map<string, number>;
} {
  const calls = new Map<string, number>();
  const methods = replaceable(sim);
  for (const [name, method] of Object.entries(methods)) {
    methods[name] = (...args: unknown[]) => {
      calls.set(name, (calls.get(name) ?? 0) + 1);
      return (method as (...a: unknown[]) => unknown)(...args);
    };
  }
  return { cluster: methods as unknown as ClusterClient, calls };
}

/** The toy job's worker-1, running: a worker that may be evicted (not worker-0, the c10d store's host). */
export async function runningWorkerOne(sim: SimulatedCluster): Promise<{ pod: string; node: string }> {
  const found = (await sim.listPods('team-a')).find(
    (p) => p.spec?.nodeName && p.metadata?.name?.endsWith('-worker-1'),
  );
  assert.ok(found?.metadata?.name && found.spec?.nodeName);
  return { pod: found.metadata.name, node: found.spec.nodeName };
}

/** A straggler plan for the toy job: avoid the pod's node, evict the pod. */
export const replaceStraggler = (pod: string, node: string) => (): Plan => ({
  ref: TOY,
  policy: 'straggler',
  reason: `worker 1 slow; evicting ${pod}`,
  changes: [{ kind: 'avoid-node', role: 'Worker', node } as Change, { kind: 'evict-pod', pod }],
});

/** `deps` with every model of `signature` passed through `wrap`: a bug one signature's data reaches. */
export function breakingSignature(
  deps: HandlerDeps,
  signature: string,
  wrap: (model: ThroughputModel) => ThroughputModel,
): HandlerDeps {
  return { ...deps, throughputOracle: (s, model) => (s === signature ? wrap(model) : model) };
}

/** The samples of an earlier run at 1, 2 and 4 workers: a profile a queued job of the signature is valued by. */
export const PROFILE_SAMPLES = [1, 2, 4].map((replicas) => ({
  replicas,
  nodes: 1,
  localBatchSize: 32,
  stepTime: 0.2,
}));

/** Records an earlier run of `signature` in `namespace` with PROFILE_SAMPLES, as a finished job would. */
export function recordProfile(
  sim: SimulatedCluster,
  deps: HandlerDeps,
  namespace: string,
  signature: string,
) {
  return recordRun(
    sim,
    deps.profiles,
    { namespace, signature, samples: PROFILE_SAMPLES, usage: [] },
    0,
    false,
  );
}
