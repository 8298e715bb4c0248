// A cluster without the JobSet or Trainer CRDs (most EKS and GKE clusters): the runner names the absent kinds once
// at start-up, re-checks them without a log line, and says in one line when one appears. Against a real local HTTP
// server that answers 404 for those kinds' lists, as an API server does for a resource it does not serve.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { describe, it } from 'node:test';
import { briefError, isNotServed, startInformers } from '../../../lib/runner/informers.js';
import { listenAsApiServer } from '../../support/local-api-server.js';

interface Line {
  level: 'info' | 'warn' | 'error';
  obj: object;
  msg: string | undefined;
}

async function apiServer(served: Set<string>) {
  const lists: string[] = [];
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const plural = url.pathname.split('/').at(-1) ?? '';
    response.setHeader('content-type', 'application/json');
    if (!served.has(plural)) {
      lists.push(plural);
      response.statusCode = 404;
      return response.end(
        JSON.stringify({
          kind: 'Status',
          code: 404,
          message: 'the server could not find the requested resource',
        }),
      );
    }
    // A watch stays open (closed with the server); a list is empty.
    if (url.searchParams.get('watch') === 'true') return response.write('');
    return response.end(JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }));
  });
  const { kubeConfig, close } = await listenAsApiServer(server);
  return {
    kubeConfig,
    lists,
    close,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('informers on a cluster without some CRDs', () => {
  it('names absent kinds once, re-checks them silently, and says once when one appears', async () => {
    const served = new Set(['pytorchjobs', 'tfjobs', 'statefulsets', 'jobs', 'pods']);
    const api = await apiServer(served);
    const lines: Line[] = [];
    const log = (level: Line['level']) => (obj: object, msg?: string) => lines.push({ level, obj, msg });
    const informers = startInformers(api.kubeConfig, {
      onEvent: () => {},
      logger: { info: log('info'), warn: log('warn'), error: log('error') },
      minRestartDelayMs: 5,
      maxRestartDelayMs: 20,
      maxAbsentRecheckMs: 20,
    });
    try {
      await Promise.race([
        informers.synced,
        sleep(5000).then(() => assert.fail('not synced: an absent kind must not hold the start-up')),
      ]);
      // Several silent re-checks of each absent kind.
      const deadline = Date.now() + 5000;
      while (api.lists.filter((p) => p === 'jobsets').length < 4 && Date.now() < deadline) await sleep(10);
      assert.ok(api.lists.filter((p) => p === 'jobsets').length >= 4, 'absent kinds are re-checked');
      const startup = lines.filter((l) => l.msg?.startsWith('watching'));
      assert.equal(startup.length, 1, 'one start-up line');
      assert.deepEqual(startup[0]?.obj, {
        handled: ['PyTorchJob', 'TFJob', 'StatefulSet', 'Job', 'Pod'],
        absent: ['JobSet', 'TrainJob'],
      });
      assert.match(startup[0]?.msg ?? '', /not installed .*: JobSet, TrainJob$/);
      assert.deepEqual(
        lines.filter((l) => l.level !== 'info'),
        [],
        'no warning for a kind that is simply not installed',
      );

      served.add('jobsets');
      const appeared = Date.now() + 5000;
      while (!lines.some((l) => l.msg === 'JobSet is now served; watching it') && Date.now() < appeared)
        await sleep(10);
      await sleep(100);
      assert.equal(lines.filter((l) => l.msg === 'JobSet is now served; watching it').length, 1);
      assert.equal(lines.filter((l) => l.msg?.startsWith('watching')).length, 1, 'no second start-up line');
    } finally {
      await informers.stop();
      await api.close();
    }
  });

  it('reads a 404 as "not served" and anything else as a failure, in one short line', () => {
    assert.equal(isNotServed({ code: 404 }), true);
    assert.equal(isNotServed({ statusCode: 404 }), true);
    assert.equal(isNotServed({ code: 403 }), false);
    assert.equal(isNotServed(new Error('404')), false);
    const apiException = Object.assign(new Error(`HTTP-Code: 500\nMessage: x\nBody: ${'y'.repeat(600)}`), {
      code: 500,
      body: { message: 'etcdserver: request timed out' },
    });
    assert.equal(briefError(apiException), 'HTTP 500: etcdserver: request timed out');
    assert.equal(briefError(new Error(`first line\n${'z'.repeat(500)}`)), 'first line');
    assert.equal(briefError({ code: 502 }), 'HTTP 502');
    assert.ok(briefError(new Error('w'.repeat(500))).length <= 200);
  });
});
