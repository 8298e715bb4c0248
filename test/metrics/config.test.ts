// The Prometheus and Alertmanager files in infra/prometheus, checked by the tools that will load them:
// promtool (config, rules, and the rules' own unit tests) and amtool.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { load } from 'js-yaml';
import { type MonitoringBinaries, monitoringBinaries } from '../../infra/local-stack/processes.js';
import {
  compressAlertmanagerTimers,
  compressRuleDurations,
} from '../../infra/local-stack/time-compression.js';
import { REPO_ROOT } from './support/sidecar-bundle.js';

const INFRA = join(REPO_ROOT, 'infra/prometheus');

function run(
  command: string,
  args: string[],
  cwd = INFRA,
): Promise<{ code: number; output: string; stdout: string }> {
  return new Promise((resolve) => {
    // promtool's rule tests take 8 s on a quiet 2-core machine and over 30 s on a loaded one: the limit only
    // bounds a hung tool, and says so when it ends one.
    execFile(command, args, { cwd, timeout: 300_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      const killed = error?.killed ? `\n(killed by the test's time limit: ${error.signal})` : '';
      resolve({ code, output: `${stdout}${stderr}${killed}`, stdout });
    });
  });
}

describe('infra/prometheus files', () => {
  let bin: MonitoringBinaries;
  let dir: string;

  before(async () => {
    bin = monitoringBinaries();
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-config-'));
  });
  after(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

  it('the alert rules are valid and pass their promtool unit tests', async () => {
    const check = await run(bin.promtool, ['check', 'rules', 'rules/trainscaler.rules.yml']);
    assert.equal(check.code, 0, check.output);
    assert.match(check.output, /SUCCESS: 10 rules found/);
    const test = await run(bin.promtool, ['test', 'rules', 'tests/trainscaler.rules.test.yml']);
    assert.equal(test.code, 0, test.output);
  });

  it('the static (test) Prometheus config is valid', async () => {
    const check = await run(bin.promtool, ['check', 'config', 'prometheus-static.yml']);
    assert.equal(check.code, 0, check.output);
  });

  it('the Kubernetes Prometheus config is valid', async (t) => {
    const direct = await run(bin.promtool, ['check', 'config', 'prometheus.yml']);
    if (direct.code === 0) return;
    // Debian builds Prometheus without Kubernetes service discovery; check everything else by swapping
    // the discovery block for a static one.
    assert.match(direct.output, /field kubernetes_sd_configs not found/, direct.output);
    t.diagnostic('this promtool has no Kubernetes service discovery: checked with static targets instead');
    const config = await readFile(join(INFRA, 'prometheus.yml'), 'utf8');
    const swapped = config.replace(
      /kubernetes_sd_configs:\n\s+- role: pod\n(\s+namespaces:\n\s+names: \[[^\]]*\]\n)?/g,
      "static_configs:\n      - targets: ['127.0.0.1:9470']\n",
    );
    assert.notEqual(swapped, config);
    await cp(join(INFRA, 'rules'), join(dir, 'rules'), { recursive: true });
    await writeFile(join(dir, 'prometheus.yml'), swapped);
    const check = await run(bin.promtool, ['check', 'config', 'prometheus.yml'], dir);
    assert.equal(check.code, 0, check.output);
  });

  it('the Kubernetes scrape job takes every identity label from discovery, none from the pod', async () => {
    const config = load(await readFile(join(INFRA, 'prometheus.yml'), 'utf8')) as {
      scrape_configs: {
        job_name: string;
        honor_labels?: boolean;
        relabel_configs: Record<string, unknown>[];
      }[];
    };
    const job = config.scrape_configs.find((j) => j.job_name === 'trainscaler-sidecars');
    assert.ok(job);
    assert.notEqual(job.honor_labels, true, 'honor_labels would let a pod publish as any job');
    const fromDiscovery = new Map<string, string[]>();
    for (const rule of job.relabel_configs) {
      const target = rule.target_label;
      if (typeof target !== 'string') continue;
      const sources = (rule.source_labels as string[] | undefined) ?? [];
      fromDiscovery.set(target, [...(fromDiscovery.get(target) ?? []), ...sources]);
    }
    for (const label of ['namespace', 'pod', 'job_kind', 'job_name', 'role', 'worker', 'node']) {
      const sources = fromDiscovery.get(label) ?? [];
      assert.ok(sources.length > 0, `${label} is set by relabelling`);
      assert.ok(
        sources.every((s) => s.startsWith('__meta_kubernetes_')),
        `${label} from ${sources.join(', ')}`,
      );
    }
  });

  it('the Alertmanager config is valid, and routes trainscaler alerts to the webhook', async () => {
    const check = await run(bin.amtool, ['check-config', 'alertmanager.yml']);
    assert.equal(check.code, 0, check.output);
    const routed = await run(bin.amtool, [
      'config',
      'routes',
      'test',
      '--config.file=alertmanager.yml',
      'alertname=TrainscalerStraggler',
      'trainscaler=review',
      'namespace=team-a',
    ]);
    assert.equal(routed.stdout.trim(), 'trainscaler-alarm', routed.output);
    const other = await run(bin.amtool, [
      'config',
      'routes',
      'test',
      '--config.file=alertmanager.yml',
      'alertname=Other',
    ]);
    assert.equal(other.stdout.trim(), 'discard', other.output);
  });

  it('the faster replay used by the pipeline test is valid too', async () => {
    const rules = await readFile(join(INFRA, 'rules/trainscaler.rules.yml'), 'utf8');
    await writeFile(join(dir, 'fast.rules.yml'), compressRuleDurations(rules, 30));
    const check = await run(bin.promtool, ['check', 'rules', 'fast.rules.yml'], dir);
    assert.equal(check.code, 0, check.output);
    const alertmanager = await readFile(join(INFRA, 'alertmanager.yml'), 'utf8');
    await writeFile(join(dir, 'alertmanager.yml'), compressAlertmanagerTimers(alertmanager, 30));
    const am = await run(bin.amtool, ['check-config', 'alertmanager.yml'], dir);
    assert.equal(am.code, 0, am.output);
  });
});
