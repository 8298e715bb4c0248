// The host node as the API sees it: the Node object (labels and a taint so that only pods that ask for it
// land here), its status (Ready, capacity, addresses) and its Lease in kube-node-lease, renewed as a kubelet
// renews it, so the node lifecycle controller keeps the node Ready and never evicts its pods.
import { cpus, totalmem } from 'node:os';
import {
  type CoordinationV1Api,
  type CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  type V1Node,
} from '@kubernetes/client-node';

export const HOST_NODE_LABEL = 'trainscaler.io/host-node';
export const LEASE_SECONDS = 40;

export function hostNode(name: string): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        type: 'host',
        [HOST_NODE_LABEL]: 'true',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
      },
      annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
    },
    spec: { taints: [{ key: HOST_NODE_LABEL, value: 'true', effect: 'NoSchedule' }] },
  };
}

function nodeStatus(name: string, address: string) {
  const at = new Date().toISOString();
  const capacity = {
    cpu: String(cpus().length),
    memory: `${Math.floor(totalmem() / 1024)}Ki`,
    pods: '110',
  };
  const ok = (type: string, reason: string) => ({
    type,
    status: 'False',
    reason,
    message: reason,
    lastHeartbeatTime: at,
    lastTransitionTime: at,
  });
  return {
    status: {
      capacity,
      allocatable: capacity,
      conditions: [
        ok('MemoryPressure', 'KubeletHasSufficientMemory'),
        ok('DiskPressure', 'KubeletHasNoDiskPressure'),
        ok('PIDPressure', 'KubeletHasSufficientPID'),
        {
          type: 'Ready',
          status: 'True',
          reason: 'KubeletReady',
          message: 'host node agent is posting ready status',
          lastHeartbeatTime: at,
          lastTransitionTime: at,
        },
      ],
      addresses: [
        { type: 'InternalIP', address },
        { type: 'Hostname', address: name },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        kubeletVersion: 'host-node-agent',
        kubeProxyVersion: '',
        containerRuntimeVersion: 'host-processes://1',
        kernelVersion: '',
        osImage: 'host',
        machineID: '',
        systemUUID: '',
        bootID: '',
      },
    },
  };
}

export class NodeHeartbeat {
  private leaseVersion: string | undefined;
  private nodeUid: string | undefined;

  constructor(
    private readonly core: CoreV1Api,
    private readonly coordination: CoordinationV1Api,
    readonly name: string,
    private readonly address: string,
  ) {}

  async register(): Promise<void> {
    try {
      const created = await this.core.createNode({ body: hostNode(this.name) });
      this.nodeUid = created.metadata?.uid;
    } catch (error) {
      if ((error as { code?: number }).code !== 409) throw error;
      this.nodeUid = (await this.core.readNode({ name: this.name })).metadata?.uid;
    }
    await this.beat();
  }

  /** Node status and Lease; called every few seconds. */
  async beat(): Promise<void> {
    await this.core.patchNodeStatus(
      { name: this.name, body: nodeStatus(this.name, this.address) },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await this.renewLease();
  }

  private async renewLease(): Promise<void> {
    const body = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        namespace: 'kube-node-lease',
        ...(this.leaseVersion ? { resourceVersion: this.leaseVersion } : {}),
        ...(this.nodeUid
          ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: this.name, uid: this.nodeUid }] }
          : {}),
      },
      spec: {
        holderIdentity: this.name,
        leaseDurationSeconds: LEASE_SECONDS,
        renewTime: new V1MicroTime(Date.now()),
      },
    };
    try {
      const lease = this.leaseVersion
        ? await this.coordination.replaceNamespacedLease({
            name: this.name,
            namespace: 'kube-node-lease',
            body,
          })
        : await this.coordination.createNamespacedLease({ namespace: 'kube-node-lease', body });
      this.leaseVersion = lease.metadata?.resourceVersion;
    } catch (error) {
      // A stale version or a lease from an earlier run: read it back and renew on the next beat.
      const code = (error as { code?: number }).code;
      if (code !== 409) throw error;
      const current = await this.coordination.readNamespacedLease({
        name: this.name,
        namespace: 'kube-node-lease',
      });
      this.leaseVersion = current.metadata?.resourceVersion;
    }
  }
}
