// The README's "From a laptop" walkthrough, run as written: the commands between the laptop-walkthrough
// markers of README.md, in order, by bash, from the project directory, on the real test control plane with a
// real Prometheus. Three things differ from a laptop and are substituted, nothing else: Prometheus's address
// (a free port instead of localhost:9090), the HTTP port of `run` (a free one instead of 8080), and HOME (a
// temporary one whose ~/.kube/config is the test cluster's admin kubeconfig). A `trainscaler run` line runs
// until its expected log lines appear, then gets Ctrl-C (SIGINT to its process group), as a user would.
// Needs TRAINSCALER_KUBECONFIG (npm run test:integration sets it); `npm run trainscaler` runs dist/, which
// `npm ci` builds (prepare) and the test rebuilds first so it runs the sources under test.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { freePort, onPath, type Started, start, stop, waitUntil } from '../../infra/local-stack/processes.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const kubeconfig = process.env.TRAINSCALER_KUBECONFIG;
const skip = kubeconfig
  ? false
  : 'TRAINSCALER_KUBECONFIG is not set (npm run test:integration starts the cluster)';
const WAIT_MS = 90_000;

/** The fenced ```sh block between the markers, one command per line (comments kept: bash drops them). */
export function walkthroughCommands(readme: string): string[] {
  const begin = readme.indexOf('<!-- laptop-walkthrough:begin -->');
  const end = readme.indexOf('<!-- laptop-walkthrough:end -->');
  assert.ok(begin >= 0 && end > begin, 'README.md has the laptop-walkthrough markers');
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(begin, end))?.[1];
  assert.ok(block, 'a ```sh block between the markers');
  return block.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
}

interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

function logLines(output: string): LogLine[] {
  const lines: LogLine[] = [];
  for (const text of output.split('\n')) {
    if (!text.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(text) as LogLine);
    } catch {
      // a partial line still being written
    }
  }
  return lines;
}

describe('README "From a laptop" walkthrough on the test control plane', { skip }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'trainscaler-walkthrough-'));
  const home = join(tmp, 'home');
  let prometheus: Started | undefined;
  let prometheusUrl = '';
  let httpPort = 0;
  let env: NodeJS.ProcessEnv = {};
  const admin = new KubeConfig();
  let core: CoreV1Api;
  let custom: CustomObjectsApi;
  const running: ChildProcess[] = [];

  async function namespaceGone(name: string) {
    await core.deleteNamespace({ name }).catch(() => undefined);
    await waitUntil(
      async () => ((await core.readNamespace({ name }).catch(() => undefined)) ? undefined : true),
      WAIT_MS,
      `namespace ${name} deleted`,
    );
  }

  before(async () => {
    admin.loadFromFile(kubeconfig ?? '');
    core = admin.makeApiClient(CoreV1Api);
    custom = admin.makeApiClient(CustomObjectsApi);
    // The sources under test, as `npm ci` would have built them.
    execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore', timeout: 300_000 });
    mkdirSync(join(home, '.kube'), { recursive: true });
    copyFileSync(kubeconfig ?? '', join(home, '.kube', 'config'));
    const promPort = await freePort();
    httpPort = await freePort();
    prometheusUrl = `http://127.0.0.1:${promPort}`;
    const config = join(tmp, 'prometheus.yml');
    writeFileSync(config, 'global:\n  scrape_interval: 1s\n');
    const binary = onPath('prometheus');
    assert.ok(binary, 'prometheus on PATH (npm run setup installs it)');
    prometheus = start('prometheus', binary, [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(tmp, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
    ]);
    await waitUntil(
      async () => ((await fetch(`${prometheusUrl}/-/ready`).catch(() => undefined))?.ok ? true : undefined),
      30_000,
      'prometheus ready',
      () => prometheus?.output() ?? '',
    );
    const kubectl =
      onPath('kubectl') ?? join(process.env.HOME ?? '', '.cache/trainscaler/cluster/bin/kubectl');
    assert.ok(existsSync(kubectl), 'kubectl (infra/cluster uses the same)');
    const { KUBECONFIG: _ignored, ...rest } = process.env;
    env = {
      ...rest,
      HOME: home,
      PATH: [dirname(kubectl), join(ROOT, 'node_modules/.bin'), process.env.PATH ?? ''].join(delimiter),
      LOG_LEVEL: 'info',
    };
    await namespaceGone('team-a');
  });

  after(async () => {
    for (const child of running)
      if (child.exitCode === null && child.signalCode === null && child.pid) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    if (prometheus) await stop(prometheus);
    await namespaceGone('team-a').catch(() => undefined);
    rmSync(tmp, { recursive: true, force: true });
  });

  function substituted(line: string): string {
    assert.ok(
      !/\btrainscaler (-- )?run\b/.test(line) || line.includes('--port 8080'),
      `run on port 8080: ${line}`,
    );
    return line
      .replaceAll('http://localhost:9090', prometheusUrl)
      .replaceAll('--port 8080', `--port ${httpPort}`);
  }

  /** A `trainscaler run` line: until `done` holds on its log, then Ctrl-C; returns its log. */
  async function runUntil(line: string, what: string, done: (log: LogLine[]) => boolean): Promise<LogLine[]> {
    const child = spawn('bash', ['-c', line], {
      cwd: ROOT,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.push(child);
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<string>((r) => child.on('exit', (code, signal) => r(signal ?? String(code))));
    await waitUntil(
      () => (done(logLines(output)) ? true : undefined),
      WAIT_MS,
      what,
      () => output.slice(-5000),
    );
    process.kill(-(child.pid ?? 0), 'SIGINT');
    const code = await Promise.race([
      exited,
      new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000)),
    ]);
    // npm passes Ctrl-C on and ends by the same signal, as in a terminal; trainscaler itself exits 0.
    assert.ok(code === '0' || code === 'SIGINT', `exit after Ctrl-C (${code}):\n${output.slice(-3000)}`);
    const log = logLines(output);
    assert.ok(
      log.some((l) => l.msg === 'runner stopped'),
      'released the lease and stopped',
    );
    const errors = log.filter((l) => l.level >= 50);
    assert.deepEqual(
      errors.map((l) => l.msg),
      [],
      `no error lines:\n${errors.map((l) => JSON.stringify(l)).join('\n')}`,
    );
    return log;
  }

  const bert = async () =>
    (await custom.getNamespacedCustomObject({
      group: 'kubeflow.org',
      version: 'v1',
      namespace: 'team-a',
      plural: 'pytorchjobs',
      name: 'bert',
    })) as {
      metadata: { annotations?: Record<string, string> };
      spec: { pytorchReplicaSpecs: { Worker: { replicas: number } } };
    };

  it('runs every command of the walkthrough; the logs show the checks, the decisions and the ticks', async () => {
    const commands = walkthroughCommands(readFileSync(join(ROOT, 'README.md'), 'utf8')).map(substituted);
    const runs = commands.filter((c) => /\btrainscaler (-- )?run\b/.test(c));
    assert.equal(runs.length, 2, 'a dry run, then real writes');
    let explained = '';
    for (const command of commands) {
      if (!/\btrainscaler (-- )?run\b/.test(command)) {
        const result = spawnSync('bash', ['-c', command], {
          cwd: ROOT,
          env,
          encoding: 'utf8',
          timeout: 120_000,
        });
        assert.equal(result.status, 0, `${command}\n${result.stdout}\n${result.stderr}`);
        if (/\btrainscaler (-- )?explain\b/.test(command)) explained = result.stdout;
        continue;
      }
      const dryRun = command.includes('--dry-run');
      const decisionOn = (log: LogLine[], policy: string) =>
        log.find((l) => l.msg === 'decision' && l.job === 'team-a/bert' && l.policy === policy);
      const log = await runUntil(command, `${dryRun ? 'dry' : 'real'} run: decisions and a tick`, (lines) =>
        Boolean(
          decisionOn(lines, 'initial') &&
            decisionOn(lines, 'rebalance') &&
            lines.some((l) => l.msg === 'schedule tick'),
        ),
      );
      assert.ok(
        log.some((l) => l.msg === 'prometheus reachable'),
        'start-up check of Prometheus',
      );
      assert.ok(
        log.some((l) => l.msg === 'API server reachable'),
        'start-up check of the API server',
      );
      assert.equal(log.filter((l) => l.level === 40 && /unreachable/.test(l.msg)).length, 0);
      const tick = log.find((l) => l.msg === 'schedule tick');
      assert.ok((tick?.managed as number) >= 1, JSON.stringify(tick));
      const rebalance = decisionOn(log, 'rebalance');
      // bert's image does not exist here, so it reports no step time: it is never grown blind, and its keep
      // says what is missing (a job with a sidecar that trains is grown on a real alert: test/training).
      assert.equal(rebalance?.outcome, 'no-change', JSON.stringify(rebalance));
      assert.match(String(rebalance?.reason), /^keep 4 workers: no step-time samples: no sidecar series/);
      if (dryRun) {
        const job = await bert();
        assert.equal(job.spec.pytorchReplicaSpecs.Worker.replicas, 4, 'dry run wrote nothing');
        assert.equal(job.metadata.annotations?.['trainscaler.io/last-decision'], undefined);
      }
    }
    assert.match(explained, /^PyTorchJob team-a\/bert: last decision of each policy$/m);
    // Its 4 workers fit on one node: the submit writes only where they should go (no resize, no cool-down).
    assert.match(explained, /^initial: applied on submit, since /m);
    assert.match(explained, /^ {2}- Worker pods prefer node \S+$/m);
    assert.match(explained, /^rebalance: /m);
  });

  // The commands README.md and docs/ give for a job trainscaler manages, run as written on the job the
  // walkthrough left (team-a/bert, its TrainingAutoscaler and decisions); test/unit/docs-commands.test.ts
  // finds each of these texts here. `trainscaler` and `kubectl trainscaler` are the package's two bins on
  // PATH, as `npm install -g` puts them, run by Node 22 as that needs; recommend reads PROMETHEUS_URL (the test's Prometheus).
  const FOLLOW_UP: [command: string, expect: RegExp][] = [
    ['npm run -s trainscaler -- history team-a/bert --kubeconfig ~/.kube/config', /bert/],
    ['trainscaler history team-a/bert', /bert/],
    ['trainscaler explain team-a/bert', /^PyTorchJob team-a\/bert: last decision of each policy$/m],
    ['kubectl trainscaler explain team-a/bert', /^PyTorchJob team-a\/bert: last decision of each policy$/m],
    ['trainscaler status', /^team-a\s+bert\s+PyTorchJob\s/m],
    ['kubectl trainscaler status', /^team-a\s+bert\s+PyTorchJob\s/m],
    ['trainscaler recommend team-a/bert', /bert/],
    ['kubectl get stj -n team-a', /^pytorchjob-bert\s+PyTorchJob\s+bert\s/m],
    ['kubectl get stj', /.*/],
    ['kubectl get tsa', /.*/],
    ['kubectl get events', /.*/],
    ['kubectl -n trainscaler-system get lease trainscaler-leader', /^trainscaler-leader\s/m],
  ];

  it('then the commands the docs give for a managed job, as written', () => {
    const bin = join(tmp, 'bin');
    mkdirSync(bin, { recursive: true });
    for (const name of ['trainscaler', 'kubectl-trainscaler'])
      if (!existsSync(join(bin, name))) symlinkSync(join(ROOT, 'bin', `${name}.js`), join(bin, name));
    // A global install runs with the first `node` on PATH, which must be Node 22 (docs/operations.md): this one's.
    const withBins = {
      ...env,
      PATH: [bin, dirname(process.execPath), env.PATH].join(delimiter),
      PROMETHEUS_URL: prometheusUrl,
    };
    for (const [command, expect] of FOLLOW_UP) {
      const result = spawnSync('bash', ['-c', command], {
        cwd: ROOT,
        env: withBins,
        encoding: 'utf8',
        timeout: 120_000,
      });
      assert.equal(result.status, 0, `${command}\n${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, expect, `${command}\n${result.stdout}\n${result.stderr}`);
    }
  });
});
