// The shell commands README.md and docs/*.md give, found the way test/unit/docs-commands.test.ts states: the
// lines of fenced sh/bash/shell/console blocks, and inline code spans that start with a command word. Shared by
// that test (is each one run or checked somewhere?) and the integration tests that run them as written.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DocCommand {
  /** The document, relative to the repository: README.md or docs/NAME.md. */
  file: string;
  /** 1-based line of the command's first line. */
  line: number;
  /** The command as a reader would type it: continuation lines joined, a trailing `# comment` dropped. */
  text: string;
  /** A fenced block line, or an inline code span. */
  from: 'block' | 'inline';
  /** The marker names (`<!-- NAME:begin -->` ... `<!-- NAME:end -->`) the command lies between. */
  markers: string[];
}

/** Programs whose name starting a code span makes the span a command, not a name or a value. */
export const COMMAND_WORDS = [
  'npm',
  'npx',
  'kubectl',
  'helm',
  'bash',
  'node',
  'python',
  'python3',
  'pip',
  'curl',
  'osls',
  'serverless',
  'aws',
  'docker',
  'podman',
  'kustomize',
  'openssl',
  'tsx',
  'trainscaler',
] as const;

const FENCE_LANGUAGES = new Set(['sh', 'bash', 'shell', 'console']);

/** README.md and every docs/*.md, relative to `root`. */
export function documents(root: string): string[] {
  return [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .sort()
      .map((name) => `docs/${name}`),
  ];
}

/** `cmd # why` -> `cmd`: a `#` after a space outside quotes starts a comment, as in bash. */
export function withoutComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"' || c === '`') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1] ?? ''))) return line.slice(0, i).trimEnd();
  }
  return line.trimEnd();
}

/** The words after any leading `NAME=value` assignments. */
function commandWords(text: string): string[] {
  const words = text.trim().split(/\s+/);
  while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=\S*$/.test(words[0] ?? '')) words.shift();
  return words;
}

/**
 * Whether an inline code span is a command: its first word (after `NAME=value` assignments) is a command word
 * and something follows it; `trainscaler X` only when X is one of the CLI's subcommands (`trainscaler needs
 * Node.js ...` is a message it prints, `trainscaler.io/...` a name).
 */
export function isInlineCommand(span: string, subcommands: readonly string[]): boolean {
  const words = commandWords(span);
  const [first, second] = words;
  if (first === undefined || second === undefined) return false;
  if (!(COMMAND_WORDS as readonly string[]).includes(first)) return false;
  if (first === 'trainscaler') return subcommands.includes(second);
  if (first === 'kubectl' && second === 'trainscaler') return subcommands.includes(words[2] ?? '');
  return true;
}

/** Every command of one document. */
export function commandsOf(file: string, markdown: string, subcommands: readonly string[]): DocCommand[] {
  const commands: DocCommand[] = [];
  const open: string[] = [];
  let fence: string | undefined; // the block's language while inside one
  let pending: { line: number; text: string } | undefined; // a block line ending in `\`
  markdown.split('\n').forEach((raw, index) => {
    const line = index + 1;
    const marker = /<!--\s*([\w-]+):(begin|end)\s*-->/.exec(raw);
    if (marker?.[1]) {
      if (marker[2] === 'begin') open.push(marker[1]);
      else open.splice(open.lastIndexOf(marker[1]), 1);
    }
    const fenceLine = /^\s*```(\S*)/.exec(raw);
    if (fenceLine) {
      fence = fence === undefined ? fenceLine[1] : undefined;
      return;
    }
    const markers = [...open];
    if (fence !== undefined) {
      if (!FENCE_LANGUAGES.has(fence)) return;
      const text = withoutComment(raw.replace(/^\s*\$ /, ''));
      if (pending) {
        pending.text += ` ${text.trim()}`;
      } else if (text.trim() !== '') {
        pending = { line, text: text.trim() };
      }
      if (pending && !pending.text.endsWith('\\')) {
        commands.push({ file, line: pending.line, text: pending.text, from: 'block', markers });
        pending = undefined;
      } else if (pending) pending.text = pending.text.slice(0, -1).trimEnd();
      return;
    }
    for (const span of raw.matchAll(/`([^`]+)`/g)) {
      const text = span[1]?.trim() ?? '';
      if (isInlineCommand(text, subcommands)) commands.push({ file, line, text, from: 'inline', markers });
    }
  });
  return commands;
}

/** The CLI's subcommands, as cli/*.ts register them (`.command('NAME')`). */
export function cliSubcommands(root: string): string[] {
  const names = new Set<string>();
  for (const name of readdirSync(join(root, 'cli')).filter((n) => n.endsWith('.ts')))
    for (const m of readFileSync(join(root, 'cli', name), 'utf8').matchAll(/\.command\('([a-z-]+)'\)/g))
      if (m[1]) names.add(m[1]);
  return [...names].sort();
}

/** Every command of README.md and docs/*.md. */
export function docCommands(root: string): DocCommand[] {
  const subcommands = cliSubcommands(root);
  return documents(root).flatMap((file) =>
    commandsOf(file, readFileSync(join(root, file), 'utf8'), subcommands),
  );
}
