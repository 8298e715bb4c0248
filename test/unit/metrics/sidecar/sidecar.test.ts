import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { access, chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadSidecarConfig, type SidecarConfig } from '../../../../infra/sidecar/src/config.js';
import { type RunningSidecar, startSidecar } from '../../../../infra/sidecar/src/sidecar.js';
import { waitFor } from './wait-for.js';

const ENV = {
  TRAINSCALER_NAMESPACE: 'team-a',
  TRAINSCALER_JOB_KIND: 'PyTorchJob',
  TRAINSCALER_JOB_NAME: 'bert',
  TRAINSCALER_POD: 'bert-worker-1',
  TRAINSCALER_WORKER_INDEX: '1',
  TRAINSCALER_REPLICAS: '4',
  TRAINSCALER_LOCAL_BATCH_SIZE: '32',
  TRAINSCALER_NODE_NAME: 'gpu-node-2',
  TRAINSCALER_METRICS_HOST: '127.0.0.1',
  TRAINSCALER_METRICS_PORT: '0',
  TRAINSCALER_HOOK_PORT: '0',
};
const IDENTITY =
  'namespace="team-a",job_kind="PyTorchJob",job_name="bert",pod="bert-worker-1",role="worker",worker="1"';
const T0 = 1_800_000_000;

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ts-sidecar-'));
});
after(() => rm(dir, { recursive: true, force: true }));

async function withSidecar(
  env: Record<string, string>,
  body: (s: RunningSidecar, clock: { now: number }) => Promise<void>,
): Promise<void> {
  const clock = { now: T0 };
  const config: SidecarConfig = loadSidecarConfig({
    ...ENV,
    TRAINSCALER_CGROUP_PATH: join(dir, 'none'),
    TRAINSCALER_NVIDIA_SMI: join(dir, 'no-nvidia-smi'),
    ...env,
  });
  const sidecar = await startSidecar(config, { clock: () => clock.now });
  try {
    await body(sidecar, clock);
  } finally {
    await sidecar.stop();
  }
}

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

async function scrape(s: RunningSidecar): Promise<string> {
  const response = await fetch(`${s.metricsUrl}/metrics`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /text\/plain/);
  return response.text();
}

/** The value of the sample line that starts with `prefix`, or undefined. */
function sample(text: string, prefix: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('the sidecar', () => {
  it('exports step time, steps and samples with the job labels the alert rules and queries use', async () => {
    await withSidecar({}, async (s, clock) => {
      for (let step = 0; step <= 20; step++) {
        clock.now = T0 + step * 0.5;
        const answer = await post(`${s.hookUrl}/progress`, { step, at: clock.now });
        assert.deepEqual(answer, { status: 200, json: { drain: false, acknowledged: false } });
      }
      const text = await scrape(s);
      assert.equal(
        sample(
          text,
          `trainscaler_step_time_seconds{replicas="4",nodes="",local_batch_size="32",node="gpu-node-2",${IDENTITY}}`,
        ),
        0.5,
      );
      assert.equal(sample(text, `trainscaler_steps_total{${IDENTITY}}`), 20);
      assert.equal(sample(text, `trainscaler_samples_total{${IDENTITY}}`), 640);
      assert.equal(sample(text, `trainscaler_trainer_samples{${IDENTITY}}`), 640, '20 steps x batch 32');
      assert.equal(sample(text, `trainscaler_last_progress_timestamp_seconds{${IDENTITY}}`), T0 + 10);
      assert.equal(sample(text, `trainscaler_sidecar_draining{${IDENTITY}}`), 0);
      assert.ok(!text.includes('trainscaler_gpu_utilization_ratio{'), 'no GPU here: no GPU samples');
      assert.ok(!text.includes('trainscaler_cgroup_memory_limit_bytes{'), 'no cgroup files: no samples');
    });
  });

  it('exports only the current scale once the trainer reports a resize', async () => {
    await withSidecar({}, async (s, clock) => {
      await post(`${s.hookUrl}/progress`, { step: 0, at: T0 });
      clock.now = T0 + 1;
      await post(`${s.hookUrl}/progress`, { step: 1, at: T0 + 1 });
      await post(`${s.hookUrl}/progress`, { step: 2, at: T0 + 2, replicas: 8, nodes: 2 });
      clock.now = T0 + 4;
      await post(`${s.hookUrl}/progress`, { step: 3, at: T0 + 4 });
      const text = await scrape(s);
      const lines = text.split('\n').filter((l) => l.startsWith('trainscaler_step_time_seconds{'));
      assert.equal(lines.length, 1, lines.join('\n'));
      assert.match(lines[0] ?? '', /replicas="8",nodes="2",local_batch_size="32"/);
      assert.equal(sample(text, 'trainscaler_step_time_seconds{replicas="8"'), 2);
    });
  });

  it('rejects a bad report with the field, and unknown routes', async () => {
    await withSidecar({}, async (s) => {
      assert.deepEqual(await post(`${s.hookUrl}/progress`, { samples: 3 }), {
        status: 400,
        json: { error: 'step is required', field: 'step' },
      });
      assert.equal((await post(`${s.hookUrl}/progress`, { step: -2 })).json.field, 'step');
      assert.equal((await post(`${s.hookUrl}/progress`, { step: 1, replicas: 0 })).json.field, 'replicas');
      assert.equal((await post(`${s.hookUrl}/progress`, 'not json')).status, 400);
      assert.equal((await post(`${s.hookUrl}/progress`, 'x'.repeat(20_000))).status, 413);
      assert.equal((await fetch(`${s.hookUrl}/nope`)).status, 404);
      const health = await fetch(`${s.metricsUrl}/healthz`);
      assert.deepEqual(await health.json(), { status: 'ok', draining: false });
      assert.equal((await fetch(`${s.metricsUrl}/progress`)).status, 404, 'no hook API on the metrics port');
    });
  });

  it('exports GPU and cgroup readings where they exist', async () => {
    const smi = join(dir, 'nvidia-smi');
    await writeFile(smi, "#!/bin/sh\nprintf '12, 2048, 40960\\n97, 39000, 40960\\n'\n");
    await chmod(smi, 0o755);
    const cg = join(dir, 'cgroup');
    await mkdir(cg, { recursive: true });
    await writeFile(join(cg, 'cpu.stat'), 'usage_usec 7000000\n');
    await writeFile(join(cg, 'memory.current'), '3800000000\n');
    await writeFile(join(cg, 'memory.max'), '4000000000\n');
    await withSidecar({ TRAINSCALER_NVIDIA_SMI: smi, TRAINSCALER_CGROUP_PATH: cg }, async (s) => {
      const text = await scrape(s);
      assert.equal(sample(text, `trainscaler_gpu_utilization_ratio{gpu="0",${IDENTITY}}`), 0.12);
      assert.equal(sample(text, `trainscaler_gpu_utilization_ratio{gpu="1",${IDENTITY}}`), 0.97);
      assert.equal(sample(text, `trainscaler_gpu_memory_used_bytes{gpu="1",${IDENTITY}}`), 39000 * 1024 ** 2);
      assert.equal(sample(text, `trainscaler_cgroup_cpu_usage_seconds_total{${IDENTITY}}`), 7);
      assert.equal(sample(text, `trainscaler_cgroup_memory_working_set_bytes{${IDENTITY}}`), 3.8e9);
      assert.equal(sample(text, `trainscaler_cgroup_memory_limit_bytes{${IDENTITY}}`), 4e9);
      await writeFile(join(cg, 'cpu.stat'), 'usage_usec 9500000\n');
      assert.equal(sample(await scrape(s), `trainscaler_cgroup_cpu_usage_seconds_total{${IDENTITY}}`), 9.5);
    });
  });

  it("reads the pod's cgroup found from its UID", async () => {
    const root = join(dir, 'host-cgroup');
    const pod = join(root, 'kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podabc_123.slice');
    await mkdir(pod, { recursive: true });
    await writeFile(join(pod, 'memory.current'), '123456789\n');
    await writeFile(join(pod, 'memory.max'), 'max\n');
    await withSidecar(
      { TRAINSCALER_CGROUP_PATH: '', TRAINSCALER_CGROUP_ROOT: root, TRAINSCALER_POD_UID: 'abc-123' },
      async (s) => {
        const text = await scrape(s);
        assert.equal(sample(text, `trainscaler_cgroup_memory_usage_bytes{${IDENTITY}}`), 123456789);
        assert.ok(!text.includes('trainscaler_cgroup_memory_limit_bytes{'), "'max' is no limit");
      },
    );
  });

  it('takes progress from a log file', async () => {
    const log = join(dir, 'train.log');
    await writeFile(log, '');
    await withSidecar({ TRAINSCALER_LOG_FILE: log, TRAINSCALER_LOG_POLL_MS: '20' }, async (s) => {
      await new Promise((r) => setTimeout(r, 60));
      await writeFile(log, 'step 10 loss 1.0\nstep 11 loss 0.9\nnot progress\n', { flag: 'a' });
      await waitFor(() => s.tracker.lastProgressAt !== undefined, 3000);
      const text = await scrape(s);
      assert.equal(sample(text, `trainscaler_steps_total{${IDENTITY}}`), 1);
      assert.equal(sample(text, `trainscaler_samples_total{${IDENTITY}}`), 32);
    });
  });
});

describe('draining', () => {
  it('tells a hooked trainer to checkpoint and waits for it', async () => {
    await withSidecar({ TRAINSCALER_DRAIN_GRACE_SECONDS: '10' }, async (s) => {
      await post(`${s.hookUrl}/progress`, { step: 1 });
      const drained = s.drainTrainer();
      await waitFor(() => s.drain.draining, 1000);
      assert.deepEqual((await post(`${s.hookUrl}/progress`, { step: 2 })).json, {
        drain: true,
        acknowledged: false,
      });
      assert.equal(sample(await scrape(s), `trainscaler_sidecar_draining{${IDENTITY}}`), 1);
      await post(`${s.hookUrl}/checkpointed`, {});
      assert.equal(await drained, 'acknowledged');
    });
  });

  it('writes the drain file, and takes its removal as the checkpoint being done', async () => {
    const file = join(dir, 'drain-now');
    await withSidecar({ TRAINSCALER_DRAIN_FILE: file, TRAINSCALER_DRAIN_GRACE_SECONDS: '10' }, async (s) => {
      const drained = s.drainTrainer();
      await waitFor(() => s.drain.draining, 1000);
      // The flag flips before the file lands on disk: wait for the file itself, as a trainer would.
      await waitFor(() => existsSync(file), 1000);
      await access(file);
      await rm(file);
      assert.equal(await drained, 'acknowledged');
    });
  });

  it('gives up after the grace period, and does not wait when nobody can hear it', async () => {
    await withSidecar({ TRAINSCALER_DRAIN_GRACE_SECONDS: '0.3' }, async (s) => {
      const started = Date.now();
      assert.equal(await s.drainTrainer(), 'nobody-to-tell');
      assert.ok(Date.now() - started < 200);
    });
    await withSidecar({ TRAINSCALER_DRAIN_GRACE_SECONDS: '0.3' }, async (s) => {
      await fetch(`${s.hookUrl}/drain`);
      const started = Date.now();
      assert.equal(await s.drainTrainer(), 'timeout');
      assert.ok(Date.now() - started >= 280);
    });
  });

  it('the process exits after SIGTERM once the trainer has checkpointed', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'infra/sidecar/src/main.ts'], {
      env: { ...process.env, ...ENV, TRAINSCALER_NVIDIA_SMI: 'off', TRAINSCALER_DRAIN_GRACE_SECONDS: '20' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => stderr.includes('"listening"'), 20_000, 50);
      const hookUrl = /"hook":"([^"]+)"/.exec(stderr)?.[1] ?? '';
      await post(`${hookUrl}/progress`, { step: 1 });
      child.kill('SIGTERM');
      await waitFor(() => stderr.includes('draining'), 5000, 20);
      assert.equal(child.exitCode, null, 'still up while the trainer checkpoints');
      await post(`${hookUrl}/checkpointed`, {});
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('hung'), 5000))]);
      assert.equal(code, 0);
      assert.match(stderr, /"result":"acknowledged"/);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('the process refuses a configuration that names no job', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'infra/sidecar/src/main.ts'], {
      env: {
        ...process.env,
        TRAINSCALER_JOB_KIND: 'Deployment',
        TRAINSCALER_NAMESPACE: 'a',
        TRAINSCALER_JOB_NAME: 'b',
        TRAINSCALER_POD: 'c',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    assert.equal(code, 2);
    assert.match(stderr, /TRAINSCALER_JOB_KIND/);
  });
});

describe('configuration', () => {
  it('requires the job identity and validates numbers', () => {
    assert.throws(
      () => loadSidecarConfig({ ...ENV, TRAINSCALER_JOB_NAME: '' }),
      /TRAINSCALER_JOB_NAME: is required/,
    );
    assert.throws(() => loadSidecarConfig({ ...ENV, TRAINSCALER_REPLICAS: 'four' }), /TRAINSCALER_REPLICAS/);
    assert.throws(
      () => loadSidecarConfig({ ...ENV, TRAINSCALER_SCRAPE_URL: 'http://x/metrics' }),
      /TRAINSCALER_SCRAPE_STEP_METRIC/,
    );
    const config = loadSidecarConfig({ ...ENV, TRAINSCALER_ROLE: 'PS', TRAINSCALER_NVIDIA_SMI: 'off' });
    assert.equal(config.identity.role, 'ps');
    assert.equal(config.nvidiaSmi, undefined);
    assert.equal(config.hook.host, '127.0.0.1', 'the hook API is loopback-only by default');
    assert.equal(loadSidecarConfig(ENV).nvidiaSmi, 'nvidia-smi');
    // In a pod, /sys/fs/cgroup is the sidecar's own container: no cgroup source unless one is named.
    assert.equal(loadSidecarConfig(ENV).cgroup, undefined);
    assert.deepEqual(
      loadSidecarConfig({ ...ENV, TRAINSCALER_CGROUP_ROOT: '/host/cgroup', TRAINSCALER_POD_UID: 'u-1' })
        .cgroup,
      { root: '/host/cgroup', podUid: 'u-1' },
    );
    assert.throws(
      () => loadSidecarConfig({ ...ENV, TRAINSCALER_CGROUP_ROOT: '/host/cgroup' }),
      /TRAINSCALER_POD_UID: is required with TRAINSCALER_CGROUP_ROOT/,
    );
  });
});
