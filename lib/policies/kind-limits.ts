// What a job's own API refuses (JobView.refusals: a running Job's pod template, a NonIndexed Job's count, any
// change to a TrainJob) is not proposed: a policy's plan keeps the changes the kind allows and says, in its
// reason, what it left out and why. A plan carrying a refused change would be refused whole by the adapter
// (UnsupportedChangeError) and counted as a job without a decision, on every trigger, for nothing.
import type { JobView, Plan } from '../types.js';

export function planWithinKind(job: Pick<JobView, 'refusals'>, plan: Plan): Plan {
  const refusals = job.refusals;
  if (!refusals) return plan;
  const kept = plan.changes.filter((c) => refusals[c.kind] === undefined);
  if (kept.length === plan.changes.length) return plan;
  const why = [...new Set(plan.changes.map((c) => refusals[c.kind]).filter((r) => r !== undefined))];
  const left = plan.changes.length - kept.length;
  return {
    ...plan,
    changes: kept,
    reason: `${plan.reason}; not attempted (${left} change${left === 1 ? '' : 's'}): ${why.join('; ')}`,
  };
}
