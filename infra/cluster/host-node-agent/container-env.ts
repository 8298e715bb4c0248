// The environment a container of a pod gets on the host node: what a kubelet would resolve from the pod spec.
// Supported: literal values, `$(VAR)` references to earlier variables (the kubelet's expansion rules, `$$` to
// escape) and fieldRef (the downward API fields a pod may name). Anything else (configMapKeyRef,
// secretKeyRef, resourceFieldRef, envFrom) is refused with an UnsupportedEnvError: the container then waits
// with reason CreateContainerConfigError, as a kubelet leaves it when it cannot build the environment.
import type { V1Container, V1EnvVar, V1Pod } from '@kubernetes/client-node';

export class UnsupportedEnvError extends Error {
  override name = 'UnsupportedEnvError';
}

/** The base environment of every container (what an image's ENV would give), before the pod's variables. */
export const BASE_ENV: Readonly<Record<string, string>> = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/root',
  LANG: 'C.UTF-8',
};

/** `$(NAME)` -> value when NAME is defined, kept as is when not; `$$(NAME)` -> the literal `$(NAME)`. */
export function expandReferences(value: string, env: Readonly<Record<string, string>>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (name === undefined) return '$';
    return Object.hasOwn(env, name) ? (env[name] as string) : match;
  });
}

const LABEL_OR_ANNOTATION = /^metadata\.(labels|annotations)\['([^']+)'\]$/;

export function fieldRefValue(pod: V1Pod, fieldPath: string): string {
  const meta = pod.metadata ?? {};
  const keyed = LABEL_OR_ANNOTATION.exec(fieldPath);
  if (keyed) {
    const map = keyed[1] === 'labels' ? meta.labels : meta.annotations;
    return map?.[keyed[2] as string] ?? '';
  }
  switch (fieldPath) {
    case 'metadata.name':
      return meta.name ?? '';
    case 'metadata.namespace':
      return meta.namespace ?? '';
    case 'metadata.uid':
      return meta.uid ?? '';
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? '';
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? '';
    case 'status.podIP':
      return pod.status?.podIP ?? '';
    case 'status.podIPs':
      return (pod.status?.podIPs ?? []).map((p) => p.ip).join(',');
    case 'status.hostIP':
      return pod.status?.hostIP ?? '';
    default:
      throw new UnsupportedEnvError(`fieldRef ${fieldPath} is not supported by the host node agent`);
  }
}

function variableValue(pod: V1Pod, variable: V1EnvVar, env: Readonly<Record<string, string>>): string {
  const from = variable.valueFrom;
  if (!from) return expandReferences(variable.value ?? '', env);
  if (from.fieldRef) return fieldRefValue(pod, from.fieldRef.fieldPath);
  const kind = Object.keys(from).join(',') || 'empty valueFrom';
  throw new UnsupportedEnvError(`env ${variable.name}: ${kind} is not supported by the host node agent`);
}

/**
 * The container's environment: BASE_ENV, HOSTNAME, then the pod's variables in order (later ones may refer
 * to earlier ones), then `extra` (the agent's own markers, which a pod cannot override).
 */
export function containerEnv(
  pod: V1Pod,
  container: V1Container,
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  if (container.envFrom?.length)
    throw new UnsupportedEnvError('envFrom is not supported by the host node agent');
  const env: Record<string, string> = { ...BASE_ENV, HOSTNAME: pod.metadata?.name ?? '' };
  for (const variable of container.env ?? []) env[variable.name] = variableValue(pod, variable, env);
  return { ...env, ...extra };
}

/** command + args with `$(VAR)` expanded against the container's environment, as the kubelet does. */
export function containerArgv(container: V1Container, env: Readonly<Record<string, string>>): string[] {
  const argv = [...(container.command ?? []), ...(container.args ?? [])].map((a) => expandReferences(a, env));
  if (!container.command?.length)
    throw new UnsupportedEnvError(
      `container ${container.name}: no command (the host node agent has no image entrypoint to fall back on)`,
    );
  return argv;
}
