// lib/redact-url.ts: no URL credential reaches a log line or an error message.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readRuntimeConfig } from '../../functions/runtime-deps.js';
import { ConfigError } from '../../lib/errors.js';
import { redactUrls } from '../../lib/redact-url.js';

describe('redactUrls', () => {
  it('hides userinfo, whole or user only, up to the last @ before the path', () => {
    assert.equal(redactUrls('http://user:pass@prom:9090/api'), 'http://***@prom:9090/api');
    assert.equal(redactUrls('https://t0ken@prom'), 'https://***@prom');
    assert.equal(redactUrls('http://u:p@ss@prom/x'), 'http://***@prom/x', 'an unencoded @ in the password');
    assert.equal(redactUrls('http://u:p#ss@prom/x'), 'http://***@prom/x', 'an unencoded # in the password');
    assert.equal(redactUrls('http://u:p?ss@prom'), 'http://***@prom', 'an unencoded ? in the password');
    assert.equal(redactUrls('http://user:pass@[::1:9090'), 'http://***@[::1:9090', 'malformed, still hidden');
    assert.equal(redactUrls('HTTP://U:P@prom'), 'HTTP://***@prom');
  });

  it('hides every query value and drops the fragment, keeping the names', () => {
    assert.equal(
      redactUrls('http://prom/x?token=abc&a=1&a=2&flag&e=#frag'),
      'http://prom/x?token=***&a=***&a=***&flag&e=***',
    );
    assert.equal(redactUrls('http://prom/x#a@b?c=d'), 'http://prom/x');
  });

  it('leaves a URL without secrets, and text without URLs, exactly as it was', () => {
    for (const text of [
      'http://prom:9090',
      'https://prom:9090/base/',
      'no url here: a&b=c?d=e',
      'user:pass@host',
    ])
      assert.equal(redactUrls(text), text);
  });

  it('finds URLs inside a message, quoted or not, and only them', () => {
    assert.equal(
      redactUrls(`request to https://u:p@k8s:6443/api/v1/pods?timeout=5s failed; got 'ftp://a:b@h', a&b=c`),
      `request to https://***@k8s:6443/api/v1/pods?timeout=*** failed; got 'ftp://***@h', a&b=c`,
    );
  });
});

describe('PROMETHEUS_URL errors', () => {
  it('name the bad URL without its credentials', () => {
    for (const url of ['ftp://admin:s3cret@prom:9090', 'http://admin:s3cret@[::1']) {
      assert.throws(
        () => readRuntimeConfig({ PROMETHEUS_URL: url }),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.match(error.message, /PROMETHEUS_URL .*'(ftp|http):\/\/\*\*\*@/);
          assert.ok(!error.message.includes('s3cret'), error.message);
          return true;
        },
      );
    }
  });
});
