import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { replayStragglers } from '../../../cli/stragglers-replay.js';
import { loadPaiJob } from '../../support/pai-data.js';

// Kept apart from the policy's unit tests: each replay runs a review a minute over the whole trace (seconds),
// and Stryker runs a test file whole, cheapest first.
describe('straggler detection on real PAI traces through the production path', () => {
  // replayStragglers: the sidecar's own 60 s mean tracker, 15 s scrapes, query_range at 15 s over 2 h, a
  // review every 60 s, decideOnStragglers: exactly what `trainscaler stragglers --csv` runs.
  it('job 1: flags worker 6 within 3 minutes of its onset (t=1,810 s), replaces it once, flags nobody else', () => {
    const result = replayStragglers(loadPaiJob('job_1_norm.csv'));
    const flagged = result.workers.filter((w) => w.episodes.length > 0);
    assert.deepEqual(
      flagged.map((w) => w.worker),
      [6],
    );
    const [episode] = flagged[0]?.episodes ?? [];
    assert.equal(episode?.status, 'straggler');
    assert.ok((episode?.flaggedAt ?? 0) <= 1810 + 180, `flagged at ${episode?.flaggedAt}`);
    assert.ok((episode?.from ?? 0) >= 1810 && (episode?.to ?? 0) <= 1950 + 120, JSON.stringify(episode));
    assert.deepEqual(
      result.replacements.map((r) => r.worker),
      [6],
    );
  });

  it('job 2: no straggler; workers 3-8 persistently slow from their first review to the end, never 0-2 or 9', () => {
    const result = replayStragglers(loadPaiJob('job_2_norm.csv'));
    assert.deepEqual(result.replacements, []);
    const reported = result.workers.filter((w) => w.episodes.length > 0);
    assert.deepEqual(
      reported.map((w) => w.worker),
      [3, 4, 5, 6, 7, 8],
    );
    for (const w of reported) {
      assert.equal(w.episodes.length, 1, `worker ${w.worker}: ${JSON.stringify(w.episodes)}`);
      assert.equal(w.episodes[0]?.status, 'persistently-slow');
      assert.equal(w.episodes[0]?.to, null);
    }
  });
});
