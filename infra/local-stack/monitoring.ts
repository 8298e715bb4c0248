// The production monitoring path run locally (the tests and `npm run quickstart`), from Debian's packages: Prometheus with infra/prometheus's
// scrape job (its identity labels relabelled from discovery metadata, as in a cluster) and alert rules, and
// Alertmanager with infra/prometheus/alertmanager.yml's routing to the alarm function's webhook. Only
// durations change, through time-compression.ts (a test cannot wait ten minutes for `for: 10m`); the rule
// expressions, thresholds and routes are the production files' own.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Pod } from '@kubernetes/client-node';
import { dump, load } from 'js-yaml';
import { freePort, type MonitoringBinaries, type Started, start, stop, waitUntil } from './processes.js';
import { compressAlertmanagerTimers, compressRuleDurations } from './time-compression.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A file_sd target group carrying the metadata Kubernetes pod discovery gives a pod (the __meta_kubernetes_*
 * labels prometheus.yml relabels from), computed from the pod object the way discovery does: namespace,
 * name, phase, node, controller owner, labels (names sanitised), the container port's name. The Debian
 * Prometheus has no Kubernetes discovery, so this is how the production relabelling gets real targets here.
 */
export function discoveredTargets(target: string, pod: V1Pod) {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller);
  const labels: Record<string, string> = {
    __meta_kubernetes_namespace: pod.metadata?.namespace ?? '',
    __meta_kubernetes_pod_name: pod.metadata?.name ?? '',
    __meta_kubernetes_pod_phase: pod.status?.phase ?? '',
    __meta_kubernetes_pod_node_name: pod.spec?.nodeName ?? '',
    __meta_kubernetes_pod_container_port_name: 'trainscaler',
    __meta_kubernetes_pod_controller_kind: owner?.kind ?? '',
    __meta_kubernetes_pod_controller_name: owner?.name ?? '',
  };
  for (const [key, value] of Object.entries(pod.metadata?.labels ?? {}))
    labels[`__meta_kubernetes_pod_label_${key.replace(/[^a-zA-Z0-9_]/g, '_')}`] = value;
  return { targets: [target], labels };
}

/** infra/prometheus/prometheus.yml's scrape job, discovering from targets/sidecars.json; the rest as prometheus-static.yml. */
export async function testPrometheusConfig(): Promise<string> {
  const read = async (file: string) =>
    load(await readFile(join(REPO_ROOT, 'infra/prometheus', file), 'utf8')) as Record<string, unknown>;
  const production = await read('prometheus.yml');
  const local = await read('prometheus-static.yml');
  const jobs = (production.scrape_configs ?? []) as Record<string, unknown>[];
  const job = jobs.find((j) => j.job_name === 'trainscaler-sidecars');
  if (!job?.kubernetes_sd_configs) throw new Error('the production scrape job no longer discovers pods');
  delete job.kubernetes_sd_configs;
  job.file_sd_configs = [{ files: ['targets/sidecars.json'], refresh_interval: '1s' }];
  return dump({ ...local, scrape_configs: [job] });
}

/**
 * Prometheus on `dir`'s prometheus.yml (file_sd targets under dir/targets), sending to the Alertmanager on
 * `alertmanagerPort`, listening on 127.0.0.1:`prometheusPort`; alerts are resent every second.
 */
export async function startPrometheus(
  binaries: MonitoringBinaries,
  dir: string,
  alertmanagerPort: number,
  prometheusPort: number,
): Promise<Started> {
  await writeFile(
    join(dir, 'targets/alertmanagers.json'),
    JSON.stringify([{ targets: [`127.0.0.1:${alertmanagerPort}`] }]),
  );
  return start('prometheus', binaries.prometheus, [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, 'prometheus-data')}`,
    `--web.listen-address=127.0.0.1:${prometheusPort}`,
    '--rules.alert.resend-delay=1s',
  ]);
}

/**
 * Prometheus on `dir`'s prometheus.yml alone (no Alertmanager), its data in dir/`name`-data, on a free port of
 * 127.0.0.1; resolves once it answers /-/ready. One that does not within 30 s is stopped, and the error carries
 * its log tail.
 */
export async function startReadyPrometheus(
  binaries: MonitoringBinaries,
  dir: string,
  options: { name?: string; flags?: string[] } = {},
): Promise<{ started: Started; url: string }> {
  const { name = 'prometheus', flags = [] } = options;
  const port = await freePort();
  const started = start(name, binaries.prometheus, [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, `${name}-data`)}`,
    `--web.listen-address=127.0.0.1:${port}`,
    ...flags,
  ]);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntil(
      async () => ((await fetch(`${url}/-/ready`).catch(() => undefined))?.ok ? true : undefined),
      30_000,
      `${name} to be ready`,
      () => started.output().slice(-3000),
    );
  } catch (error) {
    await stop(started);
    throw error;
  }
  return { started, url };
}

/**
 * Alertmanager with the production routing (infra/prometheus/alertmanager.yml, timers divided by `timeFactor`),
 * its webhook pointed at `webhookUrl` with the bearer token read from a file, as in production
 * (credentials_file).
 */
export async function startAlertmanager(
  binaries: MonitoringBinaries,
  dir: string,
  options: { webhookUrl: string; webhookToken: string; timeFactor: number; port: number },
): Promise<Started> {
  const production = await readFile(join(REPO_ROOT, 'infra/prometheus/alertmanager.yml'), 'utf8');
  if (!/url: \S+\/alertmanager/.test(production) || !/credentials_file: \S+/.test(production))
    throw new Error(
      'infra/prometheus/alertmanager.yml no longer names the webhook url and its credentials_file',
    );
  const tokenFile = join(dir, 'webhook-token');
  await writeFile(tokenFile, `${options.webhookToken}\n`);
  await writeFile(
    join(dir, 'alertmanager.yml'),
    compressAlertmanagerTimers(production, options.timeFactor)
      .replace(/url: \S+/, `url: ${options.webhookUrl}`)
      .replace(/credentials_file: \S+/, `credentials_file: ${tokenFile}`),
  );
  return start('alertmanager', binaries.alertmanager, [
    `--config.file=${join(dir, 'alertmanager.yml')}`,
    `--storage.path=${join(dir, 'alertmanager-data')}`,
    `--web.listen-address=127.0.0.1:${options.port}`,
    '--cluster.listen-address=', // no HA gossip: nothing listens beyond the web port
  ]);
}

export interface MonitoringStack {
  prometheusUrl: string;
  alertmanagerUrl: string;
  processes: Started[];
  /** Replaces the scraped targets (Prometheus re-reads the file within a second). */
  setTargets(groups: ReturnType<typeof discoveredTargets>[]): Promise<void>;
}

/**
 * Starts Alertmanager (production routing, timers divided by `timeFactor`, webhook to `webhookUrl` with the
 * bearer token from a file as in production) and Prometheus (production scrape job and rules, durations
 * divided by `timeFactor`, 1 s scrape and evaluation as prometheus-static.yml). The caller stops `processes`.
 */
export async function startMonitoring(options: {
  binaries: MonitoringBinaries;
  dir: string;
  webhookUrl: string;
  webhookToken: string;
  timeFactor: number;
}): Promise<MonitoringStack> {
  const { binaries, dir, timeFactor } = options;
  const processes: Started[] = [];
  const prometheusPort = await freePort();
  const alertmanagerPort = await freePort();
  processes.push(await startAlertmanager(binaries, dir, { ...options, port: alertmanagerPort }));
  await writeFile(join(dir, 'prometheus.yml'), await testPrometheusConfig());
  await mkdir(join(dir, 'rules'), { recursive: true });
  const rules = await readFile(join(REPO_ROOT, 'infra/prometheus/rules/trainscaler.rules.yml'), 'utf8');
  await writeFile(join(dir, 'rules/trainscaler.rules.yml'), compressRuleDurations(rules, timeFactor));
  await mkdir(join(dir, 'targets'), { recursive: true });
  const setTargets = async (groups: ReturnType<typeof discoveredTargets>[]) => {
    // Written whole and renamed: Prometheus never reads a half-written file.
    const file = join(dir, 'targets/sidecars.json');
    await writeFile(`${file}.tmp`, JSON.stringify(groups));
    await rename(`${file}.tmp`, file);
  };
  await setTargets([]);
  processes.push(await startPrometheus(binaries, dir, alertmanagerPort, prometheusPort));
  const prometheusUrl = `http://127.0.0.1:${prometheusPort}`;
  const alertmanagerUrl = `http://127.0.0.1:${alertmanagerPort}`;
  const logs = () => processes.map((p) => `--- ${p.name}\n${p.output().slice(-3000)}`).join('\n');
  for (const [what, url] of [
    ['Prometheus', prometheusUrl],
    ['Alertmanager', alertmanagerUrl],
  ] as const) {
    await waitUntil(
      async () => ((await fetch(`${url}/-/ready`).catch(() => undefined))?.ok ? true : undefined),
      30_000,
      `${what} to be ready`,
      logs,
    );
  }
  return { prometheusUrl, alertmanagerUrl, processes, setTargets };
}
