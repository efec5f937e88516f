/**
 * One hot path alone, for profilers: `PROFILE=direct|across RUNS=3000 node --cpu-prof --import tsx bench/profile.ts`
 * (an embedded PostgreSQL under /tmp unless DATABASE_URL is set; with pg_stat_statements
 * preloaded there, `RESET=1` clears its counters once the engines are up). Prints Node's and
 * PostgreSQL's CPU per run (PostgreSQL's from /proc: for a server by URL, give its data
 * directory as `PGDATA`).
 *
 * - direct: `engine.run` of a 5-step workflow, 8 at a time.
 * - across: `client.execute` from an engine without workers, run by a worker of another engine
 *   (start → NOTIFY → claim → settle → NOTIFY → read), 8 at a time.
 */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, embedded } from '@ratchet/engine';
import { postgresCpuMs } from './proc.js';

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
const dataDir = process.env.DATABASE_URL ? process.env.PGDATA : '/tmp/ratchet-profile/data';
const pg0 = await postgresCpuMs(dataDir);
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (next < runs) {
      next += 1;
      await once();
    }
  }),
);
const elapsed = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
const pgMs = (await postgresCpuMs(dataDir)) - pg0;
const perRun = (ms: number) => (ms / runs).toFixed(2);
console.log(
  `${path}: ${runs} runs in ${Math.round(elapsed)} ms (${Math.round((runs / elapsed) * 1000)}/s); per run: ` +
    `Node ${perRun((cpu.user + cpu.system) / 1000)} ms, PostgreSQL ${perRun(pgMs)} ms of CPU`,
);
await worker?.stop();
await caller?.close();
await engine.close();
