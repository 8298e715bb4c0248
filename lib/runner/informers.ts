// List+watch of the objects trainscaler reacts to, through client-node's informers: every supported job kind
// (PyTorchJobs, TFJobs, StatefulSets, batch/v1 Jobs, JobSets, TrainJobs) and pods, cluster-wide. Two things
// client-node leaves to the caller are done here:
// - a list returns items without kind/apiVersion, and typed lists as class instances with Date fields, while
//   watch events carry the API server's JSON; every object is normalised to the JSON form with its kind,
//   which is what the handlers (and the Lambda deployment) receive;
// - an informer stops for good on a watch or list error (e.g. the Kubeflow CRDs are not installed yet);
//   it is restarted here with capped exponential backoff until the set is stopped. A kind whose list is
//   answered 404 has no CRD installed (most EKS and GKE clusters have no JobSet or TrainJob): it is named once in
//   the start-up line, re-checked in the background without a log line, and one line says when it appears.

import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
} from '@kubernetes/client-node';
import type { ActuatorLogger as Logger } from '../actuator.js';
import { apiVersionOf } from '../adapters/job-adapter.js';
import { isObject } from '../adapters/unstructured.js';
import { TRAINING_AUTOSCALER_API_VERSION, TRAINING_AUTOSCALER_RESOURCE } from '../training-autoscaler.js';
import type { JobKind } from '../types.js';
import type { InformerEvent, WatchedObject, WatchType } from './event-router.js';

interface Source {
  kind: string;
  apiVersion: string;
  path: string;
  list: () => Promise<unknown>;
  labelSelector?: string;
}

export interface InformerSetOptions {
  onEvent: (event: InformerEvent) => void;
  logger: Logger;
  /** Only StatefulSets matching this label selector are watched (all when unset). */
  statefulSetSelector?: string;
  minRestartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** Cap of the silent re-check of a kind whose CRD is not installed (default 5 min). */
  maxAbsentRecheckMs?: number;
  /**
   * Also watch the tenants' TrainingAutoscalers (the runner: its ticks read them from the cache). A change of
   * one's spec asks for the schedule tick now (lib/runner/event-router.ts).
   */
  policies?: boolean;
}

export interface InformerSet {
  /** Resolves when every informer has completed its first list, or found its kind not served (no CRD). */
  readonly synced: Promise<void>;
  /** Whether the informer of `kind` holds this object (i.e. it exists and matches the informer's selector). */
  has(kind: string, namespace: string, name: string): boolean;
  /**
   * Every object the informer of `kind` holds now (its kind and apiVersion set; read-only); [] for a kind found
   * not served; undefined for a kind not watched, not yet listed, or whose informer is failing and restarting
   * (its cache may be stale): the caller then lists it from the API server.
   */
  list(kind: string): WatchedObject[] | undefined;
  stop(): Promise<void>;
}

/** Objects per page of an informer's list (as client-go's reflectors): each response is bounded. */
export const INFORMER_PAGE_SIZE = 500;

/**
 * A list read page by page (`limit`, `continue`), returned as one list in the API server's JSON form. A page
 * that fails (a continue answered 410 Gone among them) fails the list: the informer restarts it from scratch.
 */
export async function allPages(
  page: (limit: number, continueToken: string | undefined) => Promise<unknown>,
): Promise<{ metadata: { resourceVersion: string }; items: unknown[] }> {
  const items: unknown[] = [];
  let token: string | undefined;
  let resourceVersion = '';
  do {
    // Typed pages (client-node's classes) carry the token as `_continue`, custom objects' JSON as `continue`.
    const plain: unknown = JSON.parse(JSON.stringify((await page(INFORMER_PAGE_SIZE, token)) ?? {}));
    const metadata = isObject(plain) && isObject(plain.metadata) ? plain.metadata : {};
    if (isObject(plain) && Array.isArray(plain.items)) for (const item of plain.items) items.push(item);
    if (typeof metadata.resourceVersion === 'string') resourceVersion = metadata.resourceVersion;
    const next = metadata._continue ?? metadata.continue;
    token = typeof next === 'string' && next !== '' ? next : undefined;
  } while (token !== undefined);
  return { metadata: { resourceVersion }, items };
}

function sources(kc: KubeConfig, statefulSetSelector: string | undefined, policies: boolean): Source[] {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const crd = (kind: JobKind, plural: string): Source => {
    const apiVersion = apiVersionOf(kind);
    const [group = '', version = ''] = apiVersion.split('/');
    return {
      kind,
      apiVersion,
      path: `/apis/${apiVersion}/${plural}`,
      list: () =>
        allPages((limit, _continue) =>
          custom.listClusterCustomObject({ group, version, plural, limit, _continue }),
        ),
    };
  };
  const statefulSets: Source = {
    kind: 'StatefulSet',
    apiVersion: 'apps/v1',
    path: '/apis/apps/v1/statefulsets',
    list: () =>
      allPages((limit, _continue) =>
        apps.listStatefulSetForAllNamespaces({ labelSelector: statefulSetSelector, limit, _continue }),
      ),
  };
  if (statefulSetSelector) statefulSets.labelSelector = statefulSetSelector;
  const { group, version, plural, kind } = TRAINING_AUTOSCALER_RESOURCE;
  const trainingAutoscalers: Source = {
    kind,
    apiVersion: TRAINING_AUTOSCALER_API_VERSION,
    path: `/apis/${TRAINING_AUTOSCALER_API_VERSION}/${plural}`,
    list: () =>
      allPages((limit, _continue) =>
        custom.listClusterCustomObject({ group, version, plural, limit, _continue }),
      ),
  };
  return [
    ...(policies ? [trainingAutoscalers] : []),
    crd('PyTorchJob', 'pytorchjobs'),
    crd('TFJob', 'tfjobs'),
    statefulSets,
    // Every Job, child Jobs of JobSets included: the event router skips those (their JobSet is the job).
    {
      kind: 'Job',
      apiVersion: 'batch/v1',
      path: '/apis/batch/v1/jobs',
      list: () => allPages((limit, _continue) => batch.listJobForAllNamespaces({ limit, _continue })),
    },
    crd('JobSet', 'jobsets'),
    crd('TrainJob', 'trainjobs'),
    {
      kind: 'Pod',
      apiVersion: 'v1',
      path: '/api/v1/pods',
      list: () => allPages((limit, _continue) => core.listPodForAllNamespaces({ limit, _continue })),
    },
  ];
}

/** The API server's JSON form of a list, each item with its kind and apiVersion. */
export function normaliseList(
  raw: unknown,
  kind: string,
  apiVersion: string,
): KubernetesListObject<KubernetesObject> {
  // A JSON round trip turns client-node's model instances (Date fields) back into the wire form.
  const plain: unknown = JSON.parse(JSON.stringify(raw ?? {}));
  const items = isObject(plain) && Array.isArray(plain.items) ? plain.items : [];
  const metadata = isObject(plain) && isObject(plain.metadata) ? plain.metadata : {};
  return {
    apiVersion: `${apiVersion}`,
    kind: `${kind}List`,
    metadata: {
      resourceVersion: typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : '',
    },
    items: items.filter(isObject).map((item) => ({ ...item, kind, apiVersion }) as KubernetesObject),
  };
}

function asWatched(obj: KubernetesObject, source: Source): WatchedObject | undefined {
  const name = obj.metadata?.name;
  if (!name) return undefined;
  return {
    ...obj,
    kind: obj.kind ?? source.kind,
    apiVersion: obj.apiVersion ?? source.apiVersion,
  } as WatchedObject;
}

/** A list answered 404: the API server does not serve the kind (its CRD is not installed). */
export function isNotServed(error: unknown): boolean {
  return isObject(error) && (error.code === 404 || error.statusCode === 404);
}

/** One short line for a log: client-node's ApiException message carries the whole body and headers. */
export function briefError(error: unknown): string {
  if (isObject(error) && typeof error.code === 'number') {
    const body = error.body;
    const message = isObject(body) && typeof body.message === 'string' ? body.message : undefined;
    return `HTTP ${error.code}${message ? `: ${message}` : ''}`.slice(0, 200);
  }
  const text = error instanceof Error ? error.message : String(error);
  return (text.split('\n')[0] ?? '').slice(0, 200);
}

const RESTOP_INTERVAL_MS = 250;
const RESTOP_ROUNDS = 40;

export function startInformers(kc: KubeConfig, options: InformerSetOptions): InformerSet {
  const minDelay = options.minRestartDelayMs ?? 1_000;
  const maxDelay = options.maxRestartDelayMs ?? 30_000;
  const maxAbsentDelay = Math.max(options.maxAbsentRecheckMs ?? 300_000, maxDelay);
  const all = sources(kc, options.statefulSetSelector, options.policies === true);
  // Each kind settles once: listed, or found not served. The start-up line waits for all of them.
  const settled = new Map<string, 'handled' | 'absent'>();
  const settle = (kind: string, how: 'handled' | 'absent') => {
    if (settled.has(kind)) return;
    settled.set(kind, how);
    if (settled.size !== all.length) return;
    const of = (h: string) => all.filter((s) => settled.get(s.kind) === h).map((s) => s.kind);
    const absent = of('absent');
    options.logger.info(
      { handled: of('handled'), absent },
      absent.length > 0
        ? `watching ${of('handled').join(', ')}; not installed (re-checked in the background): ${absent.join(', ')}`
        : `watching ${of('handled').join(', ')}`,
    );
  };
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const informers: Array<{ stop(): Promise<void> }> = [];
  const caches = new Map<
    string,
    {
      get(name: string, namespace?: string): KubernetesObject | undefined;
      list(): readonly KubernetesObject[];
    }
  >();
  /** Kinds whose informer has listed and has not failed since: their cache is current. */
  const current = new Set<string>();
  const syncs: Promise<void>[] = [];

  for (const source of all) {
    let initial = true;
    let delay = minDelay;
    let absent = false;
    let markSynced: () => void = () => {};
    syncs.push(new Promise<void>((resolve) => (markSynced = resolve)));
    const list = async () => {
      let raw: unknown;
      try {
        raw = await source.list();
      } catch (error) {
        if (isNotServed(error)) {
          absent = true;
          settle(source.kind, 'absent');
          markSynced();
        }
        throw error;
      }
      const result = normaliseList(raw, source.kind, source.apiVersion);
      // Stopped while listing: failing here keeps the informer from opening a watch nobody would close.
      if (stopped) throw new Error('informer stopped');
      if (absent) {
        absent = false;
        options.logger.info({ kind: source.kind }, `${source.kind} is now served; watching it`);
      }
      settle(source.kind, 'handled');
      current.add(source.kind);
      delay = minDelay;
      if (initial) {
        // The informer hands the listed items to its callbacks synchronously once this promise resolves,
        // before it starts watching; the first macrotask after that marks the end of the initial state.
        setImmediate(() => {
          initial = false;
          markSynced();
        });
      }
      return result;
    };
    const informer = makeInformer(kc, source.path, list, source.labelSelector);
    const emit = (type: WatchType) => (obj: KubernetesObject) => {
      const object = asWatched(obj, source);
      if (!object || stopped) return;
      try {
        options.onEvent({ type, object, initial });
      } catch (error) {
        options.logger.error({ kind: source.kind, error: String(error) }, 'event handling failed');
      }
    };
    informer.on('add', emit('ADDED'));
    informer.on('update', emit('MODIFIED'));
    informer.on('delete', emit('DELETED'));
    let restarting = false;
    const restart = () => {
      // The same failure can be reported twice (error callback and rejected start): restart once.
      if (stopped || restarting) return;
      restarting = true;
      const timer = setTimeout(() => {
        timers.delete(timer);
        restarting = false;
        if (!stopped) informer.start().catch(onError);
      }, delay);
      timers.add(timer);
      delay = Math.min(delay * 2, absent ? maxAbsentDelay : maxDelay);
    };
    const onError = (error?: unknown) => {
      current.delete(source.kind);
      if (stopped) return;
      if (!absent)
        options.logger.warn(
          { kind: source.kind, path: source.path, error: briefError(error), retryInMs: delay },
          'informer failed',
        );
      restart();
    };
    informer.on('error', onError);
    informer.start().catch(onError);
    informers.push(informer);
    caches.set(source.kind, informer);
  }

  return {
    synced: Promise.all(syncs).then(() => {}),
    has: (kind, namespace, name) => caches.get(kind)?.get(name, namespace) !== undefined,
    list: (kind) => {
      if (settled.get(kind) === 'absent' && !current.has(kind)) return [];
      if (!current.has(kind)) return undefined;
      const source = all.find((s) => s.kind === kind);
      if (!source) return undefined;
      return (caches.get(kind)?.list() ?? []).flatMap((obj) => asWatched(obj, source) ?? []);
    },
    async stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await Promise.all(informers.map((i) => i.stop()));
      // A watch still connecting when stop() ran becomes abortable only once connected: stop again for a
      // while (in the background, not keeping the process alive), or it would stay open until idle.
      let rounds = 0;
      const again = setInterval(() => {
        for (const informer of informers) informer.stop().catch(() => {});
        if (++rounds >= RESTOP_ROUNDS) clearInterval(again);
      }, RESTOP_INTERVAL_MS);
      again.unref();
    },
  };
}
