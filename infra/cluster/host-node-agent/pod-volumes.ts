// The volumes of a pod on the host node: what each container's volumeMounts bind, and from where. Two kinds,
// as a kubelet gives them: a hostPath (a directory of this machine; pods on the node that name the same path
// share it, as pods share a network volume on a cluster) and an emptyDir (a directory of the pod alone,
// shared by its containers, removed with the pod). Any other kind is refused with its name, never ignored:
// a container that expects a volume must not start without it.
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';
import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';

export class UnsupportedVolumeError extends Error {
  override name = 'UnsupportedVolumeError';
}

export interface VolumeBind {
  /** The directory on this machine. */
  source: string;
  /** Where the container sees it (its mountPath). */
  target: string;
  readOnly: boolean;
  /** Created before the bind when missing (an emptyDir, or a hostPath of type DirectoryOrCreate). */
  create: boolean;
}

/** hostPath types the agent serves: a directory, made or found. */
const HOST_PATH_TYPES = new Set(['', 'Directory', 'DirectoryOrCreate']);

/** The pod's own directory under `podsDir`: its emptyDirs live there, and it goes with the pod. */
export function podDir(podsDir: string, podUid: string): string {
  return join(podsDir, podUid);
}

/**
 * The API server adds a projected service account token volume to every pod (kube-api-access-*): the agent
 * issues no tokens, so it is left unmounted, as the agent always did, rather than refusing every pod.
 */
function serviceAccountToken(volume: V1Volume): boolean {
  return (volume.projected?.sources ?? []).some((s) => s.serviceAccountToken !== undefined);
}

function sourceOf(volume: V1Volume, pod: V1Pod, podsDir: string): { path: string; create: boolean } {
  if (volume.hostPath) {
    const type = volume.hostPath.type ?? '';
    if (!HOST_PATH_TYPES.has(type))
      throw new UnsupportedVolumeError(
        `volume ${volume.name}: hostPath type ${type} is not supported by the host node agent (Directory or DirectoryOrCreate)`,
      );
    if (!isAbsolute(volume.hostPath.path))
      throw new UnsupportedVolumeError(
        `volume ${volume.name}: hostPath ${volume.hostPath.path} is not absolute`,
      );
    return { path: normalize(volume.hostPath.path), create: type === 'DirectoryOrCreate' };
  }
  if (volume.emptyDir) {
    const uid = pod.metadata?.uid;
    if (!uid) throw new UnsupportedVolumeError(`volume ${volume.name}: the pod has no uid for its emptyDir`);
    return { path: join(podDir(podsDir, uid), 'volumes', volume.name), create: true };
  }
  const kinds = Object.keys(volume).filter((k) => k !== 'name');
  throw new UnsupportedVolumeError(
    `volume ${volume.name}: ${kinds.join(', ') || 'no source'} is not supported by the host node agent (hostPath and emptyDir are)`,
  );
}

/**
 * The binds of `container`'s volumeMounts, in order (a later mount may sit inside an earlier one, as in a
 * kubelet). A subPath is a directory below the volume's; it may not leave the volume.
 */
export function containerBinds(pod: V1Pod, container: V1Container, podsDir: string): VolumeBind[] {
  const volumes = new Map((pod.spec?.volumes ?? []).map((v) => [v.name, v]));
  const mounts = (container.volumeMounts ?? []).filter((m) => {
    const volume = volumes.get(m.name);
    return !(volume && serviceAccountToken(volume));
  });
  return mounts.map((mount) => {
    const volume = volumes.get(mount.name);
    if (!volume)
      throw new UnsupportedVolumeError(`volumeMount ${mount.name}: the pod declares no volume of that name`);
    if (!isAbsolute(mount.mountPath))
      throw new UnsupportedVolumeError(
        `volumeMount ${mount.name}: mountPath ${mount.mountPath} is not absolute`,
      );
    if (mount.subPathExpr !== undefined)
      throw new UnsupportedVolumeError(
        `volumeMount ${mount.name}: subPathExpr is not supported by the host node agent`,
      );
    const source = sourceOf(volume, pod, podsDir);
    let path = source.path;
    if (mount.subPath) {
      const sub = normalize(mount.subPath);
      if (isAbsolute(sub) || sub === '..' || sub.startsWith('../'))
        throw new UnsupportedVolumeError(
          `volumeMount ${mount.name}: subPath ${mount.subPath} leaves the volume`,
        );
      path = join(path, sub);
    }
    return {
      source: path,
      target: normalize(mount.mountPath),
      readOnly: mount.readOnly === true,
      // A subPath of a volume is created as a kubelet creates it.
      create: source.create || mount.subPath !== undefined,
    };
  });
}

/**
 * Makes what the binds need on this machine before the container starts: a source the volume creates, and
 * the mount point (there is no image here to provide it). A source that must exist and does not is refused.
 */
export function prepareBinds(binds: readonly VolumeBind[]): void {
  for (const b of binds) {
    if (b.create) mkdirSync(b.source, { recursive: true });
    else if (!existsSync(b.source) || !statSync(b.source).isDirectory())
      throw new UnsupportedVolumeError(`hostPath ${b.source} is not a directory on the host node`);
    mkdirSync(b.target, { recursive: true });
  }
}

/**
 * The shell line a container's setup runs, before `exec` of its command, to bind its volumes inside its own
 * mount namespace (remounted read-only when asked); `true` without any. Each path is quoted.
 */
export function bindScript(binds: readonly VolumeBind[]): string {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const lines = binds.flatMap((b) => [
    `mount --bind ${q(b.source)} ${q(b.target)}`,
    ...(b.readOnly ? [`mount -o remount,bind,ro ${q(b.target)}`] : []),
  ]);
  return lines.length > 0 ? lines.join(' && ') : 'true';
}
