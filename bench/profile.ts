/**
 * One hot path alone, for profilers: `PROFILE=direct|across RUNS=3000 node --cpu-prof --import tsx bench/profile.ts`
 * (an embedded PostgreSQL under /tmp unless DATABASE_URL is set; with pg_stat_statements
 * preloaded there, `RESET=1` clears its counters once the engines are up).
 *
 * - direct: `engine.run` of a 5-step workflow, 8 at a time.
 * - across: `client.execute` from an engine without workers, run by a worker of another engine
 *   (start → NOTIFY → claim → settle → NOTIFY → read), 8 at a time.
 */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, embedded } from '@ratchet/engine';

const trivial = workflow({ name: 'profile-trivial', version: '1', input: z.object({ k: z.number().int() }) }, async (ctx, { k }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) last = await ctx.step('s', () => i);
  return last;
});
const path = process.env.PROFILE ?? 'direct';
if (path !== 'direct' && path !== 'across') throw new Error(`PROFILE must be direct or across, not ${path}`);
const database = process.env.DATABASE_URL ?? embedded({ dataDir: '/tmp/ratchet-profile/data' });
const engine = await createEngine({ database, workflows: [trivial], poolSize: 22 });
await engine.migrate();
const caller = path === 'across' ? await createEngine({ database, workflows: [trivial], poolSize: 12 }) : undefined;
const worker = caller ? engine.worker({ concurrency: 8 }) : undefined;
await worker?.start();
if (process.env.RESET) await engine.pool.query('SELECT pg_stat_statements_reset()');

const once = caller ? () => caller.client.execute(trivial, { k: 5 }, { timeout: '60s' }) : () => engine.run(trivial, { k: 5 });
const runs = Number(process.env.RUNS ?? 2000);
let next = 0;
const t0 = performance.now();
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (next < runs) {
      next += 1;
      await once();
    }
  }),
);
console.log(`${path}: ${runs} runs in ${Math.round(performance.now() - t0)} ms`);
await worker?.stop();
await caller?.close();
await engine.close();
