// CLI for render.ts (used by up-controllers.sh):
//   kubectl kustomize DIR | node --import tsx main.ts --port 17843 --ca ca.crt [--keep-kinds K1,K2]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { renderInstall } from './render.js';

const { values } = parseArgs({
  options: { port: { type: 'string' }, ca: { type: 'string' }, 'keep-kinds': { type: 'string' } },
});
if (!values.ca) throw new Error('--ca <PEM file> is required');
const out = renderInstall(readFileSync(0, 'utf8'), {
  port: Number(values.port),
  caBundle: readFileSync(values.ca).toString('base64'),
  ...(values['keep-kinds'] ? { kinds: values['keep-kinds'].split(',') } : {}),
});
process.stderr.write(
  `[render-install] kept ${out.kept} of ${out.total} objects, pointed ${out.rewritten} webhooks at 127.0.0.1:${values.port}\n`,
);
process.stdout.write(out.yaml);
