/**
 * An Event's message is cut here: `kubectl describe` and events.k8s.io readers expect a short note (events.k8s.io/v1
 * refuses a note above 1 kB). A reason longer than that is cut visibly, saying how much is missing and where the full
 * text is kept, so the audit trail never silently disagrees with the decision it records.
 */
export const EVENT_MESSAGE_LIMIT = 1024;

export function eventMessage(reason: string, fullReasonIn: string): string {
  if (reason.length <= EVENT_MESSAGE_LIMIT) return reason;
  const marker = (cut: number) => ` … [${cut} more characters; the full reason is in ${fullReasonIn}]`;
  // The marker's length depends on the count it prints; one more pass settles it (the count only shrinks).
  const first = Math.max(0, EVENT_MESSAGE_LIMIT - marker(reason.length).length);
  const kept = Math.max(0, EVENT_MESSAGE_LIMIT - marker(reason.length - first).length);
  return `${reason.slice(0, kept)}${marker(reason.length - kept)}`;
}

/** Where the actuator keeps a written decision's full reason. */
export const FULL_REASON_IN_ANNOTATION = "the job's trainscaler.io/last-decision annotation";
/** Where a decision that writes nothing to the job keeps it. */
export const FULL_REASON_IN_LOG = "trainscaler's log (decision not written to the job)";
