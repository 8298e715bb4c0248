// Turns an upstream controller's rendered install (`kubectl kustomize <module>/config/...`) into what an
// out-of-cluster controller on 127.0.0.1 needs: its CRDs and webhook configurations exactly as the real
// install has them (names, rules, selectors, failure policies, conversion), except that every webhook
// points at https://127.0.0.1:<port><path> with the test cluster's CA instead of at an in-cluster Service.
// Everything else the install holds (Deployment, Services, RBAC, APIService, ...) is dropped: the
// controller runs as a process here.
import { dump, loadAll } from 'js-yaml';

type Obj = Record<string, unknown>;

export const DEFAULT_KINDS = [
  'CustomResourceDefinition',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
];

export interface RenderOptions {
  /** Port of the controller's webhook server on 127.0.0.1. */
  port: number;
  /** Base64 PEM of the CA that signed the webhook server's certificate. */
  caBundle: string;
  /** Object kinds to keep (default: CRDs and webhook configurations). */
  kinds?: readonly string[];
}

export interface Rendered {
  yaml: string;
  kept: number;
  total: number;
  /** Webhook client configs (admission and CRD conversion) pointed at loopback. */
  rewritten: number;
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Replaces a Service reference by a URL on loopback; returns how many it rewrote. */
function pointAtLoopback(clientConfig: Obj, port: number, caBundle: string): number {
  const service = clientConfig.service;
  if (!isObj(service)) return 0;
  const path = typeof service.path === 'string' ? service.path : '/';
  delete clientConfig.service;
  clientConfig.url = `https://127.0.0.1:${port}${path}`;
  clientConfig.caBundle = caBundle;
  return 1;
}

function rewrite(doc: Obj, port: number, caBundle: string): number {
  let n = 0;
  if (Array.isArray(doc.webhooks)) {
    for (const wh of doc.webhooks) {
      if (isObj(wh) && isObj(wh.clientConfig)) n += pointAtLoopback(wh.clientConfig, port, caBundle);
    }
  }
  const conversion = isObj(doc.spec) ? doc.spec.conversion : undefined;
  if (isObj(conversion) && isObj(conversion.webhook) && isObj(conversion.webhook.clientConfig)) {
    n += pointAtLoopback(conversion.webhook.clientConfig, port, caBundle);
  }
  return n;
}

export function renderInstall(input: string, opts: RenderOptions): Rendered {
  if (!Number.isInteger(opts.port) || opts.port < 1 || opts.port > 65535) {
    throw new Error(`port must be a TCP port (1-65535), got ${opts.port}`);
  }
  if (opts.caBundle === '') throw new Error('caBundle is empty');
  const kinds = new Set(opts.kinds ?? DEFAULT_KINDS);
  const docs = loadAll(input).filter(isObj);
  const kept = docs.filter((d) => typeof d.kind === 'string' && kinds.has(d.kind));
  if (kept.length === 0) throw new Error(`no ${[...kinds].join('/')} in the input`);
  let rewritten = 0;
  for (const d of kept) rewritten += rewrite(d, opts.port, opts.caBundle);
  const yaml = kept.map((d) => `---\n${dump(d, { lineWidth: -1, noRefs: true })}`).join('');
  return { yaml, kept: kept.length, total: docs.length, rewritten };
}
