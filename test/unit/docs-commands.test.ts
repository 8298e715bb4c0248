// Every shell command in README.md and docs/*.md is run by a test or by CI, or checked as far as it can be
// here and listed below with why it cannot run. A command the docs give that nothing runs fails here with its
// file and line: a doc command that no longer works must fail a test, not a reader.
//
// What is a command (test/support/doc-commands.ts): every line of a ```sh/bash/shell/console block (`\`
// continuations joined, a trailing `# comment` dropped), and every inline code span whose first word (after
// NAME=value assignments) is one of COMMAND_WORDS with something after it; `trainscaler X` and `kubectl
// trainscaler X` only when X is a CLI subcommand (otherwise it is a message or a name).
// Placeholders (PLACEHOLDERS) become the example they stand for; `[...]` marks an optional part, left out when
// the command is run and its options checked like the others.
//
// Covered, first rule that holds (a command joined by ` && ` is covered when each part is, and a part of a
// command run as written is run):
//   1. run as written: between markers of a block a named test runs (RUN_BLOCKS), or its exact text (after
//      the placeholders) is in a test file that runs it or in .ci/run (RUN_BY);
//   2. `npm ci`, `npm test`, `npm run X [-- ARGS]`: X is a package.json script that CI runs (named in .ci/run,
//      or reached from one through `npm run`), or a named test runs (SCRIPT_RUN_BY), or it is in NOT_RUN with
//      its reason; and every --option in ARGS is one the script's entry file reads;
//   3. the CLI (`trainscaler X`, `kubectl trainscaler X`, `npm run -s trainscaler -- X`, `npx trainscaler`,
//      `node bin/trainscaler.js`): X is a subcommand and every --option is in `trainscaler X --help` (the
//      synopses in the docs; the subcommands are run in test/unit/cli and by the tests of rule 1);
//   4. EXPLICIT: what cannot run here (a real AWS account, a Docker engine, ...), each with its reason and the
//      check that can be made (names against serverless.yml and the manifests, files, versions);
//   5. an inline span naming a command in prose (`helm upgrade`, `kubectl patch`) that is the start of a
//      command covered above.
// Every command must also parse as bash (`bash -n`).
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import {
  cliSubcommands,
  commandsOf,
  type DocCommand,
  docCommands,
  withoutComment,
} from '../support/doc-commands.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  version: string;
  scripts: Record<string, string>;
  bin: Record<string, string>;
};

/** Placeholders of the docs and the example each stands for when the command is run or matched. */
const PLACEHOLDERS: [RegExp, string][] = [
  [/<namespace>/g, 'team-a'],
  [/\bNAMESPACE\/JOB\b/g, 'team-a/bert'],
];

/** Blocks between `<!-- NAME:begin/end -->` markers that a test reads from the doc and runs line by line. */
const RUN_BLOCKS: Record<string, string> = {
  'laptop-walkthrough': 'test/integration/readme-walkthrough.test.ts',
};

/** Files that run the commands whose exact text they hold. */
const RUN_BY = [
  'test/integration/readme-walkthrough.test.ts',
  'test/integration/docs-commands.test.ts',
  'test/integration/deploy/helm-install.test.ts',
  '.ci/run',
];

/** Scripts CI does not reach through `npm run`, run by a named test (the file holds the distinctive text). */
const SCRIPT_RUN_BY: Record<string, { file: string; text: string }> = {
  quickstart: { file: 'test/training/quickstart.test.ts', text: "['run', '--silent', 'quickstart']" },
  trainscaler: { file: 'test/integration/readme-walkthrough.test.ts', text: 'laptop-walkthrough:begin' },
  demo: { file: 'test/integration/docs-commands.test.ts', text: "'npm run demo'" },
  'cluster:up': { file: 'test/integration/docs-commands.test.ts', text: "'npm run cluster:up'" },
  'build:images': { file: 'test/package/images.test.ts', text: "'infra/images/build.sh'" },
};

/** Scripts nothing here runs, and why; their entry file must exist (and `npm run lint` type-checks it). */
const NOT_RUN: Record<string, string> = {
  'bench:model':
    'a benchmark of the model on the Pollux data in ../shared (a minute); its parts are unit-tested',
  'bench:sidecar': 'measures the sidecar against a training process for minutes; figures, not a pass/fail',
  'bench:lambda': 'times cold starts of the bundles; figures, not a pass/fail',
  'bench:rescale':
    'torchrun agents with real PyTorch for tens of minutes; test:training runs one real rescale',
  'bench:fits': 'times model fits over the Pollux data; figures, not a pass/fail',
  'bench:stragglers': 'replays straggler traces for minutes; the detector is unit-tested',
  'bench:mutation': 'reads the StrykerJS report of test:mutation (run centrally, hours)',
  'test:mutation': 'StrykerJS over the listed tests: hours on this machine; run centrally, one run at a time',
  'cluster:down':
    'would stop the control plane the integration tests run on; with-cluster.sh runs the same down.sh after each suite',
  'package:lambda': 'build:lambda and `osls package`, the two steps test:package runs (test/package)',
};

interface Explicit {
  match: RegExp;
  reason: string;
  check: (m: RegExpExecArray) => void;
}

const serverless = () => read('serverless.yml');
const yamlDocs = (path: string) =>
  read(path)
    .split(/^---$/m)
    .map((d) => load(d) as { kind?: string; metadata?: { name?: string; namespace?: string } } | null)
    .filter((d) => d !== null && d !== undefined);
const hasObject = (path: string, kind: string, name: string) =>
  assert.ok(
    yamlDocs(path).some((d) => d?.kind === kind && d.metadata?.name === name),
    `${path} has ${kind} ${name}`,
  );

/** Commands that cannot run here, why, and the check that can be made. */
const EXPLICIT: Explicit[] = [
  {
    match: /^aws ssm put-parameter --name \/(\S+) --type SecureString --value "\$TOKEN"$/,
    reason: 'writes to a real AWS account',
    check: (m) => assert.match(serverless(), new RegExp(`webhookTokenParameter: ${m[1]}\\n`)),
  },
  {
    match: /^aws cloudformation describe-stacks --stack-name (\S+)-prod --query '(.*)'$/,
    reason: 'reads a stack in a real AWS account',
    check: (m) => {
      assert.match(serverless(), new RegExp(`^service: ${m[1]}$`, 'm'));
      const outputs = serverless().slice(serverless().indexOf('\n  Outputs:'));
      for (const name of (m[2] ?? '').matchAll(/OutputKey==`(\w+)`/g))
        assert.match(outputs, new RegExp(`^ {4}${name[1]}:$`, 'm'), `output ${name[1]}`);
    },
  },
  {
    match:
      /^aws eks create-access-entry --cluster-name \S+ --principal-arn ROLE_ARN --kubernetes-groups (\S+)$/,
    reason: 'changes a real EKS cluster',
    check: (m) =>
      assert.match(read('infra/k8s/lambda-access.yaml'), new RegExp(`kind: Group\\s+name: ${m[1]}\\b`)),
  },
  {
    match: /^aws iam create-role --role-name trainscaler-forwarder --assume-role-policy-document '(.*)'$/,
    reason: 'creates an IAM role in a real AWS account',
    check: (m) =>
      assert.equal(
        (JSON.parse(m[1] ?? '') as { Statement: { Principal: { Service: string } }[] }).Statement[0]
          ?.Principal.Service,
        'pods.eks.amazonaws.com',
      ),
  },
  {
    match: /^aws iam attach-role-policy --role-name trainscaler-forwarder --policy-arn FORWARDER_POLICY_ARN$/,
    reason: 'changes an IAM role in a real AWS account',
    check: () => assert.match(serverless(), /^ {4}ForwarderPolicyArn:$/m),
  },
  {
    match:
      /^aws eks create-pod-identity-association --cluster-name \S+ --namespace (\S+) --service-account (\S+) --role-arn \S+$/,
    reason: 'changes a real EKS cluster',
    check: (m) => {
      hasObject('infra/k8s/forwarder/rbac.yaml', 'ServiceAccount', m[2] ?? '');
      assert.equal(
        yamlDocs('infra/k8s/forwarder/rbac.yaml').find((d) => d?.kind === 'ServiceAccount')?.metadata
          ?.namespace,
        m[1],
      );
    },
  },
  {
    match: /^aws cloudwatch get-metric-statistics --namespace AWS\/Events .*Value=(\S+)-prod /,
    reason: 'reads CloudWatch in a real AWS account',
    check: (m) => assert.match(serverless(), new RegExp(`Name: ${m[1]}-\\$\\{sls:stage\\}`)),
  },
  {
    match: /^aws eks get-token$/,
    reason:
      'named in prose: the token the functions compute themselves (lib/cluster/eks-token.ts, unit-tested)',
    check: () => assert.ok(existsSync(join(ROOT, 'lib/cluster/eks-token.ts'))),
  },
  {
    match: /^npx osls deploy --stage prod((?: --param \w+=\S+)+)$/,
    reason:
      'deploys to a real AWS account; test:package runs `osls package` on the same serverless.yml offline',
    check: (m) => {
      for (const param of (m[1] ?? '').matchAll(/--param (\w+)=/g))
        assert.match(serverless(), new RegExp(`^ {4}${param[1]}:`, 'm'), `param ${param[1]}`);
    },
  },
  {
    match: /^npx osls logs --stage prod -f (\w+) --startTime \S+$/,
    reason: 'reads the logs of a deployed function in a real AWS account',
    check: (m) => assert.match(serverless(), new RegExp(`^ {2}${m[1]}:$`, 'm'), `function ${m[1]}`),
  },
  {
    match: /^osls package$/,
    reason: 'run by test:package (test/package/serverless-package.test.ts) into a temporary directory',
    check: () => assert.match(read('test/package/serverless-package.test.ts'), /'osls',\s*'package'/),
  },
  {
    match: /^docker build -f (\S+) -t registry\.example\.com\/trainscaler:(\S+) \. && docker push \S+$/,
    reason: 'needs a Docker engine and a registry; npm run build:images builds the same image without one',
    check: (m) => {
      assert.ok(existsSync(join(ROOT, m[1] ?? '')), `${m[1]} exists`);
      assert.equal(m[2], pkg.version, 'the tag is the package version');
    },
  },
  {
    match: /^\(cd (\S+) && kustomize edit set image trainscaler=registry\.example\.com\/trainscaler:(\S+)\)$/,
    reason: "edits the user's copy of the kustomization for their registry",
    check: (m) => {
      assert.match(read(`${m[1]}/kustomization.yaml`), /images:\n {2}- name: trainscaler\n/);
      assert.equal(m[2], pkg.version);
    },
  },
  {
    match: /^\$EDITOR (\S+)$/,
    reason: 'an edit by hand',
    check: (m) => assert.ok(existsSync(join(ROOT, m[1] ?? '')), `${m[1]} exists`),
  },
  {
    match: /^kubectl apply -k infra\/k8s$/,
    reason:
      "applied as a server-side dry run (the API server admits every object); a real apply would take over the chart's objects",
    check: () =>
      assert.match(
        read('test/integration/deploy/kustomize-apply.test.ts'),
        /'apply', '--dry-run=server', '-k', 'infra\/k8s'/,
      ),
  },
  {
    match: /^kubectl -n trainscaler-system logs deploy\/trainscaler-forwarder \| grep '"forwarded '$/,
    reason:
      'the test cluster runs pods on kwok nodes: no container, no log (test/aws runs the forwarder itself)',
    check: () => {
      hasObject('infra/k8s/forwarder/deployment.yaml', 'Deployment', 'trainscaler-forwarder');
      assert.match(
        read('lib/forwarder/metrics.ts'),
        /`forwarded \$\{/,
        'the summary line starts "forwarded N"',
      );
    },
  },
  {
    match:
      /^kubectl -n trainscaler-system port-forward deploy\/trainscaler-forwarder (\d+) & curl -s localhost:(\d+)\/metrics \| grep (\S+)$/,
    reason: 'the test cluster runs pods on kwok nodes: nothing listens behind the port',
    check: (m) => {
      assert.match(read('infra/k8s/forwarder/deployment.yaml'), new RegExp(`containerPort: ${m[1]}\\b`));
      assert.equal(m[1], m[2]);
      assert.match(read('lib/forwarder/metrics.ts'), new RegExp(`trainscaler_${m[3]}`));
    },
  },
  {
    match: /^kubectl auth can-i$/,
    reason: 'named in prose: the integration tests ask it for every row of the access table',
    check: () => assert.match(read('test/integration/deploy/kustomize-apply.test.ts'), /'auth', 'can-i'/),
  },
  {
    match: /^helm lint --strict charts\/trainscaler$/,
    reason: 'run by the chart unit test',
    check: () => {
      const test = read('test/unit/deploy/helm-chart.test.ts');
      assert.match(test, /helm\(\['lint', '--strict', CHART\]\)/);
      assert.match(test, /const CHART = '(\.\/)?charts\/trainscaler'/);
    },
  },
  {
    match: /^helm template trainscaler charts\/trainscaler --namespace trainscaler-system --include-crds$/,
    reason: 'run by the chart tests (renderChart)',
    check: () =>
      assert.match(
        read('test/support/helm.ts'),
        /\['template', 'trainscaler', chart, '--namespace', namespace, '--include-crds'/,
      ),
  },
  {
    match: /^helm uninstall$/,
    reason:
      "named in prose; on the shared test cluster it would delete the ServiceAccount other tests' kubeconfig uses",
    check: () => {
      // What the docs say of it: the CRDs stay, as Helm never deletes crds/.
      assert.ok(existsSync(join(ROOT, 'charts/trainscaler/crds')));
      assert.doesNotMatch(read('charts/trainscaler/Chart.yaml'), /crds/i);
    },
  },
  {
    match: /^npm install -g$/,
    reason:
      "installs into the machine's global prefix; the walkthrough test puts the package's two bins on PATH as it does",
    check: () => {
      for (const name of ['trainscaler', 'kubectl-trainscaler'])
        assert.ok(existsSync(join(ROOT, pkg.bin[name] ?? '-')), `bin ${name}`);
    },
  },
  {
    match: /^podman load$/,
    reason:
      'no podman here; test:package runs the same archive with crun (runc where crun refuses hybrid cgroups)',
    check: () => assert.match(read('infra/images/build.sh'), /oci\.tar/),
  },
  {
    match: /^pip install \.\/infra\/sidecar\/python$/,
    reason: "installs into the user's Python; test:hook (pytest) runs the package from the source tree",
    check: () => assert.match(read('infra/sidecar/python/pyproject.toml'), /trainscaler/),
  },
  {
    match: /^pip wheel(?: --no-deps infra\/sidecar\/python)?$/,
    reason:
      'test:hook builds the same wheel (test-wheel.sh), from a copy of the directory: a build in place leaves build/ and *.egg-info in the checkout',
    check: () => {
      assert.match(read('infra/sidecar/python/test-wheel.sh'), /-m pip wheel [^\n]*--no-deps/);
      assert.match(read('infra/sidecar/python/test.sh'), /bash \.\/test-wheel\.sh/);
      assert.match(read('package.json'), /"test:hook": "bash infra\/sidecar\/python\/test\.sh/);
    },
  },
  {
    match: /^TORCH_PYTHON=(\S+) npm run bench:rescale$/,
    reason:
      "bench:rescale is not run by CI (NOT_RUN's reason); TORCH_PYTHON picks the interpreter it trains with",
    check: (m) => {
      assert.match(read('infra/local-stack/torch-python.ts'), /env\.TORCH_PYTHON/);
      assert.equal(m[1], '/usr/bin/python3', "Debian's python3, whose torch is 1.13");
    },
  },
  {
    match: /^python3? -m trainscaler_hook\.launch$/,
    reason: 'run inside the elastic example job that test:training trains (named here in prose)',
    check: () => {
      assert.match(read('infra/examples/elastic-trainer/pytorchjob.yaml'), /trainscaler_hook\.launch/);
      assert.match(read('test/training/elastic-resize.test.ts'), /pytorchjob\.yaml/);
    },
  },
];

// --- reading commands ---------------------------------------------------------------------------------

function placeheld(text: string): string {
  return PLACEHOLDERS.reduce((t, [pattern, example]) => t.replace(pattern, example), text);
}

/** Without the optional `[...]` parts (nested brackets included) and the `...` of "and so on". */
function required(text: string): string {
  let out = '';
  let depth = 0;
  for (const c of text) {
    // `[` opens an optional part after a space (or nested in one); `Stacks[0]` is an argument's text.
    if (c === '[' && (depth > 0 || out === '' || /\s$/.test(out))) depth++;
    else if (c === ']' && depth > 0) depth--;
    else if (depth === 0) out += c;
  }
  return out
    .replace(/\s+\.\.\.(?=\s|$)/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The --options a command names, optional ones included. */
function optionsOf(args: string): string[] {
  return [...args.matchAll(/(?:^|[\s[])(--[a-z][a-z0-9-]*)/g)].map((m) => m[1] ?? '');
}

/** Parts of `a && b && c` outside quotes and parentheses. */
function andParts(text: string): string[] {
  const parts: string[] = [];
  let quote: string | undefined;
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (depth === 0 && text.startsWith(' && ', i)) {
      parts.push(text.slice(start, i));
      start = i + 4;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

/** Whether a test file holds the command as a whole string literal, or a script as a whole line; comments not. */
function runsAsWritten(source: string, command: string): boolean {
  const code = source
    .split('\n')
    .filter((l) => !/^\s*(\/\/|\/?\*|#)/.test(l))
    .join('\n');
  return (
    ["'", '"', '`'].some((q) => code.includes(`${q}${command}${q}`)) ||
    code.split('\n').some((l) => l.trim() === command)
  );
}

// --- what CI runs -------------------------------------------------------------------------------------

/** Scripts CI runs: named in .ci/run, and every script reached from those through `npm run X` / `npm test`. */
function ciScripts(): Set<string> {
  const reached = new Set<string>();
  const visit = (body: string) => {
    for (const m of body.matchAll(/\bnpm (?:run(?:-script)? (?:-s |--silent )?([\w:-]+)|(test|ci)\b)/g)) {
      const name = m[1] ?? m[2] ?? '';
      if (reached.has(name)) continue;
      reached.add(name);
      if (pkg.scripts[name]) visit(pkg.scripts[name]);
    }
  };
  visit(read('.ci/run'));
  return reached;
}

/** The file a script runs (its first .ts/.sh path), where its options are read. */
function entryOf(script: string): string | undefined {
  return /(\S+\.(?:ts|sh))\b/.exec(pkg.scripts[script] ?? '')?.[1];
}

// --- the CLI's options ----------------------------------------------------------------------------------

const run = promisify(execFile);
const helpOf = new Map<string, Set<string>>();

async function loadHelp(subcommands: string[]): Promise<void> {
  await Promise.all(
    ['', ...subcommands].map(async (sub) => {
      const { stdout } = await run(
        process.execPath,
        ['--import', 'tsx', 'cli/main.ts', ...(sub ? [sub] : []), '--help'],
        { cwd: ROOT, timeout: 120_000 },
      );
      helpOf.set(sub, new Set(optionsOf(stdout)));
    }),
  );
}

/** The CLI's arguments in a command, or undefined when it is not a CLI command. */
function cliArgs(text: string): string | undefined {
  const m =
    /^(?:[A-Z_]+=\S+ )*(?:npm run (?:-s |--silent )?trainscaler(?: --(?: |$)|$)|kubectl trainscaler(?: |$)|trainscaler(?: |$)|npx trainscaler(?: |$)|node bin\/trainscaler\.js(?: |$))(.*)$/.exec(
      text,
    );
  return m ? (m[1] ?? '') : undefined;
}

// --- coverage -------------------------------------------------------------------------------------------

type Verdict = { covered: true; how: string } | { covered: false; why: string };

function coverage(command: DocCommand, subcommands: string[], ci: Set<string>): Verdict {
  const text = placeheld(command.text);
  const runnable = required(text);
  for (const marker of command.markers) {
    const file = RUN_BLOCKS[marker];
    if (file && read(file).includes(`${marker}:begin`)) return { covered: true, how: `block run by ${file}` };
  }
  for (const file of RUN_BY)
    if (existsSync(join(ROOT, file)) && runsAsWritten(read(file), runnable))
      return { covered: true, how: `run as written by ${file}` };

  const npm = /^npm (?:(ci|test)|run (?:-s |--silent )?([\w:-]+))(?: -- (.*))?$/.exec(runnable);
  if (npm && (npm[1] || npm[2] !== 'trainscaler')) {
    const fixed = npm[1];
    if (fixed)
      return ci.has(fixed)
        ? { covered: true, how: 'run by .ci/run' }
        : { covered: false, why: 'not in .ci/run' };
    const script = npm[2] ?? '';
    if (!pkg.scripts[script]) return { covered: false, why: `package.json has no script ${script}` };
    const by = SCRIPT_RUN_BY[script];
    let how: string;
    if (ci.has(script)) how = 'a script CI runs';
    else if (by && existsSync(join(ROOT, by.file)) && read(by.file).includes(by.text))
      how = `script run by ${by.file}`;
    else if (NOT_RUN[script]) how = `script not run here: ${NOT_RUN[script]}`;
    else return { covered: false, why: `nothing runs the script ${script}` };
    const options = optionsOf(placeheld(command.text).replace(/^.*? -- /, ' '));
    if (options.length > 0 && npm[3] !== undefined) {
      const entry = entryOf(script);
      if (!entry)
        return { covered: false, why: `script ${script} has no entry file to read its options from` };
      const source = read(entry);
      const unknown = options.filter(
        (o) => !source.includes(`'${o}'`) && !new RegExp(`\\b${o.slice(2)}:`).test(source),
      );
      if (unknown.length > 0) return { covered: false, why: `${entry} reads no ${unknown.join(', ')}` };
      how += `; options read by ${entry}`;
    }
    const entry = entryOf(script);
    if (NOT_RUN[script] && entry && !existsSync(join(ROOT, entry)))
      return { covered: false, why: `script ${script}: its entry file ${entry} is missing` };
    return { covered: true, how };
  }

  const args = cliArgs(text);
  if (args !== undefined) {
    const sub = /^\s*([a-z][\w-]*)/.exec(args)?.[1];
    if (sub !== undefined && !subcommands.includes(sub) && sub !== 'help' && !/^[A-Z]+$/.test(sub))
      return { covered: false, why: `trainscaler has no subcommand ${sub}` };
    const known = helpOf.get(sub && subcommands.includes(sub) ? sub : '') ?? new Set<string>();
    const unknown = optionsOf(args).filter((o) => !known.has(o));
    if (unknown.length > 0)
      return { covered: false, why: `trainscaler ${sub ?? ''} --help names no ${unknown.join(', ')}` };
    return { covered: true, how: `the CLI${sub ? ` ${sub}` : ''}: its options exist` };
  }

  for (const explicit of EXPLICIT) {
    const m = explicit.match.exec(text);
    if (!m) continue;
    try {
      explicit.check(m);
    } catch (error) {
      return {
        covered: false,
        why: `not run (${explicit.reason}), and its check fails: ${(error as Error).message}`,
      };
    }
    return { covered: true, how: `not run: ${explicit.reason}` };
  }
  return { covered: false, why: 'nothing runs or checks it' };
}

/** A command, whole or by its ` && ` parts; prose fragments by the covered commands they start. */
function verdicts(commands: DocCommand[], subcommands: string[], ci: Set<string>) {
  const single = (c: DocCommand): Verdict => {
    const whole = coverage(c, subcommands, ci);
    if (whole.covered) return whole;
    const parts = andParts(c.text);
    if (parts.length < 2) return whole;
    const each = parts.map((text) => coverage({ ...c, text }, subcommands, ci));
    const missed = each.filter((v): v is Extract<Verdict, { covered: false }> => !v.covered);
    return missed.length === 0
      ? { covered: true, how: 'each part covered' }
      : { covered: false, why: `${whole.why}; by its parts: ${missed.map((v) => v.why).join('; ')}` };
  };
  const first = commands.map((c) => ({ command: c, verdict: single(c) }));
  const coveredTexts = first.filter((r) => r.verdict.covered).map((r) => placeheld(r.command.text));
  const runTexts = first
    .filter((r) => r.verdict.covered && /^(run as written|block run)/.test(r.verdict.how))
    .map((r) => placeheld(r.command.text));
  return first.map((r) => {
    if (r.verdict.covered) return r;
    const words = placeheld(r.command.text);
    const whole = runTexts.find((t) => andParts(t).length > 1 && andParts(t).includes(words));
    if (whole) return { ...r, verdict: { covered: true, how: `run as part of ${whole}` } as Verdict };
    if (r.command.from !== 'inline') return r;
    const fuller = coveredTexts.find((t) => t !== words && t.startsWith(`${words} `));
    return fuller ? { ...r, verdict: { covered: true, how: `names ${fuller}` } as Verdict } : r;
  });
}

// --- the tests --------------------------------------------------------------------------------------------

describe('every command in README.md and docs/ is run or checked', () => {
  const commands = docCommands(ROOT);
  const subcommands = cliSubcommands(ROOT);
  const ci = ciScripts();
  before(async () => {
    await loadHelp(subcommands);
  });

  it('finds the commands: blocks, inline spans, markers', () => {
    assert.ok(commands.length > 150, `${commands.length} commands`);
    const doc = [
      'Run `npm run demo -- --json` or `trainscaler.io/managed`, `trainscaler needs Node.js`, `kubectl trainscaler status`.',
      '<!-- b:begin -->',
      '```sh',
      'npm ci   # a comment',
      "aws x --q 'a # b' \\",
      '  --more',
      '```',
      '<!-- b:end -->',
      '```',
      'npm not-sh',
      '```',
    ].join('\n');
    assert.deepEqual(
      commandsOf('d.md', doc, ['status', 'run']).map((c) => [c.line, c.text, c.from, c.markers.join()]),
      [
        [1, 'npm run demo -- --json', 'inline', ''],
        [1, 'kubectl trainscaler status', 'inline', ''],
        [4, 'npm ci', 'block', 'b'],
        [5, "aws x --q 'a # b' --more", 'block', 'b'],
      ],
    );
    assert.equal(withoutComment(`echo "a # b" # c`), 'echo "a # b"');
    assert.equal(
      required('trainscaler simulate --w X [--policy a,b[,c]] [--json] ... --save f'),
      'trainscaler simulate --w X --save f',
    );
  });

  it('every command parses as bash', () => {
    const broken = commands
      .map((c) => ({
        c,
        r: spawnSync('bash', ['-n', '-c', required(placeheld(c.text))], { encoding: 'utf8' }),
      }))
      .filter(({ r }) => r.status !== 0)
      .map(({ c, r }) => `${c.file}:${c.line}: ${c.text}\n  ${r.stderr.trim()}`);
    assert.deepEqual(broken, []);
  });

  it('every command is run by a test or CI, or checked and listed with why it cannot run', () => {
    const results = verdicts(commands, subcommands, ci);
    const uncovered = results
      .filter((r) => !r.verdict.covered)
      .map(
        (r) =>
          `${r.command.file}:${r.command.line}: ${r.command.text}\n  ${(r.verdict as { why: string }).why}`,
      );
    assert.deepEqual(uncovered, [], `not run or checked anywhere:\n${uncovered.join('\n')}`);
    if (process.env.TRAINSCALER_DOCS_COMMANDS_REPORT)
      for (const r of results)
        console.log(
          `${r.command.file}:${r.command.line}\t${(r.verdict as { how: string }).how}\t${r.command.text}`,
        );
  });

  it('fails on a command nothing runs, naming its file and line', () => {
    const bogus = commandsOf(
      'docs/x.md',
      'a\n```sh\nkubectl delete namespace everything\nnpm run no-such-script\n```\n`trainscaler status --no-such-flag`',
      subcommands,
    );
    const results = verdicts(bogus, subcommands, ci).map((r) => [r.command.line, r.verdict.covered]);
    assert.deepEqual(results, [
      [3, false],
      [4, false],
      [6, false],
    ]);
  });

  it('every explicit entry, not-run script and run-by file is still used', () => {
    const texts = commands.map((c) => placeheld(c.text));
    for (const explicit of EXPLICIT)
      assert.ok(
        texts.some((t) => explicit.match.test(t) || andParts(t).some((p) => explicit.match.test(p))),
        `${explicit.match} matches a doc command`,
      );
    for (const script of [...Object.keys(NOT_RUN), ...Object.keys(SCRIPT_RUN_BY)]) {
      assert.ok(pkg.scripts[script], `script ${script}`);
      assert.ok(!ci.has(script), `${script} is run by CI: drop it from the list`);
    }
    for (const file of [...RUN_BY, ...Object.values(RUN_BLOCKS)])
      assert.ok(existsSync(join(ROOT, file)), file);
  });
});
