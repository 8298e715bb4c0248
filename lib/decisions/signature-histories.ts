// The profile store as running jobs' fits use it: each signature's profile turned into samples and fitted at
// most once per trigger.
import { agreeingPrior, type SignatureHistory, signatureHistory } from '../model/profile-prior.js';
import { type JobProfile, median, profileSamples } from '../policies/profiles.js';
import type { SignatureRescaleCost, StepSample } from '../types.js';
import { type ProfileLookup, type ProfileOwner, profileKey } from './profile-store.js';

export type HistoryLookup = (owner: ProfileOwner) => SignatureHistory | undefined;

export function historiesOf(lookup: ProfileLookup): HistoryLookup {
  const fitted = new Map<string, SignatureHistory | undefined>();
  return (owner) => {
    const key = profileKey(owner);
    if (!fitted.has(key)) {
      const { profile } = lookup(owner);
      fitted.set(key, profile ? signatureHistory(profileSamples(profile)) : undefined);
    }
    return fitted.get(key);
  };
}

/** No history for any signature: a running job is then judged on its own samples, as without profiles. */
export const NO_HISTORIES: HistoryLookup = () => undefined;

/**
 * The profile summaries a running job's fit takes (agreeingPrior). A profile left out says why at debug level:
 * the job is then sized on its own samples, and an operator asking why it grows one worker at a time finds it.
 */
export function priorSamples(
  own: readonly StepSample[],
  history: SignatureHistory | undefined,
  job: string,
  logger: { debug?(obj: object, msg?: string): void },
): StepSample[] {
  const choice = agreeingPrior(own, history);
  if (history && choice.samples.length === 0)
    logger.debug?.({ job, why: choice.why }, 'profile left out of the fit');
  return choice.samples;
}

/**
 * What earlier runs of the signature measured a rescale to cost: the median of the profile's last measured
 * pauses per direction (lib/policies/profiles.ts rescaleCosts), undefined when none was measured.
 */
export function signatureRescaleCostOf(profile: JobProfile | undefined): SignatureRescaleCost | undefined {
  const kept = profile?.rescaleCosts;
  if (!kept || kept.up.length + kept.down.length === 0) return undefined;
  const out: SignatureRescaleCost = {};
  if (kept.up.length > 0) {
    out.up = median(kept.up);
    out.upRuns = kept.up.length;
  }
  if (kept.down.length > 0) {
    out.down = median(kept.down);
    out.downRuns = kept.down.length;
  }
  return out;
}
