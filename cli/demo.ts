// `trainscaler demo`: the same badly configured workload run twice on the embedded SIMULATED cluster with
// the same seed, once as submitted (manual) and once driven by the production handlers, exactly as a
// cluster would trigger them: submission, pod watch events, Alertmanager alerts and an EventBridge schedule.

import { handleAlarm } from '../functions/alarm.js';
import { handleClusterEvent } from '../functions/cluster-event.js';
import type { Handler, HandlerResult } from '../functions/handler-deps.js';
import { handleSchedule } from '../functions/schedule.js';
import { handleSubmit } from '../functions/submit.js';
import { readJob } from '../lib/adapters/job-adapter.js';
import type { KubeObject } from '../lib/cluster/cluster-client.js';
import { PROFILED_APP_MODEL } from '../lib/sim/profiled-app-model.js';
import { SimulatedCluster, type SimulatedJobStatus } from '../lib/sim/simulated-cluster.js';
import { alertmanagerWebhook, eventBridgeScheduledEvent } from '../lib/sim/simulated-triggers.js';
import type { Change, JobKind, JobRef, PolicyName, Resources, RoleName } from '../lib/types.js';
import { type DemoScenario, demoScenario } from './demo-scenario.js';
import { simulatedHandlerDeps } from './simulated-handler-deps.js';

/** Pod watch events reach the handlers within seconds in a cluster; a 10 s tick keeps that true here. */
export const DEMO_TICK_SECONDS = 10;
export const ALARM_INTERVAL_SECONDS = 5 * 60;
export const SCHEDULE_INTERVAL_SECONDS = 10 * 60;
export const DEMO_TIME_CAP_SECONDS = 12 * 3600;
const PROGRESS_INTERVAL_SECONDS = 10 * 60;

export type DemoRunMode = 'manual' | 'trainscaler';
export type DemoJobState = 'completed' | 'failed' | 'unfinished';

export interface DemoRoleConfig {
  role: RoleName;
  replicas: number;
  requests: Resources;
  limits: Resources;
}

export interface DemoJobConfig {
  roles: DemoRoleConfig[];
}

export interface DemoDecision {
  /** Seconds since the start of the run. */
  at: number;
  trigger: HandlerResult['trigger'];
  policy: PolicyName;
  changes: Change[];
  reason: string;
}

export interface DemoRunOutcome {
  jctSeconds: number | null;
  state: DemoJobState;
  failureReason?: string;
}

export interface DemoJobResult {
  name: string;
  kind: JobKind;
  application: string;
  submittedAtSeconds: number;
  /** What is wrong with the configuration the user submitted. */
  story: string;
  manual: DemoRunOutcome & { config: DemoJobConfig };
  /** initial: as trainscaler configured the job at submission; final: when the run ended. */
  trainscaler: DemoRunOutcome & { config: { initial: DemoJobConfig; final: DemoJobConfig } };
  /** What trainscaler changed on this job, oldest first (only writes that were applied). */
  decisions: DemoDecision[];
}

/** Median JCT is over completed jobs only (a failed job has no completion time); null when none completed. */
export interface RunSummary {
  medianJctSeconds: number | null;
  /** Completed jobs / jobs in the scenario (jobs not submitted before the time cap count as not completed). */
  completionRate: number;
  completed: number;
  failed: number;
  /** From the start of the run to the last job's end (or the time cap when jobs were unfinished). */
  makespanSeconds: number;
}

export interface DemoTimelinePoint {
  /** Seconds since the start of the run. */
  t: number;
  workers: number;
  workersRunning: number;
  throughput: number;
  phase: string;
}

export interface DemoHandlerError {
  at: number;
  trigger: HandlerResult['trigger'];
  job?: string;
  code: string;
  message: string;
}

export interface DemoResult {
  seed: number;
  scenario: string;
  summary: { manual: RunSummary; trainscaler: RunSummary };
  jobs: DemoJobResult[];
  /** Per run, per job name. */
  timelines: Record<DemoRunMode, Record<string, DemoTimelinePoint[]>>;
  /** Handler failures of the trainscaler run: per-job errors the handlers contained, and thrown ones. */
  handlerErrors: DemoHandlerError[];
}

export interface DemoOptions {
  seed?: number;
  onProgress?: (line: string) => void;
  /** Stop a run at this many simulated seconds even if jobs are unfinished. */
  timeCapSeconds?: number;
  scenario?: DemoScenario;
}

interface RunRecord {
  /** Jobs in the scenario, submitted or not (a run stopped by the time cap may not have submitted all). */
  jobCount: number;
  statuses: SimulatedJobStatus[];
  initialConfigs: Map<string, DemoJobConfig>;
  finalConfigs: Map<string, DemoJobConfig>;
  decisions: Map<string, DemoDecision[]>;
  timelines: Record<string, DemoTimelinePoint[]>;
  errors: DemoHandlerError[];
  endedAt: number;
}

export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const seed = options.seed ?? 1;
  const scenario = options.scenario ?? demoScenario();
  const cap = options.timeCapSeconds ?? DEMO_TIME_CAP_SECONDS;
  const report = options.onProgress ?? (() => {});
  const manual = await runScenario('manual', scenario, seed, cap, report);
  const trainscaler = await runScenario('trainscaler', scenario, seed, cap, report);
  return {
    seed,
    scenario: scenario.name,
    summary: { manual: summarize(manual), trainscaler: summarize(trainscaler) },
    jobs: scenario.jobs.map((spec) =>
      jobResult(spec.manifest, spec.submitAtSeconds, spec.story, manual, trainscaler),
    ),
    timelines: { manual: manual.timelines, trainscaler: trainscaler.timelines },
    handlerErrors: trainscaler.errors,
  };
}

async function runScenario(
  mode: DemoRunMode,
  scenario: DemoScenario,
  seed: number,
  cap: number,
  report: (line: string) => void,
): Promise<RunRecord> {
  const sim = new SimulatedCluster({
    seed,
    apps: PROFILED_APP_MODEL,
    priorityClasses: scenario.priorityClasses,
  });
  const start = sim.now();
  const deps = simulatedHandlerDeps(sim, scenario.priorityClasses);
  const record: RunRecord = {
    jobCount: scenario.jobs.length,
    statuses: [],
    initialConfigs: new Map(),
    finalConfigs: new Map(),
    decisions: new Map(),
    timelines: {},
    errors: [],
    endedAt: start,
  };
  const call = async (trigger: HandlerResult['trigger'], handler: Handler, payload: unknown) => {
    const at = sim.now() - start;
    try {
      const result = await handler(payload, deps);
      for (const outcome of result.outcomes) {
        if (!outcome.applied || outcome.plan.changes.length === 0) continue;
        const { plan } = outcome;
        const list = record.decisions.get(plan.ref.name) ?? [];
        list.push({ at, trigger, policy: plan.policy, changes: plan.changes, reason: plan.reason });
        record.decisions.set(plan.ref.name, list);
      }
      for (const error of result.errors) {
        record.errors.push({ at, trigger, job: error.ref.name, code: error.code, message: error.message });
      }
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      const message = error instanceof Error ? error.message : String(error);
      record.errors.push({ at, trigger, code: typeof code === 'string' ? code : 'THROWN', message });
    }
  };

  const queue = [...scenario.jobs].sort((a, b) => a.submitAtSeconds - b.submitAtSeconds);
  const refs: JobRef[] = [];
  let scheduleCount = 0;
  for (let elapsed = 0; ; ) {
    while (queue[0] && queue[0].submitAtSeconds <= elapsed) {
      const spec = queue.shift();
      if (!spec) break;
      const stored = sim.submitJob(spec.manifest);
      const ref = {
        kind: stored.kind as JobKind,
        namespace: stored.metadata.namespace ?? 'default',
        name: stored.metadata.name,
      };
      refs.push(ref);
      if (mode === 'trainscaler') await call('submit', handleSubmit, ref);
      record.initialConfigs.set(ref.name, configOf(await sim.getJob(ref)));
    }
    sim.step(DEMO_TICK_SECONDS);
    elapsed += DEMO_TICK_SECONDS;
    const events = sim.drainEvents();
    if (mode === 'trainscaler') {
      for (const event of events) await call('cluster-event', handleClusterEvent, event);
      if (elapsed % ALARM_INTERVAL_SECONDS === 0) {
        for (const ref of refs) {
          const status = sim.jobStatus(ref);
          const running = status.phase === 'Running' || status.phase === 'Restarting';
          if (running)
            await call('alarm', handleAlarm, alertmanagerWebhook(ref, sim.now() - ALARM_INTERVAL_SECONDS));
        }
      }
      if (elapsed % SCHEDULE_INTERVAL_SECONDS === 0) {
        await call('schedule', handleSchedule, eventBridgeScheduledEvent(sim.now(), scheduleCount++));
      }
    }
    const finished = refs.filter((ref) => isDone(sim.jobStatus(ref))).length;
    if (elapsed % PROGRESS_INTERVAL_SECONDS === 0) {
      report(`[${mode}] t=${formatClock(elapsed)} jobs done ${finished}/${scenario.jobs.length}`);
    }
    if ((queue.length === 0 && finished === refs.length) || elapsed >= cap) break;
  }
  report(`[${mode}] finished at t=${formatClock(sim.now() - start)}`);

  record.statuses = refs.map((ref) => sim.jobStatus(ref));
  record.endedAt = Math.max(start, ...record.statuses.map((s) => s.finishedAt ?? sim.now()));
  for (const ref of refs) {
    record.finalConfigs.set(ref.name, configOf(await sim.getJob(ref)));
    record.timelines[ref.name] = sim.timeline(ref).map((p) => ({
      t: p.at - start,
      workers: p.workersDesired,
      workersRunning: p.workersRunning,
      throughput: p.throughput,
      phase: p.phase,
    }));
  }
  record.endedAt -= start;
  return record;
}

function isDone(status: SimulatedJobStatus): boolean {
  return status.phase === 'Succeeded' || status.phase === 'Failed';
}

function configOf(job: KubeObject): DemoJobConfig {
  return {
    roles: readJob(job).roles.map((r) => ({
      role: r.role,
      replicas: r.replicas,
      requests: r.requests,
      limits: r.limits,
    })),
  };
}

function outcomeOf(status: SimulatedJobStatus | undefined): DemoRunOutcome {
  if (!status) return { jctSeconds: null, state: 'unfinished' };
  const state: DemoJobState =
    status.phase === 'Succeeded' ? 'completed' : status.phase === 'Failed' ? 'failed' : 'unfinished';
  const outcome: DemoRunOutcome = { jctSeconds: status.jctSeconds, state };
  if (status.failureReason) outcome.failureReason = status.failureReason;
  return outcome;
}

function jobResult(
  manifest: KubeObject,
  submittedAtSeconds: number,
  story: string,
  manual: RunRecord,
  trainscaler: RunRecord,
): DemoJobResult {
  const name = manifest.metadata.name;
  const submitted = configOf(manifest);
  const manualStatus = manual.statuses.find((s) => s.ref.name === name);
  const trainscalerStatus = trainscaler.statuses.find((s) => s.ref.name === name);
  return {
    name,
    kind: manifest.kind as JobKind,
    application: manualStatus?.app ?? manifest.metadata.annotations?.['trainscaler.io/signature'] ?? '',
    submittedAtSeconds,
    story,
    manual: { ...outcomeOf(manualStatus), config: submitted },
    trainscaler: {
      ...outcomeOf(trainscalerStatus),
      config: {
        initial: trainscaler.initialConfigs.get(name) ?? submitted,
        final: trainscaler.finalConfigs.get(name) ?? submitted,
      },
    },
    decisions: trainscaler.decisions.get(name) ?? [],
  };
}

export function summarize(run: Pick<RunRecord, 'jobCount' | 'statuses' | 'endedAt'>): RunSummary {
  const completed = run.statuses.filter((s) => s.phase === 'Succeeded');
  const jcts = completed.map((s) => s.jctSeconds ?? 0).sort((a, b) => a - b);
  return {
    medianJctSeconds: median(jcts),
    completionRate: run.jobCount > 0 ? completed.length / run.jobCount : 0,
    completed: completed.length,
    failed: run.statuses.filter((s) => s.phase === 'Failed').length,
    makespanSeconds: run.endedAt,
  };
}

export function median(sorted: readonly number[]): number | null {
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  const upper = sorted[mid] ?? 0;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] ?? upper) + upper) / 2;
}

/** Seconds as h:mm:ss. */
export function formatClock(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${h}:${String(m).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
}
