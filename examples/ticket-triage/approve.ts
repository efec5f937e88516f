/**
 * `pnpm demo:approve <runId> [--decline] [--by <name>]`: a reviewer's verdict on a triage run
 * waiting for approval, from the command line. Shows the sealed contract the run waits on, then
 * sends the `approval` signal naming its hash — a verdict binds to the exact contract reviewed.
 * Attaches to the demo's embedded PostgreSQL (or starts it), like any other process.
 */
import { parseArgs } from 'node:util';
import { createEngine } from '@ratchet/engine';
import { engineOptions } from './engine.js';

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { decline: { type: 'boolean', default: false }, by: { type: 'string', default: process.env.USER ?? 'reviewer' } },
});
const runId = positionals[0];
if (!runId) {
  console.error('usage: pnpm demo:approve <runId> [--decline] [--by <name>]');
  process.exit(2);
}

const engine = await createEngine(engineOptions);
try {
  const { rows } = await engine.pool.query<{ hash: string; operations: unknown }>(
    `SELECT body_hash AS hash, body->'operations' AS operations FROM ratchet.contracts WHERE task_id = $1 AND status = 'sealed'`,
    [runId],
  );
  const contract = rows[0];
  if (!contract) throw new Error(`run ${runId} has no sealed contract waiting for a verdict`);
  console.log(`contract ${contract.hash.slice(0, 12)}… ${JSON.stringify(contract.operations)}`);
  await engine.client.signal(runId, 'approval', { approve: !values.decline, hash: contract.hash, by: values.by! });
  console.log(`${values.decline ? 'declined' : 'approved'} by ${values.by}`);
} catch (error) {
  console.error(`error: ${(error as Error).message}`);
  process.exitCode = 1;
} finally {
  await engine.close();
}
