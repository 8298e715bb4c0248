// Reading the OCI image layouts infra/images/build.sh writes, and running an image with an OCI runtime
// (crun or runc) from a bundle umoci unpacks: no container engine, no daemon.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface ImageConfig {
  User?: string;
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
  Env?: string[];
  ExposedPorts?: Record<string, unknown>;
  Labels?: Record<string, string>;
}
interface Descriptor {
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}
export interface Image {
  layout: string;
  config: ImageConfig;
  layers: Descriptor[];
}

export function blobPath(layout: string, digest: string): string {
  return join(layout, 'blobs', ...digest.split(':'));
}

export function readImage(layout: string, tag: string): Image {
  const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  const ref = index.manifests.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag);
  if (!ref) throw new Error(`${layout} has no tag ${tag}`);
  const manifest = JSON.parse(readFileSync(blobPath(layout, ref.digest), 'utf8')) as {
    config: Descriptor;
    layers: Descriptor[];
  };
  const config = JSON.parse(readFileSync(blobPath(layout, manifest.config.digest), 'utf8')) as {
    config: ImageConfig;
  };
  return { layout, config: config.config, layers: manifest.layers };
}

/** Every path in the image's layers (without the leading './'). */
export function imagePaths(image: Image): string[] {
  return image.layers.flatMap((layer) =>
    execFileSync('tar', ['-tzf', blobPath(image.layout, layer.digest)], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    })
      .split('\n')
      .filter(Boolean)
      .map((p) => p.replace(/^\.\//, '').replace(/\/$/, '')),
  );
}

/**
 * Why no container of these images can run here, or undefined. As root nothing is missing. Not root, the
 * runtime runs rootless, with a user namespace in which an unprivileged user can map only its own uid; runc
 * then refuses a configuration that does not map the container's root ("User namespaces enabled, but no
 * user mapping found"), and mapping root instead would run the images as root, the property under test.
 */
export function containersUnavailable(): string | undefined {
  if (process.getuid?.() === 0) return undefined;
  return "not root: an unprivileged user namespace can map only this user, not the images' users 65532 and 10001 (run the test as root)";
}

/**
 * crun, unless the cgroup hierarchy is hybrid with controllers on its cgroup v2 part: crun refuses that
 * ("cgroups in hybrid mode not supported"; this machine binds hugetlb to v2), runc runs there.
 */
export function ociRuntime(): { runtime: 'crun' | 'runc'; why: string } {
  const forced = process.env.TRAINSCALER_OCI_RUNTIME;
  if (forced === 'crun' || forced === 'runc') return { runtime: forced, why: 'TRAINSCALER_OCI_RUNTIME' };
  const unifiedControllers = '/sys/fs/cgroup/unified/cgroup.controllers';
  if (existsSync(unifiedControllers)) {
    const controllers = readFileSync(unifiedControllers, 'utf8').trim();
    if (controllers !== '') {
      return {
        runtime: 'runc',
        why: `hybrid cgroups with '${controllers}' on cgroup v2, which crun refuses`,
      };
    }
  }
  return { runtime: 'crun', why: 'default' };
}

export interface BundleOptions {
  /** Replaces the image's entrypoint + command. */
  args?: string[];
  env?: Record<string, string>;
}

/** Unpacks the image's layers into the directory rootfs (shared by its containers: it is mounted read-only). */
export function unpackRootfs(layout: string, tag: string, rootfs: string): void {
  mkdirSync(dirname(rootfs), { recursive: true });
  execFileSync('umoci', ['raw', 'unpack', '--image', `${layout}:${tag}`, rootfs], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

/**
 * Writes dir/config.json, the runtime configuration umoci derives from the image, as a hardened pod would run
 * it: the image's user, a read-only root filesystem (the unpacked `rootfs`), no capabilities, no new
 * privileges. The host's network namespace, so that the test reaches a server bound to 127.0.0.1.
 */
export function prepareBundle(
  layout: string,
  tag: string,
  rootfs: string,
  dir: string,
  options: BundleOptions = {},
): void {
  mkdirSync(dir, { recursive: true });
  const configPath = join(dir, 'config.json');
  execFileSync('umoci', [
    'raw',
    'runtime-config',
    '--image',
    `${layout}:${tag}`,
    '--rootfs',
    rootfs,
    configPath,
  ]);
  const spec = JSON.parse(readFileSync(configPath, 'utf8')) as {
    process: {
      terminal: boolean;
      args: string[];
      env: string[];
      capabilities?: Record<string, string[]>;
      noNewPrivileges?: boolean;
    };
    root: { path: string; readonly?: boolean };
    linux: { namespaces: { type: string }[] };
  };
  spec.root = { path: rootfs, readonly: true };
  spec.process.terminal = false;
  spec.process.noNewPrivileges = true;
  spec.process.capabilities = { bounding: [], effective: [], inheritable: [], permitted: [], ambient: [] };
  if (options.args) spec.process.args = options.args;
  spec.process.env = [...spec.process.env, ...Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`)];
  spec.linux.namespaces = spec.linux.namespaces.filter((n) => n.type !== 'network');
  writeFileSync(configPath, JSON.stringify(spec, null, 2));
}

/** `<runtime> run` in the foreground: the container's stdout and stderr are the child's. */
export function runContainer(runtime: string, stateDir: string, bundle: string, id: string): ChildProcess {
  return spawn(runtime, ['--root', stateDir, 'run', '--bundle', bundle, id], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Removes the container whatever its state (no error when it is already gone). */
export function deleteContainer(runtime: string, stateDir: string, id: string): void {
  spawnSync(runtime, ['--root', stateDir, 'delete', '--force', id], { stdio: 'ignore', timeout: 30_000 });
}

export function killContainer(runtime: string, stateDir: string, id: string, signal: string): void {
  execFileSync(runtime, ['--root', stateDir, 'kill', id, signal], { stdio: 'ignore', timeout: 30_000 });
}
