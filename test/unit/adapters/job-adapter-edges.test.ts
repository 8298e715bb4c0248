// The job adapter's answers that other code acts on without re-checking: whether a run succeeded (the runner
// stops deciding for it), whether a job is its owner's (never written), and the pod index the guardrails
// protect in a JobSet of several child Jobs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  controlledByItsOwner,
  guardrailPodIndex,
  hasSucceeded,
  readJob,
  successCondition,
} from '../../../lib/adapters/job-adapter.js';
import type { KubeObject } from '../../../lib/cluster/cluster-client.js';
import { indexedJob, jobSet, trainJob } from '../../fixtures/batch-jobs.js';
import { pytorchJob, statefulSet, tfJob } from '../../fixtures/jobs.js';

// biome-ignore lint/suspicious/noExplicitAny: fixtures are edited in place below, at any depth
type Loose = Record<string, any>;
const spec = (obj: KubeObject) => obj.spec as Loose;

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
