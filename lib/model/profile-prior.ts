// A running job's model is fitted on its own step samples, which cover the few sizes it has run at; the
// profile of earlier runs of its signature has seen others. Added to the fit, the profile's summaries tell
// the model what those sizes cost, where alone it extrapolates a parametric form with a wide spread. They
// are added only where the profile agrees with what this job measures: another image, another GPU type or
// a tenant reusing the signature must not steer this job's sizing.
import type { StepSample } from '../types.js';
import { fitThroughputModel, type Placement, type ThroughputModel } from './throughput-model.js';

/**
 * What earlier runs measured at a placement the job has run at must be within this fraction of the job's own
 * mean step time there (its fit's prediction, where they never ran at it, within this or two of the fit's
 * standard deviations). Step times jitter by a few percent; a different environment or code path is usually
 * off by more.
 */
export const PRIOR_AGREEMENT = 0.15;

/** The earlier runs of a job's signature, as a fit uses them. */
export interface SignatureHistory {
  samples: readonly StepSample[];
  /** Fitted on `samples`; undefined when there are none. */
  model: ThroughputModel | undefined;
}

export interface PriorChoice {
  samples: StepSample[];
  /** Why the profile is or is not used: the handlers log it at debug level when it is left out. */
  why: string;
}

export function signatureHistory(samples: readonly StepSample[]): SignatureHistory {
  return { samples, model: samples.length > 0 ? fitThroughputModel([...samples]) : undefined };
}

/** The profile's samples to fit beside the job's own, or none with the reason. */
export function agreeingPrior(
  own: readonly StepSample[],
  history: SignatureHistory | undefined,
): PriorChoice {
  const model = history?.model;
  if (!history || !model || history.samples.length === 0) return { samples: [], why: 'no profile' };
  // The job's samples separate sync from compute; a profile summary without sync would make the fit
  // give that up for all of them.
  const timesSync = own.some((s) => s.syncTime !== undefined);
  const usable = timesSync ? history.samples.filter((s) => s.syncTime !== undefined) : [...history.samples];
  if (usable.length === 0) return { samples: [], why: 'the profile has no sync times' };
  for (const seen of meanStepTimes(own)) {
    const { expected, tolerance, what } = profileAt(seen.placement, history.samples, model);
    const off = expected / seen.stepTime - 1;
    if (!(Math.abs(off) <= tolerance)) {
      return {
        samples: [],
        why:
          `the profile ${what} ${expected.toFixed(3)} s a step at ${seen.placement.replicas} workers on ` +
          `${seen.placement.nodes} nodes where this job measures ${seen.stepTime.toFixed(3)} s ` +
          `(${Math.round(off * 100)}%, more than ${Math.round(tolerance * 100)}%)`,
      };
    }
  }
  return { samples: usable, why: `with ${usable.length} sizes from the profile` };
}

/**
 * What the profile says of one placement: the step time earlier runs measured there, when they ran at it
 * (same workers, nodes and servers, local batch within 1%), held to PRIOR_AGREEMENT; otherwise its fit's
 * prediction, allowed two of the fit's standard deviations when those are wider. A placement the profile only
 * extrapolates to (workers spread over more nodes than earlier runs were) is where its parametric form misses
 * most; disagreement the profile's own uncertainty explains says nothing about another environment.
 */
function profileAt(
  placement: Placement,
  summaries: readonly StepSample[],
  model: ThroughputModel,
): { expected: number; tolerance: number; what: string } {
  const measured = summaries.find(
    (s) =>
      s.replicas === placement.replicas &&
      s.nodes === placement.nodes &&
      (s.ps ?? 0) === (placement.ps ?? 0) &&
      Math.abs(s.localBatchSize - placement.localBatchSize) <= 0.01 * placement.localBatchSize,
  );
  if (measured) return { expected: measured.stepTime, tolerance: PRIOR_AGREEMENT, what: 'measured' };
  const predicted = model.predict(placement);
  return {
    expected: predicted.stepTime,
    tolerance: Math.max(PRIOR_AGREEMENT, (2 * predicted.stdev) / predicted.stepTime),
    what: 'predicts',
  };
}

/** The job's mean step time at each placement it ran at. */
function meanStepTimes(samples: readonly StepSample[]) {
  const groups = new Map<string, { placement: Placement; total: number; n: number }>();
  for (const s of samples) {
    if (!(s.stepTime > 0) || !Number.isFinite(s.stepTime)) continue;
    const key = `${s.replicas}/${s.nodes}/${s.ps ?? 0}/${s.localBatchSize}`;
    const group = groups.get(key);
    if (group) {
      group.total += s.stepTime;
      group.n += 1;
    } else {
      const placement: Placement = {
        replicas: s.replicas,
        nodes: s.nodes,
        ...(s.ps !== undefined ? { ps: s.ps } : {}),
        localBatchSize: s.localBatchSize,
      };
      groups.set(key, { placement, total: s.stepTime, n: 1 });
    }
  }
  return [...groups.values()].map((g) => ({ placement: g.placement, stepTime: g.total / g.n }));
}
