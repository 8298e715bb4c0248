// What `npm run quickstart` must print, in order (README "Quick start"): checked by its end-to-end test and,
// on a recorded run, by a unit test.
import assert from 'node:assert/strict';

/** The story's lines, each matched after the previous one. */
const STORY: [string, RegExp][] = [
  ['what is compressed and why', /^Timings are compressed so that this takes minutes/m],
  ['the throughput before', /^\[\d+:\d\d\] throughput: \d+ samples\/s \(1 worker, \d+ per worker\)/m],
  ['the alert', /^\[\d+:\d\d\] alert firing: TrainscalerLowThroughputPerWorker\n\s+PyTorchJob quickstart-/m],
  [
    'the decision on the alert, with its reason',
    /^\[\d+:\d\d\] trainscaler decided \(on the alert, policy \w+\): Worker replicas 1 -> 2\n\s+reason: \S.*/m,
  ],
  ['the job at its new size', /^\[\d+:\d\d\] the job runs at its new size: 2 workers training together/m],
  ['the throughput after', /^\[\d+:\d\d\] throughput: \d+ samples\/s \(2 workers, \d+ per worker\)/m],
  ['the status table', /^\s+NAMESPACE\s+NAME\s+KIND\s+MODE\s+WORKERS\s+DESIRED/m],
  ['the runner stopped', /^\[\d+:\d\d\] stopped: trainscaler's runner/m],
  ['Prometheus stopped', /^\[\d+:\d\d\] stopped: Prometheus and Alertmanager/m],
  ['the job stopped', /^\[\d+:\d\d\] stopped: namespace quickstart-\S+ \(the job and its pods\)/m],
  ['the end', /^\[\d+:\d\d\] done$/m],
];

/** Throws naming the first part of the story missing (or out of order). */
export function assertStory(output: string): void {
  let from = 0;
  for (const [what, pattern] of STORY) {
    const match = pattern.exec(output.slice(from));
    assert.ok(match, `the quick start did not print ${what} (after offset ${from}):\n${output}`);
    from += match.index + match[0].length;
  }
}
