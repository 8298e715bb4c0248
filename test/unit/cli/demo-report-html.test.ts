import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderDemoReportHtml } from '../../../cli/demo-report-html.js';
import { demoResultFixture } from './demo-fixture.js';

function count(text: string, pattern: RegExp): number {
  return text.match(pattern)?.length ?? 0;
}

describe('renderDemoReportHtml', () => {
  const html = renderDemoReportHtml(demoResultFixture());

  it('draws one SVG per plot: workers and throughput for every job', () => {
    assert.equal(count(html, /<svg[\s>]/g), 4);
    assert.equal(count(html, /<\/svg>/g), 4);
    assert.match(html, /<title>alpha-small: workers over time<\/title>/);
    assert.match(html, /<title>beta-oom: throughput over time<\/title>/);
  });

  it('marks each decision on both plots of its job, with the escaped reason as tooltip', () => {
    assert.equal(count(html, /<g class="decision">/g), 2);
    assert.match(
      html,
      /<title>0:10:00 tuning \(alarm\): 1 -&gt; 4 workers: &lt;gain&gt; &amp; &quot;more&quot;<\/title>/,
    );
    assert.doesNotMatch(html, /<gain>/);
  });

  it('is self-contained: no scripts, stylesheets or images fetched from elsewhere', () => {
    assert.doesNotMatch(html, /<script|<link|<img|src=|url\(/i);
    assert.match(html, /^<!DOCTYPE html>/);
    assert.equal(count(html, /<section>/g), count(html, /<\/section>/g));
  });

  it('plots both runs with a line each where the run has points', () => {
    const alphaWorkers = html.slice(
      html.indexOf('alpha-small: workers'),
      html.indexOf('</svg>', html.indexOf('alpha-small: workers')),
    );
    assert.equal(count(alphaWorkers, /<path /g), 2);
    const betaWorkers = html.slice(
      html.indexOf('beta-oom: workers'),
      html.indexOf('</svg>', html.indexOf('beta-oom: workers')),
    );
    assert.equal(count(betaWorkers, /<path /g), 1, 'an empty timeline draws no line');
  });
});
