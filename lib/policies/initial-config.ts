// The configuration a job starts with. Without history the user's numbers stand (only clamped to the job's
// bounds and to what the cluster can hold now). With a profile of earlier runs of the same signature the
// worker count comes from the fitted throughput curve and the requests from observed peaks: starting right
// is cheaper than rescaling later, because nothing is running yet.

import { freeOnNode, podsFitting, podsFittingOnNode, reserve } from '../cluster/capacity.js';
import type { PolicyConfig } from '../config.js';
import type { Placement, ThroughputModel } from '../model/throughput-model.js';
import { sharesRendezvousStore } from '../torchelastic/launch-cost.js';
import {
  MEASURED_RESCALE_PAUSE_SECONDS,
  RECOMMENDED_LAUNCHER,
  RECOMMENDED_RENDEZVOUS,
  RECOMMENDED_TORCHRUN_ENV,
  SHARED_STORE_WAIT_SECONDS,
} from '../torchelastic/recommended-rendezvous.js';
import type { Change, ClusterCapacity, JobView, Plan, Resources, RoleName, RoleView } from '../types.js';
import { formatBytes, formatMillicores, formatPercent } from './format.js';
import { planWithinKind } from './kind-limits.js';
import {
  findRole,
  formatChange,
  formatRate,
  formatRateChange,
  localBatchFor,
  nodesSpanned,
  pessimisticThroughput,
  plural,
  podsPerNode,
  withinHysteresis,
} from './placement.js';
import { type JobProfile, type PeakUsage, psPerWorker } from './profiles.js';
import { explained, oneLine, workersChange } from './reason.js';
import { growthLimit } from './tuning.js';

export interface InitialConfigInput {
  job: JobView;
  profile: JobProfile | undefined;
  /** Fitted from the profile's step summaries by the caller; undefined when there is nothing to fit. */
  model: ThroughputModel | undefined;
  capacity: ClusterCapacity;
  config: PolicyConfig;
  /** Running jobs of the same signature in the job's namespace: what they have used so far. */
  peers?: RunningPeers;
}

/**
 * What running jobs of a signature have used so far. Their runs are not over (a peak may still be ahead), so
 * this only ever raises a memory limit that they have already outgrown; it never lowers anything.
 */
export interface RunningPeers {
  jobs: number;
  peaks: Partial<Record<RoleName, PeakUsage>>;
}

/** Memory requests are written in whole MiB so the quantity in the pod spec stays readable. */
const MEMORY_STEP_BYTES = 1024 ** 2;

export function decideInitialConfig(input: InitialConfigInput): Plan {
  const { job, profile, model, capacity, config } = input;
  const plan = (changes: Change[], reason: string, details: string[] = []): Plan =>
    planWithinKind(job, { ref: job.ref, policy: 'initial', changes, ...explained(reason, details) });

  if (!job.managed) return plan([], 'not managed by trainscaler (trainscaler.io/managed=false)');
  const worker = findRole(job, 'Worker');
  if (!worker) return plan([], 'job has no Worker role: configuration kept as submitted');

  const workerSize = rightsize(worker, profile?.peaks.Worker, input.peers, config);
  const psRole = job.ref.kind === 'TFJob' ? findRole(job, 'PS') : undefined;
  const psSize = psRole ? rightsize(psRole, profile?.peaks.PS, input.peers, config) : undefined;
  const ratio = profile && psRole ? psPerWorker(profile) : undefined;
  const psFor = (workers: number): number | undefined => {
    if (!psRole) return undefined;
    if (ratio === undefined) return psRole.replicas;
    return clamp(Math.max(1, Math.round(ratio * workers)), psRole.minReplicas, psRole.maxReplicas);
  };

  // The job's other pods (master, chief, ...) need room too; the worker count must fit beside them.
  let othersPlaced = capacity;
  for (const role of job.roles) {
    if (role.role === 'Worker' || role.role === 'PS') continue;
    othersPlaced = reserve(othersPlaced, role.requests, role.replicas);
  }
  const fits = (workers: number): boolean => {
    let cap = othersPlaced;
    const ps = psFor(workers);
    if (psSize && ps !== undefined) {
      if (podsFitting(cap, psSize.requests) < ps) return false;
      cap = reserve(cap, psSize.requests, ps);
    }
    return podsFitting(cap, workerSize.requests) >= workers;
  };
  let maxFit: number | undefined;
  for (let k = worker.maxReplicas; k >= worker.minReplicas; k--) {
    if (fits(k)) {
      maxFit = k;
      break;
    }
  }

  const requested = worker.replicas;
  const localBatch = job.localBatchSize ?? profile?.best?.localBatchSize;
  const head = profile ? `profile of ${job.signature} (${plural(profile.runs, 'run')})` : '';
  let blocker: string | undefined;
  if (!profile) blocker = `no profile for signature ${job.signature}`;
  else if (!model) blocker = `${head} has no throughput model`;
  else if (localBatch === undefined && !((job.globalBatchSize ?? 0) > 0)) {
    blocker = `${head} but no local batch size to predict with`;
  }

  let chosen: { workers: number; notes: string[] } | undefined;
  if (blocker === undefined && model) {
    const perNode = podsPerNode(capacity, workerSize.requests);
    const placementFor = (k: number): Placement => {
      const ps = psFor(k);
      return {
        replicas: k,
        nodes: nodesSpanned(k, perNode),
        ...(ps !== undefined ? { ps } : {}),
        localBatchSize: localBatchFor(job, k, localBatch ?? 0),
      };
    };
    chosen = workersFromModel(head, model, placementFor, requested, worker, maxFit, config);
    if (!chosen) blocker = `${head}: model gives no usable prediction`;
  }
  if (!chosen) {
    const notes: string[] = [];
    const workers = clampedToFit(requested, worker, maxFit, notes);
    const what =
      workers === requested ? `keep ${plural(workers, 'worker')}` : workersChange(requested, workers);
    chosen = { workers, notes: [`${blocker}: ${what}`, ...notes] };
  }
  const { workers, notes } = chosen;

  const changes: Change[] = [];
  if (workers !== worker.replicas)
    changes.push({ kind: 'replicas', role: 'Worker', from: worker.replicas, to: workers });
  const ps = psFor(workers);
  if (psRole && ps !== undefined && ps !== psRole.replicas) {
    changes.push({ kind: 'replicas', role: 'PS', from: psRole.replicas, to: ps });
    notes.push(
      `PS ${psRole.replicas} -> ${ps} (profile's best run had ${(ratio ?? 0).toFixed(2)} PS per worker)`,
    );
  }
  for (const size of [workerSize, psSize]) {
    if (!size || size.changes.length === 0) continue;
    changes.push(...size.changes);
    notes.push(size.note);
  }
  const locality = psRole ? undefined : preferredNode(workers, workerSize.requests, capacity);
  if (locality) {
    changes.push({ kind: 'prefer-node', role: 'Worker', node: locality.node });
    notes.push(locality.note);
  }
  const rendezvous = rendezvousAdvice(job);
  if (rendezvous) {
    changes.push(...rendezvous.changes);
    notes.push(...rendezvous.notes);
  }
  // One line: the size and why, and what else the plan writes; the advice and the figures are details.
  const also = [
    workerSize.changes.length > 0 || (psSize?.changes.length ?? 0) > 0 ? 'requests right-sized' : '',
    locality ? `Worker pods prefer node ${locality.node}` : '',
    rendezvous && rendezvous.changes.length > 0 ? 'rendezvous settings set' : '',
  ].filter((x) => x !== '');
  const [first = '', ...rest] = notes;
  return plan(changes, oneLine(also.length > 0 ? `${first}; ${also.join(', ')}` : first), rest);
}

/**
 * The node a job's workers should prefer when all of them fit on one node: the fullest node that holds them
 * all now (best fit, which keeps emptier nodes whole for larger jobs). An all-reduce within a node is never
 * slower than across nodes, and without the preference the scheduler's first fit puts worker 0 on whichever
 * node has one GPU left and the rest on the next; since a shrink removes the highest indices, the job keeps
 * that split for its whole run (yolov3 in the measured world steps at 72 samples/s with 4 workers on one
 * node, 41 on 1 + 3). The preference stays on the template, so a worker the job regrows lands there again
 * while the node has room. Undefined for one worker, a job larger than a node, or when no node holds it now.
 */
function preferredNode(
  workers: number,
  request: Resources,
  capacity: ClusterCapacity,
): { node: string; note: string } | undefined {
  const nodes = capacity.nodes.filter((n) => n.schedulable);
  if (workers < 2 || nodes.length < 2) return undefined;
  let best: { name: string; room: number } | undefined;
  for (const n of nodes) {
    const room = podsFittingOnNode(freeOnNode(n), request);
    if (room >= workers && (!best || room < best.room)) best = { name: n.name, room };
  }
  if (!best) return undefined;
  return {
    node: best.name,
    note: `locality: Worker pods prefer node ${best.name}, the fullest that holds all ${workers} now (one node's all-reduce, and regrowth lands there while it has room)`,
  };
}

/**
 * What an elastic PyTorchJob should know on submit, from what real rescales taught (README "A real elastic
 * job"): the rendezvous settings that make rescales cheap (a value above the recommended one or unset), set
 * only when the job allows it (trainscaler.io/tune-rendezvous: "true"); trainscaler's launcher, only ever
 * recommended (it needs the trainscaler Python hook in the job's image, which trainscaler cannot see: a
 * command naming a module the image lacks would crash-loop every worker, so the command stays the user's);
 * TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 where the job's launch shares the rendezvous store (plain torchrun without
 * it: no scale-up completes on torch >= 2.4), only ever recommended (the user's env, not a rendezvous setting);
 * and that elasticPolicy.maxRestarts bounds how often the job can be shrunk. Undefined for other jobs.
 */
export function rendezvousAdvice(
  job: JobView,
): { changes: Change[]; note: string; notes: string[] } | undefined {
  const te = job.torchElastic;
  if (!te) return undefined;
  const missing: { setting: 'PET_MONITOR_INTERVAL' | 'last_call_timeout'; current: string | undefined }[] =
    [];
  const above = (current: string | undefined, recommended: number) =>
    current === undefined || !(Number(current) <= recommended);
  if (above(te.monitorInterval, RECOMMENDED_RENDEZVOUS.PET_MONITOR_INTERVAL))
    missing.push({ setting: 'PET_MONITOR_INTERVAL', current: te.monitorInterval });
  if (above(te.rdzvConf.last_call_timeout, RECOMMENDED_RENDEZVOUS.last_call_timeout))
    missing.push({ setting: 'last_call_timeout', current: te.rdzvConf.last_call_timeout });
  const notes: string[] = [];
  const set = missing.length > 0 && te.tuneRendezvous;
  if (missing.length > 0) {
    const where = missing
      .map(({ setting, current }) => {
        const to = `${setting}=${RECOMMENDED_RENDEZVOUS[setting]}`;
        const place = setting === 'last_call_timeout' ? 'in elasticPolicy.rdzvConf' : "in the Worker's env";
        return `${to} ${place} (${current === undefined ? "torchrun's default" : `now ${current}`})`;
      })
      .join(' and ');
    notes.push(
      set
        ? `rendezvous: setting ${where} (trainscaler.io/tune-rendezvous)`
        : `rendezvous: recommend ${where} (annotate trainscaler.io/tune-rendezvous: "true" to let trainscaler set them)`,
    );
  }
  // Advice only, even with the annotation: it is an env var of the user's container, not a rendezvous setting.
  if (te.launch && sharesRendezvousStore(te.launch)) {
    const [name, value] = Object.entries(RECOMMENDED_TORCHRUN_ENV)[0] ?? [];
    notes.push(
      `environment: recommend ${name}=${value} in the Worker's env (${te.launch.disableShareStore === undefined ? 'not set' : `now ${te.launch.disableShareStore}`}): without it a scale-up on torch >= 2.4 waits the rendezvous store's ${SHARED_STORE_WAIT_SECONDS} s timeout and fails (trainscaler's launcher sets it unless the job does)`,
    );
  }
  if (!te.trainscalerLauncher) {
    notes.push(
      `launcher: recommend \`${RECOMMENDED_LAUNCHER.join(' ')}\` in place of torchrun (same arguments; needs the trainscaler Python hook in the image, so trainscaler never sets the command)`,
    );
  }
  if (notes.length > 0) {
    const {
      recommended: r,
      torchrunRecommendedFlags: f,
      torchrunDefaults: d,
    } = MEASURED_RESCALE_PAUSE_SECONDS;
    notes.push(
      `measured pause per rescale: ${r.up} s up / ${r.down} s down with the launcher and these settings, ${f.up} s / ${f.down} s with torchrun and these settings, ${d.up} s / ${d.down} s with torchrun's defaults`,
    );
  }
  notes.push(restartBudgetAdvice(te.maxRestartsFrom === 'torchrun default' ? undefined : te.maxRestarts));
  return {
    changes: set
      ? missing.map(({ setting }) => ({
          kind: 'rendezvous',
          setting,
          value: String(RECOMMENDED_RENDEZVOUS[setting]),
        }))
      : [],
    note: notes.join('; '),
    notes,
  };
}

/** Each scale-down spends one of the torchrun agents' restarts; the last is kept for a real failure. */
function restartBudgetAdvice(maxRestarts: number | undefined): string {
  const rule = 'each scale-down spends one restart of the surviving torchrun agents';
  if (maxRestarts === undefined)
    return `restarts: elasticPolicy.maxRestarts is not set (nor PET_MAX_RESTARTS or --max_restarts), so torchrun's own default applies (0 in torch 1.13) and ${rule}: trainscaler will not shrink this job while it runs; set maxRestarts to the shrinks you allow plus one`;
  const shrinks = Math.max(0, maxRestarts - 1);
  return `restarts: elasticPolicy.maxRestarts ${maxRestarts} bounds how often trainscaler shrinks this job: ${rule}, so at most ${shrinks} ${shrinks === 1 ? 'time' : 'times'} (the last restart is kept for a real failure)`;
}

interface Rightsized {
  requests: Resources;
  changes: Change[];
  note: string;
}

/** Memory for an observed peak: the peak plus headroom, up to the cap but never below the peak, in whole MiB. */
function memoryFor(peakBytes: number, config: PolicyConfig): number {
  const wanted = Math.max(
    peakBytes,
    Math.min(config.maxMemoryBytes, peakBytes * (1 + config.rightsizeHeadroom)),
  );
  return Math.ceil(wanted / MEMORY_STEP_BYTES) * MEMORY_STEP_BYTES;
}

/**
 * Requests from the profile's observed peaks plus headroom; memory never below the peak, GPUs as the user
 * asked. Then a memory limit below what running jobs of the signature have already used is raised to their
 * peak plus headroom: every pod of a job reaches its peak at about the same point, so with a few workers
 * their first OOM kills alone can exceed the job's backoffLimit, before any fault handling acts.
 */
function rightsize(
  role: RoleView,
  peak: PeakUsage | undefined,
  peers: RunningPeers | undefined,
  config: PolicyConfig,
): Rightsized {
  const requests = { ...role.requests };
  const changes: Change[] = [];
  const parts: string[] = [];
  const factor = 1 + config.rightsizeHeadroom;

  if (peak && peak.cpuMillis > 0) {
    const cpu = Math.ceil(peak.cpuMillis * factor);
    if (cpu !== role.requests.cpuMillis) {
      changes.push({
        kind: 'resources',
        role: role.role,
        resource: 'cpu',
        field: 'requests',
        from: role.requests.cpuMillis,
        to: cpu,
      });
      parts.push(`cpu ${formatMillicores(role.requests.cpuMillis)} -> ${formatMillicores(cpu)}`);
      requests.cpuMillis = cpu;
      // A request above the limit is rejected by the API server.
      if (role.limits.cpuMillis > 0 && role.limits.cpuMillis < cpu) {
        changes.push({
          kind: 'resources',
          role: role.role,
          resource: 'cpu',
          field: 'limits',
          from: role.limits.cpuMillis,
          to: cpu,
        });
        parts.push(`cpu limit raised to ${formatMillicores(cpu)}`);
      }
    }
  }
  let limit = role.limits.memoryBytes;
  if (peak && peak.memoryBytes > 0) {
    const mem = memoryFor(peak.memoryBytes, config);
    if (mem !== role.requests.memoryBytes) {
      parts.push(
        `memory ${formatBytes(role.requests.memoryBytes)} -> ${formatBytes(mem)} (peak ${formatBytes(peak.memoryBytes)})`,
      );
      requests.memoryBytes = mem;
      if (limit > 0 && limit < mem) {
        limit = mem;
        parts.push(`memory limit raised to ${formatBytes(mem)}`);
      }
    }
  }
  const notes =
    parts.length > 0
      ? [
          `${role.role} requests from observed peak + ${formatPercent(config.rightsizeHeadroom)}: ${parts.join(', ')}`,
        ]
      : [];
  const peersPeak = peers?.peaks[role.role]?.memoryBytes ?? 0;
  const raised = peersPeak > 0 ? memoryFor(peersPeak, config) : 0;
  if (limit > 0 && limit < raised) {
    notes.push(
      `${role.role} memory limit ${formatBytes(limit)} -> ${formatBytes(raised)}, the request with it: ${plural(peers?.jobs ?? 0, 'running job')} of this signature already peaked at ${formatBytes(peersPeak)}`,
    );
    limit = raised;
    // A request is never above its limit (the API server refuses it), so this raises it too.
    requests.memoryBytes = raised;
  }
  if (requests.memoryBytes !== role.requests.memoryBytes)
    changes.push({
      kind: 'resources',
      role: role.role,
      resource: 'memory',
      field: 'requests',
      from: role.requests.memoryBytes,
      to: requests.memoryBytes,
    });
  if (limit !== role.limits.memoryBytes)
    changes.push({
      kind: 'resources',
      role: role.role,
      resource: 'memory',
      field: 'limits',
      from: role.limits.memoryBytes,
      to: limit,
    });
  return { requests, changes, note: notes.join('; ') };
}

/**
 * The smallest worker count whose pessimistic throughput is within hysteresis of the best that fits:
 * diminishing returns are not worth the extra GPUs.
 */
function workersFromModel(
  head: string,
  model: ThroughputModel,
  placementFor: (k: number) => Placement,
  requested: number,
  worker: RoleView,
  maxFit: number | undefined,
  config: PolicyConfig,
): { workers: number; notes: string[] } | undefined {
  // Nothing fits now: the job queues whatever its size, so the size is chosen for when it runs.
  const room = maxFit ?? clamp(requested, worker.minReplicas, worker.maxReplicas);
  // The growth rule of every path (tuning.ts): above what the user asked, one worker until the profile has
  // seen the job at two sizes. (Remaining time plays no part here: the whole run is ahead.)
  const growth = growthLimit({ distinctScales: model.distinctScales, remainingKnown: true }, config);
  const asked = clamp(requested, worker.minReplicas, worker.maxReplicas);
  const limit = Math.min(room, Math.max(asked + growth.workers, worker.minReplicas));
  const scored: { k: number; tp: number }[] = [];
  for (let k = worker.minReplicas; k <= limit; k++) {
    const tp = pessimisticThroughput(model, placementFor(k));
    if (tp !== undefined) scored.push({ k, tp });
  }
  let best: { k: number; tp: number } | undefined;
  for (const s of scored) if (!best || s.tp > best.tp) best = s;
  if (!best) return undefined;
  const top = best;
  // Fewer workers than asked only when more are predicted slower, or when free capacity is short. GPUs that
  // hold the ask now would otherwise sit idle, and taking workers back when another job wants them is the
  // rebalance's call (it takes them from the jobs that lose the least); a prediction within hysteresis is
  // too weak a reason to start a job slower than its user asked (the fitted curve runs 20-30% optimistic
  // at the top of the measured range: README "Cluster benchmark"). When nothing fits the job queues, and a
  // smaller size then starts it sooner.
  const floor = maxFit === undefined ? worker.minReplicas : Math.min(asked, maxFit, top.k);
  const smallest = scored.find((s) => withinHysteresis(s.tp, top.tp, config.minRelativeGain)) ?? top;
  const nearest =
    scored.find((s) => s.k >= floor && withinHysteresis(s.tp, top.tp, config.minRelativeGain)) ?? top;
  // Above the ask, a size must beat the ask itself by the hysteresis: within 5% of a far best, an in-between
  // size (16 -> 17 workers, one more node) is a change the prediction cannot tell from noise.
  const askedScore = asked >= floor ? scored.find((s) => s.k === asked) : undefined;
  const pick =
    askedScore && nearest.k > asked && withinHysteresis(askedScore.tp, nearest.tp, config.minRelativeGain)
      ? askedScore
      : nearest;

  const userTp = pessimisticThroughput(
    model,
    placementFor(clamp(requested, worker.minReplicas, worker.maxReplicas)),
  );
  const predicted =
    userTp === undefined || pick.k === requested
      ? `predicted ${formatRate(pick.tp)}`
      : `predicted ${formatRateChange(userTp, pick.tp)}`;
  const what = pick.k === requested ? `keep ${plural(pick.k, 'worker')}` : workersChange(requested, pick.k);
  const notes =
    userTp === undefined || pick.k === requested
      ? [`${head}: ${what}: ${predicted} at step time + 1 sd`]
      : [
          `${head}: ${what}: predicted ${formatChange(pick.tp / userTp - 1)}`,
          `${predicted} at step time + 1 sd`,
        ];
  if (growth.why && limit < room && pick.k === limit) notes.push(`growth rule: ${growth.why}`);
  if (top.k !== pick.k) {
    notes.push(
      `${top.k} workers would reach ${formatRate(top.tp)}, less than ${formatPercent(config.minRelativeGain)} more`,
    );
  }
  if (smallest.k < pick.k) {
    notes.push(
      `${plural(smallest.k, 'worker')} would come within ${formatPercent(config.minRelativeGain)}, but free capacity holds ${pick.k} of the ${requested} asked: fewer would only leave GPUs idle`,
    );
  }
  if (maxFit === undefined) {
    notes.push(`not even ${plural(worker.minReplicas, 'worker')} fit free capacity now; pods will queue`);
  } else if (maxFit < worker.maxReplicas) {
    notes.push(`free capacity holds at most ${plural(maxFit, 'worker')}`);
  }
  return { workers: pick.k, notes };
}

/** The user's count inside [min, max] and inside what fits now, never below min (pods then wait). */
function clampedToFit(
  requested: number,
  worker: RoleView,
  maxFit: number | undefined,
  notes: string[],
): number {
  const bounded = clamp(requested, worker.minReplicas, worker.maxReplicas);
  if (bounded !== requested) notes.push(`bounds [${worker.minReplicas}, ${worker.maxReplicas}]`);
  if (maxFit === undefined) {
    // Shrinking a job that has to queue anyway would only make it slower once it runs.
    notes.push(
      `not even ${plural(worker.minReplicas, 'worker')} fit free capacity now; size kept, pods will queue`,
    );
    return bounded;
  }
  if (maxFit < bounded) {
    notes.push(`free capacity holds ${plural(maxFit, 'worker')}`);
    return maxFit;
  }
  return bounded;
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
