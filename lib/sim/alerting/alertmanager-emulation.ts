// The emulated Alertmanager: the routing tree of infra/prometheus/alertmanager.yml (label="value" matchers,
// group_by, group_wait, group_interval, repeat_interval, inherited by child routes; first matching child
// wins), one aggregation group per route and group-label values, and Alertmanager's notify rule: a group
// notifies group_wait after it is created, then at each group_interval if its firing set grew, or once
// repeat_interval has passed since the last notification. send_resolved is false for the trainscaler
// receiver, so only firing alerts are sent; a group whose alerts all resolved is dropped.
import { load } from 'js-yaml';
import type { JobRef } from '../../types.js';
import { toRfc3339 } from '../simulated-clock.js';
import type { ActiveAlert } from './rule-engine.js';

interface Route {
  receiver: string;
  matchers: Array<[string, string]>;
  groupBy: string[];
  groupWait: number;
  groupInterval: number;
  repeatInterval: number;
  routes: Route[];
}

const ROUTE_KEYS = new Set([
  'receiver',
  'matchers',
  'group_by',
  'group_wait',
  'group_interval',
  'repeat_interval',
  'routes',
]);

function seconds(raw: unknown, fallback: number): number {
  if (raw === undefined) return fallback;
  const m = typeof raw === 'string' ? /^(\d+)([smh])$/.exec(raw) : null;
  if (!m) throw new Error(`alertmanager duration '${String(raw)}'`);
  return Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
}

function route(raw: Record<string, unknown>, parent: Route | undefined): Route {
  const unknown = Object.keys(raw).filter((k) => !ROUTE_KEYS.has(k));
  if (unknown.length > 0) throw new Error(`alertmanager route option(s) ${unknown.join(', ')} not emulated`);
  const matchers = ((raw.matchers as string[] | undefined) ?? []).map((m): [string, string] => {
    const match = /^([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"$/.exec(m);
    if (!match) throw new Error(`alertmanager matcher '${m}' not emulated (only label="value")`);
    return [match[1] ?? '', match[2] ?? ''];
  });
  // Alertmanager's defaults: group_wait 30s, group_interval 5m, repeat_interval 4h.
  const self: Route = {
    receiver: String(raw.receiver ?? parent?.receiver ?? ''),
    matchers,
    groupBy: (raw.group_by as string[] | undefined) ?? parent?.groupBy ?? [],
    groupWait: seconds(raw.group_wait, parent?.groupWait ?? 30),
    groupInterval: seconds(raw.group_interval, parent?.groupInterval ?? 300),
    repeatInterval: seconds(raw.repeat_interval, parent?.repeatInterval ?? 4 * 3600),
    routes: [],
  };
  self.routes = ((raw.routes as Array<Record<string, unknown>> | undefined) ?? []).map((r) => route(r, self));
  return self;
}

export interface AlertmanagerConfig {
  root: Route;
  /** Receivers with a webhook (the trainscaler alarm function); their max_alerts. */
  webhooks: Map<string, { maxAlerts: number; sendResolved: boolean }>;
}

export function parseAlertmanagerConfig(yamlText: string): AlertmanagerConfig {
  const doc = load(yamlText) as { route: Record<string, unknown>; receivers: Array<Record<string, unknown>> };
  const webhooks = new Map<string, { maxAlerts: number; sendResolved: boolean }>();
  for (const receiver of doc.receivers ?? []) {
    const hooks = receiver.webhook_configs as Array<Record<string, unknown>> | undefined;
    const hook = hooks?.[0];
    if (!hook) continue;
    webhooks.set(String(receiver.name), {
      maxAlerts: Number(hook.max_alerts ?? 0),
      sendResolved: hook.send_resolved !== false,
    });
  }
  return { root: route(doc.route, undefined), webhooks };
}

function routeFor(root: Route, labels: Readonly<Record<string, string>>): Route {
  for (const child of root.routes) {
    if (child.matchers.every(([k, v]) => (labels[k] ?? '') === v)) return routeFor(child, labels);
  }
  return root;
}

interface Group {
  route: Route;
  groupLabels: Record<string, string>;
  nextFlushAt: number;
  alerts: Map<string, ActiveAlert>;
  lastSent?: { at: number; firing: Set<string> };
}

export interface WebhookNotification {
  receiver: string;
  payload: ReturnType<typeof webhookPayload>;
}

export class AlertmanagerEmulation {
  readonly #config: AlertmanagerConfig;
  readonly #groups = new Map<string, Group>();

  constructor(config: AlertmanagerConfig) {
    this.#config = config;
  }

  /** The firing alerts Prometheus holds at `at`; returns the webhook notifications due at `at`. */
  receive(firing: readonly ActiveAlert[], at: number): WebhookNotification[] {
    const current = new Map<string, Set<string>>();
    for (const alert of firing) {
      const r = routeFor(this.#config.root, alert.labels);
      if (!this.#config.webhooks.has(r.receiver)) continue;
      const groupLabels = Object.fromEntries(r.groupBy.map((l) => [l, alert.labels[l] ?? '']));
      const key = JSON.stringify([r.receiver, r.groupWait, r.matchers, groupLabels]);
      let group = this.#groups.get(key);
      if (!group) {
        group = { route: r, groupLabels, nextFlushAt: at + r.groupWait, alerts: new Map() };
        this.#groups.set(key, group);
      }
      const id = JSON.stringify(alert.labels);
      group.alerts.set(id, alert);
      const ids = current.get(key) ?? new Set<string>();
      ids.add(id);
      current.set(key, ids);
    }
    const out: WebhookNotification[] = [];
    for (const [key, group] of this.#groups) {
      const ids = current.get(key) ?? new Set<string>();
      for (const id of [...group.alerts.keys()]) if (!ids.has(id)) group.alerts.delete(id);
      if (at < group.nextFlushAt) continue;
      group.nextFlushAt = at + group.route.groupInterval;
      if (group.alerts.size === 0) {
        this.#groups.delete(key);
        continue;
      }
      const grew = !group.lastSent || [...group.alerts.keys()].some((id) => !group.lastSent?.firing.has(id));
      const repeat = group.lastSent !== undefined && at - group.lastSent.at >= group.route.repeatInterval;
      if (!grew && !repeat) continue;
      group.lastSent = { at, firing: new Set(group.alerts.keys()) };
      const hook = this.#config.webhooks.get(group.route.receiver);
      const alerts = [...group.alerts.values()].slice(0, hook?.maxAlerts || undefined);
      out.push({
        receiver: group.route.receiver,
        payload: webhookPayload(
          group.route.receiver,
          group.groupLabels,
          alerts,
          group.alerts.size - alerts.length,
        ),
      });
    }
    return out;
  }
}

/** 64-bit FNV-1a as 16 hex digits: Alertmanager fingerprints are label hashes of that shape. */
function fingerprint(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text)) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, '0');
}

function common(records: ReadonlyArray<Readonly<Record<string, string>>>): Record<string, string> {
  const first = records[0] ?? {};
  return Object.fromEntries(Object.entries(first).filter(([k, v]) => records.every((r) => r[k] === v)));
}

/** The webhook (version 4) body Alertmanager posts. */
export function webhookPayload(
  receiver: string,
  groupLabels: Record<string, string>,
  alerts: readonly ActiveAlert[],
  truncated: number,
) {
  const groupKey = `{}:{${Object.entries(groupLabels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(', ')}}`;
  return {
    version: '4',
    groupKey,
    truncatedAlerts: truncated,
    status: 'firing',
    receiver,
    groupLabels,
    commonLabels: common(alerts.map((a) => a.labels)),
    commonAnnotations: common(alerts.map((a) => a.annotations)),
    externalURL: 'http://alertmanager.monitoring.svc:9093',
    alerts: alerts.map((a) => ({
      status: 'firing',
      labels: { ...a.labels },
      annotations: { ...a.annotations },
      startsAt: toRfc3339(a.firedAt ?? a.activeAt),
      endsAt: '0001-01-01T00:00:00Z',
      generatorURL: `http://prometheus.monitoring.svc:9090/graph?g0.expr=${encodeURIComponent(a.rule)}&g0.tab=1`,
      fingerprint: fingerprint(JSON.stringify(a.labels)),
    })),
  };
}

/** The job an alert names (the labels the alarm function's schema requires). */
export function jobOfAlert(alert: ActiveAlert): JobRef | undefined {
  const { namespace, job_kind: kind, job_name: name } = alert.labels;
  if (!namespace || !kind || !name) return undefined;
  return { kind: kind as JobRef['kind'], namespace, name };
}
