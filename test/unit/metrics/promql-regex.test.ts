// Regex matchers built from names: every metacharacter escaped (then the backslashes escaped again for the
// PromQL string), and the cAdvisor fallback selects the job's pods by their exact controller-given names,
// not by a prefix that also covers another job's pods (`train` vs `train-2`).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { PrometheusMetricsSource, regexLiteral } from '../../../lib/metrics/prometheus-metrics-source.js';
import type { JobRef } from '../../../lib/types.js';

const queries: string[] = [];
let url = '';
const server = createServer((req, res) => {
  const query = new URL(req.url ?? '/', 'http://127.0.0.1').searchParams.get('query') ?? '';
  queries.push(query);
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ status: 'success', data: { resultType: 'vector', result: [] } }));
});
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/**
 * The regex of the `pod=~"..."` matcher as Prometheus reads it: the PromQL string unquoted (Go rules; JSON's
 * agree for these escapes and, like PromQL, reject an unknown one such as `\.`), anchored at both ends.
 */
function podRegexOf(query: string): RegExp {
  const quoted = /pod=~("(?:[^"\\]|\\.)*")/.exec(query)?.[1];
  assert.ok(quoted, `a pod regex matcher in ${query}`);
  let pattern: string;
  try {
    pattern = JSON.parse(quoted) as string;
  } catch (error) {
    assert.fail(`PromQL would refuse the string ${quoted}: ${(error as Error).message}`);
  }
  return new RegExp(`^(?:${pattern})$`);
}

async function cadvisorPodRegex(ref: JobRef): Promise<RegExp> {
  queries.length = 0;
  const source = new PrometheusMetricsSource(url, () => 1_800_000_000);
  await source.containerUsage(ref, 600).catch(() => undefined); // no series: MissingMetricsError
  const cadvisor = queries.find((q) => q.includes('container_memory_working_set_bytes'));
  assert.ok(cadvisor, `the cAdvisor fallback was queried: ${queries.join('\n')}`);
  return podRegexOf(cadvisor);
}

describe('PromQL regex matchers built from names', () => {
  it("job train reads its own pods' cAdvisor series, not train-2's", async () => {
    const regex = await cadvisorPodRegex({ kind: 'PyTorchJob', namespace: 'team-a', name: 'train' });
    for (const pod of ['train-worker-0', 'train-master-0', 'train-ps-12'])
      assert.ok(regex.test(pod), `${pod} is train's`);
    for (const pod of ['train-2-worker-0', 'train-worker-worker-0', 'train-0', 'trainx-worker-0'])
      assert.ok(!regex.test(pod), `${pod} is not train's`);
  });

  it('a dot in a StatefulSet name matches a dot only', async () => {
    const regex = await cadvisorPodRegex({ kind: 'StatefulSet', namespace: 'team-a', name: 'ddp.v2' });
    assert.ok(regex.test('ddp.v2-0'));
    for (const pod of ['ddpxv2-0', 'ddp.v2-1-0', 'ddp.v2-x']) assert.ok(!regex.test(pod), pod);
  });

  it("each kind's pods by the names its controller gives them, not a longer-named job's", async () => {
    const pods: Array<[JobRef['kind'], string[], string[]]> = [
      ['Job', ['train-0-x7k2p', 'train-12-abcde'], ['train-0', 'train-2-0-abcde', 'train-worker-0']],
      [
        'JobSet',
        ['train-workers-0-0-x7k2p', 'train-w-1-3-abcde'],
        ['train-0-0-abcde', 'train-workers-0-x7k2p', 'train-2-workers-0-0-abcd'],
      ],
      [
        'TrainJob',
        ['train-node-0-0-x7k2p', 'train-node-3-1-abcde'],
        ['train-node-0-x7k2p', 'train-worker-0'],
      ],
    ];
    for (const [kind, own, others] of pods) {
      const regex = await cadvisorPodRegex({ kind, namespace: 'team-a', name: 'train' });
      for (const pod of own) assert.ok(regex.test(pod), `${pod} is ${kind} train's`);
      for (const pod of others) assert.ok(!regex.test(pod), `${pod} is not ${kind} train's`);
    }
  });

  it('escapes every regex metacharacter, backslash included', () => {
    const hostile = 'a.b*c+d?e(f)g|h[i]j{1}k^l$m\\n';
    const regex = new RegExp(`^${regexLiteral(hostile)}$`);
    assert.ok(regex.test(hostile));
    assert.ok(!regex.test('aXb*c+d?e(f)g|h[i]j{1}k^l$m\\n'));
    assert.ok(!regex.test(hostile.replace('\\', '')));
  });

  it('a backslash in a name reaches Prometheus as a literal backslash', async () => {
    // Not a valid Kubernetes name, but the query must not depend on validation upstream.
    const regex = await cadvisorPodRegex({ kind: 'StatefulSet', namespace: 'team-a', name: 'a\\d' });
    assert.ok(regex.test('a\\d-0'));
    assert.ok(!regex.test('a7-0'));
  });
});
