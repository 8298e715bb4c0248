// Payloads say which job an event concerns, nothing more: whether a job succeeded (and may feed the shared
// profile store) or is new (and may be given its initial size) is read from the live job.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleClusterEvent } from '../../../functions/cluster-event.js';
import { handleSubmit, SUBMIT_WINDOW_SECONDS } from '../../../functions/submit.js';
import { ANNOTATION } from '../../../lib/adapters/annotations.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { DEFAULT_PROFILE_LIMITS, profileKey, recordRun } from '../../../lib/decisions/profile-store.js';
import { ValidationError } from '../../../lib/errors.js';
import type { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { harness, TOY, toyJob, writesSince } from './handler-harness.js';

const STORE = { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' };
const SUCCEEDED = { conditions: [{ type: 'Succeeded', status: 'True', reason: 'JobSucceeded' }] };

/** A watch MODIFIED event of the job as the payload claims it, whatever the API server says. */
function claimed(job: KubeObject, changes: Partial<KubeObject> = {}) {
  return { type: 'MODIFIED', object: { ...job, status: SUCCEEDED, ...changes } };
}

async function profiles(sim: SimulatedCluster) {
  return (await sim.getConfigMap(STORE.namespace, STORE.configMapName))?.data ?? {};
}

describe('profile writes re-read the job', () => {
  it('a "succeeded" event for a job the API server reports running writes no profile', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob());
    sim.step(900);
    const result = await handleClusterEvent(claimed(await sim.getJob(TOY)), deps);
    assert.match(result.ignored ?? '', /does not report the job succeeded/);
    assert.deepEqual(await profiles(sim), {});
  });

  it('a job that did not opt in, or opted out, writes no profile even when the payload says it is managed', async () => {
    for (const live of [undefined, 'false']) {
      const { sim, deps } = harness();
      const job = toyJob({ targetSamples: 200_000 });
      if (live === undefined) delete job.metadata.annotations?.[ANNOTATION.managed];
      else job.metadata.annotations = { ...job.metadata.annotations, [ANNOTATION.managed]: live };
      sim.submitJob(job);
      sim.step(3600);
      const stored = await sim.getJob(TOY);
      assert.equal(sim.jobStatus(TOY).phase, 'Succeeded');
      const forged = {
        ...stored.metadata,
        annotations: { ...stored.metadata.annotations, [ANNOTATION.managed]: 'true' },
      };
      const result = await handleClusterEvent(claimed(stored, { metadata: forged }), deps);
      assert.match(result.ignored ?? '', /not managed/, String(live));
      assert.deepEqual(await profiles(sim), {});
    }
  });

  it('a job that really succeeded and opted in has its run recorded (the checks above are not vacuous)', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ targetSamples: 200_000 }));
    sim.step(3600);
    assert.equal(sim.jobStatus(TOY).phase, 'Succeeded');
    const result = await handleClusterEvent(claimed(await sim.getJob(TOY)), deps);
    assert.match(result.ignored ?? '', /profile of toy updated/);
    assert.deepEqual(Object.keys(await profiles(sim)), [
      profileKey({ namespace: TOY.namespace, signature: 'toy' }),
    ]);
  });
});

describe('the per-namespace share the deployment sets (TRAINSCALER_PROFILES_PER_NAMESPACE)', () => {
  it("a finished run drops its namespace's oldest profile at a share of 1, and keeps it at the default", async () => {
    const kept = async (perNamespace: number | undefined) => {
      const { sim, deps } = harness();
      const older = { namespace: TOY.namespace, signature: 'older', usage: [] };
      const sample = { replicas: 2, nodes: 1, localBatchSize: 32, stepTime: 0.5, at: 100 };
      await recordRun(sim, STORE, { ...older, samples: [sample] }, 100, false);
      sim.submitJob(toyJob({ targetSamples: 200_000 }));
      sim.step(3600);
      const result = await handleClusterEvent(claimed(await sim.getJob(TOY)), {
        ...deps,
        profiles: { ...deps.profiles, ...(perNamespace !== undefined ? { perNamespace } : {}) },
      });
      assert.match(result.ignored ?? '', /profile of toy updated/);
      return Object.keys(await profiles(sim)).sort();
    };
    const toy = profileKey({ namespace: TOY.namespace, signature: 'toy' });
    const older = profileKey({ namespace: TOY.namespace, signature: 'older' });
    assert.deepEqual(await kept(1), [toy]);
    assert.deepEqual(await kept(undefined), [older, toy].sort());
  });
});

describe('profile store bounds', () => {
  const key = (signature: string, namespace = TOY.namespace) => profileKey({ namespace, signature });
  const run = (signature: string, namespace = TOY.namespace) => ({
    namespace,
    signature,
    samples: [{ replicas: 2, nodes: 1, localBatchSize: 32, stepTime: 0.5, at: 100 }],
    usage: [],
  });

  it('refuses an over-long signature and writes nothing', async () => {
    const { sim } = harness();
    const long = 'x'.repeat(DEFAULT_PROFILE_LIMITS.maxSignatureLength + 1);
    await assert.rejects(recordRun(sim, STORE, run(long), 1000, false), ValidationError);
    await recordRun(sim, STORE, run('x'.repeat(DEFAULT_PROFILE_LIMITS.maxSignatureLength)), 1000, false);
    assert.equal(Object.keys(await profiles(sim)).length, 1);
  });

  it('refuses a profile larger than the limit', async () => {
    const { sim } = harness();
    const limits = { ...DEFAULT_PROFILE_LIMITS, maxProfileBytes: 200 };
    await assert.rejects(recordRun(sim, STORE, run('a'), 1000, false, { limits }), /at most 200/);
    assert.deepEqual(await profiles(sim), {});
  });

  it('keeps at most maxProfiles: the least recently updated (unreadable first) are dropped, with a warning', async () => {
    const { sim } = harness();
    const limits = { ...DEFAULT_PROFILE_LIMITS, maxProfiles: 3 };
    const warnings: object[] = [];
    const logger = { warn: (obj: object) => warnings.push(obj) };
    await recordRun(sim, STORE, run('old'), 1000, false, { limits, logger });
    await recordRun(sim, STORE, run('mid'), 2000, false, { limits, logger });
    await recordRun(sim, STORE, run('new'), 3000, false, { limits, logger });
    assert.equal(warnings.length, 0);
    await recordRun(sim, STORE, run('newest'), 4000, false, { limits, logger });
    assert.deepEqual(
      Object.keys(await profiles(sim)).sort(),
      ['mid', 'new', 'newest'].map((sig) => key(sig)).sort(),
    );
    assert.equal(warnings.length, 1);
    assert.deepEqual((warnings[0] as { dropped: string[] }).dropped, [key('old')]);
    // A garbage entry (hand-edited, or a store filled by other means) goes before any readable profile.
    const cm = await sim.getConfigMap(STORE.namespace, STORE.configMapName);
    const data = { ...cm?.data };
    delete data[key('newest')];
    data.junk = 'x'.repeat(100);
    await sim.putConfigMap(STORE.namespace, STORE.configMapName, data, cm?.metadata?.resourceVersion, {
      dryRun: false,
    });
    await recordRun(sim, STORE, run('latest'), 5000, false, { limits, logger });
    assert.deepEqual(
      Object.keys(await profiles(sim)).sort(),
      ['mid', 'new', 'latest'].map((sig) => key(sig)).sort(),
    );
    // Updating a stored signature never drops anything.
    await recordRun(sim, STORE, run('mid'), 6000, false, { limits, logger });
    assert.equal(Object.keys(await profiles(sim)).length, 3);
    assert.equal(warnings.length, 2);
  });

  it("one namespace writing many signatures makes room among its own, never dropping another namespace's", async () => {
    const { sim } = harness();
    const limits = { ...DEFAULT_PROFILE_LIMITS, maxProfiles: 4, maxProfilesPerNamespace: 2 };
    await recordRun(sim, STORE, run('a1', 'team-a'), 1000, false, { limits });
    await recordRun(sim, STORE, run('a2', 'team-a'), 2000, false, { limits });
    for (let i = 1; i <= 5; i++)
      await recordRun(sim, STORE, run(`b${i}`, 'team-b'), 2000 + i, false, { limits });
    assert.deepEqual(
      Object.keys(await profiles(sim)).sort(),
      [key('a1', 'team-a'), key('a2', 'team-a'), key('b4', 'team-b'), key('b5', 'team-b')].sort(),
    );
    // Under its share with the store full of others' profiles, a namespace takes none of them.
    const warnings: object[] = [];
    const logger = { warn: (obj: object) => warnings.push(obj) };
    await recordRun(sim, STORE, run('c1', 'team-c'), 9000, false, { limits, logger });
    assert.deepEqual(
      Object.keys(await profiles(sim)).sort(),
      [key('a1', 'team-a'), key('a2', 'team-a'), key('b4', 'team-b'), key('b5', 'team-b')].sort(),
    );
    assert.equal(warnings.length, 1, 'not stored, with a warning');
    // A profile abandoned for abandonedAfterSeconds (its namespace or signature no longer runs) makes room.
    const later = 1000 + DEFAULT_PROFILE_LIMITS.abandonedAfterSeconds + 1;
    await recordRun(sim, STORE, run('c1', 'team-c'), later, false, { limits });
    assert.deepEqual(
      Object.keys(await profiles(sim)).sort(),
      [key('a2', 'team-a'), key('b4', 'team-b'), key('b5', 'team-b'), key('c1', 'team-c')].sort(),
    );
  });

  it("a tenant flooding signatures into a full store drops none of the other tenants' profiles", async () => {
    const { sim } = harness();
    const limits = { ...DEFAULT_PROFILE_LIMITS, maxProfiles: 6, maxProfilesPerNamespace: 3 };
    const victims = [
      ...['a1', 'a2', 'a3'].map((sig) => key(sig, 'team-a')),
      ...['b1', 'b2'].map((sig) => key(sig, 'team-b')),
    ];
    for (const [i, k] of victims.entries()) {
      const [ns, sig] = [k.split('.')[0] ?? '', k.split('.')[1] ?? ''];
      await recordRun(sim, STORE, run(sig, ns), 1000 + i, false, { limits });
    }
    // The attacker's first profile takes the store's last free slot; every further signature replaces its own.
    for (let i = 0; i < 200; i++)
      await recordRun(sim, STORE, run(`flood-${i}`, 'team-x'), 5000 + i, false, { limits });
    const stored = Object.keys(await profiles(sim));
    assert.deepEqual(stored.filter((k) => !k.startsWith('team-x.')).sort(), victims.sort());
    assert.deepEqual(
      stored.filter((k) => k.startsWith('team-x.')),
      [key('flood-199', 'team-x')],
    );
    // And a victim still updates its own profiles and adds within its share by replacing its oldest.
    await recordRun(sim, STORE, run('b3', 'team-b'), 9000, false, { limits });
    assert.ok(Object.keys(await profiles(sim)).includes(key('b3', 'team-b')));
    assert.equal(Object.keys(await profiles(sim)).length, 6);
  });

  it('keys a profile by namespace and signature: the same signature in two namespaces is two profiles', () => {
    assert.notEqual(key('toy', 'team-a'), key('toy', 'team-b'));
    assert.match(key('toy', 'team-a'), /^team-a\.toy\.[0-9a-f]{8}$/);
    // The longest signature and namespace accepted still make a valid ConfigMap key.
    const longest = key('x'.repeat(DEFAULT_PROFILE_LIMITS.maxSignatureLength), 'n'.repeat(63));
    assert.ok(longest.length <= 253, String(longest.length));
    assert.match(longest, /^[-._a-zA-Z0-9]+$/);
  });
});

describe('submit for a job that already runs is a no-op', () => {
  it('a replayed submit after the job started training changes nothing and says why', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 6, minReplicas: 1, maxReplicas: 4 }));
    const first = await handleSubmit(TOY, deps);
    assert.equal(first.outcomes[0]?.applied, true);
    sim.step(120);
    const mark = sim.writeLog().length;
    const replayed = await handleSubmit(TOY, deps);
    assert.equal(replayed.outcomes[0]?.applied, false);
    assert.match(replayed.outcomes[0]?.plan.reason ?? '', /not a new job: trainscaler already configured it/);
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it('a late submit for a job running for a while (never configured) changes nothing', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 6, minReplicas: 1, maxReplicas: 4 }));
    sim.step(SUBMIT_WINDOW_SECONDS + 60);
    const mark = sim.writeLog().length;
    const late = await handleSubmit(TOY, deps);
    assert.equal(late.outcomes[0]?.applied, false);
    assert.match(late.outcomes[0]?.plan.reason ?? '', /not a new job: created \d+ s ago/);
    assert.deepEqual(writesSince(sim, mark), []);
  });

  it('a submit for a young job whose pods have been training changes nothing', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 6, minReplicas: 1, maxReplicas: 4 }));
    sim.step(120);
    const late = await handleSubmit(TOY, deps);
    assert.equal(late.outcomes[0]?.applied, false);
    assert.match(late.outcomes[0]?.plan.reason ?? '', /not a new job: pod toy-worker-\d has been training/);
  });
});
