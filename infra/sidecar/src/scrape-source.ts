// Progress from a metrics endpoint the trainer already serves (Prometheus text format): its step counter
// (and samples counter, if any) polled and re-exported under trainscaler's names and labels.
import type { ScrapeSourceConfig } from './config.js';
import type { Stoppable } from './log-source.js';
import { metricValue } from './prometheus-text.js';

export interface ScrapedProgress {
  step: number;
  samples?: number;
}

export async function scrapeOnce(source: ScrapeSourceConfig, timeoutMs: number): Promise<ScrapedProgress> {
  const response = await fetch(source.url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`${source.url} answered HTTP ${response.status}`);
  const body = await response.text();
  const step = metricValue(body, source.stepMetric);
  if (step === undefined || !Number.isFinite(step) || step < 0)
    throw new Error(`${source.url} has no sample of ${source.stepMetric}`);
  const progress: ScrapedProgress = { step };
  if (source.samplesMetric) {
    const samples = metricValue(body, source.samplesMetric);
    if (samples !== undefined && Number.isFinite(samples) && samples >= 0) progress.samples = samples;
  }
  return progress;
}

/** Polls every interval; one failure is logged and the next poll tries again (the trainer may be starting). */
export function followEndpoint(
  source: ScrapeSourceConfig,
  onProgress: (progress: ScrapedProgress) => void,
  log: (message: string) => void,
): Stoppable {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let lastError: string | undefined;
  const tick = () => {
    running = scrapeOnce(source, Math.min(source.intervalMs, 5000))
      .then((progress) => {
        lastError = undefined;
        onProgress(progress);
      })
      .catch((error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        if (message !== lastError) log(`scraping ${source.url}: ${message}`);
        lastError = message;
      })
      .finally(() => {
        if (stopped) return;
        timer = setTimeout(tick, source.intervalMs);
        timer.unref();
      });
  };
  tick();
  return {
    stop: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
