import { writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { registerExplainCommand } from './explain.js';
import { registerForwardCommand } from './forward.js';
import { registerHistoryCommand } from './history.js';
import { registerRecommendCommand } from './recommend.js';
import { registerRunCommand } from './run.js';
import { registerSimulateCommand } from './simulate.js';
import { registerStatusCommand } from './status.js';
import { registerStragglersCommand } from './stragglers.js';
import { packageVersion } from './version.js';

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return n;
}

// Run by kubectl as a plugin (kubectl-trainscaler on PATH), the help names the command the user typed.
const asKubectlPlugin = basename(process.argv[1] ?? '').startsWith('kubectl-');

const program = new Command()
  .name(asKubectlPlugin ? 'kubectl trainscaler' : 'trainscaler')
  .description('Autoscaler for distributed deep-learning training jobs on Kubernetes')
  .version(packageVersion())
  .showHelpAfterError();

program
  .command('demo')
  .description(
    'Run the embedded SIMULATED cluster twice (manual configuration vs trainscaler) and compare job completion',
  )
  .option('--json', 'print one JSON object (summary, jobs with decisions and reasons) instead of tables')
  .option('--report <file>', 'also write an HTML page with plots of workers and throughput over time')
  .option('--seed <n>', 'random seed of the simulation', positiveInt, 1)
  .action(async (options: { json?: boolean; report?: string; seed: number }) => {
    const { runDemo } = await import('./demo.js');
    const { renderDemoTables } = await import('./demo-table.js');
    // Redraw one line on a terminal; one line per update when stderr is a file or a pipe (CI logs).
    const progress = (line: string) =>
      process.stderr.write(process.stderr.isTTY ? `\r${line.padEnd(78)}` : `${line}\n`);
    const result = await runDemo({ seed: options.seed, onProgress: progress });
    if (process.stderr.isTTY) process.stderr.write('\n');
    if (options.report) {
      const { renderDemoReportHtml } = await import('./demo-report-html.js');
      await writeFile(options.report, renderDemoReportHtml(result));
      process.stderr.write(`report written to ${options.report}\n`);
    }
    process.stdout.write(options.json ? `${JSON.stringify(result, null, 2)}\n` : renderDemoTables(result));
  });

registerRunCommand(program);
registerSimulateCommand(program);
registerHistoryCommand(program);
registerStragglersCommand(program);
registerForwardCommand(program);
registerExplainCommand(program);
registerStatusCommand(program);
registerRecommendCommand(program);

program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`trainscaler: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
