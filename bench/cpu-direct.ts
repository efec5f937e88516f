/** Node and Postgres CPU per run, direct path vs plain pg doing the same round trips: `DATABASE_URL=… npx tsx bench/cpu-direct.ts`. */
import { z } from 'zod';
import pg from 'pg';
import { workflow } from '@ratchet/sdk';
import { createEngine } from '@ratchet/engine';
import { postgresCpuMs } from './proc.js';

const url = process.env.DATABASE_URL!;
const trivial = workflow({ name: 'cpu-trivial', version: '1', input: z.object({ k: z.number().int() }) }, async (ctx, { k }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) last = await ctx.step('s', () => i);
  return last;
});
const engine = await createEngine({ database: url, workflows: [trivial], poolSize: 12 });
await engine.migrate();
const pool = new pg.Pool({ connectionString: url, max: 8 });
await pool.query(`CREATE TABLE IF NOT EXISTS bench_runs (id uuid PRIMARY KEY, state text NOT NULL, output jsonb)`);
await pool.query(`CREATE TABLE IF NOT EXISTS bench_steps (run_id uuid NOT NULL REFERENCES bench_runs(id), n int NOT NULL, result jsonb, state text, PRIMARY KEY (run_id, n))`);
const runs = Number(process.env.RUNS ?? 2000);
async function measure(name: string, once: () => Promise<void>) {
  let next = 0;
  const c0 = process.cpuUsage(); const p0 = await postgresCpuMs(process.env.PGDATA); const t0 = performance.now();
  await Promise.all(Array.from({ length: 8 }, async () => { while (next < runs) { next += 1; await once(); } }));
  const ms = performance.now() - t0; const c = process.cpuUsage(c0); const p1 = await postgresCpuMs(process.env.PGDATA);
  console.log(`${name.padEnd(10)} ${(runs / ms * 1000).toFixed(0)} runs/s  node user ${(c.user / 1000 / runs).toFixed(3)} sys ${(c.system / 1000 / runs).toFixed(3)} ms/run  pg ${((p1 - p0) / runs).toFixed(3)} ms/run`);
}
const baseline = async () => {
  const id = crypto.randomUUID();
  await pool.query({ name: 'b_ins', text: `INSERT INTO bench_runs (id, state) VALUES ($1, 'running')`, values: [id] });
  for (let i = 1; i <= 5; i += 1) await pool.query({ name: 'b_step', text: `INSERT INTO bench_steps (run_id, n, result) VALUES ($1, $2, $3)`, values: [id, i, JSON.stringify(i)] });
  await pool.query({ name: 'b_done', text: `UPDATE bench_runs SET state = 'completed', output = $2 WHERE id = $1`, values: [id, JSON.stringify(5)] });
};
const direct = async () => { await engine.run(trivial, { k: 5 }); };
for (let round = 0; round < 2; round += 1) {
  await measure('baseline', baseline);
  await measure('direct', direct);
}
await pool.end();
await engine.close();
