// A plan's one-line reason and its details as one text: what a test checks figures or advice in (the summary
// keeps the one number that justified the decision; the rest is in the details).
import type { Plan } from '../../lib/types.js';

export function planText(plan: Pick<Plan, 'reason' | 'details'>): string {
  return [plan.reason, ...(plan.details ?? [])].join('; ');
}
