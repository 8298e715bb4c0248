// The deployed Lambda entry `alertmanagerWebhook` (functions/lambda.ts, configured from the environment as on
// Lambda) reading its token from SSM Parameter Store. No AWS is reachable here: the SSM API is moto's server
// mode (an AWS API EMULATOR, from PyPI), addressed with the SDK's standard AWS_ENDPOINT_URL_SSM.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { type Moto, skipWithoutMoto, startMoto } from '../../aws/support/moto.js';
import { httpApiEvent } from '../../fixtures/http-api-event.js';
import { alertmanagerWebhook as payload } from '../../fixtures/payloads.js';

const PARAMETER = '/trainscaler/webhook-token';
const TOKEN = 'ssm-webhook-token-9f8e7d6c5b4a';

const skip = skipWithoutMoto;

describe('Lambda alertmanagerWebhook with its token in SSM (moto server EMULATOR)', { skip }, () => {
  let moto: Moto | undefined;
  let dir: string;
  const resolved = JSON.stringify(
    payload([{ namespace: 'team-a', kind: 'PyTorchJob', name: 'toy', status: 'resolved' }]),
  );

  before(async () => {
    moto = await startMoto();
    const endpoint = moto.endpoint;
    // As the function would be configured (serverless.yml), with a kubeconfig instead of EKS so that no
    // network is needed for a notification that asks for nothing (a resolved alert).
    dir = await mkdtemp(join(tmpdir(), 'trainscaler-ssm-'));
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    Object.assign(process.env, {
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'testing',
      AWS_SECRET_ACCESS_KEY: 'testing',
      AWS_ENDPOINT_URL_SSM: endpoint,
      TRAINSCALER_WEBHOOK_TOKEN_PARAMETER: PARAMETER,
      KUBECONFIG: kubeconfig,
      PROMETHEUS_URL: 'http://127.0.0.1:9',
      LOG_LEVEL: 'silent',
    });
    await new SSMClient({}).send(
      new PutParameterCommand({ Name: PARAMETER, Value: TOKEN, Type: 'SecureString', Overwrite: true }),
    );
  });

  after(async () => {
    await moto?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('decrypts the SecureString and admits only its token', async () => {
    const { alertmanagerWebhook } = await import('../../../functions/lambda.js');
    assert.equal((await alertmanagerWebhook(httpApiEvent(resolved))).statusCode, 401);
    assert.equal(
      (await alertmanagerWebhook(httpApiEvent(resolved, { authorization: 'Bearer not-it' }))).statusCode,
      401,
    );
    const ok = await alertmanagerWebhook(httpApiEvent(resolved, { authorization: `Bearer ${TOKEN}` }));
    assert.equal(ok.statusCode, 200, ok.body);
    assert.deepEqual(JSON.parse(ok.body), { status: 200, requestId: 'C3Xk2gZtoAMEVxw=' });
  });
});
