// The two OCI images infra/images/build.sh builds without a container engine (npm run build:images): built
// here (cached layers make a rebuild quick), their sizes printed, their configuration checked against the
// Dockerfiles and the chart, and each one run with an OCI runtime: the runner prints its version and exits
// 0, the sidecar serves /metrics, both as non-root users on a read-only root filesystem with no shell.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { load as loadYaml } from 'js-yaml';
import {
  type BundleOptions,
  containersUnavailable,
  deleteContainer,
  type Image,
  imagePaths,
  killContainer,
  ociRuntime,
  prepareBundle,
  readImage,
  runContainer,
  unpackRootfs,
} from './support/oci.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const { version: VERSION } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
};
const OUT = mkdtempSync(join(tmpdir(), 'trainscaler-images-'));
const RUNNER = 'trainscaler';
const SIDECAR = 'trainscaler-sidecar';
const NODE = '/usr/local/bin/node';

let buildOutput = '';
const images = new Map<string, Image>();
const image = (name: string): Image => {
  const found = images.get(name);
  assert.ok(found, `${name} was not built`);
  return found;
};

before(() => {
  buildOutput = execFileSync('bash', [join(ROOT, 'infra/images/build.sh')], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TRAINSCALER_IMAGES_DIR: OUT },
    timeout: 15 * 60_000,
  });
  for (const name of [RUNNER, SIDECAR]) images.set(name, readImage(join(OUT, name), VERSION));
});
after(() => rmSync(OUT, { recursive: true, force: true }));

/** The instructions of a Dockerfile's last stage (continuation lines joined), and its ARG defaults. */
function dockerfile(path: string): { final: Map<string, string[]>; args: Map<string, string> } {
  const lines = readFileSync(join(ROOT, path), 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'));
  const args = new Map<string, string>();
  let final = new Map<string, string[]>();
  for (const line of lines) {
    const [instruction = '', ...rest] = line.trim().split(/\s+/);
    const value = rest.join(' ');
    if (instruction === 'FROM') final = new Map();
    if (instruction === 'ARG' && value.includes('=')) {
      const [name = '', def = ''] = value.split('=');
      args.set(name, def);
    }
    final.set(instruction, [...(final.get(instruction) ?? []), value]);
  }
  return { final, args };
}

const basePackages = readFileSync(join(ROOT, 'infra/images/base-packages.txt'), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '' && !l.startsWith('#'));
const pinnedNode = (
  JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version: string }>;
  }
).packages['node_modules/node']?.version;

describe('images built without an engine', () => {
  it('prints their sizes', (t) => {
    const sizes = buildOutput.split('\n').filter((l) => l.includes('compressed'));
    for (const line of sizes) t.diagnostic(line);
    assert.equal(sizes.length, 2, buildOutput);
  });

  it('run as non-root users, with Node.js 22 from the pinned npm package as the entrypoint', () => {
    assert.equal(image(RUNNER).config.User, '65532:65532');
    assert.deepEqual(image(RUNNER).config.Entrypoint, [NODE, '/app/bin/trainscaler.js']);
    assert.deepEqual(image(RUNNER).config.Cmd, ['run']);
    assert.equal(image(SIDECAR).config.User, '10001:10001');
    assert.deepEqual(image(SIDECAR).config.Entrypoint, [NODE, '/app/sidecar.cjs']);
    assert.equal(image(SIDECAR).config.Cmd, undefined);
  });

  it('hold no shell, no interpreter but node, no package manager', () => {
    for (const name of [RUNNER, SIDECAR]) {
      const paths = imagePaths(image(name));
      const executables = paths.filter(
        (p) => /^(usr\/)?(s?bin)\/[^/]+$/.test(p) || p.startsWith('usr/local/bin/'),
      );
      assert.deepEqual(executables, ['usr/local/bin/node'], name);
      assert.ok(paths.includes('lib64/ld-linux-x86-64.so.2'), name);
      assert.ok(paths.includes('etc/os-release'), name);
      assert.ok(!paths.some((p) => p.startsWith('var/lib/dpkg') || p.startsWith('etc/apt')), name);
    }
  });

  it('the chart and the kustomization pull the runner image by its built name and tag', () => {
    const reference = image(RUNNER).config.Labels?.['org.opencontainers.image.ref.name'];
    const values = loadYaml(readFileSync(join(ROOT, 'charts/trainscaler/values.yaml'), 'utf8')) as {
      image: { repository: string; tag: string };
    };
    const chart = loadYaml(readFileSync(join(ROOT, 'charts/trainscaler/Chart.yaml'), 'utf8')) as {
      appVersion: string;
    };
    assert.equal(`${values.image.repository}:${values.image.tag || chart.appVersion}`, reference);
    const kustomization = loadYaml(readFileSync(join(ROOT, 'infra/k8s/kustomization.yaml'), 'utf8')) as {
      images: { name: string; newName: string; newTag: string }[];
    };
    const set = kustomization.images.find((i) => i.name === 'trainscaler');
    assert.equal(`${set?.newName}:${set?.newTag}`, reference);
  });

  for (const [name, path] of [
    [RUNNER, 'infra/k8s/Dockerfile'],
    [SIDECAR, 'infra/sidecar/Dockerfile'],
  ] as const) {
    it(`${path} describes the same ${name} image: base, Node.js, user, entrypoint`, () => {
      const { final, args } = dockerfile(path);
      const config = image(name).config;
      assert.deepEqual(final.get('FROM'), ['scratch']);
      assert.deepEqual(final.get('COPY')?.slice(0, 2), ['--from=base /rootfs/ /', '--from=node /out/ /']);
      assert.equal(args.get('NODE_VERSION'), pinnedNode);
      const text = readFileSync(join(ROOT, path), 'utf8');
      assert.match(text, /apt-get download -qq \$\(grep -v '\^#' base-packages\.txt\)/);
      assert.match(text, /sh finish-rootfs\.sh \/rootfs/);
      assert.ok(basePackages.includes('libc6') && basePackages.includes('libstdc++6'));
      assert.deepEqual(final.get('USER'), [config.User]);
      assert.deepEqual(final.get('WORKDIR'), [config.WorkingDir]);
      assert.deepEqual(final.get('ENV'), config.Env);
      assert.deepEqual(
        final.get('EXPOSE'),
        Object.keys(config.ExposedPorts ?? {}).map((p) => p.replace('/tcp', '')),
      );
      assert.deepEqual(
        final.get('ENTRYPOINT')?.map((e) => JSON.parse(e)),
        [config.Entrypoint],
      );
      assert.deepEqual(
        final.get('CMD')?.map((c) => JSON.parse(c)),
        config.Cmd ? [config.Cmd] : undefined,
      );
    });
  }
});

const unavailable = containersUnavailable();
const { runtime, why } = ociRuntime();

describe(`images run by ${runtime} (${why})`, { skip: unavailable }, () => {
  const state = mkdtempSync(join(tmpdir(), 'trainscaler-oci-state-'));
  const bundles = mkdtempSync(join(tmpdir(), 'trainscaler-oci-bundles-'));
  const ids: string[] = [];
  after(() => {
    for (const id of ids) deleteContainer(runtime, state, id);
    rmSync(state, { recursive: true, force: true });
    rmSync(bundles, { recursive: true, force: true });
  });

  /** Runs the container to its end (at most `ms`), returning its exit status and output. */
  async function runToEnd(
    child: ChildProcess,
    ms: number,
  ): Promise<{ code: number | null; out: string; err: string }> {
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d;
    });
    child.stderr?.on('data', (d: Buffer) => {
      err += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    const code = await new Promise<number | null>((done) => child.on('close', done));
    clearTimeout(timer);
    return { code, out, err };
  }

  function container(name: string, options: BundleOptions = {}): ChildProcess {
    const id = `trainscaler-test-${process.pid}-${ids.length}`;
    const bundle = join(bundles, id);
    const rootfs = join(bundles, `${name}-rootfs`);
    ids.push(id);
    if (!existsSync(rootfs)) unpackRootfs(join(OUT, name), VERSION, rootfs);
    prepareBundle(join(OUT, name), VERSION, rootfs, bundle, options);
    return runContainer(runtime, state, bundle, id);
  }

  it('the runner prints its version and exits 0', async () => {
    const run = await runToEnd(
      container(RUNNER, { args: [NODE, '/app/bin/trainscaler.js', '--version'] }),
      60_000,
    );
    assert.equal(run.code, 0, run.err);
    assert.equal(run.out, `${VERSION}\n`);
  });

  it('the runner runs as 65532 on a read-only root filesystem, and has no /bin/sh to spawn', async () => {
    const probe = `
      const fs = require('node:fs');
      const { join, parse } = require('node:path');
      const root = parse(process.cwd()).root;
      const write = (p) => { try { fs.writeFileSync(p, 'x'); return 'written'; } catch (e) { return e.code; } };
      const sh = require('node:child_process').spawnSync(join(root, 'bin', 'sh'), ['-c', 'true']);
      console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), app: write(join(root, 'app', 'x')),
        root: write(join(root, 'x')), tmp: write(join(require('node:os').tmpdir(), 'x')),
        sh: sh.error && sh.error.code, node: process.versions.node }));`;
    const run = await runToEnd(container(RUNNER, { args: [NODE, '-e', probe] }), 60_000);
    assert.equal(run.code, 0, run.err);
    assert.deepEqual(JSON.parse(run.out), {
      uid: 65532,
      gid: 65532,
      app: 'EROFS',
      root: 'EROFS',
      tmp: 'EROFS',
      sh: 'ENOENT',
      node: pinnedNode,
    });
  });

  it('the sidecar serves /metrics on 127.0.0.1 as 10001 and exits on SIGTERM', async () => {
    const child = container(SIDECAR, {
      env: {
        TRAINSCALER_NAMESPACE: 'ns',
        TRAINSCALER_JOB_KIND: 'PyTorchJob',
        TRAINSCALER_JOB_NAME: 'job',
        TRAINSCALER_POD: 'job-worker-0',
        TRAINSCALER_METRICS_HOST: '127.0.0.1',
        TRAINSCALER_METRICS_PORT: '0',
        TRAINSCALER_HOOK_PORT: '0',
        TRAINSCALER_NVIDIA_SMI: 'off',
        TRAINSCALER_DRAIN_GRACE_SECONDS: '1',
      },
    });
    const id = ids.at(-1) ?? '';
    const ended = runToEnd(child, 90_000);
    // The sidecar logs {"msg":"listening","metrics":"http://127.0.0.1:<port>",...} once it listens.
    const base = await new Promise<string>((found, failed) => {
      let err = '';
      const timer = setTimeout(() => failed(new Error(`no 'listening' line within 30 s: ${err}`)), 30_000);
      child.stderr?.on('data', (d: Buffer) => {
        err += d;
        const line = err.split('\n').find((l) => l.includes('"listening"'));
        if (!line) return;
        clearTimeout(timer);
        found(String((JSON.parse(line) as { metrics: string }).metrics));
      });
      child.on('close', () => failed(new Error(`exited before listening: ${err}`)));
    });
    assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/);
    const metricsUrl = new URL('/metrics', base);
    const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(10_000) });
    assert.equal(response.status, 200);
    const body = await response.text();
    assert.match(body, /^trainscaler_\w+\{[^}]*job_name="job"/m);
    killContainer(runtime, state, id, 'TERM');
    const run = await ended;
    assert.equal(run.code, 0, run.err);
  });
});
