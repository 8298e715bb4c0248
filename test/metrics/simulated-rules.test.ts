// The simulator's rule evaluation (lib/sim/alerting) checked by promtool itself on simulated data: the
// sidecar series of a simulated cluster (a straggler injected into one job, another job finishing, pods
// going away) are written out as a promtool test whose expected alerts are the ones the simulator's
// evaluator fired; `promtool test rules` passes only if real Prometheus rule evaluation fires exactly those
// alerts, with the same labels and annotations, at every checked instant.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dump } from 'js-yaml';
import { monitoringBinaries } from '../../infra/local-stack/processes.js';
import { loadProductionTriggerConfig } from '../../lib/sim/alerting/production-triggers.js';
import { RuleEngine } from '../../lib/sim/alerting/rule-engine.js';
import { SeriesStore } from '../../lib/sim/alerting/series-store.js';
import { SidecarSeries } from '../../lib/sim/alerting/sidecar-series.js';
import { PROFILED_APP_MODEL } from '../../lib/sim/profiled-app-model.js';
import { SimulatedCluster } from '../../lib/sim/simulated-cluster.js';
import { WORKLOAD_NAMESPACE, workloadJobManifest } from '../../lib/sim/workload.js';
import { REPO_ROOT } from './support/sidecar-bundle.js';

const STEP = 15;
const MINUTES = 100;

function seriesText(labels: Readonly<Record<string, string>>): string {
  const { __name__: name, ...rest } = labels;
  const pairs = Object.keys(rest)
    .sort()
    .map((k) => `${k}=${JSON.stringify(rest[k])}`);
  return `${name}{${pairs.join(',')}}`;
}

describe('simulated rule evaluation agrees with promtool on simulated series', () => {
  let promtool: string;
  let dir: string;
  before(async () => {
    promtool = monitoringBinaries().promtool;
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-simrules-'));
  });
  after(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

  it('fires the same alerts as promtool at every minute', async () => {
    const config = loadProductionTriggerConfig();
    const nodes = Array.from({ length: 4 }, (_, i) => ({
      name: `gpu-node-${i}`,
      gpus: 4,
      cpuMillis: 32_000,
      memoryBytes: 128 * 1024 ** 3,
    }));
    const sim = new SimulatedCluster({ seed: 3, apps: PROFILED_APP_MODEL, nodes });
    sim.submitJob(
      workloadJobManifest(
        { name: 'imagenet', time: 0, application: 'imagenet', replicas: 4, batchSize: 800 },
        16,
      ),
    );
    sim.submitJob(
      workloadJobManifest(
        { name: 'cifar', time: 0, application: 'cifar10', replicas: 4, batchSize: 512 },
        16,
      ),
    );
    const store = new SeriesStore();
    const engine = new RuleEngine(config.rules, store);
    const sidecars = new SidecarSeries(sim, WORKLOAD_NAMESPACE);
    const steps = (MINUTES * 60) / STEP;
    const values = new Map<string, string[]>();
    const present = new Map<string, number>();
    const checks: Array<{ step: number; firing: ReturnType<RuleEngine['firing']> }> = [];
    for (let i = 0; i <= steps; i++) {
      if (i === (45 * 60) / STEP) {
        const pod = (await sim.listPods(WORKLOAD_NAMESPACE)).find(
          (p) => p.metadata?.name === 'imagenet-worker-2',
        );
        assert.ok(pod, 'imagenet-worker-2 runs at 45 min');
        sim.injectStraggler(WORKLOAD_NAMESPACE, 'imagenet-worker-2', 1.6);
      }
      const scrapes = await sidecars.scrape();
      const seen = new Set<string>();
      for (const scrape of scrapes) {
        store.write(scrape.target, scrape.samples, sim.now());
        for (const sample of scrape.samples) {
          const key = seriesText(sample.labels);
          seen.add(key);
          const row = values.get(key) ?? Array.from({ length: i }, () => '_');
          row[i] = String(sample.value);
          values.set(key, row);
          present.set(key, i);
        }
      }
      store.retireWritersExcept(new Set(scrapes.map((s) => s.target)), 'scrape:', sim.now());
      // Prometheus writes a staleness marker once, where a series vanished; promtool's notation for it.
      for (const [key, row] of values) {
        if (seen.has(key)) continue;
        row[i] = present.get(key) === i - 1 ? 'stale' : '_';
      }
      const firing = engine.evaluate(sim.now());
      if (i % (60 / STEP) === 0) checks.push({ step: i, firing: structuredClone(firing) });
      sim.step(STEP);
    }
    const alertnames = config.rules.flatMap((g) =>
      g.rules.flatMap((r) => (r.kind === 'alert' ? [r.alert] : [])),
    );
    const fired = new Set(checks.flatMap((c) => c.firing.map((a) => a.rule)));
    // The run exercises real alerts, not only silence.
    assert.ok(fired.has('TrainscalerStraggler'), [...fired].join(', '));
    if (process.env.KEEP_SIMRULES) console.log('fired:', [...fired].join(', '));
    const testFile = {
      rule_files: [join(REPO_ROOT, 'infra/prometheus/rules/trainscaler.rules.yml')],
      evaluation_interval: `${STEP}s`,
      tests: [
        {
          interval: `${STEP}s`,
          input_series: [...values].map(([series, row]) => ({
            series,
            values: Array.from({ length: steps + 1 }, (_, i) => row[i] ?? '_').join(' '),
          })),
          alert_rule_test: checks.flatMap((c) =>
            alertnames.map((name) => ({
              eval_time: `${c.step * STEP}s`,
              alertname: name,
              exp_alerts: c.firing
                .filter((a) => a.rule === name)
                .map((a) => {
                  const { alertname: _n, ...labels } = a.labels;
                  return { exp_labels: labels, exp_annotations: a.annotations };
                }),
            })),
          ),
        },
      ],
    };
    const path = join(dir, 'simulated.test.yml');
    await writeFile(path, dump(testFile, { lineWidth: -1 }));
    if (process.env.KEEP_SIMRULES)
      await writeFile(process.env.KEEP_SIMRULES, dump(testFile, { lineWidth: -1 }));
    const result = await new Promise<{ code: number; output: string }>((resolve) =>
      execFile(
        promtool,
        ['test', 'rules', path],
        { timeout: 120_000, maxBuffer: 64 * 1024 * 1024 },
        (error, stdout, stderr) => resolve({ code: error ? 1 : 0, output: `${stdout}${stderr}` }),
      ),
    );
    assert.equal(result.code, 0, result.output.slice(0, 4000));
  });
});
