// Where trainscaler keeps what it reads back to bound or time its own actions (cool-down, largest run, restart
// budget, measured rescale costs, pause): the status of a ScaledTrainingJob (trainscaler.io/v1alpha1), one per
// managed job, in the job's namespace, owned by the job (garbage-collected with it). Tenants may read it; only
// trainscaler's ServiceAccount may write its status (infra/k8s/scaledtrainingjobs-rbac.yaml). The job's own
// annotations are the owner's to edit, so nothing here is read from them, with one exception that can only
// make trainscaler more cautious (trustedStateOf).
import { createHash } from 'node:crypto';
import { ANNOTATION } from '../adapters/annotations.js';
import { isObject } from '../adapters/unstructured.js';
import { ConflictError } from '../errors.js';
import { parseStragglerReplacements } from '../policies/stragglers.js';
import type { StatusCondition, StatusPolicy } from '../policy-governance.js';
import type { Change, JobAutoscalerState, JobRef } from '../types.js';
import type {
  ClusterClient,
  JobIdentity,
  JobStateObject,
  KubeObject,
  WriteOptions,
} from './cluster-client.js';

export const JOB_STATE_RESOURCE = {
  group: 'trainscaler.io',
  version: 'v1alpha1',
  plural: 'scaledtrainingjobs',
  kind: 'ScaledTrainingJob',
} as const;
export const JOB_STATE_API_VERSION = `${JOB_STATE_RESOURCE.group}/${JOB_STATE_RESOURCE.version}`;

/** The longest object name the API server accepts (a DNS subdomain). */
const MAX_NAME = 253;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const HASH_LENGTH = 10;

/**
 * The ScaledTrainingJob's name for a job: `<kind lowercased>-<job name>`. Where that is no valid object name
 * (too long, or not a DNS subdomain), its sanitised prefix and a hash of kind and name: still one name per
 * job, and two jobs cannot share one.
 */
export function jobStateName(kind: string, name: string): string {
  const plain = `${kind.toLowerCase()}-${name}`;
  if (plain.length <= MAX_NAME && DNS_SUBDOMAIN.test(plain)) return plain;
  const hash = createHash('sha256').update(`${kind}/${name}`).digest('hex').slice(0, HASH_LENGTH);
  const prefix = plain
    .toLowerCase()
    .replace(/[^-a-z0-9.]/g, '-')
    .slice(0, MAX_NAME - HASH_LENGTH - 1)
    .replace(/[^a-z0-9]+$/, '')
    // A label of a subdomain may not start or end with '-', nor be empty.
    .replace(/\.+/g, '.')
    .replace(/(^|\.)-+/g, '$1')
    .replace(/-+(\.|$)/g, '$1');
  return prefix ? `${prefix}-${hash}` : hash;
}

/** The last decision as kept in the status (its reason shortened: the full one is in the job's annotation). */
export interface StatusDecision {
  id: string;
  at: number;
  policy: string;
  reason: string;
  changes: Change[];
}

/** What trainscaler would do to a job under a Recommend policy, which it does not do. */
export interface StatusRecommendation {
  workers: number;
  reason: string;
  /** Epoch seconds of the decision. */
  at: number;
}

/**
 * A ScaledTrainingJob's status as trainscaler writes it. Without `conditions`, those found are kept. Only the
 * JobAutoscalerState part is read back (stateOfStatus); the rest is for the people reading `kubectl get stj`.
 */
export interface JobStateStatus extends JobAutoscalerState {
  observedWorkers?: number;
  /** The Worker count trainscaler last decided on (Auto: wrote; Recommend: recommended). */
  desiredWorkers?: number;
  lastDecision?: StatusDecision;
  recommendation?: StatusRecommendation;
  policy?: StatusPolicy;
  conditions?: StatusCondition[];
}

export const STATUS_REASON_LIMIT = 256;
export const STATUS_CHANGES_LIMIT = 20;

function fresh(): JobAutoscalerState {
  return { oomCount: 0, paused: false };
}

const count = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;
const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * The state recorded in a ScaledTrainingJob's status. The API server validates it against the CRD's schema;
 * read again here so that an older or hand-made object cannot put a wrong type into a guardrail.
 */
export function stateOfStatus(status: unknown): JobAutoscalerState {
  if (!isObject(status)) return fresh();
  const state: JobAutoscalerState = {
    oomCount: count(status.oomCount) ? status.oomCount : 0,
    paused: status.paused === true,
  };
  if (finite(status.lastActionAt)) state.lastActionAt = status.lastActionAt;
  if (typeof status.lastDecisionId === 'string') state.lastDecisionId = status.lastDecisionId;
  if (typeof status.pauseReason === 'string') state.pauseReason = status.pauseReason;
  if (count(status.scaleDowns)) state.scaleDowns = status.scaleDowns;
  if (count(status.askedWorkers)) state.askedWorkers = status.askedWorkers;
  if (count(status.largestRunWorkers) && status.largestRunWorkers > 0)
    state.largestRunWorkers = status.largestRunWorkers;
  const rescale = status.lastRescale;
  if (isObject(rescale) && finite(rescale.at) && finite(rescale.from) && finite(rescale.to))
    state.lastRescale = { at: rescale.at, from: rescale.from, to: rescale.to };
  const cost = status.rescaleCost;
  if (isObject(cost)) {
    // A cost that is not a positive number is no measurement: the default stays in force.
    const seconds = (v: unknown) => (finite(v) && v > 0 ? v : undefined);
    const measured: NonNullable<JobAutoscalerState['rescaleCost']> = {};
    const up = seconds(cost.upToFirstStep);
    const upPause = seconds(cost.upPause);
    const down = seconds(cost.down);
    if (up !== undefined) measured.upToFirstStep = up;
    if (upPause !== undefined) measured.upPause = upPause;
    if (down !== undefined) measured.down = down;
    if (finite(cost.measuredFor)) measured.measuredFor = cost.measuredFor;
    state.rescaleCost = measured;
  }
  const replacements = parseStragglerReplacements(status.stragglerReplacements);
  if (replacements && replacements.length > 0) state.stragglerReplacements = replacements;
  return state;
}

/** Whether the record was made for this job, not for an earlier job of the same name (another uid). */
export function ownedBy(stored: JobStateObject | undefined, job: KubeObject): stored is JobStateObject {
  return stored !== undefined && stored.ownerUid !== undefined && stored.ownerUid === job.metadata.uid;
}

/** Changes that move no pod: they start no cool-down (lib/actuator.ts nextState). */
const MOVES_NO_POD = new Set(['prefer-node']);

/**
 * The job's trainscaler.io/last-decision annotation, when it holds a decision that started a cool-down: its
 * id and `at`.
 */
function lastDecisionOf(job: KubeObject): { id: string; at: number } | undefined {
  const raw = job.metadata.annotations?.[ANNOTATION.lastDecision];
  if (!raw) return undefined;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!isObject(parsed) || !finite(parsed.at) || !Array.isArray(parsed.changes)) return undefined;
    const moves = parsed.changes.some((c) => !(isObject(c) && MOVES_NO_POD.has(String(c.kind))));
    return moves ? { id: typeof parsed.id === 'string' ? parsed.id : '', at: parsed.at } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The state trainscaler bounds its next action with: its ScaledTrainingJob's status when it has one made for
 * this job. The job's `trainscaler.io/state` annotation (where earlier versions kept it) is never read.
 * The job's `trainscaler.io/last-decision` annotation, which trainscaler writes with every decision, is read
 * for one thing only, and only where it makes trainscaler more cautious: when it names a decision the status
 * does not (no status yet: a job acted on before the status existed; or the status write after the job
 * write failed), its `at` starts the cool-down if that is later than the status's. A tenant can edit it, but
 * at most to hold trainscaler back from their own job.
 */
export function trustedStateOf(job: KubeObject, stored: JobStateObject | undefined): JobAutoscalerState {
  const state = ownedBy(stored, job) ? stateOfStatus(stored.status) : fresh();
  const last = lastDecisionOf(job);
  if (last && last.id !== state.lastDecisionId && last.at > (state.lastActionAt ?? Number.NEGATIVE_INFINITY))
    state.lastActionAt = last.at;
  return state;
}

/** Index of ScaledTrainingJobs by the job they are named after, for the schedule's single LIST. */
export type JobStateLookup = (ref: JobRef) => JobStateObject | undefined;

export function jobStateLookup(states: readonly JobStateObject[]): JobStateLookup {
  const byKey = new Map(states.map((s) => [`${s.namespace}/${s.name}`, s]));
  return (ref) => byKey.get(`${ref.namespace}/${jobStateName(ref.kind, ref.name)}`);
}

/**
 * `after` (computed from `before`) carried onto `current`, the status another write left in between: counters
 * add what this decision added, instants and the largest run keep the later or larger, the size the user
 * asked for keeps the first recorded, everything else this decision set is taken as set.
 */
export function reapplyState(
  current: JobAutoscalerState,
  before: JobAutoscalerState,
  after: JobAutoscalerState,
): JobAutoscalerState {
  const out: JobAutoscalerState = { ...current };
  const changed = (key: keyof JobAutoscalerState) =>
    JSON.stringify(after[key]) !== JSON.stringify(before[key]);
  const later = (a: number | undefined, b: number | undefined) =>
    a === undefined ? b : b === undefined ? a : Math.max(a, b);
  if (changed('oomCount')) out.oomCount = current.oomCount + after.oomCount - before.oomCount;
  if (changed('scaleDowns'))
    out.scaleDowns = (current.scaleDowns ?? 0) + (after.scaleDowns ?? 0) - (before.scaleDowns ?? 0);
  const lastActionAt = later(current.lastActionAt, after.lastActionAt);
  if (changed('lastActionAt') && lastActionAt !== undefined) out.lastActionAt = lastActionAt;
  const largest = later(current.largestRunWorkers, after.largestRunWorkers);
  if (changed('largestRunWorkers') && largest !== undefined) out.largestRunWorkers = largest;
  const asked = current.askedWorkers ?? after.askedWorkers;
  if (changed('askedWorkers') && asked !== undefined) out.askedWorkers = asked;
  if (changed('lastDecisionId') && after.lastDecisionId !== undefined)
    out.lastDecisionId = after.lastDecisionId;
  if (changed('paused')) out.paused = after.paused;
  if (changed('pauseReason') && after.pauseReason !== undefined) out.pauseReason = after.pauseReason;
  if (changed('lastRescale') && after.lastRescale) out.lastRescale = after.lastRescale;
  if (changed('rescaleCost') && after.rescaleCost) out.rescaleCost = after.rescaleCost;
  if (changed('stragglerReplacements') && after.stragglerReplacements)
    out.stragglerReplacements = after.stragglerReplacements;
  return out;
}

/** The status to write: the state, what was observed and decided, and the conditions found (kept as they are). */
function statusOf(
  state: JobAutoscalerState,
  extra: Omit<JobStateStatus, keyof JobAutoscalerState>,
  current: JobStateObject | undefined,
): Record<string, unknown> {
  const status: Record<string, unknown> = { ...state, ...extra };
  const conditions = isObject(current?.status) ? current.status.conditions : undefined;
  if (!extra.conditions && Array.isArray(conditions)) status.conditions = conditions;
  return status;
}

export const STATE_WRITE_ATTEMPTS = 4;

/**
 * Writes `after` into the job's ScaledTrainingJob, guarded by the resourceVersion read. On a conflict the
 * object is read again and the same update carried onto what it holds now (reapplyState), at most
 * STATE_WRITE_ATTEMPTS times; an object that already holds this decision (a repeat of a write whose answer
 * was lost) is left as it is.
 */
export async function writeJobState(
  cluster: Pick<ClusterClient, 'getJobState' | 'putJobState'>,
  job: JobIdentity,
  update: {
    before: JobAutoscalerState;
    after: JobAutoscalerState;
    extra: Omit<JobStateStatus, keyof JobAutoscalerState>;
  },
  read: JobStateObject | undefined,
  options: WriteOptions,
): Promise<{ written: JobStateObject | undefined; conflicts: number }> {
  let current = read;
  let state = update.after;
  for (let attempt = 1; ; attempt++) {
    try {
      const written = await cluster.putJobState(
        job,
        statusOf(state, update.extra, current),
        current,
        options,
      );
      return { written, conflicts: attempt - 1 };
    } catch (error) {
      if (!(error instanceof ConflictError) || attempt >= STATE_WRITE_ATTEMPTS) throw error;
    }
    current = await cluster.getJobState(job.ref);
    const owned = current !== undefined && current.ownerUid === job.uid;
    const now = owned ? stateOfStatus(current?.status) : update.before;
    if (
      owned &&
      update.after.lastDecisionId !== undefined &&
      now.lastDecisionId === update.after.lastDecisionId
    )
      return { written: undefined, conflicts: attempt };
    state = owned ? reapplyState(now, update.before, update.after) : update.after;
  }
}
