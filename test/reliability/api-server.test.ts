// Issue 7 on the real API server (infra/cluster, via TRAINSCALER_KUBECONFIG; run with
// `bash infra/cluster/with-cluster.sh ...`): duplicate triggers, injected faults through a TLS-terminating
// proxy, the audit trail and `trainscaler history`, and no secret in any log or CLI output.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { handleSubmit } from '../../functions/submit.js';
import { type ActuatorDeps, actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import { KubernetesClusterClient } from '../../lib/cluster/kubernetes-cluster-client.js';
import { RetryingClusterClient } from '../../lib/cluster/retrying-cluster-client.js';
import { DEFAULT_POLICY_CONFIG } from '../../lib/config.js';
import { ForbiddenError, TrainscalerError } from '../../lib/errors.js';
import { LeaderFencedClusterClient } from '../../lib/runner/fenced-cluster-client.js';
import { LeaderElector } from '../../lib/runner/leader-election.js';
import { KubernetesLeaseLock } from '../../lib/runner/lease-lock.js';
import type { JobRef } from '../../lib/types.js';
import { RecordedMetricsSource } from '../integration/support/recorded-metrics.js';
import {
  createNamespace,
  deleteNamespace,
  elasticPyTorchJob,
  type TestCluster,
  testCluster,
} from '../integration/support/test-cluster.js';
import { type FaultProxy, startFaultProxy } from './support/fault-proxy.js';
import {
  addOneWorker,
  assertStoppedByPinThenCooldown,
  CountingClusterClient,
  deliverUntilHandled,
  tally,
} from './support/scenarios.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..', '..');
const SKIP = process.env.TRAINSCALER_KUBECONFIG
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set: run under `bash infra/cluster/with-cluster.sh` (npm run test:reliability)';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const now = () => Date.now() / 1000;

interface JobDoc {
  spec: { pytorchReplicaSpecs: { Worker: { replicas: number } } };
  metadata: { uid: string; annotations?: Record<string, string> };
}

async function readJob(cluster: TestCluster, namespace: string, name: string): Promise<JobDoc> {
  return (await cluster.admin.custom.getNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    plural: 'pytorchjobs',
    namespace,
    name,
  })) as JobDoc;
}

async function createJob(cluster: TestCluster, namespace: string, name: string): Promise<void> {
  await cluster.admin.custom.createNamespacedCustomObject({
    group: 'kubeflow.org',
    version: 'v1',
    plural: 'pytorchjobs',
    namespace,
    body: elasticPyTorchJob({ name, namespace, workers: 1, min: 1, max: 8 }),
  });
}

function history(job: JobDoc): Array<{ id: string; reason: string; changes: unknown[]; write?: string }> {
  return JSON.parse(job.metadata.annotations?.[ANNOTATION.history] ?? '[]');
}

async function trainscalerEvents(cluster: TestCluster, namespace: string, name: string) {
  const list = await cluster.admin.core.listNamespacedEvent({
    namespace,
    fieldSelector: `involvedObject.name=${name}`,
  });
  return list.items.filter((e) => e.source?.component === 'trainscaler');
}

function runHistoryCli(args: string[]) {
  return spawnSync(
    process.execPath,
    ['--import', 'tsx', join(HERE, 'support', 'history-main.ts'), 'history', ...args],
    { cwd: REPO, encoding: 'utf8', timeout: 60_000 },
  );
}

/** A copy of the SA kubeconfig whose server is the proxy (same user and token, the proxy's CA). */
function proxiedKubeConfig(saKubeconfig: string, proxy: FaultProxy): KubeConfig {
  const sa = new KubeConfig();
  sa.loadFromFile(saKubeconfig);
  const user = sa.getCurrentUser();
  assert.ok(user, 'SA kubeconfig has a user');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'via-proxy',
        server: proxy.url,
        caData: Buffer.from(proxy.caPem).toString('base64'),
        skipTLSVerify: false,
      },
    ],
    users: [user],
    contexts: [{ name: 'via-proxy', cluster: 'via-proxy', user: user.name }],
    currentContext: 'via-proxy',
  });
  return kc;
}

function upstreamOf(saKubeconfig: string): { server: string; caPem: string } {
  const kc = new KubeConfig();
  kc.loadFromFile(saKubeconfig);
  const c = kc.getCurrentCluster();
  assert.ok(c?.caData, 'SA kubeconfig carries certificate-authority-data');
  return { server: c.server, caPem: Buffer.from(c.caData, 'base64').toString('utf8') };
}

describe('reliability on the real API server', { skip: SKIP }, () => {
  let cluster: TestCluster;
  const namespaces: string[] = [];
  before(() => {
    cluster = testCluster();
  });
  after(async () => {
    for (const ns of namespaces) await deleteNamespace(cluster, ns);
  });

  describe('duplicate triggers, audit trail and history', () => {
    let ns = '';
    const ref = (): JobRef => ({ kind: 'PyTorchJob', namespace: ns, name: 'dup' });

    // No duplicate check finds them (the decision id covers the version read): the resourceVersion pin makes all
    // but one patch conflict, and on the re-read the cool-down the winner recorded stops the other 99.
    it('100 concurrent duplicates of one decision make exactly one patch and one Event (pin, then cool-down)', async () => {
      ns = await createNamespace(cluster, 'rel-dup');
      namespaces.push(ns);
      await createJob(cluster, ns, 'dup');
      const counting = new CountingClusterClient(new KubernetesClusterClient(loadSa(cluster)));
      const deps: ActuatorDeps = {
        cluster: counting,
        clock: now,
        dryRun: false,
        logger: quiet,
        namespaceAllowlist: [],
      };
      const outcomes = await Promise.all(
        Array.from({ length: 100 }, () => actOnJob(ref(), addOneWorker, deps)),
      );
      const job = await readJob(cluster, ns, 'dup');
      const events = await trainscalerEvents(cluster, ns, 'dup');
      const skipped = outcomes.filter((o) => !o.applied).map((o) => o.skipped);
      console.log(
        `duplicates (API server): 100 triggers -> ${counting.patchesApplied} patch, ${events.length} Event, ` +
          `${skipped.length} skipped (${[...new Set(skipped)].join(', ')}), ` +
          `${outcomes.reduce((s, o) => s + (o.conflicts ?? 0), 0)} conflicts re-read`,
      );
      assert.equal(counting.patchesApplied, 1);
      assert.equal(outcomes.filter((o) => o.applied).length, 1);
      assertStoppedByPinThenCooldown(outcomes);
      assert.equal(job.spec.pytorchReplicaSpecs.Worker.replicas, 2);
      assert.equal(history(job).length, 1);
      assert.equal(events.length, 1);
    });

    it('the write left an Event and annotations with the reason and the previous value', async () => {
      const job = await readJob(cluster, ns, 'dup');
      const last = JSON.parse(job.metadata.annotations?.[ANNOTATION.lastDecision] ?? '{}');
      const stored = await new KubernetesClusterClient(cluster.admin.kc).getJobState({
        kind: 'PyTorchJob',
        namespace: ns,
        name: 'dup',
      });
      const state = stateOfStatus(stored?.status);
      assert.match(last.reason, /1 -> 2 workers/);
      assert.deepEqual(last.changes, [{ kind: 'replicas', role: 'Worker', from: 1, to: 2 }]);
      assert.equal(state.lastDecisionId, last.id);
      assert.deepEqual(history(job).at(-1), last);
      const [event] = await trainscalerEvents(cluster, ns, 'dup');
      assert.equal(event?.reason, 'TrainscalerTuning');
      assert.equal(event?.message, last.reason);
      assert.equal(event?.involvedObject.uid, job.metadata.uid);
    });

    it('`trainscaler history NAMESPACE/JOB` prints the decisions through the real client', () => {
      const out = runHistoryCli([`${ns}/dup`, '--kubeconfig', cluster.saKubeconfig, '--kind', 'PyTorchJob']);
      assert.equal(out.status, 0, out.stderr);
      assert.match(out.stdout, new RegExp(`PyTorchJob ${ns}/dup: 1 decision`));
      assert.match(out.stdout, /TrainscalerTuning/);
      assert.match(out.stdout, /reason: reliability test: 1 -> 2 workers/);
      assert.match(out.stdout, /- Worker replicas 1 -> 2/);
      const json = runHistoryCli([`${ns}/dup`, '--kubeconfig', cluster.saKubeconfig, '--json']);
      assert.equal(JSON.parse(json.stdout).length, 1);
      const missing = runHistoryCli([`${ns}/nope`, '--kubeconfig', cluster.saKubeconfig]);
      assert.equal(missing.status, 1);
      assert.match(missing.stderr, /not found/);
    });
  });

  describe('injected faults between trainscaler and the API server (20%, seeded)', () => {
    it('applies every intended change exactly once: none lost, none doubled', async () => {
      const ns = await createNamespace(cluster, 'rel-faults');
      namespaces.push(ns);
      const names = Array.from({ length: 8 }, (_, i) => `f${i}`);
      for (const name of names) await createJob(cluster, ns, name);
      const upstream = upstreamOf(cluster.saKubeconfig);
      const proxy = await startFaultProxy({
        upstream: upstream.server,
        upstreamCaPem: upstream.caPem,
        seed: 7,
        rate: 0.2,
        hangMs: 1_500,
      });
      try {
        let retries = 0;
        const client = new RetryingClusterClient(
          new KubernetesClusterClient(proxiedKubeConfig(cluster.saKubeconfig, proxy)),
          {
            attemptTimeoutMs: 1_000,
            baseDelayMs: 20,
            maxDelayMs: 400,
            onRetry: () => {
              retries++;
            },
          },
        );
        const deps: ActuatorDeps = {
          cluster: client,
          clock: now,
          dryRun: false,
          logger: quiet,
          namespaceAllowlist: [],
        };
        // Three duplicate deliveries of each job's trigger at once, each requeued until handled.
        const runs = await Promise.all(
          names.flatMap((name) =>
            Array.from({ length: 3 }, () =>
              deliverUntilHandled({ kind: 'PyTorchJob', namespace: ns, name }, deps),
            ),
          ),
        );
        // A request the proxy held ("timeout") may still reach the API server after the client gave up.
        await new Promise((r) => setTimeout(r, 2_000));
        const jobs = await Promise.all(names.map((name) => readJob(cluster, ns, name)));
        const t = tally(
          jobs.map((j) => ({
            initial: 1,
            final: j.spec.pytorchReplicaSpecs.Worker.replicas,
            decisions: history(j).length,
          })),
        );
        const events = await Promise.all(names.map((name) => trainscalerEvents(cluster, ns, name)));
        const requeues = runs.reduce((s, r) => s + r.requeues, 0);
        console.log(
          `faults (API server via proxy): ${proxy.requests} requests, injected ` +
            `${[...proxy.injected].map(([k, v]) => `${k} ${v}`).join(', ')}; ${retries} client retries, ` +
            `${requeues} trigger requeues; intended ${t.intended}, applied ${t.applied}, lost ${t.lost}, ` +
            `doubled ${t.doubled}; Events ${events.reduce((s, e) => s + e.length, 0)} of ${t.intended}`,
        );
        assert.ok([...proxy.injected.values()].reduce((a, b) => a + b, 0) > 0, 'faults were injected');
        assert.deepEqual(t, { intended: 8, applied: 8, lost: 0, doubled: 0 });
        assert.equal(runs.filter((r) => r.outcome.applied).length, 8, 'one applied outcome per job');
        // Event creation is retried only on 429/503 (a repeat after a drop could double it): under faults an Event
        // may be lost (the annotations are the durable record), never doubled.
        for (const e of events) assert.ok(e.length <= 1, 'at most one Event per write');
      } finally {
        await proxy.close();
      }
    });
  });

  describe('a replica that loses its lease mid-retry', () => {
    it('sends no write to the API server once the lease is lost, however many retries were left', async () => {
      const ns = await createNamespace(cluster, 'rel-fence');
      namespaces.push(ns);
      await createJob(cluster, ns, 'fenced');
      const admin = new KubeConfig();
      admin.loadFromFile(cluster.adminKubeconfig);
      // A real Lease on the API server, acquired when the decision is made.
      const elector = new LeaderElector({
        lock: new KubernetesLeaseLock(admin, ns, 'trainscaler-leader'),
        identity: 'replica-a',
      });
      const upstream = upstreamOf(cluster.saKubeconfig);
      // Every write is answered 503 without reaching the API server while the lease is held.
      const proxy = await startFaultProxy({
        upstream: upstream.server,
        upstreamCaPem: upstream.caPem,
        seed: 1,
        rate: 1,
        hangMs: 0,
        faults: ['unavailable'],
        writesOnly: true,
      });
      let lostAt = '';
      try {
        const kc = proxiedKubeConfig(cluster.saKubeconfig, proxy);
        let retries = 0;
        const client = new RetryingClusterClient(
          new LeaderFencedClusterClient(new KubernetesClusterClient(kc), elector),
          {
            maxAttempts: 20,
            baseDelayMs: 250,
            maxDelayMs: 250,
            random: () => 1,
            // Three attempts failed: the replica loses its lease in the backoff before the fourth, and the
            // proxy stops failing, so any further attempt would land.
            onRetry: () => {
              if (++retries !== 3) return;
              void elector.stop({ release: true });
              proxy.setRate(0);
            },
          },
        );
        const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'fenced' };
        const deps = { cluster: client, clock: now, dryRun: false, logger: quiet, namespaceAllowlist: [] };
        const decide = async (snapshot: Parameters<typeof addOneWorker>[0]) => {
          await elector.tick();
          assert.equal(elector.isLeader(), true);
          return addOneWorker(snapshot);
        };
        await assert.rejects(actOnJob(ref, decide, deps), (e: unknown) => {
          assert.ok(e instanceof ForbiddenError, String(e));
          assert.match(e.message, /does not hold lease/);
          lostAt = e.message;
          return true;
        });
      } finally {
        await proxy.close();
        await elector.stop();
      }
      const attempts = proxy.writes.length;
      const landed = proxy.writes.filter((w) => w.forwarded).length;
      console.log(
        `fence (API server): ${attempts} patch attempts sent while leading (all refused by the proxy), ` +
          `then "${lostAt}"; ${landed} writes reached the API server`,
      );
      assert.equal(attempts, 3, 'three attempts while the lease was held, none after');
      assert.equal(landed, 0);
      const job = await readJob(cluster, ns, 'fenced');
      assert.equal(job.spec.pytorchReplicaSpecs.Worker.replicas, 1);
      assert.equal(history(job).length, 0);
    });

    it('cancels the HTTP request in flight and bounds the API server by the same limit', async () => {
      const ns = await createNamespace(cluster, 'rel-abort');
      namespaces.push(ns);
      await createJob(cluster, ns, 'slow');
      const upstream = upstreamOf(cluster.saKubeconfig);
      const proxy = await startFaultProxy({
        upstream: upstream.server,
        upstreamCaPem: upstream.caPem,
        seed: 1,
        rate: 1,
        hangMs: 4_000,
        faults: ['timeout'],
        writesOnly: true,
      });
      try {
        const client = new KubernetesClusterClient(proxiedKubeConfig(cluster.saKubeconfig, proxy));
        const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'slow' };
        const lease = new AbortController();
        const started = performance.now();
        setTimeout(() => lease.abort(new Error('lease lost')), 300);
        const patch = [
          { op: 'replace' as const, path: '/spec/pytorchReplicaSpecs/Worker/replicas', value: 2 },
        ];
        await assert.rejects(
          client.patchJob(ref, patch, { dryRun: false, signal: lease.signal, timeoutMs: 1_500 }),
          TrainscalerError,
        );
        const ms = performance.now() - started;
        console.log(`abort (API server): the request in flight ended ${Math.round(ms)} ms after it was sent`);
        assert.ok(ms < 2_000, `aborted at once, not after the proxy's ${4_000} ms`);
        assert.match(proxy.writes[0]?.url ?? '', /[?&]timeout=1500ms/);
      } finally {
        await proxy.close();
      }
    });
  });

  describe('no secret in logs or CLI output', () => {
    it('a full flow with the SA token in play logs no token, key or certificate data', async () => {
      const rejectedToken = `eyJ${randomBytes(48).toString('base64url')}`;
      const ns = await createNamespace(cluster, 'rel-secrets');
      namespaces.push(ns);
      await createJob(cluster, ns, 'sec');
      const chunks: string[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          chunks.push(chunk.toString('utf8'));
          done();
        },
      });
      const logger = pino({ level: 'debug' }, sink);
      const upstream = upstreamOf(cluster.saKubeconfig);
      const proxy = await startFaultProxy({
        upstream: upstream.server,
        upstreamCaPem: upstream.caPem,
        seed: 3,
        rate: 0.3,
        hangMs: 1_500,
      });
      try {
        const kc = proxiedKubeConfig(cluster.saKubeconfig, proxy);
        const client = new RetryingClusterClient(new KubernetesClusterClient(kc), {
          attemptTimeoutMs: 1_000,
          baseDelayMs: 10,
          maxDelayMs: 100,
          onRetry: ({ operation, attempt, error }) =>
            logger.warn(
              { operation, attempt, error: error instanceof Error ? error.message : String(error) },
              'retry',
            ),
        });
        const deps = {
          cluster: client,
          metrics: new RecordedMetricsSource(new Map()),
          clock: () => Math.floor(now()),
          config: DEFAULT_POLICY_CONFIG,
          dryRun: false,
          logger,
          profiles: { namespace: 'trainscaler-system', configMapName: 'trainscaler-profiles' },
        };
        const ref: JobRef = { kind: 'PyTorchJob', namespace: ns, name: 'sec' };
        await deliverUntilHandled(ref, {
          cluster: client,
          clock: now,
          dryRun: false,
          logger,
          namespaceAllowlist: [],
        });
        for (let i = 0; i < 3; i++) {
          try {
            const r = await handleSubmit(ref, deps);
            logger.info({ outcomes: r.outcomes }, 'submit handled');
          } catch (error) {
            logger.error({ err: error }, 'submit failed');
          }
        }
        // Failures carry the client's exceptions as causes: log them the way a careless caller would. The
        // 401 path sends a token of its own (random, credential-shaped); it is searched for below with the rest.
        const badToken = new KubeConfig();
        badToken.loadFromOptions({
          clusters: [
            { name: 'c', server: upstream.server, caData: Buffer.from(upstream.caPem).toString('base64') },
          ],
          users: [{ name: 'u', token: rejectedToken }],
          contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
          currentContext: 'c',
        });
        for (const c of [new KubernetesClusterClient(kc), new KubernetesClusterClient(badToken)]) {
          try {
            await c.getJob({ ...ref, name: 'missing' });
          } catch (error) {
            assert.ok(error instanceof TrainscalerError);
            logger.error({ err: error }, 'typed failure');
          }
        }
      } finally {
        await proxy.close();
      }
      const cli = [
        runHistoryCli([`${ns}/sec`, '--kubeconfig', cluster.saKubeconfig]),
        runHistoryCli([`${ns}/missing`, '--kubeconfig', cluster.saKubeconfig]),
        runHistoryCli(['no-slash', '--kubeconfig', cluster.saKubeconfig]),
      ];
      const output = chunks.join('') + cli.map((r) => r.stdout + r.stderr).join('');
      assert.ok(chunks.length > 5, 'the flow logged');
      assert.match(output, /decision applied/);
      // The 401 path really ran (and was logged), with the token it sent in play.
      assert.ok(
        output.split('\n').some((line) => line.includes('typed failure') && line.includes('Unauthorized')),
        'the 401 failure was logged',
      );
      const secrets = [
        ...secretsIn([cluster.saKubeconfig, cluster.adminKubeconfig]),
        { what: 'the token the API server refused (401)', value: rejectedToken },
      ];
      assert.ok(secrets.length >= 5, 'found the tokens, CA, client certificate and key to look for');
      const leaked = secrets.filter((s) => output.includes(s.value)).map((s) => s.what);
      console.log(
        `secrets: ${output.length} characters of logs and CLI output searched for ${secrets.length} secret strings: ` +
          `${leaked.length} found`,
      );
      assert.deepEqual(leaked, []);
      assert.doesNotMatch(output, /Bearer /i);
    });
  });
});

function loadSa(cluster: TestCluster): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.saKubeconfig);
  return kc;
}

/** Every credential in the kubeconfigs: raw as stored, decoded, and a line of each decoded PEM body. */
function secretsIn(files: string[]): { what: string; value: string }[] {
  const out: { what: string; value: string }[] = [];
  for (const file of files) {
    const kc = new KubeConfig();
    kc.loadFromString(readFileSync(file, 'utf8'));
    const user = kc.getCurrentUser();
    const clusterCa = kc.getCurrentCluster()?.caData;
    const fields: [string, string | undefined][] = [
      ['token', user?.token],
      ['client-key-data', user?.keyData],
      ['client-certificate-data', user?.certData],
      ['certificate-authority-data', clusterCa],
    ];
    for (const [what, value] of fields) {
      if (!value) continue;
      out.push({ what: `${what} (${file})`, value });
      if (what === 'token') continue;
      const pem = Buffer.from(value, 'base64').toString('utf8');
      const body = pem.split('\n').filter((l) => l.length > 40 && !l.startsWith('-----'));
      const line = body[1] ?? body[0];
      if (line) out.push({ what: `${what} PEM line (${file})`, value: line });
    }
  }
  return out;
}
