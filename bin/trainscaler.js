#!/usr/bin/env node
// Entry point of the installed CLI; the TypeScript sources are compiled to dist/ by `npm run build`
// (run automatically by `npm install` / `npm ci` through the `prepare` script).
import '../dist/cli/main.js';
