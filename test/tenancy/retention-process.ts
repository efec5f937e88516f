/**
 * A retention job in its own process, for the crash test: runs `engine.retention.run` on
 * DATABASE_URL for TENANT with BATCH runs per batch, printing "batch <n> <runs so far>" after each
 * batch. RATCHET_FAULTS=retentionBeforeCommit:kill@3 makes it SIGKILL itself with its third batch
 * done but not committed.
 */
import { createEngine } from '@ratchet/engine';
import { faultsFromEnv } from '@ratchet/engine/testing';

const engine = await createEngine({ database: process.env.DATABASE_URL!, poolSize: 2, faults: faultsFromEnv() });
const report = await engine.retention.run({
  olderThan: '30d',
  batchSize: Number(process.env.BATCH ?? 2),
  tenantId: process.env.TENANT!,
  onProgress: (p) => process.stdout.write(`batch ${p.batch} ${p.removed.runs}\n`),
});
process.stdout.write(`done ${report.removed.runs}\n`);
await engine.close();
