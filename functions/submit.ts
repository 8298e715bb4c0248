import { actOnJob } from '../lib/actuator.js';
import { capacityOf, exceptPodsOf, loadCapacity, podsOf } from '../lib/cluster/load-capacity.js';
import { loadProfile } from '../lib/decisions/profile-store.js';
import { decideInitialConfig } from '../lib/policies/initial-config.js';
import { profileModel } from '../lib/policies/profiles.js';
import { parseSubmit } from '../lib/triggers/submit-payload.js';
import { actuatorDeps } from './actuator-deps.js';
import type { HandlerDeps, HandlerResult } from './handler-deps.js';

/** A job was submitted: configure its initial size from earlier runs of the same signature and free capacity. */
export async function handleSubmit(payload: unknown, deps: HandlerDeps): Promise<HandlerResult> {
  const ref = parseSubmit(payload);
  const cluster = await loadCapacity(deps.cluster);
  const outcome = await actOnJob(
    ref,
    async (snapshot) => {
      const { profile, problem } = await loadProfile(deps.cluster, deps.profiles, snapshot.view.signature);
      if (problem) deps.logger.warn({ job: ref }, problem);
      const model = profileModel(profile);
      // A job may size itself into what lower-priority pods hold: the scheduler preempts them for it. Its own
      // pods, bound already or not, are what is being sized: their room counts as free.
      const capacity = capacityOf(cluster.nodes, cluster.pods, {
        preemptibleBelow: snapshot.view.priority,
        holdRoomFor: exceptPodsOf(ref),
        resize: podsOf(ref),
      });
      return decideInitialConfig({ job: snapshot.view, profile, model, capacity, config: deps.config });
    },
    actuatorDeps(deps),
  );
  return { trigger: 'submit', outcomes: [outcome], errors: [] };
}
