// How an elastic PyTorchJob's workers are launched, read from the Worker container's command, args and env:
// trainscaler's launcher or plain torchrun, and the rendezvous settings that decide what a rescale pauses the job
// (lib/policies/rescale-cost.ts estimates the pause from them until it is measured on the job). Parsing never
// throws: a command it does not recognise is `unknown` with the reason, and the cost falls back to the default.

/** The launcher the command runs. */
export type LauncherKind = 'trainscaler' | 'torchrun' | 'unknown';

export interface LaunchSettings {
  launcher: LauncherKind;
  /** Why the launcher is `unknown` (the command as far as it was read). */
  unknownWhy?: string;
  /** Seconds; undefined: torchrun's default. From --monitor-interval, else PET_MONITOR_INTERVAL. */
  monitorInterval?: number;
  /** rdzv_conf values in seconds (--rdzv-conf, else elasticPolicy.rdzvConf / PET_RDZV_CONF); undefined: default. */
  lastCallTimeout?: number;
  joinTimeout?: number;
  closeTimeout?: number;
  /** TORCH_DISABLE_SHARE_RDZV_TCP_STORE as the job sets it (container env or an inline assignment), if at all. */
  disableShareStore?: string;
}

export interface LaunchInput {
  command: readonly unknown[];
  args: readonly unknown[];
  /** The container's env values by name (only those given as plain values). */
  env: Readonly<Record<string, string>>;
  /** elasticPolicy.rdzvConf as key -> value (the operator passes it to torchrun as PET_RDZV_CONF). */
  rdzvConf: Readonly<Record<string, string>>;
}

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ash']);
const PYTHON = /^python(\d+(\.\d+)*)?$/;
const TORCHRUN_MODULES = new Set(['torch.distributed.run', 'torch.distributed.launch']);
const LAUNCHER_MODULE = 'trainscaler_hook.launch';
const ASSIGNMENT = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s;
const SHARE_STORE_ENV = 'TORCH_DISABLE_SHARE_RDZV_TCP_STORE';

/**
 * Split a shell line into words, honouring single and double quotes and backslashes; `;`, `&&`, `||`, `|`
 * and newlines end a command. Undefined when a quote is left open. Enough for the launch lines users write
 * (`sh -c "pip install -e . && torchrun --nnodes=1:4 train.py"`), not a shell: no expansion, no redirection.
 */
export function shellCommands(line: string): string[][] | undefined {
  const commands: string[][] = [];
  let words: string[] = [];
  let word: string | undefined;
  let quote: '"' | "'" | undefined;
  const endWord = () => {
    if (word !== undefined) words.push(word);
    word = undefined;
  };
  const endCommand = () => {
    endWord();
    if (words.length > 0) commands.push(words);
    words = [];
  };
  for (let i = 0; i < line.length; i++) {
    const c = line.charAt(i);
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === '\\' && i + 1 < line.length && '"\\$`'.includes(line.charAt(i + 1)))
        word += line.charAt(++i);
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === '\\' && i + 1 < line.length) {
      word = (word ?? '') + line.charAt(++i);
    } else if (c === ';' || c === '|' || c === '&' || c === '\n') {
      endCommand();
    } else if (c === ' ' || c === '\t') {
      endWord();
    } else {
      word = (word ?? '') + c;
    }
  }
  if (quote) return undefined;
  endCommand();
  return commands;
}

const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** A word before the program: `env`, `exec` or an assignment (`A=1 exec torchrun ...`). */
const isPrefix = (word: string) => ['env', 'exec'].includes(baseName(word)) || ASSIGNMENT.test(word);
/** python's options whose value is the next word. */
const PYTHON_OPTIONS_WITH_VALUE = new Set(['-W', '-X']);

/** The launcher of one argv and the arguments after it, or undefined when it runs neither. */
function launcherOf(
  argv: readonly string[],
): { launcher: Exclude<LauncherKind, 'unknown'>; rest: string[] } | undefined {
  let i = 0;
  while (i < argv.length && isPrefix(argv[i] ?? '')) i++;
  const program = baseName(argv[i] ?? '');
  if (program === 'torchrun') return { launcher: 'torchrun', rest: argv.slice(i + 1) };
  if (!PYTHON.test(program)) return undefined;
  for (let j = i + 1; j < argv.length; j++) {
    const arg = argv[j] ?? '';
    const module = arg === '-m' ? argv[j + 1] : arg.startsWith('-m') ? arg.slice(2) : undefined;
    if (module !== undefined) {
      const rest = argv.slice(j + (arg === '-m' ? 2 : 1));
      if (module === LAUNCHER_MODULE) return { launcher: 'trainscaler', rest };
      if (TORCHRUN_MODULES.has(module)) return { launcher: 'torchrun', rest };
      return undefined;
    }
    if (!arg.startsWith('-')) return undefined; // python runs a script, not a module
    if (PYTHON_OPTIONS_WITH_VALUE.has(arg)) j++; // `-W ignore`, `-X importtime`
  }
  return undefined;
}

/** Inline `NAME=value` assignments before the command (`TORCH_...=1 torchrun ...`). */
function inlineEnv(argv: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const word of argv) {
    if (!isPrefix(word)) break;
    const match = ASSIGNMENT.exec(word);
    if (match) env[match[1] ?? ''] = match[2] ?? '';
  }
  return env;
}

/** torchrun's flags that take no value (torch 2.15 torch/distributed/run.py); every other flag takes one. */
const BOOLEAN_FLAGS = new Set([
  'standalone',
  'module',
  'm',
  'no_python',
  'run_path',
  'use_env',
  'virtual_local_rank',
]);
const flagName = (arg: string) => arg.replace(/^-+/, '').replaceAll('-', '_');

/** The value of a torchrun flag in either spelling (`--rdzv-conf`/`--rdzv_conf`), `=` or a space; the last wins. */
function flagValue(rest: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] ?? '';
    // torchrun's own flags come before the script; what follows the script is the script's.
    if (!arg.startsWith('-') || arg === '--') break;
    const eq = arg.indexOf('=');
    const flag = flagName(eq > 0 ? arg.slice(0, eq) : arg);
    let given = eq > 0 ? arg.slice(eq + 1) : undefined;
    if (given === undefined && !BOOLEAN_FLAGS.has(flag)) given = rest[++i];
    if (flag === name) value = given;
  }
  return value;
}

/** `key=value,key=value` as torchrun's --rdzv-conf takes it. */
export function parseRdzvConf(text: string): Record<string, string> {
  const conf: Record<string, string> = {};
  for (const part of text.split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) conf[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return conf;
}

function seconds(text: string | undefined): number | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const value = Number(text);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

/** The launch of the Worker container: which launcher, with which rendezvous settings. Never throws. */
export function launchSettingsOf(input: LaunchInput): LaunchSettings {
  const words = [...input.command, ...input.args];
  if (!words.every((w): w is string => typeof w === 'string'))
    return { launcher: 'unknown', unknownWhy: 'the command has a word that is not a string' };
  if (words.length === 0)
    return { launcher: 'unknown', unknownWhy: "no command or args (the image's entrypoint)" };
  let argvs: string[][] = [words];
  const shellAt = SHELLS.has(baseName(words[0] ?? '')) ? words.findIndex((w) => /^-[a-z]*c$/.test(w)) : -1;
  if (shellAt > 0) {
    const parsed = shellCommands(words[shellAt + 1] ?? '');
    if (!parsed)
      return { launcher: 'unknown', unknownWhy: `a shell line with an open quote: ${quoteShort(words)}` };
    argvs = parsed;
  }
  for (const argv of argvs) {
    const found = launcherOf(argv);
    if (!found) continue;
    const env = { ...input.env, ...inlineEnv(argv) };
    const flagConf = flagValue(found.rest, 'rdzv_conf');
    const envConf = env.PET_RDZV_CONF;
    const conf =
      flagConf !== undefined
        ? parseRdzvConf(flagConf)
        : Object.keys(input.rdzvConf).length > 0
          ? input.rdzvConf
          : parseRdzvConf(envConf ?? '');
    const settings: LaunchSettings = { launcher: found.launcher };
    const monitor = seconds(flagValue(found.rest, 'monitor_interval') ?? env.PET_MONITOR_INTERVAL);
    if (monitor !== undefined) settings.monitorInterval = monitor;
    const lastCall = seconds(conf.last_call_timeout);
    if (lastCall !== undefined) settings.lastCallTimeout = lastCall;
    const join = seconds(conf.join_timeout);
    if (join !== undefined) settings.joinTimeout = join;
    const close = seconds(conf.close_timeout);
    if (close !== undefined) settings.closeTimeout = close;
    const share = env[SHARE_STORE_ENV];
    if (share !== undefined) settings.disableShareStore = share;
    return settings;
  }
  return {
    launcher: 'unknown',
    unknownWhy: `neither torchrun nor trainscaler's launcher: ${quoteShort(words)}`,
  };
}

function quoteShort(words: readonly string[]): string {
  const text = words.join(' ');
  return `\`${text.length > 80 ? `${text.slice(0, 79)}…` : text}\``;
}
