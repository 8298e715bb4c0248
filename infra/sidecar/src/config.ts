// The sidecar's whole configuration comes from its environment (set in the pod template, most of it
// through the downward API), validated at start so that a typo fails the container instead of exporting
// series that no alert rule or query will ever match.

export const JOB_KINDS = ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'JobSet', 'TrainJob'] as const;
export type SidecarJobKind = (typeof JOB_KINDS)[number];

/** Labels every series carries: they name the job exactly as the alarm function's schema expects. */
export interface IdentityLabels {
  namespace: string;
  job_kind: SidecarJobKind;
  job_name: string;
  pod: string;
  /** Lower-case replica role: worker, master, ps, chief, evaluator. */
  role: string;
  /** Replica index within the role. */
  worker: string;
}

/** Scale of the job the step times were measured at; '' when unknown (the series is then not used). */
export interface JobShape {
  replicas: string;
  nodes: string;
  local_batch_size: string;
}

export interface LogSourceConfig {
  /** A file to follow, or '-' for the sidecar's standard input (wrapper mode: `train.py | sidecar`). */
  path: string;
  pattern: RegExp;
  pollMs: number;
}

export interface ScrapeSourceConfig {
  url: string;
  stepMetric: string;
  samplesMetric?: string;
  intervalMs: number;
}

/**
 * Which cgroup v2 directory to read: an explicit one, or the pod's own, found under a read-only mount of
 * the node's hierarchy from the pod's UID. None by default: in Kubernetes /sys/fs/cgroup inside the sidecar
 * is the SIDECAR's container, whose usage says nothing about the trainer's.
 */
export type CgroupSource = { path: string } | { root: string; podUid: string };

export interface SidecarConfig {
  identity: IdentityLabels;
  shape: JobShape;
  /** Kubernetes node the pod runs on (downward API spec.nodeName); counts distinct nodes at query time. */
  nodeName: string;
  metrics: { host: string; port: number };
  /** The trainer-facing API (progress reports, drain). Loopback only: nothing outside the pod may report. */
  hook: { host: string; port: number };
  stepWindowSeconds: number;
  log?: LogSourceConfig;
  scrape?: ScrapeSourceConfig;
  /** nvidia-smi to run; undefined turns GPU metrics off. */
  nvidiaSmi?: string;
  cgroup?: CgroupSource;
  drain: { graceSeconds: number; file?: string };
}

export class SidecarConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'SidecarConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Matches "step 120", "step=120", "Step: 120" and, when present, "samples=3840". */
export const DEFAULT_LOG_PATTERN = String.raw`[Ss]tep[\s=:]+(?<step>\d+)(?:.*?samples[\s=:]+(?<samples>\d+))?`;

function text(env: Env, name: string, fallback?: string): string {
  const value = env[name]?.trim();
  if (value) return value;
  if (fallback !== undefined) return fallback;
  throw new SidecarConfigError(name, 'is required');
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new SidecarConfigError(name, `must be an integer in [${min}, ${max}], got '${raw}'`);
  return value;
}

function positive(env: Env, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new SidecarConfigError(name, `must be a positive number, got '${raw}'`);
  return value;
}

/** A count label: empty when not set, else a positive integer (a typo must not become a bogus scale). */
function countLabel(env: Env, name: string): string {
  const raw = env[name]?.trim();
  if (!raw) return '';
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0)
    throw new SidecarConfigError(name, `must be a positive integer, got '${raw}'`);
  return String(value);
}

function jobKind(env: Env): SidecarJobKind {
  const raw = text(env, 'TRAINSCALER_JOB_KIND');
  const kind = JOB_KINDS.find((k) => k === raw);
  if (!kind) throw new SidecarConfigError('TRAINSCALER_JOB_KIND', `must be one of ${JOB_KINDS.join(', ')}`);
  return kind;
}

export function compileLogPattern(source: string): RegExp {
  let pattern: RegExp;
  try {
    pattern = new RegExp(source);
  } catch (error) {
    throw new SidecarConfigError('TRAINSCALER_LOG_REGEX', `is not a valid regular expression: ${error}`);
  }
  if (!source.includes('(?<step>'))
    throw new SidecarConfigError('TRAINSCALER_LOG_REGEX', 'needs a named group (?<step>...)');
  return pattern;
}

function logSource(env: Env): LogSourceConfig | undefined {
  const path = env.TRAINSCALER_LOG_FILE?.trim();
  if (!path) return undefined;
  return {
    path,
    pattern: compileLogPattern(env.TRAINSCALER_LOG_REGEX?.trim() || DEFAULT_LOG_PATTERN),
    pollMs: integer(env, 'TRAINSCALER_LOG_POLL_MS', 500, 10, 60_000),
  };
}

function scrapeSource(env: Env): ScrapeSourceConfig | undefined {
  const url = env.TRAINSCALER_SCRAPE_URL?.trim();
  if (!url) return undefined;
  try {
    new URL(url);
  } catch {
    throw new SidecarConfigError('TRAINSCALER_SCRAPE_URL', `is not a URL: '${url}'`);
  }
  const source: ScrapeSourceConfig = {
    url,
    stepMetric: text(env, 'TRAINSCALER_SCRAPE_STEP_METRIC'),
    intervalMs: Math.round(positive(env, 'TRAINSCALER_SCRAPE_INTERVAL_SECONDS', 15) * 1000),
  };
  const samples = env.TRAINSCALER_SCRAPE_SAMPLES_METRIC?.trim();
  if (samples) source.samplesMetric = samples;
  return source;
}

function cgroupSource(env: Env): CgroupSource | undefined {
  const path = env.TRAINSCALER_CGROUP_PATH?.trim();
  if (path) return { path };
  const root = env.TRAINSCALER_CGROUP_ROOT?.trim();
  const podUid = env.TRAINSCALER_POD_UID?.trim();
  if (root && podUid) return { root, podUid };
  if (root) throw new SidecarConfigError('TRAINSCALER_POD_UID', 'is required with TRAINSCALER_CGROUP_ROOT');
  if (podUid) throw new SidecarConfigError('TRAINSCALER_CGROUP_ROOT', 'is required with TRAINSCALER_POD_UID');
  return undefined;
}

export function loadSidecarConfig(env: Env): SidecarConfig {
  const nvidiaSmi = env.TRAINSCALER_NVIDIA_SMI?.trim() ?? 'nvidia-smi';
  const config: SidecarConfig = {
    identity: {
      namespace: text(env, 'TRAINSCALER_NAMESPACE'),
      job_kind: jobKind(env),
      job_name: text(env, 'TRAINSCALER_JOB_NAME'),
      pod: text(env, 'TRAINSCALER_POD'),
      role: text(env, 'TRAINSCALER_ROLE', 'worker').toLowerCase(),
      worker: String(integer(env, 'TRAINSCALER_WORKER_INDEX', 0, 0, 1_000_000)),
    },
    shape: {
      replicas: countLabel(env, 'TRAINSCALER_REPLICAS'),
      nodes: countLabel(env, 'TRAINSCALER_NODES'),
      local_batch_size: countLabel(env, 'TRAINSCALER_LOCAL_BATCH_SIZE'),
    },
    nodeName: env.TRAINSCALER_NODE_NAME?.trim() ?? '',
    metrics: {
      host: text(env, 'TRAINSCALER_METRICS_HOST', '0.0.0.0'),
      port: integer(env, 'TRAINSCALER_METRICS_PORT', 9470, 0, 65535),
    },
    hook: {
      host: text(env, 'TRAINSCALER_HOOK_HOST', '127.0.0.1'),
      port: integer(env, 'TRAINSCALER_HOOK_PORT', 9471, 0, 65535),
    },
    stepWindowSeconds: positive(env, 'TRAINSCALER_STEP_WINDOW_SECONDS', 60),
    drain: { graceSeconds: positive(env, 'TRAINSCALER_DRAIN_GRACE_SECONDS', 25) },
  };
  const cgroup = cgroupSource(env);
  if (cgroup) config.cgroup = cgroup;
  const log = logSource(env);
  if (log) config.log = log;
  const scrape = scrapeSource(env);
  if (scrape) config.scrape = scrape;
  if (nvidiaSmi !== '' && nvidiaSmi !== 'off') config.nvidiaSmi = nvidiaSmi;
  const drainFile = env.TRAINSCALER_DRAIN_FILE?.trim();
  if (drainFile) config.drain.file = drainFile;
  return config;
}
