#!/usr/bin/env node
// The `ratchet` bin of @ratchet/engine. With tsx resolvable and the sources present (this
// repository, or an app that has tsx), it runs the TypeScript entry under tsx in a child Node
// process — signals relayed, exit code passed through — so modules given to `ratchet worker
// <module>` may be TypeScript too. Otherwise it runs the compiled dist/.
import { existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
let tsx = false;
try {
  createRequire(import.meta.url).resolve('tsx');
  tsx = existsSync(source);
} catch {
  tsx = false;
}
if (tsx) {
  const child = spawn(process.execPath, ['--import', 'tsx', source, ...process.argv.slice(2)], { stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 143)));
} else {
  const compiled = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
  process.argv[1] = compiled;
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
}
