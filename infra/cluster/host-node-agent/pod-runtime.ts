// The processes of one pod on the host node. Each container is one process tree started as
//   nsenter --net=<pod netns> unshare --mount --uts --pid --fork --mount-proc sh -c '<setup>; exec command'
// so it sees the pod's network namespace, its own hostname (the pod name), the job's hosts file bound over
// /etc/hosts, a resolv.conf without a nameserver (no cluster DNS here: names resolve through the hosts file,
// and a lookup of any other name fails at once instead of timing out), and its own PID namespace: the command is PID 1 there, SIGTERM goes to it alone (as a kubelet
// signals a container's PID 1) and SIGKILL of PID 1 takes every process of the container with it. Its
// volumes (hostPath, emptyDir: pod-volumes.ts) are bound in its mount namespace before the command starts.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { containerArgv, containerEnv, UnsupportedEnvError } from './container-env.js';
import type { PodNetwork } from './pod-network.js';
import {
  type ContainerState,
  podPhase,
  type RestartPolicy,
  restartBackoffMs,
  restartPolicyOf,
  restarts,
  terminationOf,
} from './pod-status.js';
import {
  bindScript,
  containerBinds,
  podDir,
  prepareBinds,
  UnsupportedVolumeError,
  type VolumeBind,
} from './pod-volumes.js';

/** $1 hostname, $2 hosts file, $3 resolv.conf, $4 working directory, then the command; the volumes before the cd. */
function setupScript(binds: readonly VolumeBind[]): string {
  return `hostname "$1" && mount --bind "$2" /etc/hosts && mount --bind "$3" /etc/resolv.conf && ${bindScript(binds)} && cd "$4" && shift 4 && exec "$@"`;
}

export interface RuntimeOptions {
  network: PodNetwork;
  hostsFile: string;
  /**
   * Bound over /etc/resolv.conf, as a kubelet gives a pod its cluster DNS: the host's nameserver is not
   * reachable from a pod's network namespace, and every lookup there would wait out its time-outs.
   */
  resolvConf: string;
  logDir: string;
  workDir: string;
  /** Each pod's own directory (its emptyDir volumes) under here, removed with the pod. */
  podsDir: string;
  /** Variables every container gets on top of the pod's (the agent's marker, so down.sh can find leftovers). */
  markerEnv: Record<string, string>;
  onChange: () => void;
  log: (msg: string) => void;
}

interface Container {
  spec: V1Container;
  /** A native sidecar: an initContainer with restartPolicy Always, run beside the regular containers. */
  sidecar: boolean;
  /** The process already sent SIGTERM. */
  signalled?: number;
  state: ContainerState;
  child?: ChildProcess;
  exited?: Promise<void>;
  restartTimer?: NodeJS.Timeout;
}

const now = () => new Date().toISOString();

function signalNumber(signal: NodeJS.Signals | null): number | undefined {
  return signal ? constants.signals[signal] : undefined;
}

/** The PID (on the host) of the container's PID 1: the child `unshare --fork` made. */
function containerInit(wrapperPid: number): number | undefined {
  try {
    const children = readFileSync(`/proc/${wrapperPid}/task/${wrapperPid}/children`, 'utf8').trim();
    const first = Number(children.split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : undefined;
  } catch {
    return undefined;
  }
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

export class PodRuntime {
  readonly uid: string;
  readonly startTime = now();
  private readonly containers: Container[];
  private readonly policy: RestartPolicy;
  private stopping = false;

  constructor(
    private pod: V1Pod,
    private readonly options: RuntimeOptions,
  ) {
    this.uid = pod.metadata?.uid ?? '';
    this.policy = restartPolicyOf(pod);
    const sidecars = (pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always');
    this.unsupported =
      sidecars.length < (pod.spec?.initContainers?.length ?? 0)
        ? 'init containers (other than sidecars with restartPolicy Always) are not supported by the host node agent'
        : undefined;
    // Sidecars first, as a kubelet starts them before the regular containers.
    this.containers = [
      ...sidecars.map((spec) => ({ spec, sidecar: true })),
      ...(pod.spec?.containers ?? []).map((spec) => ({ spec, sidecar: false })),
    ].map(({ spec, sidecar }) => ({
      spec,
      sidecar,
      state: { name: spec.name, waiting: { reason: 'ContainerCreating' }, restartCount: 0 },
    }));
  }

  private readonly unsupported: string | undefined;
  /** Set once every regular container has finished: the sidecars are being stopped and stay stopped. */
  private sidecarsStopping = false;

  get name(): string {
    return `${this.pod.metadata?.namespace}/${this.pod.metadata?.name}`;
  }

  get ip(): string {
    return this.options.network.ip;
  }

  /** The latest pod object seen (labels, status) for fieldRef values. */
  update(pod: V1Pod): void {
    this.pod = pod;
  }

  states(): ContainerState[] {
    return this.containers.filter((c) => !c.sidecar).map((c) => ({ ...c.state }));
  }

  sidecarStates(): ContainerState[] {
    return this.containers.filter((c) => c.sidecar).map((c) => ({ ...c.state }));
  }

  get finished(): boolean {
    const phase = podPhase(this.states(), this.sidecarStates());
    return phase === 'Succeeded' || phase === 'Failed';
  }

  start(): void {
    for (const c of this.containers) this.launch(c);
  }

  private launch(c: Container): void {
    if (this.stopping || (c.sidecar && this.sidecarsStopping)) return;
    if (this.unsupported) {
      c.state = { ...c.state, waiting: { reason: 'CreateContainerConfigError', message: this.unsupported } };
      this.options.onChange();
      return;
    }
    const podName = this.pod.metadata?.name ?? '';
    let env: Record<string, string>;
    let argv: string[];
    let binds: VolumeBind[];
    try {
      const withIp: V1Pod = { ...this.pod, status: { ...this.pod.status, podIP: this.ip } };
      env = containerEnv(withIp, c.spec, this.options.markerEnv);
      argv = containerArgv(c.spec, env);
      binds = containerBinds(this.pod, c.spec, this.options.podsDir);
      prepareBinds(binds);
    } catch (error) {
      if (!(error instanceof UnsupportedEnvError || error instanceof UnsupportedVolumeError)) throw error;
      // Unlike a kubelet (which retries, since a missing ConfigMap may appear), nothing here can change.
      c.state = { ...c.state, waiting: { reason: 'CreateContainerConfigError', message: error.message } };
      this.options.onChange();
      return;
    }
    mkdirSync(this.options.logDir, { recursive: true });
    const logPath = join(
      this.options.logDir,
      `${this.pod.metadata?.namespace}_${podName}_${c.spec.name}.log`,
    );
    const log = openSync(logPath, 'a');
    const startedAt = now();
    let child: ChildProcess;
    try {
      child = spawn(
        'nsenter',
        [
          `--net=${this.options.network.path}`,
          '--',
          'unshare',
          '--mount',
          '--uts',
          '--pid',
          '--fork',
          '--mount-proc',
          'sh',
          '-c',
          setupScript(binds),
          'sh',
          podName,
          this.options.hostsFile,
          this.options.resolvConf,
          c.spec.workingDir ?? this.options.workDir,
          ...argv,
        ],
        { env, detached: true, stdio: ['ignore', log, log] },
      );
    } finally {
      closeSync(log);
    }
    c.child = child;
    const last = c.state.lastTerminated;
    c.state = {
      name: c.state.name,
      restartCount: c.state.restartCount,
      running: { startedAt },
      ...(last ? { lastTerminated: last } : {}),
    };
    this.options.log(`${this.name}: started ${c.spec.name} (pid ${child.pid}): ${argv.join(' ')}`);
    c.exited = new Promise((resolve) => {
      child.once('error', (error) => {
        this.exited(c, startedAt, 127, undefined, error.message);
        resolve();
      });
      child.once('exit', (code, signal) => {
        this.exited(c, startedAt, code, signalNumber(signal));
        resolve();
      });
    });
    this.options.onChange();
  }

  private exited(
    c: Container,
    startedAt: string,
    code: number | null,
    signal: number | undefined,
    message?: string,
  ): void {
    if (c.child === undefined) return;
    c.child = undefined;
    const termination = terminationOf(code, signal, startedAt, now());
    if (message) termination.message = message;
    this.options.log(`${this.name}: ${c.spec.name} exited with ${termination.exitCode}`);
    const stopped = this.stopping || (c.sidecar && this.sidecarsStopping);
    if (!stopped && restarts(c.sidecar ? 'Always' : this.policy, termination.exitCode)) {
      const delay = restartBackoffMs(c.state.restartCount);
      c.state = {
        name: c.state.name,
        restartCount: c.state.restartCount,
        lastTerminated: termination,
        waiting: {
          reason: 'CrashLoopBackOff',
          message: `back-off ${delay / 1000}s restarting ${c.spec.name}`,
        },
      };
      c.restartTimer = setTimeout(() => {
        c.restartTimer = undefined;
        c.state.restartCount += 1;
        this.launch(c);
      }, delay);
    } else {
      c.state = {
        name: c.state.name,
        restartCount: c.state.restartCount,
        terminated: termination,
        ...(c.state.lastTerminated ? { lastTerminated: c.state.lastTerminated } : {}),
      };
      const regularDone = this.containers.every((x) => x.sidecar || x.state.terminated);
      // (On deletion stop() stops the sidecars itself, after the regular containers.)
      if (!c.sidecar && !this.stopping && !this.sidecarsStopping && regularDone) void this.stopSidecars();
    }
    this.options.onChange();
  }

  /** The regular containers are done: the sidecars get SIGTERM (SIGKILL after the grace period). */
  private async stopSidecars(): Promise<void> {
    this.sidecarsStopping = true;
    const sidecars = this.containers.filter((c) => c.sidecar);
    if (sidecars.length === 0) return;
    this.options.log(`${this.name}: every container finished; stopping the sidecars`);
    await this.terminate(sidecars, (this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000);
    this.options.onChange();
  }

  /**
   * Stops every container as a kubelet does on deletion: SIGTERM to each container's PID 1, SIGKILL to
   * what is left after `graceMs`. Resolves once every process has exited. Containers not running are
   * marked terminated so the pod reaches a final phase.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    this.sidecarsStopping = true;
    // Regular containers first, then the sidecars (so a sidecar outlives the trainer it serves), within one grace.
    const deadline = Date.now() + graceMs;
    await this.terminate(
      this.containers.filter((c) => !c.sidecar),
      graceMs,
    );
    await this.terminate(
      this.containers.filter((c) => c.sidecar),
      Math.max(0, deadline - Date.now()),
    );
    this.options.onChange();
  }

  /** The pod's own directory (its emptyDirs): once its containers have stopped, as a kubelet removes them. */
  removeVolumes(): void {
    if (this.uid) rmSync(podDir(this.options.podsDir, this.uid), { recursive: true, force: true });
  }

  private async terminate(containers: Container[], graceMs: number): Promise<void> {
    const running: Container[] = [];
    for (const c of containers) {
      if (c.restartTimer) clearTimeout(c.restartTimer);
      c.restartTimer = undefined;
      if (c.child?.pid !== undefined) running.push(c);
      else if (!c.state.terminated) {
        const at = now();
        c.state = {
          name: c.state.name,
          restartCount: c.state.restartCount,
          terminated: { exitCode: 0, reason: 'Completed', startedAt: at, finishedAt: at },
        };
      }
    }
    for (const c of running) {
      const pid = c.child?.pid as number;
      // Once per process: a second SIGTERM means "exit now" to many programs (the sidecar among them).
      if (c.signalled === pid) continue;
      c.signalled = pid;
      const init = containerInit(pid);
      // Without its PID 1 known yet (it is being forked), the wrapper's group gets the signal.
      if (init) kill(init, 'SIGTERM');
      else kill(-pid, 'SIGTERM');
    }
    const all = Promise.all(running.map((c) => c.exited));
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'kill'>((resolve) => {
      timer = setTimeout(() => resolve('kill'), graceMs);
    });
    if ((await Promise.race([all.then(() => 'done' as const), graceOver])) === 'kill') {
      for (const c of running) {
        const pid = c.child?.pid;
        if (pid === undefined) continue;
        this.options.log(`${this.name}: ${c.spec.name} still running after the grace period: SIGKILL`);
        const init = containerInit(pid);
        if (init) kill(init, 'SIGKILL'); // PID 1 of a PID namespace: the kernel kills the rest
        kill(-pid, 'SIGKILL');
      }
      await all;
    }
    clearTimeout(timer);
  }
}
