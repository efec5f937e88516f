/**
 * The long chaos run: `pnpm chaos --duration 10m --workers 3 [--rate 4] [--restarts n] [--faults spec] [--json report.json] [--keep]`.
 * Prints progress and the report; exits 1 on any violation.
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { parseDuration } from '@ratchet/sdk';
import { runChaos } from './harness.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '60s' },
    workers: { type: 'string', default: '3' },
    rate: { type: 'string', default: '4' },
    restarts: { type: 'string' },
    faults: { type: 'string' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const t0 = Date.now();
const report = await runChaos({
  durationMs: parseDuration(values.duration as '1s', 'duration'),
  workers: Number(values.workers),
  rate: Number(values.rate),
  ...(values.restarts !== undefined ? { restarts: Number(values.restarts) } : {}),
  keepOnViolation: values.keep === true,
  ...(values.faults !== undefined ? { faults: values.faults } : {}),
  log: (line) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}`),
});
console.log(JSON.stringify(report, null, 2));
if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);
console.log(
  `runs ${report.counts.runs}, worker kills ${report.kills}, Postgres restarts ${report.restarts.fast} fast + ${report.restarts.immediate} immediate, ` +
    `backends terminated ${report.backendsTerminated}, violations ${report.violations.length}`,
);
process.exit(report.violations.length > 0 ? 1 : 0);
