// The job adapter's answers that other code acts on without re-checking: whether a run succeeded (the runner
// stops deciding for it), whether a job is its owner's (never written), and the pod index the guardrails
// protect in a JobSet of several child Jobs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fastJsonPatch, { type Operation } from 'fast-json-patch';
import {
  buildJobPatch,
  controlledByItsOwner,
  guardrailPodIndex,
  hasSucceeded,
  kueueFactsOf,
  podSelectorFor,
  readJob,
  successCondition,
  torchElasticOf,
} from '../../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { UnsupportedChangeError, ValidationError } from '../../../lib/errors.js';
import { DEFAULT_MANAGEMENT_SCOPE, managementOf } from '../../../lib/management.js';
import type { Change } from '../../../lib/types.js';
import { indexedJob, jobSet, trainJob } from '../../fixtures/batch-jobs.js';
import { pytorchJob, statefulSet, tfJob } from '../../fixtures/jobs.js';

// biome-ignore lint/suspicious/noExplicitAny: fixtures are edited in place below, at any depth
type Loose = Record<string, any>;
const spec = (obj: KubeObject) => obj.spec as Loose;

function apply(obj: KubeObject, ops: ReturnType<typeof buildJobPatch>): KubeObject {
  return fastJsonPatch.applyPatch(structuredClone(obj), ops as Operation[], true, false).newDocument;
}

const withConditions = (obj: KubeObject, conditions: unknown[]): KubeObject => ({
  ...obj,
  status: { ...(obj.status as object), conditions },
});

describe('hasSucceeded and successCondition: each kind by its own condition', () => {
  const cases: [string, KubeObject, string][] = [
    ['PyTorchJob', pytorchJob(), 'Succeeded'],
    ['TFJob', tfJob(), 'Succeeded'],
    ['Job', indexedJob(), 'Complete'],
    ['JobSet', jobSet(), 'Completed'],
    ['TrainJob', trainJob(), 'Complete'],
  ];

  for (const [kind, obj, type] of cases) {
    it(`${kind}: ${type} True is success, and the condition returned dates it`, () => {
      const done = { type, status: 'True', lastTransitionTime: '2026-12-01T00:00:00Z' };
      const succeeded = withConditions(obj, [{ type: 'Created', status: 'True' }, done]);
      assert.equal(hasSucceeded(succeeded), true);
      assert.deepEqual(successCondition(succeeded), done);
      // The same type not True, or True of another type (another kind's success word), is not success.
      for (const conditions of [[{ type, status: 'False' }], [{ type: 'Running', status: 'True' }]]) {
        assert.equal(hasSucceeded(withConditions(obj, conditions)), false, JSON.stringify(conditions));
        assert.equal(successCondition(withConditions(obj, conditions)), undefined);
      }
    });
  }

  it("one kind's success word is not another's: a Job's Complete is no PyTorchJob's success", () => {
    assert.equal(hasSucceeded(withConditions(pytorchJob(), [{ type: 'Complete', status: 'True' }])), false);
    assert.equal(hasSucceeded(withConditions(indexedJob(), [{ type: 'Succeeded', status: 'True' }])), false);
  });

  it('a StatefulSet, an unknown kind or no kind never succeeds, whatever its conditions say', () => {
    const conditions = ['Succeeded', 'Complete', 'Completed'].map((type) => ({ type, status: 'True' }));
    assert.equal(hasSucceeded(withConditions(statefulSet(), conditions)), false);
    assert.equal(hasSucceeded({ kind: 'MPIJob', status: { conditions } }), false);
    assert.equal(hasSucceeded({ status: { conditions } }), false);
  });

  it('skips malformed conditions and a status without any (a job just created)', () => {
    const good = { type: 'Succeeded', status: 'True' };
    assert.deepEqual(successCondition(withConditions(pytorchJob(), [null, 'Succeeded', 7, good])), good);
    assert.equal(hasSucceeded({ kind: 'PyTorchJob' }), false);
    assert.equal(hasSucceeded({ kind: 'PyTorchJob', status: { conditions: 'Succeeded' } }), false);
  });
});

describe('controlledByItsOwner: jobs whose controller re-applies their spec', () => {
  const controlledBy = (obj: KubeObject, controller: boolean | undefined) => ({
    ...obj,
    metadata: {
      ...obj.metadata,
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Owner',
          name: 'o',
          uid: 'u',
          ...(controller === undefined ? {} : { controller }),
        },
      ],
    },
  });

  it("a Job or JobSet with a controller owner is its owner's", () => {
    assert.equal(controlledByItsOwner(controlledBy(indexedJob(), true)), true);
    assert.equal(controlledByItsOwner(controlledBy(jobSet(), true)), true);
  });

  it('an owner reference that is not the controller (garbage collection only) leaves the job its own', () => {
    assert.equal(controlledByItsOwner(controlledBy(indexedJob(), false)), false);
    assert.equal(controlledByItsOwner(controlledBy(indexedJob(), undefined)), false);
    assert.equal(controlledByItsOwner(indexedJob()), false);
    assert.equal(controlledByItsOwner({ kind: 'Job' }), false);
  });

  it("kinds whose owner does not re-apply them stay trainscaler's, controller or not", () => {
    for (const obj of [pytorchJob(), tfJob(), statefulSet(), trainJob()])
      assert.equal(controlledByItsOwner(controlledBy(obj, true)), false, obj.kind);
    assert.equal(controlledByItsOwner({ ...controlledBy(indexedJob(), true), kind: 'MPIJob' }), false);
    assert.equal(controlledByItsOwner({ metadata: { ownerReferences: [{ controller: true }] } }), false);
  });

  it('readJob agrees: such a job is unmanaged and says which owner to manage instead', () => {
    const owned = controlledBy(indexedJob(), true);
    const view = readJob(owned);
    assert.equal(view.managed, false);
    assert.match(view.unmanagedReason ?? '', /controlled by Owner o, .*\(manage the Owner\)/);
    // Not opted in: the opt-in reason stands, the owner is not the reason.
    const optedOut = controlledBy(indexedJob(), true);
    optedOut.metadata.labels = {};
    optedOut.metadata.annotations = {};
    assert.doesNotMatch(readJob(optedOut).unmanagedReason ?? '', /controlled by/);
  });
});

describe('guardrailPodIndex: the index a JobSet pod is protected by, across its child Jobs', () => {
  const COMPLETION_INDEX = 'batch.kubernetes.io/job-completion-index';
  const labels = (completion: number | string) => ({ [COMPLETION_INDEX]: String(completion) });

  it('keeps a placed pod exactly when the shrink leaves its completion index in every child Job', () => {
    for (const groups of [2, 3]) {
      const obj = jobSet({ replicas: groups, parallelism: 4 });
      for (let completion = 0; completion < 4; completion++) {
        const index = guardrailPodIndex(obj, labels(completion));
        assert.ok(index !== undefined);
        // A shrink to `to` pods leaves to / groups per child Job: completion indices below that survive.
        for (let perJob = 1; perJob <= 4; perJob++) {
          const to = perJob * groups;
          assert.equal(
            to >= index + 1,
            completion < perJob,
            `groups ${groups}, completion ${completion}, to ${to}`,
          );
        }
      }
    }
  });

  it('none for a single child Job (the completion index is the pod index), another kind, or no index label', () => {
    assert.equal(guardrailPodIndex(jobSet({ replicas: 1 }), labels(1)), undefined);
    assert.equal(guardrailPodIndex(indexedJob(), labels(1)), undefined);
    assert.equal(guardrailPodIndex(pytorchJob(), labels(1)), undefined);
    const several = jobSet({ replicas: 2 });
    assert.equal(guardrailPodIndex(several, undefined), undefined);
    assert.equal(guardrailPodIndex(several, {}), undefined);
    assert.equal(guardrailPodIndex(several, labels('x')), undefined);
    assert.equal(guardrailPodIndex(several, labels('1.5')), undefined);
  });

  it('a JobSet with replicas absent runs one child Job', () => {
    const obj = jobSet();
    delete spec(obj).replicatedJobs[1].replicas;
    assert.equal(guardrailPodIndex(obj, labels(2)), undefined);
  });
});

const grow = (to: number): Change => ({ kind: 'replicas', role: 'Worker', from: 1, to });
const refused = (field: string, words: RegExp) => (e: unknown) => {
  assert.ok(e instanceof UnsupportedChangeError, String(e));
  assert.equal(e.field, field);
  assert.match(e.message, words);
  return true;
};
const invalid = (field: string, words: RegExp) => (e: unknown) => {
  assert.ok(e instanceof ValidationError, String(e));
  assert.equal(e.field, field);
  assert.match(e.message, words);
  return true;
};

describe('replica specs of the training-operator kinds', () => {
  it('refuses a job without its replica specs, naming the kind’s own field', () => {
    const pt = pytorchJob();
    delete spec(pt).pytorchReplicaSpecs;
    assert.throws(() => readJob(pt), invalid('/spec/pytorchReplicaSpecs', /missing replica specs/));
    const tf = tfJob();
    delete spec(tf).tfReplicaSpecs;
    assert.throws(() => readJob(tf), invalid('/spec/tfReplicaSpecs', /missing replica specs/));
  });

  it('reads only the roles it knows (a Launcher is no role of these kinds)', () => {
    const pt = pytorchJob();
    spec(pt).pytorchReplicaSpecs.Launcher = structuredClone(spec(pt).pytorchReplicaSpecs.Worker);
    assert.deepEqual(
      readJob(pt).roles.map((r) => r.role),
      ['Worker'],
    );
  });

  it('a TFJob Chief or Evaluator keeps its size: the worker bound annotations are for workers only', () => {
    const tf = tfJob();
    for (const role of ['Chief', 'Evaluator']) {
      spec(tf).tfReplicaSpecs[role] = structuredClone(spec(tf).tfReplicaSpecs.PS);
      spec(tf).tfReplicaSpecs[role].replicas = 1;
    }
    assert.deepEqual(
      readJob(tf).roles.map((r) => [r.role, r.minReplicas, r.maxReplicas]),
      [
        ['Chief', 1, 1],
        ['PS', 2, 2],
        ['Worker', 2, 10],
        ['Evaluator', 1, 1],
      ],
    );
  });
});

describe('indexed resize rules (batch/v1 Job, JobSet)', () => {
  it('allows the smallest size the API allows: one pod per child Job', () => {
    assert.ok(buildJobPatch(indexedJob(), [grow(1)], {}).some((o) => o.path === '/spec/parallelism'));
    const js = jobSet({ replicas: 2, parallelism: 2 });
    const ops = buildJobPatch(js, [grow(2)], {});
    assert.ok(
      ops.some((o) => o.path === '/spec/replicatedJobs/1/template/spec/parallelism' && o.value === 1),
    );
  });

  it('refuses a fractional count, and tells the per-Job parallelism asked', () => {
    assert.throws(
      () => buildJobPatch(indexedJob(), [grow(2.5)], {}),
      refused('/spec/parallelism', /parallelism must be >= 1 \(asked 2\.5\)/),
    );
    assert.throws(
      () => buildJobPatch(jobSet({ replicas: 2 }), [grow(1)], {}),
      refused('/spec/replicatedJobs/1/template/spec/parallelism', /parallelism must be >= 1 \(asked 0\.5\)/),
    );
  });

  it('a Job without completionMode is NonIndexed (the API default) and is not resized', () => {
    const job = indexedJob();
    delete spec(job).completionMode;
    assert.throws(
      () => buildJobPatch(job, [grow(6)], {}),
      refused('/spec/completionMode', /completionMode is NonIndexed: only Indexed jobs change/),
    );
    const view = readJob(job);
    assert.equal(view.elastic, false, 'a count its API will not change is fixed');
    assert.match(view.refusals?.replicas ?? '', /NonIndexed/);
  });

  it('a finished Job names its end: Failed as well as Complete', () => {
    const failed = indexedJob();
    failed.status = { conditions: [{ type: 'Failed', status: 'True' }] };
    assert.throws(
      () => buildJobPatch(failed, [grow(6)], {}),
      refused('/spec/parallelism', /the job is Failed; a finished job is not resized/),
    );
  });

  it('an indexed Job at zero is not refused for what it is: its view keeps it elastic', () => {
    const idle = indexedJob({ parallelism: 0 });
    const view = readJob(idle);
    assert.equal(view.refusals?.replicas, undefined);
    assert.equal(view.elastic, true);
    assert.equal(readJob(indexedJob()).refusals?.replicas, undefined);
  });

  it('refuses every template change of a running Job or JobSet, naming the kind and why', () => {
    const preferNode: Change = { kind: 'prefer-node', role: 'Worker', node: 'n1' };
    const avoidNode: Change = { kind: 'avoid-node', role: 'Worker', node: 'n1' };
    const memory: Change = {
      kind: 'resources',
      role: 'Worker',
      resource: 'memory',
      field: 'limits',
      from: 1,
      to: 2,
    };
    for (const [kind, obj] of [
      ['Job', indexedJob()],
      ['JobSet', jobSet()],
    ] as const) {
      for (const change of [preferNode, avoidNode])
        assert.throws(
          () => buildJobPatch(obj, [change], {}),
          refused('/spec', new RegExp(`a running ${kind}'s pod template is immutable \\(node affinity`)),
        );
      assert.throws(
        () => buildJobPatch(obj, [memory], {}),
        refused('/spec', new RegExp(`a running ${kind}'s pod template is immutable \\(resources`)),
      );
      assert.deepEqual(Object.keys(readJob(obj).refusals ?? {}).sort(), [
        'avoid-node',
        'prefer-node',
        'resources',
      ]);
    }
  });
});

describe('JobSet: the replicated job that trains', () => {
  const named = (...names: string[]) => {
    const js = jobSet();
    const [driver, workers] = spec(js).replicatedJobs;
    spec(js).replicatedJobs = names.map((name, i) => ({
      ...structuredClone(i === 0 ? driver : workers),
      name,
    }));
    return js;
  };

  it('takes each conventional name (Kubeflow Trainer names it node) beside a driver', () => {
    for (const name of ['node', 'worker', 'workers', 'trainer']) {
      const js = named('driver', name);
      assert.equal(
        podSelectorFor(js),
        `jobset.sigs.k8s.io/jobset-name=llm,jobset.sigs.k8s.io/replicatedjob-name=${name}`,
      );
      assert.equal(readJob(js).roles[0]?.containerName, 'trainer');
    }
  });

  it('refuses a JobSet without replicated jobs, and a lone replicated job without a name', () => {
    for (const replicatedJobs of [undefined, []]) {
      const js = jobSet();
      spec(js).replicatedJobs = replicatedJobs;
      assert.throws(() => readJob(js), invalid('/spec/replicatedJobs', /missing replicated jobs/));
    }
    const anonymous = named('driver');
    delete spec(anonymous).replicatedJobs[0].name;
    assert.throws(() => readJob(anonymous), invalid('/spec/replicatedJobs', /ambiguous/));
  });

  it('the annotation names the replicated job; an unknown name lists those there are', () => {
    const js = named('driver', 'trainer');
    js.metadata.annotations = { ...js.metadata.annotations, 'trainscaler.io/replicated-job': 'gone' };
    assert.throws(
      () => readJob(js),
      invalid(
        '/metadata/annotations/trainscaler.io~1replicated-job',
        /no replicated job named 'gone' \(have: driver, trainer\)/,
      ),
    );
  });

  it('refuses a child-Job count that is not a positive whole number', () => {
    for (const replicas of [0, 1.5, -1]) {
      const js = jobSet();
      spec(js).replicatedJobs[1].replicas = replicas;
      assert.throws(
        () => readJob(js),
        invalid('/spec/replicatedJobs/1/replicas', /expected a positive integer/),
      );
    }
  });

  it("its priority class is the training replicated job's pod template's", () => {
    const js = jobSet();
    assert.equal(readJob(js).priorityClassName, undefined);
    spec(js).replicatedJobs[0].template.spec.template.spec.priorityClassName = 'driver-class';
    assert.equal(readJob(js).priorityClassName, undefined, "not the driver's");
    spec(js).replicatedJobs[1].template.spec.template.spec.priorityClassName = 'train-class';
    assert.equal(readJob(js).priorityClassName, 'train-class');
  });
});

describe('what each kind tells Kueue (beyond kueue-rules.test.ts)', () => {
  it('suspended: the run policy of a TFJob, spec.suspend of a JobSet and a TrainJob', () => {
    const tf = tfJob();
    assert.equal(kueueFactsOf(tf).suspended, false);
    spec(tf).runPolicy = { suspend: true };
    assert.equal(kueueFactsOf(tf).suspended, true);
    for (const obj of [jobSet(), trainJob()]) {
      spec(obj).suspend = false;
      assert.equal(kueueFactsOf(obj).suspended, false, obj.kind);
      spec(obj).suspend = true;
      assert.equal(kueueFactsOf(obj).suspended, true, obj.kind);
    }
    const job = indexedJob();
    spec(job).suspend = true;
    assert.equal(kueueFactsOf(job).suspended, true);
  });

  it("each role's pod set, and the queue its label names", () => {
    assert.deepEqual(kueueFactsOf(tfJob()).podSetOf, { PS: 'ps', Worker: 'worker' });
    assert.deepEqual(kueueFactsOf(indexedJob()).podSetOf, { Worker: 'main' });
    assert.equal(kueueFactsOf(pytorchJob()).queueName, undefined);
    const queued = pytorchJob();
    queued.metadata.labels = { 'kueue.x-k8s.io/queue-name': 'team-a-queue' };
    assert.equal(kueueFactsOf(queued).queueName, 'team-a-queue');
    assert.equal(readJob(queued).kueue, 'label kueue.x-k8s.io/queue-name=team-a-queue');
    assert.equal(readJob(pytorchJob()).kueue, undefined);
  });
});

describe('buildJobPatch: changes the kind or the job cannot take', () => {
  it('avoid-node and prefer-node on a role the job does not have are refused, naming it', () => {
    for (const change of [
      { kind: 'avoid-node', role: 'PS', node: 'n' },
      { kind: 'prefer-node', role: 'Master', node: 'n' },
    ] as const)
      assert.throws(
        () => buildJobPatch(pytorchJob(), [change], {}),
        invalid('/spec', new RegExp(`job has no ${change.role} role`)),
      );
  });

  it('rendezvous settings only on an elastic PyTorchJob with a Worker', () => {
    const setting: Change = { kind: 'rendezvous', setting: 'last_call_timeout', value: '2' };
    const fixed = pytorchJob();
    delete spec(fixed).elasticPolicy;
    for (const obj of [fixed, statefulSet()])
      assert.throws(
        () => buildJobPatch(obj, [setting], {}),
        invalid('/spec/elasticPolicy', /rendezvous settings need an elastic PyTorchJob/),
      );
    const masterOnly = pytorchJob();
    spec(masterOnly).pytorchReplicaSpecs = { Master: spec(masterOnly).pytorchReplicaSpecs.Worker };
    assert.throws(
      () =>
        buildJobPatch(masterOnly, [{ kind: 'rendezvous', setting: 'PET_MONITOR_INTERVAL', value: '1' }], {}),
      invalid('/spec', /job has no Worker role/),
    );
  });

  it('a TrainJob is refused every change before any op is built', () => {
    assert.throws(
      () => buildJobPatch(trainJob(), [grow(4)], {}),
      refused('/spec/trainer/numNodes', /Kubeflow Trainer v2\.3 makes spec\.trainer immutable/),
    );
    assert.throws(
      () => buildJobPatch(trainJob(), [{ kind: 'prefer-node', role: 'Worker', node: 'n' }], {}),
      refused('/spec/trainer', /trainscaler reads TrainJobs and changes none/),
    );
  });
});

describe('torchelastic facts: the restart budget torchrun really gets', () => {
  const withWorker = (
    container: Record<string, unknown>,
    policy: Record<string, unknown> = { minReplicas: 1 },
  ) => {
    const pt = pytorchJob();
    spec(pt).elasticPolicy = policy;
    Object.assign(spec(pt).pytorchReplicaSpecs.Worker.template.spec.containers[0], container);
    return pt;
  };
  const budget = (pt: KubeObject) => {
    const te = torchElasticOf(pt);
    return [te?.maxRestarts, te?.maxRestartsFrom];
  };

  it('an env value that is no count falls through to the command, then to the default', () => {
    for (const value of ['-1', 'many', '1.5'])
      assert.deepEqual(
        budget(
          withWorker({
            env: [{ name: 'PET_MAX_RESTARTS', value }],
            command: ['torchrun', '--max_restarts=3'],
          }),
        ),
        [3, 'command'],
        value,
      );
    assert.deepEqual(budget(withWorker({ env: [{ name: 'PET_MAX_RESTARTS', value: '0' }] })), [0, 'env']);
    assert.deepEqual(budget(withWorker({ env: [{ name: 'OTHER', value: '5' }] })), [0, 'torchrun default']);
  });

  it('reads the flag in either spelling, joined or as the next argument, from command and args', () => {
    const cases: [Record<string, unknown>, number][] = [
      [{ command: ['torchrun', '--max_restarts=5', 'train.py'] }, 5],
      [{ command: ['torchrun', '--max-restarts', '6', 'train.py'] }, 6],
      [{ command: ['torchrun'], args: ['--max_restarts', '7', 'train.py'] }, 7],
      [{ command: ['torchrun', '--max-restarts=bad', '--max_restarts=2'] }, 2],
    ];
    for (const [container, expected] of cases)
      assert.deepEqual(budget(withWorker(container)), [expected, 'command'], JSON.stringify(container));
  });

  it('ignores look-alike flags and a flag with no count after it', () => {
    for (const command of [
      ['torchrun', '--max_restarts'],
      ['torchrun', '--max_restarts', 'train.py'],
      ['torchrun', 'x--max_restarts=5'],
      ['torchrun', '--max_restarts=5x'],
      ['torchrun', '--max_restarts_total=5'],
      ['torchrun', '--maxrestarts=5'],
      ['torchrun', '--max_restarts', '-1'],
    ])
      assert.deepEqual(budget(withWorker({ command })), [0, 'torchrun default'], command.join(' '));
  });

  it('finds the launcher in args as in the command, and only in string arguments', () => {
    const launcher = (container: Record<string, unknown>) =>
      torchElasticOf(withWorker(container))?.trainscalerLauncher;
    assert.equal(
      launcher({ command: ['python3'], args: ['-m', 'trainscaler_hook.launch', 'train.py'] }),
      true,
    );
    assert.equal(launcher({ command: ['sh', '-c', 'python3 -m trainscaler_hook.launch train.py'] }), true);
    assert.equal(launcher({ command: ['torchrun', 'train.py'] }), false);
    // The launcher that runs, as the rescale cost reads it: the module named elsewhere in the line is not it.
    assert.equal(
      launcher({ command: ['sh', '-c', 'echo trainscaler_hook.launch; torchrun train.py'] }),
      false,
    );
    assert.equal(launcher({ command: ['sh', '-c', "python3 -m trainscaler_hook.launch 'train.py"] }), false);
    assert.equal(launcher({ command: [7, { m: 'trainscaler_hook.launch' }], args: undefined }), false);
  });

  it('reads the monitor interval from the training container only', () => {
    const pt = withWorker({ env: [{ name: 'PET_MONITOR_INTERVAL', value: '3' }] });
    assert.equal(torchElasticOf(pt)?.monitorInterval, '3');
    const sidecarOnly = withWorker({ env: [] });
    spec(sidecarOnly).pytorchReplicaSpecs.Worker.template.spec.containers[1].env = [
      { name: 'PET_MONITOR_INTERVAL', value: '3' },
    ];
    assert.equal(torchElasticOf(sidecarOnly)?.monitorInterval, undefined);
    assert.equal('monitorInterval' in (torchElasticOf(sidecarOnly) ?? {}), false);
  });

  it("reads the training container's launch: command and args, its env, elasticPolicy.rdzvConf", () => {
    const pt = withWorker(
      {
        command: ['sh', '-c'],
        args: ['torchrun --monitor_interval=2 train.py'],
        env: [
          { name: 'TORCH_DISABLE_SHARE_RDZV_TCP_STORE', value: '1' },
          { name: 'FROM_SECRET', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
        ],
      },
      { minReplicas: 1, rdzvConf: [{ key: 'last_call_timeout', value: '5' }] },
    );
    assert.deepEqual(torchElasticOf(pt)?.launch, {
      launcher: 'torchrun',
      monitorInterval: 2,
      lastCallTimeout: 5,
      disableShareStore: '1',
    });
    assert.equal(
      torchElasticOf(withWorker({ command: ['python', 'train.py'] }))?.launch?.launcher,
      'unknown',
    );
  });

  it('an elastic job with a Master and no Worker: the policy alone, no container facts', () => {
    const pt = withWorker({ env: [{ name: 'PET_MAX_RESTARTS', value: '4' }] });
    spec(pt).pytorchReplicaSpecs = { Master: spec(pt).pytorchReplicaSpecs.Worker };
    assert.deepEqual(budget(pt), [0, 'torchrun default']);
    assert.equal(torchElasticOf(pt)?.trainscalerLauncher, false);
    assert.equal(torchElasticOf(pt)?.launch, undefined);
  });

  it('the tune-rendezvous opt-in is the string "true" only', () => {
    const tune = (value: string) =>
      torchElasticOf(pytorchJob({ annotations: { 'trainscaler.io/tune-rendezvous': value } }))
        ?.tuneRendezvous;
    assert.equal(tune('true'), true);
    assert.equal(tune('yes'), false);
    assert.equal(torchElasticOf(pytorchJob())?.tuneRendezvous, false);
  });
});

describe("buildJobPatch: trainscaler's node terms told apart from the user's", () => {
  const TERMS =
    '/spec/pytorchReplicaSpecs/Worker/template/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution';
  const withTerms = (terms: unknown[]) => {
    const pt = pytorchJob();
    spec(pt).pytorchReplicaSpecs.Worker.template.spec.affinity = {
      nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: terms },
    };
    return pt;
  };
  const field = (key: string, operator: string, values: unknown[]) => ({ key, operator, values });
  // Each is one way a user's term can resemble an avoidance (weight 100, NotIn one node name) and not be one.
  const lookalikes = [
    { weight: 90, preference: { matchFields: [field('metadata.name', 'NotIn', ['n0'])] } },
    { weight: 100, preference: { matchFields: [field('metadata.name', 'In', ['n0'])] } },
    { weight: 100, preference: { matchFields: [field('metadata.labels', 'NotIn', ['n0'])] } },
    { weight: 100, preference: { matchFields: [field('metadata.name', 'NotIn', ['n0', 'n1'])] } },
    { weight: 100, preference: { matchFields: [field('metadata.name', 'NotIn', [7])] } },
    {
      weight: 100,
      preference: {
        matchFields: [field('metadata.name', 'NotIn', ['n0']), field('metadata.name', 'NotIn', ['n1'])],
      },
    },
    { weight: 100, preference: { matchExpressions: [field('kubernetes.io/hostname', 'NotIn', ['n0'])] } },
  ];

  it("avoiding nodes never counts or replaces a user's term that only looks like an avoidance", () => {
    let obj = withTerms(structuredClone(lookalikes));
    for (const node of ['n0', 'a', 'b']) {
      const ops = buildJobPatch(obj, [{ kind: 'avoid-node', role: 'Worker', node }], {});
      assert.deepEqual(
        ops.slice(1).map((o) => [o.op, o.path]),
        [['add', `${TERMS}/-`]],
        `avoiding ${node} appends`,
      );
      obj = apply(obj, ops);
    }
    // A fourth replaces the oldest of trainscaler's three, the first after the user's terms.
    const fourth = buildJobPatch(obj, [{ kind: 'avoid-node', role: 'Worker', node: 'c' }], {});
    assert.deepEqual(
      fourth.slice(1).map((o) => [o.op, o.path]),
      [['replace', `${TERMS}/${lookalikes.length}`]],
    );
    const terms = spec(apply(obj, fourth)).pytorchReplicaSpecs.Worker.template.spec.affinity.nodeAffinity
      .preferredDuringSchedulingIgnoredDuringExecution;
    assert.deepEqual(terms.slice(0, lookalikes.length), lookalikes);
  });

  it("a preference replaces only trainscaler's own earlier one (weight 50, In one node)", () => {
    const userIn = { weight: 60, preference: { matchFields: [field('metadata.name', 'In', ['n0'])] } };
    const ops = buildJobPatch(withTerms([userIn]), [{ kind: 'prefer-node', role: 'Worker', node: 'n0' }], {});
    assert.deepEqual(
      ops.slice(1).map((o) => [o.op, o.path]),
      [['add', `${TERMS}/-`]],
    );
  });

  it('adds the node affinity beside an affinity the template already has, keeping it', () => {
    const pt = pytorchJob();
    const podAntiAffinity = { preferredDuringSchedulingIgnoredDuringExecution: [] };
    spec(pt).pytorchReplicaSpecs.Worker.template.spec.affinity = { podAntiAffinity };
    const after = apply(pt, buildJobPatch(pt, [{ kind: 'avoid-node', role: 'Worker', node: 'n0' }], {}));
    const affinity = spec(after).pytorchReplicaSpecs.Worker.template.spec.affinity;
    assert.deepEqual(affinity.podAntiAffinity, podAntiAffinity);
    assert.equal(affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution.length, 1);
  });
});

describe('buildJobPatch: what it writes and does not', () => {
  it('nothing to write for a job without annotations writes no annotations map', () => {
    const pt = pytorchJob();
    delete pt.metadata.annotations;
    delete pt.metadata.resourceVersion;
    assert.deepEqual(buildJobPatch(pt, [], {}), []);
  });

  it('a rendezvous env var already set is replaced in place, in the training container', () => {
    const pt = pytorchJob();
    spec(pt).pytorchReplicaSpecs.Worker.template.spec.containers[0].env = [
      { name: 'A', value: 'b' },
      { name: 'PET_MONITOR_INTERVAL', value: '5' },
    ];
    const ops = buildJobPatch(pt, [{ kind: 'rendezvous', setting: 'PET_MONITOR_INTERVAL', value: '1' }], {});
    assert.deepEqual(ops.slice(1), [
      {
        op: 'replace',
        path: '/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/env/1/value',
        value: '1',
      },
    ]);
  });

  it('an absent completions is added with the parallelism it tracks', () => {
    const job = indexedJob();
    delete spec(job).completions;
    const ops = buildJobPatch(job, [grow(6)], {});
    assert.deepEqual(ops.slice(1), [
      { op: 'replace', path: '/spec/parallelism', value: 6 },
      { op: 'add', path: '/spec/completions', value: 6 },
    ]);
  });
});

describe('readJob: a bad quantity is refused at the field that holds it', () => {
  it("a TrainJob's resourcesPerNode (it has no container), as a container's resources", () => {
    const tj = trainJob();
    spec(tj).trainer.resourcesPerNode.requests.cpu = 'lots';
    assert.throws(
      () => readJob(tj),
      invalid('/spec/trainer/resourcesPerNode/requests/cpu', /invalid quantity 'lots'/),
    );
    const sts = statefulSet();
    spec(sts).template.spec.containers[0].resources = { limits: { 'nvidia.com/gpu': 'two' } };
    assert.throws(
      () => readJob(sts),
      invalid('/spec/template/spec/containers/0/resources/limits/nvidia.com/gpu', /invalid quantity 'two'/),
    );
  });
});

describe('readJob: elastic only when the kind or its user says so', () => {
  it('a Job, a JobSet and a StatefulSet are elastic by the annotation "true" alone', () => {
    for (const make of [indexedJob, () => jobSet(), statefulSet]) {
      const obj = make();
      obj.metadata.annotations = { ...obj.metadata.annotations };
      delete obj.metadata.annotations['trainscaler.io/elastic'];
      assert.equal(readJob(obj).elastic, false, `${obj.kind} without the annotation`);
      obj.metadata.annotations['trainscaler.io/elastic'] = 'yes';
      assert.equal(readJob(obj).elastic, false, `${obj.kind} annotated yes`);
      obj.metadata.annotations['trainscaler.io/elastic'] = 'true';
      assert.equal(readJob(obj).elastic, true, `${obj.kind} annotated true`);
    }
  });

  it('a TFJob by enableDynamicWorker true (not a truthy string), or the annotation', () => {
    const tf = tfJob();
    tf.metadata.annotations = { 'trainscaler.io/managed': 'true' };
    spec(tf).enableDynamicWorker = 'true';
    assert.equal(readJob(tf).elastic, false);
    spec(tf).enableDynamicWorker = true;
    assert.equal(readJob(tf).elastic, true);
  });

  it('a TrainJob never, whatever it is annotated', () => {
    const tj = trainJob();
    tj.metadata.annotations = { ...tj.metadata.annotations, 'trainscaler.io/elastic': 'true' };
    assert.equal(readJob(tj).elastic, false);
  });
});

describe('readJob and buildJobPatch: the details each kind keeps', () => {
  it('reads every kind opted in by label, with no annotations at all', () => {
    const bare = (obj: KubeObject) => {
      delete obj.metadata.annotations;
      obj.metadata.labels = { ...obj.metadata.labels, 'trainscaler.io/managed': 'true' };
      return obj;
    };
    const tf = bare(tfJob());
    delete spec(tf).enableDynamicWorker;
    for (const obj of [bare(pytorchJob()), tf, bare(statefulSet()), bare(indexedJob()), bare(jobSet())]) {
      const view = readJob(obj);
      assert.equal(view.managed, true, obj.kind);
      assert.equal(view.elastic, obj.kind === 'PyTorchJob', `${obj.kind}: elastic only by its policy`);
    }
    const suspended = bare(indexedJob());
    spec(suspended).suspend = true;
    assert.equal(kueueFactsOf(suspended).suspended, true);
  });

  it('a Job with suspend false is not suspended, whatever Kueue annotates', () => {
    const job = indexedJob();
    job.metadata.annotations = { ...job.metadata.annotations, 'kueue.x-k8s.io/stopping': 'false' };
    assert.equal(kueueFactsOf(job).suspended, false);
    assert.deepEqual(kueueFactsOf(statefulSet()).podSetOf, { Worker: 'main' });
  });

  it("finds each framework's training container by its conventional name, even listed after a sidecar", () => {
    for (const [make, name] of [
      [pytorchJob, 'pytorch'],
      [tfJob, 'tensorflow'],
    ] as const) {
      const obj = make();
      const specs = spec(obj).pytorchReplicaSpecs ?? spec(obj).tfReplicaSpecs;
      specs.Worker.template.spec.containers.unshift({ name: 'istio-proxy', image: 'istio:1' });
      const worker = readJob(obj).roles.find((r) => r.role === 'Worker');
      assert.deepEqual([worker?.containerName, worker?.containerIndex], [name, 1], obj.kind);
    }
  });

  it('an elastic PyTorchJob scales its workers only: a Master keeps its size within the policy', () => {
    const pt = pytorchJob();
    spec(pt).pytorchReplicaSpecs.Master = structuredClone(spec(pt).pytorchReplicaSpecs.Worker);
    spec(pt).pytorchReplicaSpecs.Master.replicas = 1;
    assert.deepEqual(
      readJob(pt).roles.map((r) => [r.role, r.minReplicas, r.maxReplicas]),
      [
        ['Master', 1, 1],
        ['Worker', 1, 8],
      ],
    );
  });

  it('a True condition that is not the end (Suspended) does not finish a Job', () => {
    const job = indexedJob();
    job.status = { conditions: [{ type: 'Suspended', status: 'True' }] };
    assert.ok(buildJobPatch(job, [grow(6)], {}).some((o) => o.path === '/spec/parallelism'));
    assert.equal(readJob(job).refusals?.replicas, undefined);
  });

  it('an ambiguous JobSet lists its replicated jobs in the error; a missing numNodes says why', () => {
    const js = jobSet();
    for (const [i, name] of ['a', 'b'].entries()) spec(js).replicatedJobs[i].name = name;
    assert.throws(
      () => readJob(js),
      invalid(
        '/spec/replicatedJobs',
        /ambiguous \(a, b\): set the annotation trainscaler\.io\/replicated-job/,
      ),
    );
    const tj = trainJob();
    delete spec(tj).trainer.numNodes;
    assert.throws(
      () => readJob(tj),
      invalid(
        '/spec/trainer/numNodes',
        /the size then comes from the training runtime, which trainscaler does not read/,
      ),
    );
  });

  it('a JobSet is read and refused as a JobSet, and a role it does not have is named', () => {
    assert.equal(readJob(jobSet()).ref.kind, 'JobSet');
    const js = jobSet();
    const image = spec(js).replicatedJobs[1].template.spec.template.spec.containers[0].image;
    assert.equal(
      readJob(js).signature,
      `JobSet:${image}`,
      "the kind and the training replicated job's image",
    );
    assert.throws(
      () =>
        buildJobPatch(jobSet({ replicas: 2 }), [{ kind: 'replicas', role: 'Master', from: 1, to: 2 }], {}),
      invalid('/spec', /job has no Master role/),
    );
  });
});

describe('readJob: whether the job is managed, and why not', () => {
  it('carries the opt-in rule’s own reason, and none when managed', () => {
    const optedOut = pytorchJob({ annotations: { 'trainscaler.io/managed': 'false' } });
    const view = readJob(optedOut);
    assert.equal(view.managed, false);
    assert.equal(view.unmanagedReason, managementOf(optedOut.metadata, DEFAULT_MANAGEMENT_SCOPE).why);
    assert.equal('unmanagedReason' in readJob(pytorchJob()), false);
  });

  it('decides by the scope it is given: a listed namespace without opt-in, an unlisted one with', () => {
    const job = pytorchJob();
    delete job.metadata.annotations?.['trainscaler.io/managed'];
    const scope = { ...DEFAULT_MANAGEMENT_SCOPE, namespaceAllowlist: [job.metadata.namespace ?? ''] };
    assert.equal(readJob(job, scope).managed, true);
    assert.equal(readJob(job).managed, false);
    const elsewhere = { ...DEFAULT_MANAGEMENT_SCOPE, namespaceAllowlist: ['other'] };
    assert.equal(readJob(pytorchJob(), elsewhere).managed, false);
  });
});
