// The host node agent of the TEST cluster: it plays the kubelet for one node (default `host-node-0`) whose
// pods really run, as processes on this machine, while kwok keeps playing the kubelets of the fake nodes.
// Not a kubelet: no images, probes, init containers, cgroups or resource limits, and of volumes only hostPath
// and emptyDir (pod-volumes.ts); see infra/cluster/README.md ("The host node"). Started by
// infra/cluster/up.sh, stopped by down.sh.
//
// Env: HOST_NODE_AGENT_KUBECONFIG (required), HOST_NODE_NAME, HOST_NODE_TAG (short per-cluster id for link
// names), HOST_NODE_CIDR (x.y.z.0/24 for pod addresses), HOST_NODE_STATE_DIR (hosts files, container logs),
// HOST_NODE_WORKDIR (a container's working directory when it names none).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  ListWatch,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  Watch,
} from '@kubernetes/client-node';
import { renderHosts, writeHostsInPlace } from './hosts-file.js';
import { NodeHeartbeat } from './node-heartbeat.js';
import { HostNetwork } from './pod-network.js';
import { PodRuntime } from './pod-runtime.js';
import { podStatus } from './pod-status.js';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

const KUBECONFIG = env('HOST_NODE_AGENT_KUBECONFIG');
const NODE = env('HOST_NODE_NAME', 'host-node-0');
const TAG = env('HOST_NODE_TAG', '0');
const CIDR = env('HOST_NODE_CIDR', '10.247.0.0/24');
const STATE_DIR = env('HOST_NODE_STATE_DIR');
const WORKDIR = env('HOST_NODE_WORKDIR', process.cwd());
const HEARTBEAT_MS = 10_000;
const RESYNC_MS = 1_000;
const DEFAULT_GRACE_S = 30;
const SHUTDOWN_GRACE_MS = 5_000;
/** Marker in every container's environment: down.sh kills leftovers carrying it after a crash of the agent. */
const MARKER = { TRAINSCALER_HOST_NODE_AGENT: STATE_DIR };

const log = (msg: string) => console.log(`${new Date().toISOString()} ${msg}`);

const kc = new KubeConfig();
kc.loadFromFile(KUBECONFIG);
const core = kc.makeApiClient(CoreV1Api);
const network = new HostNetwork(TAG, CIDR);
const heartbeat = new NodeHeartbeat(core, kc.makeApiClient(CoordinationV1Api), NODE, network.gateway);

const runtimes = new Map<string, PodRuntime>();
const pods = new Map<string, V1Pod>();
const pushed = new Map<string, string>();
const stopping = new Map<string, Promise<void>>();
/** Pods whose removal this agent has finished: later events about them (until the DELETED one) are stale. */
const finalized = new Set<string>();
const hostsDir = join(STATE_DIR, 'hosts');
const resolvConf = join(STATE_DIR, 'resolv.conf');
const logDir = join(STATE_DIR, 'logs');
const podsDir = join(STATE_DIR, 'pods');
let shuttingDown = false;

const uidOf = (pod: V1Pod) => pod.metadata?.uid ?? '';
const jobOf = (pod: V1Pod) =>
  `${pod.metadata?.namespace}_${pod.metadata?.labels?.['training.kubeflow.org/job-name'] ?? pod.metadata?.name}`;

function refreshHosts(job: string): void {
  const entries = [...runtimes.values()]
    .map((r) => ({ r, pod: pods.get(r.uid) }))
    .filter(({ pod }) => pod && jobOf(pod) === job)
    .map(({ r, pod }) => ({ ip: r.ip, name: pod?.metadata?.name ?? '' }));
  const path = join(hostsDir, job);
  if (entries.length > 0) writeHostsInPlace(path, renderHosts(entries));
  else rmSync(path, { force: true });
}

async function pushStatus(pod: V1Pod, runtime: PodRuntime): Promise<void> {
  const states = runtime.states();
  const sidecars = runtime.sidecarStates();
  const key = JSON.stringify([runtime.ip, states, sidecars]);
  if (pushed.get(runtime.uid) === key) return;
  const body = {
    status: podStatus(
      pod,
      states,
      { podIP: runtime.ip, hostIP: network.gateway },
      runtime.startTime,
      sidecars,
    ),
  };
  try {
    await core.patchNamespacedPodStatus(
      { name: pod.metadata?.name ?? '', namespace: pod.metadata?.namespace ?? '', body },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    pushed.set(runtime.uid, key);
  } catch (error) {
    // Gone or not reachable now: the next resync tries again (or the deletion path takes over).
    log(`status of ${runtime.name}: ${(error as Error).message.split('\n')[0]}`);
  }
}

function start(pod: V1Pod): void {
  const job = jobOf(pod);
  const hostsFile = join(hostsDir, job);
  const networkOfPod = network.attach(uidOf(pod));
  const runtime = new PodRuntime(pod, {
    network: networkOfPod,
    hostsFile,
    resolvConf,
    logDir,
    workDir: WORKDIR,
    podsDir,
    markerEnv: MARKER,
    onChange: () => void sync(uidOf(pod)),
    log,
  });
  runtimes.set(runtime.uid, runtime);
  refreshHosts(job);
  runtime.start();
}

/** Kubelet-side deletion: stop the containers, release the network, then remove the pod for good. */
function finalize(uid: string, graceMs: number, deleteFromApi: boolean): Promise<void> {
  const running = stopping.get(uid);
  if (running) return running;
  const runtime = runtimes.get(uid);
  const pod = pods.get(uid);
  const done = (async () => {
    if (runtime) {
      log(`${runtime.name}: stopping (grace ${graceMs / 1000}s)`);
      await runtime.stop(graceMs);
      runtime.removeVolumes();
      if (pod && deleteFromApi) await pushStatus(pod, runtime);
      network.detach(uid);
      runtimes.delete(uid);
      pushed.delete(uid);
      if (pod) refreshHosts(jobOf(pod));
    }
    if (pod && deleteFromApi) {
      log(`${pod.metadata?.namespace}/${pod.metadata?.name}: stopped; removing the pod`);
      await core
        .deleteNamespacedPod({
          name: pod.metadata?.name ?? '',
          namespace: pod.metadata?.namespace ?? '',
          gracePeriodSeconds: 0,
          body: { gracePeriodSeconds: 0, preconditions: { uid } },
        })
        .catch((error: Error) => log(`delete ${pod.metadata?.name}: ${error.message.split('\n')[0]}`));
      finalized.add(uid);
    }
  })();
  stopping.set(uid, done);
  return done.finally(() => stopping.delete(uid));
}

/** Brings one pod in line with its spec; idempotent, called on every event and every resync. */
async function sync(uid: string): Promise<void> {
  const pod = pods.get(uid);
  if (!pod || shuttingDown) return;
  const runtime = runtimes.get(uid);
  if (pod.metadata?.deletionTimestamp) {
    const grace =
      pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_S;
    await finalize(uid, grace * 1000, true);
    return;
  }
  if (!runtime) {
    const phase = pod.status?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') return; // finished in an earlier run of the agent
    try {
      start(pod);
    } catch (error) {
      log(`cannot start ${pod.metadata?.namespace}/${pod.metadata?.name}: ${(error as Error).message}`);
      network.detach(uid);
      runtimes.delete(uid);
    }
    return;
  }
  runtime.update(pod);
  await pushStatus(pod, runtime);
}

function onPod(pod: V1Pod): void {
  const uid = uidOf(pod);
  if (!uid || pod.spec?.nodeName !== NODE || finalized.has(uid)) return;
  pods.set(uid, pod);
  void sync(uid);
}

function onPodGone(pod: V1Pod): void {
  const uid = uidOf(pod);
  // Removed without us (force deletion, namespace teardown of finished pods): stop whatever still runs.
  void finalize(uid, 0, false).finally(() => {
    pods.delete(uid);
    finalized.delete(uid);
  });
}

async function main(): Promise<void> {
  mkdirSync(hostsDir, { recursive: true });
  mkdirSync(logDir, { recursive: true });
  // No nameserver line: glibc then asks 127.0.0.1, which in a pod's namespace refuses at once (torch >= 2.x
  // looks up its own address's name at every process-group start; the host's nameserver, unreachable from
  // there, made each lookup wait out two 5 s time-outs).
  writeFileSync(resolvConf, '# host node: no cluster DNS; pod and job names resolve through /etc/hosts\n');
  network.setUp();
  await heartbeat.register();
  log(`node ${NODE} registered (bridge ${network.bridge}, gateway ${network.gateway}, pods ${CIDR})`);
  const beats = setInterval(() => {
    heartbeat.beat().catch((error: Error) => log(`heartbeat: ${error.message.split('\n')[0]}`));
  }, HEARTBEAT_MS);
  const fieldSelector = `spec.nodeName=${NODE}`;
  const watch = new ListWatch<V1Pod>(
    '/api/v1/pods',
    new Watch(kc),
    () => core.listPodForAllNamespaces({ fieldSelector }),
    false,
    undefined,
    fieldSelector,
  );
  watch.on('add', onPod);
  watch.on('update', onPod);
  watch.on('delete', onPodGone);
  // A failed list or a dropped watch restarts it a second later, again until it holds (one attempt at a time).
  const restartWatch = (error: unknown) => {
    if (shuttingDown) return;
    log(`pod watch: ${String(error).split('\n')[0]}; restarting in 1s`);
    setTimeout(() => void watch.start().catch(restartWatch), 1_000);
  };
  watch.on('error', restartWatch);
  await watch.start();
  const resync = setInterval(() => {
    for (const uid of pods.keys()) void sync(uid);
  }, RESYNC_MS);

  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    log(`${signal}: stopping ${runtimes.size} pod(s)`);
    clearInterval(beats);
    clearInterval(resync);
    await watch.stop();
    const hardStop = setTimeout(() => {
      network.tearDown();
      process.exit(1);
    }, SHUTDOWN_GRACE_MS + 5_000);
    await Promise.all([...runtimes.values()].map((r) => r.stop(SHUTDOWN_GRACE_MS)));
    clearTimeout(hardStop);
    network.tearDown();
    log('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((error: Error) => {
  log(`host node agent failed: ${error.stack ?? error.message}`);
  try {
    network.tearDown();
  } catch {
    // nothing was set up
  }
  process.exit(1);
});
