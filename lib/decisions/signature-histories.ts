// The profile store as running jobs' fits use it: each signature's profile turned into samples and fitted at
// most once per trigger.
import { type SignatureHistory, signatureHistory } from '../model/profile-prior.js';
import { profileSamples } from '../policies/profiles.js';
import type { LoadedProfile } from './profile-store.js';

export type HistoryLookup = (signature: string) => SignatureHistory | undefined;

export function historiesOf(lookup: (signature: string) => LoadedProfile): HistoryLookup {
  const fitted = new Map<string, SignatureHistory | undefined>();
  return (signature) => {
    if (!fitted.has(signature)) {
      const { profile } = lookup(signature);
      fitted.set(signature, profile ? signatureHistory(profileSamples(profile)) : undefined);
    }
    return fitted.get(signature);
  };
}

/** No history for any signature: a running job is then judged on its own samples, as without profiles. */
export const NO_HISTORIES: HistoryLookup = () => undefined;
