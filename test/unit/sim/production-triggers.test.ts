// The simulator triggers trainscaler only as production would: the sidecar series of simulated pods, the
// project's rule file and Alertmanager routing, the schedule on its cron (lib/sim/alerting).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AlertmanagerEmulation,
  parseAlertmanagerConfig,
} from '../../../lib/sim/alerting/alertmanager-emulation.js';
import {
  loadProductionTriggerConfig,
  ProductionTriggers,
} from '../../../lib/sim/alerting/production-triggers.js';
import type { ActiveAlert } from '../../../lib/sim/alerting/rule-engine.js';
import { PROFILED_APP_MODEL } from '../../../lib/sim/profiled-app-model.js';
import { SimulatedCluster } from '../../../lib/sim/simulated-cluster.js';
import { WORKLOAD_NAMESPACE, workloadJobManifest } from '../../../lib/sim/workload.js';

const config = loadProductionTriggerConfig();

function cluster(): SimulatedCluster {
  const nodes = Array.from({ length: 4 }, (_, i) => ({
    name: `gpu-node-${i}`,
    gpus: 4,
    cpuMillis: 32_000,
    memoryBytes: 128 * 1024 ** 3,
  }));
  return new SimulatedCluster({ seed: 1, apps: PROFILED_APP_MODEL, nodes });
}

/** Runs the triggers up to `until` seconds after the start; returns when each alert was posted. */
async function run(
  sim: SimulatedCluster,
  triggers: ProductionTriggers,
  until: number,
  onTick?: (t: number) => void,
) {
  const start = sim.now();
  const posted: Array<{ at: number; alertname: string; pod?: string }> = [];
  const schedules: number[] = [];
  for (let guard = 0; guard < 100_000; guard++) {
    const next = Math.min(triggers.nextAfter(sim.now()), start + until);
    sim.step(next - sim.now());
    onTick?.(sim.now() - start);
    const due = await triggers.due(sim.now());
    for (const hook of due.webhooks)
      for (const alert of hook.payload.alerts)
        posted.push({
          at: sim.now() - start,
          alertname: alert.labels.alertname ?? '',
          pod: alert.labels.pod,
        });
    if (due.schedule) schedules.push(sim.now() - start);
    if (sim.now() - start >= until) break;
  }
  return { posted, schedules };
}

describe('production triggers on the simulated cluster', () => {
  it('reads the deployed intervals, rules and cron', () => {
    assert.equal(config.evaluationIntervalSeconds, 15);
    assert.equal(config.schedule, '* * * * *');
    assert.deepEqual(
      config.rules.flatMap((g) => g.rules.flatMap((r) => (r.kind === 'alert' ? [r.alert] : []))).sort(),
      [
        'TrainscalerLowGpuUtilization',
        'TrainscalerLowThroughputPerWorker',
        'TrainscalerMemoryNearLimit',
        'TrainscalerProgressStalled',
        'TrainscalerStraggler',
      ],
    );
  });

  it('sends nothing for a healthy job, runs the schedule on the cron, and posts a straggler alert with its pod', async () => {
    const sim = cluster();
    sim.submitJob(
      workloadJobManifest(
        { name: 'imagenet', time: 0, application: 'imagenet', replicas: 4, batchSize: 800 },
        16,
      ),
    );
    const triggers = new ProductionTriggers(sim, WORKLOAD_NAMESPACE, config);
    const healthy = await run(sim, triggers, 3600);
    assert.deepEqual(healthy.posted, []);
    // Every minute on the clock (the simulation starts on a full hour): 60, 120, ..., 3600.
    assert.deepEqual(
      healthy.schedules,
      Array.from({ length: 60 }, (_, i) => (i + 1) * 60),
    );

    const pods = await sim.listPods(WORKLOAD_NAMESPACE);
    const slow = pods.find((p) => p.metadata?.labels?.['training.kubeflow.org/replica-index'] === '2');
    assert.ok(slow?.metadata?.name);
    sim.injectStraggler(WORKLOAD_NAMESPACE, slow.metadata.name, 1.5);
    const after = await run(sim, triggers, 600);
    const straggler = after.posted.filter((p) => p.alertname === 'TrainscalerStraggler');
    assert.ok(straggler.length > 0, JSON.stringify(after.posted));
    assert.equal(straggler[0]?.pod, slow.metadata.name);
    // Seen within the sidecar's window, pending for `for: 1m`, then Alertmanager's group_wait of 15 s.
    assert.ok((straggler[0]?.at ?? 0) >= 75 && (straggler[0]?.at ?? 0) <= 240, String(straggler[0]?.at));
  });
});

describe('Alertmanager emulation (infra/prometheus/alertmanager.yml)', () => {
  const am = () =>
    new AlertmanagerEmulation(
      parseAlertmanagerConfig(`
route:
  receiver: discard
  group_by: [job_name]
  routes:
    - receiver: hook
      matchers: ['trainscaler="review"']
      group_wait: 30s
      group_interval: 5m
      repeat_interval: 1h
receivers:
  - name: discard
  - name: hook
    webhook_configs:
      - url: http://x
        send_resolved: false
`),
    );
  const alert = (job: string, name = 'A'): ActiveAlert => ({
    rule: name,
    labels: {
      alertname: name,
      job_name: job,
      trainscaler: 'review',
      namespace: 'ns',
      job_kind: 'PyTorchJob',
    },
    annotations: {},
    value: 1,
    activeAt: 0,
    state: 'firing',
  });

  it('waits group_wait, sends again on a new alert at group_interval, repeats after repeat_interval', () => {
    const m = am();
    const sent: number[] = [];
    for (let t = 0; t <= 2 * 3600; t += 15) {
      const firing = t >= 600 ? [alert('a'), alert('a', 'B')] : [alert('a')];
      if (m.receive(firing, t).length > 0) sent.push(t);
    }
    // 30 s, then B (firing from 600 s) at the next group_interval flush (630 s), then hourly from there.
    assert.deepEqual(sent, [30, 630, 630 + 3600]);
  });

  it('drops a group whose alerts resolved; an alert outside the trainscaler route is not sent', () => {
    const m = am();
    assert.deepEqual(m.receive([alert('a')], 0), []);
    assert.equal(m.receive([alert('a')], 30).length, 1);
    assert.deepEqual(m.receive([], 330), []);
    assert.deepEqual(m.receive([alert('a')], 345), []);
    assert.equal(m.receive([alert('a')], 375).length, 1);
    const other = { ...alert('b'), labels: { alertname: 'X', job_name: 'b' } };
    assert.deepEqual(m.receive([other], 400).concat(m.receive([other], 1000)), []);
  });
});
