// One network namespace per pod, as a real node gives each pod its own network stack: the pod's containers
// share its loopback (the sidecar's 9470 and the hook's 9471 do not collide between pods) and it gets an
// address of its own on a bridge that exists only on this machine (TRAINSCALER_HOST_NODE_CIDR, a /24 chosen
// per cluster instance), so podIP:port is reachable from the host exactly as in a cluster.
// Names carry the cluster's tag so two test clusters on one machine never touch each other's links;
// everything is removed on the pod's end, on the agent's exit, and by infra/cluster/down.sh.
import { execFileSync } from 'node:child_process';

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
}

function quietly(fn: () => unknown): void {
  try {
    fn();
  } catch {
    // already gone
  }
}

export interface PodNetwork {
  netns: string;
  /** /run/netns/<netns>, for nsenter --net=. */
  path: string;
  ip: string;
}

export class HostNetwork {
  readonly bridge: string;
  readonly gateway: string;
  private readonly prefix: string;
  private readonly free: number[] = [];
  private readonly byPod = new Map<string, PodNetwork>();

  /** `tag`: short per-cluster id (e.g. the API server port); `cidr`: an x.y.z.0/24 on this machine only. */
  constructor(
    private readonly tag: string,
    cidr: string,
  ) {
    const m = /^(\d+\.\d+\.\d+)\.0\/24$/.exec(cidr);
    if (!m) throw new Error(`host node CIDR must be an x.y.z.0/24, got ${cidr}`);
    this.prefix = m[1] as string;
    this.bridge = `tsbr${tag}`.slice(0, 15);
    this.gateway = `${this.prefix}.1`;
    for (let i = 2; i <= 254; i++) this.free.push(i);
  }

  private netnsName(podUid: string): string {
    return `tsna${this.tag}-${podUid.replace(/-/g, '').slice(0, 12)}`;
  }

  /** Creates the bridge (after removing whatever a crashed run of this cluster left behind). */
  setUp(): void {
    this.removeLeftovers();
    ip('link', 'add', this.bridge, 'type', 'bridge');
    ip('addr', 'add', `${this.gateway}/24`, 'dev', this.bridge);
    ip('link', 'set', this.bridge, 'up');
  }

  /** Network namespaces and the bridge of this cluster's tag, from any earlier run. */
  removeLeftovers(): void {
    const mine = `tsna${this.tag}-`;
    for (const line of ip('netns', 'list').split('\n')) {
      const name = line.split(' ')[0];
      if (name?.startsWith(mine)) quietly(() => ip('netns', 'del', name));
    }
    quietly(() => ip('link', 'del', this.bridge));
  }

  attach(podUid: string): PodNetwork {
    const existing = this.byPod.get(podUid);
    if (existing) return existing;
    const host = this.free.shift();
    if (host === undefined) throw new Error('host node: no pod address left in the /24');
    const netns = this.netnsName(podUid);
    const veth = `v${this.tag}${podUid.replace(/-/g, '').slice(0, 8)}`.slice(0, 15);
    const address = `${this.prefix}.${host}`;
    try {
      quietly(() => ip('netns', 'del', netns));
      ip('netns', 'add', netns);
      ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
      ip('link', 'set', veth, 'master', this.bridge);
      ip('link', 'set', veth, 'up');
      ip('-n', netns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
      ip('-n', netns, 'link', 'set', 'lo', 'up');
      ip('-n', netns, 'link', 'set', 'eth0', 'up');
      ip('-n', netns, 'route', 'add', 'default', 'via', this.gateway);
    } catch (error) {
      quietly(() => ip('netns', 'del', netns));
      this.free.unshift(host);
      throw error;
    }
    const network = { netns, path: `/run/netns/${netns}`, ip: address };
    this.byPod.set(podUid, network);
    return network;
  }

  /** Deleting the namespace destroys its end of the veth pair, and with it the host end. */
  detach(podUid: string): void {
    const network = this.byPod.get(podUid);
    if (!network) return;
    quietly(() => ip('netns', 'del', network.netns));
    this.byPod.delete(podUid);
    const host = Number(network.ip.split('.').at(-1));
    this.free.push(host);
    this.free.sort((a, b) => a - b);
  }

  tearDown(): void {
    for (const uid of [...this.byPod.keys()]) this.detach(uid);
    this.removeLeftovers();
  }
}
