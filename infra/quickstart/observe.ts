// What the quick start reads to tell the story: the job's throughput and size from Prometheus (the sidecar's
// series, through infra/prometheus's recording rules), the alert from Alertmanager, the pods from the API.
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Outcome } from '../../lib/actuator.js';
import type { MonitoringStack } from '../local-stack/monitoring.js';
import { changeText, type Throughput } from './story.js';

async function instant(prometheusUrl: string, query: string): Promise<number[]> {
  const res = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(query)}`, {
    signal: AbortSignal.timeout(5000),
  });
  if (!res.ok) throw new Error(`Prometheus answered ${res.status} to ${query}`);
  const body = (await res.json()) as { data: { result: { value: [number, string] }[] } };
  return body.data.result.map((r) => Number(r.value[1])).filter(Number.isFinite);
}

export function promQueries(monitoring: MonitoringStack, namespace: string, job: string) {
  const selector = `namespace="${namespace}",job_name="${job}"`;
  return {
    /** The job's samples per second, summed over its workers that are making progress. */
    async throughput(): Promise<Throughput | undefined> {
      const rates = await instant(
        monitoring.prometheusUrl,
        `trainscaler:worker_samples_per_second:rate5m{${selector}} > 0`,
      );
      if (rates.length === 0) return undefined;
      return { samplesPerSecond: rates.reduce((a, b) => a + b, 0), workers: rates.length };
    },
    /** Workers that made progress over the last rate window: `size` of them once the new world trains. */
    async workersTraining(): Promise<number> {
      return (await this.throughput())?.workers ?? 0;
    },
  };
}

/** The first alert Alertmanager holds for the job, active: its name and summary. */
export async function firingAlert(
  monitoring: MonitoringStack,
  namespace: string,
  job: string,
): Promise<{ name: string; summary: string } | undefined> {
  const res = await fetch(`${monitoring.alertmanagerUrl}/api/v2/alerts?active=true`, {
    signal: AbortSignal.timeout(5000),
  });
  const alerts = (await res.json()) as {
    labels: Record<string, string>;
    annotations?: Record<string, string>;
  }[];
  const alert = alerts.find((a) => a.labels.namespace === namespace && a.labels.job_name === job);
  if (!alert) return undefined;
  const { summary = '', description = '' } = alert.annotations ?? {};
  return { name: alert.labels.alertname ?? '?', summary: [summary, description].filter(Boolean).join(': ') };
}

/** The Worker replicas a decision asks for. */
export function workersAfter(outcome: Outcome): number {
  for (const c of outcome.plan.changes) if (c.kind === 'replicas' && c.role === 'Worker') return c.to;
  throw new Error(`the decision changes no Worker replicas: ${changeText(outcome)}`);
}

/** Deletes the namespace and waits (bounded) until its pods' processes are gone from the host node. */
export async function deleteNamespace(core: CoreV1Api, namespace: string, timeoutMs = 60_000): Promise<void> {
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const pods = await core.listNamespacedPod({ namespace }).catch(() => ({ items: [] }));
    if (pods.items.length === 0) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`pods of ${namespace} still there after ${timeoutMs / 1000} s`);
}
