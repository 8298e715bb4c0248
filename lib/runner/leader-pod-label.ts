// The leader marks its own pod with trainscaler.io/leader=true and the Service selects that label, so
// Alertmanager's deliveries reach the leader at the first attempt instead of a follower's 503. Every replica
// keeps its own pod's label equal to "am I the leader": set on winning the lease, removed on losing it and
// on shutdown, and removed at start (a restarted container keeps its pod's stale label). Patches are
// retried until they land, and re-applied periodically in case someone edited the pod.
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Logger } from '../../functions/handler-deps.js';

export const LEADER_LABEL = 'trainscaler.io/leader';

/** Sets (true) or removes (false) the label on this replica's pod. */
export type LeaderLabelPatch = (leader: boolean) => Promise<void>;

export function kubernetesLeaderLabelPatch(
  kubeConfig: KubeConfig,
  namespace: string,
  podName: string,
): LeaderLabelPatch {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  return async (leader) => {
    // A merge patch of the label alone: no resourceVersion, so it neither conflicts with the kubelet's
    // status writes nor touches any other field; null deletes the key (a no-op when it is absent).
    await core.patchNamespacedPod(
      {
        name: podName,
        namespace,
        body: { metadata: { labels: { [LEADER_LABEL]: leader ? 'true' : null } } },
        fieldManager: 'trainscaler',
      },
      mergePatch,
    );
  };
}

export interface LeaderPodLabelOptions {
  patch: LeaderLabelPatch;
  logger: Logger;
  /** Wait after a failed patch before the next attempt. */
  retryMs?: number;
  /** Re-applies the label this often even when nothing changed (0: never). */
  reassertMs?: number;
}

export class LeaderPodLabel {
  private desired = false;
  /** What the pod is known to carry; undefined until the first patch landed (a restart may have left one). */
  private applied: boolean | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private sleeping: { timer: NodeJS.Timeout; wake: () => void } | undefined;
  private readonly reassert: NodeJS.Timeout | undefined;

  constructor(private readonly options: LeaderPodLabelOptions) {
    const every = options.reassertMs ?? 30_000;
    if (every > 0) {
      this.reassert = setInterval(() => {
        this.applied = undefined;
        this.sync();
      }, every);
      this.reassert.unref();
    }
    this.sync();
  }

  /** The label this pod must carry from now on; applied in the background, latest wins. */
  set(leader: boolean): void {
    this.desired = leader;
    this.sync();
  }

  /** Waits until the pod carries the desired label, at most `timeoutMs` (shutdown must not hang on it). */
  async settle(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (this.applied !== this.desired && performance.now() < deadline) {
      this.sleeping?.wake();
      await new Promise((r) => setTimeout(r, 20));
    }
    return this.applied === this.desired;
  }

  stop(): void {
    this.stopped = true;
    if (this.reassert) clearInterval(this.reassert);
    this.sleeping?.wake();
  }

  private sync(): void {
    if (this.stopped || this.running) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
    });
  }

  private async loop(): Promise<void> {
    while (!this.stopped && this.applied !== this.desired) {
      const target = this.desired;
      try {
        await this.options.patch(target);
        this.applied = target;
        this.options.logger.info({ label: LEADER_LABEL, leader: target }, 'pod leader label set');
      } catch (error) {
        this.options.logger.warn(
          { label: LEADER_LABEL, leader: target, error: String(error) },
          'cannot label pod',
        );
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.options.retryMs ?? 2_000);
          this.sleeping = { timer, wake: resolve };
        });
        if (this.sleeping) clearTimeout(this.sleeping.timer);
        this.sleeping = undefined;
      }
    }
  }
}
