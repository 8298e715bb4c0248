// What running real torchelastic jobs taught (README "A real elastic job"), as guardrails every plan passes:
// worker-0 of an elastic c10d PyTorchJob hosts the rendezvous store and is never evicted or replaced; each
// scale-down spends one of elasticPolicy.maxRestarts, so shrinking stops while one restart is left.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { handleSubmit } from '../../functions/submit.js';
import { actOnJob } from '../../lib/actuator.js';
import { ANNOTATION } from '../../lib/adapters/annotations.js';
import { buildJobPatch, readJob, torchElasticOf } from '../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../lib/cluster/cluster-client.js';
import { stateOfStatus } from '../../lib/cluster/job-state.js';
import {
  applyGuardrails,
  type GuardrailConfig,
  type GuardrailContext,
  placedReplicasOf,
  protectedPodsOf,
  spendsRestart,
} from '../../lib/guardrails.js';
import { rendezvousAdvice } from '../../lib/policies/initial-config.js';
import type { Change, JobView, Plan, PodView, RoleName } from '../../lib/types.js';
import { recordedState } from '../support/job-states.js';
import { jobView, workerRole } from '../support/job-views.js';
import { GiB, harness, TOY, toyJob } from './functions/handler-harness.js';

const NOW = 1_800_000_000;
const config: GuardrailConfig = {
  namespaceAllowlist: [],
  maxReplicaStep: 2,
  cooldownSeconds: 300,
  maxMemoryBytes: 64 * GiB,
  maxClusterGpus: Number.POSITIVE_INFINITY,
};
const R = { cpuMillis: 1000, memoryBytes: GiB, gpus: 0 };

function elasticJob(torchElastic: JobView['torchElastic'], scaleDowns?: number): JobView {
  return jobView(
    {
      ...(torchElastic ? { torchElastic } : {}),
      state: { oomCount: 0, paused: false, ...(scaleDowns === undefined ? {} : { scaleDowns }) },
    },
    [workerRole(R, { replicas: 4, minReplicas: 0, maxReplicas: 8 })],
  );
}

function runningPods(count: number): PodView[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `bert-worker-${i}`,
    namespace: 'ml',
    role: 'Worker' as const,
    index: i,
    phase: 'Running' as const,
    nodeName: `node-${i}`,
    restartCount: 0,
    requests: R,
    limits: R,
  }));
}

function guard(
  job: JobView,
  changes: Change[],
  extra: Partial<GuardrailContext> = {},
  policy: Plan['policy'] = 'straggler',
) {
  const pods = runningPods(4);
  return applyGuardrails(
    { ref: job.ref, policy, reason: 'why', changes },
    {
      job,
      config,
      now: NOW,
      protectedPods: protectedPodsOf(job, pods),
      placedReplicas: { Worker: 4 },
      ...extra,
    },
  );
}

const C10D = { c10dStore: true, rdzvConf: {}, tuneRendezvous: false, trainscalerLauncher: false };

describe('torchelastic facts read from the PyTorchJob', () => {
  const withPolicy = (elasticPolicy: Record<string, unknown> | undefined): KubeObject => {
    const obj = toyJob();
    const spec = obj.spec as Record<string, unknown>;
    if (elasticPolicy === undefined) delete spec.elasticPolicy;
    else spec.elasticPolicy = elasticPolicy;
    return obj;
  };
  it('c10d or an unset backend puts the store in worker-0; etcd does not; no elasticPolicy is no torchelastic', () => {
    assert.equal(torchElasticOf(withPolicy({ rdzvBackend: 'c10d' }))?.c10dStore, true);
    assert.equal(torchElasticOf(withPolicy({ minReplicas: 1 }))?.c10dStore, true);
    assert.equal(torchElasticOf(withPolicy({ rdzvBackend: 'etcd-v2' }))?.c10dStore, false);
    assert.equal(torchElasticOf(withPolicy(undefined)), undefined);
    assert.equal(readJob(withPolicy(undefined)).torchElastic, undefined);
  });
  it('reads maxRestarts and rdzvConf entries {key, value}', () => {
    const te = torchElasticOf(
      withPolicy({ maxRestarts: 5, rdzvConf: [{ key: 'last_call_timeout', value: '2' }, { key: 'bad' }] }),
    );
    assert.equal(te?.maxRestarts, 5);
    assert.deepEqual(te?.rdzvConf, { last_call_timeout: '2' });
  });
  it('unset maxRestarts is what torchrun gets: PET_MAX_RESTARTS, else --max_restarts, else its default 0', () => {
    const workerContainer = (obj: KubeObject) => {
      const spec = obj.spec as {
        pytorchReplicaSpecs: { Worker: { template: { spec: { containers: Record<string, unknown>[] } } } };
      };
      const container = spec.pytorchReplicaSpecs.Worker.template.spec.containers[0];
      assert.ok(container);
      return container;
    };
    const unset = withPolicy({ minReplicas: 1 });
    assert.deepEqual(
      [torchElasticOf(unset)?.maxRestarts, torchElasticOf(unset)?.maxRestartsFrom],
      [0, 'torchrun default'],
    );
    const withEnv = withPolicy({ minReplicas: 1 });
    workerContainer(withEnv).env = [{ name: 'PET_MAX_RESTARTS', value: '7' }];
    assert.deepEqual(
      [torchElasticOf(withEnv)?.maxRestarts, torchElasticOf(withEnv)?.maxRestartsFrom],
      [7, 'env'],
    );
    const withFlag = withPolicy({ minReplicas: 1 });
    workerContainer(withFlag).command = ['torchrun', '--max_restarts', '3', 'train.py'];
    assert.deepEqual(
      [torchElasticOf(withFlag)?.maxRestarts, torchElasticOf(withFlag)?.maxRestartsFrom],
      [3, 'command'],
    );
    workerContainer(withFlag).command = ['torchrun', '--max-restarts=4', 'train.py'];
    assert.equal(torchElasticOf(withFlag)?.maxRestarts, 4);
    const both = withPolicy({ maxRestarts: 9 });
    workerContainer(both).env = [{ name: 'PET_MAX_RESTARTS', value: '7' }];
    assert.deepEqual(
      [torchElasticOf(both)?.maxRestarts, torchElasticOf(both)?.maxRestartsFrom],
      [9, 'elasticPolicy'],
    );
  });
  it('a running job read with no maxRestarts anywhere is not shrunk: torchrun would fail it on the first', () => {
    const te = torchElasticOf(withPolicy({ minReplicas: 1, maxReplicas: 8 }));
    const shrink: Change[] = [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }];
    const out = guard(elasticJob(te), shrink, {}, 'rebalance');
    assert.deepEqual(out.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 4 }]);
    assert.deepEqual(
      guard(elasticJob({ ...C10D, maxRestarts: 2 }), shrink, {}, 'rebalance').plan.changes,
      shrink,
    );
  });
});

describe('rule 1: worker-0 of an elastic c10d PyTorchJob is never evicted or replaced', () => {
  it('refuses the eviction of worker-0 (and the node preference written with it), whatever the policy', () => {
    for (const policy of ['straggler', 'fault', 'rebalance'] as const) {
      const out = guard(
        elasticJob(C10D),
        [
          { kind: 'avoid-node', role: 'Worker', node: 'node-0' },
          { kind: 'evict-pod', pod: 'bert-worker-0' },
        ],
        {},
        policy,
      );
      assert.deepEqual(out.plan.changes, [], policy);
      assert.match(
        [out.plan.reason, ...(out.plan.details ?? [])].join('; '),
        /not evicting bert-worker-0 is worker-0, the host of the job's c10d rendezvous store/,
      );
    }
  });
  it('lets the eviction of worker-1 through, and of worker-0 when the store is elsewhere (etcd) or no elasticPolicy', () => {
    const one: Change[] = [{ kind: 'evict-pod', pod: 'bert-worker-1' }];
    assert.deepEqual(guard(elasticJob(C10D), one).plan.changes, one);
    const zero: Change[] = [{ kind: 'evict-pod', pod: 'bert-worker-0' }];
    assert.deepEqual(
      guard(
        elasticJob({ c10dStore: false, rdzvConf: {}, tuneRendezvous: false, trainscalerLauncher: false }),
        zero,
      ).plan.changes,
      zero,
    );
    assert.deepEqual(guard(elasticJob(undefined), zero).plan.changes, zero);
  });
  it('a scale to zero keeps worker-0; a scale to one (highest indices removed) passes', () => {
    const queued = { queued: true };
    const toZero = guard(
      elasticJob(C10D),
      [{ kind: 'replicas', role: 'Worker', from: 4, to: 0 }],
      queued,
      'fault',
    );
    assert.deepEqual(toZero.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 1 }]);
    const toOne = guard(
      elasticJob(C10D),
      [{ kind: 'replicas', role: 'Worker', from: 4, to: 1 }],
      queued,
      'fault',
    );
    assert.deepEqual(toOne.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 1 }]);
  });
  it('keeps the node preference written with the eviction of another worker', () => {
    const evictOne: Change[] = [
      { kind: 'avoid-node', role: 'Worker', node: 'node-1' },
      { kind: 'evict-pod', pod: 'bert-worker-1' },
    ];
    assert.deepEqual(guard(elasticJob(C10D), evictOne).plan.changes, evictOne);
  });
  it('protects the Worker role only, and raises only a Worker scale to zero', () => {
    const master: PodView = {
      name: 'bert-master-0',
      namespace: 'ml',
      role: 'Master',
      index: 0,
      phase: 'Running',
      nodeName: 'node-m',
      restartCount: 0,
      requests: R,
      limits: R,
    };
    const withMaster = jobView({ torchElastic: C10D }, [
      workerRole(R, { replicas: 4, minReplicas: 0, maxReplicas: 8 }),
      workerRole(R, { role: 'Master', replicas: 1, minReplicas: 0, maxReplicas: 1 }),
    ]);
    const pods = [master, ...runningPods(4)];
    assert.deepEqual([...protectedPodsOf(withMaster, pods).keys()], ['bert-worker-0']);
    const masterToZero: Change[] = [{ kind: 'replicas', role: 'Master', from: 1, to: 0 }];
    const out = applyGuardrails(
      { ref: withMaster.ref, policy: 'fault', reason: 'why', changes: masterToZero },
      {
        job: withMaster,
        config,
        now: NOW,
        protectedPods: protectedPodsOf(withMaster, pods),
        queued: true,
      },
    );
    assert.deepEqual(out.plan.changes, masterToZero);
  });
  it('never grows a job already at zero workers', () => {
    const atZero = jobView({ torchElastic: C10D }, [
      workerRole(R, { replicas: 0, minReplicas: 0, maxReplicas: 8 }),
    ]);
    const out = applyGuardrails(
      {
        ref: atZero.ref,
        policy: 'fault',
        reason: 'why',
        changes: [{ kind: 'replicas', role: 'Worker', from: 0, to: 0 }],
      },
      {
        job: atZero,
        config,
        now: NOW,
        protectedPods: new Map([['bert-worker-0', 'worker-0']]),
        queued: true,
      },
    );
    assert.deepEqual(out.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 0, to: 0 }]);
  });
});

describe('rule 1 in the actuator: the protected pods come from the live pods it read', () => {
  it('writes nothing and evicts nothing for a plan naming worker-0; evicts worker-1', async () => {
    const { sim, deps } = harness();
    sim.submitJob(toyJob({ workers: 2, minReplicas: 1, maxReplicas: 4 }));
    sim.step(60);
    const base = {
      cluster: sim,
      clock: sim.clock.now,
      dryRun: false,
      logger: deps.logger,
      namespaceAllowlist: [],
    };
    const evict = (pod: string) => (): Plan => ({
      ref: TOY,
      policy: 'straggler',
      reason: 'slow',
      changes: [{ kind: 'evict-pod', pod }],
    });
    const mark = sim.writeLog().length;
    const refused = await actOnJob(TOY, evict('toy-worker-0'), base);
    assert.equal(refused.applied, false);
    assert.match(
      [refused.plan.reason, ...(refused.plan.details ?? [])].join('; '),
      /toy-worker-0 is worker-0, the host of the job's c10d rendezvous store/,
    );
    assert.deepEqual(sim.writeLog().slice(mark), []);
    const evicted = await actOnJob(TOY, evict('toy-worker-1'), base);
    assert.equal(evicted.applied, true);
    assert.ok(sim.writeLog().some((w) => w.verb === 'evict' && w.target.endsWith('toy-worker-1')));
  });
});

describe('rule 2: scale-downs stop while one of maxRestarts is left', () => {
  const shrink: Change[] = [{ kind: 'replicas', role: 'Worker', from: 4, to: 3 }];
  const te = { ...C10D, maxRestarts: 4 };
  it('shrinks with 2 of 4 restarts spent; keeps the size with 3 of 4 spent, and says why', () => {
    assert.deepEqual(guard(elasticJob(te, 2), shrink, {}, 'rebalance').plan.changes, shrink);
    const out = guard(elasticJob(te, 3), shrink, {}, 'rebalance');
    assert.deepEqual(out.plan.changes, [{ kind: 'replicas', role: 'Worker', from: 4, to: 4 }]);
    assert.match(
      [out.plan.reason, ...(out.plan.details ?? [])].join('; '),
      /3 of the job's maxRestarts 4 already spent on scale-downs.*reserve for a real failure/,
    );
  });
  it('never limits growth, nor a job without maxRestarts', () => {
    const grow: Change[] = [{ kind: 'replicas', role: 'Worker', from: 4, to: 5 }];
    assert.deepEqual(guard(elasticJob(te, 9), grow, {}, 'rebalance').plan.changes, grow);
    assert.deepEqual(guard(elasticJob(C10D, 9), shrink, {}, 'rebalance').plan.changes, shrink);
  });
  it('exempts a fault shrink that removes only pods that cannot run (never placed): it spends no restart', () => {
    // Worker 3 is unschedulable (or evicted): 3 placed. Shrinking to 3 restarts no running worker.
    const placed = { placedReplicas: { Worker: 3 } };
    const to = (n: number): Change[] => [{ kind: 'replicas', role: 'Worker', from: 4, to: n }];
    assert.deepEqual(guard(elasticJob(te, 3), to(3), placed, 'fault').plan.changes, to(3));
    // One more removes a running worker: that spends a restart and is held.
    assert.deepEqual(guard(elasticJob(te, 3), to(2), placed, 'fault').plan.changes, to(4));
  });

  it('spends a restart only on removing a running worker of a torchelastic job', () => {
    const job = elasticJob(te);
    const placed = { placedReplicas: { Worker: 4 } };
    const workers = (from: number, to: number, role: RoleName = 'Worker'): Change => ({
      kind: 'replicas',
      role,
      from,
      to,
    });
    assert.equal(spendsRestart(workers(4, 3), job, placed), true);
    assert.equal(spendsRestart(workers(4, 5), job, placed), false, 'growth');
    assert.equal(spendsRestart(workers(4, 4), job, placed), false, 'no change');
    assert.equal(
      spendsRestart(workers(4, 3, 'Master'), job, { placedReplicas: { Worker: 4, Master: 4 } }),
      false,
      'another role',
    );
    assert.equal(spendsRestart(workers(4, 3), elasticJob(undefined), placed), false, 'not torchelastic');
    const memory: Change = {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'limits',
      from: 4 * GiB,
      to: 2 * GiB,
    };
    assert.equal(spendsRestart(memory, job, placed), false, 'a resources change');
    assert.equal(spendsRestart(workers(4, 3), job, { placedReplicas: { Worker: 3 } }), false, 'never placed');
    assert.equal(spendsRestart(workers(4, 3), job, { queued: true }), false, 'queued');
  });

  it('counts as placed the pods bound to a node that have not finished', () => {
    const pods = runningPods(4).map((p) =>
      p.index === 3
        ? { ...p, phase: 'Succeeded' as const }
        : p.index === 2
          ? { ...p, phase: 'Failed' as const }
          : p,
    );
    assert.deepEqual(placedReplicasOf(pods), { Worker: 2 });
    const unbound = runningPods(4).map((p) => (p.index === 3 ? { ...p, nodeName: undefined } : p));
    assert.deepEqual(placedReplicasOf(unbound), { Worker: 3 });
  });

  it('the actuator counts each applied scale-down of running workers in the state annotation, not growth', async () => {
    const { sim, deps } = harness();
    const job = toyJob({ workers: 4, minReplicas: 1, maxReplicas: 8 });
    (job.spec as { elasticPolicy: { maxRestarts: number } }).elasticPolicy.maxRestarts = 3;
    sim.submitJob(job);
    sim.step(60);
    const base = {
      cluster: sim,
      clock: sim.clock.now,
      dryRun: false,
      logger: deps.logger,
      namespaceAllowlist: [],
    };
    const deps0 = { ...base, guardrails: { cooldownSeconds: 0, maxReplicaStep: 1 } };
    const to =
      (n: number) =>
      (s: { view: JobView }): Plan => ({
        ref: TOY,
        policy: 'rebalance',
        reason: `to ${n}`,
        changes: [{ kind: 'replicas', role: 'Worker', from: s.view.roles[0]?.replicas ?? 0, to: n }],
      });
    const state = async () => stateOfStatus(await recordedState(sim, TOY));
    assert.equal((await actOnJob(TOY, to(3), deps0)).applied, true);
    assert.equal((await state()).scaleDowns, 1);
    assert.equal((await state()).askedWorkers, 4, "the first write records the user's size");
    sim.step(60);
    assert.equal((await actOnJob(TOY, to(4), deps0)).applied, true, 'growth');
    assert.equal((await state()).scaleDowns, 1, 'growth spends no restart');
    sim.step(60);
    assert.equal((await actOnJob(TOY, to(3), deps0)).applied, true);
    assert.equal((await state()).scaleDowns, 2);
    assert.equal((await state()).askedWorkers, 4, 'later writes keep it');
    sim.step(60);
    const held = await actOnJob(TOY, to(2), deps0);
    assert.equal(held.applied, false, 'maxRestarts 3, 2 spent: the last is kept');
    assert.match(
      [held.plan.reason, ...(held.plan.details ?? [])].join('; '),
      /2 of the job's maxRestarts 3 already spent/,
    );
    assert.equal(
      (await sim.getJob(TOY)).spec && (await readJob(await sim.getJob(TOY))).roles[0]?.replicas,
      3,
    );
  });
});

describe('rule 1: an OOM-killed worker-0 may be replaced (it already took the store down)', () => {
  it('worker-0 killed by OOM is not protected; worker-0 that exited otherwise, or runs, is', () => {
    const job = elasticJob(C10D);
    const pods = runningPods(2);
    const oom = pods.map((p) => (p.index === 0 ? { ...p, lastTermination: { reason: 'OOMKilled' } } : p));
    const error = pods.map((p) => (p.index === 0 ? { ...p, lastTermination: { reason: 'Error' } } : p));
    assert.deepEqual([...protectedPodsOf(job, oom).keys()], []);
    assert.deepEqual([...protectedPodsOf(job, error).keys()], ['bert-worker-0']);
    assert.deepEqual([...protectedPodsOf(job, pods).keys()], ['bert-worker-0']);
  });
});

describe('rule 3: rendezvous settings that make rescales cheap, recommended on submit', () => {
  const tuned = (annotations: Record<string, string>, rdzvConf?: unknown[], env?: unknown[]): KubeObject => {
    const obj = toyJob();
    obj.metadata.annotations = { ...obj.metadata.annotations, ...annotations };
    const spec = obj.spec as {
      elasticPolicy: Record<string, unknown>;
      pytorchReplicaSpecs: { Worker: { template: { spec: { containers: Record<string, unknown>[] } } } };
    };
    if (rdzvConf) spec.elasticPolicy.rdzvConf = rdzvConf;
    const container = spec.pytorchReplicaSpecs.Worker.template.spec.containers[0];
    if (env && container) container.env = env;
    return obj;
  };
  const ALLOW = { [ANNOTATION.tuneRendezvous]: 'true' };

  it('recommends both with torchrun defaults, says what and why, and sets nothing without the annotation', () => {
    const advice = rendezvousAdvice(readJob(tuned({})));
    assert.deepEqual(advice?.changes, []);
    assert.match(
      advice?.note ?? '',
      /recommend PET_MONITOR_INTERVAL=1 in the Worker's env \(torchrun's default\)/,
    );
    assert.match(advice?.note ?? '', /last_call_timeout=2 in elasticPolicy.rdzvConf/);
    assert.match(
      advice?.note ?? '',
      /3\.3 s up \/ 3\.6 s down with the launcher and these settings, 11\.2 s \/ 22\.2 s with torchrun and these settings, 39\.8 s \/ 47\.1 s with torchrun's defaults/,
    );
    assert.match(advice?.note ?? '', /trainscaler\.io\/tune-rendezvous: "true"/);
  });

  it('says nothing of the settings at or below the recommended values; recommends again just above them', () => {
    const at = readJob(
      tuned({}, [{ key: 'last_call_timeout', value: '2' }], [{ name: 'PET_MONITOR_INTERVAL', value: '1' }]),
    );
    assert.doesNotMatch(rendezvousAdvice(at)?.note ?? '', /rendezvous: recommend/);
    assert.deepEqual(rendezvousAdvice(at)?.changes, []);
    const above = readJob(
      tuned({}, [{ key: 'last_call_timeout', value: '3' }], [{ name: 'PET_MONITOR_INTERVAL', value: '1' }]),
    );
    assert.match(
      rendezvousAdvice(above)?.note ?? '',
      /recommend last_call_timeout=2 in elasticPolicy.rdzvConf \(now 3\)/,
    );
    assert.doesNotMatch(rendezvousAdvice(above)?.note ?? '', /PET_MONITOR_INTERVAL/);
  });

  it('recommends the launcher to a job that runs torchrun, and never sets the command, even where allowed', () => {
    const withCommand = (command: string[], annotations: Record<string, string> = {}) => {
      const obj = tuned(annotations);
      const spec = obj.spec as {
        pytorchReplicaSpecs: { Worker: { template: { spec: { containers: Record<string, unknown>[] } } } };
      };
      const container = spec.pytorchReplicaSpecs.Worker.template.spec.containers[0];
      if (container) container.command = command;
      return obj;
    };
    const torchrun = rendezvousAdvice(readJob(withCommand(['torchrun', 'train.py'], ALLOW)));
    assert.match(
      torchrun?.note ?? '',
      /launcher: recommend `python3 -m trainscaler_hook\.launch` in place of torchrun/,
    );
    assert.ok(
      torchrun?.changes.every((c) => c.kind === 'rendezvous'),
      'only rendezvous settings are set',
    );
    const launched = readJob(withCommand(['python3', '-m', 'trainscaler_hook.launch', 'train.py']));
    assert.equal(launched.torchElastic?.trainscalerLauncher, true);
    assert.doesNotMatch(rendezvousAdvice(launched)?.note ?? '', /launcher:/);
  });

  it('recommends TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 where the store is shared: plain torchrun without it', () => {
    const advice = (command: string[], env?: string) => {
      const obj = tuned(ALLOW);
      const spec = obj.spec as {
        pytorchReplicaSpecs: { Worker: { template: { spec: { containers: Record<string, unknown>[] } } } };
      };
      const container = spec.pytorchReplicaSpecs.Worker.template.spec.containers[0];
      if (container) {
        container.command = command;
        container.env = env === undefined ? [] : [{ name: 'TORCH_DISABLE_SHARE_RDZV_TCP_STORE', value: env }];
      }
      return rendezvousAdvice(readJob(obj));
    };
    const torchrun = advice(['torchrun', 'train.py']);
    assert.match(
      torchrun?.note ?? '',
      /environment: recommend TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 in the Worker's env \(not set\): without it a scale-up on torch >= 2\.4 waits the rendezvous store's 60 s timeout and fails/,
    );
    assert.ok(
      torchrun?.changes.every((c) => c.kind === 'rendezvous'),
      'advice only, even where allowed',
    );
    assert.match(
      advice(['torchrun', 'train.py'], '0')?.note ?? '',
      /TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 .*\(now 0\)/,
    );
    assert.doesNotMatch(advice(['torchrun', 'train.py'], '1')?.note ?? '', /environment:/);
    const launcher = ['python3', '-m', 'trainscaler_hook.launch', 'train.py'];
    assert.doesNotMatch(advice(launcher)?.note ?? '', /environment:/, 'the launcher sets it itself');
    assert.match(
      advice(launcher, '0')?.note ?? '',
      /environment: recommend TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1/,
    );
    assert.doesNotMatch(
      advice(['python', 'train.py'])?.note ?? '',
      /environment:/,
      'an unknown launch: nothing known',
    );
  });

  it('tells how many times elasticPolicy.maxRestarts lets trainscaler shrink the job', () => {
    const budget = (maxRestarts: number | undefined) => {
      const obj = tuned({});
      const policy = (obj.spec as { elasticPolicy: Record<string, unknown> }).elasticPolicy;
      if (maxRestarts === undefined) delete policy.maxRestarts;
      else policy.maxRestarts = maxRestarts;
      return rendezvousAdvice(readJob(obj))?.note ?? '';
    };
    assert.match(
      budget(10),
      /restarts: elasticPolicy\.maxRestarts 10 bounds how often trainscaler shrinks this job: each scale-down spends one restart .*at most 9 times/,
    );
    assert.match(budget(2), /at most 1 time \(the last restart is kept/);
    assert.match(budget(undefined), /maxRestarts is not set .*0 in torch 1\.13.*will not shrink this job/);
    const fixed = toyJob();
    delete (fixed.spec as { elasticPolicy?: unknown }).elasticPolicy;
    assert.equal(rendezvousAdvice(readJob(fixed)), undefined, 'no elasticPolicy, no torchelastic advice');
  });

  it('with the annotation: a minimal patch of only those fields, pinned to the resourceVersion', () => {
    const obj = tuned(
      ALLOW,
      [
        { key: 'join_timeout', value: '60' },
        { key: 'last_call_timeout', value: '30' },
      ],
      [{ name: 'A', value: 'b' }],
    );
    obj.metadata.resourceVersion = '42';
    const advice = rendezvousAdvice(readJob(obj));
    assert.deepEqual(advice?.changes, [
      { kind: 'rendezvous', setting: 'PET_MONITOR_INTERVAL', value: '1' },
      { kind: 'rendezvous', setting: 'last_call_timeout', value: '2' },
    ]);
    assert.deepEqual(buildJobPatch(obj, advice?.changes ?? [], {}), [
      { op: 'replace', path: '/metadata/resourceVersion', value: '42' },
      {
        op: 'add',
        path: '/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env/-',
        value: { name: 'PET_MONITOR_INTERVAL', value: '1' },
      },
      { op: 'replace', path: '/spec/elasticPolicy/rdzvConf/1/value', value: '2' },
    ]);
    const bare = tuned(ALLOW);
    assert.deepEqual(buildJobPatch(bare, rendezvousAdvice(readJob(bare))?.changes ?? [], {}), [
      {
        op: 'add',
        path: '/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env',
        value: [{ name: 'PET_MONITOR_INTERVAL', value: '1' }],
      },
      { op: 'add', path: '/spec/elasticPolicy/rdzvConf', value: [{ key: 'last_call_timeout', value: '2' }] },
    ]);
  });

  it('the guardrails drop rendezvous changes on a job that does not allow them, whatever policy made them', () => {
    const change: Change = { kind: 'rendezvous', setting: 'last_call_timeout', value: '2' };
    const denied = guard(elasticJob(C10D), [change], {}, 'initial');
    assert.deepEqual(denied.plan.changes, []);
    assert.match(
      [denied.plan.reason, ...(denied.plan.details ?? [])].join('; '),
      /does not allow trainscaler.io\/tune-rendezvous/,
    );
    const allowed = guard(elasticJob({ ...C10D, tuneRendezvous: true }), [change], {}, 'initial');
    assert.deepEqual(allowed.plan.changes, [change]);
  });

  it('on submit: an Event carries the advice when nothing is written; with the annotation the job is set', async () => {
    const advised = harness();
    advised.sim.submitJob(tuned({}));
    const mark = advised.sim.writeLog().length;
    const out = (await handleSubmit(TOY, advised.deps)).outcomes[0];
    assert.equal(out?.applied, false);
    assert.match(out?.plan.details?.join('; ') ?? '', /rendezvous: recommend/);
    assert.ok(
      advised.sim
        .recordedEvents()
        .some(
          (e) => e.reason === 'TrainscalerInitial' && e.message?.includes('recommend PET_MONITOR_INTERVAL=1'),
        ),
    );
    assert.ok(
      advised.sim
        .writeLog()
        .slice(mark)
        .every((w) => w.verb !== 'patch'),
      'the job is not written',
    );

    const allowed = harness();
    allowed.sim.submitJob(tuned(ALLOW));
    const set = (await handleSubmit(TOY, allowed.deps)).outcomes[0];
    assert.equal(set?.applied, true, set?.plan.reason);
    const te = readJob(await allowed.sim.getJob(TOY)).torchElastic;
    assert.equal(te?.monitorInterval, '1');
    assert.equal(te?.rdzvConf.last_call_timeout, '2');
    // The Event says what was written in one line; which settings and why are the decision's details.
    assert.ok(allowed.sim.recordedEvents().some((e) => e.message?.includes('rendezvous settings set')));
    assert.match(set?.plan.details?.join('; ') ?? '', /rendezvous: setting/);
  });
});
