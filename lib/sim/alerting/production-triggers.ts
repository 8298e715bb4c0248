// The triggers production sends trainscaler, replayed on the simulated cluster from the project's own
// deployment files: the sidecar series scraped every scrape_interval and the rule file evaluated every
// evaluation_interval (infra/prometheus/prometheus.yml), alerts routed and batched as
// infra/prometheus/alertmanager.yml says into Alertmanager webhooks for the alarm function, and the
// schedule on its cron (TRAINSCALER_SCHEDULE of infra/k8s/config.env; serverless.yml's rate must agree).
// No other alarm exists: a job is reviewed on an alert only when the rules fire on its series.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CronTime } from 'cron';
import { load } from 'js-yaml';
import type { SimulatedCluster } from '../simulated-cluster.js';
import {
  type AlertmanagerConfig,
  AlertmanagerEmulation,
  parseAlertmanagerConfig,
  type WebhookNotification,
} from './alertmanager-emulation.js';
import { LOOKBACK_SECONDS } from './promql.js';
import { parseRuleFile, RuleEngine, type RuleGroup } from './rule-engine.js';
import { SeriesStore } from './series-store.js';
import { SidecarSeries } from './sidecar-series.js';

export interface ProductionTriggerConfig {
  rules: RuleGroup[];
  ruleFiles: string[];
  alertmanager: AlertmanagerConfig;
  scrapeIntervalSeconds: number;
  evaluationIntervalSeconds: number;
  schedule: string;
}

/** The repository's infra/ folder, found upwards from this module (source tree or dist/). */
function infraDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'infra', 'prometheus', 'prometheus.yml'))) return join(dir, 'infra');
    dir = dirname(dir);
  }
  throw new Error('infra/prometheus/prometheus.yml not found above lib/sim/alerting');
}

function seconds(raw: unknown, what: string): number {
  const m = typeof raw === 'string' ? /^(\d+)([sm])$/.exec(raw) : null;
  if (!m) throw new Error(`${what}: '${String(raw)}' is not a duration the simulator reads`);
  return Number(m[1]) * (m[2] === 'm' ? 60 : 1);
}

/** Reads the deployed configuration; any option the emulation does not implement is refused, by name. */
export function loadProductionTriggerConfig(infra = infraDir()): ProductionTriggerConfig {
  const prometheus = load(readFileSync(join(infra, 'prometheus', 'prometheus.yml'), 'utf8')) as {
    global: Record<string, unknown>;
    rule_files: string[];
  };
  const ruleFiles = prometheus.rule_files.map((pattern) => {
    const m = /^rules\/\*(\.rules\.yml)$/.exec(pattern);
    if (!m) throw new Error(`rule_files pattern '${pattern}' not read by the simulator`);
    return 'rules/trainscaler.rules.yml';
  });
  const rules = ruleFiles.flatMap((file) =>
    parseRuleFile(readFileSync(join(infra, 'prometheus', file), 'utf8'), `infra/prometheus/${file}`),
  );
  const env = readFileSync(join(infra, 'k8s', 'config.env'), 'utf8');
  const schedule = /^TRAINSCALER_SCHEDULE=(.+)$/m.exec(env)?.[1]?.trim();
  if (!schedule) throw new Error('infra/k8s/config.env has no TRAINSCALER_SCHEDULE');
  return {
    rules,
    ruleFiles: ruleFiles.map((f) => `infra/prometheus/${f}`),
    alertmanager: parseAlertmanagerConfig(
      readFileSync(join(infra, 'prometheus', 'alertmanager.yml'), 'utf8'),
    ),
    scrapeIntervalSeconds: seconds(prometheus.global.scrape_interval, 'scrape_interval'),
    evaluationIntervalSeconds: seconds(prometheus.global.evaluation_interval, 'evaluation_interval'),
    schedule,
  };
}

/** Seconds between two ticks of the schedule's cron (from the next two firings after the epoch). */
export function scheduleTickSeconds(config: ProductionTriggerConfig): number {
  const cron = new CronTime(config.schedule, 'UTC');
  const first = cron.getNextDateFrom(new Date(0)).toSeconds();
  return cron.getNextDateFrom(new Date(first * 1000)).toSeconds() - first;
}

export function describeProductionTriggers(config: ProductionTriggerConfig): string {
  const alerts = config.rules.flatMap((g) => g.rules.flatMap((r) => (r.kind === 'alert' ? [r.alert] : [])));
  return `trainscaler triggers as deployed: the sidecar series scraped every ${config.scrapeIntervalSeconds} s, ${config.ruleFiles.join(', ')} evaluated every ${config.evaluationIntervalSeconds} s by the simulator's PromQL evaluator (Prometheus 2.42 semantics; alerts ${alerts.join(', ')}), Alertmanager routing and batching of infra/prometheus/alertmanager.yml, the schedule on cron '${config.schedule}' (infra/k8s/config.env), submit on arrival and cluster events as they happen`;
}

export interface TriggerCounts {
  evaluations: number;
  webhooks: number;
  alertsSent: Record<string, number>;
  schedules: number;
}

export class ProductionTriggers {
  readonly #config: ProductionTriggerConfig;
  readonly #store = new SeriesStore();
  readonly #engine: RuleEngine;
  readonly #alertmanager: AlertmanagerEmulation;
  readonly #sidecars: SidecarSeries;
  readonly #cron: CronTime;
  readonly #retention: number;
  #nextSchedule: number;
  readonly counts: TriggerCounts = { evaluations: 0, webhooks: 0, alertsSent: {}, schedules: 0 };

  constructor(sim: SimulatedCluster, namespace: string, config: ProductionTriggerConfig) {
    if (config.scrapeIntervalSeconds !== config.evaluationIntervalSeconds)
      throw new Error(
        'the simulator scrapes and evaluates on one grid: scrape_interval must equal evaluation_interval',
      );
    this.#config = config;
    this.#engine = new RuleEngine(config.rules, this.#store);
    this.#alertmanager = new AlertmanagerEmulation(config.alertmanager);
    this.#sidecars = new SidecarSeries(sim, namespace);
    this.#cron = new CronTime(config.schedule, 'UTC');
    this.#retention = this.#engine.longestRangeSeconds + LOOKBACK_SECONDS;
    this.#nextSchedule = this.#cronAfter(sim.now());
  }

  #cronAfter(at: number): number {
    return this.#cron.getNextDateFrom(new Date(at * 1000)).toSeconds();
  }

  /** The next instant (epoch seconds) after `at` at which something is due. */
  nextAfter(at: number): number {
    const step = this.#config.evaluationIntervalSeconds;
    return Math.min(
      (Math.floor(at / step + 1e-9) + 1) * step,
      this.#nextSchedule > at ? this.#nextSchedule : Number.POSITIVE_INFINITY,
    );
  }

  /** Runs what is due at `at`: the webhooks to post, and whether the schedule fires. */
  async due(now: number): Promise<{ webhooks: WebhookNotification[]; schedule: boolean }> {
    let webhooks: WebhookNotification[] = [];
    const step = this.#config.evaluationIntervalSeconds;
    // The simulated clock adds sub-steps in floating point: an instant within a microsecond is on the grid.
    const grid = Math.round(now / step) * step;
    const at = Math.abs(now - grid) < 1e-6 ? grid : now;
    if (at === grid) {
      const scrapes = await this.#sidecars.scrape();
      for (const scrape of scrapes) this.#store.write(scrape.target, scrape.samples, at);
      // A target gone (pod finished, deleted, container stopped): its series end with a staleness marker.
      this.#store.retireWritersExcept(new Set(scrapes.map((s) => s.target)), 'scrape:', at);
      const firing = this.#engine.evaluate(at);
      this.counts.evaluations += 1;
      webhooks = this.#alertmanager.receive(firing, at);
      for (const hook of webhooks) {
        this.counts.webhooks += 1;
        for (const alert of hook.payload.alerts) {
          const name = alert.labels.alertname ?? '';
          this.counts.alertsSent[name] = (this.counts.alertsSent[name] ?? 0) + 1;
        }
      }
      if (this.counts.evaluations % 20 === 0) this.#store.trim(at - this.#retention);
    }
    let schedule = false;
    if (at >= this.#nextSchedule) {
      schedule = true;
      this.counts.schedules += 1;
      this.#nextSchedule = this.#cronAfter(at);
    }
    return { webhooks, schedule };
  }
}
