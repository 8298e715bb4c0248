#!/usr/bin/env node
// kubectl's plugin entry point: found on PATH as `kubectl-trainscaler` (`npm install -g trainscaler` puts it
// there), so that `kubectl trainscaler status` runs `trainscaler status`, with kubectl's own flags left to kubectl.
import { exitUnlessSupportedNode } from './node-version.js';

exitUnlessSupportedNode(
  'kubectl trainscaler',
  '; install Node 22 on PATH (kubectl runs the plugin with the first `node` it finds)',
);
await import('../dist/cli/main.js');
