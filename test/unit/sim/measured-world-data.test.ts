// The measured world against the Pollux tables themselves (../shared/data/pollux, skipped without it): at
// every measured point it plays the measurement, and the CLI's loader reads all six applications.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadMeasuredTables } from '../../../cli/simulation-world.js';
import { APP_NAMES } from '../../../lib/sim/app-profiles.js';
import { measuredStep } from '../../../lib/sim/measured-step-times.js';
import { loadPlacements, loadScalability, polluxAvailable, TRACES_DIR } from '../../support/pollux-data.js';

describe('measured world on the Pollux tables', {
  skip: !polluxAvailable() && 'no ../shared/data/pollux',
}, () => {
  const tables = polluxAvailable() ? loadMeasuredTables(TRACES_DIR) : undefined;

  it('plays every measured placement row and scalability row as measured (up to the local batch cap)', () => {
    for (const app of APP_NAMES) {
      const table = tables?.[app];
      assert.ok(table, app);
      for (const row of loadPlacements(app)) {
        if (row.localBatchSize > table.maxLocalBatchSize) continue;
        const step = measuredStep(table, { ...row, perNode: row.perNode });
        assert.equal(step.source, 'placement');
        assert.ok(
          Math.abs(step.stepTime / row.stepTime - 1) < 1e-9,
          `${app} ${row.placement} ${row.localBatchSize}`,
        );
      }
      for (const row of loadScalability(app)) {
        if (row.localBatchSize > table.maxLocalBatchSize) continue;
        const step = measuredStep(table, row);
        assert.ok(
          Math.abs(step.stepTime / row.stepTime - 1) < 1e-9,
          `${app} scal ${row.nodes}/${row.replicas}`,
        );
      }
    }
  });

  it("caps yolov3's per-replica batch at 8, as the Pollux setup does", () => {
    assert.equal(tables?.yolov3.maxLocalBatchSize, 8);
  });
});
