// Prints the mutation score of each mutated file from StrykerJS's JSON report (npm run test:mutation first):
//   npm run bench:mutation [-- --survivors] [-- --min 80]
// Score as Stryker defines it: detected (killed, timed out) over detected + undetected (survived, no coverage).
// --survivors lists each undetected mutant (line:column, mutator, replacement) to kill or explain.
// --min N exits 1 when a file scores below N.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

interface Mutant {
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number; column: number } };
}

interface Report {
  files: Record<string, { mutants: Mutant[] }>;
}

const DETECTED = new Set(['Killed', 'Timeout']);
const UNDETECTED = new Set(['Survived', 'NoCoverage']);

const args = process.argv.slice(2);
const showSurvivors = args.includes('--survivors');
const minAt = args.indexOf('--min');
const min = minAt >= 0 ? Number(args[minAt + 1]) : undefined;
const path = resolve('reports/mutation/mutation.json');
const report = JSON.parse(readFileSync(path, 'utf8')) as Report;

let belowMin = false;
const rows: string[] = [];
let allDetected = 0;
let allUndetected = 0;
for (const [file, { mutants }] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
  const detected = mutants.filter((m) => DETECTED.has(m.status)).length;
  const undetected = mutants.filter((m) => UNDETECTED.has(m.status));
  allDetected += detected;
  allUndetected += undetected.length;
  const total = detected + undetected.length;
  const score = total === 0 ? 100 : (100 * detected) / total;
  if (min !== undefined && score < min) belowMin = true;
  rows.push(
    `${file.padEnd(44)} ${score.toFixed(1).padStart(6)}%  killed ${String(detected).padStart(4)}  ` +
      `survived ${String(undetected.filter((m) => m.status === 'Survived').length).padStart(3)}  ` +
      `no coverage ${String(undetected.filter((m) => m.status === 'NoCoverage').length).padStart(3)}`,
  );
  if (showSurvivors) {
    for (const m of undetected.sort((a, b) => a.location.start.line - b.location.start.line)) {
      const where = `${m.location.start.line}:${m.location.start.column}`;
      rows.push(
        `    ${where.padEnd(8)} ${m.status.padEnd(10)} ${m.mutatorName}: ${(m.replacement ?? '').slice(0, 90)}`,
      );
    }
  }
}
const total = allDetected + allUndetected;
console.log(rows.join('\n'));
console.log(
  `${'all files'.padEnd(44)} ${(total === 0 ? 100 : (100 * allDetected) / total).toFixed(1).padStart(6)}%`,
);
if (belowMin) {
  console.log(`below the minimum of ${min}%`);
  process.exitCode = 1;
}
