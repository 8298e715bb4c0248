// The `trainscaler history` command as cli/main.ts will register it (same error handling), runnable on its
// own so that the tests can spawn the CLI before main.ts carries the registration.
import { Command } from 'commander';
import { registerHistoryCommand } from '../../../cli/history.js';

const program = new Command().name('trainscaler').showHelpAfterError();
registerHistoryCommand(program);
program.parseAsync(process.argv).catch((error: unknown) => {
  process.stderr.write(`trainscaler: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
