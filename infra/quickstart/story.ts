// The quick start's output: plain lines, each stamped with the time since the start, for a person to read.
import type { Outcome } from '../../lib/actuator.js';

export type Print = (line: string) => void;

/** `[m:ss] text`, minutes and seconds since `startedAtMs`. */
export function stamped(startedAtMs: number, nowMs: number, text: string): string {
  const seconds = Math.max(0, Math.floor((nowMs - startedAtMs) / 1000));
  const ss = String(seconds % 60).padStart(2, '0');
  return `[${Math.floor(seconds / 60)}:${ss}] ${text}`;
}

/** A printer that stamps each message; the message's further lines are indented under its text. */
export function stampedPrinter(write: (text: string) => void, startedAtMs: number = Date.now()): Print {
  return (message) => {
    const [first = '', ...rest] = message.split('\n');
    const head = stamped(startedAtMs, Date.now(), first);
    const indent = ' '.repeat(head.length - first.length);
    write(`${[head, ...rest.map((line) => `${indent}${line.trimStart()}`)].join('\n')}\n`);
  };
}

export interface Throughput {
  samplesPerSecond: number;
  workers: number;
}

export function throughputText(t: Throughput): string {
  const perWorker = t.workers > 0 ? t.samplesPerSecond / t.workers : 0;
  const workers = `${t.workers} worker${t.workers === 1 ? '' : 's'}`;
  return `${t.samplesPerSecond.toFixed(0)} samples/s (${workers}, ${perWorker.toFixed(0)} per worker)`;
}

const TRIGGERS: Record<string, string> = {
  alarm: 'on the alert',
  schedule: 'on its schedule tick',
  'cluster-event': 'on a pod event',
  submit: 'on the new job',
};

/** "Worker replicas 1 -> 2", or the kinds of the other changes. */
export function changeText(outcome: Outcome): string {
  const parts = outcome.plan.changes.map((c) =>
    c.kind === 'replicas' ? `${c.role} replicas ${c.from} -> ${c.to}` : c.kind,
  );
  return parts.length > 0 ? parts.join(', ') : 'no change';
}

/** One decision: what trainscaler did, on what, and its one-line reason. */
export function decisionText(trigger: string, outcome: Outcome): string {
  const verb = outcome.applied ? 'decided' : 'reviewed the job and kept it';
  const what = outcome.applied ? `: ${changeText(outcome)}` : '';
  return `trainscaler ${verb} (${TRIGGERS[trigger] ?? trigger}, policy ${outcome.plan.policy})${what}\n  reason: ${outcome.plan.reason}`;
}
