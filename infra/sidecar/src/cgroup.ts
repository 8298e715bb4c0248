// Pod CPU and memory from cgroup v2 files. In Kubernetes the sidecar sees its OWN container's cgroup at
// /sys/fs/cgroup, so it reads the pod's cgroup instead (all its containers: the trainer, plus the sidecar's
// few tens of MiB), found from the pod UID under a read-only mount of the node's hierarchy; or a directory
// named outright (tests, or wrapper mode where the sidecar shares the trainer's container). Every file is
// optional: what cannot be read is not exported.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

export interface CgroupReading {
  /** cpu.stat usage_usec, as seconds. */
  cpuUsageSeconds?: number;
  /** memory.current: everything charged to the cgroup, page cache included. */
  memoryUsageBytes?: number;
  /** memory.current minus inactive file pages: what the kernel cannot easily reclaim (what cAdvisor reports). */
  memoryWorkingSetBytes?: number;
  /** memory.max; absent when it is 'max' (no limit). */
  memoryLimitBytes?: number;
}

/**
 * Where the kubelet puts a pod's cgroup, for both cgroup drivers (systemd escapes the UID's dashes) and
 * every QoS class: Guaranteed pods sit directly under kubepods.
 */
export function podCgroupCandidates(root: string, podUid: string): string[] {
  const escaped = podUid.replaceAll('-', '_');
  return [
    `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${escaped}.slice`,
    `kubepods.slice/kubepods-pod${escaped}.slice`,
    `kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${escaped}.slice`,
    `kubepods/burstable/pod${podUid}`,
    `kubepods/pod${podUid}`,
    `kubepods/besteffort/pod${podUid}`,
  ].map((path) => join(root, path));
}

export async function findPodCgroup(root: string, podUid: string): Promise<string | undefined> {
  for (const candidate of podCgroupCandidates(root, podUid)) {
    const info = await stat(candidate).catch(() => undefined);
    if (info?.isDirectory()) return candidate;
  }
  return undefined;
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The value of `key` in a flat-keyed file such as cpu.stat or memory.stat ("key value" per line). */
export function flatKeyed(text: string, key: string): number | undefined {
  for (const line of text.split('\n')) {
    const [name, value] = line.trim().split(/\s+/);
    if (name === key && value !== undefined) {
      const n = Number(value);
      return Number.isFinite(n) ? n : undefined;
    }
  }
  return undefined;
}

function single(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = text.trim();
  if (value === 'max' || value === '') return undefined;
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

export async function readCgroup(dir: string): Promise<CgroupReading> {
  const [cpuStat, current, max, memoryStat] = await Promise.all([
    readOptional(join(dir, 'cpu.stat')),
    readOptional(join(dir, 'memory.current')),
    readOptional(join(dir, 'memory.max')),
    readOptional(join(dir, 'memory.stat')),
  ]);
  const reading: CgroupReading = {};
  const usageUsec = cpuStat === undefined ? undefined : flatKeyed(cpuStat, 'usage_usec');
  if (usageUsec !== undefined) reading.cpuUsageSeconds = usageUsec / 1e6;
  const usage = single(current);
  if (usage !== undefined) {
    reading.memoryUsageBytes = usage;
    const inactiveFile = memoryStat === undefined ? undefined : flatKeyed(memoryStat, 'inactive_file');
    reading.memoryWorkingSetBytes = Math.max(0, usage - (inactiveFile ?? 0));
  }
  const limit = single(max);
  if (limit !== undefined) reading.memoryLimitBytes = limit;
  return reading;
}
