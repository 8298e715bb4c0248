// The hosts file of a job's pods on the host node: one line per pod of the same job (its pod IP and name),
// so that `<job>-worker-0` (the c10d rendezvous endpoint the training-operator sets) and whichever pod
// torchelastic picks as MASTER_ADDR resolve as a cluster DNS would resolve them. It is bind-mounted over
// /etc/hosts in each pod of the job and rewritten in place (same inode: a bind mount follows the inode, a
// rename would leave the pods with the old file) when pods come and go.
import { readFileSync, writeFileSync } from 'node:fs';

export interface HostEntry {
  ip: string;
  name: string;
}

export function renderHosts(entries: readonly HostEntry[]): string {
  const lines = ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback'];
  for (const e of [...entries].sort((a, b) => a.name.localeCompare(b.name))) lines.push(`${e.ip}\t${e.name}`);
  return `${lines.join('\n')}\n`;
}

/** Rewrites `path` in place when its content differs; true when it wrote. */
export function writeHostsInPlace(path: string, content: string): boolean {
  let current: string | undefined;
  try {
    current = readFileSync(path, 'utf8');
  } catch {
    current = undefined;
  }
  if (current === content) return false;
  writeFileSync(path, content, { mode: 0o644 });
  return true;
}
