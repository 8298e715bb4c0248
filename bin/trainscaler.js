#!/usr/bin/env node
// Entry point of the installed CLI; the TypeScript sources are compiled to dist/ by `npm run build`
// (run automatically by `npm install` / `npm ci` through the `prepare` script). The Node.js version is
// checked before the CLI is imported: on an older Node its dependencies crash with unrelated errors.
import { exitUnlessSupportedNode } from './node-version.js';

exitUnlessSupportedNode(
  'trainscaler',
  '; run it through npm (npm run trainscaler -- ..., npx trainscaler ...), which uses the Node 22 the project pins, or install Node 22',
);
await import('../dist/cli/main.js');
