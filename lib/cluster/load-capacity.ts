import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { readPod } from '../adapters/pod-view.js';
import { cpuToMillis, parseQuantity } from '../adapters/quantity.js';
import type { ClusterCapacity, NodeView, Resources } from '../types.js';
import { addResources, ZERO_RESOURCES } from './capacity.js';
import type { ClusterClient } from './cluster-client.js';

function allocatableOf(node: V1Node): Resources {
  const a = node.status?.allocatable ?? {};
  return {
    cpuMillis: a.cpu ? cpuToMillis(a.cpu) : 0,
    memoryBytes: a.memory ? parseQuantity(a.memory) : 0,
    gpus: a['nvidia.com/gpu'] ? parseQuantity(a['nvidia.com/gpu']) : 0,
  };
}

function podRequests(pod: V1Pod): Resources {
  // Sum over all containers: the scheduler reserves the whole pod, not just the training container.
  return (pod.spec?.containers ?? []).reduce(
    (acc, c) => addResources(acc, readPod({ ...pod, spec: { ...pod.spec, containers: [c] } }).requests),
    ZERO_RESOURCES,
  );
}

/** Free capacity as the scheduler sees it: allocatable minus the requests of pods bound and not finished. */
export function capacityOf(nodes: V1Node[], pods: V1Pod[]): ClusterCapacity {
  const allocated = new Map<string, Resources>();
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    const phase = pod.status?.phase;
    if (!node || phase === 'Succeeded' || phase === 'Failed') continue;
    allocated.set(node, addResources(allocated.get(node) ?? ZERO_RESOURCES, podRequests(pod)));
  }
  const views: NodeView[] = nodes.map((node) => {
    const name = node.metadata?.name ?? '';
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready')?.status !== 'False';
    return {
      name,
      allocatable: allocatableOf(node),
      allocated: allocated.get(name) ?? ZERO_RESOURCES,
      schedulable: ready && node.spec?.unschedulable !== true,
    };
  });
  return { nodes: views.sort((a, b) => a.name.localeCompare(b.name)) };
}

export async function loadCapacity(
  cluster: ClusterClient,
): Promise<{ capacity: ClusterCapacity; pods: V1Pod[] }> {
  const [nodes, pods] = await Promise.all([cluster.listNodes(), cluster.listPods(undefined)]);
  return { capacity: capacityOf(nodes, pods), pods };
}
