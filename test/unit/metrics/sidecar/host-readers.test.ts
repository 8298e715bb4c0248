import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { findPodCgroup, readCgroup } from '../../../../infra/sidecar/src/cgroup.js';
import { GpuReader, parseNvidiaSmiCsv, probeGpus } from '../../../../infra/sidecar/src/gpu.js';

const MiB = 1024 * 1024;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ts-host-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/** A stand-in for nvidia-smi: prints `output` for the exact query the sidecar makes, fails otherwise. */
async function fakeNvidiaSmi(name: string, output: string, exitCode = 0): Promise<string> {
  const path = join(dir, name);
  const expected = '--query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits';
  await writeFile(
    path,
    `#!/bin/sh\n[ "$*" = "${expected}" ] || { echo "unexpected args: $*" >&2; exit 9; }\nprintf '%s' '${output}'\nexit ${exitCode}\n`,
  );
  await chmod(path, 0o755);
  return path;
}

describe('nvidia-smi', () => {
  it('parses one line per GPU and skips [N/A] lines instead of guessing', () => {
    const gpus = parseNvidiaSmiCsv('87, 30012, 40960\n[N/A], [N/A], 40960\n3, 1, 81920\n');
    assert.deepEqual(gpus, [
      { index: 0, utilization: 0.87, memoryUsedBytes: 30012 * MiB, memoryTotalBytes: 40960 * MiB },
      { index: 2, utilization: 0.03, memoryUsedBytes: 1 * MiB, memoryTotalBytes: 81920 * MiB },
    ]);
  });

  it('runs the documented query and reads its output', async () => {
    const command = await fakeNvidiaSmi('nvidia-smi-ok', '55, 1024, 16384\n');
    assert.deepEqual(await probeGpus(command), {
      status: 'ok',
      gpus: [{ index: 0, utilization: 0.55, memoryUsedBytes: 1024 * MiB, memoryTotalBytes: 16384 * MiB }],
    });
  });

  it('reports none, without failing, where nvidia-smi does not exist, and stops trying', async () => {
    const logs: string[] = [];
    const reader = new GpuReader(join(dir, 'no-such-nvidia-smi'), 0, (m) => logs.push(m));
    assert.deepEqual(await reader.read(), []);
    assert.equal(reader.absent, true);
    assert.deepEqual(await reader.read(), []);
    assert.equal(logs.length, 1, 'logged once, not at every scrape');
  });

  it('treats a failing nvidia-smi (driver not loaded) as no reading for now, and retries later', async () => {
    const command = await fakeNvidiaSmi('nvidia-smi-broken', 'NVIDIA-SMI has failed', 9);
    const logs: string[] = [];
    const reader = new GpuReader(command, 0, (m) => logs.push(m));
    assert.deepEqual(await reader.read(), []);
    assert.equal(reader.absent, false);
    assert.match(logs[0] ?? '', /failed/);
  });

  it('runs nvidia-smi at most once per interval however often it is scraped', async () => {
    const counter = join(dir, 'calls');
    const path = join(dir, 'nvidia-smi-counting');
    await writeFile(path, `#!/bin/sh\necho x >> ${counter}\necho '10, 1, 2'\n`);
    await chmod(path, 0o755);
    let now = 0;
    const reader = new GpuReader(
      path,
      5000,
      () => undefined,
      () => now,
    );
    await Promise.all([reader.read(), reader.read(), reader.read()]);
    now = 4000;
    await reader.read();
    now = 6000;
    const gpus = await reader.read();
    assert.equal(gpus[0]?.utilization, 0.1);
    assert.equal((await readFile(counter, 'utf8')).trim().split('\n').length, 2);
  });
});

describe('cgroup v2 files', () => {
  it('reads CPU time, memory, working set and limit', async () => {
    const cg = join(dir, 'cg-limited');
    await mkdir(cg);
    await writeFile(join(cg, 'cpu.stat'), 'usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n');
    await writeFile(join(cg, 'memory.current'), '3221225472\n');
    await writeFile(join(cg, 'memory.max'), '4294967296\n');
    await writeFile(join(cg, 'memory.stat'), 'anon 2147483648\nfile 1073741824\ninactive_file 536870912\n');
    assert.deepEqual(await readCgroup(cg), {
      cpuUsageSeconds: 2.5,
      memoryUsageBytes: 3221225472,
      memoryWorkingSetBytes: 3221225472 - 536870912,
      memoryLimitBytes: 4294967296,
    });
  });

  it("exports no limit for 'max' and nothing for files that are not there", async () => {
    const cg = join(dir, 'cg-unlimited');
    await mkdir(cg);
    await writeFile(join(cg, 'memory.current'), '1048576\n');
    await writeFile(join(cg, 'memory.max'), 'max\n');
    assert.deepEqual(await readCgroup(cg), { memoryUsageBytes: 1048576, memoryWorkingSetBytes: 1048576 });
    assert.deepEqual(await readCgroup(join(dir, 'no-such-cgroup')), {});
  });

  it("finds the pod's cgroup under the node's hierarchy for either cgroup driver", async () => {
    const uid = '8f3c2a10-7d4e-4b9a-a1f2-0c9d8e7f6a5b';
    const systemd = join(dir, 'host-systemd');
    const guaranteed = join(systemd, `kubepods.slice/kubepods-pod${uid.replaceAll('-', '_')}.slice`);
    await mkdir(guaranteed, { recursive: true });
    assert.equal(await findPodCgroup(systemd, uid), guaranteed);
    const cgroupfs = join(dir, 'host-cgroupfs');
    const burstable = join(cgroupfs, `kubepods/burstable/pod${uid}`);
    await mkdir(burstable, { recursive: true });
    assert.equal(await findPodCgroup(cgroupfs, uid), burstable);
    assert.equal(await findPodCgroup(cgroupfs, '00000000-0000-0000-0000-000000000000'), undefined);
  });
});
