// kube-scheduler's decisions that matter for training jobs, as pure functions: first-fit binding by requests
// (a pod's preferred node affinity first), and preemption of lower-priority pods when a higher-priority pod
// fits nowhere.
import type { Resources } from '../types.js';

export interface SchedulingNode {
  name: string;
  allocatable: Resources;
}

export interface BoundPod {
  key: string;
  nodeName: string;
  requests: Resources;
  priority: number;
  /** Epoch seconds the pod was bound; among equal priorities the newest are preempted first. */
  boundAt: number;
}

export interface PreemptionChoice {
  nodeName: string;
  victims: string[];
}

export function freeOn(node: SchedulingNode, bound: BoundPod[]): Resources {
  const free = { ...node.allocatable };
  for (const pod of bound) {
    if (pod.nodeName !== node.name) continue;
    free.cpuMillis -= pod.requests.cpuMillis;
    free.memoryBytes -= pod.requests.memoryBytes;
    free.gpus -= pod.requests.gpus;
  }
  return free;
}

export function fits(request: Resources, free: Resources): boolean {
  return (
    request.gpus <= free.gpus &&
    request.cpuMillis <= free.cpuMillis &&
    request.memoryBytes <= free.memoryBytes
  );
}

/** The first node (in the cluster's node order) where the request fits, if any. */
export function firstFitNode(
  nodes: SchedulingNode[],
  bound: BoundPod[],
  request: Resources,
): string | undefined {
  return nodes.find((node) => fits(request, freeOn(node, bound)))?.name;
}

/**
 * A preferred node affinity term as the scheduler reads it: its weight and the node names it matches
 * (`matchFields` on `metadata.name`, operator In or NotIn, the only node field the API allows there).
 */
export interface PreferredNodeTerm {
  weight: number;
  operator: 'In' | 'NotIn';
  names: readonly string[];
}

/**
 * kube-scheduler's NodeAffinity score: among the nodes where the request fits, the one whose matching
 * preferred terms weigh most; first fit among equals (the emulation's stand-in for the other score plugins).
 * With no terms, plain first fit.
 */
export function preferredFitNode(
  nodes: SchedulingNode[],
  bound: BoundPod[],
  request: Resources,
  terms: readonly PreferredNodeTerm[],
): string | undefined {
  if (terms.length === 0) return firstFitNode(nodes, bound, request);
  let best: { name: string; score: number } | undefined;
  for (const node of nodes) {
    if (!fits(request, freeOn(node, bound))) continue;
    let score = 0;
    for (const term of terms) {
      const named = term.names.includes(node.name);
      if (named === (term.operator === 'In')) score += term.weight;
    }
    if (!best || score > best.score) best = { name: node.name, score };
  }
  return best?.name;
}

/** Which resources no node has enough of, for the Unschedulable message ("Insufficient nvidia.com/gpu"). */
export function insufficientResources(
  nodes: SchedulingNode[],
  bound: BoundPod[],
  request: Resources,
): string[] {
  const short = new Set<string>();
  for (const node of nodes) {
    const free = freeOn(node, bound);
    if (request.gpus > free.gpus) short.add('nvidia.com/gpu');
    if (request.cpuMillis > free.cpuMillis) short.add('cpu');
    if (request.memoryBytes > free.memoryBytes) short.add('memory');
  }
  return [...short].sort();
}

/**
 * Like kube-scheduler's preemption: on each node, lower-priority pods are removed lowest priority (then
 * newest) first until the pod fits; among the nodes where it can, the one whose most important victim
 * has the lowest priority, then with the fewest victims, then the first in node order.
 */
export function choosePreemption(
  nodes: SchedulingNode[],
  bound: BoundPod[],
  pod: { requests: Resources; priority: number },
): PreemptionChoice | undefined {
  let best: (PreemptionChoice & { topVictimPriority: number }) | undefined;
  for (const node of nodes) {
    const candidates = bound
      .filter((p) => p.nodeName === node.name && p.priority < pod.priority)
      .sort((a, b) => a.priority - b.priority || b.boundAt - a.boundAt || a.key.localeCompare(b.key));
    const free = freeOn(node, bound);
    const victims: BoundPod[] = [];
    for (const candidate of candidates) {
      if (fits(pod.requests, free)) break;
      victims.push(candidate);
      free.cpuMillis += candidate.requests.cpuMillis;
      free.memoryBytes += candidate.requests.memoryBytes;
      free.gpus += candidate.requests.gpus;
    }
    if (victims.length === 0 || !fits(pod.requests, free)) continue;
    const topVictimPriority = Math.max(...victims.map((v) => v.priority));
    const better =
      !best ||
      topVictimPriority < best.topVictimPriority ||
      (topVictimPriority === best.topVictimPriority && victims.length < best.victims.length);
    if (better) best = { nodeName: node.name, victims: victims.map((v) => v.key), topVictimPriority };
  }
  return best ? { nodeName: best.nodeName, victims: best.victims } : undefined;
}
